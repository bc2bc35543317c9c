"""engine/timers.py: CUDA graphs, with a fake of the CUDA graph API: the ranks meet between
capture and replay, thread-local capture where torch has it (issue 22)."""

from __future__ import annotations

from types import SimpleNamespace

# ---- CUDA graphs: a barrier between capture and replay, thread-local capture ---------------


class GraphCuda:
    """Just enough of torch.cuda for CudaGraphTimer, logging what happens in order."""

    def __init__(self, log, takes_mode=True):
        import contextlib

        self.log = log
        outer = self

        class CUDAGraph:
            def replay(self):
                log.append("replay")

        class Stream:
            def wait_stream(self, other):
                pass

        self.CUDAGraph, self.Stream = CUDAGraph, Stream
        self.stream = lambda stream: contextlib.nullcontext()
        if takes_mode:
            def graph(graph, pool=None, stream=None, capture_error_mode="global"):
                outer.log.append(f"capture {capture_error_mode}")
                return contextlib.nullcontext()
        else:
            def graph(graph, pool=None, stream=None):
                outer.log.append("capture")
                return contextlib.nullcontext()
        self.graph = graph

    def current_stream(self):
        return self.Stream()

    def synchronize(self):
        self.log.append("synchronize")


def graph_timer(log, **kw):
    from commbench.engine.timers import CudaGraphTimer

    events = SimpleNamespace(block=lambda replay, n: replay() or 1.0)
    return CudaGraphTimer(torch_module=SimpleNamespace(cuda=GraphCuda(log, **kw)),
                          events=events, barrier=lambda: log.append("barrier"))


def test_the_ranks_meet_after_a_capture_before_the_first_replay():
    log = []
    timer = graph_timer(log)
    call = lambda: log.append("call")  # noqa: E731
    timer.block(call, 2)
    timer.block(call, 2)
    assert log == ["capture thread_local", "call", "call", "synchronize", "barrier", "replay",
                   "replay"]  # one barrier per capture, none per replay


def test_capture_falls_back_where_torch_has_no_capture_error_mode():
    log = []
    graph_timer(log, takes_mode=False).block(lambda: None, 1)
    assert log == ["capture", "synchronize", "barrier", "replay"]


def test_the_default_barrier_is_the_control_groups(monkeypatch):
    """The sweep makes CudaGraphTimer() without a barrier: it meets on the default group, which
    is commbench's gloo control group (never the measured NCCL one)."""
    import torch.distributed as dist

    from commbench.engine.timers import CudaGraphTimer

    met = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "barrier", lambda *a, **kw: met.append((a, kw)))
    log = []
    timer = CudaGraphTimer(torch_module=SimpleNamespace(cuda=GraphCuda(log)),
                           events=SimpleNamespace(block=lambda replay, n: replay() or 1.0))
    timer.block(lambda: None, 3)
    assert met == [((), {})]
