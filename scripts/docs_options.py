"""Write the option tables of docs/commands from the CLI itself, so a page cannot drift from
``--help``.

Every command the CLI registers (``commbench.cli.click_command()``, subcommands of a group such
as ``history add`` included) gets its options listed in a page of docs/commands, between
markers::

    <!-- options: allreduce, allgather -->
    | option | meaning | commands |
    ...
    <!-- /options -->

Each row is what ``--help`` prints for the option (click's own help record: the flags, the
placeholder, the help text and its ``[default: ...]``), so the table says exactly what
``commbench CMD --help`` says. A block may name several commands (collectives.md: the eight
collectives); a row then names the commands that take it, unless all do.

A command no block names gets one in ``docs/commands/<its first word>.md``: at the end of the
page's ``## Options`` section, or in a new one before the page's second section. A command
with no page is reported (exit 1). ``--check`` writes nothing and exits 1 when a page would
change: ``tests/unit/architecture/test_docs_options.py`` runs the same comparison.

    python scripts/docs_options.py          # rewrite the tables
    python scripts/docs_options.py --check  # exit 1 where a page differs from the CLI
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "commands"
BLOCK = re.compile(r"<!-- options: (?P<names>[^>]*?) -->\n(?P<body>.*?)<!-- /options -->",
                   re.S)
INTRO = ("Every option, as `--help` prints it (written from the CLI by "
         "`scripts/docs_options.py`):")


def leaves(command=None, prefix: str = "") -> dict[str, object]:
    """Every command a user can run, by its full name (``history add``), in the CLI's order."""
    if command is None:
        from commbench.cli import click_command

        command = click_command()
    found: dict[str, object] = {}
    for name, sub in getattr(command, "commands", {}).items():
        if getattr(sub, "hidden", False):
            continue
        full = f"{prefix}{name}"
        if hasattr(sub, "commands"):  # a group (typer's own click: no isinstance)
            found.update(leaves(sub, f"{full} "))
        else:
            found[full] = sub
    return found


def rows(command, name: str) -> list[tuple[str, str]]:
    """(flags, help) for each argument and option, as ``commbench NAME --help`` shows them."""
    ctx = command.context_class(command, info_name=f"commbench {name}")
    found = []
    for param in command.get_params(ctx):
        if param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record:
            found.append((" ".join(record[0].split()), " ".join(record[1].split())))
    return found


def _cell(text: str) -> str:
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
            .replace("<", "&lt;").replace(">", "&gt;"))


def table(names: list[str], commands: dict[str, object]) -> str:
    """The Markdown table of the options of ``names`` (one command, or several side by side)."""
    per = {name: rows(commands[name], name) for name in names}
    order: list[tuple[str, str]] = []
    takers: dict[tuple[str, str], list[str]] = {}
    for name in names:
        for row in per[name]:
            if row not in takers:
                order.append(row)
                takers[row] = []
            takers[row].append(name)
    several = len(names) > 1
    lines = ["| option | meaning |" + (" commands |" if several else ""),
             "|---|---|" + ("---|" if several else "")]
    for row in order:
        flags, meaning = row
        cells = [f"`{flags}`", _cell(meaning) or "-"]
        if several:
            cells.append("all" if len(takers[row]) == len(names) else
                         ", ".join(f"`{n}`" for n in takers[row]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def block(names: list[str], commands: dict[str, object]) -> str:
    return f"<!-- options: {', '.join(names)} -->\n{table(names, commands)}<!-- /options -->"


def render(text: str, commands: dict[str, object], page: str) -> tuple[str, list[str]]:
    """``text`` with every block rewritten from the CLI, and the names it covers; a block that
    names a command the CLI lacks raises (a renamed command must not leave a stale table)."""
    covered: list[str] = []

    def rewrite(match: re.Match) -> str:
        names = [n.strip() for n in match["names"].split(",") if n.strip()]
        unknown = [n for n in names if n not in commands]
        if unknown:
            raise SystemExit(f"{page}: the CLI has no command {', '.join(unknown)}")
        covered.extend(names)
        return block(names, commands)

    return BLOCK.sub(rewrite, text), covered


def insert(text: str, names: list[str], commands: dict[str, object]) -> str:
    """A block for ``names`` in a page that has none: at the end of its Options section, or in
    a new Options section before the page's second heading (after its introduction)."""
    new = f"{INTRO}\n\n{block(names, commands)}\n"
    lines = text.split("\n")
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    options = next((i for i in headings if lines[i].strip() == "## Options"), None)
    if options is not None:
        end = next((i for i in headings if i > options), len(lines))
        while end > options + 1 and not lines[end - 1].strip():
            end -= 1
        return "\n".join([*lines[:end], "", new.rstrip("\n"), "", *lines[end:]]).rstrip() + "\n"
    at = headings[0] if headings else len(lines)
    section = ["## Options", "", new.rstrip("\n"), ""]
    return "\n".join([*lines[:at], *section, *lines[at:]]).rstrip() + "\n"


def pages(commands: dict[str, object] | None = None) -> tuple[dict[Path, str], list[str]]:
    """Every page of docs/commands as it should read, and the commands no page can hold."""
    commands = leaves() if commands is None else commands
    wanted: dict[Path, str] = {}
    covered: set[str] = set()
    for path in sorted(PAGES.glob("*.md")):
        text, names = render(path.read_text(), commands, path.name)
        wanted[path] = text
        covered.update(names)
    homeless = []
    missing: dict[Path, list[str]] = {}
    for name in commands:
        if name in covered:
            continue
        path = PAGES / f"{name.split()[0]}.md"
        if path in wanted:
            missing.setdefault(path, []).append(name)
        else:
            homeless.append(name)
    for path, names in missing.items():
        wanted[path] = insert(wanted[path], names, commands)
    return wanted, homeless


def main(argv: list[str]) -> int:
    check = "--check" in argv
    wanted, homeless = pages()
    stale = [path for path, text in wanted.items() if path.read_text() != text]
    for path in stale:
        if check:
            print(f"{path.relative_to(ROOT)}: its options differ from the CLI's", file=sys.stderr)
        else:
            path.write_text(wanted[path])
            print(f"wrote {path.relative_to(ROOT)}")
    for name in homeless:
        print(f"commbench {name}: no page docs/commands/{name.split()[0]}.md and no "
              "'<!-- options: ... -->' block names it", file=sys.stderr)
    return 1 if homeless or (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
