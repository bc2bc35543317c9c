"""Rows kept from a stopped run (Ctrl-C, a failed rank): rank 0 writes them from the blocks it
already holds, with no collective, so they were never verified and their p99 is over blocks.
The table says so where such rows show: their note, and a footer line."""

from commbench.output.console import footer_lines, sweep_columns, sweep_row
from commbench.results.schema import CUT_SHORT
from tests.unit.output.test_files import _row


def test_a_cut_short_row_says_so_in_its_note_and_the_footer():
    kept = _row(validation=CUT_SHORT, tail="block")
    names = [c.name for c in sweep_columns(False, False, "gloo")]
    cells = dict(zip(names, sweep_row(kept, False, False, None), strict=True))
    assert cells["#wrong"] == "N/A" and cells[""] == "cut short"
    assert sweep_row(_row(), False, False, None)[-1] == ""  # a finished row: no note
    lines = footer_lines([_row(), kept])
    assert lines[0] == "# Out of bounds values : 0 OK"  # the verified row only
    assert ("# Cut short            : 1 row(s) from the blocks timed before the run stopped, "
            "never verified (#wrong N/A), p99 over blocks") in lines
    assert not any(line.startswith("# Cut short") for line in footer_lines([_row()]))
