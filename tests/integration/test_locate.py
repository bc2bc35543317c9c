"""locate on real gloo ranks, with the faults planted inside them: a slow rank is named alone,
a slow link is named and neither of its ends, a rank busy only for a while is transient, a
clean fleet names nobody. Six ranks are a small fleet: the matrix reads every pair twice.
Verdicts, ranks and files are asserted, never a bandwidth.

The faults are bound to the large size (a sleep before each bidirectional batch: 10 ms for a
rank, 8x a 256K call's fastest decile on the VM; 30 ms for the link, whose one slow pair has
no partners to vote with): at the small size as well they would add the sleep to each of the
300 latency calls of every round, tripling the run's time for nothing the test needs.
"""

import csv
import json
import re
import socket
import subprocess

import numpy as np
import pytest

from tests.conftest import commbench

pytestmark = pytest.mark.integration

LARGE = 256 * 1024
ARGS = ["locate", "--nproc", "6", "--sizes", "8,256K", "--json", "--timeout", "60"]


def locate(tmp_path, fault=""):
    done, run = commbench(ARGS, tmp_path, timeout=120,
                          env={"COMMBENCH_FAULT": fault} if fault else None)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return done, run, summary


def bad(summary):
    return [(s["kind"], s["ranks"]) for s in summary["suspects"]
            if s["verdict"].startswith("bad")]


def entities(run):
    with open(run / "entities.csv") as handle:
        return {row["entity"]: row for row in csv.DictReader(handle)}


def not_blank(png):
    """A drawn heatmap has many distinct colours and real contrast."""
    import matplotlib.image as mpimg

    pixels = mpimg.imread(png)[..., :3]
    colours = len(np.unique((pixels * 255).astype(int).reshape(-1, 3), axis=0))
    return float(pixels.std()) > 0.05 and colours > 50


@pytest.mark.core
def test_a_slow_rank_is_named_alone(tmp_path):
    done, run, summary = locate(tmp_path, f"delay=0.01:3:p2p:{LARGE}")
    assert done.returncode == 1, summary
    assert bad(summary) == [("gpu", [3])], summary
    (suspect,) = [s for s in summary["suspects"] if s["verdict"] == "bad gpu"]
    # the pooled evidence: its pairs in the matrix with partners that are no candidates
    # themselves (5 partners twice, or 4 twice when the busy VM made another rank a
    # candidate too) and at least 3 retests, far beyond 3.5 z
    found = re.match(r"rank 3: \d\.\d\dx \[\d\.\d\d-\d\.\d\d\] the fleet median \w+ .*over "
                     r"\d+ exchanges \((6|8|10) in the matrix, \d+ retests", suspect["evidence"])
    assert found, suspect
    assert suspect["busbw_ratio"] < 0.5 and suspect["z"] <= -3.5  # 10 ms on a ~1 ms call
    assert suspect["measurements"] >= int(found.group(1)) + 3 and suspect["interval"][1] < 0.6
    slow_again, retests = map(int, suspect["confirmed"].split("/"))
    assert retests >= 3 and slow_again >= 2
    assert summary["entities"] == 6 and summary["pairs"] == 30 and summary["rounds"] == 10
    rows = entities(run)
    assert rows["rank 3"]["verdict"] == "bad gpu"
    assert all(rows[f"rank {r}"]["verdict"] in ("ok", "transient") for r in (0, 1, 2, 4, 5))
    with open(run / "pairs.csv") as handle:
        pairs = list(csv.DictReader(handle))
    main = [p for p in pairs if p["phase"] == "main"]
    assert len(main) == 30 and {p["status"] for p in pairs} == {"ok"}
    met = [frozenset((p["entity_a"], p["entity_b"])) for p in main]
    assert sorted(map(sorted, set(met))) == sorted(
        [f"rank {a}", f"rank {b}"] for a in range(6) for b in range(a + 1, 6))
    assert all(met.count(pair) == 2 for pair in met)  # every pair twice
    with open(run / "matrix_busbw.csv") as handle:
        matrix = list(csv.reader(handle))
    assert matrix[0][1:] == [f"rank {r}" for r in range(6)] and len(matrix) == 7
    assert (run / "bad-hosts.txt").read_text().split() == [socket.gethostname()]
    assert "rank 3" in (run / "summary.md").read_text()
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["suspects"][0]["verdict"] == "bad gpu"
    # the rule the verdict applied, one object in run.json and --json, quoted by the evidence
    rule = summary["rule"]
    assert rule == meta["rule"] and suspect["z"] <= -rule["z"]
    assert f"(bad needs {rule['z']:.1f}: " in suspect["evidence"]
    assert set(rule["min_effect_from"].values()) <= {"noise", "floor", "cap"}
    assert re.search(r"; min effect \d+% \((noise|floor|cap)\)$", suspect["evidence"])
    assert f"{rule['z']:.1f} z" in (run / "summary.md").read_text()
    for name in ("heatmap_busbw.png", "heatmap_lat.png"):
        assert not_blank(run / name), name


