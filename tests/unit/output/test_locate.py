"""locate's words (output.locate): the fleet named so that it fits the run."""

from __future__ import annotations

from commbench.output.locate import console_lines

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
