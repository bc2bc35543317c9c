"""commands/report.py through the real entry point: folders that are not runs are skipped with
a note (``report results/*`` matches the report's own folder), no run at all is one line and
exit 2, and so is an --out that cannot be made; of locate runs, two are the compare view per
entity and link, one is its suspects and both heatmaps (and "No suspect." when clean), and a
slow rank is named, never "no suspect"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.history.cli_helper import run_cli
from tests.unit.locate.fleets import finished, locate_folder, run_folder

BASE = Path(__file__).parents[2] / "fixtures" / "base"


def test_no_run_folder_among_the_arguments_is_one_line_and_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_cli(capsys, "report", str(empty), "--out", str(tmp_path / "r"))
    assert code == 2, err
    assert err.splitlines() == [f"note: skipping {empty}: not a run folder (no results.jsonl)",
                                "error: no run folders among the arguments"]
    assert not (tmp_path / "r").exists()


def test_the_reports_own_folder_is_skipped_and_the_runs_reported(tmp_path, capsys):
    run = tmp_path / "base"
    shutil.copytree(BASE, run)
    old = tmp_path / "report"
    old.mkdir()
    code, out, err = run_cli(capsys, "report", str(run), str(old), "--out", str(old))
    assert code == 0, err
    assert f"note: skipping {old}: not a run folder" in err
    assert (old / "report.md").is_file() and f"wrote {old / 'report.md'}" in out


def test_an_out_that_cannot_be_made_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "file").write_text("in the way")
    code, out, err = run_cli(capsys, "report", str(BASE), "--out",
                             str(tmp_path / "file" / "r"))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err
    assert f"cannot write --out {tmp_path / 'file' / 'r'}" in err


# ---- locate runs ------------------------------------------------------------------------------


def test_report_of_two_locate_runs_shows_the_compare_view(tmp_path, capsys):
    from commbench.cli import main

    run_folder(tmp_path / "before", slow={2: 0.4})
    run_folder(tmp_path / "after", n=5)
    out = tmp_path / "report"
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "before"), str(tmp_path / "after"), "--out", str(out)])
    assert done.value.code == 0
    md = (out / "report.md").read_text()
    assert "## after vs before: locate, per entity and link" in md
    assert "| rank 2 |" in md and "| bad gpu | ok | repaired |" in md
    assert "| ok | not measured | not measured |" in md  # rank 5
    assert "after vs before (locate, per entity and link): 1 repaired, 1 not measured" in md
    page = (out / "report.html").read_text()
    assert "<td>repaired</td>" in page and '<tr class="noisy">' in page


def test_report_of_a_run_with_a_slow_rank_does_not_say_no_suspect(tmp_path, capsys):
    """report's one line and section read run.json: a slow entity is named there too."""
    from commbench.cli import main
    from commbench.specs.locate import LocateSpec

    finished(tmp_path / "run", 8, {3: 0.93}, 0.03, 0, LocateSpec(small=8, large=262144),
              capsys)
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    assert done.value.code == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "no bad entity or link; 1 slow: rank 3" in md and "No suspect" not in md


def test_report_of_a_locate_run_has_the_suspects_and_both_heatmaps(tmp_path, capsys):
    """A locate folder has no rows: its report section is the suspects table, what did not
    reproduce, and the two heatmaps (linked beside report.md, embedded in report.html); an
    ordinary run reported with it keeps its plots and tables."""
    from pathlib import Path

    from commbench.cli import main

    locate_folder(tmp_path / "slow", slow={2: 0.4})
    base = Path(__file__).parents[2] / "fixtures" / "base"
    out = tmp_path / "report"
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "slow"), str(base), "--out", str(out)])
    assert done.value.code == 0
    md = (out / "report.md").read_text()
    assert "## slow: locate" in md
    assert "| verdict | entity | hosts | ranks | busbw | latency | evidence |" in md
    assert "| bad gpu | rank 2 | h | 2 | 0.40x |" in md
    for name in ("heatmap_busbw.png", "heatmap_lat.png"):
        assert f"](slow-{name})" in md
        assert (out / f"slow-{name}").read_bytes() == (tmp_path / "slow" / name).read_bytes()
    assert "](bandwidth.png)" in md  # the ordinary run's plots are still there
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 4  # 2 heatmaps, bandwidth, latency
    assert "<td>bad gpu</td><td>rank 2</td>" in page
    assert "slow: locate over 6 gpu entities, status complete: bad gpu rank 2" in page


def test_report_of_a_clean_locate_run_alone(tmp_path, capsys):
    from commbench.cli import main

    locate_folder(tmp_path / "clean")
    with pytest.raises(SystemExit) as done:
        main(["report", str(tmp_path / "clean"), "--out", str(tmp_path / "report")])
    assert done.value.code == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "**No suspect.**" in md and "## Plots" not in md
    assert "](clean-heatmap_busbw.png)" in md and "](clean-heatmap_lat.png)" in md
