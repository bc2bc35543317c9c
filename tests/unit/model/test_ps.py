"""``commbench model`` on ps runs: the PS fit in the issue's terms beside allreduce over the
same workers, and the crossover size, on synthetic rows whose answer is known by construction
(no torch, no ranks)."""

import json

import pytest

from commbench.commands.model import run_model
from commbench.model.fit import fit_curve, fit_run
from commbench.model.ps import crossovers, pair_with_baselines

SIZES = [1 << k for k in range(12, 23)]  # 4K .. 4M
WORKERS, SERVERS = 2, 1  # max(n, W·n/S) = 2n


def ps_time(size, alpha=50.0, beta=1.0):
    """2α + max(n, W·n/S)/β, µs (β GB/s = 1e3 B/µs)."""
    return 2 * alpha + max(size, WORKERS * size / SERVERS) / (beta * 1e3)


def line(alpha, beta):
    return lambda size: alpha + size / (beta * 1e3)


def rows(ps_us, allreduce_us, pattern="sync"):
    """A ps launch's combined rows: ps (W + S ranks, busbw = algbw·max(1, W/S)) beside
    allreduce over the W workers, every median exact."""
    out = []
    factor = max(1.0, WORKERS / SERVERS)
    for size in SIZES:
        for op, time_us, group in (("ps", ps_us(size), WORKERS + SERVERS),
                                   ("allreduce", allreduce_us(size), WORKERS)):
            algbw = size / (time_us * 1e-6) / 1e9
            row = {"op": op, "backend": "gloo", "dtype": "float32", "size_bytes": size,
                   "lat_us_p50": time_us, "algbw_gbps": algbw, "group_size": group,
                   "world_size": WORKERS + SERVERS, "workers": WORKERS, "servers": SERVERS,
                   "pattern": pattern if op == "ps" else "", "reduce_op": "sum",
                   "inplace": op == "allreduce", "group": None}
            if op == "ps":
                row.update(busbw_gbps=algbw * factor, beside="allreduce")
            else:
                row.update(busbw_gbps=algbw * 2 * (WORKERS - 1) / WORKERS)
            out.append(row)
    return out


def test_the_crossover_of_two_known_lines_is_found_exactly():
    # ps: 100 + 0.002 n µs; allreduce: 400 + 0.0005 n µs: equal at n = 300 / 0.0015.
    data = rows(ps_time, line(400.0, 2.0))
    (pair,) = pair_with_baselines(data, fit_run(data))
    (crossing,) = pair.crossovers
    assert crossing.size_bytes == pytest.approx(200_000, rel=1e-6)
    assert (crossing.faster_below, crossing.faster_above) == ("ps/sync", "allreduce")
    assert crossing.measured and crossing.usable and not crossing.at_cut
    # The PS fit in the terms: α per message, β of the busiest link (2n here).
    (segment,) = pair.ps_segments()
    assert segment.alpha_us == pytest.approx(50.0, rel=1e-6)
    assert segment.beta_gbps == pytest.approx(1.0, rel=1e-6)
    assert pair.load_factor == pytest.approx(2.0)
    assert (pair.workers, pair.servers) == (WORKERS, SERVERS)
    # The measured medians change side between 128K and 256K, around 195K.
    (flip,) = pair.flips
    assert (flip.size_lo, flip.size_hi) == (128 << 10, 256 << 10)
    assert flip.ratio_lo < 1 < flip.ratio_hi


def test_allreduce_faster_everywhere_has_no_crossover():
    data = rows(ps_time, line(20.0, 4.0))  # below ps at every size, and beyond the ends
    (pair,) = pair_with_baselines(data, fit_run(data))
    assert pair.crossovers == ()
    assert pair.flips == ()
    assert pair.ps.time_us(pair.search_lo) > pair.baseline.time_us(pair.search_lo)


def test_a_crossover_just_beyond_the_measured_sizes_is_named_as_such():
    # allreduce's α chosen so that the lines meet at 6M, 1.5x the largest size measured
    # (within NEAR = 2x of it).
    meet = 6 << 20
    alpha = 100 + meet * (0.002 - 0.0005)
    data = rows(ps_time, line(alpha, 2.0))
    (pair,) = pair_with_baselines(data, fit_run(data))
    (crossing,) = pair.crossovers
    assert crossing.size_bytes == pytest.approx(meet, rel=1e-6)
    assert not crossing.measured
    assert pair.flips == ()


