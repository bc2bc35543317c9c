"""The one home for torch API names and behaviours that changed between releases.

Each shim tests the capability or the signature, never a version string, so a release that
back-ports or drops a feature takes the right branch. ``make compat`` runs the CPU suite on
every release that ``pyproject.toml`` admits; tests/unit/test_compat.py drives each branch.

- ``all_gather_single`` / ``reduce_scatter_single``: torch 2.13 deprecates
  ``all_gather_into_tensor`` / ``reduce_scatter_tensor`` for the new names; older releases
  (2.4-2.12, and the 2.11 that GPU images ship) have only the old ones. The lookup happens at
  call time, so a wrapper installed on ``torch.distributed`` (fault injection) is honoured.
- ``listening_store``: a store that listens on a socket bound to one address (TCPStore binds
  every interface unless handed a listening fd). libuv, the default store backend since torch
  2.4, refuses a listening fd in 2.4-2.6 (NotImplementedError; 2.9 takes it); the legacy
  backend takes it everywhere.
- ``shutdown_agent``: the private ``LocalElasticAgent._shutdown`` takes ``(death_sig,
  is_restart)`` in 2.4-2.6, ``(death_sig)`` in 2.9-2.11 and ``(death_sig, timeout)`` in 2.13;
  commbench's bounded stop must not depend on any of them.
- ``backend_options`` / ``can_set_group_timeout``: DeviceMesh takes per-dimension options
  (``backend_override``, 2.9+ here) whose timeout is a private field of a private gloo
  class; ``ProcessGroup.set_timeout`` exists from 2.9 (not in 2.4-2.6). Without either, the
  mesh's groups are made by hand with ``new_group(timeout=)``.
- ``cuda_graph_capture``: ``torch.cuda.graph(capture_error_mode=)``, where torch takes it.
- ``gpu_uuid``: ``uuid`` of the device properties (2.6+ here; absent in 2.4).
- ``unbox_group`` / ``unbox_work`` / ``resolve_group`` / ``work_duration_ns``: what the
  recorder needs from a c10d op seen at the dispatcher. The ops hand it TorchBind objects
  (``ProcessGroup.unbox`` / ``Work.unbox`` turn them into the Python classes), functional
  collectives a group name (``_resolve_process_group``, private), and NCCL's own timing of a
  call is ``Work._get_duration()`` (private, needs ``TORCH_NCCL_ENABLE_TIMING=1``).
- ``dump_flight_recorder``: a rank's Flight Recorder buffer on demand. torch 2.13 names the
  private dumpers ``_dump_fr_trace`` (pickle) and ``_dump_fr_trace_json``; releases before
  the Flight Recorder was made backend-neutral had ``_dump_nccl_trace(_json)`` (NCCL only).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
from datetime import timedelta
from typing import Any


def all_gather_single(dist: Any):
    """``dist.all_gather_single`` where it exists, else ``dist.all_gather_into_tensor``."""
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def reduce_scatter_single(dist: Any):
    """``dist.reduce_scatter_single`` where it exists, else ``dist.reduce_scatter_tensor``."""
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _listener(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))  # port 0: the kernel picks a free one, no retry race
    listener.listen(128)
    return listener


@contextlib.contextmanager
def _quiet_stderr():
    """c10d logs a refused fd at ERROR level from C++ before raising; the fallback that
    follows makes that line noise, so file descriptor 2 goes to /dev/null meanwhile."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


_default_backend_refuses_fd = False  # learnt once per process


def listening_store(dist: Any, host: str, port: int, world: int | None, timeout: float,
                    **options: Any) -> tuple[Any, int]:
    """A master TCPStore listening on ``host`` only; returns (store, port).

    The default backend is tried first; where it refuses a listening fd (libuv in torch
    2.4-2.6), the legacy backend (``use_libuv=False``) gets a fresh socket on the same port.
    """
    global _default_backend_refuses_fd
    legacy = {"use_libuv": False}
    attempts = [legacy] if _default_backend_refuses_fd else [{}, legacy]
    for index, backend in enumerate(attempts):
        listener = _listener(host, port)
        port = listener.getsockname()[1]
        fd = listener.detach()
        last = index == len(attempts) - 1
        try:
            with contextlib.nullcontext() if last else _quiet_stderr():
                store = dist.TCPStore(host, port, world, True, timedelta(seconds=timeout),
                                      master_listen_fd=fd, **options, **backend)
            return store, port
        except NotImplementedError:
            with contextlib.suppress(OSError):
                os.close(fd)
            if last:
                raise
            _default_backend_refuses_fd = True
    raise AssertionError("unreachable")


def shutdown_agent(agent: Any, grace_s: float) -> None:
    """Stop a LocalElasticAgent's workers, SIGKILL after ``grace_s`` where torch lets us say
    so. Where ``_shutdown`` takes no timeout (it then waits 30 s after SIGTERM), the
    caller has already stopped the processes within the grace (launch.local._terminate), so
    torch's own close finds them gone at once."""
    try:
        takes_timeout = "timeout" in inspect.signature(agent._shutdown).parameters
    except (TypeError, ValueError):  # not introspectable: call it the way every release takes
        takes_timeout = False
    if takes_timeout:
        agent._shutdown(timeout=grace_s)
    else:
        agent._shutdown()


