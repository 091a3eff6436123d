"""The end-to-end test through containers (marked `containers`): `e2e_stack` is a worker, a Kafka
broker and a PostgreSQL catalog, in Docker containers wherever a daemon answers, else on the
local services (tests/containers/stack.py). Which one ran is said as a `StackPath` warning,
so it is in pytest's warnings summary, also from pytest-xdist workers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers.stack import Stack, StackPath, stack, stack_path

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/containers as `containers`."""
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.containers)


@pytest.fixture
def e2e_stack(record_property: pytest.RecordProperty) -> Iterator[Stack]:
    """The worker with its broker and catalog, started; removed afterwards."""
    path, why = stack_path()
    warnings.warn(f"tests/containers ran on: {path} ({why})", StackPath, stacklevel=1)
    record_property("stack", path)
    with stack() as started:
        yield started
