"""stragglers' renderers: the table, the one-line answer's neighbours, summary.md and the
rank x step lateness heatmap (``lateness.png``). Data in (the analysis' JSON object), text
and files out."""

from __future__ import annotations

from pathlib import Path

MAX_LABELS = 64  # beyond, ticks would overlap: every n-th rank is labelled


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def table_lines(doc: dict, source: str) -> list[str]:
    """The console report: a header, one row per rank (every rank up to 32, else the named
    ones and the 8 latest), the verdict lines and the rule."""
    ranks = doc["per_rank"]
    noise = doc["noise"]
    by_hosts = ", ".join(f"{hosts or 'one host'}: {clock}"
                         for hosts, clock in doc["clock_by_hosts"].items())
    lines = [f"# stragglers: {source}",
             f"# {doc['ranks']} ranks, {doc['calls']} matched calls over {doc['steps']} "
             f"step(s), clock: {doc['clock']}"
             + (f" ({by_hosts})" if len(doc["clock_by_hosts"]) > 1 else ""),
             f"# noise: base {_ms(noise['base_s'])} ms, sigma {_ms(noise['sigma_s'])} ms, "
             f"step floor {_ms(noise['step_floor_s'])} ms", ""]
    shown = ranks
    if len(ranks) > 32:
        latest = sorted(ranks, key=lambda r: -r["lateness_p50_s"])[:8]
        shown = sorted({id(r): r for r in [*latest, *(r for r in ranks if r["verdict"] != "ok")]}
                       .values(), key=lambda r: r["rank"])
    header = (f"{'rank':>5}  {'host':<12} {'verdict':<10} {'last %':>7} {'late p50 ms':>12} "
              f"{'late p95 ms':>12} {'caused ms/step':>15}  steps")
    lines.append(header)
    for r in shown:
        steps = r.get("steps")
        span = f"{steps[0]}-{steps[1]}" if steps and r["verdict"] == "transient" else ""
        lines.append(f"{r['rank']:>5}  {(r['host'] or '-')[:12]:<12} {r['verdict']:<10} "
                     f"{r['last_share'] * 100:>7.1f} {_ms(r['lateness_p50_s']):>12} "
                     f"{_ms(r['lateness_p95_s']):>12} {_ms(r['caused_s_per_step']):>15}  {span}")
    if len(shown) < len(ranks):
        lines.append(f"  ... {len(ranks) - len(shown)} more ranks ok (all in stragglers.csv)")
    lines.append("")
    for m in doc["missing"]:
        lines.append(f"missing: rank {m['rank']} never issued call {m['call']} ({m['op']}) of "
                     f"group {m['group']}, which the others did: a hang")
    for c in doc["culprits"]:
        lines.append(f"{c['verdict']}: rank {c['rank']}: {c['evidence']}")
    if not doc["missing"] and not doc["culprits"]:
        lines.append("no rank made the others wait beyond the noise")
    lines.append(f"# rule: {doc['rule']}")
    return lines


def summary_markdown(doc: dict, source: str) -> str:
    """summary.md: the table a person pastes into an issue."""
    rows = ["| rank | host | verdict | last % | lateness p50 (ms) | p95 (ms) | caused ms/step |",
            "|---:|---|---|---:|---:|---:|---:|"]
    for r in doc["per_rank"]:
        rows.append(f"| {r['rank']} | {r['host'] or '-'} | {r['verdict']} | "
                    f"{r['last_share'] * 100:.1f} | {_ms(r['lateness_p50_s'])} | "
                    f"{_ms(r['lateness_p95_s'])} | {_ms(r['caused_s_per_step'])} |")
    verdicts = [f"- **{c['verdict']}**: rank {c['rank']}: {c['evidence']}"
                for c in doc["culprits"]]
    verdicts += [f"- **missing**: rank {m['rank']} at call {m['call']} ({m['op']}, group "
                 f"{m['group']})" for m in doc["missing"]]
    return "\n".join([f"# stragglers: {source}", "",
                      f"{doc['ranks']} ranks, {doc['calls']} matched calls, {doc['steps']} "
                      f"steps, clock {doc['clock']}.", "", *rows, "",
                      *(verdicts or ["No rank made the others wait beyond the noise."]), "",
                      f"Rule: {doc['rule']}", ""])


def heatmap(path: Path, doc: dict) -> None:
    """Rank x step lateness (ms), the step floor marked on the colour bar; named ranks'
    labels in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = doc["step_lateness_s"]
    ranks = sorted(int(r) for r in cells)
    steps = sorted({int(s) for row in cells.values() for s in row})
    grid = np.full((len(ranks), max(len(steps), 1)), np.nan)
    for i, rank in enumerate(ranks):
        for j, step in enumerate(steps):
            value = cells[str(rank)].get(str(step))
            if value is not None:
                grid[i, j] = value * 1e3
    named = {c["rank"] for c in doc["culprits"]} | {m["rank"] for m in doc["missing"]}
    height = min(12.0, 1.5 + 0.25 * len(ranks))
    fig, ax = plt.subplots(figsize=(min(14.0, 3 + 0.35 * len(steps)), height))
    image = ax.imshow(grid, aspect="auto", cmap="Reds", interpolation="nearest",
                      vmin=0, vmax=max(np.nanmax(grid) if np.isfinite(grid).any() else 1, 1e-3))
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("lateness (ms)")
    floor = doc["noise"]["step_floor_s"] * 1e3
    bar.ax.axhline(floor, color="black", linewidth=1)
    every = max(1, len(ranks) // MAX_LABELS)
    ax.set_yticks(range(0, len(ranks), every))
    ax.set_yticklabels([str(ranks[i]) for i in range(0, len(ranks), every)])
    for label in ax.get_yticklabels():
        if int(label.get_text()) in named:
            label.set_color("red")
    step_every = max(1, len(steps) // 40)
    ax.set_xticks(range(0, len(steps), step_every))
    ax.set_xticklabels([str(steps[j]) for j in range(0, len(steps), step_every)])
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.set_title(f"Who made the job wait: lateness per rank and step (floor {floor:.3g} ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
