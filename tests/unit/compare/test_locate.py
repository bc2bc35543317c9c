"""compare of two locate runs (compare.locate): a bad rank that is ok after is repaired (and new
the other way round, which fails the gate); issue 30, point 5: an entity missing from one side
is ``not measured`` (never ``repaired``) and fails the gate, the same fleet on both sides
passes, and a bad link whose pair the second run did not draw is not repaired. Synthetic folders
finished by the locate command (tests/unit/locate/fleets.py): no process."""

from __future__ import annotations

import pytest

from tests.unit.locate.fleets import locate_folder, run_folder


def compare(before, after, *extra):
    from commbench.cli import main

    with pytest.raises(SystemExit) as done:
        main(["compare", str(before), str(after), *extra])
    return done.value.code


def test_an_entity_missing_after_is_not_measured_and_fails_the_gate(tmp_path, capsys):
    """Before: 6 ranks, rank 5 bad. After: the same fleet relaunched on 5 ranks (rank 5 left
    out). Rank 5 was not repaired: it was not there."""
    run_folder(tmp_path / "before", slow={5: 0.4})
    run_folder(tmp_path / "after", n=5)
    capsys.readouterr()
    assert compare(tmp_path / "before", tmp_path / "after") == 0  # no gate: a notice only
    out, err = capsys.readouterr()
    (rank5,) = [line for line in out.splitlines() if line.startswith("rank 5 ")]
    assert rank5.split()[-5:] == ["gpu", "not", "measured", "not", "measured"], rank5
    assert "repaired" not in out
    assert "measured 6 of 6 entities" in err and "5 of 5" in err
    assert "not measured in" in err and "rank 5" in err.split("not measured in")[1]
    assert compare(tmp_path / "before", tmp_path / "after", "--fail-on-regression") == 1
    assert "not measured on one side" in capsys.readouterr().err


def test_an_entity_missing_before_fails_the_gate_too(tmp_path, capsys):
    run_folder(tmp_path / "before", n=5)
    run_folder(tmp_path / "after")
    capsys.readouterr()
    assert compare(tmp_path / "before", tmp_path / "after", "--fail-on-regression") == 1
    out = capsys.readouterr().out
    (rank5,) = [line for line in out.splitlines() if line.startswith("rank 5 ")]
    assert rank5.split()[-4:] == ["measured", "ok", "not", "measured"], rank5


def test_the_same_fleet_on_both_sides_passes(tmp_path, capsys):
    run_folder(tmp_path / "before")
    run_folder(tmp_path / "after", seed=3)
    capsys.readouterr()
    assert compare(tmp_path / "before", tmp_path / "after", "--fail-on-regression") == 0
    assert "not measured" not in capsys.readouterr().err


def test_a_bad_link_the_second_run_did_not_draw_is_not_repaired():
    """--rounds quick: the pair behind a bad link may not be drawn again."""
    from commbench.compare.locate import compare as rows_of

    names = [f"rank {e}" for e in range(4)]
    records = [{"round": 0, "phase": "main", "a": a, "b": b, "busbw_gbps": 1.0,
                "lat_us_p50": 50.0, "status": "ok"} for a, b in ((0, 1), (2, 3), (0, 2))]
    before = {"records": records + [{**records[0], "a": 1, "b": 3}], "names": names,
              "verdicts": {**{n: "ok" for n in names}, "rank 1 - rank 3": "bad link"}}
    after = {"records": records, "names": names, "verdicts": {n: "ok" for n in names}}
    (link,) = [r for r in rows_of(before, after) if r["kind"] == "link" and "rank 3" in
               r["entity"] and "rank 1" in r["entity"]]
    assert (link["before"], link["after"], link["change"]) == (
        "bad link", "not measured", "not measured")


def test_compare_of_two_locate_runs_shows_the_repair(tmp_path, capsys):
    from commbench.cli import main

    locate_folder(tmp_path / "before", slow={2: 0.4})
    locate_folder(tmp_path / "after")
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["compare", str(tmp_path / "before"), str(tmp_path / "after"),
              "--fail-on-regression"])
    assert done.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    (rank2,) = [line for line in lines if line.startswith("rank 2 ") and " - " not in line]
    assert rank2.split()[-4:] == ["bad", "gpu", "ok", "repaired"]
    assert "2.50x" in rank2  # busbw after / before
    with pytest.raises(SystemExit) as done:
        main(["compare", str(tmp_path / "after"), str(tmp_path / "before"),
              "--fail-on-regression"])
    assert done.value.code == 1
    assert "rank 2 (new)" in capsys.readouterr().err
