"""What rank 0 calls inside a locate run (locate.callbacks): every rank exits with rank 0's
code, 3 when no pair was measured."""

from __future__ import annotations

from dataclasses import asdict


def test_verdict_code_in_the_ranks_says_nothing_measured():
    """Every rank exits with rank 0's code: 3 when no pair was measured, never 0."""
    from commbench.locate import fleet as levels
    from commbench.locate.callbacks import verdict_code
    from commbench.specs.locate import LocateSpec

    found = [asdict(e) for e in levels.entities("node", [{"host": "h", "node": "0"}] * 4)]
    assert len(found) == 1
    assert verdict_code(LocateSpec(), found, []) == 3
