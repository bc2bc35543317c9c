"""A run's curves read at any size, for the step-time estimate: the medians where the run
measured, log-log interpolation between its sizes, the piecewise α–β fit outside them; and
which rows make the curve of a term (its mesh dimension's groups where the run has them, else
the whole world, with a note saying so).

A term whose groups have another size than the measured curve's (dp=64 read off a 2-rank run)
is a projection, never the measured number: the α–β fit is split per ring step and rebuilt
for the term's group (nccl-tests PERFORMANCE.md). A ring collective over p ranks makes
steps(p) = p · busbw_factor(p) steps (allreduce 2(p-1), allgather and reduce-scatter p-1), each
moving 1/p of the bytes, so its time is steps(p) · (α_step + (n/p) / β_link): α scales with
steps(p) / steps(p0) and the byte term with busbw_factor(p) / busbw_factor(p0). The factor is
the op descriptor's; contention between concurrent groups and a different network at scale
are not modelled, and the notes say so. Data in, data out: nothing here imports torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from commbench import collectives
from commbench.core.errors import UsageError
from commbench.core.sizes import format_size
from commbench.model.fit import CurveFit, fit_curve, measured_curves, too_few_sizes
from commbench.results.schema import is_combined

if TYPE_CHECKING:
    from commbench.specs.estimate import StepSpec

# p2p rows a pipeline term prefers: the one-way time of one message first.
P2P_PATTERNS = ("pingpong", "unidir", "ring", "bidir")
MEASURED, INTERPOLATED, EXTRAPOLATED = "measured", "interpolated", "model fit (extrapolated)"
PROJECTED = "projected"  # from another group size, per ring step (the module docstring)
_HINTS = {
    "allreduce": "commbench allreduce",
    "allgather": "commbench run --ops reduce-scatter,allgather",
    "reduce_scatter": "commbench run --ops reduce-scatter,allgather",
    "p2p": "commbench p2p --pattern pingpong",
}


@dataclass
class MeasuredCurve:
    """Medians of one collective at its measured sizes, read at any size."""

    sizes: np.ndarray
    times_us: np.ndarray
    label: str
    op: str = ""
    ranks: int = 0  # the measured group size
    project_to: int = 0  # read for groups of this size instead (0: as measured)
    _fit: CurveFit | None = field(default=None, repr=False)

    def fit(self, why: str) -> CurveFit:
        """The curve's α–β fit, under the one rule on sizes that ``model`` applies."""
        if self._fit is None:
            refusal = too_few_sizes(f"the {self.label} curve", len(self.sizes), why)
            if refusal:
                raise UsageError(refusal)
            self._fit = fit_curve(self.sizes, self.times_us)
        return self._fit

    def _segment(self, size: int, why: str):
        segment = self.fit(why).segment_for(size)
        if not segment.usable:
            raise UsageError(
                f"{why} needs the {self.label} curve's α–β fit over "
                f"{format_size(segment.size_lo)}-{format_size(segment.size_hi)}, and there it "
                f"is no usable fit ({segment.note}): rerun with a larger --min-time")
        return segment

    def time_us(self, size: int) -> tuple[float, str]:
        if self.project_to and self.project_to != self.ranks:
            return self._projected(size), PROJECTED
        sizes, times = self.sizes, self.times_us
        where = int(np.searchsorted(sizes, size))
        if where < len(sizes) and sizes[where] == size:
            return float(times[where]), MEASURED
        if 0 < where < len(sizes):
            lo, hi = where - 1, where
            share = math.log(size / sizes[lo]) / math.log(sizes[hi] / sizes[lo])
            log_time = math.log(times[lo]) + share * math.log(times[hi] / times[lo])
            return math.exp(log_time), INTERPOLATED
        why = f"reading it at {format_size(size)} (outside the measured sizes)"
        return self._segment(size, why).time_us(size), EXTRAPOLATED

    def _projected(self, size: int) -> float:
        """The time for groups of ``project_to`` ranks, from the fit at ``ranks`` per step."""
        why = f"projecting it from {self.ranks} to {self.project_to} ranks"
        segment = self._segment(size, why)
        steps, volume = ring_scaling(self.op, self.ranks, self.project_to)
        return segment.alpha_us * steps + size * segment.us_per_byte * volume


def ring_scaling(op: str, measured: int, target: int) -> tuple[float, float]:
    """(α ratio, byte-term ratio) from ``measured`` to ``target`` ranks of a ring collective:
    steps p · f(p) and bytes f(p), f being the op's busbw factor (the module docstring)."""
    factor = collectives.get(op).busbw_factor
    steps = (target * factor(target)) / (measured * factor(measured))
    return steps, factor(target) / factor(measured)


