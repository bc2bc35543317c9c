"""What rank 0 and the measure command print: the end of a run's console output, the live
table's rows and footer, on stored fixture runs (tests/fixtures)."""

import json
from pathlib import Path

import pytest

from commbench.commands.measure import _show
from commbench.results import load_run
from commbench.specs.measure import OutputSpec

FIXTURES = Path(__file__).parents[2] / "fixtures"


@pytest.mark.parametrize("json_rows", [False, True])
def test_json_keeps_the_warnings_on_stderr_and_stdout_pure(capsys, json_rows):
    run = load_run(str(FIXTURES / "noisy-a"))
    assert _show(run, OutputSpec(json_rows=json_rows)) == 0
    captured = capsys.readouterr()
    assert "rows are unstable" in captured.err
    where = captured.err if json_rows else captured.out
    assert f"results: {run.path}" in where
    if json_rows:  # stdout is JSON Lines and nothing else
        assert all(json.loads(line) for line in captured.out.splitlines())


def test_help_says_json_is_json_lines(capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit):
        main(["allreduce", "--help"])
    assert "JSON Lines" in " ".join(capsys.readouterr().out.replace("│", " ").split())


def _row(**fields):
    row = {"op": "allreduce", "pattern": "", "mesh": "", "dim": "", "backend": "gloo",
           "size_bytes": 1024, "count": 256, "dtype": "float32", "lat_us_p50": 10.0,
           "algbw_gbps": 1.0, "busbw_gbps": 1.0, "wrong": 0, "lat_us_p99": 20.0,
           "skew_pct": 0.0, "validation": "full", "group": None}
    return {**row, **fields}


def test_the_footer_is_nccl_tests_and_counts_only_what_was_checked():
    from commbench.output.console import footer_lines

    rows = [_row(busbw_gbps=1.0), _row(size_bytes=2048, busbw_gbps=3.0, wrong=2),
            _row(busbw_gbps=99.0, group=0)]  # a --per-group row: not counted twice
    assert footer_lines(rows) == ["# Out of bounds values : 2 FAILED",
                                  "# Avg bus bandwidth    : 2.000 GB/s"]
    assert footer_lines(rows[:1])[0] == "# Out of bounds values : 0 OK"
    unchecked = [_row(validation="off: --no-check", wrong=0)]
    assert footer_lines(unchecked)[0] == "# Out of bounds values : N/A (nothing checked)"
    barrier = [_row(op="barrier", size_bytes=0, validation="off: a barrier moves no data")]
    assert footer_lines(barrier)[1] == "# Avg bus bandwidth    : N/A (no data moved)"
    two = footer_lines([_row(), _row(op="allgather", busbw_gbps=0.5)])
    assert two[1:] == ["# Avg bus bandwidth    : 1.000 GB/s  (allreduce gloo)",
                       "# Avg bus bandwidth    : 0.500 GB/s  (allgather gloo)"]


def test_wrong_is_na_where_nothing_was_checked():
    from commbench.output.console import SWEEP, sweep_cells

    wrong = [c.name for c in SWEEP].index("#wrong")
    assert sweep_cells(_row())[wrong] == "0"
    assert sweep_cells(_row(validation="off: --no-check"))[wrong] == "N/A"
    assert sweep_cells(_row(validation="partial: int8 wraps"))[wrong] == "0"


def test_summary_md_ends_with_the_footer():
    from commbench.output.markdown import summary_markdown
    from commbench.results import rows_frame

    run = load_run(str(FIXTURES / "model-exact"))
    text = summary_markdown(rows_frame(run.rows), run.name, run.meta)
    assert "```\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : " in text


def test_the_table_title_names_the_reduce_op_and_root_where_the_op_has_them():
    from commbench.output.console import timing_note

    assert timing_note(_row(reduce_op="max", rank_time="avg")).startswith("float32, op max, ")
    broadcast = timing_note(_row(op="broadcast", reduce_op="", root=1, rank_time="avg"))
    assert broadcast.startswith("float32, root 1, time = median")
    assert timing_note(_row(reduce_op="", root=float("nan"), rank_time="avg")).startswith(
        "float32, time = median")  # a missing root after pandas is NaN


def test_imported_rows_are_labelled_averages_and_show_no_statistic_the_tool_did_not_print():
    from commbench.importers import parse
    from commbench.output.console import SWEEP, table_groups
    from commbench.results import rows_frame

    text = (FIXTURES / "nccl-tests" / "v2.13-allreduce.txt").read_text()
    imported = parse("nccl-tests", text, "v2.13-allreduce.txt", op="allreduce")
    title, headers, rows = table_groups(rows_frame(imported.rows))[0]
    assert "time = nccl-tests' average over its iterations" in title
    assert "median" not in title and "no p99 (nccl-tests printed none)" in title
    names = [c.name for c in SWEEP]
    assert {row[names.index("p99")] for row in rows} == {"-"}
    assert {row[names.index("skew")] for row in rows} == {"-"}
    assert {row[names.index("#wrong")] for row in rows} == {"0"}  # the file's #wrong


