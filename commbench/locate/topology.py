"""Where hosts sit: ``--topology FILE`` read into host -> leaf switch (-> spine)
(docs/commands/locate.md, "Topology and the bad switch verdict").

Two formats, told apart by the first line that says something (comments start with ``#``,
blank lines are skipped):

- ``host leaf [spine]``, one host a line; the host may be a SLURM host list
  (``node[01-04] leaf1 spine0``);
- a SLURM ``topology.conf`` (topology/tree): ``SwitchName=s1 Nodes=node[01-04]`` makes s1 the
  leaf of those hosts, ``SwitchName=s9 Switches=s[1-3]`` the spine above s1-s3
  (``LinkSpeed=`` is read and ignored). Host lists are expanded as ``scontrol show
  hostnames`` does, by the one reader of them (launch.environment.hostnames).

Anything else is refused in one line naming the file and the line (UsageError, exit 2):
a missing file, a malformed line, a host in two leaves. A ``host leaf`` file names the run's
hosts, so one it names that the run does not have (a typo, a stale file) is refused where the
run's hosts are known before it starts (``check_hosts``). A ``topology.conf`` describes the
whole cluster and a job uses part of it, so hosts it names beyond the run's are expected
there. A host of the run that the file does not name has no leaf: it takes part as usual,
outside every leaf.

Pure: text in, a Topology out; no torch, no process.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from commbench.core.errors import UsageError
from commbench.launch.environment import RankEnv, hostnames
from commbench.specs.locate import LocateSpec

HOSTS, SLURM = "host leaf [spine]", "topology.conf"
SLURM_KEYS = ("switchname", "nodes", "switches", "linkspeed")


@dataclass(frozen=True)
class Topology:
    """host -> leaf, leaf -> spine ('' where the file names none), and which format said so."""

    leaves: dict[str, str]
    spines: dict[str, str]
    format: str = HOSTS
    source: str = "topology"

    def rows(self) -> tuple[tuple[str, str, str], ...]:
        """(host, leaf, spine) for every host, in the file's order: what a LocateSpec keeps."""
        return tuple((h, leaf, self.spines.get(leaf, "")) for h, leaf in self.leaves.items())

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[str]]) -> Topology:
        return cls({h: leaf for h, leaf, _ in rows}, {leaf: s for _, leaf, s in rows if s})

    def leaf_of(self, name: str) -> str | None:
        """The leaf of a host (or a node entity's name, such as 'vm:2' for two launcher
        agents on one host), by its full name, else by its short name (before the first
        dot: a launcher may report 'node01.cluster' where the file says 'node01')."""
        if name in self.leaves:
            return self.leaves[name]
        short = name.split(".")[0]
        for host, leaf in self.leaves.items():
            if host.split(".")[0] == short:
                return leaf
        return None


