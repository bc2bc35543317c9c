"""estimate --overlap-from (model.overlap_price), the model's and history's keys for overlap
and background rows: worked out by hand, no process."""

from pathlib import Path

import pytest

from commbench.core.errors import UsageError
from commbench.history.ingest import sweep_points
from commbench.model.estimate import estimate, step_spec
from commbench.model.fit import measured_curves
from commbench.model.overlap_price import exposed
from commbench.results import load_run

FIXTURES = Path(__file__).parents[2] / "fixtures"


def overlap_row(size: int, efficiency: float, op: str = "allreduce", **extra) -> dict:
    return {"op": op, "backend": "gloo", "size_bytes": size, "lat_us_p50": 10.0 + size / 1e3,
            "overlap": "matmul:256", "overlap_efficiency": efficiency, "comm_slowdown": 1.5,
            "group": None, "dtype": "float32", "world_size": 2, **extra}


def test_dp_terms_expose_one_minus_efficiency_and_tp_terms_everything():
    result = estimate(load_run(FIXTURES / "model-step").rows, step_spec("7B", dp=8))
    rows = [overlap_row(1 << 20, 0.25), overlap_row(32 << 20, 0.75)]
    step = exposed(result, rows, "ov")
    first, full, last = step.terms  # 1 MiB, 25 MiB x 534, 451 KiB: nearest 1M, 32M, 1M
    assert first.efficiency == 0.25 and first.exposed_s == pytest.approx(0.75 * first.term.time_s)
    assert full.efficiency == 0.75 and full.exposed_s == pytest.approx(0.25 * full.term.time_s)
    assert last.basis == "allreduce 1M"
    assert step.exposed_s == pytest.approx(sum(t.exposed_s for t in step.terms))
    assert "fully exposed" in step.notes[0] and "matmul:256" in step.notes[0]


def test_a_collective_the_overlap_run_lacks_takes_its_median_and_says_so():
    result = estimate(load_run(FIXTURES / "model-step").rows, step_spec("7B", dp=8, zero="1"))
    step = exposed(result, [overlap_row(1 << 20, 0.5)], "ov")
    assert {t.basis for t in step.terms} == {"median of the run"}
    assert any("no --overlap rows of" in note for note in step.notes)


def test_efficiency_above_one_hides_no_more_than_everything():
    result = estimate(load_run(FIXTURES / "model-step").rows, step_spec("7B", dp=8))
    step = exposed(result, [overlap_row(1 << 20, 1.4)], "ov")
    assert step.exposed_s == 0.0


def test_a_run_without_compute_beside_is_refused():
    with pytest.raises(UsageError, match="no --overlap rows"):
        exposed(None, [overlap_row(8, 1.0, overlap="matmul:0")], "ov")


def test_model_and_history_keep_contended_rows_apart_from_plain_ones():
    plain = {**overlap_row(1024, 0.5), "overlap": ""}
    rows = [plain, overlap_row(1024, 0.5), {**plain, "background": "4M"}]
    variants = sorted(key.variant for key in measured_curves(rows))
    assert variants == ["", "background 4M", "overlap matmul:256"]
    points = sweep_points(rows)
    assert sorted(p.variant for p in points) == ["", "background=4M", "overlap=matmul:256"]


def test_compare_never_pairs_a_contended_run_with_a_plain_one():
    from commbench.compare.runs import NothingInCommon, compare_rows
    from commbench.results.schema import with_defaults

    plain = with_defaults({**overlap_row(1024, 0.5), "overlap": "", "samples_us": [10.0] * 5})
    beside = with_defaults({**plain, "overlap": "matmul:256"})
    with pytest.raises(NothingInCommon) as refused:
        compare_rows([plain], [beside])
    assert "overlap" in str(refused.value.args) + str(refused.value)


def test_a_repeat_run_prices_with_its_launches_pooled():
    """A real --repeat 3 --overlap run (tests/fixtures/overlap-repeat): the 1 MiB terms take
    the nearest size's efficiency pooled over the three launches, not launch 0's."""
    from commbench.results.launches import pooled_rows

    run = load_run(FIXTURES / "overlap-repeat")
    result = estimate(load_run(FIXTURES / "model-step").rows, step_spec("7B", dp=8))
    step = exposed(result, run.rows, run.name)
    first = step.terms[0]  # allreduce of 1 MiB: nearest measured size 64K
    pooled = [r for r in pooled_rows(run.rows) if r["size_bytes"] == 65536][0]
    launch0 = [r for r in run.rows if r["size_bytes"] == 65536 and r["launch"] == 0][0]
    assert first.basis == "allreduce 64K"
    assert first.efficiency == pytest.approx(pooled["overlap_efficiency"])
    assert first.efficiency != pytest.approx(launch0["overlap_efficiency"])
