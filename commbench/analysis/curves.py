"""A run's curves read at any size, for the step-time estimate: the medians where the run
measured, log-log interpolation between its sizes, the piecewise α–β fit outside them; and
which rows make the curve of a term (its mesh dimension's groups where the run has them, else
the whole world, with a note saying so). Data in, data out: nothing here imports torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from commbench import collectives
from commbench.analysis.model import CurveFit, fit_curve, measured_curves
from commbench.errors import UsageError
from commbench.results.schema import is_combined

if TYPE_CHECKING:
    from commbench.analysis.estimate import StepSpec

# p2p rows a pipeline term prefers: the one-way time of one message first.
P2P_PATTERNS = ("pingpong", "unidir", "ring", "bidir")
MEASURED, INTERPOLATED, EXTRAPOLATED = "measured", "interpolated", "model fit (extrapolated)"
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
    _fit: CurveFit | None = field(default=None, repr=False)

    def time_us(self, size: int) -> tuple[float, str]:
        sizes, times = self.sizes, self.times_us
        where = int(np.searchsorted(sizes, size))
        if where < len(sizes) and sizes[where] == size:
            return float(times[where]), MEASURED
        if 0 < where < len(sizes):
            lo, hi = where - 1, where
            share = math.log(size / sizes[lo]) / math.log(sizes[hi] / sizes[lo])
            log_time = math.log(times[lo]) + share * math.log(times[hi] / times[lo])
            return math.exp(log_time), INTERPOLATED
        if len(sizes) < 2:
            raise UsageError(f"the {self.label} curve has one size: measure a sweep to "
                             "extrapolate to other sizes")
        if self._fit is None:
            self._fit = fit_curve(sizes, times)
        return self._fit.time_us(size), EXTRAPOLATED


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
                self._note(f"{parallelism} terms use the run's {parallelism} groups of {size} "
                           f"ranks, not {parallelism}={group}")
            label = f"{collective} {parallelism}={size}"
        elif world:
            rows = self._nearest_group(world, group, collective)
            size = int(rows[0]["group_size"] or rows[0]["world_size"])
            others = self.spec.dp * self.spec.tp * self.spec.pp // group
            if pairwise and (size != group or others > 1):
                self._note(f"{parallelism} p2p term uses whole-world pairs (ranks 0-1, 2-3, ... "
                           f"of {size}), not neighbouring pipeline stages")
            elif size != group or others > 1:
                self._note(f"{parallelism} {collective} term uses the whole-world curve "
                           f"({size} ranks), not {parallelism}={group} groups")
            label = f"{collective} whole world ({size} ranks)"
        else:
            dims = sorted({str(r.get("dim")) for r in rows})
            raise UsageError(f"the run has no {collective} rows for {parallelism} groups or the "
                             f"whole world (only {', '.join(dims)}): measure "
                             f"`{_HINTS.get(collective, 'commbench ' + collective)} --mesh ... "
                             f"--dim {parallelism}`")
        # The rows left share every part of a curve's key: they are one curve.
        ((sizes, times),) = measured_curves(rows).values()
        return MeasuredCurve(sizes=sizes, times_us=times, label=label)

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
