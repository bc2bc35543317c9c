"""engine/timers.py: CUDA graphs, with a fake of the CUDA graph API: the ranks meet between
capture and replay, thread-local capture where torch has it (issue 22)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from commbench.engine.timers import CudaEventTimer, CudaGraphTimer

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


class FakeCuda:
    """Just enough of torch.cuda for the timers: graphs count their captures."""

    def __init__(self):
        self.captures = []
        self.syncs = 0
        outer = self

        class Graph:
            def __init__(self):
                self.calls = []

            def replay(self):
                for call in self.calls:
                    call()

        class Event:
            def __init__(self, enable_timing=True):
                pass

            def record(self):
                pass

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 1.0

        class Stream:
            def wait_stream(self, other):
                pass

            def synchronize(self):
                outer.syncs += 1

        self.CUDAGraph, self.Event, self.Stream = Graph, Event, Stream
        self._recording = None

    def current_stream(self):
        return self.Stream()

    @contextlib.contextmanager
    def stream(self, stream):
        yield

    @contextlib.contextmanager
    def graph(self, graph, stream=None):
        self.captures.append(graph)
        self._recording = graph
        yield
        self._recording = None

    def synchronize(self):
        pass


def fake_torch():
    cuda = FakeCuda()
    return SimpleNamespace(cuda=cuda), cuda


def test_cuda_graphs_are_keyed_on_the_call_itself_not_its_id():
    torch, cuda = fake_torch()
    timer = CudaGraphTimer(torch_module=torch, events=SimpleNamespace(block=lambda f, n: 1.0))
    first = lambda: None  # noqa: E731
    timer.block(first, 10)
    timer.block(first, 10)
    assert len(cuda.captures) == 1  # replayed, not captured again
    second = lambda: None  # noqa: E731 (a new size's call: a new object)
    timer.block(second, 10)
    assert len(cuda.captures) == 2
    assert list(timer._graphs) == [(second, 10)]  # the previous size's graph is gone
    assert all(key[0] is second for key in timer._graphs)  # the object is held, not an id


def test_the_check_replays_a_one_call_graph_of_the_same_call_next_to_the_timing_one():
    torch, cuda = fake_torch()
    timer = CudaGraphTimer(torch_module=torch, events=SimpleNamespace(block=lambda f, n: 1.0))
    call = lambda: None  # noqa: E731
    timer.block(call, 10)
    graph = timer.graph_for(call, 1)
    assert len(cuda.captures) == 2 and set(timer._graphs) == {(call, 10), (call, 1)}
    assert timer.graph_for(call, 1) is graph


def test_blocking_waits_for_every_call(monkeypatch):
    torch, cuda = fake_torch()
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    calls = []
    CudaEventTimer(blocking=True).block(lambda: calls.append(1), 7)
    assert len(calls) == 7 and cuda.syncs == 7
    CudaEventTimer(blocking=False).block(lambda: calls.append(1), 7)
    assert cuda.syncs == 7  # pipelined: no wait between calls