def read(path: str) -> Topology:
    """--topology FILE, parsed; one line of error for a file that is not there."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--topology {path}: no such file")
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"--topology {path}: cannot read it ({error})") from None
    return parse(text, path)


def parse(text: str, source: str = "topology") -> Topology:
    lines = [(number, line.split("#", 1)[0].strip())
             for number, line in enumerate(text.splitlines(), start=1)]
    lines = [(number, line) for number, line in lines if line]
    if not lines:
        raise UsageError(f"--topology {source}: names no host (expected '{HOSTS}' lines or a "
                         f"SLURM {SLURM})")
    if "=" in lines[0][1].split()[0]:
        return _slurm(lines, source)
    return _hosts(lines, source)


def _bad(source: str, number: int, what: str) -> UsageError:
    return UsageError(f"--topology {source} line {number}: {what}")


def _expand(value: str, source: str, number: int) -> list[str]:
    try:
        return hostnames(value)
    except UsageError:
        raise _bad(source, number, f"cannot read the host list {value!r}") from None


def _place(leaves: dict[str, tuple[str, int]], host: str, leaf: str, source: str,
           number: int) -> None:
    """host -> leaf, refusing a host already in another leaf."""
    if host in leaves and leaves[host][0] != leaf:
        first, where = leaves[host]
        raise _bad(source, number, f"host {host} is in two leaves, {first} (line {where}) "
                                   f"and {leaf}")
    leaves.setdefault(host, (leaf, number))


def _hosts(lines: list[tuple[int, str]], source: str) -> Topology:
    leaves: dict[str, tuple[str, int]] = {}
    spines: dict[str, tuple[str, int]] = {}
    for number, line in lines:
        fields = line.split()
        if len(fields) not in (2, 3) or any("=" in f for f in fields):
            raise _bad(source, number, f"expected '{HOSTS}', got {line!r}")
        host, leaf, *spine = fields
        for name in _expand(host, source, number):
            _place(leaves, name, leaf, source, number)
        if spine:
            if leaf in spines and spines[leaf][0] != spine[0]:
                raise _bad(source, number, f"leaf {leaf} is under two spines, "
                                           f"{spines[leaf][0]} (line {spines[leaf][1]}) and "
                                           f"{spine[0]}")
            spines.setdefault(leaf, (spine[0], number))
    return Topology({h: v[0] for h, v in leaves.items()},
                    {leaf: v[0] for leaf, v in spines.items()}, HOSTS, source)


def _slurm(lines: list[tuple[int, str]], source: str) -> Topology:
    leaves: dict[str, tuple[str, int]] = {}
    children: dict[str, tuple[list[str], int]] = {}  # switch -> its child switches
    defined: dict[str, int] = {}
    for number, line in lines:
        fields: dict[str, str] = {}
        for token in line.split():
            key, equals, value = token.partition("=")
            if not equals or not value or key.lower() not in SLURM_KEYS:
                raise _bad(source, number, f"expected 'SwitchName=NAME Nodes=HOSTS' or "
                                           f"'SwitchName=NAME Switches=SWITCHES', got {line!r}")
            fields[key.lower()] = value
        name = fields.get("switchname")
        if not name or not ("nodes" in fields or "switches" in fields):
            raise _bad(source, number, f"expected 'SwitchName=NAME Nodes=HOSTS' or "
                                       f"'SwitchName=NAME Switches=SWITCHES', got {line!r}")
        if name in defined:
            raise _bad(source, number, f"switch {name} is defined twice (line "
                                       f"{defined[name]} too)")
        defined[name] = number
        for host in _expand(fields["nodes"], source, number) if "nodes" in fields else ():
            _place(leaves, host, name, source, number)
        if "switches" in fields:
            children[name] = (_expand(fields["switches"], source, number), number)
    spines: dict[str, str] = {}
    for parent, (names, number) in children.items():
        for child in names:
            if child not in defined:
                raise _bad(source, number, f"switch {parent} names switch {child}, which no "
                                           "line defines")
            spines.setdefault(child, parent)
    if not leaves:
        raise UsageError(f"--topology {source}: names no host (no switch has Nodes=)")
    return Topology({h: v[0] for h, v in leaves.items()}, spines, SLURM, source)


def check_hosts(topology: Topology, run_hosts: Sequence[str]) -> None:
    """A ``host leaf`` file naming a host this run does not have is refused (a typo or a
    stale file would otherwise group the run wrongly without a word); a topology.conf names
    the whole cluster, so it may name more."""
    if topology.format != HOSTS or not run_hosts:
        return
    known = set(run_hosts) | {h.split(".")[0] for h in run_hosts}
    for host in topology.leaves:
        if host not in known and host.split(".")[0] not in known \
                and host.split(":")[0] not in known:
            raise UsageError(f"--topology {topology.source}: host {host} is not one of this "
                             f"run's hosts ({', '.join(sorted(set(run_hosts)))})")


def entity_leaves(topology: Topology, entities: Sequence) -> list[str | None]:
    """Each entity's leaf: the one all its hosts sit under (a node entity's own name first,
    so 'vm:2' can be placed apart from 'vm:0'); None for an entity across leaves (a rail) or
    one the file does not place."""
    found: list[str | None] = []
    for entity in entities:
        own = topology.leaf_of(entity.name) if entity.kind == "node" else None
        leaves = {topology.leaf_of(h) for h in entity.hosts}
        found.append(own or (leaves.pop() if len(leaves) == 1 else None))
    return found


def with_topology(spec: LocateSpec, env: RankEnv | None) -> LocateSpec:
    """``spec`` with its --topology FILE read (one line of error for a bad one, before
    anything starts), checked against the run's hosts where they are known now: this host for
    local ranks, the SLURM node list under srun; under other launchers only the ranks know
    them."""
    if spec.topology_file is None:
        return spec
    found = read(spec.topology_file)
    check_hosts(found, known_hosts(env))
    return dataclasses.replace(spec, topology=found.rows())


def known_hosts(env: RankEnv | None) -> list[str]:
    if env is None:
        import socket

        return [socket.gethostname()]
    nodelist = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if nodelist:
        return hostnames(nodelist)
    return []
