"""The CI gate measured. Two parts:

``study`` (issue 41): the gate as a user runs it, judged per run. For the recipe (two runs of
``allreduce --repeat 5 --min-time 0.3``, then ``compare --fail-on-regression``) and for ``ab``
(``ab --pairs 5 --fail-on-regression -- allreduce ... --min-time 0.3``): the A/A false failure
rate per run (the gate exits 1 on nothing) and per row (a row reads ``slower``), each with its
95 % (Wilson) interval, and the power at planted slowdowns of 1.1x, 1.25x and 1.5x
(COMMBENCH_FAULT=slow=F inside the new side's ranks, engine/faults.py). Every trial takes the
shared rank lock (/tmp/commbench-ranks.lock) for itself alone and appends its result to a
JSONL state file, so a study runs in slices (``--minutes``) and resumes where it stopped;
``report`` prints the figures of what the state holds, and only that:

    .venv/bin/python bench/gate.py study --mode recipe ab --runs 30 --minutes 4
    .venv/bin/python bench/gate.py report

A study keeps every trial's run folders (its scratch folder, named in each state line), so a
rule can be judged again on the same launches without running them again:

``rejudge --scratch DIR``: every stored trial judged by this checkout's compare (the recipe)
and paired test (``ab``), the same figures as ``report``; what a changed rule does to runs
already made. A rule changed after seeing these runs is judged on them in-sample: a fresh
study says the rest. ``rejudge --scratch DIR --history K``: the recipe's trials judged as a CI
runner with a history store judges them (``compare --noise-from``), the store holding the
base runs of the K trials made before each (main's last K runs; the first K are left out).

``project --scratch DIR``: how ``ab``'s gate would do at more pairs, projected by drawing
pairs of launches (with replacement) from the stored A/A runs' launch ratios, a planted
slowdown added on the log scale. It assumes pairs are independent, which the runs' slow spells
may break; the figure is a projection for choosing a budget, not a measurement.

``gate()`` (run_all.py's section ``gate``): A/A pairs of back-to-back runs compared row by row,
power on planted slowdowns, and how much of the A/A difference is between launches vs within
one.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

PYTHON = sys.executable
SIZES = "4K,64K,1M"


def measure(scratch: Path, name: str, rounds: int, min_time: float, repeat: int = 1,
            env: dict | None = None) -> tuple[list[dict], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, "-m", "commbench", "allreduce", "--sizes", SIZES, "--nproc", "2", "--rounds",
         str(rounds), "--repeat", str(repeat), "--min-time", str(min_time), "--out",
         str(scratch), "--name", name, "--quiet", "--force"],
        capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    rows = [json.loads(line) for line in (scratch / name / "results.jsonl").read_text()
            .splitlines()]
    return rows, wall


def compare(scratch: Path, base: str, new: str, threshold: str = "5%") -> list[dict]:
    done = subprocess.run([PYTHON, "-m", "commbench", "compare", str(scratch / base),
                           str(scratch / new), "--json", "--threshold", threshold],
                          capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()[:-1]]


def components(runs: list[list[dict]]) -> dict[int, tuple[float, float]]:
    """Per size: (SD between launches, SD within one) of log median time. Within: the
    standard error of a launch's median from its rounds, SD(log round medians) / sqrt(R);
    between: what the spread of launch medians holds beyond that."""
    found = {}
    for size in sorted({r["size_bytes"] for run in runs for r in run}):
        medians, within = [], []
        for run in runs:
            for row in (r for r in run if r["size_bytes"] == size):
                medians.append(math.log(row["lat_us_p50"]))
                rounds = [math.log(v) for v in row.get("round_p50_us") or []]
                if len(rounds) >= 2:
                    within.append(statistics.variance(rounds) / len(rounds))
        total = statistics.variance(medians) if len(medians) > 1 else 0.0
        inside = statistics.mean(within) if within else float("nan")
        found[size] = (math.sqrt(max(0.0, total - inside)), math.sqrt(inside))
    return found


def gate(scratch: Path, pairs: int, rounds: int, min_time: float, repeat: int = 1,
         factors: tuple[float, ...] = (1.25, 1.5), power_pairs: int = 5) -> dict:
    """Every figure of one configuration (rounds, min_time, repeat)."""
    tag = f"r{rounds}-t{min_time}-k{repeat}"
    walls, runs, aa = [], [], []
    for index in range(pairs):
        for side in ("a", "b"):
            rows, wall = measure(scratch, f"{tag}-{index}{side}", rounds, min_time, repeat)
            runs.append(rows)
            walls.append(wall)
        aa += compare(scratch, f"{tag}-{index}a", f"{tag}-{index}b")
    result = {"config": tag, "pairs": pairs, "rows": len(aa)}
    if aa:
        result.update(_aa_figures(aa, runs, walls))
    for factor in factors:
        verdicts = []
        for index in range(power_pairs):
            base, slow = f"{tag}-p{factor}-{index}a", f"{tag}-p{factor}-{index}b"
            order = ((base, None), (slow, factor)) if index % 2 == 0 else (
                (slow, factor), (base, None))
            for name, slowed in order:
                env = {"COMMBENCH_FAULT": f"slow={slowed}:*:allreduce"} if slowed else None
                measure(scratch, name, rounds, min_time, repeat, env)
            verdicts += compare(scratch, base, slow)
        result[f"power_{factor}"] = (sum(r["verdict"] == "slower" for r in verdicts),
                                     len(verdicts),
                                     statistics.median([r["ratio"] for r in verdicts]))
    return result


def _aa_figures(aa: list[dict], runs: list[list[dict]], walls: list[float]) -> dict:
    return {"false_slower": sum(r["verdict"] == "slower" for r in aa),
            "false_faster": sum(r["verdict"] == "faster" for r in aa),
            "noisy": sum(r["verdict"] == "noisy" for r in aa),
            "aa_log_ratio_sd": statistics.pstdev([math.log(r["ratio"]) for r in aa]),
            "ratio_ci_halfwidth_median": statistics.median(
                [(r["ratio_hi"] - r["ratio_lo"]) / 2 for r in aa]),
            "wall_s_median": statistics.median(walls),
            "unstable_rows": sum(bool(r.get("unstable")) for run in runs for r in run),
            "all_rows": sum(len(run) for run in runs),
            "components": {str(k): v for k, v in components(runs).items()}}


# ---- the study: the gate judged per run, as the recipe and ab run it -------------------------
LOCK = "/tmp/commbench-ranks.lock"
STATE = Path("results/bench/gate-study.jsonl")
RECIPE_BUDGET = ("--repeat", "5", "--min-time", "0.3")
AB_PAIRS = 5
AB_BUDGET = ("--min-time", "0.3")
FACTORS = (1.1, 1.25, 1.5)
Z95 = 1.959963984540054


@contextmanager
def ranks_lock():
    """The machine's one-multi-rank-run-at-a-time lock, held for one trial."""
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fault(factor: float) -> str:
    return f"COMMBENCH_FAULT=slow={factor}:*:allreduce"


