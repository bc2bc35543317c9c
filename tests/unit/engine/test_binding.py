"""engine.binding: which CPU a rank's measuring thread goes on, and that settling binds the
calling thread alone while every other thread of the process is spread over the allowed CPUs."""

import os
import threading

import pytest

from commbench.engine.binding import Binding, choose

CPUS = [0, 1, 2, 3]


def test_auto_binds_local_cpu_ranks_that_fit_the_cores():
    assert [choose("auto", r, 4, "local", False, CPUS) for r in range(4)] == [0, 1, 2, 3]
    assert choose("auto", 1, 2, "local", False, [4, 7]) == 7  # the allowed set, in order


@pytest.mark.parametrize("why", ["oversubscribed", "external", "cuda"])
def test_auto_leaves_alone_what_it_does_not_own(why):
    world, launcher, cuda = {"oversubscribed": (5, "local", False),
                             "external": (2, "torchrun", False),
                             "cuda": (2, "local", True)}[why]
    assert choose("auto", 0, world, launcher, cuda, CPUS) is None


def test_core_binds_anyway_round_robin_and_none_never():
    assert [choose("core", r, 6, "slurm", True, CPUS) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert choose("none", 0, 2, "local", False, CPUS) is None
    assert choose("core", 0, 2, "local", False, []) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity")
                    or len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to tell apart")
def test_settle_binds_the_caller_and_spreads_a_thread_it_created():
    """A thread started by a bound thread inherits its one CPU (as gloo's threads of a group
    made after binding do); settle must give it every allowed CPU back."""
    allowed = sorted(os.sched_getaffinity(0))
    found, go = {}, threading.Event()

    def body():
        found["tid"] = threading.get_native_id()
        go.wait(10)
        found["after"] = os.sched_getaffinity(0)

    def scenario():
        binding = Binding(allowed[1], allowed)
        binding.settle()
        worker = threading.Thread(target=body)
        worker.start()
        while "tid" not in found:
            pass
        found["inherited"] = os.sched_getaffinity(found["tid"])
        binding.settle()
        found["caller"] = os.sched_getaffinity(0)
        go.set()
        worker.join()

    runner = threading.Thread(target=scenario)  # keep pytest's own thread unbound
    runner.start()
    runner.join()
    assert found["inherited"] == {allowed[1]}
    assert found["caller"] == {allowed[1]}
    assert found["after"] == set(allowed)


def test_unbound_settle_touches_nothing():
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    Binding(None, [0]).settle()
    if before is not None:
        assert os.sched_getaffinity(0) == before
