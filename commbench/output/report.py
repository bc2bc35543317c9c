"""The report: Markdown and one self-contained HTML page over one or more runs.

The HTML embeds its plots as data URIs and loads nothing from anywhere, so it can be attached
to a ticket or archived as a CI artefact. It opens with the verdicts against the first run,
coloured; every value that comes from a user or a machine (run names, host names,
environment, command lines) is HTML-escaped. A locate run (docs/commands/locate.md) has no rows: its
section is the suspects table, what did not reproduce, and its two heatmaps.
"""

from __future__ import annotations

import base64
import html
import shutil
from pathlib import Path

from commbench.output import plots
from commbench.output.console import table_groups
from commbench.output.locate import (
    COMPARE_HEADERS,
    SUSPECT_HEADERS,
    compare_cells,
    compare_summary,
    suspect_cells,
)
from commbench.output.markdown import markdown_table
from commbench.output.tables import headers_of
from commbench.results import Run, meta_value, rows_frame

ENVIRONMENT = (
    ("status", ("status",)),
    ("world size", ("world_size",)),
    ("nodes", ("nnodes",)),
    ("hosts", ("hosts",)),
    ("GPU", ("gpus",)),
    ("launcher", ("launcher",)),
    ("backends", ("backends",)),
    ("commbench", ("versions", "commbench")),
    ("torch", ("versions", "torch")),
    ("NCCL", ("versions", "nccl")),
    ("CUDA", ("versions", "cuda_runtime")),
    ("python", ("versions", "python")),
    ("source", ("source",)),
    ("started", ("start_time",)),
    ("ended", ("end_time",)),
    ("command", ("command_line",)),
    ("error", ("error",)),
)
VERDICT_CSS = {"slower": "#f8d0d0", "faster": "#d4f0d4", "noisy": "#fbeccb"}
CHANGE_CSS = {"still bad": "slower", "new": "slower", "not measured": "noisy",
              "repaired": "faster"}  # a locate change, coloured as a verdict


def _value(meta: dict, keys: tuple[str, ...]) -> str:
    value = meta_value(meta, keys)
    if value is None:
        return "-"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def environment_rows(runs: list[Run]) -> list[list[str]]:
    """The environment table: the fixed items, then every NCCL_* variable any run had set."""
    rows = [[label, *[_value(run.meta, keys) for run in runs]] for label, keys in ENVIRONMENT]
    names = sorted({name for run in runs for name in (run.meta.get("env") or {})
                    if name.startswith("NCCL_")})
    rows += [[name, *[(run.meta.get("env") or {}).get(name, "-") for run in runs]]
             for name in names]
    return rows


def overlay_plots(runs: list[Run], out: Path, comparison=None, threshold: float = 0.05,
                  metric: str = "lat_us_p50") -> dict[str, Path]:
    """Bandwidth and latency plots with every run overlaid; with a comparison, its ratios."""
    import pandas as pd

    from commbench.output.files import plot_title

    frames = [rows_frame(run.rows).assign(run=plot_title(run)) for run in runs]
    frame = pd.concat(frames, ignore_index=True)
    paths: dict[str, Path] = {}
    title = plot_title(runs[0]) if len(runs) == 1 else f"{len(runs)} runs"
    if plots.has_sizes(frame):  # barrier-only runs move no data: no bandwidth axes
        paths["bandwidth"] = out / "bandwidth.png"
        plots.bandwidth(frame, paths["bandwidth"], title)
    paths["latency"] = out / "latency.png"
    plots.latency(frame, paths["latency"], title)
    if comparison is not None and len(comparison):
        paths["ratio"] = out / "ratio.png"
        plots.ratio(comparison, paths["ratio"], title, threshold, metric)
    return paths


LOCATE_HEATMAPS = (("busbw", "heatmap_busbw.png"), ("latency", "heatmap_lat.png"))


def locate_summary(run: Run) -> str:
    """A locate run in one line: its fleet and what it found."""
    meta = run.meta
    found = meta.get("entities") or [{}]
    bad = [s for s in meta.get("suspects") or [] if s.get("verdict") != "transient"]
    named = ", ".join(f"{s['verdict']} {s['entity']}" for s in bad) or _no_suspect(meta)
    transient = len(meta.get("transient") or [])
    return (f"{run.name}: locate over {len(meta.get('entities') or [])} "
            f"{found[0].get('kind', '?')} entities, status {meta.get('status', '?')}: {named}"
            + (f"; {transient} transient (did not reproduce)" if transient else ""))


def _no_suspect(meta: dict) -> str:
    """What a run without suspects found, in its own words: a run that measured nothing has
    no verdict, one that stopped early speaks only for the pairs it measured."""
    if meta.get("status") == "failed":
        return "nothing measured, no verdict"
    if meta.get("status") == "partial":
        return "no suspect among the pairs measured before it stopped"
    if meta.get("slow"):  # beyond the noise, under the line: never "no suspect"
        return (f"no bad entity or link; {len(meta['slow'])} slow: "
                + ", ".join(s["entity"] for s in meta["slow"]))
    return "no confirmed suspect" if meta.get("transient") else "no suspect"


def _locate_heatmaps(run: Run, out: Path) -> dict[str, Path]:
    """The run's heatmaps, copied beside report.md (which links them by name)."""
    images = {}
    for label, name in LOCATE_HEATMAPS:
        source = run.path / name
        if source.is_file():
            images[label] = out / f"{run.name}-{name}"
            shutil.copyfile(source, images[label])
    return images


