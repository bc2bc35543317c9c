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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from itertools import repeat
from typing import Any

Call = Callable[[], Any]


class HostTimer:
    """perf_counter_ns around a block; ``sync`` waits for asynchronous work (or is None)."""

    def __init__(self, sync: Call | None = None) -> None:
        self._sync = sync

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

    def __init__(self, blocking: bool = False) -> None:
        import torch

        self._torch = torch
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._blocking = blocking

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
    """Capture ``iters`` calls into a CUDA graph once, then time replays with CUDA events."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._events = CudaEventTimer()
        self._graphs: dict[tuple[int, int], Any] = {}

    def block(self, call: Call, iters: int) -> float:
        torch = self._torch
        key = (id(call), iters)
        graph = self._graphs.get(key)
        if graph is None:
            self._graphs.clear()  # one size at a time: free the previous size's graph
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
                for _ in range(iters):
                    call()
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            self._graphs[key] = graph
        return self._events.block(graph.replay, 1)
