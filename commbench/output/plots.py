"""Bandwidth, latency and comparison plots (matplotlib, Agg backend: no display needed).

Read at a glance: one colour per series (op, variant, backend, mesh dim) and one line style per
run, so a baseline and its new run are the same colour, solid and dashed; the p10-p90 band only
when one run of at most ``MAX_BANDS`` series is shown (more overlaid bands smear into one);
unstable points hollow; latency ticks in µs and ms; sizes on a log-2 axis with human labels;
a legend of more than ``LEGEND_INSIDE`` entries beside the axes, not over the data. Fitted α–β
lines (``commbench model``) are drawn dashed in their series' colour. A run without sizes
(barrier only) gets a latency bar per op and no bandwidth plot: it moves no data. Every plot
function returns its (closed) figure, so a test can look at where its texts are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from commbench.core.sizes import format_size
from commbench.results.schema import is_combined, op_label

RUN_STYLES = ("-", "--", ":", "-.")
MAX_BANDS = 3  # p10-p90 bands drawn for at most this many series
LEGEND_INSIDE = 8  # legend entries that still fit inside the axes
FIT_SUFFIX = " (α–β fit)"
VERDICT_COLOURS = {"slower": "tab:red", "faster": "tab:green", "noisy": "tab:orange",
                   "same": "tab:gray"}


def series_label(record: Mapping, with_dtype: bool = False) -> str:
    """'allreduce gloo', 'p2p/pingpong nccl', 'allgather nccl tp=4' (+ dtype when asked)."""
    label = f"{op_label(record['op'], record.get('pattern'))} {record['backend']}"
    if record.get("dim"):
        label += f" {record['dim']}={record.get('group_size') or record.get('world_size')}"
    if with_dtype:
        label += f" {record.get('dtype', '')}"
    return label


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _size_axis(axis, sizes) -> None:
    axis.set_xscale("log", base=2)
    ticks = sorted({int(s) for s in sizes})
    if len(ticks) > 12:  # keep labels readable: every other power of two or so
        ticks = ticks[:: -(-len(ticks) // 12)]
    axis.set_xticks(ticks)
    axis.set_xticklabels([format_size(t) for t in ticks], rotation=45, ha="right")
    axis.minorticks_off()
    axis.set_xlabel("message size (bytes per rank, largest buffer)")


def time_text(microseconds: float, _position=None) -> str:
    """A latency tick: '50 µs', '2 ms', '1.5 s'."""
    if microseconds >= 1e6:
        return f"{microseconds / 1e6:g} s"
    if microseconds >= 1e3:
        return f"{microseconds / 1e3:g} ms"
    return f"{microseconds:g} µs"


def _time_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_yscale("log")
    axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.yaxis.set_major_formatter(FuncFormatter(time_text))
    axis.yaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))


def _series(frame) -> dict[tuple[str, str], list[dict]]:
    """(run, series label) -> rows sorted by size; per-group rows and size 0 left out."""
    records = [r for r in frame.to_dict("records") if r["size_bytes"] and is_combined(r)]
    with_dtype = len({r.get("dtype") for r in records}) > 1
    labels = [series_label(r, with_dtype) for r in records]
    inplace: dict[str, set] = {}
    for label, record in zip(labels, records, strict=True):
        inplace.setdefault(label, set()).add(record.get("inplace"))
    found: dict[tuple[str, str], list[dict]] = {}
    for label, record in zip(labels, records, strict=True):
        if len(inplace[label]) > 1:
            label += " in place" if record.get("inplace") else " out of place"
        found.setdefault((str(record.get("run", "")), label), []).append(record)
    return {key: sorted(rows, key=lambda r: r["size_bytes"]) for key, rows in found.items()}


def _unstable(record: Mapping) -> bool:
    flag = record.get("unstable")
    return isinstance(flag, str) and bool(flag)


def _points(axis, sizes, values, unstable, colour, style, label) -> None:
    """The series' line, its stable points filled and its unstable ones hollow."""
    axis.plot(sizes, values, style, color=colour, label=label)
    for hollow in (False, True):
        chosen = [(s, v) for s, v, u in zip(sizes, values, unstable, strict=True) if u == hollow]
        if chosen:
            axis.plot(*zip(*chosen, strict=True), "o", markersize=4 if hollow else 3,
                      color=colour, markerfacecolor="white" if hollow else colour,
                      linestyle="none")


