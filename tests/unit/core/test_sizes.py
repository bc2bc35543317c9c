"""Size grammar (docs/reference/options.md, --sizes): examples, parse/format round trips, and every
rejection."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commbench.core.sizes import SizeError, format_size, parse_size, parse_sizes

K, M, G = 1 << 10, 1 << 20, 1 << 30


def test_default_sweep_is_powers_of_two_from_8_to_64m():
    sizes = parse_sizes("8-64M")
    assert sizes[0] == 8 and sizes[-1] == 64 * M
    assert len(sizes) == 24
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1K,64K,1M", [K, 64 * K, M]),
        ("8-1G,3M", sorted({8 << i for i in range(28)} | {3 * M})),
        ("1KB,1KiB,1k", [K]),
        ("2MB,2MiB", [2 * M]),
        ("1GB,1GiB,1g", [G]),
        ("1.5K", [1536]),
        ("100B", [100]),
        (" 4 , 8 ", [4, 8]),
        ("64-64", [64]),
        ("8-100", [8, 16, 32, 64]),
    ],
)
def test_examples(text, expected):
    assert parse_sizes(text) == expected


def test_factor_steps_ranges():
    assert parse_sizes("1K-1M", factor=4) == [K, 4 * K, 16 * K, 64 * K, 256 * K, M]
    assert parse_sizes("10-20", factor=1.5) == [10, 15]


@pytest.mark.parametrize(
    ("nbytes", "text"), [(M, "1M"), (1536, "1.5K"), (100, "100"), (64 * G, "64G"), (8, "8")]
)
def test_format(nbytes, text):
    assert format_size(nbytes) == text


@given(st.integers(min_value=1, max_value=1 << 44))
def test_format_parses_back(nbytes):
    assert parse_size(format_size(nbytes)) == nbytes


@given(st.lists(st.integers(min_value=1, max_value=1 << 40), min_size=1, max_size=20))
def test_lists_round_trip(values):
    text = ",".join(format_size(v) for v in values)
    assert parse_sizes(text) == sorted(set(values))


@given(
    st.integers(min_value=1, max_value=1 << 30),
    st.integers(min_value=0, max_value=20),
    st.sampled_from([2, 3, 4, 1.5]),
)
def test_ranges_are_geometric_and_bounded(low, span, factor):
    high = low * (1 << span)
    sizes = parse_sizes(f"{format_size(low)}-{format_size(high)}", factor=factor)
    assert sizes[0] == low and sizes[-1] <= high
    assert all(b > a for a, b in zip(sizes, sizes[1:], strict=False))


@pytest.mark.parametrize(
    "text",
    ["0", "0-8", "64-8", "", " ", "8,,16", "abc", "8X", "1.3B", "-8", "8-", "K", "1e3", "8--16",
     "0.5", "1.2.3K", "8;16"],
)
def test_rejections(text):
    with pytest.raises(SizeError):
        parse_sizes(text)


@given(st.floats(max_value=1.0, allow_nan=False))
def test_factor_must_exceed_one(factor):
    with pytest.raises(SizeError):
        parse_sizes("8-64", factor=factor)


@given(st.text(max_size=20))
def test_any_text_parses_or_is_refused_cleanly(text):
    try:
        sizes = parse_sizes(text)
    except SizeError as error:
        assert "\n" not in str(error)
    else:
        assert sizes and all(isinstance(s, int) and s >= 1 for s in sizes)
