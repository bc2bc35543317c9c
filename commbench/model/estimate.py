"""Communication time per training step, per parallelism and in total, from a run's curves.

Nothing overlaps with compute or with other communication: every call's time is added (an upper
bound on what a step waits for, and what a step costs when nothing hides communication).

Notation: P parameters, b bytes per element of the training dtype (gradients and activations are
in it too), data / tensor / pipeline parallel degrees dp, tp, pp, L layers, h hidden size,
s sequence length, mb micro-batch size, m micro-batches per step (gradient-accumulation steps,
which are also the pipeline's micro-batches). Per rank:

    parameters           N = P / (tp · pp)            (Megatron shards every layer tp ways and
                                                       gives each stage L / pp layers)
    gradient bytes       G = N · b
    layers on a stage    L_s = L / pp
    activation bytes     A = mb · s · h · b           (one TP collective / one p2p message)

Sizes follow commbench's convention (docs/reference/metrics-and-formulas.md#sizes): the largest
buffer a rank holds, so the curve of the row with that ``size_bytes`` is the right one to read:
allreduce -> the buffer; allgather -> the gathered output (N_unit · b, not the shard a rank sends);
reduce-scatter -> the input (the full gradient bucket, not the shard a rank keeps); p2p -> the
message.

Terms (each is ``calls`` calls of one collective at one size):

dp, --zero 0 (DDP)
    PyTorch's reducer packs the gradients, in reverse order, into buckets: the first capped at
    ``first_bucket`` (1 MiB, ``dist._DEFAULT_FIRST_BUCKET_BYTES``), the rest at ``bucket``
    (``bucket_cap_mb`` = 25 MiB), one allreduce each. Parameter boundaries are not known, so G is
    cut exactly: one bucket of min(first, G), then floor((G − first) / bucket) full buckets,
    then one bucket of the remainder. Once per step: gradient accumulation runs under
    ``no_sync()``.
dp, --zero 1 / 2 (ZeRO-1/2, FSDP SHARD_GRAD_OP)
    Gradients are reduce-scattered and the updated parameters all-gathered, both in ``bucket``
    buckets of G (no first-bucket rule; DeepSpeed's reduce_bucket_size / allgather_bucket_size
    default to 5e8 elements, pass ``--bucket`` to mimic it). ZeRO-1 reduce-scatters once per
    step; ZeRO-2 keeps only gradient shards, so it reduce-scatters every micro-batch (× m). The
    allgather is once per step.
dp, --zero 3 / fsdp (ZeRO-3, FSDP FULL_SHARD)
    The unit is one layer when ``layers`` is given (FSDP wrapped per transformer block:
    L_s units of G / L_s bytes), else the whole flat parameter buffer (1 unit of G). Every
    micro-batch all-gathers each unit in forward and again in backward (parameters are freed
    after use) and reduce-scatters each unit's gradients: 2 · L_s · m allgathers and
    L_s · m reduce-scatters.
tp (Megatron tensor parallelism; needs layers, hidden, seq)
    Per layer and micro-batch, 2 allreduces of A in forward (after attention and after the MLP)
    and 2 in backward (the input gradients of the two column-parallel GEMMs): 4 · L_s · m.
    With sequence parallelism each allreduce becomes an allgather of A (gathered output) plus a
    reduce-scatter of A (input): 4 · L_s · m of each (2 of each in forward, 2 in backward).
pp (pipeline, needs hidden and seq)
    Per micro-batch and per stage boundary, one p2p of A forward (activations) and one backward
    (their gradients): 2 · (pp − 1) · m transfers, summed over all boundaries (the pipeline's
    whole p2p time, as if no transfer overlapped another; one interior stage sends two and
    receives two per micro-batch). With sequence parallelism Megatron sends the sequence shard,
    A / tp.

Time per call comes from the run: rows of that collective, for the mesh dimension that carries
the term (``dim`` == dp / tp / pp) when the run has them, else the whole-world rows (dim ""),
with the mismatch in the notes. At a measured size the median is used ("measured"); between
measured sizes, log-log linear interpolation of the medians ("interpolated"); outside them the
piecewise α–β fit of ``commbench.model.fit`` ("model fit (extrapolated)"). p2p prefers the
pingpong pattern (one-way time of one message, as a stage boundary sends one activation and
waits for it), then unidir, ring, bidir. Data in, data out: nothing here prints or imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commbench.core.dtypes import FLOATING, ITEMSIZE
from commbench.core.errors import UsageError
from commbench.core.sizes import parse_size
from commbench.model.curves import EXTRAPOLATED, RunCurves
from commbench.specs.estimate import StepSpec
from commbench.specs.measure import parse_dtype

ZERO_LEVELS = ("0", "1", "2", "3", "fsdp")
PARALLELISMS = ("dp", "tp", "pp")
# The training dtypes (gradients and activations): commbench's float dtypes, any spelling.
FLOAT_DTYPES = FLOATING
COUNT_UNITS = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
NO_OVERLAP = "assumes no overlap with compute"


def parse_count(text: str) -> float:
    """'7B' -> 7e9: K, M, B, T are powers of 1000 (parameter counts, not bytes)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([A-Za-z]?)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if not match or unit not in COUNT_UNITS:
        raise UsageError(f"bad --params {text!r}: use a count such as 7B, 350M, 1.3B or 7e9")
    value = float(match.group(1)) * COUNT_UNITS[unit]
    if value < 1:
        raise UsageError(f"bad --params {text!r}: a model has at least one parameter")
    return value


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"bad --{name} {value}: it must be at least 1")


