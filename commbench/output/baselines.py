"""Rows measured beside a baseline of the same launch (ps beside allreduce over its workers),
side by side with the ratio of their times: one table for the console and summary.md alike.

A row names its baseline in the ``beside`` field (an op label, 'allreduce'); the baseline
is the row of that label with the same backend, size and workers. Nothing here knows an op.
"reduced" is the rows' ``reduced_gbps``: gradient bytes reduced per second over all workers
(an async step is not one shared step, so there it is not just W / time).
"""

from __future__ import annotations

from commbench.output.tables import Column
from commbench.results.schema import op_label

COLUMNS = [
    Column("size", "B", width=7),
    Column("backend", width=7, drop=2, left=True),
    Column("time", "us", width=9),
    Column("baseline", "us", width=9),
    Column("ratio", "time", width=7),
    Column("busbw", "GB/s", width=7, drop=1),
    Column("baseline", "busbw", width=8, drop=1),
    # Gradient bytes reduced per second over all workers (the rows' reduced_gbps).
    Column("reduced", "GB/s", width=7, drop=1),
    Column("baseline", "reduced", width=8, drop=1),
]


def _key(record: dict) -> tuple:
    return (record.get("backend"), record.get("size_bytes"), record.get("workers"))


def baseline_ratio(time_us: float, baseline_us: float) -> float | None:
    """A row's time over its baseline's: above 1 the row is slower than the baseline."""
    return time_us / baseline_us if baseline_us else None


def _rate(value) -> str:
    """A GB/s cell; '-' where the row has none (0, or a row written before the field)."""
    return f"{float(value):.3f}" if value and value == value else "-"


def side_by_side(records: list[dict]) -> list[tuple[str, list[list[str]]]]:
    """(title, rows of COLUMNS' cells) per measured op that has a baseline in ``records``."""
    from commbench.output.console import size_text

    labels = {(op_label(r["op"], r.get("pattern")), *_key(r)): r for r in records}
    tables: dict[str, list[list[str]]] = {}
    for record in records:
        baseline = record.get("beside") or ""
        base = labels.get((baseline, *_key(record))) if baseline else None
        if base is None:
            continue
        ratio = baseline_ratio(float(record["lat_us_p50"]), float(base["lat_us_p50"]))
        label = op_label(record["op"], record.get("pattern"))
        title = (f"{label} beside {baseline} over the same {int(record['workers'])} workers "
                 f"({int(record.get('servers') or 0)} server(s); ratio = time / {baseline}'s)")
        tables.setdefault(title, []).append([
            size_text(record["size_bytes"]), str(record["backend"]),
            f"{record['lat_us_p50']:.1f}", f"{base['lat_us_p50']:.1f}",
            f"{ratio:.2f}x" if ratio is not None else "-",
            f"{record['busbw_gbps']:.3f}", f"{base['busbw_gbps']:.3f}",
            _rate(record.get("reduced_gbps")), _rate(base.get("reduced_gbps"))])
    return list(tables.items())


# What an asynchronous run did besides its time (docs/commands/ps.md#example): steps per second over
# the workers, the time a pull waited for its shard's version, the largest lag a push was accepted
# at (against --staleness; unbounded reads "none") and the pushes the bound turned away.
ASYNC_COLUMNS = [
    Column("size", "B", width=7),
    Column("backend", width=7, drop=2, left=True),
    Column("steps", "per s", width=8),
    Column("pull", "wait us", width=8),
    Column("staleness", "max", width=9),
    Column("bound", width=6),
    Column("rejected", "pushes", width=8),
]


def async_figures(records: list[dict]) -> list[tuple[str, list[list[str]]]]:
    """(title, rows of ASYNC_COLUMNS' cells) per op whose rows carry asynchronous figures."""
    from commbench.output.console import size_text

    def number(name: str, default: float = 0.0) -> float:
        value = record.get(name, default)  # a frame's row lacks nothing but holds NaN
        return default if value is None or value != value else float(value)

    tables: dict[str, list[list[str]]] = {}
    for record in records:
        if number("steps_per_s") <= 0:
            continue
        bound = int(number("staleness_bound", -1))
        title = (f"{op_label(record['op'], record.get('pattern'))}: asynchronous figures "
                 f"({int(number('workers'))} workers)")
        tables.setdefault(title, []).append([
            size_text(record["size_bytes"]), str(record["backend"]),
            f"{number('steps_per_s'):.1f}", f"{number('pull_wait_us'):.1f}",
            str(int(number("max_staleness"))), "none" if bound < 0 else str(bound),
            str(int(number("rejected_pushes")))])
    return list(tables.items())


def side_by_side_lines(records: list[dict], width: int | None = None) -> list[str]:
    """The console's form: a title line and an aligned table per op with a baseline, then the
    asynchronous figures (they used to be in results.jsonl only)."""
    from commbench.output.tables import render

    lines: list[str] = []
    for title, rows in side_by_side(records):
        lines += ["", f"# {title}", *render(COLUMNS, rows, width)]
    for title, rows in async_figures(records):
        lines += ["", f"# {title}", *render(ASYNC_COLUMNS, rows, width)]
    return lines
