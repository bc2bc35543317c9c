"""``commbench doctor``: is this machine (or job) ready, and does every rank arrive?

First what is installed (torch, gloo, NCCL, MPI, CUDA devices) and which launcher started us,
then a real rendezvous, a barrier and a tiny allreduce across all ranks, timed per rank, so a
rank or host that does not arrive is named instead of hanging (nccl-tests' most common
support problem is a silent hang at bootstrap).
"""

from __future__ import annotations

from commbench.core.errors import EXIT_OK
from commbench.specs.measure import MeasureSpec


def run_doctor(nproc: int | None, timeout: float, backends: tuple[str, ...],
               json_out: bool = False) -> int:
    """Print the environment, then the per-rank connectivity table; 0 when every rank arrived.
    ``json_out``: one JSON object (environment and ranks) instead."""
    from rich.table import Table

    from commbench.engine.facts import environment_report
    from commbench.engine.probe import probe_rank
    from commbench.launch import detect
    from commbench.launch.backends import check_backends, default_nproc, resolve_backends
    from commbench.launch.ranks import check_nproc
    from commbench.output.console import make_console

    env = detect()
    check_nproc(env, nproc)
    backends = resolve_backends(backends)
    # As the measuring commands: the launcher's world, else one rank per GPU for NCCL (a
    # 1-GPU host runs 1 rank), else 2.
    world = env.world if env else (nproc or default_nproc(backends))
    console = make_console()
    environment = environment_report(env)
    if (env is None or env.rank == 0) and not json_out:
        table = Table(title="environment", title_justify="left", show_header=False)
        for item, finding in environment:
            table.add_row(item, finding)
        console.print(table)
    check_backends(MeasureSpec(ops=("allreduce",), backends=backends),
                   env.local_world if env else world, external=env is not None)
    if env is None:
        from commbench.engine.failures import explain
        from commbench.launch.local import run_local

        cuda = "nccl" in backends
        reports = run_local(probe_rank, (timeout, backends), nproc=world, timeout=timeout,
                            cuda=cuda, explain=explain)[0]
    else:
        from commbench.core.errors import RunFailed
        from commbench.launch import pin_interfaces

        pin_interfaces(env)
        try:
            reports = probe_rank(env, timeout, backends)
        except RunFailed as failure:
            raise RunFailed(f"rank {env.rank}: {failure}") from None
        if env.rank != 0:
            return EXIT_OK
    if json_out:
        import json

        print(json.dumps({"environment": dict(environment), "ranks": reports,
                          "arrived": len(reports), "world_size": world}))
        return EXIT_OK
    table = Table(title=f"rendezvous of {world} rank(s)", title_justify="left")
    nccl = "nccl_us" in reports[0]
    headers = ["rank", "host", "local rank", "join s", "barrier us", "allreduce us"]
    for header in headers + (["nccl first allreduce us"] if nccl else []):
        table.add_column(header, justify="right")
    for r in reports:
        cells = [str(r["rank"]), r["host"], str(r["local_rank"]), f"{r['join_s']:.2f}",
                 f"{r['barrier_us']:.0f}", f"{r['allreduce_us']:.0f}"]
        table.add_row(*cells, *([f"{r['nccl_us']:.0f}"] if nccl else []))
    console.print(table)
    console.print(f"all {world} rank(s) arrived and agree")
    return EXIT_OK
