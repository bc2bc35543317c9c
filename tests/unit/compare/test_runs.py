"""compare and report on stored fixture runs (tests/fixtures, made by make_fixtures.py) and on
runs derived from them here, each changed in the one way a test is about."""

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from commbench.cli import main
from commbench.compare import runs as compare_mod
from commbench.compare.runs import compare_runs, parse_threshold, size_ranges
from commbench.results import load_run

FIXTURES = Path(__file__).parents[2] / "fixtures"


def fx(name):
    return str(FIXTURES / name)


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def derived(tmp_path, name, change_row=None, change_meta=None, keep=None, base="base"):
    """A copy of a fixture run with its rows and run.json changed as a test needs."""
    source = FIXTURES / base
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    meta = json.loads((source / "run.json").read_text())
    if keep:
        rows = [r for r in rows if keep(r)]
    if change_row:
        rows = [{**r, **change_row(r)} for r in rows]
    if change_meta:
        meta = change_meta(meta)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "run.json").write_text(json.dumps({**meta, "name": name}))
    return str(folder)


def test_identical_runs_are_all_same(capsys):
    code, out, err = run(["compare", fx("base"), fx("base"), "--fail-on-regression"], capsys)
    assert code == 0
    assert "0 slower, 0 faster, 0 noisy, 8 same" in out
    assert "base is compared with itself" in err  # a mistyped path, most likely


def test_a_run_one_and_a_half_times_slower_fails_ci(capsys, tmp_path):
    summary = tmp_path / "step-summary.md"
    code, out, err = run(["compare", fx("base"), fx("slower"), "--fail-on-regression",
                          "--markdown", str(summary)], capsys)
    assert code == 1
    assert "8 slower, 0 faster, 0 noisy, 0 same" in out
    assert "differ in torch version: 2.13.0+cpu vs 2.11.0+cu126" in err
    text = summary.read_text()
    assert "| verdict |" in text and text.count("| 1.50x |") == 8
    assert sum("| slower |" in line for line in text.splitlines()) == 8
    assert "95% CI (us)" in text


def test_the_reverse_is_faster_and_passes(capsys):
    code, out, _ = run(["compare", fx("slower"), fx("base"), "--fail-on-regression"], capsys)
    assert code == 0 and "0 slower, 8 faster" in out


def test_a_change_beyond_the_threshold_without_significance_is_noisy_not_same(capsys):
    code, out, _ = run(["compare", fx("noisy-a"), fx("noisy-b"), "--fail-on-regression",
                        "--json"], capsys)
    assert code == 0
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    noisy = [r for r in rows if r["verdict"] == "noisy"]
    assert noisy and all(abs(r["ratio"] - 1) > 0.05 and not r["significant"] for r in noisy)
    assert all(abs(r["ratio"] - 1) <= 0.05 for r in rows if r["verdict"] == "same")
    assert summary["summary"]["noisy"] == len(noisy)
    for r in rows:  # each side's interval is in the JSON
        assert r["ci_lo_base"] <= r["baseline"] <= r["ci_hi_base"]
        assert r["ci_lo_new"] <= r["new"] <= r["ci_hi_new"]


def test_an_unstable_mark_alone_does_not_veto_a_regression(tmp_path, capsys):
    """The old rule: an unstable side could never be slower, so the gate could not fire on a
    noisy machine. Now the mark is a note: the samples that made the row unstable are in the
    bootstrap, and 1.5x with tight samples is slower whatever the mark says."""
    new = derived(tmp_path, "flaky", base="slower",
                  change_row=lambda r: {"unstable": "p99 of blocks is 4.0x the median"})
    code, out, _ = run(["compare", fx("base"), new, "--fail-on-regression", "--json"], capsys)
    assert code == 1
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    assert {r["verdict"] for r in rows} == {"slower"} and summary["summary"]["slower"] == 8
    assert {r["note"] for r in rows} == {"unstable"}


