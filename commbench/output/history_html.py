"""history.html: one self-contained page over the whole store.

Like report.html it loads nothing from anywhere (the trend PNGs are embedded as data URIs, the
style is inline), so it can be published as a CI artefact or opened from a mail. It opens with
the change points found, then one trend per series, then the latest runs with their labels.
Every text that came from a run (names, hosts, commits, clusters) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

VERDICT_CSS = {"regression": "#f8d0d0", "improvement": "#d4f0d4"}
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #eee; }
td.text { text-align: left; }
section.series { display: inline-block; vertical-align: top; margin: 0 1em 1em 0; }
section.series img { width: 720px; max-width: 100%; border: 1px solid #ddd; }
p.note { color: #555; }
"""


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    verdict_column: int | None = None  # a column whose value colours its row


@dataclass(frozen=True)
class TrendSection:
    title: str
    png: Path
    note: str = ""


def _table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    body = []
    for row in table.rows:
        colour = ""
        if table.verdict_column is not None:
            colour = VERDICT_CSS.get(str(row[table.verdict_column]), "")
        style = f' style="background:{colour}"' if colour else ""
        cells = "".join(
            f'<td class="text">{html.escape(str(c))}</td>' if not _numeric(c)
            else f"<td>{html.escape(str(c))}</td>" for c in row)
        body.append(f"<tr{style}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _numeric(cell) -> bool:
    text = str(cell).rstrip("x%")
    try:
        float(text)
    except ValueError:
        return False
    return True


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="trend" src="data:image/png;base64,{data}">'


def write_history_html(path: Path, title: str, summary: Sequence[str], changes: Table,
                       trends: Sequence[TrendSection], latest: Table) -> Path:
    """Write the page; returns its path."""
    parts = [f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts += [f'<p class="note">{html.escape(line)}</p>' for line in summary]
    parts.append("<h2>Change points</h2>")
    parts.append(_table(changes) if changes.rows else
                 '<p class="note">No change beyond the threshold in any series.</p>')
    parts.append("<h2>Trends</h2>")
    for trend in trends:
        note = f'<p class="note">{html.escape(trend.note)}</p>' if trend.note else ""
        parts.append(f'<section class="series"><h3>{html.escape(trend.title)}</h3>'
                     f"{_image(trend.png)}{note}</section>")
    parts.append("<h2>Latest runs</h2>")
    parts.append(_table(latest))
    parts.append("</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n")
    return path
