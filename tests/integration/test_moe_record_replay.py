"""A real MoE layer recorded and replayed with its split sizes (issue 32, point 2).

examples/moe_layer.py on 4 gloo ranks under torchrun: a top-k router, the token counts
exchanged, dispatch and combine as all_to_all_single with uneven split sizes (and their
backward, the reverse all-to-alls), an allreduce of the replicated gradients, an optimizer
step. `commbench record` keeps each call's split sizes; `commbench replay` must hand torch
exactly those, so each rank's bytes sent and received per step are the recording's. The
expectation is computed here from the trace files' raw lines and the example's known row
(``HIDDEN`` float32 per token), not with commbench's code; the example's own account of the
split sizes it used checks the recording. No timing is asserted.
"""

import csv
import json

import pytest

from tests.conftest import commbench
from tests.integration.recordings import EXAMPLES, TORCHRUN, record

pytestmark = [pytest.mark.integration, pytest.mark.capability]
WORLD, HIDDEN, STEPS = 4, 16, 4
ITEMSIZE = {"float32": 4, "int64": 8}


def raw_calls(folder, rank):
    lines = (folder / f"rank-{rank}.jsonl").read_text().splitlines()[1:]
    return [record for record in map(json.loads, lines) if "seq" in record]


def moved(call):
    """(bytes sent, bytes received) by one recorded all-to-all: token rows of HIDDEN float32
    where the splits were recorded, else the whole tensor (the int64 counts)."""
    if call["splits"]:
        row = HIDDEN * ITEMSIZE[call["dtype"]]
        return sum(call["splits"]["in"]) * row, sum(call["splits"]["out"]) * row
    return (call["in_numel"] * ITEMSIZE[call["dtype"]],
            call["out_numel"] * ITEMSIZE[call["dtype"]])


def test_a_recorded_moe_layer_replays_its_uneven_splits_byte_for_byte(tmp_path):
    facts = tmp_path / "facts"
    done, folder = record(tmp_path, [*TORCHRUN, str(WORLD), str(EXAMPLES / "moe_layer.py"),
                                     "--steps", str(STEPS), "--hidden", str(HIDDEN),
                                     "--tokens", "32", "--facts", str(facts)], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = {rank: raw_calls(folder, rank) for rank in range(WORLD)}

    # The recording: four uneven token all-to-alls a step, the splits the job itself used,
    # and they differ between ranks.
    dispatches = {}
    for rank in range(WORLD):
        told = json.loads((facts / f"facts-rank-{rank}.json").read_text())["dispatch_splits"]
        for step in range(STEPS):
            tokens = [c for c in calls[rank] if c["step"] == step and c["op"] == "alltoall"
                      and c["dtype"] == "float32"]
            assert len(tokens) == 4, (rank, step, tokens)
            assert tokens[0]["splits"]["in"] == told[step], (rank, step)  # the dispatch
            for call in tokens:
                assert call["in_numel"] == sum(call["splits"]["in"]) * HIDDEN
                assert call["out_numel"] == sum(call["splits"]["out"]) * HIDDEN
                assert call["t_end_ns"] is not None
            dispatches[rank, step] = tuple(tokens[0]["splits"]["in"])
    assert any(len(set(splits)) > 1 for splits in dispatches.values())
    for step in range(STEPS):
        assert len({dispatches[rank, step] for rank in range(WORLD)}) > 1, step

    # The replay: steps 1-3 (step 0 is set-up), once each; exit 0.
    done, run = commbench(["replay", str(folder), "--steps", "1-3", "--timeout", "120"],
                          tmp_path, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(run / "replay_steps.csv") as rows:
        replayed = list(csv.DictReader(rows))
    assert sorted((int(r["rank"]), int(r["step"])) for r in replayed) == [
        (rank, step) for rank in range(WORLD) for step in (1, 2, 3)]
    for row in replayed:
        rank, step = int(row["rank"]), int(row["step"])
        recorded = [moved(c) for c in calls[rank] if c["step"] == step and c["op"] == "alltoall"]
        expected = (sum(s for s, _ in recorded), sum(r for _, r in recorded))
        assert (int(row["sent_bytes"]), int(row["received_bytes"])) == expected, row
    # and call by call, as rank 0 gathered them
    for line in (run / "replayed.jsonl").read_text().splitlines():
        result = json.loads(line)
        by_seq = {c["seq"]: c for c in calls[result["rank"]]}
        for replay_step in result["steps"]:
            for seq, _, _, _, sent, received in replay_step["calls"]:
                if by_seq[seq]["op"] == "alltoall":
                    assert (sent, received) == moved(by_seq[seq]), (result["rank"], seq)