def scaled(tmp_path, name, base, factor):
    """A copy of a fixture run with every time, interval and raw sample multiplied by
    ``factor`` and every bandwidth divided by it."""
    def change(row):
        times = {k: v * factor for k, v in row.items() if k.startswith("lat_us_")}
        return {**times, "algbw_gbps": row["algbw_gbps"] / factor,
                "busbw_gbps": row["busbw_gbps"] / factor,
                "samples_us": [v * factor for v in row["samples_us"]],
                **({"round_p50_us": [v * factor for v in row["round_p50_us"]]}
                   if row.get("round_p50_us") else {})}
    return derived(tmp_path, name, base=base, change_row=change)


def compare_json(args, capsys):
    code, out, _ = run(["compare", *args, "--json"], capsys)
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    return code, rows, summary["summary"]


@pytest.mark.parametrize("fixture", ["base", "noisy-a", "noisy-b"])
def test_a_copy_one_and_a_half_times_slower_is_slower_wherever_its_interval_allows(
        tmp_path, capsys, fixture):
    """Every size whose two intervals do not overlap at 1.5x (the shift is wider than the
    spread) is slower, and the reverse is faster; on the noisy fixtures (8 samples, sigma
    0.35, intervals +-50 %) some sizes are, too. The gate fails on the steady fixture; on the
    noisy ones its rows are slower one by one, and it fails exactly when one of them survives
    Holm's correction over the 8 rows (none does at intervals this wide)."""
    slow = scaled(tmp_path, "slow", fixture, 1.5)
    code, rows, summary = compare_json([fx(fixture), slow, "--fail-on-regression"], capsys)
    assert summary["slower"] >= 3 and summary["faster"] == 0
    assert code == (1 if summary["familywise_slower"] else 0)
    if fixture == "base":
        assert code == 1
    for r in rows:
        assert r["ratio"] == pytest.approx(1.5)
        assert r["test"].startswith("bootstrap ratio of medians")
        assert 0 < r["p_value"] <= 1 and r["ratio_lo"] <= r["ratio_hi"]
        if r["ci_hi_base"] < r["ci_lo_new"]:
            assert r["verdict"] == "slower" and r["ratio_lo"] > 1
        assert r["verdict"] in ("slower", "noisy")
    code, rows, summary = compare_json([slow, fx(fixture), "--fail-on-regression"], capsys)
    assert code == 0 and summary["faster"] >= 3 and summary["slower"] == 0
    assert all(r["verdict"] in ("faster", "noisy") for r in rows)


@pytest.mark.parametrize("pair", [("noisy-a", "noisy-b"), ("noisy-b", "noisy-a"),
                                  ("base", "script-name"), ("script-name", "base")])
def test_a_and_a_runs_stay_quiet(capsys, pair):
    code, rows, summary = compare_json([fx(pair[0]), fx(pair[1]), "--fail-on-regression"],
                                       capsys)
    assert code == 0 and summary["slower"] == 0 and summary["faster"] == 0
    # A tight interval may exclude 1 by chance (1 in 20); the threshold keeps it 'same'.
    assert all(r["verdict"] == "same" for r in rows if r["significant"])


def test_verdicts_are_reproducible(tmp_path, capsys):
    """The bootstrap's generator is seeded: the same two runs give the same intervals."""
    slow = scaled(tmp_path, "slow", "noisy-a", 1.3)
    first = compare_json([fx("noisy-a"), slow], capsys)[1]
    assert compare_json([fx("noisy-a"), slow], capsys)[1] == first


def test_the_table_and_markdown_show_the_ratio_interval(tmp_path, capsys):
    summary = tmp_path / "summary.md"
    code, out, _ = run(["compare", fx("noisy-a"), fx("noisy-b"), "--markdown", str(summary)],
                       capsys)
    rows = compare_json([fx("noisy-a"), fx("noisy-b")], capsys)[1]
    shown = f"{rows[0]['ratio_lo']:.2f}-{rows[0]['ratio_hi']:.2f}"
    assert "ratio CI" in out and shown in out
    assert "| ratio CI (95%) |" in summary.read_text() and f"| {shown} |" in summary.read_text()


