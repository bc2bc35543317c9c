"""Tables for people: the console table in the nccl-tests spirit, from the same records as the
Markdown summary, so what a terminal shows is what a PR gets.
"""

from __future__ import annotations

from commbench.sizes import format_size

HEADERS = ("size", "count", "type", "time us", "algbw GB/s", "busbw GB/s", "#wrong", "p99 us",
           "skew %")


def _title(op: str, pattern) -> str:
    return f"{op} ({pattern})" if isinstance(pattern, str) and pattern else op


def table_groups(frame) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, headers, rows) per op; several backends share a table with a time ratio."""
    groups = []
    backends = list(dict.fromkeys(frame["backend"]))
    several = len(backends) > 1
    patterns = frame["pattern"].fillna("") if "pattern" in frame else [""] * len(frame)
    frame = frame.assign(_pattern=list(patterns))
    for (op, pattern), part in frame.groupby(["op", "_pattern"], sort=False):
        headers = list(HEADERS)
        if several:
            headers[3:3] = ["backend"]
            headers.append(f"time / {backends[0]}")
        headers.append("")
        base = {}
        if several:
            first = part[part["backend"] == backends[0]]
            base = dict(zip(first["size_bytes"], first["lat_us_p50"], strict=False))
        part = part.sort_values(["size_bytes"], kind="stable")
        rows = []
        for record in part.to_dict("records"):
            cells = [
                format_size(int(record["size_bytes"])) if record["size_bytes"] else "-",
                str(int(record["count"])),
                str(record["dtype"]),
                f"{record['lat_us_p50']:.1f}",
                f"{record['algbw_gbps']:.3f}",
                f"{record['busbw_gbps']:.3f}",
                str(int(record["wrong"])),
                f"{record['lat_us_p99']:.1f}",
                f"{record['skew_pct']:.1f}",
            ]
            if several:
                cells[3:3] = [str(record["backend"])]
                reference = base.get(record["size_bytes"])
                ratio = record["lat_us_p50"] / reference if reference else float("nan")
                cells.append(f"{ratio:.2f}x")
            cells.append("unstable" if record.get("unstable") else "")
            rows.append(cells)
        groups.append((_title(op, pattern), headers, rows))
    return groups


def unstable_notes(frame) -> list[str]:
    if "unstable" not in frame:
        return []
    flagged = frame[frame["unstable"].fillna("").astype(bool)]
    return [
        f"{_title(row.op, row.pattern)} {row.backend} "
        f"{format_size(int(row.size_bytes)) if row.size_bytes else '-'}: {row.unstable}"
        for row in flagged.itertuples()
    ]


def make_console():
    """A rich Console; a log or a pipe gets tables wide enough not to truncate columns."""
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 132)


def console_tables(frame):
    """rich Tables, one per op."""
    from rich.table import Table

    tables = []
    for title, headers, rows in table_groups(frame):
        table = Table(title=title, title_justify="left", header_style="bold")
        for index, header in enumerate(headers):
            table.add_column(header, justify="left" if index in (0, 2) else "right")
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables


def table_records(frame, metric: str) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells, shared by the console, Markdown and HTML."""
    unit = "us" if metric.startswith("lat") else "GB/s"
    headers = ["op", "backend", "size", f"baseline {unit}", f"new {unit}", "ratio", "verdict",
               "", "candidate"]
    rows = []
    for record in frame.to_dict("records"):
        op = record["op"] + (f"/{record['pattern']}" if record.get("pattern") else "")
        rows.append([
            op,
            str(record["backend"]),
            format_size(int(record["size_bytes"])) if record["size_bytes"] else "-",
            f"{record['baseline']:.3f}" if unit == "GB/s" else f"{record['baseline']:.1f}",
            f"{record['new']:.3f}" if unit == "GB/s" else f"{record['new']:.1f}",
            f"{record['ratio']:.2f}x",
            record["verdict"],
            record["note"],
            str(record["candidate"]),
        ])
    return headers, rows
