"""MJoin on the worker (results equal the tree's), and an engine with MJoins snapshotted and
restored into a new engine at any poll (results equal an uninterrupted run's)."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
import yaml

from cq_service.compiler import load_and_compile, run_plan
from cq_service.cql import logical as L
from cq_service.plan.mjoins import MJoinOp, multiway_joins
from cq_service.plan.planner import plan_queries
from cq_service.runner import run_pipeline
from tests.property.harness import write_pipeline
from tests.unit.engine.runs import Run, chunks_of
from tests.unit.service.workers import run_until_done, sqlite_worker

QUERIES = {
    "three": "SELECT Istream(A.k, A.x, B.y, C.z) FROM A [Range 5], B [Rows 4], C [Range 8] WHERE A.k = B.k AND B.y = C.k",
    "count": "SELECT COUNT(*) AS n FROM A [Range 12], B [Range 3], C [Now] WHERE A.k = B.k AND A.x = C.z AND B.y < C.k",
}
STREAMS = {"A": {"schema": {"k": "int", "x": "int"}}, "B": {"schema": {"k": "int", "y": "int"}},
           "C": {"schema": {"k": "int", "z": "int"}}}


def data(n=300):
    rnd = random.Random(3)
    out = {}
    for name, col in (("A", "x"), ("B", "y"), ("C", "z")):
        ts = 0
        out[name] = []
        for _ in range(n):
            ts += rnd.choice([0, 0, 1, 1, 2])
            out[name].append({"ts": ts, "k": rnd.randrange(4), col: rnd.randrange(4)})
    return out


def write(folder: Path, join: str) -> Path:
    path = write_pipeline(folder, {"streams": STREAMS, "queries": QUERIES, "resources": {"join": join}}, data())
    doc = yaml.safe_load(path.read_text())
    doc["name"] = "mj"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_worker_runs_mjoin_and_equals_tree(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write(folder / "mj", "mjoin")
    worker = sqlite_worker(tmp_path, folder)
    worker.reconcile()
    kinds = [op.kind for op in worker.engine.operators_of("mj")]
    assert kinds.count("mjoin") == 2 and "join" not in kinds
    run_until_done(worker)
    ref = write(tmp_path / "ref", "tree")
    run_pipeline(load_and_compile(ref))
    for q in QUERIES:
        got = (folder / "mj" / "out" / f"{q}.jsonl").read_text()
        assert got == (ref.parent / "out" / f"{q}.jsonl").read_text()
        assert got.count("\n") > 20


def test_under_auto_the_worker_runs_the_forms_cq_run_chooses(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    path = write(folder / "mj", "auto")
    planned = run_plan(load_and_compile(path))
    mjoins = sum(isinstance(n.op, MJoinOp) for n in planned.nodes)
    assert mjoins  # the cost model rewrites these three-way joins
    worker = sqlite_worker(tmp_path, folder)
    worker.reconcile()
    kinds = [op.kind for op in worker.engine.operators_of("mj")]
    joins = sum(isinstance(n.op, L.Join) for n in planned.nodes)
    assert (kinds.count("mjoin"), kinds.count("join")) == (mjoins, joins)


class MRun(Run):
    def start(self) -> None:
        plan = multiway_joins(plan_queries(self.pairs), "mjoin")
        self.engine.add_queries(plan, self.keys, self.writers)


@pytest.mark.parametrize("polls", [3, 15, 40])
def test_snapshot_restored_into_a_new_engine(tmp_path: Path, polls: int) -> None:
    compiled = load_and_compile(write(tmp_path / "p", "mjoin"))
    chunks = chunks_of(compiled)
    whole = MRun(compiled, chunks, {})
    whole.start()
    whole.finish()
    first = MRun(compiled, chunks, {})
    first.start()
    for _ in range(polls):
        first.poll()
    state = pickle.loads(pickle.dumps(first.engine.snapshot()))
    [group] = state.groups
    assert sum(isinstance(n.op, MJoinOp) for n in group.plan.nodes) == 2
    second = MRun(compiled, chunks, {n: r.at for n, r in first.readers.items()})
    for key, saved in state.sources.items():
        second.engine.restore_source(key, saved)
    second.engine.restore_group(group, second.writers, group.queries)
    second.finish()
    for q, w in whole.writers.items():
        assert len(w.out) > 20
        assert first.writers[q].out + second.writers[q].out == w.out, q