def test_a_slow_link_is_named_and_neither_end(tmp_path):
    done, run, summary = locate(tmp_path, f"linkdelay=0.03:1,3:p2p:{LARGE}")
    assert done.returncode == 1, summary
    assert bad(summary) == [("link", [1, 3])], summary
    rows = entities(run)
    assert rows["rank 1"]["verdict"] in ("ok", "transient")
    assert rows["rank 3"]["verdict"] in ("ok", "transient")
    assert rows["rank 1 - rank 3"]["verdict"] == "bad link"
    (link,) = [s for s in summary["suspects"] if s["verdict"] == "bad link"]
    assert "2 in the matrix" in link["evidence"] and link["measurements"] >= 5
    assert link["busbw_ratio"] < 0.5 and link["z"] <= -3.5


def test_a_rank_busy_for_a_while_is_transient(tmp_path):
    """Rank 3 is slow on its first 6 visits of the large size only (busy, as with another
    job that then ended): 6 of its 10 pairs in the matrix (the first pass and the first
    round of the second), none of its retests. The matrix points at it, the retests do not
    reproduce it: transient, exit 0, nothing bad. (A rank slow on every other visit is slow
    again on its retests too, and is named bad: that is what a retest is for.)"""
    done, run, summary = locate(tmp_path, f"busy=0.01,6:3:p2p:{LARGE}")
    assert done.returncode == 0, summary
    assert bad(summary) == [], summary
    (busy,) = [s for s in summary["transient"] if s["ranks"] == [3]]
    assert busy["verdict"] == "transient", busy
    slow_again, retests = map(int, busy["confirmed"].split("/"))
    assert retests >= 3 and 2 * slow_again < retests, busy
    assert f"{retests} retests, slow again {slow_again}/{retests}" in busy["evidence"]
    assert busy["evidence"].startswith("rank 3: ")
    assert entities(run)["rank 3"]["verdict"] == "transient"
    assert (run / "bad-hosts.txt").read_text() == ""
    assert "transient" in (run / "summary.md").read_text()


def test_a_clean_fleet_names_nobody(tmp_path):
    done, run, summary = locate(tmp_path)
    assert done.returncode == 0, summary
    assert summary["suspects"] == []
    assert (run / "bad-hosts.txt").read_text() == ""
    assert (run / "good-hosts.txt").read_text().split() == [socket.gethostname()]
    assert not_blank(run / "heatmap_busbw.png")


