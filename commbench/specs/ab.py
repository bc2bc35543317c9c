"""What ``commbench ab`` runs: one measuring command as side A and side B, the sides' own
environment variables and Python, how many pairs of launches, and how the gate judges them.

Frozen and torch-free; every check of the user's words is made here, before anything starts,
so bad input is one line and exit 2 (docs/commands/ab.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from commbench.core.errors import UsageError

DEFAULT_PAIRS = 5
# Options ab gives every launch itself: a launch's folder and its output are ab's to choose,
# and one launch is one launch (ab alternates them).
OWNED_OPTIONS = ("--out", "--name", "--force", "--repeat", "--json", "--history", "--dry-run")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ABSpec:
    command: tuple[str, ...]
    pairs: int = DEFAULT_PAIRS
    env_a: tuple[tuple[str, str], ...] = ()
    env_b: tuple[tuple[str, str], ...] = ()
    python_a: str | None = None
    python_b: str | None = None
    threshold: float = 0.05
    alpha: float = 0.01
    fail_on_regression: bool = False
    markdown: str | None = None
    json_rows: bool = False
    out: str = "results"
    name: str | None = None
    force: bool = False


def parse_env(items: Sequence[str], flag: str) -> tuple[tuple[str, str], ...]:
    """``K=V`` pairs of --env-a / --env-b."""
    found = []
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not ENV_NAME.fullmatch(key):
            raise UsageError(f"bad {flag} {item!r}: use NAME=VALUE (e.g. {flag} NCCL_ALGO=Ring)")
        found.append((key, value))
    return tuple(found)


def check_command(command: Sequence[str], measuring: Collection[str]) -> tuple[str, ...]:
    """The measuring command after ``--``: one of ``measuring``, without the options ab sets
    for every launch itself."""
    if not command:
        raise UsageError("ab needs a measuring command after --, e.g. "
                         "`commbench ab -- allreduce --sizes 1M --nproc 2`")
    if command[0] not in measuring:
        raise UsageError(f"{command[0]!r} is not a measuring command: ab runs one of "
                         f"{', '.join(sorted(measuring))} after --")
    for part in command[1:]:
        flag = part.split("=", 1)[0]
        if flag in OWNED_OPTIONS:
            raise UsageError(f"ab sets {flag} for every launch itself: leave it out of the "
                             "command (give ab its own --out and --name)")
    return tuple(command)


def check_pairs(pairs: int) -> int:
    if pairs < 1:
        raise UsageError(f"bad --pairs {pairs}: at least 1 pair of launches is needed (5 "
                         "or more to judge a row on its launch ratios)")
    return pairs
