"""Timers for one block of back-to-back iterations.

The timed path holds nothing but the loop: the collective is a pre-bound callable, the loop
uses ``itertools.repeat`` (no counter object), and everything else (barriers, bookkeeping,
logging) happens between blocks.

- CPU work (gloo on CPU tensors) completes inside the call, so ``perf_counter_ns`` around the
  block is exact.
- CUDA work is asynchronous: CUDA events are recorded on the current stream, which
  ProcessGroupNCCL makes wait for the collective, and read after synchronising (nccl-tests
  times with the host clock around a stream synchronise; events exclude the launch tail).
- CUDA graphs (nccl-tests ``-G``): the block is captured once and replayed, which removes the
  per-call CPU launch cost.

``stamp_calls`` (``--per-call``) times every call of a block on its own: a clock reading (or a
CUDA event) before the first call and after each, so call i lasts stamps[i+1] - stamps[i] and
starts at stamps[i]. The starts are what tells which rank arrived last at a call
(core.percall). Host stamps are perf_counter_ns, CLOCK_MONOTONIC on Linux, one clock for every
process of a host; CUDA stamps are seconds since the block's first event, each GPU its own.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable
from itertools import repeat
from typing import Any

import numpy as np

from commbench.core import compat

Call = Callable[[], Any]


class HostTimer:
    """perf_counter_ns around a block; ``sync`` waits for asynchronous work (or is None).

    Without ``sync`` every call has finished when it returns (gloo on CPU tensors), so the time
    of each single call is known too: ``block_calls`` reads the clock after every call (about
    0.1 us each, against tens of microseconds for the cheapest gloo call), which gives the tail
    of single calls that block averages hide. With ``sync`` (CUDA) a return only means launched.
    """

    name = "host"

    def __init__(self, sync: Call | None = None) -> None:
        self._sync = sync
        self.times_single_calls = sync is None
        if sync is not None:
            self.name = "host-sync"

    shared_clock = True  # one clock for every process of a host: starts compare directly

    def block_calls(self, call: Call, iters: int) -> np.ndarray:
        """Seconds of each call of a block (they sum to the block's time)."""
        return np.diff(self.stamp_calls(call, iters)) * 1e-9

    def stamp_calls(self, call: Call, iters: int) -> np.ndarray:
        """perf_counter_ns before the first call and after each (``iters`` + 1, int64); with
        ``sync``, after waiting for each call."""
        clock, sync = time.perf_counter_ns, self._sync
        stamps = array("q", bytes(8 * (iters + 1)))  # 8 bytes a call, not int objects
        stamps[0] = clock()
        if sync is None:
            for index in range(1, iters + 1):
                call()
                stamps[index] = clock()
        else:
            for index in range(1, iters + 1):
                call()
                sync()
                stamps[index] = clock()
        return np.frombuffer(stamps, dtype=np.int64)

    def block(self, call: Call, iters: int) -> float:
        sync = self._sync
        clock = time.perf_counter_ns
        start = clock()
        for _ in repeat(None, iters):
            call()
        if sync is not None:
            sync()
        return (clock() - start) * 1e-9


class CudaEventTimer:
    """CUDA events on the current stream; ``blocking`` waits for each call (nccl-tests -z 1)."""

    name = "cuda-event"
    times_single_calls = False
    shared_clock = False  # each GPU's events have their own clock

    def __init__(self, blocking: bool = False) -> None:
        import torch

        self._torch = torch
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._blocking = blocking
        self._events: list = []  # --per-call: reused from block to block, grown as needed

    def stamp_calls(self, call: Call, iters: int, replay: Call | None = None) -> np.ndarray:
        """An event before the first call and after each; seconds since the first (float64,
        ``iters`` + 1). Reading them waits for the last event only, after the loop."""
        events = self._events
        while len(events) < iters + 1:
            events.append(self._torch.cuda.Event(enable_timing=True))
        stream_sync = self._torch.cuda.current_stream().synchronize
        run = replay or call
        events[0].record()
        for index in range(1, iters + 1):
            run()
            if self._blocking:
                stream_sync()
            events[index].record()
        events[iters].synchronize()
        first = events[0]
        return np.array([0.0] + [first.elapsed_time(events[i]) * 1e-3
                                 for i in range(1, iters + 1)])

    def block(self, call: Call, iters: int) -> float:
        start, end = self._start, self._end
        stream_sync = self._torch.cuda.current_stream().synchronize
        start.record()
        if self._blocking:
            for _ in repeat(None, iters):
                call()
                stream_sync()
        else:
            for _ in repeat(None, iters):
                call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3


class CudaGraphTimer:
    """Capture ``iters`` calls into a CUDA graph once, then time replays with CUDA events.

    Graphs are kept per (call object, iteration count) and the call object itself is held in
    the key: a key of ``id(call)`` could be reused by the next size's call once the previous one
    is freed, and that size would replay the previous size's graph and report its time.

    After a capture the ranks meet in ``barrier`` before anything replays (nccl-tests does the
    same): a rank that finished capturing first would otherwise time, in its first replay, the
    other ranks' capture. Every rank captures at the same block (the block counts are shared),
    so the barrier is one all of them make. It runs on the host, so it goes through the control
    channel (gloo), never the measured NCCL group; by default, the default group (the control
    group commbench's ranks form), when one exists.
    """

    name = "cuda-graph"
    times_single_calls = False
    shared_clock = False

    def __init__(self, torch_module=None, events=None, barrier: Call | None = None) -> None:
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self._events = events or CudaEventTimer()
        self._barrier = barrier or _default_group_barrier
        self._graphs: dict[tuple[Call, int], Any] = {}

    def block(self, call: Call, iters: int) -> float:
        return self._events.block(self.graph_for(call, iters).replay, 1)

    def stamp_calls(self, call: Call, iters: int) -> np.ndarray:
        """--per-call: replays of a one-call graph, an event between each two."""
        return self._events.stamp_calls(call, iters, replay=self.graph_for(call, 1).replay)

    def graph_for(self, call: Call, iters: int):
        """The captured graph of ``iters`` calls of ``call``, captured on first use."""
        torch = self._torch
        key = (call, iters)
        graph = self._graphs.get(key)
        if graph is None:
            if not any(known is call for known, _ in self._graphs):
                self._graphs.clear()  # a new size: free the previous size's graphs
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream), compat.cuda_graph_capture(torch, graph, stream):
                for _ in range(iters):
                    call()
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            self._barrier()
            self._graphs[key] = graph
        return graph


def _default_group_barrier() -> None:
    """A barrier on torch.distributed's default group (commbench's gloo control group), or
    nothing outside a distributed run (one process, a test)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
