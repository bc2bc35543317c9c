"""Trace folders for the replay tests, written with the trace format's own writer.

``manual_loop``: every step, on the world group, ``allreduces`` allreduces of ``numel``
float32 (a hand-written data-parallel loop), a broadcast from rank 0 and an allgather; with 4
ranks or more, ranks 0 and 1 also allreduce asynchronously on a second group of their own.
Step 0 holds one large broadcast (setup traffic, as DDP's). Issue and end times are made up
(each call 2 ms, 1 ms of "compute" between calls), as a recording would have them.
"""

from pathlib import Path

from commbench.results import trace as trace_format

CALL_NS = 2_000_000
GAP_NS = 1_000_000


def manual_loop(folder, world: int = 2, steps: int = 3, numel: int = 1 << 16,
                allreduces: int = 2, small: int = 4096) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    groups = {"0": trace_format.Group("0", tuple(range(world)), "gloo", "default_pg")}
    if world >= 4:
        groups["1"] = trace_format.Group("1", (0, 1), "gloo", "pair")
    for rank in range(world):
        calls: list[trace_format.Call] = []
        clock = [1_000_000]

        def add(op, pg, in_numel, out_numel, step, root=None, is_async=False,
                reduce_op=None, calls=calls, clock=clock):
            calls.append(trace_format.Call(
                seq=len(calls), pg=pg, op=op, dtype="float32", in_numel=in_numel,
                out_numel=out_numel, step=step, root=root, is_async=is_async,
                reduce_op=reduce_op, t_issue_ns=clock[0], t_end_ns=clock[0] + CALL_NS))
            clock[0] += CALL_NS + GAP_NS

        add("broadcast", "0", 4 * numel, 4 * numel, 0, root=0)
        for step in range(1, steps + 1):
            for _ in range(allreduces):
                add("allreduce", "0", numel, numel, step, reduce_op="sum")
            add("broadcast", "0", small, small, step, root=0)
            add("allgather", "0", small, small * world, step)
            if world >= 4 and rank in (0, 1):
                add("allreduce", "1", 2 * small, 2 * small, step, reduce_op="sum",
                    is_async=True)
        head = trace_format.header(torch_version="test", backend="gloo", world_size=world,
                                   rank=rank, host="testhost", groups=groups)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls)
    return folder


def per_step(folder, steps: list[int]) -> dict:
    """(rank, op) -> (bytes, calls) per step, mean over ``steps``, read from the trace."""
    trace = trace_format.load(folder)
    out: dict = {}
    for rank in trace.ranks:
        for step in steps:
            for call in trace.calls(rank, step):
                total = out.setdefault((rank, call.op), [0, 0])
                total[0] += call.size_bytes / len(steps)
                total[1] += 1 / len(steps)
    return {key: (b, c) for key, (b, c) in out.items()}


def every_op(folder) -> Path:
    """2 ranks, steps 1-2 each making every kind of call the replay binds: reduce-scatter,
    reduce (root 1, max), gather (root 0: only the root gets the whole), scatter (root 1),
    an even all-to-all (async) and an uneven one (splits), a barrier, two async averages
    (gloo has no average: replayed as sums, the same traffic); step 0 a barrier."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    groups = {"0": trace_format.Group("0", (0, 1), "gloo", "default_pg")}
    for rank in range(2):
        calls: list[trace_format.Call] = []

        def add(op, in_numel, out_numel, step, root=None, splits=None, reduce_op=None,
                is_async=False, calls=calls):
            issue = 1000 * len(calls)
            calls.append(trace_format.Call(
                seq=len(calls), pg="0", op=op, dtype="float32", in_numel=in_numel,
                out_numel=out_numel, step=step, root=root, splits=splits, reduce_op=reduce_op,
                is_async=is_async, t_issue_ns=issue, t_end_ns=issue + 500))

        add("barrier", 0, 0, 0)
        for step in (1, 2):
            add("reduce_scatter", 1024, 512, step, reduce_op="sum")
            add("reduce", 256, 256, step, root=1, reduce_op="max")
            add("gather", 128, 256 if rank == 0 else 0, step, root=0)
            add("scatter", 256 if rank == 1 else 0, 128, step, root=1)
            add("alltoall", 64, 64, step, is_async=True)
            sent, received = ([1, 3], [1, 2]) if rank == 0 else ([2, 4], [3, 4])
            add("alltoall", sum(sent), sum(received), step,
                splits={"in": sent, "out": received})
            add("barrier", 0, 0, step)
            add("allreduce", 100, 100, step, reduce_op="avg", is_async=True)
            add("allreduce", 100, 100, step, reduce_op="avg", is_async=True)
        head = trace_format.header(torch_version="test", backend="gloo", world_size=2,
                                   rank=rank, host="testhost", groups=groups)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls)
    return folder
