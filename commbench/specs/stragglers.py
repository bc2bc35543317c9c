"""stragglers' options as a frozen, torch-free spec (docs/commands/stragglers.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from commbench.core.errors import UsageError

_RANGE = re.compile(r"^\s*(\d+)\s*(?:(?:\.\.|-)\s*(\d+))?\s*$")


@dataclass(frozen=True)
class StragglersSpec:
    """What to read and how to narrow it; where the files go."""

    sources: tuple[str, ...] = ()
    steps: tuple[int, int] | None = None  # None: every step (set-up and tail left out)
    group: str | None = None
    json_out: bool = False
    out: str | None = None  # None: no files, the table only
    force: bool = False
    command_line: tuple[str, ...] = field(default_factory=tuple)


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """``K..M`` (or ``K-M``, or ``K``) as (first, last)."""
    if text is None:
        return None
    found = _RANGE.match(text)
    if not found:
        raise UsageError(f"--steps {text!r}: give K..M (e.g. 5..8) or one step K")
    first = int(found.group(1))
    last = int(found.group(2)) if found.group(2) is not None else first
    if last < first:
        raise UsageError(f"--steps {text!r}: the last step comes before the first")
    return first, last