def test_bandwidth_metric_and_size_gate(capsys):
    code, out, _ = run(["compare", fx("base"), fx("slower"), "--metric", "busbw_gbps",
                        "--sizes", "64K-1M", "--json"], capsys)
    rows = [json.loads(line) for line in out.splitlines()][:-1]
    assert code == 0 and len(rows) == 4
    assert all(r["verdict"] == "slower" and r["ratio"] == pytest.approx(1 / 1.5, rel=1e-3)
               for r in rows)


def test_backends_compared_within_one_run():
    """gloo's rows are on the CPU, NCCL's on the GPU, and one NCCL size is missing."""
    result = compare_runs([load_run(fx("two-backends"))], "lat_us_p50", 0.05, None)
    frame = result.frame
    assert len(frame) == 7 and set(frame["verdict"]) == {"faster"}
    assert frame["ratio"].between(0.3, 0.37).all()
    assert set(frame["backend"]) == {"nccl vs gloo"}
    assert result.missing == ["new lacks 1 of 4 sizes of allgather: 1M"]


def test_backends_within_one_run_on_the_command_line(capsys):
    code, out, err = run(["compare", fx("two-backends")], capsys)
    assert code == 0 and "7 faster" in out and "lacks 1 of 4 sizes of allgather" in err


def test_thresholds_and_ranges():
    assert parse_threshold("5%") == parse_threshold("0.05") == parse_threshold("5") == 0.05
    assert size_ranges("1M-1G,8") == [(1 << 20, 1 << 30), (8, 8)]


@pytest.mark.parametrize(
    ("field", "base_value", "new_value"),
    [("reduce_op", "sum", "max"), ("inplace", False, True), ("root", 0, 1),
     ("rank_time", "avg", "max"), ("dtype", "float32", "bfloat16"), ("device", "cpu", "cuda"),
     ("dim", "tp", "dp")],
)
def test_rows_that_measured_different_things_are_never_paired(tmp_path, capsys, field,
                                                              base_value, new_value):
    base = derived(tmp_path, "a", lambda r: {field: base_value})
    new = derived(tmp_path, "b", lambda r: {field: new_value})
    code, _, err = run(["compare", base, new], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "no measurement in common" in err
    assert f"{field} " in err and "kept apart" in err


def test_unlike_rows_are_kept_apart_and_named_while_the_rest_compares(tmp_path, capsys):
    base = derived(tmp_path, "a")
    new = derived(tmp_path, "b", lambda r: {"reduce_op": "max"} if r["op"] == "allreduce" else {})
    code, out, err = run(["compare", base, new, "--fail-on-regression"], capsys)
    assert code == 1  # a gap is no pass: the allreduce rows were not compared
    assert "4 same" in out  # allgather pairs; allreduce does not
    assert "allreduce gloo: reduce_op sum vs max (kept apart" in err
    assert "kept apart, not compared" in err


def test_a_partial_run_with_missing_sizes_fails_the_gate(tmp_path, capsys):
    """What Ctrl-C leaves: 2 of 4 sizes of one op, status partial."""
    new = derived(tmp_path, "cut", keep=lambda r: r["op"] == "allreduce" and r["size_bytes"] < 2000,
                  change_meta=lambda m: {**m, "status": "partial", "error": "stopped by SIGINT"})
    code, out, err = run(["compare", fx("base"), new, "--fail-on-regression"], capsys)
    assert code == 1
    assert "2 same" in out
    assert "cut is partial (stopped by SIGINT)" in err
    assert "new lacks 2 of 4 sizes of allreduce gloo: 64K, 1M" in err
    assert "a partial or failed run cannot pass the gate" in err
    code, _, _ = run(["compare", fx("base"), new, "--fail-on-regression", "--allow-partial"],
                     capsys)
    assert code == 0


@pytest.mark.parametrize(
    ("label", "change", "shown"),
    [("world size", {"world_size": 4}, "2 vs 4"),
     ("node count", {"nnodes": 2}, "1 vs 2"),
     ("hosts", {"hosts": ["a", "b"]}, "['ci-runner'] vs ['a', 'b']"),
     ("torch version", {"versions": {"torch": "2.11.0"}}, "2.13.0+cpu vs 2.11.0"),
     ("NCCL version", {"versions": {"torch": "2.13.0+cpu", "nccl": "2.21.5"}}, None),
     ("GPU model", {"ranks": [{"gpu": "NVIDIA H200"}]}, "NVIDIA H200"),
     ("timed differently: --cuda-graph", {"config": {"dtype": "float32", "cuda_graph": True}},
      "off vs on"),
     ("timed differently: --host-timer", {"config": {"dtype": "float32", "host_timer": True}},
      "off vs on"),
     ("timed differently: --min-time", {"config": {"dtype": "float32", "min_time": 0.25}},
      "off vs 0.25"),
     ("timed differently: --iters", {"config": {"dtype": "float32", "iters": 100}},
      "off vs 100")],
)
def test_every_metadata_difference_is_named(tmp_path, capsys, label, change, shown):
    base = derived(tmp_path, "a", change_meta=lambda m: {
        **m, "ranks": [{"gpu": "NVIDIA A100"}], "versions": {**m["versions"], "nccl": "2.18.1"}})
    new = derived(tmp_path, "b", change_meta=lambda m: {
        **m, "ranks": [{"gpu": "NVIDIA A100"}], "versions": {**m["versions"], "nccl": "2.18.1"},
        **change})
    code, _, err = run(["compare", base, new], capsys)
    assert code == 0
    assert label in err, err
    if shown:
        assert shown in err
    assert err.count("warning:") == 1


def test_torch_distributed_overhead_against_an_imported_run(tmp_path, capsys):
    nccl = derived(tmp_path, "nccl-tests", lambda r: {"source": "nccl-tests"})
    ours = derived(tmp_path, "ours", base="slower")
    code, out, _ = run(["compare", nccl, ours], capsys)
    assert code == 0
    assert "commbench vs nccl-tests: ratio = commbench / nccl-tests" in out
    assert "the overhead of torch.distributed over nccl-tests" in out
    assert "+" in out.split("\n")[3]  # the delta column: commbench's extra microseconds


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "/nonexistent"], "no results"),
        (["compare", "BASE"], "several --backend"),
        (["compare", "BASE", "BASE", "--metric", "speed"], "--metric"),
        (["compare", "BASE", "BASE", "--threshold", "abc"], "--threshold"),
        (["compare", "BASE", "BASE", "--sizes", "5G-6G"], "in common"),
    ],
)
def test_bad_compare_input_exits_2(args, message, capsys):
    args = [fx("base") if a == "BASE" else a for a in args]
    code, _, err = run(args, capsys)
    assert code == 2 and message in err and err.count("\n") == 1


