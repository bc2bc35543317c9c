"""Bandwidth, latency and comparison plots (matplotlib, Agg backend: no display needed).

Read at a glance: one colour per series (op, variant, backend, mesh dim) and one line style per
run, so a baseline and its new run are the same colour, solid and dashed; the p10-p90 band only
when one run is shown (overlaid bands hide each other); latency ticks in µs and ms; sizes on a
log-2 axis with human labels. Fitted α–β lines (``commbench model``) are drawn dashed in their
series' colour.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from commbench.results.schema import is_combined, op_label
from commbench.sizes import format_size

RUN_STYLES = ("-", "--", ":", "-.")
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


def _draw(frame, path: str | Path, title: str, value: str, ylabel: str,
          fits: Mapping[str, tuple] | None = None) -> None:
    plt = _pyplot()
    series = _series(frame)
    runs = list(dict.fromkeys(run for run, _ in series))
    labels = list(dict.fromkeys(label for _, label in series))
    colours = {label: f"C{index % 10}" for index, label in enumerate(labels)}
    fig, axis = plt.subplots(figsize=(9, 5.5))
    for (run, label), rows in series.items():
        sizes = [r["size_bytes"] for r in rows]
        style = RUN_STYLES[runs.index(run) % len(RUN_STYLES)]
        name = f"{run}: {label}" if len(runs) > 1 else label
        axis.plot(sizes, [r[value] for r in rows], style, marker="o", markersize=3,
                  color=colours[label], label=name)
        if value == "lat_us_p50" and len(runs) == 1:
            low = [r.get("lat_us_p10") or r["lat_us_p50"] for r in rows]
            high = [r.get("lat_us_p90") or r["lat_us_p50"] for r in rows]
            axis.fill_between(sizes, low, high, color=colours[label], alpha=0.15)
    for label, (sizes, times) in (fits or {}).items():
        axis.plot(sizes, times, "--", linewidth=1.3, color=colours.get(label),
                  label=f"{label}{FIT_SUFFIX}")
    if series:
        _size_axis(axis, [r["size_bytes"] for rows in series.values() for r in rows])
        if value == "lat_us_p50":
            _time_axis(axis)
        axis.legend(fontsize=8)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bandwidth(frame, path: str | Path, title: str) -> None:
    """busbw vs size."""
    _draw(frame, path, f"{title}: bus bandwidth", "busbw_gbps", "bus bandwidth (GB/s, 1e9 B/s)")


def latency(frame, path: str | Path, title: str, fits: Mapping[str, tuple] | None = None,
            ) -> None:
    """Median latency vs size, log-log; the p10-p90 band for a single run; fits dashed."""
    several = "run" in frame and frame["run"].nunique() > 1
    band = "" if several else "; band: p10-p90"
    _draw(frame, path, f"{title}: latency", "lat_us_p50", f"latency (median{band})", fits)


def ratio(frame, path: str | Path, title: str, threshold: float, metric: str = "lat_us_p50",
          ) -> None:
    """compare: new / baseline per size, one line per series, the threshold band shaded and
    each point coloured by its verdict."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(9, 5.5))
    records = [r for r in frame.to_dict("records") if r["size_bytes"]]
    groups: dict[str, list[dict]] = {}
    for record in records:
        label = f"{series_label(record)}: {record.get('candidate', '')}"
        groups.setdefault(label, []).append(record)
    for index, (label, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda r: r["size_bytes"])
        sizes = [r["size_bytes"] for r in rows]
        ratios = [r["ratio"] for r in rows]
        axis.plot(sizes, ratios, "-", color=f"C{index % 10}", alpha=0.6, label=label)
        axis.scatter(sizes, ratios, s=24, zorder=3,
                     c=[VERDICT_COLOURS.get(r["verdict"], "tab:gray") for r in rows])
    axis.axhspan(1 - threshold, 1 + threshold, color="tab:gray", alpha=0.15,
                 label=f"±{threshold:.0%} threshold")
    axis.axhline(1.0, color="black", linewidth=0.8)
    if records:
        _size_axis(axis, [r["size_bytes"] for r in records])
        axis.legend(fontsize=8)
    worse = "slower" if metric.startswith("lat") else "faster"
    axis.set_ylabel(f"new / baseline {metric} (>1: {worse}; points: red slower, green faster, "
                    "orange noisy)")
    axis.set_title(f"{title}: ratio")
    axis.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
