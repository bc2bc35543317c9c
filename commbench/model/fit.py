"""α–β models of measured curves: t(n) = α + n/β, piecewise where the protocol changes.

The Hockney model: a message of n bytes costs a fixed latency α plus n over a bandwidth β. One
line rarely fits a whole sweep (NCCL switches LL -> LL128 -> Simple, gloo and MPI switch from
eager to rendezvous), so a curve is cut into at most ``MAX_SEGMENTS`` contiguous segments, each
with its own α and β, and the cuts are chosen from the data, never at hard-coded sizes.

Fit of one segment
    Weighted least squares on the medians (``lat_us_p50``) with relative residuals: minimise
    Σ ((α + n/β − t) / t)², i.e. weights 1/t², so a 10 µs point counts as much as a 10 s one.
    The problem is linear in (α, 1/β); it is solved with α ≥ 0 and 1/β ≥ 0 (when the free
    solution breaks a bound, the best fit on the bound is taken). 1/β = 0 (β = ∞) means the
    segment shows no size dependence at all. R² is the weighted one (same weights), and the
    worst residual is max |t_fit − t| / t.

Choice of the segments (the rule)
    Every split into 1, 2 or 3 contiguous segments of at least ``MIN_POINTS`` sizes is tried
    (exhaustively: a sweep has tens of sizes); for each number of segments k the split with the
    smallest residual sum RSS_k wins. Between k = 1, 2, 3 an information criterion on the
    relative residuals decides (the BIC, with each breakpoint priced as 3 parameters):

        score_k = m · ln(max(RSS_k / m, NOISE_FLOOR²)) + (2k + 3(k − 1)) · ln m

    with m sizes. The smallest score wins; ties go to fewer segments. Why these prices: a
    breakpoint is a search over every position, worth more than one fitted number. Priced as one
    (plain BIC), a spurious second segment appeared on about 20 % of simulated noisy single-line
    sweeps; priced as three, on a few percent, while a 2x jump of α mid-sweep is still always
    found. So a second or third segment is used only when it cuts the residuals materially (for
    20 sizes the sum of squared relative residuals must fall about 2.1x, the rms about 1.45x),
    and never to chase a fit already within ``NOISE_FLOOR`` (1 % rms): a median is not measured
    better than that, and without the floor an exact curve (RSS = 0) would make any further
    split look infinitely good.

What a segment may claim (checked after the cuts are chosen)
    A byte term within its own noise is no bandwidth: when 1/β is less than ``SLOPE_T``
    standard errors from 0 (weighted least squares, the same relative residuals), the segment
    is refitted flat (β = ∞, "latency only") rather than printed as, say, β = 0.000 GB/s over
    8-32 B. A segment is then usable when its line explains the data: R² ≥ ``MIN_R2`` for a
    sloped segment; a flat one has nothing for R² to explain (it is 0 by construction), so its
    rms relative residual must stay under ``MAX_FLAT_RMS``. An unusable segment is kept (the
    table says "no usable fit" for its range) but never read by an estimate.

Sizes are bytes per rank of the largest buffer (docs/reference/metrics-and-formulas.md#sizes), times
are µs, β is GB/s = 1e9 B/s, so t_us = α_us + n / (β_gbps · 1e3). Data in, data out: nothing here
prints or imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from commbench import collectives
from commbench.core.errors import UsageError
from commbench.results.launches import pooled_rows
from commbench.results.schema import is_combined, op_label

# The one rule on sizes, for model and estimate alike: a curve is fitted (and read outside
# its measured sizes) only with at least this many sizes: two parameters need spare points.
MIN_SIZES = 4
MAX_SEGMENTS = 3
MIN_POINTS = 3  # per segment: two parameters and one degree of freedom
NOISE_FLOOR = 0.01  # rms relative residual under which fits count as equally perfect
BREAKPOINT_PARAMETERS = 3  # what one breakpoint costs in the criterion (see the docstring)
FLAT = 1e-12  # a byte term this small against the times is rounding, not bandwidth
US_PER_BYTE_AT_1_GBPS = 1e-3  # 1 GB/s = 1e9 B/s = 1e3 B/µs
SLOPE_T = 2.0  # a byte term under 2 standard errors from 0 is noise (about 95 %)
MIN_R2 = 0.5  # a line that explains less than half the variation says nothing
MAX_FLAT_RMS = 0.25  # a latency-only segment whose times scatter more is no latency

COLUMNS = ("op", "backend", "dim", "group_size", "dtype", "segment", "size_lo", "size_hi",
           "alpha_us", "beta_gbps", "r2", "worst_residual_pct", "pattern", "busbw_equiv_gbps",
           "points", "usable", "note")


@dataclass(frozen=True)
class CurveKey:
    """What makes one curve: rows that share these are one sweep."""

    op: str
    pattern: str
    backend: str
    dim: str
    group_size: int
    dtype: str
    variant: str = ""  # in-place / out-of-place, reduce op, root: set where a run has several

    def describe(self) -> str:
        name = op_label(self.op, self.pattern)
        where = f"{self.dim}={self.group_size}" if self.dim else f"n={self.group_size}"
        return f"{name} {self.backend} {where} {self.dtype}" + (
            f" {self.variant}" if self.variant else "")


@dataclass(frozen=True)
class Segment:
    """One α–β line over the measured sizes ``size_lo`` .. ``size_hi``."""

    index: int  # 1-based
    size_lo: int
    size_hi: int
    points: int
    alpha_us: float
    us_per_byte: float  # 1/β in µs per byte; 0 = no size dependence (β = ∞)
    r2: float
    worst_residual_pct: float
    usable: bool = True
    note: str = ""  # "latency only", or why the segment is no usable fit (usable False)

    @property
    def flat(self) -> bool:
        return self.us_per_byte <= 0

    @property
    def beta_gbps(self) -> float:
        if self.us_per_byte <= 0:
            return math.inf
        return US_PER_BYTE_AT_1_GBPS / self.us_per_byte

    def time_us(self, size: float) -> float:
        return self.alpha_us + size * self.us_per_byte


@dataclass(frozen=True)
class CurveFit:
    """A fitted curve: the points it was fitted on and its segments, in size order."""

    key: CurveKey | None
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]
    segments: tuple[Segment, ...]

    def segment_for(self, size: float) -> Segment:
        """The segment whose sizes cover ``size``; between two segments the cut is at the
        geometric mean of their neighbouring sizes; beyond the ends, the end segments."""
        for segment, after in zip(self.segments, self.segments[1:], strict=False):
            if size < math.sqrt(segment.size_hi * after.size_lo):
                return segment
        return self.segments[-1]

    def time_us(self, size: float) -> float:
        """The model's time at any size (µs)."""
        return self.segment_for(size).time_us(size)

    def records(self) -> list[dict]:
        """One record per segment, with the ``COLUMNS`` of model.csv."""
        key = self.key or CurveKey("", "", "", "", 0, "")
        factor = _busbw_factor(key)
        return [
            {
                "op": key.op, "backend": key.backend, "dim": key.dim,
                "group_size": key.group_size, "dtype": key.dtype, "segment": seg.index,
                "size_lo": seg.size_lo, "size_hi": seg.size_hi, "alpha_us": seg.alpha_us,
                "beta_gbps": seg.beta_gbps, "r2": seg.r2,
                "worst_residual_pct": seg.worst_residual_pct, "pattern": key.pattern,
                "busbw_equiv_gbps": seg.beta_gbps * factor if factor is not None else math.nan,
                "points": seg.points, "usable": seg.usable, "note": seg.note,
            }
            for seg in self.segments
        ]


