"""Each member's lateness in a matched call (docs/commands/stragglers.md, "Clocks").

- ``shared``: every member on one host with a comparable clock (``monotonic``: the host's
  CLOCK_MONOTONIC, one for all its processes; ``wall``: a Flight Recorder dump's
  ``time_created_ns``): lateness = its issue time minus the group's first.
- ``clock-free``: otherwise, from the time each member spent inside the call. A blocking
  collective ends at about the same moment on every member, so the first to arrive waits
  longest and the last least: lateness = the longest wait minus its own. No member's clock is
  compared with another's, so a host whose clock is off by seconds changes nothing.

A call with neither (members on several hosts, or a clock that cannot be compared, and a
member's wait unknown) has no lateness and is counted as unmeasured.
"""

from __future__ import annotations

from dataclasses import dataclass

from commbench.stragglers.matching import Matched

SHARED = "shared"
CLOCK_FREE = "clock-free"
MIXED = "mixed"
COMPARABLE_CLOCKS = ("monotonic", "wall")


@dataclass
class Late:
    """A matched call with each member's lateness in seconds and the clock that gave it."""

    call: Matched
    late_s: dict[int, float]
    clock: str
    hosts: tuple[str, ...]

    @property
    def last(self) -> int | None:
        """The member that arrived last (None when all arrived together)."""
        rank = max(self.late_s, key=lambda r: (self.late_s[r], -r))
        return rank if self.late_s[rank] > 0 else None

    @property
    def held_s(self) -> float:
        """How much sooner the call would have started without its last arrival: the last
        one's lateness minus the next latest."""
        values = sorted(self.late_s.values(), reverse=True)
        return values[0] - values[1] if len(values) > 1 else 0.0


def lateness(call: Matched, hosts: dict[int, str], clocks: dict[int, str]) -> Late | None:
    """The call's lateness per member, from the shared clock where there is one, else
    clock-free; None where neither applies."""
    arrivals = call.arrivals
    on = tuple(sorted({hosts.get(rank, "") for rank in arrivals}))
    kinds = {clocks.get(rank, "") for rank in arrivals}
    issued = [a.issue_ns for a in arrivals.values()]
    if len(on) == 1 and len(kinds) == 1 and kinds <= set(COMPARABLE_CLOCKS) and \
            None not in issued:
        first = min(issued)
        return Late(call, {rank: (a.issue_ns - first) / 1e9 for rank, a in arrivals.items()},
                    SHARED, on)
    waits = [a.wait_ns for a in arrivals.values()]
    if None not in waits:
        longest = max(waits)
        return Late(call, {rank: (longest - a.wait_ns) / 1e9 for rank, a in arrivals.items()},
                    CLOCK_FREE, on)
    return None


def clock_of(kinds: set[str]) -> str:
    """The run's clock in one word: shared, clock-free, mixed (or none: nothing measured)."""
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else MIXED
