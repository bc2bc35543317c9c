"""ps beside allreduce in α–β terms: where a parameter server and allreduce over the same
workers take equal time (the crossover size).

The PS curve (docs/commands/model.md#ps-runs, issue 21): one sync step is a push and a pull, two
message latencies, plus the bytes of the busiest link, the larger of a worker's n and a server's
W·n/S, plus the servers' sums (each adds W shards of n/S bytes):

    t_ps(n) = 2α + max(n, W·n/S) / β + (W·n/S) / σ

For one run W and S are fixed, so both byte terms are n times a constant, and the rows fit the
line t = a + n·b of model/fit.py, with its segments: α = a/2, and the byte term read as a
link bandwidth, β = max(1, W/S) / b. Where W ≥ S both byte terms grow as W·n/S, so no set of
rows of one W and S can tell the wire from the sums apart: the β printed is the combined rate,
1/β + (1/σ)·(W/S)/max(1, W/S) = 1/β_printed, the servers' summation inside it (say so
wherever it is shown). The factor max(1, W/S) is read off the rows (busbw / algbw, what the
descriptor applied), so a colocated run (S = W on the workers, ring traffic) uses its own.

The crossover: each fitted curve is linear between its cuts (model.CurveFit.segment_for), so
their difference is linear between the union of the cuts, and every sign change inside such an
interval is solved exactly; at a cut the models may jump, and a sign change across a jump is
a crossover at the cut. The search runs over the sizes both curves measured, ``NEAR`` times
beyond each end ("near the measured range"); a crossover outside the measured sizes says so.
Beside it, the measured medians: the neighbouring sizes between which the measured ratio of
times changes side, so a reader sees whether the fits and the points agree.

Data in, data out: nothing here prints or imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from commbench.model.fit import CurveFit, CurveKey, curve_key
from commbench.results.schema import is_combined, op_label

NEAR = 2.0  # how far beyond the measured sizes a crossover is still looked for (a factor)
PS_OP = "ps"


@dataclass(frozen=True)
class Crossover:
    """One size where the PS curve and its baseline's take equal time."""

    size_bytes: float
    faster_below: str  # op label of the faster one below the crossover
    faster_above: str
    measured: bool  # inside the sizes both curves measured (else within NEAR of an end)
    usable: bool  # both fits have a usable segment there
    at_cut: bool  # where a model jumps between segments, not where two lines cross


@dataclass(frozen=True)
class MeasuredFlip:
    """Two neighbouring measured sizes between which the faster of the two changes."""

    size_lo: int
    size_hi: int
    ratio_lo: float  # PS time / baseline time at size_lo
    ratio_hi: float


@dataclass(frozen=True)
class PsSegment:
    """One segment of the PS fit in the issue's terms: 2α + max(n, W·n/S)/β."""

    size_lo: int
    size_hi: int
    alpha_us: float  # per message (half the fitted intercept: a push and a pull)
    beta_gbps: float  # the busiest link's bytes per second, the servers' sums folded in
    usable: bool
    note: str


@dataclass(frozen=True)
class PsBeside:
    """A PS curve, the allreduce curve over the same workers, and where they cross."""

    ps: CurveFit
    baseline: CurveFit
    workers: int
    servers: int
    load_factor: float  # max(1, W/S): the busiest link's bytes over n
    search_lo: float
    search_hi: float
    crossovers: tuple[Crossover, ...]
    flips: tuple[MeasuredFlip, ...]

    @property
    def ps_label(self) -> str:
        return op_label(self.ps.key.op, self.ps.key.pattern)

    @property
    def baseline_label(self) -> str:
        return op_label(self.baseline.key.op, self.baseline.key.pattern)

    def ps_segments(self) -> list[PsSegment]:
        return [PsSegment(size_lo=s.size_lo, size_hi=s.size_hi, alpha_us=s.alpha_us / 2,
                          beta_gbps=s.beta_gbps * self.load_factor, usable=s.usable,
                          note=s.note) for s in self.ps.segments]

    def record(self) -> dict:
        """model.json's form: the pairing, the PS segments in the issue's terms, the
        crossovers and the measured flips (sizes in bytes, β in GB/s, ∞ as inf)."""
        key = self.ps.key
        return {
            "ps": self.ps_label, "baseline": self.baseline_label, "backend": key.backend,
            "dtype": key.dtype, "workers": self.workers, "servers": self.servers,
            "load_factor": self.load_factor,
            "model": "t_us = 2 * alpha_us + max(n, W * n / S) / (beta_gbps * 1e3), the "
                     "servers' sums inside beta",
            "ps_segments": [vars(s) for s in self.ps_segments()],
            "search_bytes": [self.search_lo, self.search_hi],
            "crossovers": [vars(c) for c in self.crossovers],
            "measured_flips": [vars(f) for f in self.flips],
        }


def _pairing_rows(rows: list[dict]) -> dict[tuple, dict]:
    """ps curve key -> (W, S, baseline label, load factor), from the run's combined ps rows
    that name a baseline (``beside``)."""
    found: dict[CurveKey, dict] = {}
    for row in rows:
        if str(row.get("op")) != PS_OP or not row.get("beside") or not is_combined(row):
            continue
        key = curve_key(row)
        entry = found.setdefault(key, {"workers": int(row.get("workers") or 0),
                                       "servers": int(row.get("servers") or 0),
                                       "beside": str(row["beside"]), "factors": []})
        algbw, busbw = float(row.get("algbw_gbps") or 0), float(row.get("busbw_gbps") or 0)
        if algbw > 0 and busbw > 0:
            entry["factors"].append(busbw / algbw)
    return found