def _verdicts(stdout: str) -> tuple[list[dict], dict]:
    *rows, summary = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return rows, summary["summary"]


def recipe_trial(scratch: Path, index: int, factor: float, sizes: str) -> dict:
    """Two recipe runs (base, new; new slowed by ``factor`` unless 1), in alternated order,
    then the recipe's compare --fail-on-regression."""
    tag = f"recipe-{factor}-{index}-{time.time_ns()}"
    order = [("base", None), ("new", factor if factor != 1 else None)]
    if index % 2:
        order.reverse()
    started = time.perf_counter()
    for side, slowed in order:
        env = dict([_fault(slowed).split("=", 1)]) if slowed else {}
        done = subprocess.run(
            [PYTHON, "-m", "commbench", "allreduce", "--sizes", sizes, *RECIPE_BUDGET,
             "--out", str(scratch), "--name", f"{tag}-{side}", "--quiet"],
            capture_output=True, text=True, env={**os.environ, **env})
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-2000:])
    gate_run = subprocess.run([PYTHON, "-m", "commbench", "compare", str(scratch / f"{tag}-base"),
                               str(scratch / f"{tag}-new"), "--fail-on-regression", "--json"],
                              capture_output=True, text=True)
    rows, summary = _verdicts(gate_run.stdout)
    return {**_trial("recipe", factor, sizes, gate_run.returncode, rows, summary,
                     time.perf_counter() - started), "folder": str(scratch / tag)}


