"""Who made a live job wait (docs/commands/stragglers.md): a trace in, a verdict per rank out.

In a synchronous job every member of a group waits in each collective for the last one to
arrive, so per-rank call durations point at the victims (they wait longest) and make the
culprit look fastest. This package names the culprit from when each rank arrived:

- ``matching``: each collective matched across the members of its group by the group's call
  order (p2p by the pair's order); a rank that never issued call N while the others did is
  ``missing`` at N (a hang).
- ``lateness``: per matched call, each member's lateness: its arrival minus the group's first
  arrival where the members' clocks are comparable (one host's monotonic or wall clock),
  otherwise clock-free from the waits (the last to arrive waits least: the longest wait minus
  its own).
- ``verdicts``: per rank ``last_share``, lateness p50/p95, the wait it caused per step, per op,
  group and host, and the rule (``RULE``) that calls a rank ``culprit``, ``transient`` (steps
  k..m) or ``ok`` against a noise floor drawn from the run itself.

Pure: functions over a trace's calls (``commbench.results.trace``); nothing here imports
torch, writes a file or prints.
"""

from commbench.stragglers.verdicts import (
    RULE,
    Analysis,
    RankResult,
    analyse,
    one_line,
    to_json,
    waited_note,
)

__all__ = ["RULE", "Analysis", "RankResult", "analyse", "one_line", "to_json",
           "waited_note"]
