"""What happens to a stream whose reader left: the one helper the CLI (before any command runs)
and the commands (mid-run) share, kept here so the CLI need not import output/."""

from __future__ import annotations

import os


def to_devnull(stream) -> None:
    """``stream``'s reader left (``| head -1``: EPIPE): what is still to be written goes to
    /dev/null, so that the run finishes its folder instead of dying of it
    (docs/commands/collectives.md, "A reader that leaves early")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)
