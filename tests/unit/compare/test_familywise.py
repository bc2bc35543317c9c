"""The gate judged per run (compare.familywise): Holm's correction over the rows compared, at
--alpha; a row may read slower while the run passes. Fixture folders, no ranks."""

import json
import math

import pytest

from commbench.cli import main
from commbench.compare.familywise import holm, interval_p_value, parse_alpha
from commbench.core.errors import UsageError
from tests.unit.compare.gate_fixtures import FIXTURES, scaled_run


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def compare_json(args, capsys):
    code, out, err = run(["compare", *args, "--json"], capsys)
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    return code, rows, summary["summary"], err


def test_holm_adjusts_step_down_and_keeps_the_order():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.2]) == [0.2]
    assert holm([float("nan"), 0.001]) == pytest.approx([1.0, 0.002])  # NaN: in, never held


def test_a_p_value_is_read_off_the_interval_on_the_log_scale():
    edge = interval_p_value(1.0, math.exp(1.0))  # a 95 % interval that just touches 1
    assert edge == pytest.approx(0.05, rel=1e-6)
    assert interval_p_value(0.9, 1.1) > 0.5
    assert interval_p_value(1.4, 1.6) < 1e-10  # far below what 2000 bootstrap copies resolve
    assert math.isnan(interval_p_value(float("nan"), 2.0))


@pytest.mark.parametrize("text", ["0", "0.5", "50%", "-1", "abc", "1.5"])
def test_alpha_outside_zero_to_a_half_is_refused(text):
    with pytest.raises(UsageError):
        parse_alpha(text)


def test_alpha_is_read_as_a_fraction_or_a_percentage():
    assert parse_alpha("1%") == pytest.approx(0.01) and parse_alpha("0.05") == 0.05


@pytest.mark.parametrize("text", ["0", "0.5", "x"])
def test_bad_alpha_is_one_line_and_exit_2(capsys, text):
    code, out, err = run(["compare", str(FIXTURES / "base"), str(FIXTURES / "slower"),
                          "--alpha", text], capsys)
    assert code == 2 and "--alpha" in err and len(err.strip().splitlines()) == 1


def test_rows_slower_one_by_one_do_not_fail_a_run_that_the_correction_clears(tmp_path,
                                                                              capsys):
    """noisy-b, 1.5x: five rows read slower at 95 % each (p 0.001-0.03), but none survives
    Holm over 8 rows at 1 %: the run passes, the rows keep their verdict with n.s. beside."""
    slow = scaled_run(tmp_path, "slow", 1.5, base="noisy-b")
    code, rows, summary, err = compare_json([str(FIXTURES / "noisy-b"), slow,
                                             "--fail-on-regression"], capsys)
    assert summary["slower"] >= 3 and summary["familywise_slower"] == 0
    assert code == 0, err
    assert {r["familywise"] for r in rows if r["verdict"] == "slower"} == {"n.s."}
    assert summary["rule"] == "Holm" and summary["alpha"] == 0.01
    # The same rows at a looser level: the smallest Holm p-value holds, and the gate fails.
    code, rows, summary, err = compare_json([str(FIXTURES / "noisy-b"), slow,
                                             "--fail-on-regression", "--alpha", "0.2"], capsys)
    assert summary["familywise_slower"] >= 1 and code == 1
    assert "after Holm's correction over 8 row(s) at alpha 20%" in err


def test_a_steady_run_one_and_a_half_times_slower_fails_family_wise(capsys):
    code, out, err = run(["compare", str(FIXTURES / "base"), str(FIXTURES / "slower"),
                          "--fail-on-regression"], capsys)
    assert code == 1
    assert "gate: Holm over 8 row(s) at family-wise alpha 1%: 8 slower row(s) hold" in out
    assert "noise: within-run noise only" in out


def test_the_summary_states_rule_and_level_and_the_tables_name_every_column(tmp_path, capsys):
    summary_md = tmp_path / "summary.md"
    code, out, _ = run(["compare", str(FIXTURES / "base"), str(FIXTURES / "slower"),
                        "--markdown", str(summary_md), "--alpha", "0.05"], capsys)
    assert code == 0
    header = out.splitlines()[0].split()
    assert "family" in header and "note" in header  # the unstable column has a name
    text = summary_md.read_text()
    table_header = text.splitlines()[2]
    assert "| note |" in table_header and "family (Holm 5%)" in table_header
    assert "| |" not in table_header and "|  |" not in table_header  # no nameless column
    assert "gate: Holm over 8 row(s) at family-wise alpha 5%" in text
