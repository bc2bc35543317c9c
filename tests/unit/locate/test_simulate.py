"""The fleet simulator (locate.simulate): at gpu level every GPU is an entity and a NIC slows
only its pairs across nodes; one slow GPU hidden in its node is named at gpu level; a slow leaf
uplink is planted on the pairs across it only and named ``bad switch`` (bench/locate_sim.py
measures the rates)."""

from __future__ import annotations

import numpy as np
import pytest

from commbench.locate import schedule as rounds_of
from commbench.locate import simulate as sim
from commbench.specs.locate import LocateSpec, MinEffect


def test_at_gpu_level_every_gpu_is_an_entity_and_a_nic_slows_only_its_pairs_across():
    fleet = sim.Fleet(4, gpus=2, noise=(0.0, 0.0), fault="rail", factor=2.0, level="gpu")
    assert fleet.entities == 8 and fleet.node_of(5) == 2
    planted = sim.Planted(slow_nics={(1, 0): 2.0})  # node 1's NIC 0 = entity 2
    rounds = [rounds_of.Round(0, ((2, 3), (2, 4), (0, 1)))]
    pairs = sim.measure(fleet, planted, rounds, np.random.default_rng(0))
    busbw = {(p.a, p.b): p.busbw for p in pairs}
    assert busbw == {(2, 3): 10.0, (2, 4): 5.0, (0, 1): 10.0}  # inside node 1: NVLink


def test_one_slow_gpu_hidden_in_its_node_is_named_at_gpu_level():
    """16 nodes x 4 GPUs at 0.15 a rank pair: a 1.5x GPU is named ``bad gpu`` alone (entity
    node x 4 + gpu), every seed; the same fleets at node level, where a meeting is its
    slowest of 4 rank pairs, find the node less often."""
    noise = (0.15, 0.15)
    found = {"gpu": 0, "node": 0}
    for level in found:
        fleet = sim.Fleet(16, gpus=4, noise=noise, fault="gpu", factor=1.5, level=level)
        for seed in range(4):
            outcome = sim.simulate(fleet, "quick", seed)
            assert not outcome.false_bad, (level, seed, outcome)
            found[level] += outcome.found
    assert found["gpu"] == 4  # found: the planted GPU named bad, and nothing else
    # hidden in its node: the node level misses it in some of the same fleets (2 of 4 here)
    assert found["node"] < found["gpu"], found


@pytest.mark.parametrize(
    ("factor", "noise", "min_effect"),
    [(1.5, sim.QUIET, MinEffect()),
     # 1.3x sits on the default 30 % line (half of such fleets fall either side of it), so
     # against 20 %, as tests/unit/locate/test_attribution.py does for a 1.3x rank
     (1.3, (0.05, 0.05), MinEffect(0.2, 0.2))],
)
def test_the_simulator_names_a_slow_leaf_uplink_bad_switch(factor, noise, min_effect):
    fleet16 = sim.Fleet(16, gpus=8, noise=noise, fault="switch", factor=factor)
    assert fleet16.leaves() == tuple(f"leaf{e // 4}" for e in range(16))
    for seed in range(3):
        outcome = sim.simulate(fleet16, "full", seed, LocateSpec(min_effect=min_effect))
        # found: the leaf's switch named bad and nothing else (none of its hosts)
        assert outcome.found and not outcome.false_bad, (seed, outcome)


def test_the_simulator_plants_the_uplink_on_pairs_across_only():
    fleet8 = sim.Fleet(8, gpus=2, noise=(0.0, 0.0), fault="switch", factor=2.0)
    planted = sim.plant(fleet8, np.random.default_rng(0))
    (leaf,) = planted.slow_uplinks
    behind = [e for e, name in enumerate(fleet8.leaves()) if name == leaf]
    assert planted.expected == {("switch", tuple(behind))}
    pairs = sim.measure(fleet8, planted, rounds_of.circle_rounds(8), np.random.default_rng(0))
    for p in pairs:
        across = (p.a in behind) != (p.b in behind)
        assert p.busbw == pytest.approx(5.0 if across else 10.0)
