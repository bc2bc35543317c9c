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
