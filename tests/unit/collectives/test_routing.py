"""The routing of alltoallv, pure: parsing, files, the drawn matrices and the split of a size.

Expectations are worked out by hand (apportionments, shares of a gate's draw), never with the
module's own formulas.
"""

import subprocess
import sys

import pytest

from commbench.collectives import routing
from commbench.collectives.routing import Routing, parse_routing
from commbench.core.errors import UsageError

# ---- parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("uniform", Routing("uniform")),
    ("zipf:1.2", Routing("zipf", exponent=1.2)),
    ("ZIPF:0", Routing("zipf", exponent=0.0)),
    ("hot:2:0.5", Routing("hot", hot=2, share=0.5)),
    ("hot:1:1", Routing("hot", hot=1, share=1.0)),
])
def test_routings_parse_and_print_back(text, expected):
    parsed = parse_routing(text)
    assert parsed == expected
    assert parse_routing(parsed.text) == parsed


@pytest.mark.parametrize(("text", "message"), [
    ("gauss", "unknown --routing 'gauss'"),
    ("uniform:2", "unknown --routing"),
    ("file:", "unknown --routing"),
    ("zipf:-1", "exponent S must be 0 or more"),
    ("zipf:x", "S must be a number"),
    ("hot:2", "use hot:K:F"),
    ("hot:0:0.5", "K must be at least 1"),
    ("hot:two:0.5", "K must be a whole number"),
    ("hot:2:1.5", "F is a share"),
    ("hot:2:0", "F is a share"),
])
def test_bad_routings_are_one_line_usage_errors(text, message):
    with pytest.raises(UsageError, match=message) as caught:
        parse_routing(text)
    assert "\n" not in str(caught.value)


