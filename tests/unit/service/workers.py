"""Workers on a temporary SQLite catalog, and running one until its file sources are done:
shared by the worker tests (the `make_worker` fixture in conftest.py builds on them)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from cq_service.catalog import Catalog
from cq_service.service.config import ServiceConfig
from cq_service.service.worker import Worker

EXAMPLE = Path(__file__).parents[3] / "pipelines" / "examples" / "web-proxy"


def sqlite_worker(tmp_path: Path, folder: Path, **settings: Any) -> Worker:
    """A worker on the pipelines in `folder` and the catalog `tmp_path/catalog.db` (a second
    one on the same paths is a restart). Checkpoints come often and the reconciler only when a
    test calls it, unless `settings` say otherwise."""
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.upgrade()
    config = ServiceConfig(
        pipelines=str(folder),
        catalog=catalog.url,
        port=0,
        **{"checkpoint_interval": 0.05, "reconcile_interval": 3600, **settings},
    )
    return Worker(config, catalog)


def run_until_done(worker: Worker, seconds: float = 60) -> None:
    """Reconcile, then step until every (file) source is exhausted and nothing is left to run
    (`seconds`: a guard against a hang, not a bound on speed)."""
    deadline = time.monotonic() + seconds
    worker.reconcile()
    while time.monotonic() < deadline:
        worker.step()
        ex = worker.engine.executor
        if all(s.exhausted for s in ex.sources) and not any(o.runnable() for o in ex.operators):
            worker.checkpoint()
            return
    raise AssertionError("the worker did not finish its file sources")


def request_while_stepping(worker: Worker, send) -> Any:
    """Send an API request from another thread while this (the engine's) thread steps the
    worker: the request's `Worker.call` runs between two steps."""
    worker._engine_thread = threading.current_thread()
    answer: list[Any] = []
    sender = threading.Thread(target=lambda: answer.append(send()))
    sender.start()
    while sender.is_alive():
        worker.step()
    sender.join()
    return answer[0]
