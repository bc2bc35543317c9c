"""The report: Markdown and one self-contained HTML page over one or more runs.

The HTML embeds its plots as data URIs and loads nothing from anywhere, so it can be attached
to a ticket or archived as a CI artefact. Every value that comes from a user or a machine (run
names, host names, environment, command lines) is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from commbench.analysis.compare import lookup
from commbench.output import plots
from commbench.output.console import table_groups
from commbench.output.markdown import markdown_table
from commbench.results import Run, rows_frame

ENVIRONMENT = (
    ("status", ("status",)),
    ("world size", ("world_size",)),
    ("nodes", ("nnodes",)),
    ("hosts", ("hosts",)),
    ("launcher", ("launcher",)),
    ("backends", ("backends",)),
    ("commbench", ("versions", "commbench")),
    ("torch", ("versions", "torch")),
    ("NCCL", ("versions", "nccl")),
    ("CUDA", ("versions", "cuda_runtime")),
    ("python", ("versions", "python")),
    ("started", ("start_time",)),
    ("ended", ("end_time",)),
    ("command", ("command_line",)),
    ("error", ("error",)),
)


def _value(meta: dict, keys: tuple[str, ...]) -> str:
    value = lookup(meta, keys)
    if value is None:
        return "-"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def overlay_plots(runs: list[Run], out: Path) -> dict[str, Path]:
    """Bandwidth and latency plots with every run overlaid."""
    import pandas as pd

    frames = [rows_frame(run.rows).assign(run=run.name) for run in runs]
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.assign(series=plots.series_labels(frame))
    paths = {"bandwidth": out / "bandwidth.png", "latency": out / "latency.png"}
    title = runs[0].name if len(runs) == 1 else f"{len(runs)} runs"
    plots.bandwidth(frame, paths["bandwidth"], title)
    plots.latency(frame, paths["latency"], title)
    return paths


def write_report(runs: list[Run], comparisons: list[tuple[str, tuple]], out: Path,
                 ) -> tuple[Path, Path]:
    """Write report.md, report.html and the plots into ``out`` (which exists).

    ``comparisons``: (candidate run name, (headers, rows)) against the first run.
    """
    images = overlay_plots(runs, out)

    md = ["# commbench report", "", "## Environment", ""]
    env_headers = ["", *[run.name for run in runs]]
    env_rows = [[label, *[_value(run.meta, keys) for run in runs]] for label, keys in ENVIRONMENT]
    md += [markdown_table(env_headers, env_rows), ""]
    md += ["## Plots", "", "![bandwidth](bandwidth.png)", "", "![latency](latency.png)", ""]
    for run in runs:
        for title, headers, rows in table_groups(rows_frame(run.rows)):
            md += [f"## {run.name}: {title}", "", markdown_table(headers, rows), ""]
    for name, (headers, rows) in comparisons:
        md += [f"## {name} vs {runs[0].name}", "", markdown_table(headers, rows), ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md))

    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>commbench report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:80em}"
        "table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "img{max-width:100%}</style></head><body>",
        "<h1>commbench report</h1>",
        "<h2>Environment</h2>",
        _html_table(env_headers, env_rows),
        "<h2>Plots</h2>",
    ]
    for label, path in images.items():
        data = base64.b64encode(path.read_bytes()).decode()
        page.append(f'<img alt="{label}" src="data:image/png;base64,{data}">')
    for run in runs:
        for title, headers, rows in table_groups(rows_frame(run.rows)):
            page += [f"<h2>{_e(run.name)}: {_e(title)}</h2>", _html_table(headers, rows)]
    for name, (headers, rows) in comparisons:
        page += [f"<h2>{_e(name)} vs {_e(runs[0].name)}</h2>", _html_table(headers, rows)]
    page.append("</body></html>")
    html_path = out / "report.html"
    html_path.write_text("\n".join(page))
    return md_path, html_path


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
