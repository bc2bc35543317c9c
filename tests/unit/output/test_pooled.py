"""The table a --repeat run ends with (output.pooled): one row per size over every launch,
as compare pools them, with every column named."""

from pathlib import Path

from commbench.output.pooled import pooled_table_lines
from commbench.results import load_run
from commbench.results.launches import pooled_rows

REPEAT = Path(__file__).parents[2] / "fixtures" / "repeat"  # 3 launches x 4 sizes


def test_the_pooled_table_has_one_row_per_size_at_the_pooled_median():
    run = load_run(REPEAT)
    rows = pooled_rows(run.rows)
    lines = pooled_table_lines(rows, 3, None)
    assert lines[1].startswith("# pooled over 3 launches")
    header = lines[3].split()
    assert header[-1] == "note" and "time" in header
    body = [line for line in lines[5:] if line and not line.startswith("#")]
    assert len(body) == 4 == len(rows) < len(run.rows)
    for line, row in zip(body, rows, strict=True):
        assert f"{row['lat_us_p50']:.1f}" in line.split()  # the pooled median, not a launch's
    assert lines[-2].startswith("# Out of bounds values")


OVERLAP = Path(__file__).parents[2] / "fixtures" / "overlap-repeat"  # --overlap matmul:256


def test_an_overlap_run_pooled_shows_the_slowdowns_of_every_launch():
    """A real --repeat 3 --overlap run (allreduce 1K, 64K beside matmul:256, 2 gloo ranks):
    the pooled table has the overlap columns, at the geometric mean of the three launches'
    comm_slowdown, not the first launch's."""
    from scipy.stats import gmean

    run = load_run(OVERLAP)
    rows = pooled_rows(run.rows)
    lines = pooled_table_lines(rows, 3, None)
    header = " ".join(lines[3:5])
    assert "comm" in header and "compute" in header and "overlap" in header
    body = [line for line in lines[5:] if line and not line.startswith("#")]
    assert len(body) == 2
    for line, row in zip(body, rows, strict=True):
        launches = [r["comm_slowdown"] for r in run.rows if r["size_bytes"] == row["size_bytes"]]
        first = launches[0]
        assert f"{gmean(launches):.2f}" in line.split()
        assert f"{first:.2f}" not in line.split()  # launch 0 read 2.53x and 3.59x