def pair_with_baselines(rows: list[dict], fits: list[CurveFit]) -> list[PsBeside]:
    """Every fitted PS curve of a run beside the fitted allreduce over its W workers (same
    backend and dtype); a PS curve whose baseline was not measured (``--no-baseline``) or not
    fitted is left out."""
    by_key = {replace(fit.key, variant=""): fit for fit in fits if fit.key is not None}
    pairs = []
    for key, entry in _pairing_rows(rows).items():
        ps_fit = by_key.get(key)
        base_key = CurveKey(op=entry["beside"], pattern="", backend=key.backend, dim=key.dim,
                            group_size=entry["workers"], dtype=key.dtype)
        baseline = by_key.get(base_key)
        if ps_fit is None or baseline is None:
            continue
        workers, servers = entry["workers"], entry["servers"]
        factor = (float(np.median(entry["factors"])) if entry["factors"]
                  else max(1.0, workers / max(1, servers)))
        pairs.append(beside(ps_fit, baseline, workers, servers, factor))
    return pairs


def beside(ps_fit: CurveFit, baseline: CurveFit, workers: int, servers: int,
           load_factor: float) -> PsBeside:
    """The pairing with its crossovers (fits) and flips (measured medians)."""
    lo = max(ps_fit.sizes[0], baseline.sizes[0])
    hi = min(ps_fit.sizes[-1], baseline.sizes[-1])
    if lo > hi:  # no size in common: search the span of both
        lo, hi = min(ps_fit.sizes[0], baseline.sizes[0]), max(ps_fit.sizes[-1],
                                                            baseline.sizes[-1])
    labels = (op_label(ps_fit.key.op, ps_fit.key.pattern) if ps_fit.key else "ps",
              op_label(baseline.key.op, baseline.key.pattern) if baseline.key else "baseline")
    search_lo, search_hi = lo / NEAR, hi * NEAR
    crossings = crossovers(ps_fit, baseline, search_lo, search_hi, labels)
    crossings = tuple(replace(c, measured=lo <= c.size_bytes <= hi) for c in crossings)
    return PsBeside(ps=ps_fit, baseline=baseline, workers=workers, servers=servers,
                    load_factor=load_factor, search_lo=search_lo, search_hi=search_hi,
                    crossovers=crossings, flips=measured_flips(ps_fit, baseline))


def _cuts(fit: CurveFit) -> list[float]:
    """Where the model switches segments (model.CurveFit.segment_for's rule)."""
    return [math.sqrt(a.size_hi * b.size_lo)
            for a, b in zip(fit.segments, fit.segments[1:], strict=False)]


def crossovers(first: CurveFit, second: CurveFit, lo: float, hi: float,
               labels: tuple[str, str] = ("first", "second")) -> tuple[Crossover, ...]:
    """Sizes in [lo, hi] where ``first``'s model time equals ``second``'s, in size order:
    exact within each interval where both are one line, and at a cut where a jump changes
    which is faster. A stretch where the two lines coincide is no crossover."""
    edges = sorted({lo, hi, *(c for c in _cuts(first) + _cuts(second) if lo < c < hi)})
    found: list[Crossover] = []
    last_sign, last_usable = 0.0, True  # the side below the interval at hand (0: none yet)
    for a, b in zip(edges, edges[1:], strict=False):
        middle = math.sqrt(a * b)
        one, two = first.segment_for(middle), second.segment_for(middle)
        start = one.time_us(a) - two.time_us(a)
        end = one.time_us(b) - two.time_us(b)
        usable = one.usable and two.usable
        here, there = math.copysign(1, start) if start else 0.0, (
            math.copysign(1, end) if end else 0.0)
        if last_sign and here and here != last_sign:  # a jump at a cut changed sides
            found.append(_crossing(a, last_sign, labels, last_usable and usable, at_cut=True))
        if here and there and here != there:
            size = a + (b - a) * start / (start - end)
            found.append(_crossing(size, here, labels, usable, at_cut=False))
        elif not here and last_sign and there and there != last_sign:  # equal exactly at a
            found.append(_crossing(a, last_sign, labels, usable, at_cut=False))
        last_sign, last_usable = there or here or last_sign, usable
    return tuple(found)


def _crossing(size: float, before: float, labels: tuple[str, str], usable: bool,
              at_cut: bool) -> Crossover:
    """``before``: first's time minus second's just below the crossover."""
    faster_below, faster_above = (labels[0], labels[1]) if before < 0 else (labels[1],
                                                                             labels[0])
    return Crossover(size_bytes=float(size), faster_below=faster_below,
                     faster_above=faster_above, measured=True, usable=bool(usable),
                     at_cut=at_cut)


def measured_flips(first: CurveFit, second: CurveFit) -> tuple[MeasuredFlip, ...]:
    """Neighbouring sizes measured by both curves between which the faster one changes
    (ratio of medians across 1); a size where they tie is skipped."""
    times = dict(zip(second.sizes, second.times_us, strict=True))
    ratios = [(size, time / times[size]) for size, time in zip(first.sizes, first.times_us,
                                                               strict=True)
              if size in times and times[size] > 0]
    ratios = [(size, ratio) for size, ratio in ratios if ratio != 1.0]
    return tuple(MeasuredFlip(a, b, ra, rb) for (a, ra), (b, rb)
                 in zip(ratios, ratios[1:], strict=False) if (ra < 1) != (rb < 1))
