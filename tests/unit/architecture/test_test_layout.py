"""Unit tests are named after what they test: ``tests/unit/<pkg>/test_<module>.py`` tests
``commbench/<pkg>/<module>.py`` (or the subpackage ``commbench/<pkg>/<module>/``), so a maintainer
changing a module finds its tests by name, and a topic or issue file ("nccl_defects",
"exit_codes") cannot come back. A file that genuinely tests several modules at once is listed
below with its reason; a new file named after a module that exists passes without an entry."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "tests" / "unit"
PACKAGE = ROOT / "commbench"

# Folders that test the repository as a whole, not one package.
NOT_A_PACKAGE = {
    "architecture": "the repository's own rules (imports, citations, sinks, this layout)",
    "docs": "the docs' console output against the commands that print it",
}

# File (relative to tests/unit) -> why it is not named after one module.
CROSS_MODULE = {
    "cli/test_errors.py": "end to end: every command's bad input through the real entry point",
    "cli/test_flags.py": "end to end: the command line to the typed specs, across cli/ modules",
    "collectives/test_registry.py": "every descriptor of the registry (collectives/__init__.py)",
    "results/test_kinds.py": "every command given a run folder of another kind",
    "history/test_split_identity.py": "one feature through ingest, series, store, openmetrics",
    "history/test_torch_free.py": "the whole history package, imported without torch",
}


def module_exists(package: str, name: str) -> bool:
    folder = PACKAGE / package
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def misnamed() -> list[str]:
    """tests/unit files named after no module of their package and not listed above."""
    found = []
    for path in sorted(UNIT.glob("*/test_*.py")):
        folder = path.parent.name
        if folder in NOT_A_PACKAGE:
            continue
        key = f"{folder}/{path.name}"
        if key in CROSS_MODULE:
            continue
        if not module_exists(folder, path.stem.removeprefix("test_")):
            found.append(key)
    return found


def test_every_unit_test_file_is_named_after_a_module_of_its_package():
    assert misnamed() == [], (
        "name each file tests/unit/<pkg>/test_<module>.py after the module it tests (merge into "
        "an existing one), or list it in CROSS_MODULE with the reason it spans modules")


def test_every_test_folder_is_a_package_or_says_why_not():
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    strays = {f for f in folders - set(NOT_A_PACKAGE) if not (PACKAGE / f).is_dir()}
    assert strays == set()


def test_a_topic_file_is_caught(tmp_path, monkeypatch):
    """The check itself: a file named after a topic, not a module, is reported."""
    unit = tmp_path / "unit"
    (unit / "engine").mkdir(parents=True)
    (unit / "engine" / "test_faults.py").write_text("")
    (unit / "engine" / "test_nccl_quirks.py").write_text("")
    monkeypatch.setitem(globals(), "UNIT", unit)
    assert misnamed() == ["engine/test_nccl_quirks.py"]


def test_every_test_file_the_docs_and_code_name_exists():
    """A test file moved or merged leaves no pointer to its old name in docs/ or the code."""
    cited = re.compile(r"tests/unit/[a-z_]+/test_[a-z0-9_]+\.py")
    stale = []
    for root, pattern in (("docs", "*.md"), ("commbench", "*.py"), ("scripts", "*.py")):
        for path in sorted((ROOT / root).rglob(pattern)):
            for name in cited.findall(path.read_text()):
                if not (ROOT / name).is_file():
                    stale.append(f"{path.relative_to(ROOT)}: {name}")
    assert stale == []