def _locate_sections(located: list[Run], out: Path) -> tuple[list[str], list[str]]:
    """Markdown and HTML of each locate run: suspects table, transient ones, heatmaps."""
    md: list[str] = []
    page: list[str] = []
    for run in located:
        meta = run.meta
        suspects = [s for s in meta.get("suspects") or [] if s.get("verdict") != "transient"]
        transient = meta.get("transient") or []
        images = _locate_heatmaps(run, out)
        md += [f"## {run.name}: locate", "", locate_summary(run), ""]
        page += [f"<h2>{_e(run.name)}: locate</h2>", f"<p>{_e(locate_summary(run))}</p>"]
        if suspects:
            cells = suspect_cells(suspects)
            md += ["### Suspects", "", markdown_table(SUSPECT_HEADERS, cells), ""]
            page += ["<h3>Suspects</h3>", _html_table(SUSPECT_HEADERS, cells)]
        else:
            words = _no_suspect(meta)
            md += [f"**{words[0].upper()}{words[1:]}.**", ""]
            page.append(f"<p><b>{_e(words[0].upper() + words[1:])}.</b></p>")
        if transient:
            md += ["Did not reproduce (transient):", ""]
            md += [f"- {s['evidence']}" for s in transient] + [""]
            page.append("<p>Did not reproduce (transient):</p><ul>" + "".join(
                f"<li>{_e(s['evidence'])}</li>" for s in transient) + "</ul>")
        md += [f"![{run.name} {label}]({path.name})" for label, path in images.items()] + [""]
        for label, path in images.items():
            data = base64.b64encode(path.read_bytes()).decode()
            page.append(f'<img alt="{_e(run.name)} {label}" src="data:image/png;base64,{data}">')
    return md, page


def write_report(runs: list[Run], comparisons: list[tuple[str, list, list]], summaries:
                 list[str], out: Path, comparison_frame=None,
                 located: list[Run] | None = None,
                 located_rows: list[dict] | None = None) -> tuple[Path, Path]:
    """Write report.md, report.html and the plots into ``out`` (which exists).

    ``comparisons``: (candidate name, columns, rows) of each run against the first;
    ``summaries``: one line per comparison (verdict counts and gaps); ``located``: locate
    runs (no rows: their suspects and heatmaps); ``located_rows``: two locate runs compared
    per entity and link (compare.locate), shown before their sections.
    """
    located = located or []
    images = overlay_plots(runs, out, comparison_frame) if runs else {}
    summaries = summaries + [locate_summary(run) for run in located]
    names = [run.name for run in located]
    if located_rows is not None:
        summaries.append(compare_summary(located_rows, names))
        cells = compare_cells(located_rows)
        title = f"{names[1]} vs {names[0]}: locate, per entity and link"
        locate_md = [f"## {title}", "", markdown_table(COMPARE_HEADERS, cells), ""]
        locate_html = [f"<h2>{_e(title)}</h2>",
                       _html_table(COMPARE_HEADERS, cells, lambda row: _change_css(row[-1]))]
    else:
        locate_md, locate_html = [], []
    env_headers = ["", *[run.name for run in (*runs, *located)]]
    env_rows = environment_rows([*runs, *located])
    sections_md, sections_html = _locate_sections(located, out)
    locate_md += sections_md
    locate_html += sections_html

    md = ["# commbench report", ""]
    md += [f"- {line}" for line in summaries] + ([""] if summaries else [])
    md += ["## Environment", "", markdown_table(env_headers, env_rows), ""]
    if images:
        md += ["## Plots", ""] + [f"![{label}]({path.name})" for label, path in images.items()]
        md.append("")
    md += locate_md
    for name, columns, rows in comparisons:
        md += [f"## {name} vs {runs[0].name}", "",
               markdown_table(headers_of(columns), rows), ""]
    for run in runs:
        for title, headers, rows in table_groups(rows_frame(run.rows)):
            md += [f"## {run.name}: {title}", "", markdown_table(headers, rows), ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md))

    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>commbench report</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:90em}"
        "table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
        "td:first-child{text-align:left}"
        + "".join(f"tr.{verdict}{{background:{colour}}}"
                  for verdict, colour in VERDICT_CSS.items())
        + "img{max-width:100%}</style></head><body>",
        "<h1>commbench report</h1>",
    ]
    if summaries:
        page.append("<ul>" + "".join(f"<li>{_e(line)}</li>" for line in summaries) + "</ul>")
    for name, columns, rows in comparisons:
        verdict = [c.name for c in columns].index("verdict")
        page += [f"<h2>{_e(name)} vs {_e(runs[0].name)}</h2>",
                 _html_table(headers_of(columns), rows, lambda row, v=verdict: row[v])]
    page += ["<h2>Environment</h2>", _html_table(env_headers, env_rows)]
    page += ["<h2>Plots</h2>"] if images else []
    for label, path in images.items():
        data = base64.b64encode(path.read_bytes()).decode()
        page.append(f'<img alt="{label}" src="data:image/png;base64,{data}">')
    for run in runs:
        for title, headers, rows in table_groups(rows_frame(run.rows)):
            page += [f"<h2>{_e(run.name)}: {_e(title)}</h2>", _html_table(headers, rows)]
    page += locate_html
    page.append("</body></html>")
    html_path = out / "report.html"
    html_path.write_text("\n".join(page))
    return md_path, html_path


def _change_css(change: str) -> str:
    return CHANGE_CSS.get(change, "")


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _html_table(headers: list[str], rows: list[list[str]], row_class=None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        (f'<tr class="{_e(row_class(row))}">' if row_class else "<tr>")
        + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
