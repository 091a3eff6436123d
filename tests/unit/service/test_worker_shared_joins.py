"""Shared window joins on the worker (plan/shared_joins.py): the queries of a deployment that
start together and join the same streams on the same keys with different windows run one
shared join, and every query's results equal `cq run` of the same pipeline with each query
planned alone — also after one of them is removed, after a snapshot restored into a new engine,
and `resources.shared_join: off` keeps plain joins."""

from __future__ import annotations

import dataclasses
import pickle
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from cq_service.adaptive.estimate import Observed, estimate_plan
from cq_service.compiler import load_and_compile
from cq_service.engine.live import EngineState
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.plan.planner import plan_queries
from cq_service.plan.shared_joins import SharedJoinOp, SharedJoinRouteOp, share_window_joins
from cq_service.runner import run_pipeline
from cq_service.service.views import explain_pipeline
from cq_service.service.worker import Worker
from tests.property.harness import write_pipeline
from tests.unit.engine.runs import Run, chunks_of
from tests.unit.service.workers import run_until_done, sqlite_worker

QUERIES = {
    "near": "SELECT Istream(A.k, A.x, B.y) FROM A [Range 5], B [Range 5] WHERE A.k = B.k",
    "wide": "SELECT COUNT(*) AS n FROM A [Range 12], B [Range 3] WHERE A.k = B.k",
    "rows": "SELECT Istream(A.x, B.y) FROM A [Rows 4], B [Range 8] WHERE A.k = B.k",
    "picky": "SELECT Rstream(A.x, B.y) FROM A [Range 8], B [Range 20] "
    "WHERE A.k = B.k AND A.x > 3",
}
STREAMS = {"A": {"schema": {"k": "int", "x": "int"}}, "B": {"schema": {"k": "int", "y": "int"}}}


def data(n: int = 400) -> dict[str, list[dict[str, Any]]]:
    rnd = random.Random(2)
    out: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for name, col in (("A", "x"), ("B", "y")):
        ts = 0
        for _ in range(n):
            ts += rnd.choice([0, 0, 1, 1, 2, 3])
            out[name].append({"ts": ts, "k": rnd.randrange(4), col: rnd.randrange(10)})
    return out


def write(
    folder: Path, queries: dict[str, Any], shared_join: str | None = None, **resources: Any
) -> Path:
    pipeline: dict[str, Any] = {"streams": STREAMS, "queries": queries, "resources": resources}
    if shared_join is not None:
        resources["shared_join"] = shared_join
    path = write_pipeline(folder, pipeline, data())
    doc = yaml.safe_load(path.read_text())
    doc["name"] = "shared"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write(tmp_path / "p" / "shared", QUERIES)
    return tmp_path / "p"


def reference(tmp_path: Path, queries: dict[str, Any]) -> dict[str, str]:
    """`cq run` of the pipeline with every query planned alone: each query's sink file."""
    path = write(tmp_path / "ref", queries, shared_join="off")
    run_pipeline(load_and_compile(path))
    return {q: (path.parent / "out" / f"{q}.jsonl").read_text() for q in queries}


def kinds(worker: Worker) -> list[str]:
    return [op.kind for op in worker.engine.operators_of("shared")]


def outputs(folder: Path, queries) -> dict[str, str]:
    return {q: (folder / "shared" / "out" / f"{q}.jsonl").read_text() for q in queries}


def test_the_queries_share_one_join_and_each_equals_cq_run(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder)
    worker.reconcile()
    assert kinds(worker).count("shared join") == 1
    assert kinds(worker).count("shared join route") == 4
    assert "join" not in kinds(worker)
    text = explain_pipeline(worker, "shared")  # the API's explain shows the shared join
    assert text.count("shared window join on 1 key(s) (MQT)") == 1
    assert text.count("shared join route #") == 4
    run_until_done(worker)
    expected = reference(tmp_path, QUERIES)
    assert all(text.count("\n") > 20 for text in expected.values())
    assert outputs(folder, QUERIES) == expected


@pytest.mark.parametrize("gone", list(QUERIES))
def test_removing_a_query_leaves_the_others_exact(tmp_path: Path, folder: Path, gone: str) -> None:
    worker = sqlite_worker(tmp_path, folder, batch_rows=16)
    worker.reconcile()
    for _ in range(5):
        worker.step()
    assert not all(s.exhausted for s in worker.engine.executor.sources)  # mid-run
    kept = {q: cql for q, cql in QUERIES.items() if q != gone}
    write(folder / "shared", kept)
    [result] = worker.reconcile()
    assert result.removed == [gone] and sorted(result.kept) == sorted(kept)
    assert kinds(worker).count("shared join") == 1
    assert kinds(worker).count("shared join route") == 3
    run_until_done(worker)
    assert outputs(folder, kept) == reference(tmp_path, kept)


