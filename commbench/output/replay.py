"""replay's text and files: the table (per op, then the step's totals), summary.md, the CSV
files and the per-op bar chart of in situ / replayed / model. Data in (the rows of
replay.plan.summarise), text or files out."""

from __future__ import annotations

from pathlib import Path

from commbench.core.sizes import format_size
from commbench.output.markdown import markdown_table
from commbench.output.tables import Column, headers_of, render

# The three figures, as the table, the chart and the docs name them.
FIGURES = (("in_situ_s", "in situ"), ("replayed_s", "replayed"), ("model_s", "model"))
COLOURS = {"in_situ_s": "C0", "replayed_s": "C1", "model_s": "C2"}


def _ms(value) -> str:
    return "-" if value is None else f"{value * 1e3:.3f}"


def _number(value) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.2f}"


def _columns() -> list[Column]:
    return [Column("op", left=True), Column("dtype", left=True), Column("bytes/step"),
            Column("calls/step"), Column("in situ", "ms"), Column("replayed", "ms"),
            Column("model", "ms"), Column("model from", left=True, drop=1)]


def _calls(row: dict) -> str:
    """Calls a step: the number where every replayed step made it, else the fewest-most
    (the mean of an op some steps lack is a figure no step had; the notes say which)."""
    low, high = row.get("calls_min"), row.get("calls_max")
    if low is None or low == high:
        return _number(row["calls"])
    return f"{low}-{high}"


# The step's own time first: the wall (calls in flight together count once). The calls'
# times added count overlapping asynchronous calls (and their queueing) each time: on DDP
# two clean replays of one trace read 66 and 132 ms added while the wall read 24-34 ms.
WALL = "step wall"
ADDED = "calls added"


def _cells(summary) -> list[list[str]]:
    rows = [[r["op"], r["dtype"], _bytes(r["bytes"]), _calls(r), _ms(r["in_situ_s"]),
             _ms(r["replayed_s"]), _ms(r["model_s"]), r["model_source"]] for r in summary.ops]
    step = summary.per_step
    rows.append([WALL, "", "", "", _ms(step["in_situ_span_s"]), _ms(step["replayed_wall_s"]),
                 "", ""])
    rows.append([ADDED, "", "", _number(_whole(sum(r["calls"] or 0 for r in summary.ops))),
                 _ms(step["in_situ_s"]), _ms(step["replayed_s"]), _ms(step["model_s"]), ""])
    return rows


def _whole(value: float) -> float | int:
    return int(round(value)) if abs(value - round(value)) < 1e-9 else value


def _bytes(value) -> str:
    if value is None:
        return "-"
    return f"{format_size(int(value))}B" if value else "0"


def _gaps(head: dict) -> str:
    return "with the recorded compute gaps" if head["gaps"] == "recorded" else "back to back"


def explanation(summary, head: dict) -> list[str]:
    """The lines under the table: what the columns are and how ranks combine."""
    gaps = _gaps(head)
    lines = [
        f"# {summary.steps} replayed step(s) of {head['trace']} ({head['world']} ranks, "
        f"{head['backend']}), {gaps}; per step, mean over the ranks that make each op's calls",
    ]
    if head.get("left_out"):
        lines.append(f"# not replayed: {head['left_out']}")
    return lines + [
        "# in situ: the recording's call times; replayed: issue to completion here; model: "
        f"{head['model']}",
        f"# {WALL}: first issue to last completion, calls in flight together counted once "
        f"(in situ: as recorded), the step's time; {ADDED}: each call's issue to completion "
        "added, overlapping calls and their queueing counted each time",
    ]


def table_lines(summary, head: dict, width: int | None) -> list[str]:
    lines = explanation(summary, head)
    lines += render(_columns(), _cells(summary), width)
    lines += [f"note: {note}" for note in summary.notes]
    return lines


def summary_markdown(summary, head: dict, meta: dict) -> str:
    versions = meta.get("versions", {})
    parts = [f"# replay of {head['trace']}", "",
             f"{summary.steps} replayed step(s), {head['world']} ranks, {head['backend']}, "
             f"calls {_gaps(head)}, torch {versions.get('torch', '?')}, status "
             f"**{meta.get('status', '?')}**; per step, mean over the ranks that make each "
             "op's calls.", "",
             *[line.removeprefix("# ") + "  " for line in explanation(summary, head)[1:]], "",
             markdown_table(headers_of(_columns()), _cells(summary))]
    if meta.get("error"):
        parts += ["", f"> error: {meta['error']}"]
    if summary.notes:
        parts += ["", *[f"- {note}" for note in summary.notes]]
    return "\n".join(parts) + "\n"


def bar_chart(path: Path, summary, title: str):
    """Per op: in situ, replayed and model side by side (ms per step); returns the closed
    figure. An op a figure lacks (no completion times, not priced) has no bar there."""
    from matplotlib.ticker import FuncFormatter

    from commbench.output.plots import _pyplot, _save, time_text

    plt = _pyplot()
    rows = summary.ops
    labels = [f"{r['op']} {r['dtype']}\n{_bytes(r['bytes'])} x {_number(r['calls'])}"
              for r in rows]
    fig, axis = plt.subplots(figsize=(max(5.5, 1.6 * len(rows) + 2.5), 4.8))
    width = 0.8 / len(FIGURES)
    for index, (key, name) in enumerate(FIGURES):
        places = [i + (index - 1) * width for i, r in enumerate(rows) if r[key] is not None]
        values = [r[key] * 1e6 for r in rows if r[key] is not None]
        axis.bar(places, values, width, label=name, color=COLOURS[key])
    axis.set_xticks(range(len(rows)))
    axis.set_xticklabels(labels, fontsize=8)
    axis.yaxis.set_major_formatter(FuncFormatter(time_text))
    axis.set_ylabel("time per step (calls added)")
    axis.set_title(f"{title}: in situ / replayed / model per op")
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    return _save(fig, path)
