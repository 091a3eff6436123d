"""State snapshots of the live engine: stopping at any cut, saving every operator's state,
and going on in a new engine from that state gives, element for element, what one engine
running straight through gives — for random queries of every family the property tests draw
(windows of every kind, joins, aggregates, set operations, subqueries, Istream/Dstream/
Rstream, relations, disordered streams).

Each source is read in small chunks through a reader that can start at any chunk (as a Kafka
reader seeks to an offset); the cut falls after a random number of polls. The state goes
through pickle, as the worker's snapshot store writes it."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.compiler import load_and_compile
from cq_service.engine.live import EngineState
from cq_service.engine.operators.base import StateMismatch
from tests.property import strategies as strat
from tests.property.harness import write_pipeline
from tests.unit.engine.runs import Run, chunks_of

FAMILIES = {
    "windows": strat.window_queries,
    "joins": strat.join_queries,
    "aggregates": strat.aggregate_queries,
    "set operations": strat.setop_queries,
    "subqueries": strat.subquery_queries,
    "correlated aggregates": strat.correlated_aggregate_queries,
}


def straight(compiled: Any, chunks: dict[str, list[Any]]) -> dict[str, list]:
    run = Run(compiled, chunks, {})
    run.start()
    run.finish()
    return {q: w.out for q, w in run.writers.items()}


def interrupted(compiled: Any, chunks: dict[str, list[Any]], polls: int) -> dict[str, list]:
    """Run `polls` polls, snapshot (through pickle), and finish in a new engine."""
    first = Run(compiled, chunks, {})
    first.start()
    for _ in range(polls):
        if not first.poll():
            break
    state: EngineState = pickle.loads(pickle.dumps(first.engine.snapshot()))
    again = pickle.loads(pickle.dumps(first.engine.snapshot()))
    assert pickle.dumps(again) == pickle.dumps(state)  # a snapshot changes nothing
    second = Run(compiled, chunks, {n: r.at for n, r in first.readers.items()})
    for key, saved in state.sources.items():
        second.engine.restore_source(key, saved)
    for group in state.groups:
        second.engine.restore_group(group, second.writers, group.queries)
    second.finish()
    return {q: first.writers[q].out + second.writers[q].out for q in first.writers}


SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_restored_engine_goes_on_exactly(family: str) -> None:
    @SETTINGS
    @given(strat.cases(FAMILIES[family]), st.integers(0, 40))
    def check(case: strat.Case, polls: int) -> None:
        with tempfile.TemporaryDirectory(prefix="cq-snap-") as d:
            compiled = load_and_compile(write_pipeline(Path(d), case.pipeline, case.data))
            chunks = chunks_of(compiled)
            expected = straight(compiled, chunks)
            assert interrupted(compiled, chunks, polls) == expected

    check()


def test_a_state_does_not_load_into_another_operator(tmp_path: Path) -> None:
    pipeline = {"streams": {"S": {"schema": {"a": "int"}, "format": "jsonl"}},
                "queries": {"q": "SELECT a, COUNT(*) FROM S [Rows 3] GROUP BY a",
                            "p": "SELECT Istream(a) FROM S [Range 5] WHERE a > 1"}}
    data = {"S": [{"ts": t, "a": t % 3} for t in range(20)]}
    compiled = load_and_compile(write_pipeline(tmp_path, pipeline, data))
    run = Run(compiled, chunks_of(compiled), {})
    run.start()
    run.poll()
    state = run.engine.snapshot()
    [group] = state.groups
    ops = run.engine.executor.downstream
    rows = next(op for op in ops if op.kind == "rows window")
    agg = next(op for op in ops if op.kind == "aggregate")
    saved = next(s for n, s in group.nodes.items() if "_groups" in s)
    with pytest.raises(StateMismatch):
        rows.restore(saved)
    agg.restore(saved)  # its own kind takes it