def test_compare_shows_no_interval_where_a_row_has_none():
    from commbench.output.comparison import _interval

    assert _interval(float("nan"), float("nan")) == "-"
    assert _interval(50.0, 50.0) == "-"  # an import's printed point, no interval
    assert _interval(1.04, 2.0) == "1.0-2.0"


def test_dry_run_prints_the_sizes_the_ranks_will_use_and_launches_nothing(tmp_path, capsys):
    from commbench.cli import main

    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--ops", "allgather,barrier", "--sizes", "2,1K", "--nproc", "3",
              "--dry-run", "--out", str(out)])
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:5] == ["allgather", "world=3", "1K", "1020", "255"]
               and line.endswith("rounded down to a multiple of 3 float32 elements")
               for line in lines)
    assert any(line.split()[:5] == ["allgather", "world=3", "2", "12", "3"] for line in lines)
    assert any(line.startswith("barrier") and line.endswith("no data") for line in lines)
    assert lines[-1].startswith("3 size(s) to measure per backend, 3 gloo rank(s) (local)")
    assert not out.exists()  # no run folder


def test_compare_at_80_columns_keeps_what_a_verdict_rests_on(capsys, monkeypatch):
    import commbench.output.console as console
    from commbench.cli import main

    monkeypatch.setattr(console, "terminal_width", lambda: 80)
    with pytest.raises(SystemExit):
        main(["compare", str(FIXTURES / "noisy-a"), str(FIXTURES / "noisy-b")])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("op"))
    assert all(len(line) <= 80 for line in lines if line.startswith(("op", "allreduce")))
    assert "ratio" in header and "delta" in header and "verdict" in header
    assert any(line.startswith("allreduce") and line.endswith("unstable") for line in lines)
    assert "candidate" not in header  # decoration goes first


def test_per_group_rows_compared_get_a_group_column(tmp_path):
    from commbench.compare.runs import compare_runs
    from commbench.output.comparison import table_records

    source = FIXTURES / "base"
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    rows = [{**r, "group": group} for r in rows for group in (None, 0, 1)]
    folder = tmp_path / "per-group"
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "run.json").write_text((source / "run.json").read_text())
    run = load_run(str(folder))
    result = compare_runs([run, run], "lat_us_p50", 0.05, None)
    columns, cells = table_records(result.frame, "lat_us_p50")
    names = [c.name for c in columns]
    assert names[:4] == ["op", "backend", "size", "group"]
    first = [(row[0], row[2], row[3]) for row in cells][:3]
    assert [group for _, _, group in first] == ["all", "0", "1"]  # no longer look repeated
    plain, _ = table_records(compare_runs([load_run(str(source))] * 2, "lat_us_p50", 0.05,
                                          None).frame, "lat_us_p50")
    assert "group" not in [c.name for c in plain]


def test_a_size_missing_from_per_group_rows_is_named_once(tmp_path):
    """Every group of a dim lacks the same size: one message, not one per group."""
    from commbench.compare.runs import compare_runs

    source = FIXTURES / "base"
    rows = [json.loads(line) for line in (source / "results.jsonl").read_text().splitlines()]
    rows = [{**r, "group": group} for r in rows for group in (None, 0, 1)]
    largest = max(r["size_bytes"] for r in rows)
    runs = []
    for name, kept in (("full", rows), ("short", [r for r in rows
                                                 if r["size_bytes"] != largest])):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
        (folder / "run.json").write_text((source / "run.json").read_text())
        runs.append(load_run(str(folder)))
    missing = compare_runs(runs, "lat_us_p50", 0.05, None).missing
    assert len(missing) == 2, missing  # allreduce and allgather, each once
    assert all("lacks 1 of 4 sizes" in text for text in missing)


def test_async_ps_figures_reach_the_table_and_summary_md():
    """max_staleness, pull_wait_us, steps_per_s and rejected_pushes were in results.jsonl only
    (issue 29 point 8); an unbounded run says 'none' rather than -1."""
    from commbench.output.baselines import side_by_side_lines
    from commbench.output.markdown import summary_markdown
    from commbench.results import rows_frame

    ps = dict(op="ps", pattern="async", workers=2, servers=1, group_size=3, beside="allreduce")
    rows = [_row(**ps, steps_per_s=812.5, pull_wait_us=37.25, max_staleness=2,
                 staleness_bound=2, rejected_pushes=3),
            _row(**ps, size_bytes=4096, steps_per_s=400.0, pull_wait_us=5.0, max_staleness=7,
                 staleness_bound=-1, rejected_pushes=0),
            _row(op="allreduce", workers=2, group_size=2, size_bytes=1024),
            _row(op="allreduce", workers=2, group_size=2, size_bytes=4096)]
    console = "\n".join(side_by_side_lines(rows))
    assert "# ps/async: asynchronous figures (2 workers)" in console
    line_1k = next(line for line in console.splitlines() if "812.5" in line)
    assert line_1k.split()[-4:] == ["37.2", "2", "2", "3"]  # pull wait, max, bound, rejected
    line_4k = next(line for line in console.splitlines() if "400.0" in line)
    assert line_4k.split()[-3:] == ["7", "none", "0"]
    text = summary_markdown(rows_frame(rows), "ps-async", {"status": "complete"})
    assert "## ps/async: asynchronous figures (2 workers)" in text and "812.5" in text
