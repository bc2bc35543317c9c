"""Synthetic locate fleets for the tests of tests/unit/locate/ (and the locate views of
compare/ and report): pair measurements with planted slow entities, links and uplinks, the
whole decision offline as the ranks run it, and run folders as rank 0 leaves them, finished by
the command. No process, no torch."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np

from commbench.locate import retests
from commbench.locate import schedule as rounds_of
from commbench.locate.attribution import PairResult
from commbench.specs.locate import LocateSpec

LINK = (1, 3)  # the slow link of the small-fleet cases (6 ranks)
LEAVES = ("a",) * 4 + ("b",) * 4 + ("c",) * 4  # 12 nodes, three leaves of four
BEHIND_B = (4, 5, 6, 7)


def fleet(n, slow=None, links=None, congested=None, noise=0.03, seed=0, rounds=None,
          confirm_slow=None):
    """Pair measurements of a fleet: a pair runs at the speed of its slower end, times a bad
    link's factor, times a congested round's factor, with lognormal noise."""
    rng = np.random.default_rng(seed)
    slow = slow or {}
    links = links or {}
    congested = congested or {}
    out = []
    for r in rounds or rounds_of.circle_rounds(n):
        for a, b in r.pairs:
            factor = min(slow.get(a, 1.0), slow.get(b, 1.0)) * links.get((a, b), 1.0)
            factor *= congested.get(r.index, 1.0) if r.phase == "main" else 1.0
            busbw = 10.0 * factor * rng.lognormal(0, noise)
            lat = 50.0 / factor * rng.lognormal(0, noise)
            out.append(PairResult(r.index, a, b, busbw, lat, lat * 1.5, "ok",
                                  r.phase_of(a, b)))
    return out


def run(n, slow=None, links=None, congested=None, noise=0.03, seed=0, confirm=3,
        min_effect=None, later=None):
    """The whole decision on a synthetic fleet, as the ranks run it: the matrix, batches of
    retests until the evidence settles (fresh noise each batch), verdicts. ``later``: the
    slow entities from the first retest on (default: as in the matrix)."""
    return offline(n, slow, links, congested, noise, seed, confirm, min_effect, later)[1].suspects


def offline(n, slow=None, links=None, congested=None, noise=0.03, seed=0, confirm=3,
            min_effect=None, later=None):
    batches = iter(range(1000))

    def measure(rounds):
        batch = next(batches)
        now = slow if batch == 0 or later is None else later
        return fleet(n, now, links, congested if batch == 0 else None, noise,
                     seed + 101 * batch, rounds=rounds)

    names = [f"rank {e}" for e in range(n)]
    # the command's procedure and defaults: the round robin twice up to 16 entities, the
    # line drawn from the noise (``min_effect`` None), --follow-ups batches at most
    return retests.locate_offline(n, measure, "gpu", spec(confirm, min_effect), names)


def spec(confirm=3, min_effect=None, **more):
    """The command's LocateSpec (its defaults), ``min_effect`` None: drawn from the noise."""
    return LocateSpec(confirm=confirm, min_effect=min_effect, **more)


def measured(n, slow=None, seed=0, main=None):
    """(main pairs, retests) of a synthetic fleet as the command runs it (its main rounds
    unless ``main`` is given, its batches of retests)."""
    main = (fleet(n, slow=slow, seed=seed, rounds=retests.main_rounds(n, spec()))
            if main is None else main)
    pairs = list(main)
    for batch in range(retests.batches(n, spec().follow_ups)):
        more = retests.next_batch(n, pairs, "gpu", spec())
        if not more:
            break
        pairs += fleet(n, slow=slow, seed=seed + 5 + batch, rounds=more)
    return main, pairs[len(main):]


def bad(suspects):
    return sorted((s.kind, s.entities) for s in suspects if s.verdict.startswith("bad"))


def decide_links(n, matrix_links, retest_links, noise=0.05, seed=0, min_effect=None):
    """The decision as the ranks run it, the matrix measured with ``matrix_links`` slow and
    every retest batch with ``retest_links`` (a pair's one matrix reading is noisy)."""
    batches = iter(range(1000))

    def measure(rounds):
        batch = next(batches)
        links = matrix_links if batch == 0 else retest_links
        return fleet(n, links=links, noise=noise, seed=seed + 101 * batch, rounds=rounds)

    names = [f"rank {e}" for e in range(n)]
    return retests.locate_offline(n, measure, "gpu", spec(min_effect=min_effect), names)


