"""make bench, section history: how `commbench history check` behaves on series like ours.

1. The spread of real nightly-style runs here: K runs of the CI recipe's command
   (`commbench allreduce --sizes 4K,64K,1M --nproc 2 --repeat 5 --min-time 0.3`, gloo), made
   one after another (or read from --runs-dir); the spread is that of each size's run medians
   in log units (its residuals around the size's median, pooled over the sizes).
2. Synthetic series at that spread (the real residuals resampled, so a bimodal or heavy-tailed
   runner stays so) and at 3 % (Gaussian in log units):
   - false change points per 100 flat series of 30 runs (target <= 1);
   - a 1.25x step in the last 3 runs of 30, found at its run (+-1) (target >= 90 %), and the
     same step in the middle of the series;
   - a 1.1x step, the same way (reported);
   - a slow drift: 20 flat runs, then 2 % more per run for 10 runs (reported: a regression
     found inside the drift);
3. `check`'s time on a real SQLite store of 1,000 series x 100 runs, in process and as the CLI.

Usage: python bench/history.py [--runs-dir DIR | --make K] [--series N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from commbench.history.changepoints import find_change_points, verdict  # noqa: E402

RECIPE = ["allreduce", "--sizes", "4K,64K,1M", "--nproc", "2", "--repeat", "5", "--min-time",
          "0.3", "--quiet"]
THRESHOLD = 0.05
RUNS = 30


def make_runs(count: int, out: Path) -> Path:
    """K real runs of the recipe, one after another, as K nights would make them."""
    for number in range(count):
        done = subprocess.run([sys.executable, "-m", "commbench", *RECIPE, "--out", str(out),
                               "--name", f"night-{number:02d}"], capture_output=True, text=True,
                              cwd=ROOT)
        print(f"  real run {number + 1}/{count}: exit {done.returncode}", file=sys.stderr)
    return out


def real_residuals(folder: Path) -> tuple[np.ndarray, dict]:
    """Log residuals of each size's run medians around that size's median, pooled."""
    from commbench.history.ingest import read_run_folder

    by_size: dict[int, list[float]] = {}
    runs = 0
    for run_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        try:
            run = read_run_folder(run_dir)
        except Exception as error:  # a run that failed leaves no rows: not a night
            print(f"  skipped {run_dir.name}: {error}", file=sys.stderr)
            continue
        if not run.labels.usable:
            continue
        runs += 1
        for point in run.points:
            by_size.setdefault(point.size_bytes, []).append(math.log(point.lat_us))
    residuals = np.concatenate([np.asarray(v) - np.median(v) for v in by_size.values()])
    sds = {size: float(np.std(v, ddof=1)) for size, v in sorted(by_size.items())}
    return residuals, {"runs": runs, "sd_log_by_size": sds,
                       "sd_log_pooled": float(np.std(residuals, ddof=1))}


def _series(rng: np.random.Generator, noise, steps: np.ndarray) -> np.ndarray:
    return 100.0 * np.exp(noise(rng, len(steps))) * steps


def _found_at(values: np.ndarray, first: int, tolerance: int = 1) -> bool:
    return any(verdict(c, THRESHOLD) == "regression" and abs(c.index - first) <= tolerance
               for c in find_change_points(values))


def _drift_found(values: np.ndarray, start: int) -> bool:
    return any(verdict(c, THRESHOLD) == "regression" and c.index >= start
               for c in find_change_points(values))


def scenarios(noise, count: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    flat = np.ones(RUNS)
    false = sum(sum(verdict(c, THRESHOLD) != "" for c in find_change_points(
        _series(rng, noise, flat))) for _ in range(count * 10))

    def step(factor: float, first: int) -> np.ndarray:
        return np.where(np.arange(RUNS) >= first, factor, 1.0)

    drift = np.r_[np.ones(20), 1.02 ** np.arange(1, 11)]
    result = {"false_per_100_flat": 100.0 * false / (count * 10)}
    for name, steps, first in (("step_1.25_last3", step(1.25, 27), 27),
                               ("step_1.25_mid", step(1.25, 15), 15),
                               ("step_1.1_last3", step(1.10, 27), 27),
                               ("step_1.1_mid", step(1.10, 15), 15)):
        found = sum(_found_at(_series(rng, noise, steps), first) for _ in range(count))
        result[name] = 100.0 * found / count
    result["drift_2pct_x10"] = 100.0 * sum(
        _drift_found(_series(rng, noise, drift), 20) for _ in range(count)) / count
    return result


def check_time(series: int = 1000, runs: int = 100) -> dict:
    """check on a real SQLite store of ``series`` x ``runs``: in process, and the CLI."""
    from commbench.commands.history import CheckSpec, run_history_check
    from commbench.history.ingest import IngestedRun, Point, RunLabels
    from commbench.history.store import Store

    rng = np.random.default_rng(5)
    scratch = Path(tempfile.mkdtemp(prefix="commbench-history-bench-"))
    url = f"sqlite:///{scratch / 'history.db'}"
    started = time.perf_counter()
    with Store(url, create=True) as store:
        for run in range(runs):
            labels = RunLabels(run_id=f"night-{run:03d}", status="complete", kind="sweep",
                               start_time=f"2026-{1 + run // 28:02d}-{1 + run % 28:02d}"
                                          "T02:00:00+00:00", cluster="bench", world_size=8,
                               backend="nccl")
            values = 100.0 * np.exp(rng.normal(0, 0.03, series))
            points = tuple(Point(op=f"op{s // 25}", variant="", size_bytes=8 << (s % 25),
                                 backend="nccl", dtype="float32", world_size=8, dim="",
                                 lat_us=float(values[s])) for s in range(series))
            store.add(IngestedRun(labels, points))
    filled = time.perf_counter() - started
    import contextlib
    import io

    captured = io.StringIO()
    started, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(captured):
        run_history_check(CheckSpec(db=url, json_out=True))
    in_process, in_process_cpu = time.perf_counter() - started, time.process_time() - cpu
    found = json.loads(captured.getvalue())["change_points"]
    probe = ("import sys; from commbench.cli import app, main; from commbench.cli import history;"
             "any(g.name == 'history' for g in app.registered_groups) or history.register(app);"
             "main(sys.argv[1:])")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", probe, "history", "check", "--db", url, "--json"],
                   capture_output=True, cwd=ROOT)
    cli = time.perf_counter() - started
    return {"series": series, "runs": runs, "fill_s": filled, "check_in_process_s": in_process,
            "check_in_process_cpu_s": in_process_cpu, "check_cli_s": cli,
            "false_change_points": len(found)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, help="Real nightly-style runs already made.")
    parser.add_argument("--make", type=int, default=12, help="Real runs to make (default 12).")
    parser.add_argument("--series", type=int, default=200,
                        help="Synthetic series per scenario (flat: 10x as many).")
    parser.add_argument("--json", type=Path, help="Write the figures here too.")
    args = parser.parse_args()

    folder = args.runs_dir or make_runs(args.make, Path(tempfile.mkdtemp(prefix="nights-")))
    residuals, spread = real_residuals(folder)
    print(f"real runs: {spread['runs']} in {folder}; SD of log run medians by size "
          + ", ".join(f"{s}: {sd:.3f}" for s, sd in spread["sd_log_by_size"].items())
          + f"; pooled {spread['sd_log_pooled']:.3f}")

    def real_noise(rng, n):
        return rng.choice(residuals, size=n, replace=True)

    def gaussian_3pct(rng, n):
        return rng.normal(0.0, 0.03, n)

    figures = {"real_spread": spread}
    started = time.perf_counter()
    figures["real"] = scenarios(real_noise, args.series, 1)
    figures["gauss_3pct"] = scenarios(gaussian_3pct, args.series, 2)
    figures["scenario_s"] = time.perf_counter() - started
    figures["check_time"] = check_time()

    print("\n| noise | false / 100 flat series (30 runs) | 1.25x, last 3 runs | 1.25x, mid "
          "| 1.1x, last 3 | 1.1x, mid | drift 2 %/run x 10 |\n|---|---|---|---|---|---|---|")
    for name, label in (("real", f"real runs here (SD {spread['sd_log_pooled']:.3f})"),
                        ("gauss_3pct", "3 % (Gaussian)")):
        r = figures[name]
        print(f"| {label} | {r['false_per_100_flat']:.2f} | {r['step_1.25_last3']:.0f} % | "
              f"{r['step_1.25_mid']:.0f} % | {r['step_1.1_last3']:.0f} % | "
              f"{r['step_1.1_mid']:.0f} % | {r['drift_2pct_x10']:.0f} % |")
    timing = figures["check_time"]
    print(f"\ncheck on {timing['series']} flat series x {timing['runs']} runs at 3 % (SQLite): "
          f"{timing['check_in_process_s']:.1f} s in process ({timing['check_in_process_cpu_s']:.1f}"
          f" s CPU), {timing['check_cli_s']:.1f} s as the CLI (store filled in "
          f"{timing['fill_s']:.1f} s); {timing['false_change_points']} change points found")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