def test_compare_never_imports_torch():
    code = (
        "import sys\nfrom commbench.cli import main\n"
        f"try:\n main(['compare', {fx('base')!r}, {fx('slower')!r}, '--json'])\n"
        "except SystemExit as e: assert e.code == 0\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_compare_writes_overlay_and_ratio_plots(tmp_path, capsys):
    code, _, _ = run(["compare", fx("base"), fx("slower"), "--out", str(tmp_path)], capsys)
    assert code == 0
    for name in ("bandwidth.png", "latency.png", "ratio.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.scripts, self.links, self.rows = [], 0, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "script":
            self.scripts += 1
        if tag in ("link", "a") and "href" in attrs:
            self.links.append(attrs["href"])
        if tag == "tr" and attrs.get("class"):
            self.rows.append(attrs["class"])


def test_report_is_self_contained_escaped_and_opens_with_the_verdicts(tmp_path, capsys):
    code, out, _ = run(["report", fx("base"), fx("script-name"), fx("slower"), "--out",
                        str(tmp_path)], capsys)
    assert code == 0
    page = (tmp_path / "report.html").read_text()
    parser = _Collector()
    parser.feed(page)
    assert len(parser.images) == 3  # bandwidth, latency, ratio
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)
    assert parser.scripts == 0 and parser.links == []
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert parser.rows.count("slower") == 8  # the slower run's rows, coloured
    assert page.index("slower vs base: 8 slower") < page.index("<h2>Environment")
    md = (tmp_path / "report.md").read_text()
    assert "## Environment" in md and "vs base" in md and "![bandwidth](bandwidth.png)" in md


def test_report_of_a_glob_skips_folders_that_are_not_runs(tmp_path, capsys):
    (tmp_path / "report").mkdir()  # what `commbench report results/*` meets after a report
    code, _, err = run(["report", fx("base"), str(tmp_path / "report"), "--out",
                        str(tmp_path / "report")], capsys)
    assert code == 0
    assert "skipping" in err and "not a run folder" in err


def test_report_environment_lists_gpus_and_nccl_variables(tmp_path, capsys):
    env = {"NCCL_ALGO": "Ring", "OMP_NUM_THREADS": "1"}
    base = derived(tmp_path, "a", change_meta=lambda m: {
        **m, "ranks": [{"gpu": "NVIDIA H200"}], "env": env})
    code, _, _ = run(["report", base, "--out", str(tmp_path / "out")], capsys)
    assert code == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "| GPU | NVIDIA H200 |" in md and "| NCCL_ALGO | Ring |" in md
    assert "OMP_NUM_THREADS" not in md


def test_several_backends_share_a_table_with_a_time_ratio():
    from commbench.output.console import table_groups
    from commbench.results import rows_frame

    frame = rows_frame(load_run(fx("two-backends")).rows)
    groups = table_groups(frame)
    assert [title.split(" [")[0] for title, _, _ in groups] == ["allreduce", "allgather"]
    _, headers, rows = groups[0]
    assert headers[3] == "backend" and "vs gloo (time)" in headers
    ratio = headers.index("vs gloo (time)")
    by_backend = {row[3]: float(row[ratio].rstrip("x")) for row in rows if row[0] == "1M"}
    assert by_backend["gloo"] == 1.0 and 0.3 < by_backend["nccl"] < 0.37


def test_markdown_summary_flags_unstable_sizes():
    from commbench.output.markdown import summary_markdown
    from commbench.results import rows_frame

    frame = rows_frame(load_run(fx("noisy-a")).rows)
    text = summary_markdown(frame, "noisy", {"status": "complete", "world_size": 2})
    assert "**Warning**" in text and "median uncertain" in text
    assert "| unstable |" in text


def repeated(tmp_path, name, factor=1.0):
    """A run of two launches (--repeat 2): noisy-a's rows as launch 0, noisy-b's as launch 1,
    times scaled by ``factor``."""
    rows = []
    for launch, source in enumerate(("noisy-a", "noisy-b")):
        for line in (FIXTURES / source / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            times = {k: v * factor for k, v in row.items() if k.startswith("lat_us_")}
            rows.append({**row, **times, "launch": launch,
                         "samples_us": [v * factor for v in row["samples_us"]]})
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "run.json").write_text(json.dumps({"name": name, "status": "complete",
                                                 "repeat": 2}))
    return str(folder), rows


def test_the_launches_of_a_repeated_run_are_pooled(tmp_path, capsys):
    base, rows = repeated(tmp_path, "twice")
    slow, _ = repeated(tmp_path, "twice-slow", 1.5)
    code, pairs, summary = compare_json([base, slow, "--fail-on-regression"], capsys)
    assert code == 1 and len(pairs) == 8 and summary["slower"] >= 1
    assert all(r["test"] == "Welch t over launch medians (2 vs 2)" for r in pairs)
    first = [r for r in rows if r["op"] == "allreduce" and r["size_bytes"] == 8]
    pooled = [v for r in first for v in r["samples_us"]]
    assert pairs[0]["baseline"] == pytest.approx(float(np.median(pooled)))
    assert pairs[0]["ratio"] == pytest.approx(1.5)
    code, pairs, summary = compare_json([base, base, "--fail-on-regression"], capsys)
    assert code == 0 and summary["same"] == 8


def test_the_spread_between_launches_widens_the_pooled_interval(tmp_path, capsys):
    """Launch 1 is 1.3x launch 0 (a launch-wide slow mode): the pooled side's interval must
    hold both modes, wider than either launch's own."""
    source = FIXTURES / "base" / "results.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    both = []
    for launch, factor in ((0, 1.0), (1, 1.3), (2, 1.0), (3, 1.3)):
        both += [{**r, "launch": launch, "samples_us": [v * factor for v in r["samples_us"]]}
                 for r in rows]
    pooled, _ = compare_mod.pool_launches(both)
    for one, row in zip(rows, pooled, strict=True):
        assert row["lat_us_ci_hi"] - row["lat_us_ci_lo"] > 3 * (one["lat_us_ci_hi"]
                                                                 - one["lat_us_ci_lo"])


def launches_of(tmp_path, name, factors):
    """A --repeat run of the base fixture, launch i's samples and times scaled by factors[i]
    (a launch that lands on the slow level as a whole)."""
    rows = [json.loads(line) for line in (FIXTURES / "base" / "results.jsonl").read_text()
            .splitlines() if '"allreduce"' in line]
    out = []
    for launch, factor in enumerate(factors):
        out += [{**r, **{k: v * factor for k, v in r.items() if k.startswith("lat_us_")},
                 "launch": launch, "samples_us": [v * factor for v in r["samples_us"]]}
                for r in rows]
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    (folder / "run.json").write_text(json.dumps({"name": name, "status": "complete",
                                                 "repeat": len(factors)}))
    return str(folder), out


def test_a_real_a_a_pair_the_bootstrap_failed_passes_with_launches_as_the_unit(capsys):
    """tests/fixtures/gate-aa: two runs of nothing from the gate study (bench/gate.py, the
    recipe's budget, 2026-12-05), the new one on the 2-core VM's slow level. The earlier rule
    (the bootstrap over launches, rounds and blocks, its p-value read off the interval) held
    rows slower under Holm at 1 % and failed the run; Welch's t over the five launch medians a
    side holds none, and the gate passes."""
    from commbench.compare.familywise import holm, interval_p_value
    from commbench.core.stats import ratio_interval
    from commbench.results import load_run

    sides = [compare_mod.pool_launches(load_run(FIXTURES / "gate-aa" / side).rows)[1]
             for side in ("base", "new")]
    earlier = [ratio_interval(b, n) for b, n in zip(*sides, strict=True)]
    held = [p <= 0.01 and i.lo > 1 for p, i in
            zip(holm([interval_p_value(i.lo, i.hi) for i in earlier]), earlier, strict=True)]
    assert sum(held) >= 1
    code, pairs, summary = compare_json([fx("gate-aa/base"), fx("gate-aa/new"),
                                         "--fail-on-regression"], capsys)
    assert code == 0 and summary["familywise_slower"] == 0 and len(pairs) == 3
    assert all(r["test"] == "Welch t over launch medians (5 vs 5)" for r in pairs)
    assert all(r["familywise"] != "slower" and r["p_holm"] > 0.01 for r in pairs)


def test_every_launch_slower_fails_the_gate_under_welch(tmp_path, capsys):
    """The same five launches a side, the new run's each 1.3x its partner: the launch test
    still finds it, and the summary names the rule."""
    levels = (1.0, 1.05, 0.97, 1.02, 1.0)
    base, _ = launches_of(tmp_path, "base5", levels)
    new, _ = launches_of(tmp_path, "slow5", tuple(1.3 * f for f in levels))
    code, pairs, summary = compare_json([base, new, "--fail-on-regression"], capsys)
    assert code == 1 and summary["slower"] == len(pairs)
    assert all(r["familywise"] == "slower" and r["ratio_lo"] > 1.2 for r in pairs)


def test_welch_t_agrees_with_scipy():
    """core.student.welch_t against SciPy's own Welch test (an independent
    implementation): the p-value and the interval's half-width."""
    stats = pytest.importorskip("scipy.stats")
    from commbench.core.student import welch_t

    base = [0.10, 0.31, -0.05, 0.22, 0.02]
    new = [0.41, 0.18, 0.66, 0.35, 0.52, 0.47]
    difference, lo, hi, p_value = welch_t(base, new)
    found = stats.ttest_ind(new, base, equal_var=False)
    assert p_value == pytest.approx(found.pvalue, rel=1e-6)
    low, high = found.confidence_interval(0.95)
    assert (lo, hi) == (pytest.approx(low, rel=1e-6), pytest.approx(high, rel=1e-6))
    assert difference == pytest.approx(np.mean(new) - np.mean(base))


def test_a_copied_run_is_labelled_by_its_folder_with_its_inner_name(tmp_path, capsys):
    import shutil

    copy = tmp_path / "baselines" / "main"
    shutil.copytree(FIXTURES / "base", copy)
    assert load_run(copy).name == "main [base]"
    assert load_run(FIXTURES / "base").name == "base"  # folder and name agree: no brackets
    code, out, err = run(["compare", str(copy), fx("base"), "--json"], capsys)
    rows = [json.loads(line) for line in out.splitlines() if '"verdict"' in line]
    assert {(r["base"], r["candidate"]) for r in rows} == {("main [base]", "base")}


def test_a_complete_run_whose_rows_were_torn_fails_the_gate(tmp_path, capsys):
    """run.json says complete, but results.jsonl lost its last row mid-line (a disk full, a
    copy cut short): the gate must not pass it as a run that simply lacks a size."""
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "run.json").write_text((FIXTURES / "base" / "run.json").read_text())
    text = (FIXTURES / "base" / "results.jsonl").read_text()
    (torn / "results.jsonl").write_text(text[: len(text) - 40])  # mid-way into the last row
    assert load_run(torn).meta["status"] == "partial"
    code, out, err = run(["compare", fx("base"), str(torn), "--fail-on-regression"], capsys)
    assert code == 1 and "torn [base] is partial (its results.jsonl is cut short)" in err
    code, *_ = run(["compare", fx("base"), str(torn), "--fail-on-regression",
                    "--allow-partial"], capsys)
    assert code == 0


