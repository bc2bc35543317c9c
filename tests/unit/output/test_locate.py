"""locate's words (output.locate): the fleet named so that it fits the run."""

from __future__ import annotations

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