def test_a_matrix_file_reads_csv_whitespace_and_comments(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("# bytes from rank i to j\n0, 8,4\n4 0 8  # a comment\n\n8,4,0\n")
    parsed = parse_routing(f"file:{path}")
    assert parsed.kind == "file" and parsed.path == str(path)
    assert parsed.matrix == ((0, 8, 4), (4, 0, 8), (8, 4, 0))


@pytest.mark.parametrize(("text", "message"), [
    ("1,2,3\n4,5,6\n", "not square: 2 rows of 3"),
    ("1,2\n3\n", "not square"),
    ("0,5\n-1,0\n", "negative byte count"),
    ("0,1.5\n1,0\n", "not whole numbers"),
    ("0,0\n0,0\n", "every entry is 0"),
    ("# nothing\n", "holds no matrix"),
])
def test_bad_matrix_files_are_refused(tmp_path, text, message):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        parse_routing(f"file:{path}")


def test_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read --routing file:"):
        parse_routing(f"file:{tmp_path / 'absent.csv'}")


@pytest.mark.parametrize(("routing_", "experts", "topk", "world", "message"), [
    (Routing("uniform"), 8, 9, 4, "bad --topk 9"),
    (Routing("zipf", exponent=1.0), 2, 1, 4, "--experts 2 on groups of 4"),
    (Routing("hot", hot=9, share=0.5), 8, 2, 4, "9 hot experts"),
    (Routing("hot", hot=1, share=1.0), 8, 2, 4, "fewer than --topk 2"),
    (Routing("hot", hot=8, share=0.5), 8, 2, 4, "every expert is hot"),
    (Routing("file", path="m.csv", matrix=((1, 1), (1, 1))), 8, 2, 4, "2 x 2 matrix"),
])
def test_routings_that_cannot_be_drawn_are_refused(routing_, experts, topk, world, message):
    with pytest.raises(UsageError, match=message):
        routing.refuse(routing_, experts, topk, 16, world)


def test_a_file_of_the_group_size_is_accepted_whatever_the_experts():
    routing.refuse(Routing("file", path="m.csv", matrix=((0, 1), (1, 0))), 1, 5, 1, 2)


# ---- the drawn weights -----------------------------------------------------------------------

def test_experts_are_placed_in_contiguous_blocks():
    # e * 4 // 6 for e = 0..5, by hand: 0, 4, 8, 12, 16, 20 over 6
    assert [routing.owner(e, 6, 4) for e in range(6)] == [0, 0, 1, 2, 2, 3]
    assert [routing.owner(e, 8, 2) for e in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_uniform_weights_are_all_equal():
    assert routing.routing_weights(Routing("uniform"), 64, 2, 4096, 3, 0) == ((1,) * 3,) * 3


def test_every_token_goes_to_topk_experts():
    weights = routing.routing_weights(parse_routing("zipf:1.5"), 16, 3, 100, 4, 7)
    assert [sum(row) for row in weights] == [300] * 4  # 100 tokens x 3 copies per rank


def test_the_draw_is_seeded():
    zipf = parse_routing("zipf:1.0")
    first = routing.routing_weights(zipf, 16, 2, 500, 4, 1)
    assert routing.routing_weights.__wrapped__(zipf, 16, 2, 500, 4, 1) == first  # no cache
    assert routing.routing_weights(zipf, 16, 2, 500, 4, 2) != first


def test_a_hot_expert_takes_its_share_of_single_picks():
    # 4 experts on 4 ranks, top-1: the hot expert's rank gets F = 0.5 of 4 x 20000 tokens; the
    # binomial's standard deviation is sqrt(0.25 / 80000) = 0.0018, so 0.02 is 11 sigma.
    weights = routing.routing_weights(parse_routing("hot:1:0.5"), 4, 1, 20000, 4, 3)
    columns = [sum(column) for column in zip(*weights, strict=True)]
    shares = sorted(c / 80000 for c in columns)
    assert shares[-1] == pytest.approx(0.5, abs=0.02)
    for cold in shares[:-1]:  # the other three share 0.5: 1/6 each
        assert cold == pytest.approx(1 / 6, abs=0.02)


def test_topk_picks_distinct_experts_without_replacement():
    # hot:1:0.9, 4 experts (1 per rank), top-2. P(hot first) = 0.9; P(hot second) = P(a cold
    # one first) x P(hot | that cold one gone) = 0.1 x 0.9 / (1 - 0.1/3) = 0.0931. A token
    # picks the hot expert at most once: its rank gets (0.9 + 0.0931) / 2 = 0.4966 of the
    # copies (with replacement it would be 0.9).
    weights = routing.routing_weights(parse_routing("hot:1:0.9"), 4, 2, 20000, 4, 5)
    columns = [sum(column) for column in zip(*weights, strict=True)]
    assert max(columns) / (4 * 20000 * 2) == pytest.approx(0.4966, abs=0.01)


def test_a_steep_zipf_sends_nearly_everything_to_one_rank():
    # zipf:8: the top expert has 1 / (1 + 2^-8 + 3^-8 + ...) = 0.9959 of the gate.
    weights = routing.routing_weights(parse_routing("zipf:8"), 64, 1, 4000, 4, 0)
    columns = [sum(column) for column in zip(*weights, strict=True)]
    assert max(columns) / (4 * 4000) > 0.99


# ---- the split of a size ---------------------------------------------------------------------

def test_apportion_by_largest_remainders():
    assert routing._apportion(10, (1, 1, 1)) == [4, 3, 3]  # 3.33 each: the tie to index 0
    assert routing._apportion(7, (5, 3, 2)) == [4, 2, 1]  # 3.5, 2.1, 1.4: +1 to the .5
    assert routing._apportion(5, (0, 0)) == [0, 0]


def test_uniform_at_a_count_divisible_by_the_world_is_alltoalls_even_split():
    matrix = routing.split_matrix(((1,) * 4,) * 4, 256)
    assert matrix == ((64,) * 4,) * 4
    assert routing.imbalance(matrix) == 1.0


def test_a_file_comes_back_in_bytes_at_its_mean_row_sum():
    weights = ((0, 8, 4), (4, 0, 8), (8, 4, 0))  # bytes; float32: 12 B = 3 elements a rank
    assert routing.split_matrix(weights, 3) == ((0, 2, 1), (1, 0, 2), (2, 1, 0))


def test_rows_get_their_share_first():
    # Rank 0 sends 2 B, rank 1 sends 6 B: 8 elements at count 4 go 2 and 6.
    matrix = routing.split_matrix(((0, 2), (6, 0)), 4)
    assert matrix == ((0, 2), (6, 0))
    assert routing.busiest(matrix) == 6  # rank 1 sends 6 (and rank 0 receives 6)
    assert routing.imbalance(matrix) == 1.5  # 6 over the mean of 4


def test_hidden_cuts_whole_tokens():
    # count 6, tokens of 2 elements: 6 tokens in all, 3 a row, split 2 and 1 (tie to index 0).
    assert routing.split_matrix(((1, 1), (1, 1)), 6, unit=2) == ((4, 2), (4, 2))


def test_the_way_back_is_the_transpose():
    assert routing.transpose(((0, 2), (6, 1))) == ((0, 6), (2, 1))


def test_busiest_looks_at_receivers_too():
    # every rank sends 4; rank 2 receives 1 + 2 + 4 = 7
    assert routing.busiest(((0, 3, 1), (2, 0, 2), (0, 0, 4))) == 7


def test_matrix_text_reads_back_with_the_same_id(tmp_path):
    weights = ((1388, 3668), (961, 0))
    path = tmp_path / "splits.csv"
    path.write_text("# a header\n" + routing.matrix_text(weights))
    again = parse_routing(f"file:{path}")
    assert again.matrix == weights
    assert routing.matrix_id(again.matrix) == routing.matrix_id(weights)
    assert len(routing.matrix_id(weights)) == 10
    assert routing.matrix_id(((1, 2), (3, 4))) != routing.matrix_id(((1, 2), (4, 3)))


def test_routing_imports_no_torch():
    code = ("import sys; import commbench.collectives.routing as r; "
            "r.routing_weights(r.parse_routing('zipf:1'), 8, 2, 10, 2, 0); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
