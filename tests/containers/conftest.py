"""The end-to-end test through containers (marked `containers`): `stack` is a worker, a Kafka
broker and a PostgreSQL catalog, in Docker containers wherever a daemon answers, else on the
local services (tests/containers/stack.py). The summary at the end of the run says which."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.containers.stack import Stack, stack, stack_path

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/containers as `containers`."""
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.containers)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which path tests/containers ran on (or would have)."""
    if not any(
        _HERE in Path(str(r.fspath)).resolve().parents
        for reports in terminalreporter.stats.values()
        for r in reports
        if hasattr(r, "fspath") and getattr(r, "when", "call") == "call"
    ):
        return
    try:
        path, why = stack_path()
    except RuntimeError as error:
        path, why = "none", str(error)
    terminalreporter.write_line(f"tests/containers ran on: {path} ({why})")


@pytest.fixture
def e2e_stack(record_property: pytest.RecordProperty) -> Iterator[Stack]:
    """The worker with its broker and catalog, started; removed afterwards."""
    path, why = stack_path()
    print(f"tests/containers: {path} ({why})")
    record_property("stack", path)
    with stack() as started:
        yield started
