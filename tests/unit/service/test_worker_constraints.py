"""A worker uses the k-constraints of the pipelines it deploys, as `cq run` does (issue 26):
its joins keep the RIDS reduction (with k-Mon for `k: auto`) and give `cq run`'s results, the
live engine restores the reduction from a snapshot, and `/metrics` shows the k in use and the
counters."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest

from cq_service.adaptive.k_constraints import monitor_adherence
from cq_service.compiler import load_and_compile
from cq_service.engine.join_constraints import declared
from cq_service.engine.operators.join import Join
from cq_service.plan.planner import plan_queries
from cq_service.runner import run_pipeline
from cq_service.service import views as w
from cq_service.service.metrics import parse_metrics, render_metrics
from tests.unit.engine.rids_pipeline import INSTANTS, PIPELINE, write_inputs
from tests.unit.engine.runs import Run, chunks_of
from tests.unit.service.workers import run_until_done, sqlite_worker


def _folder(tmp_path: Path, text: str = PIPELINE, name: str = "pipelines") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    write_inputs(folder)
    (folder / "kstats.yaml").write_text(text)
    return folder


def _add_orphan_bids(folder: Path, instants: int = INSTANTS) -> None:
    """Bids naming an auction that never comes, every 7th instant (the reduction drops them);
    the inputs cut to their first `instants`."""
    for name in ("auctions", "bids"):
        path = folder / f"{name}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        if name == "bids":
            rows += [{"ts": t, "auction": -1, "bidder": 1} for t in range(0, INSTANTS, 7)]
        rows = sorted((r for r in rows if r["ts"] < instants), key=lambda r: r["ts"])
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _join(worker) -> Join:
    (join,) = [op for op in worker.engine.executor.operators if isinstance(op, Join)]
    return join


def test_metrics_show_the_k_in_use_and_the_counters(tmp_path):
    worker = sqlite_worker(tmp_path, _folder(tmp_path))
    before = parse_metrics(render_metrics(w.metrics_snapshot(worker)).decode())
    assert not any(name.startswith("cq_constraint_") for name in before)
    run_until_done(worker)
    join = _join(worker)
    status = join.constraint_status()
    assert status is not None and status.kind == "rids"  # the worker built the reduction
    got = parse_metrics(render_metrics(w.metrics_snapshot(worker)).decode())
    labels = f'{{attribute="Bids.auction -> Auctions.id",kind="rids",operator="{join.name}"}}'
    k = got[f"cq_constraint_k{labels}"]
    assert k == status.k or (math.isinf(k) and math.isinf(status.k))
    assert got[f"cq_constraint_increases_total{labels}"] == status.increases >= 1
    assert got[f"cq_constraint_dropped_total{labels}"] == status.dropped
    assert got[f"cq_constraint_missed_total{labels}"] == status.missed
    assert got[f"cq_constraint_violations_total{labels}"] == status.violations


def test_results_equal_cq_run(tmp_path):
    # k above the inputs' true k (bids name auctions at most 31 arrivals ahead) and below the
    # bids' window (40 instants, one auction each): exact results, and orphans dropped
    text = PIPELINE.replace("k: auto", "k: 36")
    folder = _folder(tmp_path, text)
    plain = _folder(tmp_path, text.replace(
        "    constraints: [{kind: rids, attribute: auction, references: Auctions.id, k: 36}]\n", ""
    ), name="plain")
    for f in (folder, plain):
        _add_orphan_bids(f)
    run_pipeline(load_and_compile(plain / "kstats.yaml"), batch_rows=64)
    worker = sqlite_worker(tmp_path, folder)
    run_until_done(worker)
    status = _join(worker).constraint_status()
    assert status is not None and status.k == 36 and status.missed == 0 and status.dropped > 0
    assert sorted((folder / "out.jsonl").read_text().splitlines()) == sorted(
        (plain / "out.jsonl").read_text().splitlines()
    )


class ConstrainedRun(Run):
    """The live engine as the worker's deployer starts it: with the pipeline's constraints."""

    def __init__(self, compiled, chunks, starts) -> None:
        super().__init__(compiled, chunks, starts)
        self.constraints = declared(compiled.spec.streams, compiled.spec.queries)

    def start(self) -> None:
        self.engine.add_queries(plan_queries(self.pairs), self.keys, self.writers,
                                constraints=self.constraints, adherence=monitor_adherence)

    def restore(self, state) -> None:
        for key, saved in state.sources.items():
            self.engine.restore_source(key, saved)
        for group in state.groups:
            self.engine.restore_group(group, self.writers, group.queries, None,
                                      self.constraints, monitor_adherence)


def _engine_join(run: Run) -> Join:
    (join,) = [op for op in run.engine.executor.operators if isinstance(op, Join)]
    return join


@pytest.mark.parametrize("polls", [60, 120])
def test_a_snapshot_restores_the_reduction(tmp_path, polls):
    folder = _folder(tmp_path, PIPELINE.replace("k: auto", "k: 36"))
    _add_orphan_bids(folder, instants=300)  # polls read 3 rows of each input
    compiled = load_and_compile(folder / "kstats.yaml")
    chunks = chunks_of(compiled)
    whole = ConstrainedRun(compiled, chunks, {})
    whole.start()
    whole.finish()
    first = ConstrainedRun(compiled, chunks, {})
    first.start()
    for _ in range(polls):
        first.poll()
    before = _engine_join(first).constraint_status()
    assert before is not None and before.dropped > 0
    state = pickle.loads(pickle.dumps(first.engine.snapshot()))
    second = ConstrainedRun(compiled, chunks, {n: r.at for n, r in first.readers.items()})
    second.restore(state)
    assert _engine_join(second).constraint_status() == before
    second.finish()
    after = _engine_join(second).constraint_status()
    assert after is not None and after.dropped > before.dropped and after.missed == 0
    assert len(whole.writers["q"].out) > 100
    assert first.writers["q"].out + second.writers["q"].out == whole.writers["q"].out
