"""The GPU tests' own timeouts (tests/gpu): pytest-timeout's 180 s (pyproject) must not end a
GPU test before its 300 s run can."""

from __future__ import annotations


def test_every_gpu_test_outlasts_its_runs():
    """pytest-timeout's 180 s (pyproject) ended a GPU test before its 300 s run could."""
    import inspect

    from tests.gpu import test_nccl

    def limit(function):
        marks = [*getattr(function, "pytestmark", []), *test_nccl.pytestmark]
        found = [m.args[0] for m in marks if m.name == "timeout"]
        return found[0] if found else 180

    tests = [f for name, f in vars(test_nccl).items() if name.startswith("test_")]
    assert tests
    for function in tests:
        runs = inspect.getsource(function).count("timeout=300")
        assert limit(function) >= 300 * max(1, runs), function.__name__
