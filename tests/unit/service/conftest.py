"""Fixtures of the worker tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cq_service.catalog import Catalog
from cq_service.service.config import ServiceConfig
from cq_service.service.worker import Worker

TOKEN = "s3cret"


@pytest.fixture
def make_worker(tmp_path: Path, folder: Path):
    """Workers on the same folder and catalog (a second one is a restart)."""

    def _make(**settings: Any) -> Worker:
        # A turn drains up to its step count, not for a time: what a test's steps do does not
        # depend on the machine's speed.
        settings.setdefault("turn_seconds", 3600.0)
        catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
        catalog.upgrade()
        config = ServiceConfig(
            pipelines=str(folder),
            catalog=catalog.url,
            port=0,
            token=TOKEN,
            **{"checkpoint_interval": 0.05, "reconcile_interval": 3600, **settings},
        )
        return Worker(config, catalog)

    return _make
