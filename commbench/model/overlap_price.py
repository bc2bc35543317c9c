"""``estimate --overlap-from RUN``: a step's exposed communication, priced with the slowdowns an
--overlap run measured (docs/reference/metrics-and-formulas.md, "Overlap and contention").

An --overlap row's overlap_efficiency e is measured for a fixed pair of workloads run together
in one window t_both: t_both = t_comm + t_compute - e · min(t_comm, t_compute), with t_comm and
t_compute the same work's times alone. When the compute is at least as long as the
communication beside it (t_compute >= t_comm), the step grows over its compute alone by

    exposed = t_both - t_compute = t_comm · (1 - e)

which counts both sides' slowdowns (e = 1: hidden; 0: serialised; below 0: worse than
serialised). The assumptions, said with every estimate:

- data-parallel terms (DDP buckets, ZeRO/FSDP gathers and reduce-scatters) run beside
  forward/backward compute at least as long as themselves, and the --overlap run's matmul load
  stands in for that compute;
- tensor- and pipeline-parallel terms sit on the critical path: fully exposed, t_comm;
- a term takes e from the --overlap run's row of its collective at the nearest measured size
  (in log size); a collective the run lacks takes the run's median e over all its rows.

Data in, data out: nothing here prints or imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from commbench import collectives
from commbench.core.errors import UsageError
from commbench.model.estimate import Estimate, Term
from commbench.results.launches import pooled_rows
from commbench.results.schema import is_combined

OVERLAPPED = ("dp",)  # parallelisms whose calls run beside compute (module docstring)


@dataclass(frozen=True)
class ExposedTerm:
    term: Term
    efficiency: float  # e used (1 - e of the term is exposed); nan for critical-path terms
    comm_slowdown: float
    exposed_s: float
    basis: str  # where e came from: 'allreduce 1M', 'median of the run', 'critical path'

    def as_dict(self) -> dict:
        return {"collective": self.term.collective, "parallelism": self.term.parallelism,
                "bytes": self.term.nbytes, "time_s": self.term.time_s,
                "overlap_efficiency": None if math.isnan(self.efficiency) else self.efficiency,
                "comm_slowdown": None if math.isnan(self.comm_slowdown) else self.comm_slowdown,
                "exposed_s": self.exposed_s, "basis": self.basis}


@dataclass
class ExposedStep:
    overlap: str
    terms: list[ExposedTerm]
    notes: list[str] = field(default_factory=list)

    @property
    def exposed_s(self) -> float:
        return sum(term.exposed_s for term in self.terms)

    def as_dict(self) -> dict:
        return {"overlap": self.overlap, "exposed_s": self.exposed_s,
                "terms": [t.as_dict() for t in self.terms], "notes": self.notes}


def overlap_rows(rows: list[dict], name: str) -> list[dict]:
    """The --overlap rows of a run (combined rows with a compute beside them), a --repeat
    run's pooled over its launches (otherwise the nearest row of a size is its first launch's);
    a run without any is bad input for --overlap-from."""
    found = [row for row in pooled_rows(rows) if row.get("overlap") and is_combined(row)
             and not str(row["overlap"]).endswith(":0")]
    if not found:
        raise UsageError(f"--overlap-from {name}: the run has no --overlap rows with compute "
                         "(measure one with e.g. commbench allreduce --overlap matmul:1024)")
    return found


def _nearest(rows: list[dict], nbytes: int) -> dict:
    return min(rows, key=lambda r: abs(math.log2(max(1, int(r["size_bytes"])))
                                       - math.log2(max(1, nbytes))))


def exposed(result: Estimate, rows: list[dict], name: str) -> ExposedStep:
    """Each term of ``result`` (the step priced on the plain run) with its exposed time."""
    found = overlap_rows(rows, name)
    by_op: dict[str, list[dict]] = {}
    for row in found:
        by_op.setdefault(str(row["op"]), []).append(row)
    overall = float(np.median([float(r["overlap_efficiency"]) for r in found]))
    overall_slow = float(np.median([float(r["comm_slowdown"]) for r in found]))
    loads = sorted({str(r["overlap"]) for r in found})
    terms, missing = [], set()
    for term in result.terms:
        if term.parallelism not in OVERLAPPED:
            terms.append(ExposedTerm(term, math.nan, math.nan, term.time_s, "critical path"))
            continue
        mine = by_op.get(collectives.row_name(term.collective))
        if mine:
            row = _nearest(mine, term.nbytes)
            efficiency, slowdown = float(row["overlap_efficiency"]), float(row["comm_slowdown"])
            from commbench.core.sizes import format_size

            basis = f"{row['op']} {format_size(int(row['size_bytes']))}"
        else:
            missing.add(term.collective)
            efficiency, slowdown, basis = overall, overall_slow, "median of the run"
        share = 1 - min(1.0, efficiency)
        terms.append(ExposedTerm(term, efficiency, slowdown, term.time_s * share, basis))
    notes = [f"exposed communication from {name} ({', '.join(loads)}): data-parallel terms "
             "assumed beside compute at least as long as themselves, exposed = t x (1 - "
             "overlap_efficiency) at the nearest measured size; tensor- and pipeline-parallel "
             "terms on the critical path, fully exposed; the matmul load stands in for the "
             "model's compute"]
    if missing:
        notes.append(f"{name} has no --overlap rows of {', '.join(sorted(missing))}: those "
                     f"terms use the run's median overlap_efficiency ({overall:.2f})")
    return ExposedStep(overlap=", ".join(loads), terms=terms, notes=notes)
