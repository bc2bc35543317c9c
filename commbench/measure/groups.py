"""Which group of a mesh dimension is slow: the groups ran the same op at the same time, so a
group whose time stands out is a slow link, GPU or node (what nccl-tests' split communicators
are used to find)."""

from __future__ import annotations

import statistics

from commbench.results.schema import is_combined, op_label

SLOW_RATIO = 1.5  # a group this many times the median group's time is named


def slow_groups(rows: list[dict], ratio: float = SLOW_RATIO) -> list[str]:
    """One sentence per slow group, from --per-group rows.

    Per size, each group's median is divided by the median group's (the lower middle one, so
    that with two groups the slower is measured against the faster); a group is slow when its
    ratio, taken as the median over the sizes, reaches ``ratio``.
    """
    series: dict[tuple, dict[int, dict[int, dict]]] = {}
    for row in rows:
        if is_combined(row) or not row.get("dim"):
            continue
        group = row["group"]
        key = (row["op"], row.get("pattern") or "", row["backend"], row.get("mesh") or "",
               row["dim"])
        series.setdefault(key, {}).setdefault(int(group), {})[row["size_bytes"]] = row
    found = []
    for (op, pattern, backend, mesh, dim), groups in series.items():
        if len(groups) < 2:
            continue
        sizes = set.intersection(*(set(by_size) for by_size in groups.values()))
        ratios: dict[int, list[float]] = {g: [] for g in groups}
        for size in sizes:
            times = {g: groups[g][size]["lat_us_p50"] for g in groups}
            middle = statistics.median_low(times.values())
            for g, value in times.items():
                if middle > 0:
                    ratios[g].append(value / middle)
        for g, values in sorted(ratios.items()):
            if values and statistics.median(values) >= ratio:
                sample = next(iter(groups[g].values()))
                name = op_label(op, pattern)
                found.append(
                    f"{name} {backend}, dim {dim} of {mesh}: group {g} (ranks "
                    f"{sample.get('group_ranks', '?')} on {sample.get('group_hosts', '?')}) "
                    f"takes {statistics.median(values):.1f}x the median group's time "
                    f"(median over {len(values)} sizes): a slow link or node?")
    return found
