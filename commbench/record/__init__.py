"""``commbench.record.step()``: mark where a training step ends, for ``commbench record``.

A script without a torch optimizer (a hand-written loop, a custom update) calls it once per
step; with an optimizer, steps end at each ``optimizer.step()`` by themselves. Outside
``commbench record`` it does nothing and costs nothing, so it can stay in the script.
"""

import sys


def step() -> None:
    """End the current step of the recording (no-op when not recording)."""
    for name in ("commbench.record.recorder", "commbench.record.flight"):
        module = sys.modules.get(name)
        if module is not None:
            module.mark_step()
