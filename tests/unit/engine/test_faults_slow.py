"""The proportional slowdown used to measure compare's power (COMMBENCH_FAULT=slow=F): F - 1
more of the same call on average, on scratch copies, never on the caller's tensors."""

import pytest

from commbench.engine import faults


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