def _busbw_factor(key: CurveKey) -> float | None:
    """β as bus bandwidth: the nccl-tests factor of the op at the curve's group size."""
    try:
        op = collectives.get(key.op)
    except KeyError:
        return None
    return op.busbw_factor(max(1, key.group_size), key.pattern)


def curve_key(row: dict) -> CurveKey:
    return CurveKey(op=str(row["op"]), pattern=str(row.get("pattern") or ""),
                    backend=str(row["backend"]), dim=str(row.get("dim") or ""),
                    group_size=int(row.get("group_size") or row.get("world_size") or 0),
                    dtype=str(row.get("dtype") or ""))


VARIANT_COLUMNS = ("inplace", "reduce_op", "root")  # compare keeps these apart too


def _variant(row: dict, varying: set[str]) -> str:
    """Words for the columns in which a curve's rows differ from its siblings'."""
    words = []
    if "inplace" in varying:
        words.append("in-place" if row.get("inplace") else "out-of-place")
    if "reduce_op" in varying:
        words.append(f"op {row.get('reduce_op')}")
    if "root" in varying:
        words.append(f"root {row.get('root')}")
    words += contention_words(row)
    return ", ".join(words)


def contention_words(row: dict) -> list[str]:
    """An --overlap or --background row is its own curve, always (never fitted with the
    collective alone): 'overlap matmul:1024', 'background 16M'."""
    return [f"{column} {row[column]}" for column in ("overlap", "background")
            if row.get(column)]


