"""commands/imports.py (`commbench import`): each fixture imported into a run folder that
loads, compares with itself row for row and is drawn; a taken name is refused unless forced;
a bad file leaves no folder; and importing needs no torch."""

import subprocess
import sys

import pytest

from commbench.commands.imports import run_import
from commbench.compare.runs import compare_runs
from commbench.core.errors import UsageError
from commbench.importers import KINDS, read
from commbench.results import load_run
from tests.unit.importers.readers import NCCL, OSU

# ---- the command: folders, round trip ----------------------------------------------------------

ROUND_TRIP = [
    ("nccl-tests", NCCL / "v2.13-allreduce.txt", "allreduce", None),
    ("nccl-tests", NCCL / "v2.15-allgather-nocheck.txt", "allgather", None),
    ("nccl-tests", NCCL / "v2.16-broadcast-split-cycles.txt", None, None),
    ("nccl-tests", NCCL / "v2.17-reduce_scatter-timestamps.txt", None, None),
    ("nccl-tests", NCCL / "v2.18-sendrecv-cputime.txt", None, None),
    ("nccl-tests", NCCL / "v2.19-alltoall-periter.txt", None, None),
    ("nccl-tests", NCCL / "v1-allreduce.json", None, None),
    ("nccl-tests", NCCL / "v2-allgather-periter.json", None, None),
    ("nccl-tests", NCCL / "v3-alltoall-inf.json", None, None),
    ("nccl-tests", NCCL / "v3-allreduce-periter-procs.json", None, None),
    ("osu", OSU / "osu_allreduce-7.4.txt", None, 4),
    ("osu", OSU / "osu_allgather-full-7.4.txt", None, None),
    ("osu", OSU / "osu_alltoall-cuda-5.3.txt", None, 4),
    ("osu", OSU / "osu_reduce_scatter-validate-6.1.txt", None, 4),
    ("osu", OSU / "osu_bcast-tails-7.4.txt", None, 8),
    ("osu", OSU / "osu_barrier-7.4.txt", None, 4),
    ("osu", OSU / "osu_latency-7.4.txt", None, None),
    ("osu", OSU / "osu_bw-cuda-5.3.txt", None, None),
    ("osu", OSU / "osu_bibw-tails-7.4.txt", None, None),
    ("osu", OSU / "table-only.txt", "allreduce", 2),
]


@pytest.mark.parametrize("kind, path, op, world", ROUND_TRIP,
                         ids=[p.name for _, p, _, _ in ROUND_TRIP])
def test_import_then_load_and_compare_pairs_every_row(kind, path, op, world, tmp_path, capsys):
    code = run_import(kind, str(path), op, str(tmp_path), "imported", False, world)
    assert code == 0
    folder = tmp_path / "imported"
    assert capsys.readouterr().out.strip() == (
        f"imported {len(read(kind, str(path), op=op, world_size=world).rows)} rows from "
        f"{path} into {folder}")
    run = load_run(folder, strict=True)
    assert run.meta["source"] == kind and run.meta["status"] == "complete"
    assert run.meta["planned_rows"] == len(run.rows)
    assert {r["source"] for r in run.rows} == {kind}
    result = compare_runs([run, run], "lat_us_p50", 0.05, None)
    frame = result.frame
    assert len(frame) == len(run.rows) and result.apart == []
    assert result.warnings == ["imported is compared with itself: every row can only be the same"]
    assert set(frame["verdict"]) == {"same"}
    for name in ("results.csv", "summary.md", "latency.png"):
        assert (folder / name).exists(), name
    # A barrier moves no data: no bandwidth plot, rather than empty axes.
    assert (folder / "bandwidth.png").exists() == any(r["size_bytes"] for r in run.rows)


def test_import_refuses_a_taken_name_unless_forced(tmp_path, capsys):
    args = ("nccl-tests", str(NCCL / "v1-allreduce.json"), None, str(tmp_path), "ar")
    run_import(*args, False, None)
    with pytest.raises(UsageError, match="already exists"):
        run_import(*args, False, None)
    assert run_import(*args, True, None) == 0
    assert run_import("nccl-tests", str(NCCL / "v1-allreduce.json"), None, str(tmp_path), None,
                      False, None) == 0
    generated = [p.name for p in tmp_path.iterdir() if p.name != "ar"]
    assert len(generated) == 1 and generated[0].endswith("-nccl-tests-v1-allreduce")


def test_a_bad_file_leaves_no_folder(tmp_path):
    with pytest.raises(UsageError, match="malformed-row.txt:12"):
        run_import("nccl-tests", str(NCCL / "malformed-row.txt"), None, str(tmp_path), "bad",
                   False, None)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(UsageError, match="cannot read"):
        run_import("osu", str(tmp_path / "missing.txt"), None, str(tmp_path), "x", False, 2)
    with pytest.raises(UsageError, match="unknown import kind 'perftest'"):
        read("perftest", str(NCCL / "v1-allreduce.json"))
    assert KINDS == ("nccl-tests", "osu")


def test_importers_do_not_import_torch():
    code = ("import sys; import commbench.importers, commbench.commands.imports; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