def _legend(fig, axis, extra_handles=()) -> None:
    """Inside the axes while it is short; beside them (the figure widened) when it is not."""
    handles, labels = axis.get_legend_handles_labels()
    handles, labels = [*handles, *extra_handles], [*labels, *(h.get_label()
                                                              for h in extra_handles)]
    if len(handles) <= LEGEND_INSIDE:
        axis.legend(handles, labels, fontsize=8)
        return
    columns = 1 + len(handles) // 25
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + 3.2 * columns, max(height, 0.2 * len(handles) / columns + 1))
    axis.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                borderaxespad=0.0, ncol=columns)


def _hollow_key(any_unstable: bool) -> list:
    if not any_unstable:
        return []
    from matplotlib.lines import Line2D

    return [Line2D([], [], marker="o", color="gray", markerfacecolor="white",
                   linestyle="none", label="hollow: unstable")]


def _save(fig, path: str | Path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return fig


def _draw(frame, path: str | Path, title: str, value: str, ylabel: str,
          fits: Mapping[str, tuple] | None = None):
    plt = _pyplot()
    series = _series(frame)
    runs = list(dict.fromkeys(run for run, _ in series))
    labels = list(dict.fromkeys(label for _, label in series))
    colours = {label: f"C{index % 10}" for index, label in enumerate(labels)}
    bands = value == "lat_us_p50" and len(runs) == 1 and len(series) <= MAX_BANDS
    fig, axis = plt.subplots(figsize=(9, 5.5))
    any_unstable = False
    for (run, label), rows in series.items():
        sizes = [r["size_bytes"] for r in rows]
        style = RUN_STYLES[runs.index(run) % len(RUN_STYLES)]
        name = f"{run}: {label}" if len(runs) > 1 else label
        unstable = [_unstable(r) for r in rows]
        any_unstable = any_unstable or any(unstable)
        _points(axis, sizes, [r[value] for r in rows], unstable, colours[label], style, name)
        if bands:
            low = [_known(r.get("lat_us_p10"), r["lat_us_p50"]) for r in rows]
            high = [_known(r.get("lat_us_p90"), r["lat_us_p50"]) for r in rows]
            axis.fill_between(sizes, low, high, color=colours[label], alpha=0.15)
    for label, (sizes, times) in (fits or {}).items():
        axis.plot(sizes, times, "--", linewidth=1.3, color=colours.get(label),
                  label=f"{label}{FIT_SUFFIX}")
    if series:
        _size_axis(axis, [r["size_bytes"] for rows in series.values() for r in rows])
        if value == "lat_us_p50":
            _time_axis(axis)
        _legend(fig, axis, _hollow_key(any_unstable))
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def _known(value, default: float) -> float:
    """A band edge the row has (an import may not: NaN), else the median."""
    return default if value is None or value != value else value


def has_sizes(frame) -> bool:
    """Whether a bandwidth or size-axis plot has anything to draw (barrier rows have none)."""
    return bool(len(frame)) and bool((frame["size_bytes"] > 0).any())


def bandwidth(frame, path: str | Path, title: str):
    """busbw vs size."""
    return _draw(frame, path, f"{title}: bus bandwidth", "busbw_gbps",
                 "bus bandwidth (GB/s, 1e9 B/s)")


def latency(frame, path: str | Path, title: str, fits: Mapping[str, tuple] | None = None,
            ):
    """Median latency vs size, log-log; the p10-p90 band for a single run; fits dashed. A
    frame without sizes (barrier) gets one bar per op and run instead."""
    if not has_sizes(frame):
        return _latency_bars(frame, path, title)
    several = "run" in frame and frame["run"].nunique() > 1
    band = "" if several or len(_series(frame)) > MAX_BANDS else "; band: p10-p90"
    return _draw(frame, path, f"{title}: latency", "lat_us_p50", f"latency (median{band})",
                 fits)


def _latency_bars(frame, path: str | Path, title: str):
    """Ops without sizes: the median latency per op (and run), p10-p90 as the error bar."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    records = [r for r in frame.to_dict("records") if is_combined(r)]
    several = "run" in frame and frame["run"].nunique() > 1
    names = [(f"{r['run']}: " if several else "") + series_label(r) for r in records]
    medians = [r["lat_us_p50"] for r in records]
    low = [m - _known(r.get("lat_us_p10"), m) for m, r in zip(medians, records, strict=True)]
    high = [_known(r.get("lat_us_p90"), m) - m for m, r in zip(medians, records, strict=True)]
    fig, axis = plt.subplots(figsize=(max(4.5, 1.2 * len(records) + 2), 4.5))
    colours = ["white" if _unstable(r) else "C0" for r in records]
    axis.bar(range(len(records)), medians, yerr=[low, high], capsize=4, color=colours,
             edgecolor="C0")
    axis.set_xticks(range(len(records)))
    axis.set_xticklabels(names, rotation=20 if len(records) > 3 else 0, ha="right"
                         if len(records) > 3 else "center")
    axis.yaxis.set_major_formatter(FuncFormatter(time_text))
    axis.set_ylabel("latency (median; bar: p10-p90)")
    unstable = " (hollow: unstable)" if any(_unstable(r) for r in records) else ""
    axis.set_title(f"{title}: latency{unstable}")
    axis.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def ratio(frame, path: str | Path, title: str, threshold: float, metric: str = "lat_us_p50",
          ):
    """compare: new / baseline per size on a log axis (a 13x point does not flatten the
    ±threshold band), one line per series, the band shaded, each point coloured by its
    verdict (hollow where a side is unstable)."""
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, axis = plt.subplots(figsize=(9, 5.5))
    records = [r for r in frame.to_dict("records") if r["size_bytes"] and r["ratio"] > 0]
    groups: dict[str, list[dict]] = {}
    for record in records:
        label = f"{series_label(record)}: {record.get('candidate', '')}"
        groups.setdefault(label, []).append(record)
    for index, (label, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda r: r["size_bytes"])
        sizes = [r["size_bytes"] for r in rows]
        ratios = [r["ratio"] for r in rows]
        axis.plot(sizes, ratios, "-", color=f"C{index % 10}", alpha=0.6, label=label)
        verdicts = [VERDICT_COLOURS.get(r["verdict"], "tab:gray") for r in rows]
        hollow = [r.get("note") == "unstable" for r in rows]
        axis.scatter(sizes, ratios, s=26, zorder=3, linewidths=1.2, edgecolors=verdicts,
                     facecolors=["white" if h else c for h, c in zip(hollow, verdicts,
                                                                     strict=True)])
    axis.axhspan(1 / (1 + threshold), 1 + threshold, color="tab:gray", alpha=0.15,
                 label=f"±{threshold:.0%} threshold")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_yscale("log")
    ratios = [r["ratio"] for r in records]
    low, high = min([*ratios, 1 / (1 + threshold)]), max([*ratios, 1 + threshold])
    axis.set_ylim(low / 1.15, high * 1.15)  # the band and every point, with a margin
    axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 7.0)))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    axis.yaxis.set_minor_formatter(NullFormatter())
    if records:
        _size_axis(axis, [r["size_bytes"] for r in records])
        key = [Line2D([], [], marker="o", linestyle="none", color=colour, label=verdict)
               for verdict, colour in VERDICT_COLOURS.items()]
        if any(r.get("note") == "unstable" for r in records):
            key += _hollow_key(True)
        _legend(fig, axis, key)
    worse = "slower" if metric.startswith("lat") else "faster"
    axis.set_ylabel(f"new / baseline {metric} (>1: {worse})")
    axis.set_title(f"{title}: ratio")
    axis.grid(True, which="both", alpha=0.3)
    return _save(fig, path)
