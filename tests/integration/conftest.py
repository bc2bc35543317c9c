"""Session-wide recordings of real jobs, made once and read by the record and replay tests."""

import pytest

from tests.integration import recordings


def pytest_collection_modifyitems(items) -> None:
    """Every test here is a multi-rank (or real-service) test: `make test` runs those also
    marked `core`, `make test-all` the rest (Makefile)."""
    for item in items:
        if "tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def ddp_recording(tmp_path_factory) -> recordings.Recording:
    return recordings.record_ddp(tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="session")
def fsdp_recording(tmp_path_factory) -> recordings.Recording:
    return recordings.record_fsdp(tmp_path_factory.mktemp("fsdp"))


@pytest.fixture(scope="session")
def spawning_recording(tmp_path_factory) -> recordings.Recording:
    return recordings.record_spawning(tmp_path_factory.mktemp("spawning"))
