"""``commbench estimate`` on fixture runs whose curves are exactly t = α + n/β
(tests/fixtures/make_model_fixtures.py), so every expected time is worked out here by hand.

model-step: 8 ranks, whole world, nccl, bfloat16, sizes 8 B .. 1 GiB (powers of two) plus
461824 B, 17 MiB and 25 MiB; (α µs, β GB/s): allreduce (30, 4), allgather (15, 8),
reduce_scatter (12, 6), p2p pingpong (8, 20), p2p unidir (3, 40).
model-mesh: 8 ranks as dp=2,tp=4, allreduce only, 1 KiB .. 1 GiB: tp groups (10, 100),
dp groups (50, 5), whole world (60, 4).
t_us(n) = α + n / (β · 1e3).
"""

import json
import math
from pathlib import Path

import pytest

from commbench.commands.estimate import run_estimate
from commbench.core.errors import EXIT_USAGE, UsageError
from commbench.model.estimate import estimate, parse_count, step_spec
from commbench.results import load_run
from commbench.specs.estimate import StepOptions

FIXTURES = Path(__file__).parents[2] / "fixtures"
MiB = 1 << 20


def us(alpha, beta_gbps, nbytes):
    return alpha + nbytes / (beta_gbps * 1e3)


def run(name, **options):
    return estimate(load_run(FIXTURES / name).rows, step_spec(**options))


def by_what(result):
    return {term.what: term for term in result.terms}


def test_ddp_buckets_match_pytorchs_reducer_by_hand():
    # 7B parameters in bf16 on dp=8 (tp = pp = 1): G = 7e9 x 2 = 14,000,000,000 gradient bytes.
    # First bucket 1 MiB = 1,048,576; left 13,998,951,424; 25 MiB = 26,214,400;
    # 13,998,951,424 // 26,214,400 = 534 full buckets (13,998,489,600 B); the last bucket holds
    # 13,998,951,424 - 13,998,489,600 = 461,824 B. 1 + 534 + 1 = 536 allreduces.
    # Every size is measured, so the step costs 536 x 30 µs + 14e9 B / 4 GB/s
    # = 16,080 µs + 3,500,000 µs = 3.51608 s.
    result = run("model-step", params="7B", dp=8)
    assert [(t.nbytes, t.calls) for t in result.terms] == [
        (1_048_576, 1), (26_214_400, 534), (461_824, 1)]
    assert all(t.collective == "allreduce" and t.parallelism == "dp" for t in result.terms)
    assert all(t.source == "measured" for t in result.terms)
    assert result.total_s == pytest.approx(3.51608, rel=1e-9)
    assert result.subtotals() == {"dp": pytest.approx(3.51608, rel=1e-9)}
    # 8 ranks, dp=8, nothing else: the whole world is the dp group, no mismatch to report.
    assert not [n for n in result.notes if "whole-world" in n]
    assert "assumes no overlap with compute" in result.notes


def test_zero1_and_zero2_reduce_scatter_and_allgather_in_buckets():
    # 2^32 parameters, bf16, dp=8: G = 2^33 = 8,589,934,592 B. 25 MiB buckets: 327 full
    # (8,572,108,800 B) and a last one of 17,825,792 B = 17 MiB; 328 buckets in all.
    grads = 2**33
    scatter = 328 * 12 + grads / 6e3  # µs, once
    gather = 328 * 15 + grads / 8e3
    zero1 = run("model-step", params="4294967296", dp=8, zero="1", micro_batches=4)
    assert [(t.collective, t.nbytes, t.calls) for t in zero1.terms] == [
        ("reduce_scatter", 25 * MiB, 327), ("reduce_scatter", 17 * MiB, 1),
        ("allgather", 25 * MiB, 327), ("allgather", 17 * MiB, 1)]
    assert zero1.total_s == pytest.approx((scatter + gather) * 1e-6, rel=1e-9)
    # ZeRO-2 keeps only gradient shards: it reduce-scatters every one of the 4 micro-batches.
    zero2 = run("model-step", params="4294967296", dp=8, zero="2", micro_batches=4)
    assert [t.calls for t in zero2.terms] == [327 * 4, 4, 327, 1]
    assert zero2.total_s == pytest.approx((4 * scatter + gather) * 1e-6, rel=1e-9)


