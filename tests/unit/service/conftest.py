"""Fixtures of the worker tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cq_service.service.worker import Worker
from tests.unit.service.workers import sqlite_worker

TOKEN = "s3cret"


@pytest.fixture
def make_worker(tmp_path: Path, folder: Path):
    """Workers on the same folder and catalog (a second one is a restart)."""

    def _make(**settings: Any) -> Worker:
        # A turn drains up to its step count, not for a time: what a test's steps do does not
        # depend on the machine's speed.
        return sqlite_worker(tmp_path, folder, token=TOKEN, **{"turn_seconds": 3600.0, **settings})

    return _make
