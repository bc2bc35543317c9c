"""Exceptions that carry their exit code, so the CLI maps failures to codes in one place.

0 ok · 1 regression found or wrong results · 2 bad usage or input · 3 the run failed ·
130 interrupted (Ctrl-C), as a shell reports it.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
EXIT_INTERRUPTED = 130


class CommbenchError(Exception):
    """Base class: ``str(error)`` is the one line the user sees."""

    exit_code = EXIT_RUN_FAILED


class UsageError(CommbenchError):
    """Bad input: an option value, a size string, a combination the backend cannot do."""

    exit_code = EXIT_USAGE


class RunFailed(CommbenchError):
    """A rank crashed, timed out or hit a backend error; partial results are kept."""

    exit_code = EXIT_RUN_FAILED


class Interrupted(CommbenchError):
    """The user pressed Ctrl-C (130), or the job was signalled (128 + the signal)."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str, exit_code: int = EXIT_INTERRUPTED) -> None:
        super().__init__(message)
        self.exit_code = exit_code
