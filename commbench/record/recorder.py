"""The recorder that runs inside every rank of the user's job (``commbench record``).

It is a TorchDispatchMode, as torch's own CommDebugMode is: every c10d op reaches it through
the dispatcher, whoever calls it (``dist.all_reduce``, DDP's C++ reducer, FSDP, DTensor), so
nothing in the user's code changes. ``boot/sitecustomize.py`` wraps ``init_process_group`` so
the mode starts once the rank knows its rank.

Timing per call: the issue time is taken before the op runs; completion comes from the
work's future (gloo completes it when the data has moved); a synchronous call whose work has
no future (gloo's reduce_scatter_tensor) ended by the next op its thread dispatches, since
its caller waited before going on; where an asynchronous work has no future (gloo's isend/
irecv) or completes its future at launch (NCCL), a poll thread watches ``is_completed``
(on NCCL that queries the call's end event), and NCCL's own timing of the kernel
(``TORCH_NCCL_ENABLE_TIMING=1``, which ``record`` sets) becomes ``dur_ns``. A functional
collective completes at its ``wait_tensor``, or, where torch's AsyncCollectiveTensor waits
inside its own dispatch (out of this mode's sight), when the first op that reads the result
has run.

Steps: each end (``end_step``) is a step-end line in the file as it happens, and the header's
``steps_ended`` at a clean exit, so a reader knows the calls after the last end are a tail.

Never fail the user's job: a call the recorder cannot read is counted and skipped, with one
warning. Lines are flushed at every step end and at exit, so a crash keeps what was recorded
up to its last step; at a clean exit the file is rewritten with every group in the header.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

from commbench.core import compat
from commbench.record import lifecycle
from commbench.record.calls import DESCRIPTORS, Descriptor, bind, dtype_name, first, numel
from commbench.results import trace as trace_format

ENV_DIR = "COMMBENCH_RECORD_DIR"
ENV_MAX_STEPS = "COMMBENCH_RECORD_STEPS"  # stop recording after this many steps
# Tests prove their checks by breaking the recorder: the call with this seq is not written
# ("SEQ": on every rank; "SEQ:RANK": on that rank only, the fault the order check must catch).
ENV_DROP = "COMMBENCH_RECORD_DROP"
POLL_S = 0.0002
WAIT_TENSOR = "_c10d_functional::wait_tensor"
NAMESPACES = ("c10d", "_c10d_functional")

_active: Recorder | None = None


class Recorder(TorchDispatchMode):
    """One rank's recording: the calls, the groups they used, the current step."""

    def __init__(self, folder: Path, max_steps: int | None = None) -> None:
        super().__init__()
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.backend = str(dist.get_backend())
        self.path = folder / f"rank-{self.rank}.jsonl"
        self.max_steps = max_steps
        self.groups: dict[str, trace_format.Group] = {}
        self.calls: list[trace_format.Call] = []
        self.unwritten: list[trace_format.Call] = []
        self.watched: list[tuple[Any, trace_format.Call]] = []
        self.functional: dict[int, tuple[Any, trace_format.Call]] = {}
        self.open_sync: list[tuple[int, trace_format.Call]] = []
        self.kinds: dict[Any, Descriptor | str | None] = {}
        self.step = 0  # step ends seen so far: the step a call belongs to
        self.step_ends: list[int] = []  # each end's time (monotonic ns)
        self.explicit_steps = False
        self.skipped = 0
        self.drop = _dropped(os.environ.get(ENV_DROP, ""), self.rank)
        self.seen = 0
        self.stopped = False
        self.left = False  # the mode was left past --steps (_leave)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.callbacks = 0  # completion callbacks added to gloo futures and not yet run
        folder.mkdir(parents=True, exist_ok=True)
        self.file = self.path.open("w")
        self._group(dist.group.WORLD)
        self._write_line(self._header())
        self.poller = threading.Thread(target=self._poll, name="commbench-record", daemon=True)
        self.poller.start()

    # -- the dispatcher's view -------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.open_sync:
            self._close_sync()
        if self.functional:  # an op that reads a functional collective's result waits for it
            consumed = self._consumed(args, kwargs)
            if consumed:
                out = self.__torch_dispatch__(func, types, args, kwargs)
                for call in consumed:
                    _complete(call)
                return out
        kind = self.kinds.get(func, False)
        if kind is False:
            kind = self._kind(func)
            self.kinds[func] = kind
        if kind is None or self.stopped:
            return func(*args, **kwargs)
        if kind == WAIT_TENSOR:
            out = func(*args, **kwargs)
            self._waited(args[0] if args else kwargs.get("tensor"))
            return out
        issued = time.monotonic_ns()
        out = func(*args, **kwargs)
        try:
            self._note(kind, func, args, kwargs, out, issued)
        except Exception as error:  # never break the user's job over a record
            self.skipped += 1
            if self.skipped == 1:
                print(f"commbench record: rank {self.rank}: skipped a {func} call ({error})",
                      file=sys.stderr)
        return out

    @staticmethod
    def _kind(func) -> Descriptor | str | None:
        name = func._schema.name
        if name.split("::")[0] not in NAMESPACES:
            return None
        if name == WAIT_TENSOR:
            return WAIT_TENSOR
        return DESCRIPTORS.get(name)

    def _note(self, kind: Descriptor, func, args, kwargs, out, issued: int) -> None:
        self.seen += 1
        if self.seen - 1 == self.drop:
            return
        bound = bind(func._schema, args, kwargs)
        group = (compat.resolve_group(dist, first(bound, ("group_name", "group", "tag")))
                 if kind.functional else compat.unbox_group(dist, bound.get("process_group")))
        pg = self._group(group)
        in_numel = numel(first(bound, kind.inputs))
        out_numel = numel(first(bound, kind.outputs)) if kind.outputs else in_numel
        size = len(self.groups[pg].ranks) if pg in self.groups else 1
        if kind.gather_factor:
            out_numel = in_numel * int(bound.get(kind.gather_factor) or size)
        if kind.scatter_factor:
            out_numel = in_numel // max(1, int(bound.get(kind.scatter_factor) or size))
        if kind.functional and trace_format.moves_per_peer(kind.op):  # its splits decide the output
            out_numel = numel(out)
        call = trace_format.Call(
            seq=len(self.calls), pg=pg, op=kind.op, dtype=dtype_name(first(bound, kind.inputs)),
            in_numel=in_numel, out_numel=out_numel, step=self.step,
            splits=_splits(bound), reduce_op=compat.reduce_op_name(dist, bound.get("reduce_op")),
            root=self._global(group, first(bound, kind.root)),
            peer=self._global(group, first(bound, kind.peer)),
            is_async=bool(bound.get("async_op", True)), t_issue_ns=issued)
        with self.lock:
            self.calls.append(call)
            self.unwritten.append(call)
        if kind.functional:
            self.functional[id(out)] = (out, call)
            return
        self._watch(out[-1] if isinstance(out, tuple) else out, call)

    def _watch(self, boxed: Any, call: trace_format.Call) -> None:
        """Completion: the future where it is real (gloo), else the poll thread."""
        work = compat.unbox_work(dist, boxed)
        if work is None:
            return
        if self.backend != "nccl":
            try:
                future = work.get_future()
            except RuntimeError:  # gloo's send/recv and reduce_scatter_tensor works have none
                future = None
            if future is not None:
                with self.lock:
                    self.callbacks += 1
                future.add_done_callback(lambda _: self._completed(call))
                return
            if not call.is_async:
                # The caller waits before it goes on (is_completed may never turn true on such a
                # work: gloo's reduce_scatter_tensor), so the call ended by the next op this
                # thread dispatches.
                self.open_sync.append((threading.get_ident(), call))
                return
        with self.lock:
            self.watched.append((work, call))
        self.wake.set()

    def _completed(self, call: trace_format.Call) -> None:
        _complete(call)
        with self.lock:
            self.callbacks -= 1

    def settle(self, timeout_s: float = 5.0) -> None:
        """Let gloo's threads run this recorder's completion callbacks before the group is
        destroyed. The callbacks are Python: a gloo thread needs the GIL to run and drop one,
        while ``destroy_process_group`` joins that thread holding the GIL; on torch 2.4.1 a
        DDP job's last bucket completed just before its destroy and the rank never exited
        (make compat). Sleeping gives the GIL away."""
        deadline = time.monotonic() + timeout_s
        while self.callbacks > 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.02)  # the thread drops the callback after running it

    def _close_sync(self) -> None:
        now, me = time.monotonic_ns(), threading.get_ident()
        still = []
        for thread, call in self.open_sync:
            if thread == me:
                if call.t_end_ns is None:
                    call.t_end_ns = now
            else:
                still.append((thread, call))
        self.open_sync = still

    def _consumed(self, args: tuple, kwargs: dict) -> list[trace_format.Call]:
        """The functional calls whose results this op reads, still wrapped (torch's
        AsyncCollectiveTensor waits inside its own dispatch, where this mode does not see the
        ``wait_tensor``): they are complete once the op has run. The calls leave the
        waiting list now, so the op runs through the mode as any other."""
        found = []
        for value in (*args, *kwargs.values()):
            for item in value if isinstance(value, (list, tuple)) else (value,):
                elem = getattr(item, "elem", None)
                if elem is not None and id(elem) in self.functional:
                    found.append(self.functional.pop(id(elem))[1])
        return found

    def _waited(self, tensor: Any) -> None:
        found = self.functional.pop(id(tensor), None)
        if found is not None:
            _complete(found[1])

    def _poll(self) -> None:
        while True:
            self.wake.wait()
            with self.lock:
                still = []
                for work, call in self.watched:
                    try:
                        done = work.is_completed()
                    except RuntimeError:  # a failed call: its end is when it failed
                        done = True
                    if done:
                        _complete(call)
                        if self.backend == "nccl":
                            call.dur_ns = compat.work_duration_ns(work)
                    else:
                        still.append((work, call))
                self.watched = still
                if not still:
                    self.wake.clear()
            time.sleep(POLL_S)

    # -- groups ------------------------------------------------------------------------------

    def _group(self, group: Any) -> str:
        """The trace's name for a group, declared (header or a group line) on first sight."""
        if group is None:
            name = "?"
            if name not in self.groups:
                self._declare(trace_format.Group(name, tuple(range(self.world_size))))
            return name
        name = str(getattr(group, "group_name", "") or id(group))
        if name not in self.groups:
            ranks = tuple(dist.get_process_group_ranks(group))
            desc = str(getattr(group, "group_desc", "") or "")
            try:
                backend = str(dist.get_backend(group))
            except (RuntimeError, ValueError):
                backend = self.backend
            self._declare(trace_format.Group(name, ranks, backend, desc))
        return name

    def _declare(self, group: trace_format.Group) -> None:
        first_sight = bool(self.groups)  # the world group goes into the header itself
        self.groups[group.name] = group
        if first_sight:
            self._write_line(trace_format.group_line(group))

    @staticmethod
    def _global(group: Any, group_rank: Any) -> int | None:
        if group_rank is None or group is None:
            return None
        try:
            return int(dist.get_global_rank(group, int(group_rank)))
        except (RuntimeError, ValueError):  # the world group: group rank == global rank
            return int(group_rank)

    # -- steps and files ---------------------------------------------------------------------

    def end_step(self, explicit: bool) -> None:
        """A step ended: ``commbench.record.step()`` (explicit), else an optimizer step.
        Once the script marks steps itself, optimizer steps no longer count."""
        if explicit:
            self.explicit_steps = True
        elif self.explicit_steps:
            return
        if self.stopped:  # past --steps: ends of steps not recorded are not counted
            self._leave()
            return
        self._close_sync()
        ended = time.monotonic_ns()
        self.step += 1
        self.step_ends.append(ended)
        self.flush()
        # Said in the file as it happens: a crash keeps where its steps ended, and replay
        # knows the calls after the last end are a tail, not a step.
        self._write_line(trace_format.step_end_line(self.step, ended))
        if self.max_steps is not None and self.step >= self.max_steps:
            self.stopped = True
            self._leave()

    def _leave(self) -> None:
        """Past ``--steps`` the job runs without the mode, so no op of it passes through
        Python any more (the recorder's cost ends with the recording). Not while a functional
        collective is still waiting (its end is seen through the mode) or another mode was
        pushed above this one (popping it would pop that one); the next step end tries again."""
        if self.left or self.functional or self.open_sync:
            return
        if compat.current_dispatch_mode() is not self:
            return
        self.__exit__(None, None, None)
        self.left = True

    def flush(self, everything: bool = False) -> None:
        """Write the calls whose completion is known (all of them at exit)."""
        with self.lock:
            ready = [c for c in self.unwritten if everything or c.t_end_ns is not None]
            waiting = {id(work_call[1]) for work_call in self.watched}
            ready = [c for c in ready if everything or id(c) not in waiting]
            done = {id(c) for c in ready}
            self.unwritten = [c for c in self.unwritten if id(c) not in done]
        for call in ready:
            self.file.write(_json(call.to_json()) + "\n")
        self.file.flush()

    def close(self) -> None:
        """At a clean exit: the whole file again, every group in its header."""
        if self.file.closed:
            return
        self.stopped = True
        deadline = time.monotonic() + 1.0
        while self.watched and time.monotonic() < deadline:
            time.sleep(0.01)
        self.flush(everything=True)
        self.file.close()
        trace_format.write_rank(self.path, self._header(),
                                sorted(self.calls, key=lambda c: c.seq), self.step_ends)

    def crash_flush(self) -> None:
        if not self.file.closed:
            self.flush(everything=True)
            self.file.close()

    def _header(self) -> dict:
        return trace_format.header(torch_version=torch.__version__.split("+")[0],
                                   backend=self.backend, world_size=self.world_size,
                                   rank=self.rank, host=socket.gethostname(),
                                   groups=dict(self.groups), steps_ended=self.step)

    def _write_line(self, record: dict) -> None:
        self.file.write(_json(record) + "\n")
        self.file.flush()