def measured_curves(rows: list[dict]) -> dict[CurveKey, tuple[np.ndarray, np.ndarray]]:
    """Rows grouped into curves: key -> (sizes, median µs), sorted by size.

    Barrier rows (size 0), ``--per-group`` rows (the combined row already stands for all
    groups) and rows without a positive median (nothing a log scale or a relative error can
    use) are skipped. Rows that differ in-place or not, in reduce op or in root are separate
    curves, as compare keeps them apart (an import of nccl-tests has both column groups);
    their keys say how they differ. The launches of a --repeat run are pooled first (the
    median over all their samples, results.launches), as compare and the plots pool them;
    rows that still share a key and a size are merged into the median of their medians.
    """
    rows = pooled_rows(rows)
    usable_rows = [row for row in rows if int(row["size_bytes"]) > 0
                   and float(row["lat_us_p50"]) > 0 and is_combined(row)]
    seen: dict[CurveKey, set[tuple]] = {}
    for row in usable_rows:
        seen.setdefault(curve_key(row), set()).add(tuple(row.get(c) for c in VARIANT_COLUMNS))
    grouped: dict[CurveKey, dict[int, list[float]]] = {}
    for row in usable_rows:
        base = curve_key(row)
        varying = {column for index, column in enumerate(VARIANT_COLUMNS)
                   if len({variant[index] for variant in seen[base]}) > 1}
        contended = bool(contention_words(row))
        key = replace(base, variant=_variant(row, varying)) if varying or contended else base
        per_size = grouped.setdefault(key, {})
        per_size.setdefault(int(row["size_bytes"]), []).append(float(row["lat_us_p50"]))
    curves = {}
    for key, per_size in grouped.items():
        sizes = np.array(sorted(per_size), dtype=float)
        times = np.array([float(np.median(per_size[int(s)])) for s in sizes])
        curves[key] = (sizes, times)
    return curves


def _fit_line(sizes: np.ndarray, times: np.ndarray) -> tuple[float, float, float]:
    """(α µs, 1/β µs per byte, RSS) minimising Σ((α + n/β − t)/t)² with α ≥ 0, 1/β ≥ 0."""
    design = np.column_stack([1.0 / times, sizes / times])
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    coef, *_ = np.linalg.lstsq(design / scale, np.ones(len(times)), rcond=None)
    alpha, per_byte = (coef / scale).tolist()
    if alpha < 0 or per_byte < 0:
        # The minimum of a convex quadratic on the quadrant lies on one of its two edges.
        along_size, along_one = sizes / times, 1.0 / times
        candidates = [
            (0.0, max(0.0, along_size.sum() / (along_size @ along_size))),
            (max(0.0, along_one.sum() / (along_one @ along_one)), 0.0),
        ]
        alpha, per_byte = min(candidates, key=lambda c: _rss(sizes, times, *c))
    if 0 < per_byte * sizes.max() <= FLAT * times.max():
        # Rounding noise of a flat segment, not a bandwidth: call it β = ∞ and refit α.
        along_one = 1.0 / times
        alpha, per_byte = along_one.sum() / (along_one @ along_one), 0.0
    return alpha, per_byte, _rss(sizes, times, alpha, per_byte)


