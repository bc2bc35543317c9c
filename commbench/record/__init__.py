"""``commbench.record.step()``: mark where a training step ends, for ``commbench record``.

A script without a torch optimizer (a hand-written loop, a custom update) calls it once per
step; with an optimizer, steps end at each ``optimizer.step()`` by themselves. Outside
``commbench record`` it does nothing and costs nothing, so it can stay in the script.
"""

import sys


def step() -> None:
    """End the current step of the recording (no-op when not recording)."""
    recorder = sys.modules.get("commbench.record.recorder")
    if recorder is not None:
        recorder.mark_step()