@pytest.mark.parametrize("zero", ["3", "fsdp"])
def test_zero3_fsdp_per_layer_units(zero):
    # 2^32 parameters over 32 layers (pp = 1): a unit is 2^27 parameters = 2^28 B = 256 MiB.
    # Per micro-batch: 32 forward gathers, 32 backward re-gathers, 32 reduce-scatters; 2
    # micro-batches: 64 + 64 allgathers of 256 MiB and 64 reduce-scatters of 256 MiB.
    result = run("model-step", params="4294967296", dp=8, zero=zero, layers=32, micro_batches=2)
    assert [(t.collective, t.nbytes, t.calls) for t in result.terms] == [
        ("allgather", 256 * MiB, 64), ("allgather", 256 * MiB, 64),
        ("reduce_scatter", 256 * MiB, 64)]
    expected = 128 * us(15, 8, 2**28) + 64 * us(12, 6, 2**28)
    assert result.total_s == pytest.approx(expected * 1e-6, rel=1e-9)


def test_zero3_without_layers_is_one_flat_unit_read_off_the_model_fit():
    # One unit of G = 2^33 B (8 GiB) > the largest measured size (1 GiB): the α–β fit is used,
    # and since the curves are exactly α + n/β it gives the exact line.
    result = run("model-step", params="4294967296", dp=8, zero="3")
    assert [(t.collective, t.nbytes, t.calls) for t in result.terms] == [
        ("allgather", 2**33, 1), ("allgather", 2**33, 1), ("reduce_scatter", 2**33, 1)]
    assert all(t.source == "model fit (extrapolated)" for t in result.terms)
    expected = 2 * us(15, 8, 2**33) + us(12, 6, 2**33)
    assert result.total_s == pytest.approx(expected * 1e-6, rel=1e-6)
    assert any("extrapolated" in note for note in result.notes)


def test_tensor_parallel_allreduces_use_the_tp_curve_of_a_mesh_run():
    # b·s·h = 1 x 4096 x 4096 bf16 = 2^25 B = 32 MiB per allreduce; 32 layers x 8 micro-batches:
    # 2 x 32 x 8 = 512 in forward and 512 in backward, on the tp=4 curve (10 µs, 100 GB/s).
    result = run("model-mesh", params="7B", dp=2, tp=4, layers=32, hidden=4096, seq=4096,
                 micro_batches=8)
    tp = [t for t in result.terms if t.parallelism == "tp"]
    assert [(t.collective, t.nbytes, t.calls) for t in tp] == [
        ("allreduce", 32 * MiB, 512), ("allreduce", 32 * MiB, 512)]
    assert result.subtotals()["tp"] == pytest.approx(1024 * us(10, 100, 2**25) * 1e-6)
    # The dp term reads the dp=2 curve (50 µs, 5 GB/s): the 1 MiB first bucket is measured.
    first = result.terms[0]
    assert (first.parallelism, first.nbytes) == ("dp", MiB)
    assert first.per_call_us == pytest.approx(us(50, 5, MiB))
    # Parameters per rank 7e9 / 4 = 1.75e9, 3.5e9 B of gradients: 1 + 133 + 1 buckets.
    assert [t.calls for t in result.terms if t.parallelism == "dp"] == [1, 133, 1]
    assert not [n for n in result.notes if "whole-world" in n or "groups of" in n]


def projected(alpha, beta_gbps, nbytes, steps, volume):
    return alpha * steps + nbytes / (beta_gbps * 1e3) * volume