def _rss(sizes, times, alpha: float, per_byte: float) -> float:
    relative = (alpha + sizes * per_byte - times) / times
    return float(relative @ relative)


def _slope_resolved(sizes: np.ndarray, times: np.ndarray, alpha: float, per_byte: float,
                    rss: float) -> bool:
    """Whether 1/β is at least ``SLOPE_T`` standard errors from 0 (weighted least squares on
    the relative residuals; α pinned at 0 leaves 1/β the only parameter)."""
    if rss <= 0:
        return True
    if alpha > 0:
        design = np.column_stack([1.0 / times, sizes / times])
    else:
        design = (sizes / times)[:, None]
    spare = len(times) - design.shape[1]
    if spare < 1:
        return True  # nothing to judge it by (MIN_POINTS makes this rare)
    try:
        covariance = np.linalg.inv(design.T @ design) * (rss / spare)
    except np.linalg.LinAlgError:
        return False
    error = math.sqrt(max(float(covariance[-1, -1]), 0.0))
    return per_byte >= SLOPE_T * error


def _segment(index: int, sizes: np.ndarray, times: np.ndarray) -> Segment:
    alpha, per_byte, rss = _fit_line(sizes, times)
    note = ""
    if per_byte > 0 and not _slope_resolved(sizes, times, alpha, per_byte, rss):
        # A bandwidth read off noise means nothing: the segment is latency only.
        along_one = 1.0 / times
        alpha, per_byte = float(along_one.sum() / (along_one @ along_one)), 0.0
        rss = _rss(sizes, times, alpha, per_byte)
    weights = 1.0 / times**2
    mean = float((weights * times).sum() / weights.sum())
    spread = float((((times - mean) / times) ** 2).sum())
    # A flat segment has nothing to explain: a perfect fit of it scores 1.
    r2 = 1.0 - rss / spread if spread > 0 else float(rss < 1e-24)
    worst = float(np.max(np.abs((alpha + sizes * per_byte - times) / times))) * 100
    rms = math.sqrt(rss / len(times))
    if per_byte <= 0:
        usable = rms <= MAX_FLAT_RMS
        note = "latency only" if usable else f"times scatter ±{rms:.0%} around a flat line"
    else:
        usable = r2 >= MIN_R2
        note = "" if usable else f"the line explains R² {r2:.2f} of the times"
    return Segment(index=index, size_lo=int(sizes[0]), size_hi=int(sizes[-1]),
                   points=len(sizes), alpha_us=alpha, us_per_byte=per_byte, r2=r2,
                   worst_residual_pct=worst, usable=usable, note=note)


def choose_cuts(sizes: np.ndarray, times: np.ndarray) -> tuple[int, ...]:
    """Indices where segments 2 and 3 start (none for one segment): the rule in the module
    docstring (best split per segment count, then the smallest floored BIC)."""
    count = len(sizes)
    cache: dict[tuple[int, int], float] = {}

    def cost(lo: int, hi: int) -> float:
        if (lo, hi) not in cache:
            cache[(lo, hi)] = _fit_line(sizes[lo:hi], times[lo:hi])[2]
        return cache[(lo, hi)]

    def score(rss: float, segments: int) -> float:
        return (count * math.log(max(rss / count, NOISE_FLOOR**2))
                + (2 * segments + BREAKPOINT_PARAMETERS * (segments - 1)) * math.log(count))

    best_cuts: tuple[int, ...] = ()
    best_score = score(cost(0, count), 1)
    for segments in range(2, MAX_SEGMENTS + 1):
        splits = [
            cuts for cuts in combinations(range(MIN_POINTS, count - MIN_POINTS + 1), segments - 1)
            if all(b - a >= MIN_POINTS for a, b in zip(cuts, cuts[1:], strict=False))
        ]
        if not splits:
            break
        bounds = [(0, *cuts, count) for cuts in splits]
        totals = [sum(cost(a, b) for a, b in zip(edge, edge[1:], strict=False))
                  for edge in bounds]
        pick = int(np.argmin(totals))
        candidate = score(totals[pick], segments)
        if candidate < best_score:
            best_score, best_cuts = candidate, splits[pick]
    return best_cuts


