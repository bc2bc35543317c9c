"""The flaky and busy faults: a delay on some visits only (every K-th, seeded at a probability,
or the first K), so a rank is slow in some rounds and fine in others. No process: the injector
is asked directly."""

import pytest

from commbench.engine import faults

LARGE = 262144


def slow_visits(text: str, rank: int, visits: int, size: int = LARGE) -> list[int]:
    injector = faults.Injector(rank, faults.parse(text))
    found = []
    for visit in range(visits):
        injector.at("p2p", size)
        if injector.action(*faults.WRAPPING) is not None:
            found.append(visit)
        injector.at("p2p", 8)  # another size: not a visit of a fault bound to LARGE
        assert injector.action(*faults.WRAPPING) is None
    return found


def test_every_second_visit_by_default():
    assert slow_visits(f"flaky=0.01:3:p2p:{LARGE}", 3, 8) == [0, 2, 4, 6]
    assert faults.parse("flaky=0.01")[0].every == 2


def test_every_kth_visit():
    assert slow_visits(f"flaky=0.01,3:3:p2p:{LARGE}", 3, 9) == [0, 3, 6]


def test_only_the_ranks_named():
    assert slow_visits(f"flaky=0.01:3:p2p:{LARGE}", 2, 8) == []


def test_a_probability_is_seeded_by_rank_and_visit():
    first = slow_visits(f"flaky=0.01,0.3:3:p2p:{LARGE}", 3, 200)
    assert first == slow_visits(f"flaky=0.01,0.3:3:p2p:{LARGE}", 3, 200)  # a rerun: the same
    assert 30 < len(first) < 90  # about 60 of 200
    assert first != slow_visits(f"flaky=0.01,0.3:*:p2p:{LARGE}", 4, 200)


@pytest.mark.parametrize("text", ["flaky=0.01,0", "flaky=0.01,2.5", "flaky=0.01,-1"])
def test_bad_every_is_refused(text):
    with pytest.raises(ValueError, match="flaky"):
        faults.parse(text)


def test_busy_slows_the_first_visits_only():
    """busy: a rank busy for a while, then free; a retest after it finds the rank normal."""
    assert slow_visits(f"busy=0.01,6:3:p2p:{LARGE}", 3, 12) == [0, 1, 2, 3, 4, 5]
    assert slow_visits(f"busy=0.01:3:p2p:{LARGE}", 3, 12) == [0, 1, 2, 3]
    assert slow_visits(f"busy=0.01,6:3:p2p:{LARGE}", 2, 12) == []


@pytest.mark.parametrize("text", ["busy=0.01,0", "busy=0.01,2.5"])
def test_bad_visits_are_refused(text):
    with pytest.raises(ValueError, match="busy's VISITS"):
        faults.parse(text)
