"""--topology FILE (issue 30, point 2): both formats read, SLURM host lists expanded, every bad
input refused in one line with exit 2 through the CLI, before anything starts. No process."""

from __future__ import annotations

import socket

import pytest

from commbench.core.errors import UsageError
from commbench.locate import topology
from commbench.locate.fleet import entities

HOSTS_FILE = """\
# rack A
node01 leafA spine0
node02 leafA spine0   # trailing comment

node03 leafB spine0
gpu[1-2] leafC
"""

SLURM_CONF = """\
# topology.conf of a small cluster
SwitchName=s0 Nodes=node[01-04,07] LinkSpeed=100
SwitchName=s1 Nodes=node[05-06],gpu[08-10]
switchname=s2 nodes=tux1
SwitchName=spine Switches=s[0-1]
"""


def test_host_leaf_lines_with_comments_spines_and_a_host_list():
    found = topology.parse(HOSTS_FILE, "t")
    assert found.format == topology.HOSTS
    assert found.leaves == {"node01": "leafA", "node02": "leafA", "node03": "leafB",
                            "gpu1": "leafC", "gpu2": "leafC"}
    assert found.spines == {"leafA": "spine0", "leafB": "spine0"}


def test_slurm_topology_conf_with_ranges_and_a_spine():
    found = topology.parse(SLURM_CONF, "topology.conf")
    assert found.format == topology.SLURM
    assert [h for h, leaf in found.leaves.items() if leaf == "s0"] == [
        "node01", "node02", "node03", "node04", "node07"]
    assert [h for h, leaf in found.leaves.items() if leaf == "s1"] == [
        "node05", "node06", "gpu08", "gpu09", "gpu10"]  # zero padding kept
    assert found.leaves["tux1"] == "s2"
    assert found.spines == {"s0": "spine", "s1": "spine"}  # s2 has no parent line


def test_rows_round_trip_and_short_names():
    found = topology.parse(HOSTS_FILE)
    again = topology.Topology.from_rows(found.rows())
    assert again.leaves == found.leaves and again.spines == found.spines
    assert found.leaf_of("node03.cluster.local") == "leafB"  # a launcher's FQDN
    assert found.leaf_of("node99") is None


def test_entities_take_their_hosts_leaf_and_a_rail_none():
    hosts = [{"host": h, "node": ""} for h in ("node01", "node01", "node03", "node03")]
    found = topology.parse(HOSTS_FILE)
    assert topology.entity_leaves(found, entities("node", hosts)) == ["leafA", "leafB"]
    assert topology.entity_leaves(found, entities("gpu", hosts)) == [
        "leafA", "leafA", "leafB", "leafB"]
    assert topology.entity_leaves(found, entities("rail", hosts)) == [None, None]  # across


def test_two_agents_on_one_host_are_placed_by_their_node_name():
    """Four torchrun agents on one VM are nodes vm:0..vm:3; the file can place each."""
    hosts = [{"host": "vm", "node": str(k)} for k in range(4) for _ in range(2)]
    found = topology.parse("vm:0 a\nvm:1 a\nvm:2 b\nvm:3 b\n")
    assert topology.entity_leaves(found, entities("switch", hosts)) == ["a", "a", "b", "b"]
    topology.check_hosts(found, ["vm"])  # vm:2 is a node of host vm: known


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node01\n", "line 1: expected 'host leaf [spine]'"),
        ("node01 leafA\nnode02 leafA spine extra\n", "line 2: expected"),
        ("node01 leafA\nnode01 leafB\n", "line 2: host node01 is in two leaves, leafA (line 1)"),
        ("node[01-02] a\nnode02 b\n", "host node02 is in two leaves"),
        ("a x s1\nb x s2\n", "leaf x is under two spines"),
        ("node[01-x] a\n", "cannot read the host list"),
        ("# nothing\n\n", "names no host"),
        ("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n2\n", "host n2 is in two leaves"),
        ("SwitchName=s0 Nodes=n1\nnode02 leafA\n", "line 2: expected 'SwitchName="),
        ("SwitchName=s0 Nodes=n1 Speed=9\n", "line 1: expected"),
        ("SwitchName=s0\n", "line 1: expected"),
        ("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n", "switch s0 is defined twice"),
        ("SwitchName=s0 Nodes=n1\nSwitchName=sp Switches=s[0-1]\n", "names switch s1"),
        ("SwitchName=sp Switches=s0\nSwitchName=s0 Switches=sp\n", "names no host"),
    ],
)
def test_bad_files_are_one_line_usage_errors(text, message):
    with pytest.raises(UsageError) as error:
        topology.parse(text, "f.txt")
    assert message in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith("--topology f.txt")


def test_a_host_leaf_file_naming_a_host_the_run_lacks_is_refused_a_slurm_conf_not():
    with pytest.raises(UsageError, match="host node03 is not one of this run's hosts"):
        topology.check_hosts(topology.parse("node01 a\nnode03 b\n"), ["node01", "node02"])
    # the cluster's topology.conf names every host; a job uses some of them
    topology.check_hosts(topology.parse(SLURM_CONF), ["node01", "node05"])


# ---- through the CLI: exit 2, one line, nothing started --------------------------------------


def cli(args, tmp_path, capsys):
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["locate", *args, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    return exit_info.value.code, err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("node01\n", "line 1: expected 'host leaf [spine]'"),
        ("{me} a\n{me} b\n", "is in two leaves"),
        ("{me} a\nghost01 b\n", "host ghost01 is not one of this run's hosts"),
        ("SwitchName=s0 Nodes={me}\nSwitchName=s1 Nodes={me}\n", "is in two leaves"),
        ("SwitchName=s0 Nodes=n[1-\n", "cannot read the host list"),
    ],
)
def test_bad_topology_exits_2_with_one_line(content, message, tmp_path, capsys):
    path = tmp_path / "topo.txt"
    if content is not None:
        path.write_text(content.format(me=socket.gethostname()))
    code, err = cli(["--nproc", "4", "--topology", str(path)], tmp_path, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_level_switch_without_topology_is_refused(tmp_path, capsys):
    code, err = cli(["--nproc", "4", "--level", "switch"], tmp_path, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--level switch needs --topology FILE" in err
    assert not (tmp_path / "out").exists()


def test_level_switch_on_one_node_is_refused_even_with_a_topology(tmp_path, capsys):
    path = tmp_path / "topo.txt"
    path.write_text(f"{socket.gethostname()} leaf1\n")
    code, err = cli(["--nproc", "4", "--level", "switch", "--topology", str(path)], tmp_path,
                    capsys)
    assert code == 2 and "--level switch needs several nodes" in err, err