def fit_curve(sizes, times_us, key: CurveKey | None = None) -> CurveFit:
    """Fit one curve (at least 2 sizes; a split needs ``2 * MIN_POINTS``)."""
    sizes = np.asarray(sizes, dtype=float)
    times = np.asarray(times_us, dtype=float)
    order = np.argsort(sizes)
    sizes, times = sizes[order], times[order]
    if len(sizes) < 2 or np.any(sizes <= 0) or np.any(times <= 0):
        raise ValueError("a fit needs at least 2 positive sizes with positive times")
    edges = (0, *choose_cuts(sizes, times), len(sizes))
    segments = tuple(_segment(index, sizes[lo:hi], times[lo:hi])
                     for index, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False), 1))
    return CurveFit(key=key, sizes=tuple(int(s) for s in sizes),
                    times_us=tuple(float(t) for t in times), segments=segments)


def too_few_sizes(what: str, count: int, why: str = "") -> str:
    """The one rule on sizes (``MIN_SIZES``), worded once for model and estimate: the refusal,
    or '' when ``count`` sizes are enough."""
    if count >= MIN_SIZES:
        return ""
    need = f": {why} needs an α–β fit, and" if why else ";"
    return (f"{what} has {count} size(s){need} a fit needs at least {MIN_SIZES}: measure more, "
            "e.g. --sizes 8-64M")


def fit_run(rows: list[dict], name: str = "the run") -> list[CurveFit]:
    """Fit every curve of a run; refuse a curve with fewer than ``MIN_SIZES`` sizes."""
    curves = measured_curves(rows)
    if not curves:
        raise UsageError(f"{name} has no sized rows to fit (barrier has no sizes)")
    for key, (sizes, _) in curves.items():
        refusal = too_few_sizes(f"{name}: {key.describe()}", len(sizes))
        if refusal:
            raise UsageError(refusal)
    return [fit_curve(sizes, times, key) for key, (sizes, times) in curves.items()]


def segment_records(fits: list[CurveFit]) -> list[dict]:
    return [record for fit in fits for record in fit.records()]


def fit_lines(fits: list[CurveFit], points: int = 32) -> dict[CurveKey, tuple[np.ndarray,
                                                                             np.ndarray]]:
    """Points of each fitted curve for a plot: every usable segment drawn from the cut before
    it to the cut after it (geometric means of neighbouring sizes), NaN between segments so a
    line breaks where the model jumps, and over a segment with no usable fit."""
    lines = {}
    for fit in fits:
        xs, ys = [], []
        segments = fit.segments
        for position, segment in enumerate(segments):
            lo = (math.sqrt(segments[position - 1].size_hi * segment.size_lo) if position
                  else segment.size_lo)
            hi = (math.sqrt(segment.size_hi * segments[position + 1].size_lo)
                  if position + 1 < len(segments) else segment.size_hi)
            sizes = np.geomspace(lo, hi, points)
            if position:
                xs.append(np.array([np.nan]))
                ys.append(np.array([np.nan]))
            xs.append(sizes)
            # No usable fit: nothing drawn over its sizes (a line there would claim one).
            ys.append(segment.alpha_us + sizes * segment.us_per_byte if segment.usable
                      else np.full(len(sizes), np.nan))
        lines[fit.key] = (np.concatenate(xs), np.concatenate(ys))
    return lines

