"""--overlap / --background parsing and refusals (specs.contention): one line each."""

import pytest

from commbench.core.errors import UsageError
from commbench.specs import contention
from commbench.specs.measure import MeasureSpec, validate


@pytest.mark.parametrize("text, expected", [("matmul:1024", "matmul:1024"),
                                            ("MatMul: 64", "matmul:64"), ("matmul:0", "matmul:0")])
def test_overlap_parses(text, expected):
    assert contention.parse_overlap(text) == expected


@pytest.mark.parametrize("text, words", [("conv:8", "unknown kind"), ("matmul", "KIND:SIZE"),
                                         ("matmul:1K", "not a whole number"),
                                         ("matmul:-1", "the side must be")])
def test_bad_overlap_is_refused(text, words):
    with pytest.raises(UsageError, match=words):
        contention.parse_overlap(text)


def test_background_ranks_and_their_limits():
    assert contention.parse_ranks("0-2,5") == (0, 1, 2, 5)
    assert contention.background_ranks(1024, (), 4) == (0, 1, 2, 3)
    with pytest.raises(UsageError, match="names 5 ranks, the run has 4"):
        contention.background_ranks(1024, (0, 1, 2, 3, 4), 4)
    with pytest.raises(UsageError, match="rank 7 is not in the run"):
        contention.background_ranks(1024, (0, 7), 4)
    with pytest.raises(UsageError, match="needs --background"):
        contention.background_ranks(0, (0, 1), 4)
    with pytest.raises(UsageError, match="bad --background"):
        contention.parse_background("12Q")


def test_labels_say_the_load_and_its_ranks():
    assert contention.background_label(16 << 20, (), 4) == "16M"
    assert contention.background_label(16 << 20, (0, 1), 4) == "16M@0,1"
    assert contention.background_label(0, (), 4) == ""


def test_ps_and_per_call_are_refused_under_contention():
    with pytest.raises(UsageError, match="ps lays out its own ranks"):
        validate(MeasureSpec(ops=("ps",), overlap="matmul:8"), 4)
    with pytest.raises(UsageError, match="drop --per-call"):
        validate(MeasureSpec(ops=("allreduce",), overlap="matmul:8", per_call=True), 2)
    validate(MeasureSpec(ops=("allreduce",), overlap="matmul:8", background=1024), 2)
