"""The code cites what a maintainer can open: every ``docs/<page>.md`` (and ``#anchor``) named in
a comment or docstring of commbench/, bench/, scripts/ or tests/ is a page of this manual, and
the anchor one of its headings (as mkdocs' toc makes anchors). A page renamed or a heading
reworded then fails here, not in a reader's browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CITED = re.compile(r"docs/((?:[a-z0-9_-]+/)*[a-z0-9_-]+\.md)(?:#([a-z0-9_-]+))?")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def citations(roots=("commbench", "bench", "scripts", "tests")) -> list[tuple[str, str, str]]:
    """(where, page, anchor) for every docs/ citation in the Python sources."""
    found = []
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for page, anchor in CITED.findall(line):
                    found.append((f"{path.relative_to(ROOT)}:{number}", page, anchor))
    return found


def anchors(page: Path) -> set[str]:
    from markdown.extensions.toc import slugify

    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no '#' lines of examples
    return {slugify(m.group(1).replace("`", ""), "-")
            for m in map(HEADING.match, text.splitlines()) if m}


def broken(found) -> list[str]:
    bad = []
    for where, page, anchor in found:
        path = ROOT / "docs" / page
        if not path.is_file():
            bad.append(f"{where}: docs/{page} does not exist")
        elif anchor and anchor not in anchors(path):
            bad.append(f"{where}: docs/{page} has no heading #{anchor}")
    return bad


def test_every_cited_page_and_heading_exists():
    found = citations()
    assert len(found) >= 30  # the scan reads the citations (about 40 today)
    assert broken(found) == []


@pytest.mark.parametrize(("cited", "why"), [
    (("x.py:1", "reference/results-layout.md", "csv-column"), "has no heading"),
    (("x.py:1", "reference/result-layout.md", ""), "does not exist"),
])
def test_a_wrong_page_or_heading_is_caught(cited, why):
    """A heading misspelt, a page renamed: each is reported, naming where it was cited."""
    assert [line for line in broken([cited]) if why in line and line.startswith("x.py:1")]
