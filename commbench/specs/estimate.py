"""The training step ``commbench estimate`` prices: a frozen, torch-free spec.

It lives here, not beside the estimate, because the curves the estimate reads also need a step's
dtype and layout; with the spec in model/estimate.py the two modules imported each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepSpec:
    """One training step's layout, validated (see ``step_spec``)."""

    params: float
    dtype: str  # the row dtype name, e.g. bfloat16
    dtype_bytes: int
    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: str = "0"  # 0 | 1 | 2 | 3 (fsdp is 3)
    bucket_bytes: int = 25 << 20
    first_bucket_bytes: int = 1 << 20
    layers: int | None = None
    hidden: int | None = None
    seq: int | None = None
    micro_batch: int = 1
    micro_batches: int = 1
    sequence_parallel: bool = False

    @property
    def params_per_rank(self) -> int:
        return round(self.params / (self.tp * self.pp))

    @property
    def grad_bytes(self) -> int:
        return self.params_per_rank * self.dtype_bytes

    @property
    def layers_per_stage(self) -> int | None:
        return None if self.layers is None else self.layers // self.pp

    @property
    def activation_bytes(self) -> int:
        return self.micro_batch * (self.seq or 0) * (self.hidden or 0) * self.dtype_bytes


@dataclass(frozen=True)
class StepOptions:
    """A step's layout as the user typed it (``estimate --params ...``), before ``step_spec``
    parses and checks it: one object instead of fifteen positional arguments, and the one
    place that knows each option's default (``given`` names the options a user changed)."""

    params: str | None = None
    dtype: str = "bf16"
    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: str = "0"
    bucket: str = "25M"
    first_bucket: str = "1M"
    layers: int | None = None
    hidden: int | None = None
    seq: int | None = None
    micro_batch: int = 1
    micro_batches: int = 1
    sequence_parallel: bool = False

    def given(self) -> list[str]:
        """The options set away from their defaults, as flags (--dp, --sequence-parallel)."""
        defaults = StepOptions()
        return [f"--{name.replace('_', '-')}" for name in self.__dataclass_fields__
                if getattr(self, name) != getattr(defaults, name)]
