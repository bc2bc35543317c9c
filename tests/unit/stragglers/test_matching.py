"""Point-to-point messages are matched by the pair's order: the k-th send from a to b with b's
k-th receive from a; a receive never posted is a missing rank on that pair."""

from commbench.results import trace as trace_format
from commbench.stragglers import analyse


def _pair(folder, steps=12, late_s=0.02, drop_last_recv=False):
    group = trace_format.Group("0", (0, 1), "gloo", "default_pg")
    for rank in (0, 1):
        calls = []
        for step in range(steps + 1):
            t0 = 1.0 + step * 0.1 + (late_s if rank == 1 else 0.0)
            end = 1.0 + step * 0.1 + late_s + 0.001
            if rank == 1 and drop_last_recv and step == steps:
                continue
            calls.append(trace_format.Call(
                seq=len(calls), pg="0", op="send" if rank == 0 else "recv", dtype="float32",
                in_numel=256, out_numel=256, step=step, peer=1 - rank,
                t_issue_ns=round(t0 * 1e9), t_end_ns=round(end * 1e9)))
        head = trace_format.header(torch_version="2.13.0", backend="gloo", world_size=2,
                                   rank=rank, host="h", groups={"0": group},
                                   steps_ended=steps + 1)
        trace_format.write_rank(folder / f"rank-{rank}.jsonl", head, calls,
                                [None] * (steps + 1))
    return trace_format.load(folder)


def test_a_late_receiver_is_named_on_its_pair(tmp_path):
    analysis = analyse(_pair(tmp_path))
    assert [(r.rank, r.verdict) for r in analysis.named] == [(1, "culprit")]
    assert analysis.ranks[1].by_group == {"p2p 0->1": analysis.ranks[1].by_group["p2p 0->1"]}


def test_a_receive_never_posted_is_missing(tmp_path):
    analysis = analyse(_pair(tmp_path, late_s=0.0, drop_last_recv=True))
    assert [(m.rank, m.call, m.op, m.group) for m in analysis.missing] == [
        (1, 12, "recv", "p2p 0->1")]  # the end it never posted