def _complete(call: trace_format.Call) -> None:
    if call.t_end_ns is None:
        call.t_end_ns = time.monotonic_ns()


def _splits(bound: dict) -> dict | None:
    given = {side: bound.get(f"{side}put_split_sizes") for side in ("in", "out")}
    if not any(given.values()):
        return None
    return {side: [int(v) for v in (value or [])] for side, value in given.items()}


def _json(record: dict) -> str:
    import json

    return json.dumps(record, separators=(",", ":"))


# -- starting and stopping, in a rank ------------------------------------------------------

def start(folder: str | os.PathLike) -> Recorder | None:
    """Begin recording this rank (after init_process_group); idempotent."""
    global _active
    if _active is not None or not dist.is_initialized():
        return _active
    steps = os.environ.get(ENV_MAX_STEPS)
    recorder = Recorder(Path(folder), max_steps=int(steps) if steps else None)
    recorder.__enter__()
    _active = recorder
    # destroy_process_group waits for the recorder's callbacks first (Recorder.settle);
    # torchrun's SIGTERM to the other ranks when one fails keeps their records
    lifecycle.attach(end_step=recorder.end_step, before_destroy=lambda group: recorder.settle(),
                     at_exit=recorder.close, on_sigterm=recorder.crash_flush)
    return recorder


def mark_step() -> None:
    """``commbench.record.step()``: the script says where a step ends."""
    if _active is not None:
        _active.end_step(explicit=True)


def active() -> Recorder | None:
    return _active


def _dropped(text: str, rank: int) -> int:
    """The seq ENV_DROP says this rank leaves out, or -1."""
    seq, _, only = text.partition(":")
    if not seq.strip() or (only.strip() and int(only) != rank):
        return -1
    return int(seq)
