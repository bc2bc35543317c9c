"""engine/failures.py: an NCCL hang names the rank that stopped, not the first one the
watchdog ended; NCCL ranks abort the communicator, diagnosed as the timeout it was (issue 22)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

# ---- an NCCL hang: name the rank that stopped, not the first one the watchdog ended ---------


def watch_store(beats, positions):
    """The rendezvous store as the ranks leave it: heartbeat counts and last positions."""
    import torch.distributed as dist

    from commbench.engine.coordination import WATCH_PREFIX

    store = dist.HashStore()
    watch = dist.PrefixStore(WATCH_PREFIX, store)
    for rank, count in enumerate(beats):
        if count:
            watch.add(f"hb/{rank}", count)
    for rank, where in positions.items():
        watch.set(f"where/{rank}", where)
    return store


AT_1M = "allreduce at 1M (nccl)"


def test_a_stopped_rank_is_named_when_the_watchdog_ends_the_others():
    """Rank 2 stopped (SIGSTOP, a host hang): its heartbeat stood still while ranks 0 and 1
    waited in the allreduce until NCCL's watchdog ended them with SIGABRT. Before, the message
    said 'rank 0 died (SIGABRT)'."""
    from commbench.engine.failures import explain

    store = watch_store([160, 158, 12], {0: AT_1M, 1: AT_1M, 2: AT_1M})
    text = explain({0: -6, 1: -6}, store, 3)
    assert text.startswith(f"rank 2 stopped responding during {AT_1M}; rank 0, 1 were then "
                           "ended by SIGABRT"), text
    assert "rank 0 died" not in text


def test_a_lagging_rank_is_named_when_every_rank_was_aborted():
    """A rank stuck on its GPU beats on, and its watchdog ends it too: its position tells."""
    from commbench.engine.failures import explain

    store = watch_store([90, 91, 90], {0: AT_1M, 1: "allreduce at 512K (nccl)", 2: AT_1M})
    text = explain({0: -6, 1: -6, 2: -6}, store, 3)
    assert text.startswith("rank 1 was at allreduce at 512K (nccl)"), text


def test_a_lone_abort_is_still_the_rank_that_died():
    """One rank aborting on its own (no rank stopped or behind) is the cause, as before."""
    from commbench.engine.failures import explain

    store = watch_store([40, 41, 40], {0: AT_1M, 1: AT_1M, 2: AT_1M})
    assert explain({1: -6}, store, 3) == (f"rank 1 died (SIGABRT) during {AT_1M}; the other "
                                          "ranks were stopped")


def test_nccl_ranks_abort_the_communicator_instead_of_the_process(monkeypatch):
    """TORCH_NCCL_ASYNC_ERROR_HANDLING=2 before any NCCL group, unless the user chose."""
    from commbench.engine import session as session_module
    from commbench.engine.failures import RankFailure
    from commbench.launch.environment import RankEnv

    def no_store(*args, **kwargs):
        raise OSError("refused")

    monkeypatch.setattr(session_module, "connect", no_store)
    env = RankEnv("torchrun", 0, 2, 0, 2, "127.0.0.1", 1, False)
    for name in ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    with pytest.raises(RankFailure):
        session_module.Session(env, 5.0, ("gloo",), cuda=False).join()
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in os.environ
    with pytest.raises(RankFailure):
        session_module.Session(env, 5.0, ("nccl",), cuda=False).join()
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "2"
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    session_module.nccl_error_handling()
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def test_an_aborted_communicator_is_diagnosed_as_the_timeout_it_was():
    from commbench.engine.failures import diagnose

    watch = SimpleNamespace(silent_ranks=lambda: ([2], []), lagging=lambda position: [])
    failure = diagnose(RuntimeError("NCCL communicator was aborted on rank 0."), AT_1M, watch,
                       5.0)
    assert failure.kind == "timeout"
    assert str(failure) == f"timeout after 5s in {AT_1M}: rank 2 stopped responding"
