"""Noise from a history (compare --noise-from, compare.noise): a steady series leaves a
ratio's interval as it was, a noisy one widens it; fewer than 5 past runs are said and not
used. Fixture stores: the base fixture scaled run by run, added with history add."""

import json

import pytest

from commbench.cli import main
from commbench.compare.noise import MIN_RUNS, robust_log_spread, widened
from commbench.history import add_runs
from tests.unit.compare.gate_fixtures import FIXTURES, scaled_run

STEADY = (1.0, 1.004, 0.997, 1.002, 0.999, 1.001)
NOISY = (1.0, 1.35, 0.8, 1.25, 0.85, 1.3)


def store_of(tmp_path, factors, name="history.db") -> str:
    """A store holding the base fixture and one run per factor (complete, in time order)."""
    folders = [str(FIXTURES / "base")]
    for index, factor in enumerate(factors):
        folders.append(scaled_run(tmp_path / "past", f"past-{name}-{index}", factor,
                                  start=f"2026-11-{index + 1:02d}T00:00:00+00:00"))
    url = f"sqlite:///{tmp_path / name}"
    add_runs(url, folders)
    return url


def compare_json(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", *args, "--json"])
    captured = capsys.readouterr()
    *rows, summary = [json.loads(line) for line in captured.out.splitlines()]
    return exit_info.value.code, rows, summary["summary"], captured.err


def test_the_spread_is_robust_and_needs_five_runs():
    assert robust_log_spread([100.0] * 4).spread is None and robust_log_spread([1.0] * 4).runs == 4
    spread = robust_log_spread([100, 101, 99, 100, 100, 500]).spread  # one outlier run
    assert spread is not None and spread < 0.02
    assert widened(0.9, 1.1, 0.0) == (0.9, 1.1)  # a steady series: as it was
    lo, hi = widened(0.9, 1.1, 0.2)
    assert lo < 0.6 and hi > 1.6


def test_a_steady_series_leaves_the_interval_and_the_gate_as_they_were(tmp_path, capsys):
    url = store_of(tmp_path, STEADY)
    slow = scaled_run(tmp_path, "slow", 1.2)
    _, plain, plain_summary, _ = compare_json([str(FIXTURES / "base"), slow], capsys)
    code, rows, summary, _ = compare_json([str(FIXTURES / "base"), slow, "--noise-from", url,
                                           "--fail-on-regression"], capsys)
    assert code == 1
    for before, after in zip(plain, rows, strict=True):
        assert (after["ratio_lo"], after["ratio_hi"]) == (before["ratio_lo"], before["ratio_hi"])
        assert after["verdict"] == before["verdict"]
        assert after["run_spread"] is not None and after["history_runs"] == len(STEADY) + 1
    assert summary["noise"].startswith(f"noise: within-run and run-to-run from {url}; at that "
                                       "spread no row can hold below ")
    assert plain_summary["noise"].startswith("noise: within-run noise only")
    assert all(r["noise"] == "within-run" and r["run_spread"] is None for r in plain)


def test_a_noisy_series_widens_the_interval_and_a_slow_hour_passes(tmp_path, capsys):
    """1.2x is inside what this series' own runs spread by (SD of the log median ~0.2): the
    intervals widen past 1, no row is slower, and the gate passes where within-run noise
    alone fails it."""
    url = store_of(tmp_path, NOISY)
    slow = scaled_run(tmp_path, "slow", 1.2)
    code, plain, _, _ = compare_json([str(FIXTURES / "base"), slow, "--fail-on-regression"],
                                     capsys)
    assert code == 1
    code, rows, summary, err = compare_json([str(FIXTURES / "base"), slow, "--noise-from",
                                             url, "--fail-on-regression"], capsys)
    assert code == 0, err
    for before, after in zip(plain, rows, strict=True):
        assert after["ratio_lo"] < before["ratio_lo"] and after["ratio_hi"] > before["ratio_hi"]
        assert after["ratio_lo"] < 1 and after["verdict"] == "noisy"
        assert after["run_spread"] > 0.1
    assert summary["familywise_slower"] == 0


def test_fewer_than_five_past_runs_are_said_and_not_used(tmp_path, capsys):
    url = store_of(tmp_path, NOISY[:MIN_RUNS - 2])  # base + 3 = 4 past runs
    slow = scaled_run(tmp_path, "slow", 1.2)
    code, rows, summary, _ = compare_json([str(FIXTURES / "base"), slow, "--noise-from", url,
                                           "--fail-on-regression"], capsys)
    assert code == 1  # within-run noise decides, as without a store
    assert all(r["run_spread"] is None and "4 past runs < 5" in r["noise"] for r in rows)
    assert "within-run noise only" in summary["noise"] and "fewer than 5" in summary["noise"]


def test_the_new_run_never_widens_its_own_interval(tmp_path, capsys):
    """A regressed run already added to the store is left out of its series' spread."""
    url = store_of(tmp_path, STEADY)
    slow = scaled_run(tmp_path, "slow", 1.5, start="2026-12-01T00:00:00+00:00")
    add_runs(url, [slow])
    code, rows, _, _ = compare_json([str(FIXTURES / "base"), slow, "--noise-from", url,
                                     "--fail-on-regression"], capsys)
    assert code == 1 and all(r["history_runs"] == len(STEADY) + 1 for r in rows)


def test_the_baselines_own_history_store_is_used_without_being_named(tmp_path, capsys):
    url = store_of(tmp_path, NOISY)
    base = scaled_run(tmp_path, "stored-base", 1.0, start="2026-11-20T00:00:00+00:00",
                      meta={"command_line": ["commbench", "run", "--history", url]})
    add_runs(url, [base])
    slow = scaled_run(tmp_path, "slow", 1.2)
    code, rows, summary, _ = compare_json([base, slow, "--fail-on-regression"], capsys)
    assert code == 0 and summary["noise_from"] == url
    assert all(r["run_spread"] is not None for r in rows)


def test_a_store_that_is_not_there_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(FIXTURES / "base"), str(FIXTURES / "slower"), "--noise-from",
              str(tmp_path / "none.db")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1


def test_the_slowdown_the_history_hides_is_stated_and_is_the_one_the_gate_uses(tmp_path, capsys):
    """The summary names the smallest slowdown a row can hold at the series' spread: a run
    slower by a little more than that fails the gate, and one slower by a little less
    passes. The figure is the gate's own, not a second estimate beside it."""
    url = store_of(tmp_path, NOISY)
    probe = scaled_run(tmp_path, "probe", 1.0)
    _, _, summary, _ = compare_json([str(FIXTURES / "base"), probe, "--noise-from", url],
                                    capsys)
    floor = summary["holds_from"]
    assert 1.3 < floor < 10  # NOISY spreads by ~0.3 in log, over 8 rows: far above 5 %
    assert f"no row can hold below {floor:.2f}x" in summary["noise"]
    above = scaled_run(tmp_path, "above", floor * 1.03)
    below = scaled_run(tmp_path, "below", floor / 1.03)
    code_above, rows_above, held, _ = compare_json(
        [str(FIXTURES / "base"), above, "--noise-from", url, "--fail-on-regression"], capsys)
    code_below, rows_below, passed, _ = compare_json(
        [str(FIXTURES / "base"), below, "--noise-from", url, "--fail-on-regression"], capsys)
    assert code_above == 1 and held["familywise_slower"] == len(rows_above)
    assert code_below == 0 and passed["familywise_slower"] == 0
    assert all(r["verdict"] == "slower" for r in rows_below)  # per row it reads slower, yet
    # the correction over the rows does not uphold it: the stated floor is Holm's, not 95 %'s


def test_no_history_states_no_floor(capsys):
    _, _, summary, _ = compare_json([str(FIXTURES / "base"), str(FIXTURES / "slower")], capsys)
    assert summary["holds_from"] is None and "can hold below" not in summary["noise"]
