"""The late fault: a rank that sleeps after every K-th call before returning, so it starts the
next call late (the straggler --per-call names). No process: the wrapper is driven with a
stand-in for torch.distributed and a recorded sleep."""

import pytest

from commbench.engine import faults


class FakeDist:
    """What the wrapper reads of torch.distributed: the real function is a recorder."""

    def __init__(self):
        self.made = []

    def all_reduce(self, tensor, group=None):
        self.made.append(("all_reduce", tensor))


def late_calls(text: str, rank: int, calls: int, monkeypatch) -> list[int]:
    """Which calls (from 0) the rank left late, and by how long."""
    slept = []
    monkeypatch.setattr(faults.time, "sleep", slept.append)
    injector = faults.Injector(rank, faults.parse(text))
    injector.at("allreduce", 64)
    dist = FakeDist()
    wrapped = faults._wrapped(dist, injector, "all_reduce", dist.all_reduce, 0)
    late = []
    for index in range(calls):
        before = len(slept)
        wrapped(f"t{index}")
        if len(slept) > before:
            late.append((index, slept[-1]))
    assert [name for name, _ in dist.made] == ["all_reduce"] * calls  # every call made
    return late


def test_every_fourth_call_by_default(monkeypatch):
    late = late_calls("late=0.005:1", 1, 12, monkeypatch)
    assert late == [(3, 0.005), (7, 0.005), (11, 0.005)]
    assert faults.parse("late=0.005")[0].every == 4


def test_every_kth_call_and_only_the_ranks_named(monkeypatch):
    assert [i for i, _ in late_calls("late=0.002,3:1", 1, 9, monkeypatch)] == [2, 5, 8]
    assert late_calls("late=0.002,3:1", 0, 9, monkeypatch) == []


def test_late_wraps_the_calls_and_refuses_a_fraction():
    assert "late" in faults.WRAPPING
    with pytest.raises(ValueError, match="whole number of calls"):
        faults.parse("late=0.01,0.5")
