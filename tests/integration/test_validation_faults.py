"""Validation proven by breaking the collectives: real gloo ranks whose torch.distributed calls
do nothing, move the result by one element, or hand over a neighbour's chunk, at the world
sizes real jobs use. Every broken size must show #wrong > 0 and the run must exit 1; the clean
size of the same launch must show #wrong = 0 (so the checks are not simply failing everything).

One launch per world size covers every op and p2p pattern: the faults are bound to sizes.
The sizes are multiples of 840 elements (lcm(1..8)), so no op rounds them for these worlds.
"""

import json

import pytest

from commbench.collectives import REGISTRY
from tests.conftest import commbench

pytestmark = pytest.mark.integration

# Elements of each size: the first clean, the others broken one way each.
ELEMENTS = {"clean": 840, "noop": 1680, "shift": 3360, "neighbour": 6720}
ITEMSIZE = {"float32": 4, "int32": 4, "bfloat16": 2}
OPS = "allreduce,reduce-scatter,allgather,alltoall,broadcast,reduce,gather,scatter,p2p"
PATTERNS = ("pingpong", "unidir", "bidir", "ring", "mbw_mr")


@pytest.mark.parametrize(
    ("world", "reduce_op", "dtype"),
    [
        (2, "sum", "float32"),
        (3, "prod", "float32"),
        pytest.param(4, "avg", "float32", marks=pytest.mark.core),
        (5, "sum", "float32"),  # a shifted sum once passed at 5 ranks
        (7, "min", "int32"),
        (8, "max", "float32"),  # a shifted max once passed at 8 ranks
        (12, "avg", "bfloat16"),  # a no-op bf16 avg once passed at 12 ranks
    ],
)
def test_every_broken_collective_is_caught(tmp_path, world, reduce_op, dtype):
    size = {kind: count * ITEMSIZE[dtype] for kind, count in ELEMENTS.items()}
    sizes = ",".join(str(s) for s in size.values())
    faults = ";".join(f"{kind}:*:*:{size[kind]}" for kind in ("noop", "shift", "neighbour"))
    done, _ = commbench(
        ["run", "--ops", OPS, "--pattern", "all", "--sizes", sizes, "-n", "2", "-w", "0",
         "--nproc", str(world), "--op", reduce_op, "--dtype", dtype, "--root", str(world - 1),
         "--json", "--quiet"],
        tmp_path, timeout=240, env={"COMMBENCH_FAULT": faults},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "wrong element" in done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    expected = {(name.replace("-", "_"), p) for name in OPS.split(",")
                for p in (PATTERNS if name == "p2p" else ("",))}
    assert {(r["op"], r["pattern"]) for r in rows} == expected
    for row in rows:
        assert row["validation"] == "full", row
        assert row["world_size"] == world and row["dtype"] == dtype
        if row["size_bytes"] == size["clean"]:
            assert row["wrong"] == 0, row
        else:
            assert row["wrong"] > 0, (row["op"], row["pattern"], row["size_bytes"])
    assert sorted(r["size_bytes"] for r in rows) == sorted(list(size.values()) * len(expected))


@pytest.mark.core
def test_every_collective_but_barrier_is_broken_here():
    # ps lays out its own world (workers then servers): its faults are in test_ps.py;
    # alltoallv's routing options are its own command's: its faults are in test_alltoallv.py
    assert set(REGISTRY) - {"barrier", "ps", "alltoallv"} == set(OPS.split(","))