def test_without_mesh_rows_terms_are_projected_from_the_whole_world_per_ring_step():
    # The 8-rank allreduce (30 µs, 4 GB/s) read for tp=4 groups: a ring of p ranks makes
    # 2(p-1) steps of n/p bytes, so α x 2·3 / (2·7) = 3/7 and the byte term x (2·3/4) /
    # (2·7/8) = 6/7; for dp=2: α x 2 / 14 = 1/7, bytes x 1 / 1.75 = 4/7.
    result = run("model-step", params="7B", dp=2, tp=4, layers=32, hidden=4096, seq=4096)
    tp = [t for t in result.terms if t.parallelism == "tp"]
    assert tp[0].per_call_us == pytest.approx(projected(30, 4, 2**25, 3 / 7, 6 / 7))
    assert {t.source for t in result.terms} == {"projected"}
    first = result.terms[0]
    assert (first.parallelism, first.nbytes) == ("dp", MiB)
    assert first.per_call_us == pytest.approx(projected(30, 4, MiB, 1 / 7, 4 / 7))
    assert any(n.startswith("tp allreduce term is a projection: tp=4 groups were not "
                            "measured; the whole-world curve (8 ranks)") for n in result.notes)
    assert any(n.startswith("dp allreduce term is a projection") for n in result.notes)


def test_a_two_rank_run_read_for_dp_64_is_a_projection_not_the_same_number():
    rows = [{**r, "world_size": 2, "group_size": 2} for r in load_run(FIXTURES / "model-step")
            .rows]
    at = {dp: estimate(rows, step_spec(params="1.3B", dp=dp)) for dp in (2, 64)}
    assert {t.source for t in at[2].terms} <= {"measured", "interpolated"}
    assert {t.source for t in at[64].terms} == {"projected"}
    # allreduce (30 µs, 4 GB/s) at 2 ranks -> 64: α x 2·63 / 2, bytes x (2·63/64) / 1.
    first = at[64].terms[0]
    assert first.per_call_us == pytest.approx(projected(30, 4, MiB, 63, 126 / 64))
    assert at[64].total_s > 1.9 * at[2].total_s
    assert any("dp allreduce term is a projection: dp=64" in n for n in at[64].notes)


def test_sequence_parallel_turns_each_allreduce_into_allgather_plus_reduce_scatter():
    # Same 32 MiB per call (allgather: the gathered output; reduce-scatter: the input), 2 of each
    # per layer and micro-batch in forward and again in backward: 4 x 32 x 1 = 128 of each.
    result = run("model-step", params="7B", dp=2, tp=4, layers=32, hidden=4096, seq=4096,
                 sequence_parallel=True)
    tp = [t for t in result.terms if t.parallelism == "tp"]
    assert [(t.collective, t.nbytes, t.calls) for t in tp] == [
        ("allgather", 32 * MiB, 64), ("reduce_scatter", 32 * MiB, 64),
        ("allgather", 32 * MiB, 64), ("reduce_scatter", 32 * MiB, 64)]
    # Projected from the 8-rank curves to tp=4 (p-1 ring steps of n/p bytes): α x 3/7,
    # byte term x (3/4) / (7/8) = 6/7.
    expected = (128 * projected(15, 8, 2**25, 3 / 7, 6 / 7)
                + 128 * projected(12, 6, 2**25, 3 / 7, 6 / 7))
    assert result.subtotals()["tp"] == pytest.approx(expected * 1e-6)


def test_pipeline_p2p_both_directions_at_every_boundary():
    # pp=4: 3 boundaries x 8 micro-batches = 24 activations forward and 24 gradients backward,
    # 32 MiB each, on the pingpong curve (8 µs, 20 GB/s) rather than unidir.
    result = run("model-step", params="7B", pp=4, layers=32, hidden=4096, seq=4096,
                 micro_batches=8)
    assert [(t.collective, t.nbytes, t.calls) for t in result.terms] == [
        ("p2p", 32 * MiB, 24), ("p2p", 32 * MiB, 24)]
    assert result.total_s == pytest.approx(48 * us(8, 20, 2**25) * 1e-6)
    assert any("pingpong" in note for note in result.notes)
    assert any("dp = 1" in note for note in result.notes)
    # With sequence parallelism over tp=2 a stage sends its sequence shard: 16 MiB.
    shard = run("model-step", params="7B", tp=2, pp=4, layers=32, hidden=4096, seq=4096,
                micro_batches=8, sequence_parallel=True)
    assert {t.nbytes for t in shard.terms if t.parallelism == "pp"} == {16 * MiB}


