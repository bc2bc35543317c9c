"""ps in one process: every rank's descriptor runs against an in-memory network that stands in
for torch.distributed's isend/irecv, so the byte counters, the exact sums and the checks that
catch a dropped partition or a wrong sender are tested without starting ranks (the real runs
are in tests/integration/test_ps.py)."""

import threading

import numpy as np
import pytest
import torch

from commbench.collectives import ps
from commbench.collectives.base import OpContext
from commbench.collectives.ps import asynchronous as ps_async

COUNT = 1024  # float32 elements: n = 4096 bytes


class Network:
    """Messages matched by (source, destination, tag), delivered in order, between ranks that
    run in threads; a receive waits for its send (a lost one: until WAIT_S, then it is left
    as it was)."""

    WAIT_S = 0.5

    def __init__(self) -> None:
        self.local = threading.local()
        self.lock = threading.Lock()
        self.sent: dict[tuple, list] = {}
        self.waiting: dict[tuple, list] = {}
        self.drop: set[tuple] = set()  # (src, dst, tag) whose first send is lost
        self.redirect: dict[int, int] = {}  # a receive from A actually gets B's message

    @property
    def rank(self) -> int:
        return self.local.rank

    def isend(self, tensor, dst, group=None, tag=0):
        key = (self.rank, dst, tag)
        with self.lock:
            if key in self.drop:
                self.drop.discard(key)
                return Done()
            if self.waiting.get(key):
                target, event = self.waiting[key].pop(0)
                target.copy_(tensor)
                event.set()
            else:
                self.sent.setdefault(key, []).append(tensor.clone())
        return Done()

    def irecv(self, tensor, src, group=None, tag=0):
        key = (self.redirect.get(src, src), self.rank, tag)
        event = threading.Event()
        with self.lock:
            if self.sent.get(key):
                tensor.copy_(self.sent[key].pop(0))
                event.set()
            else:
                self.waiting.setdefault(key, []).append((tensor, event))
        return Pending(event, self.WAIT_S)

    def batch(self, ops):
        return [op.op(op.tensor, op.peer, op.group, op.tag) for op in ops]


class P2POp:
    def __init__(self, op, tensor, peer, group=None, tag=0) -> None:
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag


class Done:
    def wait(self) -> bool:
        return True


class Pending:
    def __init__(self, event, timeout: float) -> None:
        self.event, self.timeout = event, timeout

    def wait(self) -> bool:
        return self.event.wait(self.timeout)


def contexts(workers, servers, partition=256, pattern="sync", colocate=False):
    options = (("servers", 1 if colocate else servers), ("partition", partition),
               ("mode", "sync"), ("staleness", None), ("baseline", True),
               ("colocate", colocate))
    world = workers if colocate else workers + servers
    return [OpContext(rank, world, None, "float32", "sum", None, pattern=pattern,
                      options=options) for rank in range(world)]


def buffers(op, ctx, count=COUNT):
    layout = op.layout(ctx, count)
    send = torch.empty(max(layout.send, 1), dtype=torch.float32)
    recv = torch.empty(max(layout.recv, 1), dtype=torch.float32)
    return op.views(ctx, send, recv, count)


