"""replay's tables (results.replay): counts that are means over steps are written rounded."""

from __future__ import annotations

import csv

from commbench.results.replay import RANK_COLUMNS, write_table


def test_counts_are_written_rounded_and_whole_counts_as_integers(tmp_path):
    """replay_ranks.csv held 1050623.9999999995 bytes and 0.9999999999999997 calls."""
    row = {"rank": 0, "op": "all_reduce", "dtype": "float32", "bytes": 1050623.9999999995,
           "calls": 0.9999999999999997, "replayed_bytes": 2.5, "replayed_calls": None,
           "in_situ_s": 0.00012345678912345, "model_source": "measured"}
    write_table(tmp_path / "replay_ranks.csv", [row], RANK_COLUMNS)
    (read,) = csv.DictReader((tmp_path / "replay_ranks.csv").open())
    assert read["bytes"] == "1050624" and read["calls"] == "1"
    assert read["replayed_bytes"] == "2.5" and read["replayed_calls"] == ""
    assert read["in_situ_s"] == "0.00012345678912345"  # times are not counts: kept whole