def test_a_hung_pair_ends_the_run_with_the_partial_matrix(tmp_path):
    """Rank 1 and rank 3 never finish their pair (round 3 of the circle at 6): the others
    time out waiting for the round, the run exits 3 naming the pair, and every pair measured
    before is kept, the hung one marked."""
    store = f"sqlite:///{tmp_path / 'history.db'}"
    args = [*ARGS[:-1], "5", "--history", store]  # --timeout 5
    done, run = commbench(args, tmp_path, timeout=120, env={"COMMBENCH_FAULT": "hang:1,3:p2p"})
    assert done.returncode == 3, done.stderr[-3000:]
    assert "rank 1 was at locate round 3 (main), pair 1-3" in done.stderr
    assert "rank 3 was at locate round 3 (main), pair 1-3" in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "partial"
    assert [s["ranks"] for s in summary["suspects"] if s["verdict"] == "hung"] == [[1, 3]]
    assert bad(summary) == []  # what rounds 0-2 hint at is unconfirmed: inconclusive at most
    with open(run / "pairs.csv") as handle:
        pairs = list(csv.DictReader(handle))
    assert [p["status"] for p in pairs].count("ok") == 9  # rounds 0-2
    assert [(p["entity_a"], p["entity_b"], p["status"]) for p in pairs
            if p["status"] != "ok"] == [("rank 1", "rank 3", "hung")]
    assert json.loads((run / "run.json").read_text())["status"] == "partial"
    assert (run / "heatmap_busbw.png").exists() and (run / "matrix_busbw.csv").exists()
    # --history: the cut run is in the store as partial, with its per-entity ratios
    from commbench.history.store import Store

    with Store(store) as history:
        (labels,) = history.runs()
        entities_stored = {e.entity for _, e in history.entities()}
    assert (labels.run_id, labels.status, labels.kind) == (run.name, "partial", "locate")
    assert {f"rank {r}" for r in range(6)} <= entities_stored


def test_four_torchrun_agents_are_four_nodes_and_the_slow_one_is_named(tmp_path):
    """Four agents on one host, two ranks each: `--level node` meets the nodes pairwise (a
    node's two ranks together); a delay in rank 5 (node 2's second rank) names node 2, and
    every agent ends at once with exit 1."""
    from tests.integration.test_launchers import BIN, clean_env, free_port

    port = free_port()
    command = [str(BIN / "torchrun"), "--nnodes", "4", "--nproc-per-node", "2",
               "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
               "--rdzv-id", "commbench-locate", "-m", "commbench", "locate", "--level", "node",
               "--sizes", "8,256K", "--json", "--timeout", "60", "--out", str(tmp_path),
               "--name", "nodes"]
    # 30 ms, as for the link: with 4 entities the robust z leans on 3 partners' spread, and at
    # 10 ms a noisy partner (1.9x) once held node 2 (0.23x) at z -3.1, inside the 3.5 bound
    env = clean_env(COMMBENCH_FAULT=f"delay=0.03:5:p2p:{LARGE}")
    logs = [(tmp_path / f"agent-{i}.out", tmp_path / f"agent-{i}.err") for i in range(4)]
    agents = []
    for out, err in logs:  # files, not pipes: an agent blocked on a full pipe stalls them all
        with out.open("w") as stdout, err.open("w") as stderr:
            agents.append(subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env))
    try:
        for agent in agents:
            agent.wait(timeout=180)
    finally:
        for agent in agents:  # no agent outlives the test
            if agent.poll() is None:
                agent.kill()
    outputs = [(out.read_text(), err.read_text()[-2000:]) for out, err in logs]
    # Every rank exits as rank 0 does (1: something bad), so every agent fails alike; were the
    # other ranks to exit 0, their agents would wait 300 s in torch's exit barrier.
    assert [a.returncode for a in agents] == [1, 1, 1, 1], outputs
    summary = next(json.loads(text.strip().splitlines()[-1]) for text, _ in outputs
                   if text.strip().startswith("{"))
    assert bad(summary) == [("node", [4, 5])], summary
    rows = entities(tmp_path / "nodes")  # a node is host:node-rank (GROUP_RANK), 2 ranks each
    host = socket.gethostname()
    assert {name: row["ranks"] for name, row in rows.items()} == {
        f"{host}:{n}": f"{2 * n},{2 * n + 1}" for n in range(4)}
    assert rows[f"{host}:2"]["verdict"] == "bad node", rows
    assert all(rows[f"{host}:{n}"]["verdict"] in ("ok", "transient") for n in (0, 1, 3)), rows
