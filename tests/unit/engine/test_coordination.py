"""A local rank still importing torch is waited for (Session.join): on a real store, the first
heartbeat of a late rank ends the wait, and a rank that never beats is named after the grace."""

import threading
import time
from datetime import timedelta

import torch.distributed as dist

from commbench.engine.coordination import WATCH_PREFIX, Watch


def store():
    return dist.TCPStore("127.0.0.1", 0, 3, True, timedelta(seconds=10), wait_for_workers=False)


def test_a_late_rank_ends_the_wait_when_it_beats():
    master = store()
    watch = Watch(master, 0, 3, interval=0.5)
    beats = dist.PrefixStore(WATCH_PREFIX, master)
    for rank in (0, 2):
        beats.add(f"hb/{rank}", 1)
    threading.Timer(1.0, lambda: beats.add("hb/1", 1)).start()
    started = time.monotonic()
    assert watch.await_arrivals(20) == []
    assert 0.9 < time.monotonic() - started < 10


def test_a_rank_that_never_beats_is_returned_after_the_grace():
    master = store()
    watch = Watch(master, 0, 3, interval=0.5)
    dist.PrefixStore(WATCH_PREFIX, master).add("hb/0", 1)
    started = time.monotonic()
    assert watch.await_arrivals(1.0) == [1, 2]
    assert 0.9 < time.monotonic() - started < 5