def backend_options(dist: Any, backend: str, timeout: float) -> Any | None:
    """Backend options carrying ``timeout`` (DeviceMesh hands them to every group it makes),
    or None where this torch cannot build them: gloo's options class is private
    (``ProcessGroupGloo._Options``), CPU builds have no ProcessGroupNCCL, and ``_timeout``
    is a private field."""
    if backend == "gloo":
        make = getattr(getattr(dist, "ProcessGroupGloo", None), "_Options", None)
    else:
        make = getattr(getattr(dist, "ProcessGroupNCCL", None), "Options", None)
    if make is None:
        return None
    try:
        options = make()
        options._timeout = timedelta(seconds=timeout)
    except (AttributeError, TypeError, RuntimeError):
        return None
    return options


def can_set_group_timeout(dist: Any) -> bool:
    """Whether a made group's timeout can be set again (``ProcessGroup.set_timeout``)."""
    return hasattr(getattr(dist, "ProcessGroup", None), "set_timeout")


def cuda_graph_capture(torch: Any, graph: Any, stream: Any):
    """``torch.cuda.graph`` in thread-local capture-error mode, as nccl-tests captures
    (cudaStreamCaptureModeThreadLocal): in the default global mode, a CUDA call another thread
    makes during the capture (NCCL's watchdog and proxy threads query events) is an error that
    breaks the capture. A torch without the keyword captures in its own mode."""
    try:
        takes_mode = "capture_error_mode" in inspect.signature(torch.cuda.graph).parameters
    except (TypeError, ValueError):  # no signature to read
        takes_mode = False
    if takes_mode:
        return torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local")
    return torch.cuda.graph(graph, stream=stream)


def gpu_uuid(props: Any) -> str | None:
    """The device's UUID where torch exposes it: the one name of a GPU that no host layout
    can make two GPUs share."""
    uuid = getattr(props, "uuid", None)
    return str(uuid) if uuid is not None else None


def unbox_group(dist: Any, obj: Any) -> Any | None:
    """The Python ProcessGroup behind a c10d op's group argument (None where it cannot be
    had: the recorder then files the call under an unknown group rather than failing the
    user's job)."""
    group_class = getattr(dist, "ProcessGroup", None)
    if group_class is None:
        return None
    if isinstance(obj, group_class):
        return obj
    unbox = getattr(group_class, "unbox", None)
    try:
        return unbox(obj) if unbox is not None else None
    except (RuntimeError, TypeError):
        return None


def current_dispatch_mode() -> Any | None:
    """The innermost active TorchDispatchMode (record's recorder leaves only where it is the
    one on top). A private torch helper, present from 2.0 to 2.13; None where it is missing."""
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode
    except ImportError:
        return None
    return _get_current_dispatch_mode()


def unbox_work(dist: Any, obj: Any) -> Any | None:
    """The Python Work behind a c10d op's returned work (None where it cannot be had)."""
    work_class = getattr(getattr(dist, "distributed_c10d", None), "Work", None)
    if work_class is None:
        return None
    if isinstance(obj, work_class):
        return obj
    unbox = getattr(work_class, "unbox", None)
    try:
        return unbox(obj) if unbox is not None else None
    except (RuntimeError, TypeError):
        return None


def resolve_group(dist: Any, name: Any) -> Any | None:
    """The group a functional collective names (a group name, or the group itself)."""
    if isinstance(name, getattr(dist, "ProcessGroup", ())):
        return name
    resolve = getattr(dist.distributed_c10d, "_resolve_process_group", None)
    try:
        if resolve is not None:
            return resolve(name)
        names = getattr(dist.distributed_c10d._world, "pg_names", {})
        return next((group for group, known in names.items() if known == name), None)
    except (RuntimeError, ValueError, KeyError, AttributeError):
        return None


def work_duration_ns(work: Any) -> int | None:
    """The device-measured duration of a completed call, where the backend timed it."""
    duration = getattr(work, "_get_duration", None)
    if duration is None:
        return None
    try:
        milliseconds = float(duration())
    except (RuntimeError, ValueError, TypeError):
        return None
    return int(milliseconds * 1e6) if milliseconds >= 0 else None


def reduce_op_name(dist: Any, obj: Any) -> str | None:
    """``sum``/``avg``/``max``... for a c10d op's reduction: a TorchBind ReduceOp whose
    ``op()`` is the RedOpType number, a Python ReduceOp, or a functional op's string."""
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj.lower()
    members = getattr(getattr(dist.ReduceOp, "RedOpType", None), "__members__", {})
    by_value = {int(value): name.lower() for name, value in members.items()}
    try:
        value = obj.op() if callable(getattr(obj, "op", None)) else int(obj)
    except (RuntimeError, TypeError, ValueError):
        return None
    return by_value.get(int(value), str(value))


def dump_flight_recorder(path: str, as_json: bool = False) -> bool:
    """Write this rank's Flight Recorder buffer to ``path`` (pickle, as torch's own dump on a
    watchdog timeout, or JSON); False where this torch has no dumper or it refused."""
    try:
        import torch._C._distributed_c10d as c10d
    except ImportError:
        return False
    names = (("_dump_fr_trace_json", "_dump_nccl_trace_json") if as_json else
             ("_dump_fr_trace", "_dump_nccl_trace"))
    dumper = next((getattr(c10d, name) for name in names if hasattr(c10d, name)), None)
    if dumper is None:
        return False
    try:
        data = dumper(True, True) if as_json else dumper(True, True, False)
    except (RuntimeError, TypeError):
        return False
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # a dump prefix names a folder
    with open(path, "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())
    return True
