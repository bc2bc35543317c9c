"""engine/faults.py: the faults COMMBENCH_FAULT injects, asked or driven directly (no process).

The flaky and busy faults: a delay on some visits only (every K-th, seeded at a probability,
or the first K), so a rank is slow in some rounds and fine in others. No process: the injector
is asked directly.

The late fault: a rank that sleeps after every K-th call before returning, so it starts the
next call late (the straggler --per-call names). No process: the wrapper is driven with a
stand-in for torch.distributed and a recorded sleep.

The proportional slowdown used to measure compare's power (COMMBENCH_FAULT=slow=F): F - 1
more of the same call on average, on scratch copies, never on the caller's tensors."""

import pytest

from commbench.engine import faults

# --- flaky and busy ---

LARGE = 262144


def slow_visits(text: str, rank: int, visits: int, size: int = LARGE) -> list[int]:
    injector = faults.Injector(rank, faults.parse(text))
    found = []
    for visit in range(visits):
        injector.at("p2p", size)
        if injector.action(*faults.WRAPPING) is not None:
            found.append(visit)
        injector.at("p2p", 8)  # another size: not a visit of a fault bound to LARGE
        assert injector.action(*faults.WRAPPING) is None
    return found


def test_every_second_visit_by_default():
    assert slow_visits(f"flaky=0.01:3:p2p:{LARGE}", 3, 8) == [0, 2, 4, 6]
    assert faults.parse("flaky=0.01")[0].every == 2


def test_every_kth_visit():
    assert slow_visits(f"flaky=0.01,3:3:p2p:{LARGE}", 3, 9) == [0, 3, 6]


def test_only_the_ranks_named():
    assert slow_visits(f"flaky=0.01:3:p2p:{LARGE}", 2, 8) == []


def test_a_probability_is_seeded_by_rank_and_visit():
    first = slow_visits(f"flaky=0.01,0.3:3:p2p:{LARGE}", 3, 200)
    assert first == slow_visits(f"flaky=0.01,0.3:3:p2p:{LARGE}", 3, 200)  # a rerun: the same
    assert 30 < len(first) < 90  # about 60 of 200
    assert first != slow_visits(f"flaky=0.01,0.3:*:p2p:{LARGE}", 4, 200)


@pytest.mark.parametrize("text", ["flaky=0.01,0", "flaky=0.01,2.5", "flaky=0.01,-1"])
def test_bad_every_is_refused(text):
    with pytest.raises(ValueError, match="flaky"):
        faults.parse(text)


def test_busy_slows_the_first_visits_only():
    """busy: a rank busy for a while, then free; a retest after it finds the rank normal."""
    assert slow_visits(f"busy=0.01,6:3:p2p:{LARGE}", 3, 12) == [0, 1, 2, 3, 4, 5]
    assert slow_visits(f"busy=0.01:3:p2p:{LARGE}", 3, 12) == [0, 1, 2, 3]
    assert slow_visits(f"busy=0.01,6:3:p2p:{LARGE}", 2, 12) == []


@pytest.mark.parametrize("text", ["busy=0.01,0", "busy=0.01,2.5"])
def test_bad_visits_are_refused(text):
    with pytest.raises(ValueError, match="busy's VISITS"):
        faults.parse(text)


# --- late ---


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


# --- slow ---


class Tensor:
    def __init__(self, shape, origin=None):
        self.shape, self.origin = shape, origin

    def clone(self):
        return Tensor(self.shape, origin=self)


@pytest.mark.parametrize(("factor", "extra"), [(1.25, 2), (1.5, 4), (2.0, 8), (3.0, 16)])
def test_a_slowdown_of_f_makes_f_minus_1_extra_calls_per_call(factor, extra):
    calls = []
    slowdown = faults._Slowdown()
    mine = Tensor((256,))
    for _ in range(8):
        slowdown.after(factor, "all_reduce", lambda t, **kw: calls.append(t), (mine,), {})
    assert len(calls) == extra
    assert all(t is not mine and t.origin is mine for t in calls)  # scratch copies only


def test_a_new_size_gets_new_copies_and_the_old_ones_go():
    slowdown = faults._Slowdown()
    seen = []
    for shape in ((4,), (4,), (8,)):
        slowdown.after(2.0, "all_reduce", lambda t, **kw: seen.append(t), (Tensor(shape),), {})
    assert seen[0] is seen[1] and seen[2].shape == (8,) and len(slowdown.scratch) == 1


def test_slow_is_a_fault_action_with_its_factor():
    (fault,) = faults.parse("slow=1.5:*:allreduce")
    assert fault.action == "slow" and fault.seconds == 1.5 and fault.op == "allreduce"
    assert "slow" in faults.WRAPPING
