"""locate's words (output.locate): the fleet named so that it fits the run; "no suspect" quotes
the bounds the attribution used and is never said of transients nor beyond the pairs a partial
run measured; the live bar counts rounds and pairs on a terminal, and off one is no bar."""

from __future__ import annotations

from commbench.locate import attribution as locate
from commbench.output.locate import console_lines, summary_markdown

HEAD = {"entities": 4, "level": "gpu", "pairs": 12, "rounds": 6, "confirm_rounds": 0,
        "large": "256K", "small": "8", "min_effect": 0.3, "z_limit": 3.5, "measured_pairs": 12,
        "status": "complete"}


def test_a_cpu_runs_gpu_level_entities_are_its_ranks():
    """A gloo run on a CPU-only machine said "4 gpu entities"."""
    assert console_lines([], [], {**HEAD, "backend": "gloo"})[0].startswith(
        "# locate: 4 ranks, 12 pairs in 6 rounds")
    assert console_lines([], [], {**HEAD, "backend": "nccl"})[0].startswith(
        "# locate: 4 gpu entities, 12 pairs")
    assert console_lines([], [], {**HEAD, "level": "node", "entities": 1,
                                  "backend": "gloo"})[0].startswith("# locate: 1 node entity,")


def test_summary_names_the_ranks_once():
    meta = {"nnodes": 1, "world_size": 4, "status": "complete"}
    page = summary_markdown([], [], {**HEAD, "backend": "gloo"}, [], meta)
    assert "4 ranks on 1 node(s) (gloo), 12 pairs" in page
    page = summary_markdown([], [], {**HEAD, "backend": "nccl"}, [], meta)
    assert "4 gpu entities on 1 node(s) (4 ranks, nccl), 12 pairs" in page


# ---- no suspect, transients, a partial run: the headline's words ------------------------------


def head(**extra):
    return {"entities": 6, "level": "gpu", "pairs": 15, "rounds": 5, "confirm_rounds": 1,
            "large": "256K", "small": "8", "min_effect": 0.1, "z_limit": locate.Z_LIMIT,
            "measured_pairs": 15, "status": "complete", **extra}


def test_no_suspect_quotes_the_bounds_the_attribution_used(monkeypatch):
    from commbench.output.locate import console_lines

    lines = console_lines([], [], head(min_effect=0.2, z_limit=4.25))
    assert lines[1] == ("# no suspect: no entity or link at least 20% slower and 4.25 z below "
                        "the fleet on its pooled evidence")
    lines = console_lines([], [], head(min_effect="15% (busbw) / 25% (latency)"))
    assert "at least 15% (busbw) / 25% (latency) slower" in lines[1]


def test_transients_are_not_no_suspect():
    from commbench.output.locate import console_lines

    transient = {"evidence": "rank 4: 0.50x the fleet median busbw"}
    lines = console_lines([], [transient], head())
    assert lines[1] == ("# no confirmed suspect; 1 transient (slow in the matrix, did not "
                        "reproduce on retest)")
    assert not any(line.startswith("# no suspect") for line in lines)


def test_a_partial_run_speaks_only_for_the_pairs_it_measured():
    from commbench.output.locate import console_lines

    lines = console_lines([], [], head(status="partial", measured_pairs=9))
    assert lines[1].startswith("# no suspect among the 9 pairs measured before the run stopped")


# ---- the live bar -----------------------------------------------------------------------------


class _Files:
    def __init__(self):
        self.calls = []

    def begin(self, meta, *args):
        self.calls.append("begin")

    def planned(self, rounds, pairs):
        self.calls.append(("planned", rounds, pairs))

    def pair(self, record):
        self.calls.append(("pair", record["round"]))

    def close(self):
        self.calls.append("close")


def test_the_bar_counts_rounds_and_pairs_on_a_terminal():
    import io

    from rich.console import Console

    from commbench.output.locate import RoundsBar

    screen = io.StringIO()
    files = _Files()
    bar = RoundsBar(files, True, Console(file=screen, force_terminal=True, width=120))
    bar.begin({})
    bar.planned(5, 15)
    for r in range(2):
        for _ in range(3):
            bar.pair({"round": r, "phase": "main"})
    task = bar._bar.tasks[0]
    assert (task.completed, task.total) == (6, 15)
    assert task.description == "locate: round 2/5"
    bar.planned(1, 3)  # the confirmation rounds
    assert bar._bar.tasks[0].total == 18
    bar.close()
    assert files.calls[0] == "begin" and files.calls[-1] == "close"
    assert files.calls.count(("pair", 0)) == 3  # every pair still reaches the file


def test_no_bar_off_a_terminal():
    from commbench.output.locate import RoundsBar

    files = _Files()
    bar = RoundsBar(files, False)
    bar.begin({})
    bar.planned(5, 15)
    bar.pair({"round": 0, "phase": "main"})
    bar.close()
    assert bar._bar is None and len(files.calls) == 4