def test_a_jump_between_segments_is_a_crossover_at_the_cut():
    sizes = [1 << k for k in range(10, 20)]
    # first: 10 µs flat below 32K, then 1000 µs + n/1 GB/s; second: 300 + n/10 GB/s.
    first = fit_curve(sizes, [10.0 if s < 32 << 10 else 1000 + s / 1e3 for s in sizes])
    second = fit_curve(sizes, [300 + s / 1e4 for s in sizes])
    found = crossovers(first, second, sizes[0] / 2, sizes[-1] * 2, ("a", "b"))
    assert len(found) == 1 and found[0].at_cut
    assert 16 << 10 < found[0].size_bytes < 32 << 10
    assert (found[0].faster_below, found[0].faster_above) == ("a", "b")


def test_a_ps_run_without_its_baseline_is_fitted_alone():
    data = [r for r in rows(ps_time, line(400.0, 2.0)) if r["op"] == "ps"]
    assert pair_with_baselines(data, fit_run(data)) == []


def write_run(path, data):
    path.mkdir()
    (path / "run.json").write_text(json.dumps({"format_version": "1.2", "name": path.name,
                                               "status": "complete", "world_size": 3}))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def test_model_prints_the_crossover_and_writes_it_to_model_json(tmp_path, capsys):
    run = write_run(tmp_path / "ps-run", rows(ps_time, line(400.0, 2.0)))
    assert run_model([str(run)], json_out=False) == 0
    out = capsys.readouterr().out
    assert "ps/sync beside allreduce over the same 2 workers" in out
    assert "crossover at 195K (200000 B): ps/sync faster below, allreduce faster above" in out
    document = json.loads((run / "model.json").read_text())
    (beside,) = document["beside"]
    assert beside["crossovers"][0]["size_bytes"] == pytest.approx(200_000, rel=1e-6)
    # model.csv's busbw equivalent of the ps curve uses max(1, W/S), not allreduce's factor.
    ps_segment = next(s for s in document["segments"] if s["op"] == "ps")
    assert ps_segment["busbw_equiv_gbps"] == pytest.approx(1.0, rel=1e-6)


def test_model_says_there_is_no_crossover(tmp_path, capsys):
    run = write_run(tmp_path / "ps-run", rows(ps_time, line(20.0, 4.0), pattern="async"))
    assert run_model([str(run)], json_out=False) == 0
    out = capsys.readouterr().out
    assert "no crossover between 2K and 8M: allreduce is faster than ps/async" in out


def test_a_verdict_read_off_a_fit_that_explains_nothing_says_so(tmp_path, capsys):
    # ps times that jump between 4 ms and 0.2 ms with no size trend: no line fits them.
    scatter = {size: (4000.0 if index % 3 else 200.0) for index, size in enumerate(SIZES)}
    run = write_run(tmp_path / "ps-run", rows(scatter.get, line(20.0, 400.0)))
    assert run_model([str(run)], json_out=False) == 0
    out = capsys.readouterr().out
    assert ("allreduce is faster than ps/sync at every size the fits cover (but ps/sync has "
            "a segment with no usable fit: trust the measured ratios below)") in out


def test_no_crossover_is_claimed_from_a_fit_that_explains_nothing(tmp_path, capsys):
    """The allreduce times scatter (no usable fit) across a ps line: model used to print
    'crossover at 81.1K ... from a segment with no usable fit', a size read off a line that
    explains nothing. It claims no crossover and points at the measured ratios."""
    scatter = {size: (4000.0 if index % 3 else 200.0) for index, size in enumerate(SIZES)}
    run = write_run(tmp_path / "ps-run", rows(line(100.0, 1.0), scatter.get))
    assert run_model([str(run)], json_out=False) == 0
    out = capsys.readouterr().out
    assert "crossover at" not in out
    assert "no crossover claimed" in out and "no usable fit" in out
    assert "ratio of measured medians" in out