def one_step(monkeypatch, workers, servers, net=None, count=COUNT, partition=256,
             colocate=False):
    """Every rank's step on the fake network: workers push, servers sum and answer. Returns
    (network, descriptor per rank, contexts, buffers)."""
    import torch.distributed as dist

    net = net or Network()
    monkeypatch.setattr(dist, "isend", net.isend)
    monkeypatch.setattr(dist, "irecv", net.irecv)
    monkeypatch.setattr(dist, "P2POp", P2POp)
    monkeypatch.setattr(dist, "batch_isend_irecv", net.batch)
    ctxs = contexts(workers, servers, partition, colocate=colocate)
    ops = [ps.ParameterServer() for _ in ctxs]  # one descriptor per process, as in real ranks
    bufs = [buffers(op, ctx, count) for op, ctx in zip(ops, ctxs, strict=True)]
    steps = []
    for op, ctx, buf in zip(ops, ctxs, bufs, strict=True):
        op.prepare(ctx, buf)
        steps.append(op.call(ctx, buf))
    def run(rank, step):
        net.local.rank = rank
        step()

    threads = [threading.Thread(target=run, args=(rank, step))
               for rank, step in enumerate(steps)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return net, ops, ctxs, bufs


@pytest.mark.parametrize(("workers", "servers", "expected"), [
    # (worker tx, worker rx, server rx, server tx) for n = 4096 B, worked out by hand:
    (2, 2, (4096, 4096, 4096, 4096)),  # each server: 2 workers x 2048 B
    (3, 1, (4096, 4096, 12288, 12288)),  # one server: 3 workers x 4096 B
    (2, 1, (4096, 4096, 8192, 8192)),
])
def test_counted_bytes_are_the_traffic_formulas(monkeypatch, workers, servers, expected):
    _, ops, ctxs, _ = one_step(monkeypatch, workers, servers)
    per_rank = torch.tensor([op.counters(ctx) for op, ctx in zip(ops, ctxs, strict=True)])
    fields = ops[0].row_fields(ctxs[0], per_rank.numpy())
    counted = (fields["worker_tx_bytes"], fields["worker_rx_bytes"], fields["server_rx_bytes"],
               fields["server_tx_bytes"])
    assert counted == expected
    formula = ps.traffic(COUNT * 4, workers, servers)
    assert counted == (formula.worker_tx_bytes, formula.worker_rx_bytes,
                       formula.server_rx_bytes, formula.server_tx_bytes)
    assert (fields["workers"], fields["servers"]) == (workers, servers)


def test_sync_reduces_every_workers_gradient_per_step(monkeypatch):
    # 3 workers' 4096 B each summed in a 200 µs step: 12288 B / 200 µs = 0.06144 GB/s, the
    # same formula as the allreduce baseline's row (not algbw, n/t, which is 3x less).
    _, ops, ctxs, _ = one_step(monkeypatch, 3, 1)
    per_rank = torch.tensor([op.counters(ctx) for op, ctx in zip(ops, ctxs, strict=True)])
    fields = ops[0].row_fields(ctxs[0], per_rank.numpy(), time_us=200.0)
    assert fields["reduced_gbps"] == pytest.approx(0.06144)
    assert ps.reduced_gbps(COUNT * 4, 3, 200.0) == pytest.approx(0.06144)


def test_async_reduced_bytes_are_each_workers_steps_less_the_rejected_pushes():
    # Worker 0: 10 steps in 10 ms (1000/s), worker 1: 10 in 20 ms (500/s); the one server
    # rejected 2 of the 20 pushes: 4096 B x 1500/s x 18/20 = 5.5296 MB/s. The row's own time
    # (a block's, max over workers) does not enter.
    op = ps.ParameterServer()
    ctx = contexts(2, 1, pattern="async")[0]
    op._count = COUNT  # the size its last bound call ran at (set by call)
    #                  tx    rx    stx   srx   steps step_s wait  lag rejected
    per_rank = np.array([[4096, 4096, 0, 0, 10, 0.010, 0.001, 0, 0],
                         [4096, 4096, 0, 0, 10, 0.020, 0.001, 0, 0],
                         [0, 0, 8192, 8192, 0, 0.0, 0.0, 1, 2]], dtype=float)
    fields = op.row_fields(ctx, per_rank, time_us=999.0)
    assert fields["reduced_gbps"] == pytest.approx(4096 * 1500 * 0.9 / 1e9)
    assert fields["steps_per_s"] == pytest.approx(750.0)
    assert fields["rejected_pushes"] == 2


@pytest.mark.parametrize(("workers", "servers"), [(2, 2), (3, 1), (2, 1)])
def test_every_worker_ends_with_the_exact_sum(monkeypatch, workers, servers):
    _, ops, ctxs, bufs = one_step(monkeypatch, workers, servers)
    assert [op.wrong(ctx, buf) for op, ctx, buf in zip(ops, ctxs, bufs, strict=True)] == \
        [0] * (workers + servers)
    inputs = sum(bufs[w].send for w in range(workers))
    assert torch.equal(bufs[0].recv, inputs)
    assert ops[0].validation(ctxs[0], COUNT) == "full"


def test_a_dropped_partition_is_caught(monkeypatch):
    net = Network()
    net.drop.add((1, 2, 1))  # worker 1's second partition of shard 0 never reaches server 2
    _, ops, ctxs, bufs = one_step(monkeypatch, 2, 2, net)
    wrong = [op.wrong(ctx, buf) for op, ctx, buf in zip(ops, ctxs, bufs, strict=True)]
    assert wrong[2] > 0  # the server's slot for worker 1 kept its zeros
    assert wrong[0] > 0 and wrong[1] > 0  # and the sum both workers got lacks it
    assert wrong[3] == 0


def test_a_wrong_sender_is_caught_even_where_the_sum_would_not_show_it(monkeypatch):
    net = Network()
    _, ops, ctxs, bufs = one_step(monkeypatch, 2, 1, net)
    assert ops[2].wrong(ctxs[2], bufs[2]) == 0
    # The server's two slots swapped (worker 0's data in worker 1's slot): same sum, but each
    # slot is checked against its own worker's input.
    width = COUNT
    slots = bufs[2].recv.view(2, width)
    slots[[0, 1]] = slots[[1, 0]].clone()
    assert ops[2].wrong(ctxs[2], bufs[2]) > 0


def test_partitions_cover_each_shard_once():
    bounds = ps.shard_bounds(10, 3)
    assert bounds == [(0, 4), (4, 7), (7, 10)]
    assert ps.partitions(4, 7, 2) == [(4, 6), (6, 7)]


def test_busbw_factor_is_the_larger_of_a_worker_and_a_server_load():
    op = ps.COLLECTIVE
    assert op.busbw_factor_in(contexts(3, 1)[0]) == 3
    assert op.busbw_factor_in(contexts(2, 2)[0]) == 1
    assert op.busbw_factor_in(contexts(4, 2)[0]) == 2
    assert op.busbw_factor_in(contexts(3, 1, pattern=ps.BASELINE)[0]) == pytest.approx(4 / 3)


def test_servers_are_left_out_of_the_time():
    assert [ps.COLLECTIVE.active(ctx) for ctx in contexts(2, 2)] == [True, True, False, False]


def test_the_workers_group_is_made_up_front_by_the_sweep_never_at_the_call():
    from types import SimpleNamespace

    from commbench.measure.sweep import Sweep
    from commbench.specs.measure import MeasureSpec

    made = []
    session = SimpleNamespace(
        rank=0, world=4, groups_for=lambda *args: made.append(("world", args[0])),
        subgroup_for=lambda backend, ranks: made.append((backend, ranks)),
        control=SimpleNamespace(barrier=lambda: made.append("barrier")))
    options = (("servers", 2), ("mode", "sync,async"), ("baseline", True))
    Sweep(session, MeasureSpec(ops=("ps",), backends=("gloo",), op_options=options),
          None).prepare()
    # once per variant asked (the session makes each once); all before the barrier
    assert made[0] == ("world", "gloo") and made[-1] == "barrier"
    assert set(made[1:-1]) == {("gloo", (0, 1))}
    assert ps.COLLECTIVE.subgroups(4, (("servers", 1), ("baseline", False))) == ()
    assert ps.COLLECTIVE.subgroups(3, (("colocate", True),)) == ((0, 1, 2),)
    # A call whose group was not made up front is refused, not made at its bind.
    ctx = contexts(2, 2, pattern=ps.BASELINE)[0]
    bufs = buffers(ps.COLLECTIVE, ctx)
    with pytest.raises(LookupError, match=r"no group of ranks \[0, 1\]"):
        ps.COLLECTIVE.call(ctx, bufs)


def test_the_baseline_rows_are_allreduce_over_the_workers():
    fields = ps.COLLECTIVE.row_fields(contexts(3, 1, pattern=ps.BASELINE)[0], None)
    assert fields["op"] == "allreduce" and fields["group_size"] == 3
    assert ps.COLLECTIVE.variants((), (("mode", "sync"), ("baseline", True))) == \
        ("sync", "allreduce")
    assert ps.COLLECTIVE.variants((), (("mode", "sync"), ("baseline", False))) == ("sync",)


# ---- bad input: one line, exit 2, nothing launched (docs/reference/exit-codes.md#bad-input) ------

@pytest.mark.parametrize(("args", "message"), [
    (["--servers", "2", "--nproc", "2"], "leaves no worker"),
    (["--servers", "3", "--nproc", "3"], "leaves no worker"),
    (["--servers", "0"], "at least 1 server"),
    (["--servers", "3", "--nproc", "5", "--sizes", "8"], "fewer partitions than servers"),
    (["--staleness", "2"], "add --mode async"),
    (["--mode", "sync", "--staleness", "0"], "add --mode async"),
    (["--mode", "bogus"], "unknown --mode"),
    (["--partition", "1", "--nproc", "3"], "--partition"),
    (["--partition", "4Q"], "unknown unit"),
    (["--mesh", "a=2", "--nproc", "2"], "lays the ranks out itself"),
    (["--backend", "nccl", "--nproc", "3"], "nccl"),
    # one worker: the allreduce baseline would be a one-rank copy (busbw 0, a ratio of noise)
    (["--nproc", "2", "--servers", "1"], "1 worker has no allreduce to compare with"),
])
def test_bad_ps_input_exits_2_with_one_line(args, message, tmp_path, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["ps", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_nccl_names_the_servers_that_have_no_gpu(monkeypatch):
    import torch.distributed as dist

    from commbench.core.errors import UsageError
    from commbench.launch.backends import check_backends
    from commbench.specs.measure import MeasureSpec

    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    spec = MeasureSpec(ops=("ps",), backends=("nccl",), op_options=(("servers", 2),))
    with pytest.raises(UsageError, match="2 worker.s. then 2 server.s.: with nccl every server"):
        check_backends(spec, 4)
    check_backends(spec, 2)  # one GPU a rank: fine


def test_ps_is_left_out_of_run_all_but_has_its_command():
    from commbench.cli.measuring import OP_COMMANDS
    from commbench.specs.measure import parse_ops

    assert "ps" not in parse_ops("all") and "ps" in OP_COMMANDS


def test_the_table_puts_ps_beside_allreduce_with_the_ratio():
    from commbench.output.baselines import side_by_side

    def row(op, pattern, size, time_us, baseline=""):
        return {"op": op, "pattern": pattern, "backend": "gloo", "size_bytes": size,
                "workers": 2, "servers": 1, "lat_us_p50": time_us, "busbw_gbps": 1.0,
                "beside": baseline}

    records = [row("ps", "sync", 4096, 300.0, "allreduce"), row("ps", "sync", 8192, 50.0,
               "allreduce"), row("allreduce", "", 4096, 100.0), row("allreduce", "", 8192, 100.0)]
    [(title, rows)] = side_by_side(records)
    assert "ps/sync beside allreduce over the same 2 workers" in title
    assert [cells[4] for cells in rows] == ["3.00x", "0.50x"]
    assert [cells[7:] for cells in rows] == [["-", "-"]] * 2  # rows without reduced_gbps
    records[0]["reduced_gbps"], records[2]["reduced_gbps"] = 0.0273, 0.0819
    assert side_by_side(records)[0][1][0][7:] == ["0.027", "0.082"]
    assert side_by_side(records[2:]) == []  # no row names a baseline: no table


def test_the_live_table_shows_the_reduced_bytes_beside_the_baseline(capsys):
    from dataclasses import MISSING, fields

    from commbench.output.live import Live
    from commbench.results.schema import Row

    def record(op, pattern, time_us, reduced, beside=""):
        values = {f.name: 0 for f in fields(Row) if f.default is MISSING
                  and f.default_factory is MISSING}
        values.update(op=op, backend="gloo", device="cpu", dtype="float32", reduce_op="sum",
                      inplace=False, size_bytes=4096, lat_us_p50=time_us)
        row = Row(**values).to_dict()
        row.update(pattern=pattern, workers=2, servers=1, beside=beside, reduced_gbps=reduced)
        return row

    live = Live(progress=False)
    live.begin({"backends": ["gloo"], "config": {}}, 2)
    live.row(record("ps", "sync", 300.0, 0.0273, "allreduce"))
    live.row(record("allreduce", "", 100.0, 0.0819))
    live.close()
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "3.00x" in line)
    assert line.split()[-2:] == ["0.027", "0.082"]


# ---- async: the version book alone ----------------------------------------------------------

def test_a_push_beyond_the_bound_is_rejected_and_counted():
    book = ps_async.VersionBook(workers=2, staleness=1)
    for version in range(3):
        assert book.push(0, version)  # worker 0 alone moves the shard to version 2
    assert book.push(1, 1)  # one version behind: applied
    assert not book.push(1, 0)  # two behind: rejected, and counted
    assert (book.rejected, book.max_lag) == (1, 2)


def straggle(book, workers, rounds, respect_holds):
    """Worker 0 takes 3 steps for each of the others' one; a worker pushes only once its
    last reply came (unless ``respect_holds`` is False: a pull that does not wait)."""
    waiting = set()
    for _ in range(rounds):
        for worker in [0, 0, 0, *range(1, workers)]:
            if worker in waiting and respect_holds:
                continue
            waiting.add(worker)
            book.push(worker, book.clocks[worker])
            waiting -= set(book.releasable())
            if not respect_holds:
                book.held.clear()


@pytest.mark.parametrize("staleness", [0, 1, 2])
def test_held_pulls_keep_every_push_within_the_bound(staleness):
    book = ps_async.VersionBook(workers=3, staleness=staleness)
    straggle(book, 3, 20, respect_holds=True)
    assert book.max_lag <= staleness and book.rejected == 0
    assert max(book.clocks) - min(book.clocks) <= staleness + 1


def test_without_the_held_pulls_the_bound_breaks():
    book = ps_async.VersionBook(workers=3, staleness=1)
    straggle(book, 3, 20, respect_holds=False)
    assert book.max_lag > 1 and book.rejected > 0  # what the test above rules out


def test_reset_keeps_the_stats_of_the_size():
    book = ps_async.VersionBook(workers=2, staleness=0)
    book.push(0, 3)
    book.push(1, 0)
    book.reset()
    assert (book.clocks, book.newest, book.applied) == ([0, 0], -1, 0)
    assert (book.max_lag, book.rejected) == (3, 1)


def test_both_modes_run_in_one_launch_beside_the_baseline():
    assert ps.COLLECTIVE.variants((), (("mode", "sync,async"), ("baseline", True))) == \
        ("sync", "async", "allreduce")


def test_compare_keeps_runs_with_other_servers_apart():
    from commbench.compare.runs import compare_rows
    from commbench.core.errors import UsageError
    from commbench.results.schema import with_defaults

    def row(servers, p50):
        return with_defaults({"op": "ps", "pattern": "sync", "backend": "gloo",
                              "world_size": 4, "size_bytes": 4096, "lat_us_p50": p50,
                              "lat_us_ci_lo": p50, "lat_us_ci_hi": p50, "servers": servers,
                              "workers": 4 - servers, "samples_us": [p50] * 5})

    pairs, _, _ = compare_rows([row(2, 100.0)], [row(2, 110.0)])
    assert len(pairs) == 1
    with pytest.raises(UsageError, match="no measurement in common"):
        compare_rows([row(2, 100.0)], [row(1, 110.0)])  # 2+2 is not 3+1


def test_colocated_servers_move_what_reduce_scatter_and_allgather_move(monkeypatch):
    from commbench import collectives

    count = 1020  # 3 shards of 340 float32 elements: n = 4080 B
    _, ops, ctxs, bufs = one_step(monkeypatch, 3, 3, count=count, colocate=True)
    assert [op.wrong(ctx, buf) for op, ctx, buf in zip(ops, ctxs, bufs, strict=True)] == [0] * 3
    per_rank = torch.tensor([op.counters(ctx) for op, ctx in zip(ops, ctxs, strict=True)])
    fields = ops[0].row_fields(ctxs[0], per_rank.numpy())
    # By hand: a rank pushes 2 of its 3 shards (2720 B) and, as the server of its shard,
    # returns the sum to 2 workers (2 x 1360 B); it receives as much.
    assert (fields["worker_tx_bytes"], fields["server_tx_bytes"]) == (2720, 2720)
    assert (fields["worker_rx_bytes"], fields["server_rx_bytes"]) == (2720, 2720)
    moved = sum(collectives.get(name).busbw_factor(3) for name in ("reduce-scatter",
                                                                  "allgather")) * count * 4
    assert fields["worker_tx_bytes"] + fields["server_tx_bytes"] == moved
    assert fields["servers"] == fields["workers"] == 3
    assert ops[0].busbw_factor_in(ctxs[0]) == pytest.approx(4 / 3)


def test_colocated_catches_a_dropped_push(monkeypatch):
    net = Network()
    net.drop.add((2, 0, 0))  # rank 2's first partition of shard 0 never reaches rank 0
    _, ops, ctxs, bufs = one_step(monkeypatch, 3, 3, net, count=1020, colocate=True)
    assert ops[0].wrong(ctxs[0], bufs[0]) > 0


def test_run_ops_ps_points_to_its_command(tmp_path, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--ops", "allreduce,ps", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "run it as `commbench ps`" in err


def test_the_source_of_a_push_public_name_first():
    class Public:
        def source_rank(self):
            return 3

        def _source_rank(self):
            raise AssertionError("the private name is the fallback only")

    class Older:
        def _source_rank(self):
            return 2

    assert ps_async.source_of(Public()) == 3 and ps_async.source_of(Older()) == 2