def test_a_complete_run_missing_whole_rows_fails_the_gate(tmp_path, capsys):
    lost = tmp_path / "lost"
    lost.mkdir()
    lines = (FIXTURES / "base" / "results.jsonl").read_text().splitlines()
    meta = json.loads((FIXTURES / "base" / "run.json").read_text())
    (lost / "run.json").write_text(json.dumps({**meta, "rows": len(lines)}))
    (lost / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # cut at a line end
    code, out, err = run(["compare", fx("base"), str(lost), "--fail-on-regression"], capsys)
    assert code == 1
    assert f"holds {len(lines) - 1} of the {len(lines)} rows it was finished with" in err


def test_backends_of_one_run_compare_when_only_some_rows_kept_rounds(tmp_path, capsys):
    """Rows through pandas: a list column that some rows lack reads NaN in the others."""
    def change(row):
        if row["backend"] != "nccl":
            return {}
        half = len(row["samples_us"]) // 2
        return {"round_samples": [half, len(row["samples_us"]) - half]}

    run_dir = derived(tmp_path, "mixed", base="two-backends", change_row=change)
    code, pairs, _ = compare_json([run_dir], capsys)
    assert code == 0 and pairs
    assert {p["test"] for p in pairs} == {
        "bootstrap ratio of medians over batches of blocks vs rounds and blocks"}


def test_an_osu_import_beside_a_commbench_run_gets_the_cross_tool_view(tmp_path, capsys):
    """backend mpi vs gloo, rank-time, dtype: nothing pairs on the full key. It said 'the runs
    have no measurement in common'; now it says why and pairs op, world and size."""
    code, *_ = run(["import", "osu", str(FIXTURES / "osu" / "osu_allreduce-7.4.txt"),
                    "--world-size", "2", "--out", str(tmp_path), "--name", "osu"], capsys)
    assert code == 0
    code, out, err = run(["compare", fx("base"), str(tmp_path / "osu"), "--json"], capsys)
    assert code == 0, err
    assert "measured nothing alike (backend gloo vs mpi" in err
    rows = [json.loads(line) for line in out.splitlines() if '"verdict"' in line]
    assert sorted(r["size_bytes"] for r in rows) == [1024, 1048576]
    assert {r["backend"] for r in rows} == {"mpi vs gloo"}


def test_runs_of_one_tool_with_nothing_in_common_say_which_keys_differ(capsys):
    code, out, err = run(["compare", fx("base"), fx("model-mesh")], capsys)
    assert code == 2
    assert "no measurement in common (backend gloo vs nccl" in err and "world_size 2 vs 8" in err
