"""Per-rank figures and the verdict rule (docs/commands/stragglers.md, "The rule").

``RULE`` is the rule in words, printed with every verdict. The numbers behind it:

- a rank's lateness in a step is its median lateness over the step's calls (a slow forward
  delays every bucket of a DDP step alike; one call delayed by the scheduler does not make a
  step late);
- the noise is drawn from the run itself, from every rank but the latest one (the rank with
  the largest median step lateness, so a culprit does not widen the noise it is judged
  against): ``base`` their median step lateness, ``sigma`` 1.4826 x the MAD about it;
- a rank is late in a step when its step lateness exceeds ``base + max(K_STEP x sigma,
  MIN_FLOOR_S)`` (the floor: the heatmap's and a transient's line);
- ``culprit``: the rank arrived last (the largest step lateness) in so many of the steps that
  chance could not have done it (a sign test: were the ranks alike, each would be last in a
  step with probability 1/ranks), or later than the other ranks' median in so many (each
  would be with probability 1/2): the binomial tail of either count below ``ALPHA`` / (2 x
  ranks), the two tests' Bonferroni share; and its median step lateness is above
  ``base + max(K_LINE x sigma, MIN_FLOOR_S)`` (an effect of 0.4 of a step's noise or more,
  not a fixed habit of a scheduler: on 2 cores shared by 4 ranks, 4 of 120 clean ranks in
  30 jobs passed a count test, 0.06-0.38 sigma above the others; 60 ranks slowed by 5-10 %
  of a step sat 0.18-1.29 sigma above, docs/project/accuracy.md). The second count finds a
  rank late every step while a noisier rank is last in many steps in its place (2 of 20
  ranks slowed by 10 % failed the last-count test alone). Counting steps rather than
  thresholding each finds a small delay repeated every step, which one step's noise would
  hide; the lateness
  distribution (skewed: the first arrival's is 0) does not enter the test;
  or, with ``MIN_RANKS_SPREAD`` ranks or more, its median step lateness is an outlier among
  the ranks' medians: above their median by more than ``K_RANKS`` x 1.4826 x their MAD (a
  thousand ranks' noise makes someone else last in most steps even behind a rank that is
  always late; the spread of the ranks' own medians is the yardstick then, systematic
  per-rank differences included);
  ``transient``: not a culprit, but late in ``MIN_RUN`` or more consecutive steps (the
  longest such run is named, k..m); else ``ok``.

Limits: the noise is a clean rank's only where fewer than half the ranks are late; a step's
lateness needs the step's calls matched on every member; a rank late before one call of many
in a step (a synchronous loop's first call) moves its step median little.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from commbench.results.trace import Trace, step_split
from commbench.stragglers.lateness import Late, clock_of, lateness
from commbench.stragglers.matching import Missing, match

K_STEP = 4.0
K_LINE = 0.4
ALPHA = 1e-3
K_RANKS = 5.0
MIN_RANKS_SPREAD = 8
MAD_TO_SIGMA = 1.4826
MIN_FLOOR_S = 100e-6
MIN_RUN = 3
CULPRIT, TRANSIENT, OK = "culprit", "transient", "ok"
RULE = (f"step lateness = a rank's median lateness over the step's calls; base, sigma = the "
        f"median and 1.4826 x MAD of the other ranks' step lateness; culprit: last in so many "
        f"steps, or later than the others' median in so many, that P(that many | each rank "
        f"last with 1/ranks, later with 1/2) < {ALPHA:g}/(2 x ranks), and median "
        f"step lateness > base + max({K_LINE:g} x sigma, {MIN_FLOOR_S * 1e6:.0f} us), or "
        f"({MIN_RANKS_SPREAD}+ "
        f"ranks) median step lateness > the ranks' median + {K_RANKS:g} x 1.4826 x MAD of "
        f"the ranks' medians; transient: late "
        f"(> base + max({K_STEP:g} x sigma, {MIN_FLOOR_S * 1e6:.0f} us)) in {MIN_RUN}+ consecutive "
        f"steps only; ok: neither")


@dataclass
class RankResult:
    """One rank's figures and verdict."""

    rank: int
    host: str
    verdict: str = OK
    calls: int = 0
    last_share: float = 0.0
    lateness_p50_s: float = 0.0
    lateness_p95_s: float = 0.0
    caused_s_per_step: float = 0.0
    late_steps: list[int] = field(default_factory=list)
    steps: tuple[int, int] | None = None  # a transient's (or culprit's) first and last step
    evidence: str = ""
    by_op: dict[str, dict] = field(default_factory=dict)
    by_group: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"rank": self.rank, "host": self.host, "verdict": self.verdict,
                "calls": self.calls, "last_share": round(self.last_share, 4),
                "lateness_p50_s": self.lateness_p50_s, "lateness_p95_s": self.lateness_p95_s,
                "caused_s_per_step": self.caused_s_per_step,
                "steps": list(self.steps) if self.steps else None,
                "late_steps": self.late_steps, "evidence": self.evidence,
                "by_op": self.by_op, "by_group": self.by_group}


