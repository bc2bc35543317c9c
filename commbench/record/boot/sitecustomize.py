"""Installed by ``commbench record`` through PYTHONPATH into every Python process of the
user's job; does nothing unless COMMBENCH_RECORD_DIR is set.

It must not import torch (torchrun's agent, pip and every helper process start through it), so
it waits for ``torch.distributed.distributed_c10d`` to be imported and wraps
``init_process_group`` there: the recorder starts in each rank right after the rank joins.
A sitecustomize this one shadows (a distribution's, a virtualenv's) still runs.
"""

import importlib.abc
import importlib.util
import os
import sys

_TARGET = "torch.distributed.distributed_c10d"
_HERE = os.path.dirname(os.path.abspath(__file__))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _wrap(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def _wrap(c10d):
    original = c10d.init_process_group
    if getattr(original, "_commbench_record", False):
        return

    def init_process_group(*args, **kwargs):
        result = original(*args, **kwargs)
        try:  # the user's job runs on whatever happens to the recording
            if os.environ.get("COMMBENCH_RECORD_MODE") == "flight-recorder":
                from commbench.record import flight as recorder
            else:
                from commbench.record import recorder

            recorder.start(os.environ["COMMBENCH_RECORD_DIR"])
        except Exception as error:
            print(f"commbench record: cannot record this rank ({error!r})", file=sys.stderr)
        return result

    init_process_group._commbench_record = True
    init_process_group.__wrapped__ = original
    init_process_group.__doc__ = original.__doc__
    c10d.init_process_group = init_process_group


def _chain():
    """Run the sitecustomize this one hides, if any."""
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
        spec = importlib.util.find_spec("sitecustomize")
    finally:
        sys.path[:] = saved
    if spec is not None and spec.origin and os.path.dirname(spec.origin) != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("COMMBENCH_RECORD_DIR"):
    if os.environ.get("COMMBENCH_RECORD_PATH"):  # commbench's own import path, for other pythons
        sys.path.append(os.environ["COMMBENCH_RECORD_PATH"])
    sys.meta_path.insert(0, _Finder())
_chain()
