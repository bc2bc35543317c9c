"""What local ranks leave behind: a log per rank, and their stacks when a start stalls.

Each rank's stderr (fd 2, so C++ and faulthandler output too) is written into a FIFO that the
launcher reads: it copies every byte to its own stderr, as before, and into ``rank-<r>.log``.
The reader is the launcher, not a thread of the rank, so what a rank wrote before it died,
SIGKILL or a segfault included, is in its log. The launcher's reader uses only ``os`` calls,
which take no Python lock that a rank forked at that moment could inherit held.

At its start each rank registers faulthandler on SIGUSR1, writing every thread's Python stack
into ``rank-<r>.stack``. The launcher's StartWatchdog sends it to every rank when one has not
made its first heartbeat within the start-up grace, and names where that rank was. A Python
stack alone cannot tell a call waiting on a lock from one waiting on a peer, so the watchdog
first reads each rank's kernel state (launch.procstate: per thread, the system call and the
kernel function it sleeps in; the TCP sockets) and appends it to the rank's stack file; the
launcher's own stacks and kernel state go into ``launcher.stack`` (it hosts the store).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import select
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from commbench.launch import procstate

DUMP_SIGNAL = signal.SIGUSR1
DUMP_WAIT_S = 2.0  # how long the watchdog waits for the ranks' stacks to be written
TOP_FRAMES = 3  # frames of a stalled rank's stack the error line shows
# The key each rank's heartbeat counts up in the store the launcher hosts. engine.coordination
# (Watch.start_heartbeat) writes it; engine and launch are independent layers, so the name is
# spelled in both, and tests/unit/launch/test_ranklogs.py checks that they agree.
HEARTBEAT_KEY = "commbench/watch/hb/{rank}"

_kept: list = []  # the rank's stack file: faulthandler writes to its descriptor later


class RankFiles:
    """Where local rank ``r``'s log and stack go, and the FIFO its stderr goes through.

    Made by the launcher (which creates the FIFOs); picklable, for ranks that are spawned."""

    def __init__(self, folder: Path, scratch: str, nproc: int) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.nproc = nproc
        self.fifos = [str(Path(scratch) / f"rank-{r}.fifo") for r in range(nproc)]
        for fifo in self.fifos:
            os.mkfifo(fifo)
        # Where this launch's lines start (--repeat appends launches to the same logs).
        self.starts = [_size(self.log(r)) for r in range(nproc)]

    def log(self, rank: int) -> Path:
        return self.folder / f"rank-{rank}.log"

    def stack(self, rank: int) -> Path:
        return self.folder / f"rank-{rank}.stack"

    def attach(self, rank: int) -> None:
        """In the rank, first thing: stderr into the launcher's FIFO, crashes and SIGUSR1
        dumped by faulthandler."""
        sys.stderr.flush()
        fifo = os.open(self.fifos[rank], os.O_WRONLY)
        os.dup2(fifo, 2)
        os.close(fifo)
        faulthandler.enable(file=sys.stderr, all_threads=True)
        stacks = open(self.stack(rank), "a")  # noqa: SIM115 (faulthandler keeps writing to it)
        _kept.append(stacks)
        faulthandler.register(DUMP_SIGNAL, file=stacks, all_threads=True)

    def last_lines(self) -> dict[int, str]:
        """Each rank's last non-empty stderr line of this launch (none: not in the dict)."""
        found = {}
        for rank in range(self.nproc):
            line = last_line(self.log(rank), self.starts[rank])
            if line:
                found[rank] = line
        return found

    def tidy(self) -> None:
        """Stack files no dump was written into are not kept."""
        for rank in range(self.nproc):
            path = self.stack(rank)
            if path.exists() and path.stat().st_size == 0:
                path.unlink()


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def last_line(path: Path, start: int = 0, limit: int = 300) -> str:
    """The last non-empty line of ``path`` after byte ``start``, cut to ``limit`` characters."""
    if not path.exists():
        return ""
    with open(path, "rb") as file:
        file.seek(max(start, _size(path) - 8192))
        text = file.read().decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= limit else line[:limit - 3] + "..."


class StderrCopier:
    """The launcher's end of the ranks' FIFOs: every byte to this process's stderr and to the
    rank's log, from a thread that sleeps in poll() until a rank writes."""

    def __init__(self, files: RankFiles) -> None:
        self._reads = {os.open(f, os.O_RDONLY | os.O_NONBLOCK): r
                       for r, f in enumerate(files.fifos)}
        # A writer kept open here: a FIFO no rank has opened yet must not read as ended.
        self._holds = [os.open(f, os.O_WRONLY) for f in files.fifos]
        self._logs = {r: os.open(files.log(r), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                      for r in range(files.nproc)}
        self._thread = threading.Thread(target=self._copy, name="commbench-rank-logs",
                                        daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        poller = select.poll()
        for fd in self._reads:
            poller.register(fd, select.POLLIN)
        open_fds = set(self._reads)
        while open_fds:
            for fd, _ in poller.poll():
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:  # every writer gone: the rank has ended
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                _write_all(2, data)
                _write_all(self._logs[self._reads[fd]], data)

    def close(self, wait: float = 2.0) -> None:
        """After the ranks ended: read what they left, then close. A process the rank started
        that still holds its stderr is not waited for beyond ``wait``."""
        for fd in self._holds:
            os.close(fd)
        self._thread.join(wait)
        if self._thread.is_alive():
            return  # the thread still owns the descriptors; the process ends soon
        for fd in (*self._reads, *self._logs.values()):
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data):]


