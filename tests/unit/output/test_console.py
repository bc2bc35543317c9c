"""Rows kept from a stopped run (Ctrl-C, a failed rank): rank 0 writes them from the blocks it
already holds, with no collective, so they were never verified and their p99 is over blocks.
The table says so where such rows show: their note, and a footer line."""

import pandas as pd
import pytest

from commbench.output.console import footer_lines, sweep_columns, sweep_row, table_groups
from commbench.output.tables import Layout, render
from commbench.results.schema import CUT_SHORT
from tests.unit.output.test_files import _row as _files_row


def test_a_cut_short_row_says_so_in_its_note_and_the_footer():
    kept = _files_row(validation=CUT_SHORT, tail="block")
    names = [c.name for c in sweep_columns(False, False, "gloo")]
    cells = dict(zip(names, sweep_row(kept, False, False, None), strict=True))
    assert cells["#wrong"] == "N/A" and cells["note"] == "cut short"
    assert sweep_row(_files_row(), False, False, None)[-1] == ""  # a finished row: no note
    lines = footer_lines([_files_row(), kept])
    assert lines[0] == "# Out of bounds values : 0 OK"  # the verified row only
    assert ("# Cut short            : 1 row(s) from the blocks timed before the run stopped, "
            "never verified (#wrong N/A), p99 over blocks") in lines
    assert not any(line.startswith("# Cut short") for line in footer_lines([_files_row()]))


# --- the routed (alltoallv) sweep table ---
# The sweep table of an alltoallv run shows its imbalance and the busiest rank's bytes after
# busbw; every other op's table keeps its columns.


# Every other op's sweep table, as it was before alltoallv had columns of its own.
PLAIN_HEADERS = ["size (B)", "count (elements)", "type", "time (us)", "algbw (GB/s)",
                 "busbw (GB/s)", "#wrong", "p99 (us)", "skew (%)", "note"]


def _row(**fields) -> dict:
    row = {"op": "allreduce", "pattern": "", "mesh": "", "dim": "", "backend": "gloo",
           "size_bytes": 1 << 20, "count": 262144, "dtype": "float32", "lat_us_p50": 400.0,
           "algbw_gbps": 2.62, "busbw_gbps": 1.31, "wrong": 0, "lat_us_p99": 450.0,
           "skew_pct": 1.0, "validation": "full", "group": None, "rank_time": "max",
           "max_rank_bytes": 0, "imbalance": 0.0, "split_id": "", "inplace": False}
    return {**row, **fields}


def _alltoallv(**fields) -> dict:
    """A dispatch row of a hot routing on 4 ranks: the busiest rank moves 2575065 B against a
    mean of 1 MiB (2575065 / 1048576 = 2.4558...)."""
    return _row(**{"op": "alltoallv", "pattern": "dispatch", "busbw_gbps": 4.83,
                   "max_rank_bytes": 2575065, "imbalance": 2.455788, "split_id": "3fa2b1c0de",
                   **fields})


def test_an_alltoallv_table_has_imbalance_and_the_busiest_rank_after_busbw():
    frame = pd.DataFrame([_alltoallv(), _alltoallv(size_bytes=1024, count=256, imbalance=1.5,
                                                   max_rank_bytes=1536)])
    ((title, headers, rows),) = table_groups(frame)
    assert title.startswith("alltoallv (dispatch) [")
    assert headers == [*PLAIN_HEADERS[:6], "imbalance", "max rank (B)", *PLAIN_HEADERS[6:]]
    assert [row[:8] for row in rows] == [
        ["1K", "256", "float32", "400.0", "2.620", "4.830", "1.50", "1536"],
        ["1M", "262144", "float32", "400.0", "2.620", "4.830", "2.46", "2575065"]]


def test_other_ops_tables_are_unchanged_beside_an_alltoallv_one():
    frame = pd.DataFrame([_row(), _row(op="allgather"), _alltoallv()])
    tables = {title.split(" [")[0]: headers for title, headers, _rows in table_groups(frame)}
    assert tables["allreduce"] == tables["allgather"] == PLAIN_HEADERS
    assert "imbalance" in tables["alltoallv (dispatch)"]


def test_an_import_that_could_not_know_the_imbalance_shows_a_dash():
    row = _alltoallv(imbalance=0.0, split_id="unknown", source="nccl-tests")
    cells = sweep_row(row, False, False, None, routed=True)
    assert cells[6:8] == ["-", "2575065"]


@pytest.mark.parametrize("per_group, several, per_call", [
    (False, False, False), (True, False, False), (False, True, True), (True, True, True)])
def test_cells_line_up_with_columns_in_every_layout(per_group, several, per_call):
    columns = sweep_columns(per_group, several, "gloo", per_call, routed=True)
    cells = sweep_row(_alltoallv(group=None), per_group, several, 400.0, per_call, routed=True)
    assert len(cells) == len(columns)
    by_name = dict(zip((c.name for c in columns), cells, strict=True))
    assert (by_name["busbw"], by_name["imbalance"], by_name["max rank"]) == (
        "4.830", "2.46", "2575065")


def test_imbalance_survives_an_80_column_terminal_and_sits_under_its_header():
    columns = sweep_columns(False, False, "gloo", routed=True)
    rows = [sweep_row(_alltoallv(), False, False, None, routed=True)]
    layout = Layout(columns, rows, 80)
    shown = [columns[i].name for i in layout.shown]
    assert "imbalance" in shown and "busbw" in shown
    header, *_units, line = render(columns, rows, 80)
    assert max(len(text) for text in (header, line)) <= 80
    end = header.index("imbalance") + len("imbalance")
    assert line[:end].endswith("2.46")  # right-aligned under its header


def test_the_live_table_of_an_alltoallv_run_shows_its_imbalance(capsys):
    """The table printed while a run measures (output.live) has the same columns as the
    summary's: it once lacked them (a real zipf run printed no imbalance)."""
    from commbench.output.live import Live

    live = Live(progress=False)
    live.begin({"backends": ["gloo"], "config": {}}, 2)
    live.row(_alltoallv())
    live.row(_row(size_bytes=4096, count=1024))
    live.close()
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "busbw" in line and "type" in line)
    assert "imbalance" in header, lines
    row = next(line for line in lines if "2.46" in line)
    assert "2575065" in row, lines
    plain = [line for line in lines if "busbw" in line and "type" in line][-1]
    assert "imbalance" not in plain, lines  # the allreduce table after it keeps its columns
