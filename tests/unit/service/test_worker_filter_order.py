"""The worker orders selections' conjuncts per `resources.filter_order`: its explain shows the
current order, and results equal `cq run`'s with the written order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from cq_service.service import views as w
from tests.unit.service.workers import EXAMPLE, run_until_done

NAME = "web-proxy"
HAVING = "HAVING COUNT(*) = 2"
CONJUNCTIVE = "HAVING COUNT(*) = 2 AND client_id > 0 AND domain <> ''"


def _copy(to: Path, filter_order: str) -> Path:
    shutil.copytree(EXAMPLE, to, ignore=shutil.ignore_patterns("out"))
    path = to / "pipeline.yaml"
    text = path.read_text().replace(HAVING, CONJUNCTIVE)
    text = text.replace("queries:\n", f"resources: {{filter_order: {filter_order}}}\nqueries:\n", 1)
    path.write_text(text)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    _copy(tmp_path / "p" / NAME, "sweep")
    return tmp_path / "p"


def test_worker_explain_shows_the_order_and_results_equal_the_written_order(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    worker = make_worker(batch_rows=8)
    worker.reconcile()
    run_until_done(worker)
    text = w.explain_pipeline(worker, NAME)
    assert "select (3 conjuncts, order: sweep)" in text
    assert "filter orders now (F1.. as written):" in text
    assert "select [sweep: F" in text
    reference = _copy(tmp_path / "ref", "static")
    run_pipeline(load_and_compile(reference))
    outs = sorted((tmp_path / "ref" / "out").glob("*.jsonl"))
    assert len(outs) == 3
    for ref in outs:
        assert (folder / NAME / "out" / ref.name).read_text() == ref.read_text(), ref.name
