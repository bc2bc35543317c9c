"""What a locate run found (locate.findings), through the command's finish() on synthetic
folders: a bad rank is named in every file; a run that measured no pair has no verdict (exit 3,
no good host); good-hosts.txt lists only hosts measured and passed; a link row's votes come
from its evidence; and a slow leaf uplink is one ``bad switch`` row whose hosts are bad hosts,
none of them a bad node."""

from __future__ import annotations

import csv
import json

from commbench.locate import attribution as locate
from commbench.specs.locate import LocateSpec
from tests.unit.locate.fleets import (
    LEAVES,
    decide_leaves,
    fleet,
    locate_folder,
    run_folder,
    uplink,
    write_run,
)


def test_a_run_that_measured_no_pair_has_no_verdict(tmp_path, capsys):
    """As after Ctrl-C before the first pair (or one entity at the level): no 'no suspect',
    no good host, exit 3 (its own code), the words say why."""
    from commbench.core.errors import EXIT_RUN_FAILED

    found = run_folder(tmp_path / "empty", main=[])
    assert found["code"] == EXIT_RUN_FAILED
    captured = capsys.readouterr()
    assert "# nothing measured: 0 pairs in 0 rounds, so no verdict" in captured.out
    assert "no suspect" not in captured.out.replace("not 'no suspect'", "")
    assert "measured no pair" in captured.err
    summary = (tmp_path / "empty" / "summary.md").read_text()
    assert "No suspect" not in summary and "**Nothing measured" in summary
    assert (tmp_path / "empty" / "good-hosts.txt").read_text() == ""
    assert (tmp_path / "empty" / "bad-hosts.txt").read_text() == ""
    meta = json.loads((tmp_path / "empty" / "run.json").read_text())
    assert meta["status"] == "failed" and "measured no pair" in meta["error"]
    with open(tmp_path / "empty" / "entities.csv") as handle:
        assert {r["verdict"] for r in csv.DictReader(handle)} == {"not measured"}


def test_an_interrupted_run_with_no_pair_keeps_its_error_and_no_verdict(tmp_path, capsys):
    found = run_folder(tmp_path / "stopped", main=[], error="interrupted")
    assert found["code"] != 0
    summary = (tmp_path / "stopped" / "summary.md").read_text()
    assert "> error: interrupted" in summary and "No suspect" not in summary
    assert "Nothing measured" in summary


def test_good_hosts_are_only_those_measured_and_passed(tmp_path):
    """Ranks 0-3 on host a, 4-5 on host b, 6-7 on host c; rank 4 bad (host b bad); rank 7
    never measured (its pairs hung... or the run stopped): host c is not good either."""
    host = {**dict.fromkeys(range(4), "a"), 4: "b", 5: "b", 6: "c", 7: "c"}
    main = [p for p in fleet(8, slow={4: 0.3}) if 7 not in (p.a, p.b)]
    run_folder(tmp_path / "run", n=8, slow={4: 0.3}, main=main, host=host.get)
    assert (tmp_path / "run" / "bad-hosts.txt").read_text() == "b\n"
    assert (tmp_path / "run" / "good-hosts.txt").read_text() == "a\n"
    with open(tmp_path / "run" / "entities.csv") as handle:
        rows = {r["entity"]: r["verdict"] for r in csv.DictReader(handle)}
    assert rows["rank 7"] == "not measured" and rows["rank 4"] == "bad gpu"


def test_a_link_row_votes_from_its_evidence_not_a_literal(tmp_path):
    from commbench.locate import fleet as levels
    from commbench.locate.findings import entity_rows

    found = levels.entities("gpu", [{"host": "h", "node": ""}] * 6)
    attribution = locate.attribute(6, fleet(6))
    link = locate.Suspect("link", (1, 3), "busbw", 0.5, 1.0, slow_with=(3, 4), verdict="bad link")
    (row,) = [r for r in entity_rows(found, attribution, [link]) if r["kind"] == "link"]
    assert row["votes"] == "3/4"


def switch_folder(path, capsys):
    from commbench.commands.locate import LocateOutput, finish
    from commbench.locate import fleet as levels

    hosts = [{"host": f"n{e:02d}", "node": ""} for e in range(12)]
    found = levels.entities("switch", hosts)
    pairs, _ = decide_leaves(links=uplink(LEAVES, "b", 1.5))
    write_run(path, found, pairs, 12, nnodes=12)
    rows = tuple((f"n{e:02d}", leaf, "spine0") for e, leaf in enumerate(LEAVES))
    spec = LocateSpec(level="switch", small=8, large=262144, topology=rows)
    done = finish(path, spec, LocateOutput(json_out=True), "", "gloo")
    return done, capsys.readouterr()


def test_the_folder_names_the_switch_and_not_its_hosts(tmp_path, capsys):
    done, printed = switch_folder(tmp_path / "run", capsys)
    folder = tmp_path / "run"
    assert done["code"] == 1
    summary = json.loads(printed.out.strip().splitlines()[-1])
    (switch,) = summary["suspects"]
    assert switch["kind"] == "switch" and switch["entity"] == "b"
    assert switch["verdict"] == "bad switch"
    assert switch["hosts"] == ["n04", "n05", "n06", "n07"] and switch["ranks"] == [4, 5, 6, 7]
    with open(folder / "entities.csv") as handle:
        rows = {r["entity"]: r for r in csv.DictReader(handle)}
    assert rows["b"]["kind"] == "switch" and rows["b"]["verdict"] == "bad switch"
    assert {rows[f"n{e:02d}"]["verdict"] for e in range(12)} == {"ok"}
    assert (folder / "bad-hosts.txt").read_text().split() == ["n04", "n05", "n06", "n07"]
    assert "n04" not in (folder / "good-hosts.txt").read_text()
    assert "bad switch   switch b: " in printed.err
    assert "under 3 leaf switches (--topology)" in printed.err
    assert "| bad switch | b |" in (folder / "summary.md").read_text()
    assert (folder / "heatmap_busbw.png").stat().st_size > 0


def test_the_folder_names_the_bad_rank_in_every_file(tmp_path, capsys):
    import csv

    found = locate_folder(tmp_path / "before", slow={2: 0.4})
    assert found["code"] == 1
    folder = tmp_path / "before"
    with open(folder / "entities.csv") as handle:
        rows = {r["entity"]: r for r in csv.DictReader(handle)}
    assert rows["rank 2"]["verdict"] == "bad gpu" and rows["rank 2"]["confirmed"] == "3/3"
    assert {rows[f"rank {e}"]["verdict"] for e in (0, 1, 3, 4, 5)} == {"ok"}
    assert (folder / "bad-hosts.txt").read_text() == "h\n"
    assert "| bad gpu | rank 2 |" in (folder / "summary.md").read_text()
    assert "bad gpu      rank 2: 0.40x [0." in capsys.readouterr().out
