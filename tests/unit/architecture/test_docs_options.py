"""Every command page's option table is what the CLI declares (scripts/docs_options.py writes
it from the click command ``main`` runs): an option added, removed or reworded in the code
without the page rewritten fails here, and so does a command no page lists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def docs_options():
    spec = importlib.util.spec_from_file_location("docs_options",
                                                  ROOT / "scripts" / "docs_options.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def differing(module, commands=None) -> tuple[list[str], list[str]]:
    wanted, homeless = module.pages(commands)
    return sorted(p.name for p, text in wanted.items() if p.read_text() != text), homeless


def test_every_page_lists_what_help_declares(docs_options):
    stale, homeless = differing(docs_options)
    assert homeless == [], f"commands with no page: {homeless}"
    assert stale == [], f"run python scripts/docs_options.py: {stale} differ from --help"


def test_every_command_page_has_an_options_section(docs_options):
    for page in sorted((ROOT / "docs" / "commands").glob("*.md")):
        text = page.read_text()
        assert "\n## Options\n" in text and "<!-- options: " in text, page.name


def _param(command, flag: str):
    return next(p for p in command.params if flag in getattr(p, "opts", ()))


def test_a_reworded_removed_or_new_option_or_command_is_caught(docs_options):
    """Faults planted in the CLI (fresh click objects, nothing on disk changes): each makes
    the comparison name the page, or the command with no page."""
    commands = docs_options.leaves()
    _param(commands["allreduce"], "--min-time").help = "Seconds of timed work per size, reworded."
    assert differing(docs_options, commands)[0] == ["collectives.md"]

    commands = docs_options.leaves()
    doctor = commands["doctor"]
    doctor.params.remove(_param(doctor, "--json"))
    assert differing(docs_options, commands)[0] == ["doctor.md"]

    commands = docs_options.leaves()
    _param(commands["history show"], "--last").default = 11  # help shows [default: 11]
    assert differing(docs_options, commands)[0] == ["history.md"]

    commands = {**docs_options.leaves(), "stragglers-x": commands["doctor"]}
    assert differing(docs_options, commands)[1] == ["stragglers-x"]


def test_a_block_naming_a_command_the_cli_lacks_is_refused(docs_options):
    text = "## Options\n\n<!-- options: no-such-command -->\n<!-- /options -->\n"
    with pytest.raises(SystemExit, match="no command no-such-command"):
        docs_options.render(text, docs_options.leaves(), "x.md")


def test_a_page_without_a_block_gets_one_in_its_options_section(docs_options):
    commands = docs_options.leaves()
    page = "# doctor\n\nIntro.\n\n## Options\n\nHand-written.\n\n## Example\n\nx\n"
    written = docs_options.insert(page, ["doctor"], commands)
    assert written.index("Hand-written.") < written.index("<!-- options: doctor -->") \
        < written.index("## Example")
    assert "| `--json` | One JSON object on stdout. |" in written
    fresh = docs_options.insert("# x\n\nIntro.\n\n## Example\n", ["doctor"], commands)
    assert fresh.index("## Options") < fresh.index("## Example")