def test_shared_join_off_keeps_plain_joins(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write(folder / "shared", QUERIES, shared_join="off")
    worker = sqlite_worker(tmp_path, folder)
    worker.reconcile()
    assert not any("shared" in k for k in kinds(worker))
    assert kinds(worker).count("join") == 4
    run_until_done(worker)
    assert outputs(folder, QUERIES) == reference(tmp_path, QUERIES)


def test_the_budget_manager_runs_over_a_shared_join(tmp_path: Path) -> None:
    """Under a memory budget the manager measures and estimates the group's plan with its
    shared join; a query whose QoS may adjust its windows keeps a join of its own."""
    folder = tmp_path / "p"
    queries: dict[str, Any] = {
        **QUERIES,
        "tuned": {"cql": "SELECT Istream(A.x, B.y) FROM A [Range 10], B [Range 10] "
                  "WHERE A.k = B.k", "qos": {"window": [2, 10]}},
    }
    write(folder / "shared", queries, memory_budget="64 MiB")
    worker = sqlite_worker(tmp_path, folder, batch_rows=32)
    worker.reconcile()
    assert kinds(worker).count("shared join") == 1 and kinds(worker).count("join") == 1
    for i in range(10_000):
        worker.step()
        if i % 3 == 0:
            worker.budgets.tick()
        ex = worker.engine.executor
        if all(s.exhausted for s in ex.sources) and not any(o.runnable() for o in ex.operators):
            break
    worker.budgets.tick()
    worker.checkpoint()
    state = worker.budgets.states["shared"]
    assert 0 < state.estimated.memory < 64 * 2**20
    names = [q for q in queries if q != "tuned"]
    assert outputs(folder, names) == reference(tmp_path, {q: queries[q] for q in names})


class SharedRun(Run):
    """The engine snapshot tests' run, its queries planned as the worker plans a group."""

    def start(self) -> None:
        plan = share_window_joins(plan_queries(self.pairs), "mqt")
        self.engine.add_queries(plan, self.keys, self.writers)


@pytest.mark.parametrize("polls", [3, 15, 40])
def test_a_snapshot_restored_into_a_new_engine_goes_on_exactly(tmp_path: Path, polls: int) -> None:
    compiled = load_and_compile(write(tmp_path / "p", QUERIES))
    chunks = chunks_of(compiled)
    whole = SharedRun(compiled, chunks, {})
    whole.start()
    whole.finish()
    first = SharedRun(compiled, chunks, {})
    first.start()
    for _ in range(polls):
        first.poll()
    state: EngineState = pickle.loads(pickle.dumps(first.engine.snapshot()))
    [group] = state.groups
    assert sum(isinstance(n.op, SharedJoinOp) for n in group.plan.nodes) == 1
    second = SharedRun(compiled, chunks, {n: r.at for n, r in first.readers.items()})
    for key, saved in state.sources.items():
        second.engine.restore_source(key, saved)
    second.engine.restore_group(group, second.writers, group.queries)  # from its own plan
    assert [op.kind for op in second.engine.executor.downstream].count("shared join") == 1
    second.finish()
    for q, w in whole.writers.items():
        assert len(w.out) > 20
        assert first.writers[q].out + second.writers[q].out == w.out, q


def test_the_estimates_cover_a_shared_join_and_its_routes(tmp_path: Path) -> None:
    """A shared join holds each stream's largest window (as a join's sides would); a route
    holds nothing and carries its own windows' join."""
    compiled = load_and_compile(write(tmp_path / "p", QUERIES))
    pairs = [(bq, compiled.spec.queries[bq.name].sink) for bq in compiled.queries]
    plan = share_window_joins(plan_queries(pairs), "mqt")
    obs = Observed({"A": 2.0, "B": 2.0}, {"A": 40.0, "B": 40.0})
    est = estimate_plan(plan, obs)
    [shared] = [n for n in plan.nodes if isinstance(n.op, SharedJoinOp)]
    routes = [n for n in plan.nodes if isinstance(n.op, SharedJoinRouteOp)]
    # A: [Range 12] holds 13 instants of tuples (6.5 at d = 2); B: [Range 20], 10.5.
    assert est[shared.id].rows == pytest.approx(13 / 2 + 21 / 2)
    assert est[shared.id].bytes > 0 and est[shared.id].cpu > 0
    assert all(est[r.id].rows == 0 and est[r.id].bytes == 0 for r in routes)
    sizes = {n.op.windows: est[n.id].edge.size for n in routes}
    assert len(sizes) == 4 and all(s > 0 for s in sizes.values())
    # A wider window pair joins more.
    by_name = {str(a) + str(b): s for (a, b), s in sizes.items()}
    assert by_name["[Range 5][Range 5]"] < by_name["[Range 8][Range 20]"]


def test_a_kind_without_a_formula_is_estimated_as_its_input(tmp_path: Path) -> None:
    """A plan rewrite's operator the model does not know does not stop the manager: it is
    taken as its input, keeping nothing, and marked assumed."""

    @dataclasses.dataclass(frozen=True)
    class Novel:
        input: Any
        is_stream = True

        @property
        def schema(self):
            return self.input.schema

    compiled = load_and_compile(write(tmp_path / "p", {"near": QUERIES["near"]}))
    plan = compiled.plan
    source = next(n for n in plan.nodes if n.kind == "Source")
    node = PhysicalNode(len(plan.nodes), Novel(source.op), [source.id], ["near"])
    plan = PhysicalPlan([*plan.nodes, node], plan.sinks, plan.source_columns)
    est = estimate_plan(plan, Observed({"A": 2.0, "B": 2.0}))
    assert est[node.id].edge == est[source.id].edge and est[node.id].bytes == 0
    assert est[node.id].assumed == ("Novel as its input",)
