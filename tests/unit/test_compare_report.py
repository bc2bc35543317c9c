"""compare and report on stored fixture runs (tests/fixtures, made by make_fixtures.py)."""

import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from commbench.analysis.compare import compare_runs, parse_threshold, size_ranges
from commbench.cli import main
from commbench.results import load_run

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fx(name):
    return str(FIXTURES / name)


def run(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_identical_runs_are_all_same(capsys):
    code, out, _ = run(["compare", fx("base"), fx("base"), "--fail-on-regression"], capsys)
    assert code == 0
    assert "0 slower, 0 faster, 8 same" in out


def test_a_run_one_and_a_half_times_slower_fails_ci(capsys, tmp_path):
    summary = tmp_path / "step-summary.md"
    code, out, err = run(["compare", fx("base"), fx("slower"), "--fail-on-regression",
                          "--markdown", str(summary)], capsys)
    assert code == 1
    assert "8 slower, 0 faster, 0 same" in out
    assert "differ in torch version: 2.13.0+cpu vs 2.11.0+cu126" in err
    text = summary.read_text()
    assert "| verdict |" in text and text.count("| 1.50x | slower |") == 8


def test_the_reverse_is_faster_and_passes(capsys):
    code, out, _ = run(["compare", fx("slower"), fx("base"), "--fail-on-regression"], capsys)
    assert code == 0 and "0 slower, 8 faster" in out


def test_noise_within_threshold_is_same(capsys):
    code, out, _ = run(["compare", fx("noisy-a"), fx("noisy-b"), "--fail-on-regression",
                        "--json"], capsys)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["verdict"] for r in rows} == {"same"}
    assert any(r["note"] == "~ not significant" for r in rows)  # beyond 5 % but overlapping


def test_bandwidth_metric_and_size_gate(capsys):
    code, out, _ = run(["compare", fx("base"), fx("slower"), "--metric", "busbw_gbps",
                        "--sizes", "64K-1M", "--json"], capsys)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 4
    assert all(r["verdict"] == "slower" and r["ratio"] == pytest.approx(1 / 1.5, rel=1e-3)
               for r in rows)


def test_backends_compared_within_one_run():
    frame, _ = compare_runs([load_run(fx("two-backends"))], "lat_us_p50", 0.05, None)
    assert set(frame["verdict"]) == {"faster"}
    assert frame["ratio"].between(0.3, 0.37).all()
    assert set(frame["backend"]) == {"nccl vs gloo"}


def test_thresholds_and_ranges():
    assert parse_threshold("5%") == parse_threshold("0.05") == parse_threshold("5") == 0.05
    assert size_ranges("1M-1G,8") == [(1 << 20, 1 << 30), (8, 8)]


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


def test_compare_writes_overlay_plots(tmp_path, capsys):
    code, _, _ = run(["compare", fx("base"), fx("slower"), "--out", str(tmp_path)], capsys)
    assert code == 0
    assert (tmp_path / "bandwidth.png").read_bytes()[:4] == b"\x89PNG"


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.scripts, self.links = [], 0, []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "script":
            self.scripts += 1
        if tag in ("link", "a") and "href" in attrs:
            self.links.append(attrs["href"])


def test_report_is_self_contained_and_escaped(tmp_path, capsys):
    code, out, _ = run(["report", fx("base"), fx("script-name"), "--out", str(tmp_path)], capsys)
    assert code == 0
    page = (tmp_path / "report.html").read_text()
    parser = _Collector()
    parser.feed(page)
    assert len(parser.images) == 2
    assert all(src.startswith("data:image/png;base64,") for src in parser.images)
    assert parser.scripts == 0 and parser.links == []
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    md = (tmp_path / "report.md").read_text()
    assert "## Environment" in md and "vs base" in md and "![bandwidth](bandwidth.png)" in md


def test_several_backends_share_a_table_with_a_time_ratio():
    from commbench.output.console import table_groups
    from commbench.results import rows_frame

    frame = rows_frame(load_run(fx("two-backends")).rows)
    groups = table_groups(frame)
    assert [title for title, _, _ in groups] == ["allreduce", "allgather"]
    _, headers, rows = groups[0]
    assert headers[3] == "backend" and "time / gloo" in headers
    ratio = headers.index("time / gloo")
    by_backend = {row[3]: float(row[ratio].rstrip("x")) for row in rows if row[0] == "1M"}
    assert by_backend["gloo"] == 1.0 and 0.3 < by_backend["nccl"] < 0.37


def test_markdown_summary_flags_unstable_sizes():
    from commbench.output.markdown import summary_markdown
    from commbench.results import rows_frame

    frame = rows_frame(load_run(fx("noisy-a")).rows)
    text = summary_markdown(frame, "noisy", {"status": "complete", "world_size": 2})
    assert "**Warning**" in text and "median uncertain" in text
    assert "| unstable |" in text
