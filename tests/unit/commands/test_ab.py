"""commbench ab without ranks: bad input is one line and exit 2 (before any launch), the
launch order alternates, and the paired test judges rows on their launch ratios."""

import math

import pytest

from commbench.cli import main
from commbench.commands.ab import launch_order
from commbench.compare.familywise import judge
from commbench.compare.paired import paired_rows
from commbench.core.student import paired_t, t_quantile, t_two_sided_p


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.parametrize("args, words", [
    (["--pairs", "0", "--", "allreduce"], "bad --pairs 0"),
    (["--env-b", "NCCL_ALGO", "--", "allreduce"], "bad --env-b 'NCCL_ALGO'"),
    (["--env-a", "=1", "--", "allreduce"], "bad --env-a '=1'"),
    (["--python-b", "/bin/sh", "--", "allreduce"], "commbench cannot be imported there"),
    (["--python-b", "/no/such/python", "--", "allreduce"], "not an executable file"),
    (["--", "compare", "A", "B"], "'compare' is not a measuring command"),
    (["--", "locate"], "'locate' is not a measuring command"),
    ([], "ab needs a measuring command after --"),
    (["--alpha", "0.5", "--", "allreduce"], "bad --alpha"),
    (["--alpha", "0", "--", "allreduce"], "bad --alpha"),
    (["--", "allreduce", "--repeat", "3"], "ab sets --repeat"),
    (["--", "allreduce", "--out=x"], "ab sets --out"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, words):
    code, out, err = run(["ab", "--out", str(tmp_path), *args], capsys)
    assert code == 2, err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # refused before anything was made


def test_a_bad_option_of_the_command_is_refused_by_its_dry_run(capsys, tmp_path):
    code, _, err = run(["ab", "--out", str(tmp_path), "--", "allreduce", "--sizes", "0"],
                       capsys)
    assert code == 2 and "side A: bad size '0'" in err and len(err.strip().splitlines()) == 1


def test_launches_alternate_a_b_b_a():
    assert launch_order(3) == [(0, "A"), (0, "B"), (1, "B"), (1, "A"), (2, "A"), (2, "B")]


def test_the_t_distribution_matches_its_tables():
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, abs=1e-5)
    assert t_quantile(0.975, 9) == pytest.approx(2.262157, abs=1e-5)
    assert t_two_sided_p(2.776445, 4) == pytest.approx(0.05, abs=1e-6)
    assert t_two_sided_p(10.0, 4) == pytest.approx(0.000562, rel=1e-3)


def test_a_paired_interval_is_t_over_the_log_ratios():
    logs = [0.1, 0.2, 0.15, 0.25, 0.05]
    mean, lo, hi, p_value = paired_t(logs)
    sd = math.sqrt(sum((v - 0.15) ** 2 for v in logs) / 4)
    assert mean == pytest.approx(0.15)
    assert hi - mean == pytest.approx(2.776445 * sd / math.sqrt(5), rel=1e-5)
    assert p_value == pytest.approx(t_two_sided_p(0.15 / (sd / math.sqrt(5)), 4))


def _rows(levels: list[float], factor: float) -> list[dict]:
    """One measurement (allreduce 4K), one row per launch at the launch's level x factor."""
    return [{"op": "allreduce", "backend": "gloo", "device": "cpu", "dtype": "float32",
             "reduce_op": "sum", "inplace": False, "world_size": 2, "size_bytes": 4096,
             "lat_us_p50": 100 * level * factor, "lat_us_ci_lo": 95 * level * factor,
             "lat_us_ci_hi": 105 * level * factor, "samples_us": [], "launch": index}
            for index, level in enumerate(levels)]


LEVELS_A = [1.0, 1.3, 1.0, 1.02, 1.3, 0.99, 1.01, 1.28]  # launches on a fast or a slow level
JITTER = [1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0]


def test_pairs_see_a_slowdown_that_the_launch_levels_hide():
    """B's launches share A's level (alternated in time) and cost 1.25x: every pair says so,
    though the launch levels spread as far as the slowdown."""
    b_levels = [level * jitter for level, jitter in zip(LEVELS_A, JITTER, strict=True)]
    frame, apart, missing = paired_rows(_rows(LEVELS_A, 1.0), _rows(b_levels, 1.25), 0.05)
    (record,) = frame.to_dict("records")
    assert record["verdict"] == "slower" and record["test"] == "paired t over 8 launch ratios"
    assert record["ratio"] == pytest.approx(1.25, rel=0.02)
    assert record["new"] / record["baseline"] == pytest.approx(record["ratio"])  # one story
    assert record["delta_us"] == pytest.approx(record["new"] - record["baseline"])
    gate = judge(frame, 0.01)
    assert gate.slower == 1 and not apart and not missing


def test_identical_sides_are_not_slower():
    b_levels = [level * jitter for level, jitter in zip(LEVELS_A, JITTER, strict=True)]
    frame, _, _ = paired_rows(_rows(LEVELS_A, 1.0), _rows(b_levels, 1.0), 0.05)
    assert list(frame["verdict"]) == ["same"] and judge(frame, 0.01).slower == 0


def test_unpaired_launches_spread_too_wide_to_tell():
    """The same launches with B's levels shuffled (not alternated): no verdict holds."""
    b_levels = [1.3, 1.0, 1.28, 1.0, 0.99, 1.3, 1.02, 1.01]
    frame, _, _ = paired_rows(_rows(LEVELS_A, 1.0), _rows(b_levels, 1.25), 0.05)
    assert judge(frame, 0.01).slower == 0