def _bytes(option: str, text: str) -> int:
    try:
        return parse_size(text)
    except UsageError as error:
        raise UsageError(f"bad --{option}: {error}") from None


def step_spec(params: str, dtype: str = "bf16", dp: int = 1, tp: int = 1, pp: int = 1,
              zero: str = "0", bucket: str = "25M", first_bucket: str = "1M",
              layers: int | None = None, hidden: int | None = None, seq: int | None = None,
              micro_batch: int = 1, micro_batches: int = 1,
              sequence_parallel: bool = False) -> StepSpec:
    """Parse and check the command's inputs; a layout that makes no sense is a UsageError."""
    count = parse_count(params)
    try:
        row_dtype = parse_dtype(dtype)
    except UsageError:
        row_dtype = ""
    if row_dtype not in FLOAT_DTYPES:
        raise UsageError(f"bad --dtype {dtype!r}: use one of bf16, fp16, fp32, fp64 (or their "
                         "torch names)")
    itemsize = ITEMSIZE[row_dtype]
    level = str(zero).strip().lower()
    if level not in ZERO_LEVELS:
        raise UsageError(f"bad --zero {zero!r}: use 0 (DDP), 1, 2, 3 or fsdp")
    for name, value in (("dp", dp), ("tp", tp), ("pp", pp), ("layers", layers),
                        ("hidden", hidden), ("seq", seq), ("micro-batch", micro_batch),
                        ("micro-batches", micro_batches)):
        _positive(name, value)
    if dp * tp * pp == 1:
        raise UsageError("nothing to estimate: dp = tp = pp = 1 is one rank, which does not "
                         "communicate")
    if count < tp * pp:
        raise UsageError(f"--params {params} cannot be split over tp·pp = {tp * pp} ranks")
    missing = [f"--{name}" for name, value in (("layers", layers), ("hidden", hidden),
                                                ("seq", seq)) if value is None]
    if tp > 1 and missing:
        raise UsageError(f"--tp {tp} needs {', '.join(missing)}: tensor-parallel traffic is "
                         "micro-batch x seq x hidden per layer")
    if pp > 1 and (hidden is None or seq is None):
        raise UsageError(f"--pp {pp} needs --hidden and --seq: a stage sends micro-batch x seq x "
                         "hidden activations")
    if layers is not None and layers % pp:
        raise UsageError(f"--layers {layers} cannot be split evenly over --pp {pp} stages")
    if hidden is not None and hidden % tp:
        raise UsageError(f"--hidden {hidden} is not divisible by --tp {tp} (Megatron splits it)")
    if sequence_parallel and tp == 1:
        raise UsageError("--sequence-parallel needs --tp > 1 (it shards the sequence over tp)")
    if sequence_parallel and seq is not None and seq % tp:
        raise UsageError(f"--seq {seq} is not divisible by --tp {tp}, as sequence parallelism "
                         "needs")
    return StepSpec(params=count, dtype=row_dtype, dtype_bytes=itemsize, dp=dp, tp=tp, pp=pp,
                    zero="3" if level == "fsdp" else level,
                    bucket_bytes=_bytes("bucket", bucket),
                    first_bucket_bytes=_bytes("first-bucket", first_bucket), layers=layers,
                    hidden=hidden, seq=seq, micro_batch=micro_batch,
                    micro_batches=micro_batches, sequence_parallel=sequence_parallel)


@dataclass(frozen=True)
class Call:
    """``calls`` calls of ``collective`` (row op name) at ``nbytes`` (commbench's size)."""

    parallelism: str
    collective: str
    nbytes: int
    calls: int
    what: str


def _buckets(total: int, cap: int, first: int | None = None) -> list[tuple[int, int, str]]:
    """(size, count, which) of the buckets ``total`` bytes fill."""
    out = []
    if first:
        head = min(first, total)
        out.append((head, 1, "first bucket"))
        total -= head
    full, rest = divmod(total, cap)
    if full:
        out.append((cap, full, "full buckets"))
    if rest:
        out.append((rest, 1, "last bucket"))
    return out