def uplink(leaves, leaf, factor):
    """Every pair across ``leaf``'s uplink slowed by ``factor`` (both orders: reference
    pairs of a retest round are not sorted)."""
    n = len(leaves)
    return {(x, y): 1 / factor for x in range(n) for y in range(n)
            if x != y and (leaves[x] == leaf) != (leaves[y] == leaf)}


def decide_leaves(leaves=LEAVES, slow=None, links=None, noise=0.05, seed=0, min_effect=None,
                  topology=True):
    """Matrix, retests (fresh noise each batch) and verdicts at node level, as the ranks run
    them (``topology=False``: the same fleet, its leaves not told)."""
    n = len(leaves)
    batches = iter(range(1000))

    def measure(rounds):
        return fleet(n, slow, links, None, noise, seed + 101 * next(batches), rounds=rounds)

    names = [f"node{e:02d}" for e in range(n)]
    return retests.locate_offline(n, measure, "node", LocateSpec(min_effect=min_effect), names,
                                  leaves if topology else ())


# ---- run folders ------------------------------------------------------------------------------


def write_run(path, found, pairs, world_size, nnodes=1):
    """A locate folder as rank 0 leaves it: run.json with the entities, pairs.jsonl."""
    path.mkdir()
    (path / "run.json").write_text(json.dumps({"entities": [asdict(e) for e in found],
                                               "world_size": world_size, "nnodes": nnodes}))
    with open(path / "pairs.jsonl", "w") as handle:
        for p in pairs:
            handle.write(json.dumps({"round": p.round, "phase": p.phase, "a": p.a, "b": p.b,
                                     "ranks": [[p.a, p.b]], "size_large": 262144,
                                     "size_small": 8, "busbw_gbps": p.busbw,
                                     "lat_us_p50": p.lat, "lat_us_p99": p.lat_p99,
                                     "wrong": 0, "status": p.status}) + "\n")


def locate_folder(path, slow=None, confirm=3, n=6):
    """A locate run folder as rank 0 leaves it (run.json with the entities, pairs.jsonl), from
    a synthetic fleet, then finished by the command as after a real run."""
    from commbench.commands.locate import LocateOutput, finish
    from commbench.locate import fleet as levels

    found = levels.entities("gpu", [{"host": "h", "node": ""}] * n)
    main, again = measured(n, slow)
    write_run(path, found, main + again, n)
    return finish(path, LocateSpec(small=8, large=262144), LocateOutput(), "", "gloo")


def run_folder(path, n=6, slow=None, main=None, host=lambda e: "h", error="", seed=0):
    """A locate folder as rank 0 leaves it, finished by the command (as after a real run).
    ``main``: the main pairs (default: the full circle over a synthetic fleet)."""
    from commbench.commands.locate import LocateOutput, finish
    from commbench.locate import fleet as levels

    found = levels.entities("gpu", [{"host": host(e), "node": ""} for e in range(n)])
    # gpu entities take their host from the rank; keep the one the test asked for
    main, again = measured(n, slow, seed, main) if main != [] else ([], [])
    write_run(path, found, main + again, n)
    return finish(path, LocateSpec(small=8, large=262144), LocateOutput(), error, "gloo")


def finished(path, n, slow, noise, seed, spec, capsys):
    """A folder from the command's own procedure (locate.retests.locate_offline) on a
    synthetic fleet, finished by the command (``finish``) with ``spec``, then again with
    --json: (console, run.json, summary.md, the --json object)."""
    from commbench.commands.locate import LocateOutput, finish
    from commbench.locate import fleet as levels

    batches = iter(range(1000))
    pairs, _ = retests.locate_offline(
        n, lambda rounds: fleet(n, slow, noise=noise, seed=seed + 101 * next(batches),
                                rounds=rounds),
        "gpu", spec)
    found = levels.entities("gpu", [{"host": "h", "node": ""}] * n)
    write_run(path, found, pairs, n)
    code = finish(path, spec, LocateOutput(), "", "gloo")["code"]
    out = capsys.readouterr().out
    finish(path, spec, LocateOutput(json_out=True), "", "gloo")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return (code, out, json.loads((path / "run.json").read_text()),
            (path / "summary.md").read_text(), summary)
