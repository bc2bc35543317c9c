"""locate's verdicts, one enum: what an entity, link or switch was judged (docs/commands/locate.md,
"How it decides"). A ``str`` enum, so that the files (entities.csv, run.json's suspects, --json)
keep the words they always had and read back as plain strings compare equal.
"""

from __future__ import annotations

from enum import StrEnum

GROUPS = ("link", "switch")  # suspect kinds that are not one entity (rows of their own)


class Verdict(StrEnum):
    OK = "ok"
    TRANSIENT = "transient"  # slow in the matrix, not again when retested
    INCONCLUSIVE = "inconclusive"
    # beyond the (raised) z on its pooled evidence, but under the min-effect line: listed
    # with its evidence, exit 0, never "no suspect" while it stands
    SLOW = "slow"
    HUNG = "hung"  # a pair hung or failed: both ends named
    NOT_MEASURED = "not measured"  # no completed pair measured it (entities.csv)
    BAD_GPU = "bad gpu"
    BAD_NODE = "bad node"
    BAD_RAIL = "bad rail"
    BAD_LINK = "bad link"
    BAD_SWITCH = "bad switch"

    @classmethod
    def bad(cls, kind: str) -> Verdict:
        """``bad <kind>``: gpu, node, rail, link or switch."""
        return cls(f"bad {kind}")


BAD = frozenset(v for v in Verdict if v.value.startswith("bad "))
PASSED = frozenset((Verdict.OK, Verdict.TRANSIENT))  # a host on these only is a good host


def is_bad(verdict: str) -> bool:
    """A confirmed finding (exit 1): ``bad <kind>``; a verdict read back from a file counts."""
    return verdict in BAD


def failed(verdict: str) -> bool:
    """Bad, or a pair that hung: its hosts go into bad-hosts.txt."""
    return is_bad(verdict) or verdict == Verdict.HUNG