class StartWatchdog:
    """Names a rank that has not made its first heartbeat ``grace`` seconds after the launch,
    with where its stack stood; every rank's stack is dumped for the record."""

    def __init__(self, store, nproc: int, grace: float, files: RankFiles,
                 store_pid: int | None = None) -> None:
        self.store = store
        self.store_pid = store_pid  # the store's server process (launch.storehost)
        self.nproc = nproc
        self.grace = grace
        self.files = files
        self.started = time.monotonic()
        self.all_beat = False

    def missing(self) -> list[int]:
        """Ranks with no heartbeat yet (a count of 0: waiting ranks create the key with 0)."""
        keys = [HEARTBEAT_KEY.format(rank=r) for r in range(self.nproc)]
        return [r for r, key in enumerate(keys) if self.store.add(key, 0) == 0]

    def check(self, pids: list[int]) -> str:
        """'' while the start is on time; else the one-line failure (the stacks are dumped)."""
        if self.all_beat or not pids:
            return ""
        missing = self.missing()
        if not missing:
            self.all_beat = True  # nothing more to watch: --timeout covers the rest
            return ""
        if time.monotonic() - self.started < self.grace:
            return ""
        # The kernel state before the dump: SIGUSR1 wakes every thread it interrupts.
        kernel = {rank: procstate.report(pid) for rank, pid in enumerate(pids)}
        calls = {rank: procstate.threads(pids[rank]) for rank in missing if rank < len(pids)}
        dumped = dump_stacks(pids, self.files)
        for rank, block in kernel.items():
            with open(self.files.stack(rank), "a") as file:
                file.write("\n" + block)
        record_launcher(self.files.folder / "launcher.stack", self.store_pid)
        where = "; ".join(f"rank {r} {describe(dumped.get(r))}{kernel_words(calls.get(r))}"
                          for r in missing)
        return (f"rank {', '.join(map(str, missing))} made no heartbeat within "
                f"{self.grace:g}s of the launch (a stalled start): {where}; every rank's stack "
                f"and kernel state is in {self.files.folder}/rank-<r>.stack")


def kernel_words(threads: list[procstate.ThreadState] | None) -> str:
    """``, its main thread in futex (futex_wait_queue), S, its other threads in recvfrom
    (wait_woken) x1`` for the one-line error. The other threads count: a main thread waiting
    for a helper thread (a store connection attempt) is in futex while the helper waits on the
    network."""
    if not threads:
        return ""
    main, others = threads[0], Counter(f"{t.syscall or 'unknown call'}"
                                       + (f" ({t.wchan})" if t.wchan else "")
                                       for t in threads[1:])
    words = f", its main thread in {main.describe()}"
    if others:
        words += ", its other threads in " + ", ".join(
            f"{call} x{count}" for call, count in others.most_common())
    return words


def record_launcher(path: Path, store_pid: int | None = None) -> None:
    """The launcher's own threads (Python stacks and kernel state) and its store server's
    kernel state, for telling a store that never answered from a rank that never asked."""
    with contextlib.suppress(OSError), open(path, "a") as file:
        file.write(f"Launcher {os.getpid()} at {time.strftime('%Y-%m-%d %H:%M:%S')}:\n")
        file.flush()
        faulthandler.dump_traceback(file, all_threads=True)
        file.write("\n" + procstate.report(os.getpid()))
        if store_pid is not None:
            file.write("\nThe store's server:\n" + procstate.report(store_pid))


def dump_stacks(pids: list[int], files: RankFiles, wait: float = DUMP_WAIT_S) -> dict:
    """Ask every rank for its stack; local rank -> its dump ('' where none came, None where
    the rank had not registered the handler yet, which SIGUSR1 would have killed)."""
    before = {r: _size(files.stack(r)) for r in range(len(pids))}
    asked = []
    for rank, pid in enumerate(pids):
        if catches(pid, DUMP_SIGNAL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, DUMP_SIGNAL)
                asked.append(rank)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(
            _size(files.stack(r)) == before[r] for r in asked):
        time.sleep(0.05)
    time.sleep(0.1)  # a dump being written: let it finish
    dumps: dict[int, str | None] = {r: None for r in range(len(pids))}
    for rank in asked:
        with open(files.stack(rank), "rb") as file:
            file.seek(before[rank])
            dumps[rank] = file.read().decode(errors="replace")
    return dumps


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux /proc; elsewhere: assume so)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    found = re.search(r"^SigCgt:\s*([0-9a-fA-F]+)", status, re.MULTILINE)
    return found is None or bool(int(found.group(1), 16) >> (sig - 1) & 1)


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def describe(dump: str | None, frames: int = TOP_FRAMES) -> str:
    """Where a rank's main thread was, from its faulthandler dump: the top frames, innermost
    first."""
    if dump is None:
        return "had not reached commbench's code (no stack handler yet)"
    if not dump.strip():
        return "wrote no stack"
    threads = [block for block in re.split(r"\n\s*\n", dump) if "File " in block]
    # The main thread: the one in the rank's entry, else the one threading did not start.
    main = next((b for b in threads if " in _rank_main" in b),
                next((b for b in threads if " in _bootstrap" not in b),
                     threads[0] if threads else ""))
    found = []
    for line in main.splitlines():
        frame = _FRAME.match(line)
        if frame and frame["func"] == "_rank_main":  # below it: the launcher's machinery
            break
        if frame:
            found.append(frame)
    if not found:
        return "wrote no stack"
    top = [f"{Path(m['file']).name}:{m['line']} in {m['func']}" for m in found[:frames]]
    return "was at " + " < ".join(top)