@dataclass
class Analysis:
    """What ``analyse`` found: the figures per rank, the step lateness matrix (rank x step,
    seconds, the heatmap), the floor and the clocks that applied."""

    world_size: int
    ranks: list[RankResult]
    steps: list[int]
    calls: int
    unmeasured: int
    clock: str
    clock_by_hosts: dict[str, str]
    floor_s: float
    culprit_line_s: float
    noise_median_s: float
    noise_sigma_s: float
    step_lateness: dict[int, dict[int, float]]
    missing: list[Missing]
    hosts: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def named(self) -> list[RankResult]:
        return [r for r in self.ranks if r.verdict != OK]

    @property
    def exit_code(self) -> int:
        """0 nobody late beyond the noise; 1 a culprit, a transient or a missing rank."""
        return 1 if self.named or self.missing else 0


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (numpy's default), 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def noise(step_lateness: dict[int, dict[int, float]]) -> tuple[float, float]:
    """(base, sigma) from every rank's step lateness but the latest rank's."""
    medians = {rank: quantile(list(cells.values()), 0.5)
               for rank, cells in step_lateness.items() if cells}
    if not medians:
        return 0.0, 0.0
    latest = max(medians, key=lambda r: (medians[r], -r))
    sample = [v for rank, cells in step_lateness.items() if rank != latest or len(medians) == 1
              for v in cells.values()]
    median = quantile(sample, 0.5)
    mad = quantile([abs(v - median) for v in sample], 0.5)
    return median, MAD_TO_SIGMA * mad


def _over_others_median(values: dict[int, float]) -> list[int]:
    """The ranks whose value exceeds the median of the other ranks' values: one sort per step,
    not one per rank (a thousand ranks over hundreds of steps)."""
    order = sorted(values, key=values.get)
    ordered = [values[r] for r in order]
    m = len(ordered) - 1
    if m < 1:
        return []
    low, high = (m - 1) // 2, m // 2  # the others' middle, once a rank's own value is out
    found = []
    for i, rank in enumerate(order):
        middle = ((ordered[low] if low < i else ordered[low + 1])
                  + (ordered[high] if high < i else ordered[high + 1])) / 2
        if values[rank] > middle:
            found.append(rank)
    return found


def longest_run(steps: list[int], late: set[int]) -> list[int]:
    """The longest run of consecutive analysed steps that are all late."""
    best: list[int] = []
    run: list[int] = []
    for step in steps:
        run = [*run, step] if step in late else []
        if len(run) > len(best):
            best = run
    return best


def _union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def analyse(trace: Trace, steps: tuple[int, int] | None = None,
            group: str | None = None) -> Analysis:
    """The whole analysis of a trace; ``steps`` (first, last) and ``group`` narrow it."""
    matched, missing = match(trace)
    if group is not None:
        matched = [m for m in matched if m.group == group]
        missing = [m for m in missing if m.group == group]
    split = step_split(trace)
    counted = set(split.steps) or set(trace.steps())
    if steps is not None:
        counted = {s for s in trace.steps() if steps[0] <= s <= steps[1]}
    hosts = {rank: str(rt.header.get("host", "")) for rank, rt in trace.ranks.items()}
    clocks = {rank: str(rt.header.get("clock", "")) for rank, rt in trace.ranks.items()}
    lates: list[Late] = []
    unmeasured = 0
    for call in matched:
        if call.step not in counted:
            continue
        late = lateness(call, hosts, clocks)
        if late is None:
            unmeasured += 1
        else:
            lates.append(late)
    analysed = sorted({late.call.step for late in lates})
    in_step: dict[int, dict[int, list[float]]] = {rank: defaultdict(list)
                                                  for rank in sorted(trace.ranks)}
    per_rank: dict[int, list[float]] = defaultdict(list)
    last_count: dict[int, int] = defaultdict(int)
    held: dict[int, list[tuple[float, float]]] = defaultdict(list)
    unplaced: dict[int, dict[int, float]] = defaultdict(dict)
    by: dict[tuple[int, str, str], list[tuple[float, bool]]] = defaultdict(list)
    by_hosts: dict[str, set[str]] = defaultdict(set)
    for late in lates:
        last = late.last
        by_hosts["-".join(late.hosts)].add(late.clock)
        for rank, value in late.late_s.items():
            in_step[rank][late.call.step].append(value)
            per_rank[rank].append(value)
            last_count[rank] += rank == last
            by[(rank, "op", late.call.op)].append((value, rank == last))
            by[(rank, "group", late.call.group)].append((value, rank == last))
        if last is not None and late.held_s > 0:
            arrival = late.call.arrivals[last].issue_ns
            if arrival is None:  # no timeline to tell overlapping calls: the step's
                # largest hold, a lower bound (docs/commands/stragglers.md)
                step = late.call.step
                unplaced[last][step] = max(unplaced[last].get(step, 0.0), late.held_s)
            else:  # on the late rank's own clock, so overlapping (async) calls count once
                held[last].append((arrival / 1e9 - late.held_s, arrival / 1e9))
    step_lateness = {rank: {step: quantile(values, 0.5) for step, values in sorted(cells.items())}
                     for rank, cells in in_step.items()}
    base, sigma = noise(step_lateness)
    floor = base + max(K_STEP * sigma, MIN_FLOOR_S)
    line = base + max(K_LINE * sigma, MIN_FLOOR_S)
    last_steps: dict[int, int] = defaultdict(int)
    over_steps: dict[int, int] = defaultdict(int)
    for step in analysed:
        present = {rank: cells[step] for rank, cells in step_lateness.items() if step in cells}
        if present:
            latest = max(present, key=lambda r: (present[r], -r))
            last_steps[latest] += present[latest] > 0
        for rank in _over_others_median(present):
            over_steps[rank] += 1
    results = []
    medians = [quantile(list(cells.values()), 0.5) for cells in step_lateness.values() if cells]
    spread_line = None
    if len(medians) >= MIN_RANKS_SPREAD:
        middle = quantile(medians, 0.5)
        spread = MAD_TO_SIGMA * quantile([abs(m - middle) for m in medians], 0.5)
        spread_line = middle + max(K_RANKS * spread, MIN_FLOOR_S)
    for rank in sorted(trace.ranks):
        values = per_rank.get(rank, [])
        late_steps = sorted(s for s, v in step_lateness[rank].items() if v > floor)
        result = RankResult(rank, hosts[rank], calls=len(values),
                            last_share=last_count[rank] / len(values) if values else 0.0,
                            lateness_p50_s=quantile(values, 0.5),
                            lateness_p95_s=quantile(values, 0.95),
                            caused_s_per_step=((_union_s(held[rank]) + sum(unplaced[rank].values()))
                                               / len(analysed)
                                               if analysed else 0.0),
                            late_steps=late_steps)
        for kind in ("op", "group"):
            target = result.by_op if kind == "op" else result.by_group
            for (who, what, name), pairs in sorted(by.items()):
                if who == rank and what == kind:
                    target[name] = {"calls": len(pairs),
                                    "last_share": round(sum(p[1] for p in pairs) / len(pairs), 4),
                                    "lateness_p50_s": quantile([p[0] for p in pairs], 0.5)}
        _judge(result, analysed, step_lateness[rank], floor, line, base,
               last_steps[rank], len(trace.ranks), spread_line, over_steps[rank])
        results.append(result)
    hosts_summary: dict[str, dict] = {}
    for result in results:
        entry = hosts_summary.setdefault(result.host, {"ranks": [], "caused_s_per_step": 0.0,
                                                       "named": []})
        entry["ranks"].append(result.rank)
        entry["caused_s_per_step"] += result.caused_s_per_step
        if result.verdict != OK:
            entry["named"].append(result.rank)
    notes = []
    if unmeasured:
        notes.append(f"{unmeasured} call(s) have no lateness: their members' clocks cannot be "
                     "compared and their waits are not in the trace")
    return Analysis(trace.world_size, results, analysed, len(lates), unmeasured,
                    clock_of({late.clock for late in lates}),
                    {key: clock_of(set(kinds)) for key, kinds in sorted(by_hosts.items())},
                    floor, line, base, sigma, step_lateness, missing, hosts_summary, notes)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _judge(result: RankResult, analysed: list[int], cells: dict[int, float], floor: float,
           line: float, base: float, last: int, ranks: int,
           spread_line: float | None = None, over: int = 0) -> None:
    late = set(result.late_steps)
    typical = quantile(list(cells.values()), 0.5)
    run = longest_run(analysed, late)
    n = len(analysed)
    chance = binomial_tail(last, n, 1 / max(ranks, 2)) if analysed and last else 1.0
    chance_over = binomial_tail(over, n, 0.5) if analysed and over else 1.0
    counted = min(chance, chance_over) < ALPHA / (2 * max(ranks, 2))
    outlier = (spread_line is not None and len(analysed) >= MIN_RUN and typical > spread_line
               and typical > line)
    if (counted and typical > line) or outlier:
        result.verdict = CULPRIT
        result.steps = (analysed[0], analysed[-1])
        result.evidence = (f"last to arrive in {last} of {n} steps (chance: {chance:.1g}), "
                           f"later than the others' median in {over} (chance: "
                           f"{chance_over:.1g}); median step lateness {typical * 1e3:.3g} ms "
                           f"against the others' {base * 1e3:.3g} ms")
    elif len(run) >= MIN_RUN:
        result.verdict = TRANSIENT
        result.steps = (run[0], run[-1])
        result.evidence = (f"late beyond the step floor ({floor * 1e3:.3g} ms) in steps "
                           f"{run[0]}-{run[-1]} ({len(late)} of {len(analysed)} steps late)")


def to_json(analysis: Analysis) -> dict:
    """The ``--json`` object and ``stragglers.json`` (docs/commands/stragglers.md): the
    contract's keys first, then what backs them (every rank, the noise, the rule)."""
    return {
        "ranks": analysis.world_size, "calls": analysis.calls, "steps": len(analysis.steps),
        "clock": analysis.clock,
        "culprits": [{"rank": r.rank, "host": r.host, "verdict": r.verdict,
                      "last_share": round(r.last_share, 4), "lateness_p50_s": r.lateness_p50_s,
                      "caused_s_per_step": r.caused_s_per_step,
                      "steps": list(r.steps) if r.steps else None, "evidence": r.evidence}
                     for r in analysis.named],
        "missing": [{"rank": m.rank, "call": m.call, "op": m.op, "group": m.group}
                    for m in analysis.missing],
        "analysed_steps": analysis.steps, "unmeasured_calls": analysis.unmeasured,
        "clock_by_hosts": analysis.clock_by_hosts,
        "noise": {"base_s": analysis.noise_median_s, "sigma_s": analysis.noise_sigma_s,
                  "step_floor_s": analysis.floor_s, "culprit_line_s": analysis.culprit_line_s},
        "rule": RULE, "per_rank": [r.to_json() for r in analysis.ranks],
        "hosts": analysis.hosts,
        "step_lateness_s": {str(rank): {str(step): value for step, value in cells.items()}
                            for rank, cells in analysis.step_lateness.items()},
        "notes": analysis.notes,
    }


def one_line(analysis: Analysis) -> str:
    """The answer in one line (what ``record`` prints when the job ends)."""
    parts = []
    for m in analysis.missing:
        parts.append(f"rank {m.rank} never issued call {m.call} ({m.op}) of group {m.group} "
                     "that the others did: a hang")
    for r in analysis.named:
        if r.verdict == CULPRIT:
            parts.append(f"rank {r.rank} made the others wait: culprit, "
                         f"{r.caused_s_per_step * 1e3:.3g} ms a step "
                         f"(last to arrive in {r.last_share:.0%} of its calls)")
        else:
            parts.append(f"rank {r.rank} made the others wait in steps {r.steps[0]}-"
                         f"{r.steps[1]} only: transient")
    if not parts:
        return "no rank made the others wait beyond the noise"
    return "; ".join(parts)


def waited_note(trace: Trace) -> str | None:
    """For replay's and estimate's output: which rank the others waited for in situ, since
    their per-rank times point at the victims (None where nobody stands out)."""
    try:
        analysis = analyse(trace)
    except (ValueError, KeyError):
        return None
    named = [r for r in analysis.named if r.verdict == CULPRIT] or analysis.named
    if not named and not analysis.missing:
        return None
    if named:
        who = ", ".join(f"rank {r.rank} ({r.verdict}, {r.caused_s_per_step * 1e3:.3g} ms a "
                        "step)" for r in named)
        return (f"in situ the others waited for {who}: its own calls look short because it "
                f"arrived last; commbench stragglers {trace.path} says why")
    m = analysis.missing[0]
    return (f"rank {m.rank} never issued call {m.call} ({m.op}) of group {m.group}: a hang; "
            f"commbench stragglers {trace.path}")
