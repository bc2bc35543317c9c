"""Bandwidth and latency plots (matplotlib, Agg backend: no display needed).

One series per op x backend (and per run when several runs are overlaid). The x axis is log-2
with human size labels; latency is log-log with the p10-p90 band shaded.
"""

from __future__ import annotations

from pathlib import Path

from commbench.sizes import format_size


def series_labels(frame):
    """'allreduce gloo', 'p2p/bidir nccl', plus the run name when several runs are shown."""
    labels = frame["op"].astype(str)
    if "pattern" in frame:
        pattern = frame["pattern"].fillna("").astype(str)
        labels = labels.where(pattern == "", labels + "/" + pattern)
    labels = labels + " " + frame["backend"].astype(str)
    if "run" in frame and frame["run"].nunique() > 1:
        labels = frame["run"].astype(str) + ": " + labels
    return labels


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _size_axis(axis, sizes) -> None:
    axis.set_xscale("log", base=2)
    ticks = sorted(set(int(s) for s in sizes))
    if len(ticks) > 12:  # keep labels readable: every other power of two or so
        step = -(-len(ticks) // 12)
        ticks = ticks[::step]
    axis.set_xticks(ticks)
    axis.set_xticklabels([format_size(t) for t in ticks], rotation=45, ha="right")
    axis.minorticks_off()
    axis.set_xlabel("message size (bytes per rank, largest buffer)")


def bandwidth(frame, path: str | Path, title: str) -> None:
    """busbw vs size."""
    plt = _pyplot()
    data = frame[frame["size_bytes"] > 0]
    fig, axis = plt.subplots(figsize=(9, 5.5))
    for label, group in data.groupby("series", sort=False):
        group = group.sort_values("size_bytes")
        axis.plot(group["size_bytes"], group["busbw_gbps"], marker="o", markersize=3, label=label)
    if not data.empty:
        _size_axis(axis, data["size_bytes"])
    axis.set_ylabel("bus bandwidth (GB/s, 1e9 B/s)")
    axis.set_title(f"{title}: bus bandwidth")
    axis.grid(True, alpha=0.3)
    if not data.empty:
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency(frame, path: str | Path, title: str) -> None:
    """Median latency vs size, log-log, with the p10-p90 band."""
    plt = _pyplot()
    data = frame[frame["size_bytes"] > 0]
    fig, axis = plt.subplots(figsize=(9, 5.5))
    for label, group in data.groupby("series", sort=False):
        group = group.sort_values("size_bytes")
        (line,) = axis.plot(
            group["size_bytes"], group["lat_us_p50"], marker="o", markersize=3, label=label
        )
        axis.fill_between(
            group["size_bytes"],
            group["lat_us_p10"],
            group["lat_us_p90"],
            color=line.get_color(),
            alpha=0.2,
        )
    if not data.empty:
        _size_axis(axis, data["size_bytes"])
        axis.set_yscale("log")
        axis.legend(fontsize=8)
    axis.set_ylabel("latency (µs, median; band: p10-p90)")
    axis.set_title(f"{title}: latency")
    axis.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