def ab_trial(scratch: Path, index: int, factor: float, sizes: str,
             pairs: int = AB_PAIRS) -> dict:
    """One ab run of the same command on both sides (side B slowed by ``factor`` unless 1)."""
    slowed = ["--env-b", _fault(factor)] if factor != 1 else []
    started = time.perf_counter()
    name = f"ab-{factor}-{index}-{time.time_ns()}"
    done = subprocess.run(
        [PYTHON, "-m", "commbench", "ab", "--pairs", str(pairs), *slowed,
         "--fail-on-regression", "--json", "--out", str(scratch), "--name", name, "--",
         "allreduce", "--sizes", sizes, "--nproc", "2", *AB_BUDGET],
        capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(done.stderr[-2000:])
    rows, summary = _verdicts(done.stdout)
    return {**_trial("ab", factor, sizes, done.returncode, rows, summary,
                     time.perf_counter() - started, pairs), "folder": str(scratch / name)}


def _trial(mode: str, factor: float, sizes: str, code: int, rows: list[dict], summary: dict,
           wall: float, pairs: int = AB_PAIRS) -> dict:
    return {"mode": mode, "factor": factor, "sizes": sizes, "failed": code == 1,
            "rows": len(rows), "rows_slower": sum(r["verdict"] == "slower" for r in rows),
            "rows_familywise": sum(r.get("familywise") == "slower" for r in rows),
            "rows_noisy": sum(r["verdict"] == "noisy" for r in rows),
            "ratios": [round(r["ratio"], 4) for r in rows], "wall_s": round(wall, 1),
            "budget": _budget(mode, pairs), "when": time.strftime("%H:%M"),
            "load": round(os.getloadavg()[0], 2)}


def _budget(mode: str, pairs: int) -> str:
    return " ".join(RECIPE_BUDGET) if mode == "recipe" else f"--pairs {pairs} {' '.join(AB_BUDGET)}"


def _read_state(state: Path) -> list[dict]:
    if not state.exists():
        return []
    return [json.loads(line) for line in state.read_text().splitlines() if line.strip()]


def study(state: Path, modes: list[str], runs: int, power_runs: int, factors: list[float],
          minutes: float, sizes: str, ab_pairs: int = AB_PAIRS) -> None:
    """Trials until each (mode, factor) has its count, or ``minutes`` have passed; the lock
    is taken per trial, so other users' runs go between them."""
    deadline = time.monotonic() + 60 * minutes
    scratch = Path(tempfile.mkdtemp(prefix="commbench-gate-study-"))
    state.parent.mkdir(parents=True, exist_ok=True)
    trial = {"recipe": recipe_trial, "ab": functools.partial(ab_trial, pairs=ab_pairs)}
    wanted = [(mode, factor, runs if factor == 1 else power_runs)
              for factor in (1.0, *factors) for mode in modes]
    while time.monotonic() < deadline:
        done = _read_state(state)
        todo = [(mode, factor) for mode, factor, count in wanted
                if sum(t["mode"] == mode and t["factor"] == factor and t["sizes"] == sizes
                       and t["budget"] == _budget(mode, ab_pairs) for t in done) < count]
        if not todo:
            break
        # the (mode, factor) with the fewest trials first: a short slice samples them all
        mode, factor = min(todo, key=lambda key: sum(
            t["mode"] == key[0] and t["factor"] == key[1]
            and t["budget"] == _budget(key[0], ab_pairs) for t in done))
        index = sum(t["mode"] == mode and t["factor"] == factor for t in done)
        with ranks_lock():
            try:
                found = trial[mode](scratch, index, factor, sizes)
            except RuntimeError as error:  # a launch that failed (a timeout under load): said,
                print(f"trial {mode} {factor} failed: {error}", file=sys.stderr, flush=True)
                continue  # not counted, and tried again
        with state.open("a") as handle:
            handle.write(json.dumps(found) + "\n")
        print(json.dumps(found), flush=True)


def wilson(hits: int, total: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of a rate."""
    if total == 0:
        return float("nan"), float("nan")
    rate = hits / total
    scale = 1 + Z95 ** 2 / total
    centre = (rate + Z95 ** 2 / (2 * total)) / scale
    half = Z95 * math.sqrt(rate * (1 - rate) / total + Z95 ** 2 / (4 * total ** 2)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def report(state: Path) -> list[dict]:
    """Per mode, budget, sizes and factor: runs failed and rows slower, with intervals."""
    return _figures(_read_state(state))


def _figures(trials: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for found in trials:
        groups.setdefault((found["mode"], found["budget"], found["sizes"], found["factor"]),
                          []).append(found)
    figures = []
    for (mode, budget, sizes, factor), trials in sorted(groups.items()):
        failed = sum(t["failed"] for t in trials)
        rows = sum(t["rows"] for t in trials)
        slower = sum(t["rows_slower"] for t in trials)
        figures.append({
            "mode": mode, "budget": budget, "sizes": sizes, "factor": factor,
            "runs": len(trials), "runs_failed": failed,
            "runs_failed_ci95": [round(v, 3) for v in wilson(failed, len(trials))],
            "rows": rows, "rows_slower": slower,
            "rows_slower_ci95": [round(v, 3) for v in wilson(slower, rows)],
            "rows_familywise": sum(t.get("rows_familywise", 0) for t in trials),
            "rows_noisy": sum(t["rows_noisy"] for t in trials),
            "median_ratio": statistics.median(r for t in trials for r in t["ratios"]),
            "wall_s_median": statistics.median(t["wall_s"] for t in trials),
            "load_range": [min(t["load"] for t in trials), max(t["load"] for t in trials)]})
    return figures


def _stored_trials(scratch: Path) -> list[tuple[str, float, Path]]:
    """(mode, factor, folder) of every trial a study left in ``scratch``: a recipe trial is
    its ``-base`` folder (beside its ``-new``), an ab trial its folder with A/ and B/."""
    found = []
    for folder in sorted(scratch.iterdir()):
        mode, factor = folder.name.split("-")[:2]
        recipe = mode == "recipe" and folder.name.endswith("-base")
        if recipe or (mode == "ab" and (folder / "A" / "results.jsonl").exists()):
            found.append((mode, float(factor), folder))
    return found


def _made_at(folder: Path) -> int:
    """A stored trial's start (the time_ns its folder name ends with, before ``-base``)."""
    return int(folder.name.removesuffix("-base").rsplit("-", 1)[1])


def _history_of(earlier: list[Path], store: Path) -> None:
    """A history store holding ``earlier`` recipe trials' base runs: what a CI runner's store
    holds of main after as many runs."""
    store.unlink(missing_ok=True)
    subprocess.run([PYTHON, "-m", "commbench", "history", "add", *map(str, earlier),
                    "--db", f"sqlite:///{store}"], capture_output=True, text=True, check=True)


def rejudge(scratch: Path, history: int = 0) -> list[dict]:
    """Every stored trial judged again by this checkout's rules, as report() counts them.

    ``history`` K > 0: each recipe trial is judged as a CI runner with a history store judges
    it (``compare --noise-from``), the store holding the base runs of the K recipe trials made
    just before it (main's last K runs); the first K trials, which have no such past, are left
    out and counted in ``skipped``. ``ab`` trials are not judged then."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from commbench.compare.familywise import judge
    from commbench.compare.paired import paired_rows

    trials = []
    stored = _stored_trials(scratch)
    bases = sorted((folder for mode, _, folder in stored if mode == "recipe"), key=_made_at)
    skipped = 0
    for mode, factor, folder in stored:
        if mode == "recipe":
            new = folder.with_name(folder.name[: -len("-base")] + "-new")
            noise: list[str] = []
            if history:
                earlier = [b for b in bases if _made_at(b) < _made_at(folder)][-history:]
                if len(earlier) < history:
                    skipped += 1
                    continue
                store = scratch.parent / f"{scratch.name}-history.db"
                _history_of(earlier, store)
                noise = ["--noise-from", f"sqlite:///{store}"]
            done = subprocess.run([PYTHON, "-m", "commbench", "compare", str(folder), str(new),
                                   "--fail-on-regression", "--json", *noise],
                                  capture_output=True, text=True)
            rows, summary = _verdicts(done.stdout)
            trials.append(_trial(mode, factor, SIZES, done.returncode, rows, summary, 0.0))
            continue
        if history:
            continue
        sides = [[json.loads(line) for line in (folder / side / "results.jsonl").read_text()
                  .splitlines()] for side in ("A", "B")]
        frame, _, _ = paired_rows(*sides, threshold=0.05)
        gate = judge(frame)
        trials.append(_trial(mode, factor, SIZES, 1 if gate.slower else 0,
                             frame.to_dict("records"), {}, 0.0))
    for found in trials:
        found["budget"] += (f" (re-judged, --noise-from the {history} runs before)" if history
                            else " (re-judged)")
    return [{k: v for k, v in figure.items() if k not in ("wall_s_median", "load_range")}
            | ({"skipped_without_history": skipped} if history else {})
            for figure in _figures(trials)]


def project(scratch: Path, pairs: list[int], factors: list[float], draws: int = 2000,
            seed: int = 1) -> list[dict]:
    """ab's gate at ``pairs`` pairs, from the stored A/A launch ratios (see the docstring)."""
    import random

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from commbench.compare.familywise import DEFAULT_ALPHA, holm
    from commbench.core.student import t_two_sided_p

    def _paired_p(logs: list[float]) -> tuple[float, float]:
        """(mean, two-sided p) of ab's paired t (core.student.paired_t without the
        interval, whose quantile search is what would make 50,000 draws slow)."""
        mean = sum(logs) / len(logs)
        sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1))
        if sd == 0:
            return mean, 1.0 if mean == 0 else 0.0
        return mean, t_two_sided_p(mean / (sd / math.sqrt(len(logs))), len(logs) - 1)

    pool = []  # per stored pair of launches: its log ratio B/A at every size
    for mode, factor, folder in _stored_trials(scratch):
        if mode != "ab" or factor != 1.0:
            continue
        medians = [{}, {}]
        for side, found in zip(("A", "B"), medians, strict=True):
            for line in (folder / side / "results.jsonl").read_text().splitlines():
                row = json.loads(line)
                found.setdefault(int(row.get("launch") or 0), {})[row["size_bytes"]] = (
                    row["lat_us_p50"])
        a, b = medians
        pool += [[math.log(b[i][size] / a[i][size]) for size in sorted(a[i])]
                 for i in sorted(set(a) & set(b))]
    rng = random.Random(seed)
    figures = []
    for count in pairs:
        for factor in factors:
            failed = 0
            for _ in range(draws):
                drawn = [rng.choice(pool) for _ in range(count)]
                tests = [_paired_p([pair[j] + math.log(factor) for pair in drawn])
                         for j in range(len(drawn[0]))]
                adjusted = holm([p for _, p in tests])
                failed += any(p <= DEFAULT_ALPHA and math.exp(centre) > 1.05
                              for (centre, _), p in zip(tests, adjusted, strict=True))
            figures.append({"mode": "ab (projected)", "pairs": count, "factor": factor,
                            "stored_pairs": len(pool), "draws": draws,
                            "runs_failed_share": round(failed / draws, 3)})
    return figures


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("rejudge", "project"):
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("part", choices=("rejudge", "project"))
        parser.add_argument("--scratch", type=Path, required=True,
                            help="a study's scratch folder (/tmp/commbench-gate-study-*)")
        parser.add_argument("--pairs", type=int, nargs="+", default=[5, 10, 20, 30, 40, 50])
        parser.add_argument("--factors", type=float, nargs="+", default=[1.0, *FACTORS])
        parser.add_argument("--history", type=int, default=0, metavar="K",
                            help="rejudge: the recipe judged with --noise-from a store of "
                            "the K recipe runs made before each")
        args = parser.parse_args(argv)
        found = (rejudge(args.scratch, args.history) if args.part == "rejudge"
                 else project(args.scratch, args.pairs, args.factors))
        for figure in found:
            print(json.dumps(figure))
        return 0
    if argv and argv[0] in ("study", "report"):
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("part", choices=("study", "report"))
        parser.add_argument("--state", type=Path, default=STATE)
        parser.add_argument("--mode", nargs="+", choices=("recipe", "ab"),
                            default=["recipe", "ab"])
        parser.add_argument("--runs", type=int, default=30, help="A/A runs per mode")
        parser.add_argument("--power-runs", type=int, default=30)
        parser.add_argument("--factors", type=float, nargs="*", default=list(FACTORS))
        parser.add_argument("--minutes", type=float, default=4.0, help="this slice's length")
        parser.add_argument("--sizes", default=SIZES)
        parser.add_argument("--ab-pairs", type=int, default=AB_PAIRS,
                            help="ab's --pairs (a study counts each budget apart)")
        args = parser.parse_args(argv)
        if args.part == "study":
            study(args.state, args.mode, args.runs, args.power_runs, args.factors,
                  args.minutes, args.sizes, args.ab_pairs)
        for figure in report(args.state):
            print(json.dumps(figure))
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--power-pairs", type=int, default=5)
    parser.add_argument("--rounds", type=int, nargs="+", default=[5])
    parser.add_argument("--min-time", type=float, default=1.5)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--factors", type=float, nargs="*", default=[1.25, 1.5])
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="commbench-gate-"))
    for rounds in args.rounds:
        found = gate(scratch, args.pairs, rounds, args.min_time, args.repeat,
                     tuple(args.factors), args.power_pairs)
        print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