def plan(spec: StepSpec) -> tuple[list[Call], list[str]]:
    """Every call a step makes (the formulas of the module docstring), and notes."""
    calls: list[Call] = []
    notes: list[str] = []
    m = spec.micro_batches
    grads = spec.grad_bytes
    if spec.dp == 1:
        notes.append("dp = 1: no data-parallel communication"
                     + (f" (--zero {spec.zero} has nothing to shard)" if spec.zero != "0" else ""))
    elif spec.zero == "0":
        for size, count, which in _buckets(grads, spec.bucket_bytes, spec.first_bucket_bytes):
            calls.append(Call("dp", "allreduce", size, count, f"DDP gradients, {which}"))
    elif spec.zero in ("1", "2"):
        scatters = m if spec.zero == "2" else 1
        for size, count, which in _buckets(grads, spec.bucket_bytes):
            calls.append(Call("dp", "reduce_scatter", size, count * scatters,
                              f"ZeRO-{spec.zero} gradients, {which}"
                              + (", every micro-batch" if scatters > 1 else "")))
        for size, count, which in _buckets(grads, spec.bucket_bytes):
            calls.append(Call("dp", "allgather", size, count,
                              f"ZeRO-{spec.zero} updated parameters, {which}"))
    else:
        units = spec.layers_per_stage or 1
        unit = (round(spec.params_per_rank / units) * spec.dtype_bytes if spec.layers
                else grads)
        name = "per layer" if spec.layers else "whole model, one flat unit"
        calls += [
            Call("dp", "allgather", unit, units * m, f"ZeRO-3/FSDP forward gather, {name}"),
            Call("dp", "allgather", unit, units * m, f"ZeRO-3/FSDP backward re-gather, {name}"),
            Call("dp", "reduce_scatter", unit, units * m, f"ZeRO-3/FSDP gradients, {name}"),
        ]
    if spec.tp > 1:
        per_phase = 2 * spec.layers_per_stage * m
        act = spec.activation_bytes
        if spec.sequence_parallel:
            for phase in ("forward", "backward"):
                calls.append(Call("tp", "allgather", act, per_phase, f"TP+SP {phase}"))
                calls.append(Call("tp", "reduce_scatter", act, per_phase, f"TP+SP {phase}"))
        else:
            calls.append(Call("tp", "allreduce", act, per_phase,
                              "TP forward (after attention and MLP)"))
            calls.append(Call("tp", "allreduce", act, per_phase,
                              "TP backward (input gradients)"))
    if spec.pp > 1:
        message = spec.activation_bytes // (spec.tp if spec.sequence_parallel else 1)
        per_direction = (spec.pp - 1) * m
        calls.append(Call("pp", "p2p", message, per_direction, "PP activations, forward"))
        calls.append(Call("pp", "p2p", message, per_direction, "PP gradients, backward"))
        boundaries = ("the 1 stage boundary" if spec.pp == 2
                      else f"all {spec.pp - 1} stage boundaries")
        notes.append(f"pp term sums {boundaries} (one interior stage sends 2 and receives 2 "
                     "messages per micro-batch)")
        if m < spec.pp:
            notes.append(f"{m} micro-batch(es) for {spec.pp} stages: most of the pipeline "
                         "idles (bubble), which this estimate does not count")
    return calls, notes


@dataclass(frozen=True)
class Term:
    parallelism: str
    collective: str
    nbytes: int
    calls: int
    per_call_us: float
    source: str
    what: str

    @property
    def time_s(self) -> float:
        return self.calls * self.per_call_us * 1e-6

    def as_dict(self) -> dict:
        return {"parallelism": self.parallelism, "collective": self.collective,
                "bytes": self.nbytes, "calls": self.calls, "time_s": self.time_s,
                "source": self.source, "what": self.what, "per_call_us": self.per_call_us}


@dataclass
class Estimate:
    terms: list[Term]
    notes: list[str] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return sum(term.time_s for term in self.terms)

    def subtotals(self) -> dict[str, float]:
        """Seconds per parallelism, in dp, tp, pp order (only those with terms)."""
        return {p: sum(t.time_s for t in self.terms if t.parallelism == p)
                for p in PARALLELISMS if any(t.parallelism == p for t in self.terms)}

    def as_dict(self) -> dict:
        return {"total_s": self.total_s, "terms": [t.as_dict() for t in self.terms],
                "subtotals_s": self.subtotals(), "notes": self.notes}


def estimate(rows: list[dict], spec: StepSpec) -> Estimate:
    """Time every planned call on the run's curves."""
    calls, notes = plan(spec)
    curves = RunCurves(rows, spec)
    degree = {"dp": spec.dp, "tp": spec.tp, "pp": spec.pp}
    terms = []
    for call in calls:
        curve = curves.curve(call.collective, call.parallelism, degree[call.parallelism])
        per_call, source = curve.time_us(call.nbytes)
        terms.append(Term(call.parallelism, call.collective, call.nbytes, call.calls, per_call,
                          source, call.what))
    if any(t.source == EXTRAPOLATED for t in terms):
        notes.append("sizes outside the measured range use the run's α–β model fit "
                     "(extrapolated): measure them for a firmer number")
    return Estimate(terms=terms, notes=[*curves.notes, *notes, NO_OVERLAP])
