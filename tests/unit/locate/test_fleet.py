"""locate's entities (locate.fleet): what a gpu, a node and a rail are in ranks, how two of
them meet (rail-parallel, across nodes), and every meeting of a round expanded to rank pairs."""

from __future__ import annotations

from commbench.locate import schedule as rounds_of


def hosts(nodes, per_node, host="h"):
    return [{"host": host if nodes == 1 else f"{host}{n}", "node": str(n)}
            for n in range(nodes) for _ in range(per_node)]


def test_levels_group_ranks_and_meet_rail_parallel():
    from commbench.locate import fleet

    found = hosts(3, 2)
    assert fleet.default_level(hosts(1, 4)) == "gpu"
    assert fleet.default_level(found) == "node"
    nodes = fleet.entities("node", found)
    assert [(e.name, e.ranks) for e in nodes] == [("h0", (0, 1)), ("h1", (2, 3)), ("h2", (4, 5))]
    assert fleet.rank_pairs("node", nodes[0], nodes[2]) == ((0, 4), (1, 5))
    rails = fleet.entities("rail", found)
    assert [(e.name, e.ranks) for e in rails] == [("rail 0", (0, 2, 4)), ("rail 1", (1, 3, 5))]
    # rail 0 of node k meets rail 1 of node k+1: across nodes, nobody twice
    pairs = fleet.rank_pairs("rail", rails[0], rails[1])
    assert pairs == ((0, 3), (2, 5), (4, 1))
    assert len({r for p in pairs for r in p}) == 6


def test_two_agents_on_one_host_are_two_nodes():
    from commbench.locate import fleet

    same_host = [{"host": "vm", "node": str(n)} for n in (0, 0, 1, 1)]
    assert fleet.default_level(same_host) == "node"
    assert [e.name for e in fleet.entities("node", same_host)] == ["vm:0", "vm:1"]


def test_rank_rounds_expand_every_meeting():
    from commbench.locate import fleet

    found = fleet.entities("node", hosts(4, 2))
    rounds = fleet.rank_rounds("node", found, rounds_of.circle_rounds(4))
    for r in rounds:
        ranks = [x for m in r.meetings for p in m.rank_pairs for x in p]
        assert sorted(ranks) == list(range(8))