def test_sources_say_measured_interpolated_or_extrapolated():
    # A 24 MiB bucket lies between the measured 17 MiB and 25 MiB: log-log interpolation,
    # t = t17 x (t25 / t17) ^ (ln(24/17) / ln(25/17)).
    result = run("model-step", params="7B", dp=8, bucket="24M")
    terms = {t.nbytes: t for t in result.terms}
    assert terms[MiB].source == "measured"
    assert terms[24 * MiB].source == "interpolated"
    t17, t25 = us(30, 4, 17 * MiB), us(30, 4, 25 * MiB)
    share = math.log(24 / 17) / math.log(25 / 17)
    assert terms[24 * MiB].per_call_us == pytest.approx(t17 * (t25 / t17) ** share)
    # Above the sweep: the model fit.
    big = run("model-step", params="7B", dp=8, bucket="2G")
    assert {t.source for t in big.terms if t.nbytes > 1 << 30} == {"model fit (extrapolated)"}


def test_json_prints_exactly_one_object(capsys):
    code = run_estimate(str(FIXTURES / "model-step"), StepOptions(params="7B", dp=8), json_out=True)
    assert code == 0
    out = capsys.readouterr().out
    assert len(out.strip().splitlines()) == 1
    document = json.loads(out)
    assert document["total_s"] == pytest.approx(3.51608, rel=1e-9)
    for term in document["terms"]:
        assert {"parallelism", "collective", "bytes", "calls", "time_s", "source"} <= set(term)
    assert sum(t["time_s"] for t in document["terms"]) == pytest.approx(document["total_s"])
    assert "assumes no overlap with compute" in document["notes"]


def test_the_table_shows_subtotals_total_notes_and_the_overlap_assumption(capsys):
    layout = StepOptions(params="7B", dp=2, tp=4, layers=32, hidden=4096, seq=4096)
    code = run_estimate(str(FIXTURES / "model-step"), layout, json_out=False)
    assert code == 0
    out = capsys.readouterr().out
    assert "subtotal" in out and "total" in out and "whole-world" in out
    assert out.strip().splitlines()[-1] == "assumes no overlap with compute"


def test_a_missing_collective_names_what_to_measure():
    with pytest.raises(UsageError) as info:
        run("model-mesh", params="7B", dp=8, zero="3")
    assert str(info.value) == ("the run has no allgather rows: measure "
                               "`commbench run --ops reduce-scatter,allgather`")
    with pytest.raises(UsageError, match="commbench p2p"):
        run("model-mesh", params="7B", pp=2, hidden=4096, seq=4096)


@pytest.mark.parametrize("options, fragment", [
    ({"zero": "4"}, "--zero"),
    ({"params": "seven"}, "--params"),
    ({"tp": 4}, "--layers, --hidden, --seq"),
    ({"dp": 1}, "nothing to estimate"),
    ({"pp": 4, "layers": 30, "hidden": 64, "seq": 64}, "--layers 30"),
    ({"tp": 3, "layers": 2, "hidden": 4096, "seq": 64}, "--hidden 4096"),
    ({"sequence_parallel": True}, "--sequence-parallel"),
    ({"dtype": "bf17"}, "--dtype"),
    ({"bucket": "25Q"}, "--bucket"),
    ({"dp": 0}, "--dp"),
])
def test_bad_layouts_are_one_line_usage_errors(options, fragment):
    arguments = {"params": "7B", "dp": 8, **options}
    with pytest.raises(UsageError) as info:
        step_spec(**arguments)
    assert info.value.exit_code == EXIT_USAGE
    assert "\n" not in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize("text, value", [
    ("7B", 7e9), ("1.3B", 1.3e9), ("350M", 350e6), ("70k", 70e3), ("1T", 1e12), ("7e9", 7e9),
    ("4294967296", 2**32),
])
def test_parameter_counts_use_powers_of_1000(text, value):
    assert parse_count(text) == pytest.approx(value)


