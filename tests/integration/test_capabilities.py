"""The capability table in config.unsupported() matches what gloo really does in this torch."""

import socket

import pytest
import torch.multiprocessing as mp

from commbench.specs.measure import DTYPES, REDUCE_OPS, unsupported

pytestmark = [pytest.mark.integration, pytest.mark.capability]


def _probe(rank, world, port, results):
    import datetime

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=30))
    ops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
           "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    for dtype in DTYPES:
        for name in REDUCE_OPS:
            # A fresh group per attempt: a failed call must not leave the next one out of step.
            group = dist.new_group(backend="gloo")
            tensor = torch.ones(4, dtype=getattr(torch, dtype))
            try:
                dist.all_reduce(tensor, op=ops[name], group=group)
                ok = True
            except Exception:
                ok = False
            dist.barrier()
            if rank == 0:
                results[(dtype, name)] = ok
    dist.destroy_process_group()


def test_gloo_supports_exactly_what_the_table_says(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_probe, args=(2, port, results), nprocs=2)
        found = dict(results)
    assert len(found) == len(DTYPES) * len(REDUCE_OPS)
    for (dtype, op), works in found.items():
        assert works == (unsupported("gloo", dtype, op, reduces=True) == ""), (dtype, op)
