"""Where a recording rank hooks into the job's life, for both ways of recording (recorder.py,
flight.py): each optimizer step ends a step, ``destroy_process_group`` and the interpreter's
exit give the recording its last word, and so does the SIGTERM torchrun sends the other ranks
when one fails or hangs. A SIGTERM handler the user installed is left alone."""

from __future__ import annotations

import atexit
import functools
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import torch.distributed as dist


def attach(*, end_step: Callable[..., None], before_destroy: Callable[[Any], None],
           at_exit: Callable[[], None], on_sigterm: Callable[[], None]) -> None:
    """``end_step(explicit=False)`` at each optimizer step; ``before_destroy(group)`` (None:
    the whole job) before every ``destroy_process_group``; ``at_exit`` at exit;
    ``on_sigterm`` before a SIGTERM ends the rank as it would have without it."""
    from torch.distributed import distributed_c10d
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda *_: end_step(explicit=False))
    real = distributed_c10d.destroy_process_group

    @functools.wraps(real)
    def destroy(*args, **kwargs):
        before_destroy(args[0] if args else kwargs.get("group"))
        return real(*args, **kwargs)

    distributed_c10d.destroy_process_group = destroy
    dist.destroy_process_group = destroy
    atexit.register(at_exit)
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum, frame):
        on_sigterm()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
