"""The compare table: its columns and cells, shared by the console, the Markdown a PR gets
(--markdown) and the report's HTML, so each shows the same cells. Kept apart from the sweep
table (output.console) because the two tables change for different reasons: a new run column
never touches the comparison, a new verdict never touches the sweep.
"""

from __future__ import annotations

from commbench.output.console import given, group_text, size_text
from commbench.output.tables import Column
from commbench.results.schema import op_label


def compare_columns(metric: str) -> list[Column]:
    """On a narrow terminal the decoration goes first (the candidate's name, the backend, the
    baseline's interval), then the new run's interval; what a verdict rests on (ratio,
    verdict, the unstable mark, the delta) stays."""
    unit = "us" if metric.startswith("lat") else "GB/s"
    return [
        Column("op", width=9, left=True),
        Column("backend", width=7, drop=5, left=True),
        Column("size", width=5),
        Column("baseline", unit),
        Column("95% CI", "us", drop=4),
        Column("new", unit),
        Column("95% CI", "us", drop=3),
        Column("ratio", width=5),
        Column("delta", "us", drop=1),
        Column("verdict", width=7, left=True),
        Column("note", left=True),  # 'unstable': the reason a verdict is noisy
        Column("candidate", drop=6, left=True),
    ]


def table_records(frame, metric: str) -> tuple[list[Column], list[list[str]]]:
    """Columns and formatted cells of a comparison, shared by the console, Markdown and HTML."""
    digits = 3 if metric == "busbw_gbps" else 1
    rows = []
    for record in frame.to_dict("records"):
        op = op_label(record["op"], record.get("pattern"))
        if record.get("dim"):
            op += f" [{record['dim']}]"
        rows.append([
            op,
            str(record["backend"]),
            size_text(record["size_bytes"]),
            f"{record['baseline']:.{digits}f}",
            _interval(record["ci_lo_base"], record["ci_hi_base"]),
            f"{record['new']:.{digits}f}",
            _interval(record["ci_lo_new"], record["ci_hi_new"]),
            f"{record['ratio']:.2f}x",
            f"{record['delta_us']:+.1f}",
            record["verdict"],
            record["note"],
            str(record["candidate"]),
        ])
    columns = compare_columns(metric)
    if "group" in frame and frame["group"].notna().any():
        # --per-group runs: a row per group and the combined one ('all'), which without the
        # column look like one row repeated.
        at = [c.name for c in columns].index("size") + 1
        columns.insert(at, Column("group", width=5))  # essential here
        rows = [[*row[:at], group_text(record), *row[at:]]
                for row, record in zip(rows, frame.to_dict("records"), strict=True)]
    return columns, rows


def _interval(lo, hi) -> str:
    """'12.1-13.4', or '-' where a row has no interval: an import's single printed average
    (stored as lo = hi, the point itself), or none at all."""
    if not (given(lo) and given(hi)) or lo == hi:
        return "-"
    return f"{lo:.1f}-{hi:.1f}"

