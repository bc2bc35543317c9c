"""One rank of an external launcher's job (torchrun, srun, mpirun, a PyTorchJob): the same
wrapper for every command that runs ranks (measure, locate, replay)."""

from __future__ import annotations

from commbench.core.errors import Interrupted, RunFailed


def as_external_rank(env, body):
    """Run ``body()`` as one rank of an external launcher's job (measure and locate alike);
    returns what it returns.
    Ctrl-C and SIGTERM (a scheduler's time limit) end it as an Interrupted run, so that rank
    0 still finishes the folder; a failure names this rank."""
    import signal

    from commbench.launch.environment import pin_interfaces

    def stopped(signum, frame):
        raise Interrupted("stopped by SIGTERM", exit_code=128 + signum)

    pin_interfaces(env)
    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        return body()
    except KeyboardInterrupt:
        raise Interrupted("interrupted") from None
    except RunFailed as failure:
        raise RunFailed(f"rank {env.rank}: {failure}") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