class RunCurves:
    """Picks, for each term, the run's rows that fit it best, and says where they fall short."""

    def __init__(self, rows: list[dict], spec: StepSpec) -> None:
        self.spec = spec
        self.notes: list[str] = []
        self._cache: dict[tuple[str, str, int], MeasuredCurve] = {}
        sized = [r for r in rows if int(r["size_bytes"]) > 0 and is_combined(r)
                 and float(r["lat_us_p50"]) > 0]
        backends = list(dict.fromkeys(str(r["backend"]) for r in sized))
        self.backend = "nccl" if "nccl" in backends else (backends[0] if backends else "")
        if len(backends) > 1:
            self._note(f"the run has backends {', '.join(backends)}: the estimate uses "
                       f"{self.backend}")
        self.rows = [r for r in sized if r["backend"] == self.backend]

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def curve(self, collective: str, parallelism: str, group: int) -> MeasuredCurve:
        key = (collective, parallelism, group)
        if key not in self._cache:
            self._cache[key] = self._select(collective, parallelism, group)
        return self._cache[key]

    def _select(self, collective: str, parallelism: str, group: int) -> MeasuredCurve:
        rows = [r for r in self.rows if r["op"] == collective]
        if not rows:
            raise UsageError(f"the run has no {collective} rows: measure "
                             f"`{_HINTS.get(collective, 'commbench ' + collective)}`")
        pairwise = "pattern" in collectives.get(collective).extra_options
        if pairwise:
            present = {str(r.get("pattern") or "") for r in rows}
            pattern = next((p for p in P2P_PATTERNS if p in present), sorted(present)[0])
            rows = [r for r in rows if (r.get("pattern") or "") == pattern]
            self._note(f"pp term uses p2p {pattern} rows"
                       + (" (one-way time of one message)" if pattern == "pingpong" else ""))
        dtypes = [str(r["dtype"]) for r in rows]
        dtype = self.spec.dtype if self.spec.dtype in dtypes else max(set(dtypes),
                                                                       key=dtypes.count)
        if dtype != self.spec.dtype:
            self._note(f"the run measured {collective} in {dtype}, not {self.spec.dtype}: "
                       "times are read at the same byte size")
        rows = [r for r in rows if r["dtype"] == dtype]
        own = [r for r in rows if (r.get("dim") or "") == parallelism]
        world = [r for r in rows if not r.get("dim")]
        if own:
            rows = self._nearest_group(own, group, collective)
            size = int(rows[0]["group_size"] or rows[0]["world_size"])
            if size != group and not pairwise:
                self._project_note(parallelism, collective, size, group,
                                   f"the run's {parallelism} groups of {size} ranks")
            label = f"{collective} {parallelism}={size}"
        elif world:
            rows = self._nearest_group(world, group, collective)
            size = int(rows[0]["group_size"] or rows[0]["world_size"])
            others = self.spec.dp * self.spec.tp * self.spec.pp // group
            if pairwise and (size != group or others > 1):
                self._note(f"{parallelism} p2p term uses whole-world pairs (ranks 0-1, 2-3, ... "
                           f"of {size}), not neighbouring pipeline stages")
            elif size != group:
                self._project_note(parallelism, collective, size, group,
                                   f"the whole-world curve ({size} ranks)")
            elif others > 1:
                self._note(f"{parallelism} {collective} term uses the whole-world curve "
                           f"({size} ranks), not {parallelism}={group} groups running beside "
                           "other groups")
            label = f"{collective} whole world ({size} ranks)"
        else:
            dims = sorted({str(r.get("dim")) for r in rows})
            raise UsageError(f"the run has no {collective} rows for {parallelism} groups or the "
                             f"whole world (only {', '.join(dims)}): measure "
                             f"`{_HINTS.get(collective, 'commbench ' + collective)} --mesh ... "
                             f"--dim {parallelism}`")
        # The rows left share a curve's key but may hold several variants (in-place or not,
        # reduce ops, roots): the one with the most sizes stands for the op.
        curves = measured_curves(rows)
        key = max(curves, key=lambda k: (len(curves[k][0]), not k.variant))
        if len(curves) > 1:
            self._note(f"{collective} rows hold {len(curves)} variants "
                       f"({'; '.join(k.variant for k in curves)}): uses {key.variant}")
        sizes, times = curves[key]
        measured = int(rows[0]["group_size"] or rows[0]["world_size"])
        return MeasuredCurve(sizes=sizes, times_us=times, label=label, op=collective,
                             ranks=measured, project_to=0 if pairwise else group)

    def _project_note(self, parallelism: str, collective: str, size: int, group: int,
                      source: str) -> None:
        steps, volume = ring_scaling(collective, size, group)
        self._note(f"{parallelism} {collective} term is a projection: {parallelism}={group} "
                   f"groups were not measured; {source} is read off its α–β fit per ring step "
                   f"(latency x{steps:.3g}, byte term x{volume:.3g}); contention and the "
                   "network at that scale are not measured")

    @staticmethod
    def _nearest_group(rows: list[dict], group: int, collective: str) -> list[dict]:
        """The rows of the group size nearest ``group`` (on a log scale; p2p: any)."""
        def size_of(row):
            return int(row["group_size"] or row["world_size"])

        sizes = sorted({size_of(r) for r in rows})
        pairwise = "pattern" in collectives.get(collective).extra_options
        best = sizes[0] if pairwise else min(
            sizes, key=lambda s: (abs(math.log(s / group)), -s))
        return [r for r in rows if size_of(r) == best]
