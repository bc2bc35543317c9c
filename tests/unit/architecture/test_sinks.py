"""The rank-0 sinks the commands hand to the ranks have what the engine calls on them.

The sink Protocols (engine/sinks.py) say what the engine calls; a sink that lacks a method, or
takes a different number of arguments, fails only when a run reaches that call on rank 0
(``--per-call``'s ``calls``, a locate round's ``planned``), possibly minutes in. These tests
check every sink handed to ranks, and every sink one of them forwards to, against its Protocol:
a sink in output/ declares it as a base class (the check then refuses a method only the
Protocol's stub provides); one in results/ cannot import the engine and is checked by shape.
"""

from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from commbench.engine.sinks import PairSink, ReplaySink, RowSink, RunSink
from commbench.output.live import JsonRows, Live, Notes, Sinks
from commbench.output.locate import RoundsBar
from commbench.results.folder import RunWriter
from commbench.results.locate import PairSink as PairFiles
from commbench.results.replay import ReplaySink as ReplayFiles

# (sink, its Protocol, whether it must declare it as a base class)
SINKS = [
    (Sinks, RowSink, True),  # what measure hands to the ranks
    (Notes, RowSink, True),
    (JsonRows, RowSink, True),
    (Live, RowSink, True),
    (RunWriter, RowSink, False),  # the file sink inside Sinks
    (RoundsBar, PairSink, False),  # what locate hands to the ranks
    (PairFiles, PairSink, False),  # the file sink inside RoundsBar
    (ReplayFiles, ReplaySink, False),  # what replay hands to the ranks
]


def gaps(sink: type, protocol: type) -> list[str]:
    """What ``sink`` lacks of ``protocol``: a method missing (or provided only by a Protocol's
    stub), or one that cannot be called with the Protocol's arguments."""
    found = []
    for name in _members(protocol):
        owner = next((k for k in sink.__mro__ if name in vars(k)), None)
        if owner is None or _is_protocol(owner):
            found.append(f"{sink.__name__}.{name} is missing")
            continue
        wanted = inspect.signature(getattr(protocol, name))
        have = inspect.signature(getattr(sink, name))
        try:
            have.bind(*[None] * _positional(wanted))
        except TypeError as error:
            found.append(f"{sink.__name__}.{name}{have} cannot take {wanted}: {error}")
    return found


def _members(protocol: type) -> list[str]:
    return sorted({name for k in protocol.__mro__ if _is_protocol(k)
                   for name, value in vars(k).items()
                   if callable(value) and not name.startswith("_")})


def _is_protocol(klass: type) -> bool:
    return bool(vars(klass).get("_is_protocol", False)) or klass is Protocol


def _positional(signature: inspect.Signature) -> int:
    """How many positional arguments the engine passes (self included; *args: none)."""
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in signature.parameters.values())


@pytest.mark.parametrize(("sink", "protocol", "declared"), SINKS,
                         ids=[f"{s.__module__}.{s.__name__}" for s, _, _ in SINKS])
def test_every_rank0_sink_has_what_the_engine_calls(sink, protocol, declared):
    assert gaps(sink, protocol) == []
    if declared:
        assert protocol in sink.__mro__, f"{sink.__name__} does not declare {protocol.__name__}"


def test_the_check_catches_a_sink_that_lacks_a_call_or_takes_other_arguments():
    """A planted fault for each rule: the checks above are not vacuous."""

    class NoCalls(RowSink):  # declares the Protocol, but forgot --per-call's calls()
        def begin(self, meta, planned): ...
        def position(self, where): ...
        def row(self, record): ...
        def progress(self, done, total): ...
        def note(self, text): ...
        def update(self, fields): ...
        def close(self): ...

    class TwoArgPair:  # pair() takes an extra argument the engine never passes
        def begin(self, meta): ...
        def planned(self, rounds, pairs): ...
        def pair(self, record, where): ...
        def close(self): ...

    assert gaps(NoCalls, RowSink) == ["NoCalls.calls is missing"]
    assert len(gaps(TwoArgPair, PairSink)) == 1 and "TwoArgPair.pair" in gaps(TwoArgPair,
                                                                               PairSink)[0]
    assert gaps(object, RunSink) == ["object.begin is missing", "object.close is missing"]