def test_nccl_is_preferred_over_another_backend_with_a_note():
    rows = load_run(FIXTURES / "model-step").rows
    slow_gloo = [{**r, "backend": "gloo", "lat_us_p50": r["lat_us_p50"] * 10} for r in rows]
    result = estimate(slow_gloo + rows, step_spec(params="7B", dp=8))
    assert result.total_s == pytest.approx(3.51608, rel=1e-9)  # nccl's curve, not gloo's
    assert "the run has backends gloo, nccl: the estimate uses nccl" in result.notes


def test_a_training_dtype_the_run_did_not_measure_is_read_by_bytes_with_a_note():
    # fp32 gradients: 7e9 x 4 = 28e9 B; 28e9 - 1,048,576 = 27,998,951,424;
    # // 26,214,400 = 1068 full buckets (27,996,979,200 B); last bucket 1,972,224 B.
    result = run("model-step", params="7B", dp=8, dtype="fp32")
    assert [(t.nbytes, t.calls) for t in result.terms] == [
        (1_048_576, 1), (26_214_400, 1068), (1_972_224, 1)]
    assert ("the run measured allreduce in bfloat16, not float32: times are read at the same "
            "byte size") in result.notes


def test_model_and_estimate_share_one_rule_on_sizes():
    # model-few: allreduce at 1K, 64K and 1M only. model refuses to fit 3 sizes; estimate used
    # to extrapolate from the same 3 to 417 MB and call it a model fit.
    from commbench.model.fit import fit_run

    with pytest.raises(UsageError, match="3 size\\(s\\); a fit needs at least 4"):
        fit_run(load_run(FIXTURES / "model-few").rows)
    with pytest.raises(UsageError) as info:
        run("model-few", params="1.3B", dp=2)
    assert str(info.value) == (
        "the allreduce whole world (2 ranks) curve has 3 size(s): reading it at 25M (outside "
        "the measured sizes) needs an α–β fit, and a fit needs at least 4: measure more, e.g. "
        "--sizes 8-64M")
    # Inside the measured sizes no fit is needed: 1M is measured, 512K interpolated.
    inside = run("model-few", params="131072", dp=2, first_bucket="1M", bucket="512K")
    assert {t.source for t in inside.terms} <= {"measured", "interpolated"}


def test_an_unusable_segment_is_never_read():
    rows = [dict(r) for r in load_run(FIXTURES / "model-step").rows if r["op"] == "allreduce"]
    noise = [1.0, 3.0, 1.2, 2.8, 1.1, 3.1]  # no line fits this: times jump up and down
    for row, scale in zip(rows, noise * len(rows), strict=False):
        row["lat_us_p50"] = 100.0 * scale
    with pytest.raises(UsageError, match="is no usable fit \\(times scatter"):
        estimate(rows, step_spec(params="1T", dp=8, bucket="4G"))


def test_at_80_columns_the_table_keeps_what_each_term_is(capsys, monkeypatch):
    import commbench.output.console as console

    monkeypatch.setattr(console, "terminal_width", lambda: 80)
    layout = StepOptions(params="7B", dp=2, tp=4, layers=32, hidden=4096, seq=4096)
    code = run_estimate(str(FIXTURES / "model-step"), layout, json_out=False)
    assert code == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if not line.startswith(("#", "note:"))]
    assert all(len(line) <= 80 for line in table)
    assert "TP forward (after attention and MLP)" in out and "TP backward" in out
    assert "projected" in out  # where the time comes from is kept too
    assert "per call" not in out  # decoration goes first (per step / calls)


def test_the_table_prints_sizes_with_format_size(capsys):
    code = run_estimate(str(FIXTURES / "model-step"), StepOptions(params="1.3B", dp=2),
                        json_out=False)
    assert code == 0
    out = capsys.readouterr().out
    assert "≈" not in out
    assert " 3638.5K " in out  # the last bucket, exactly as --sizes would read it


def test_the_options_a_user_changed_are_named_as_flags():
    """estimate --trace refuses the idealised layout's options by these names."""
    assert StepOptions().given() == []
    assert StepOptions(params="7B", dp=8, sequence_parallel=True).given() == \
        ["--params", "--dp", "--sequence-parallel"]
