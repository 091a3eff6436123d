"""Backfill equals `cq run` on a random sample of the property tests' queries and inputs.

Each case is a pipeline from `tests/property/strategies` (every feature family), run by `cq run`
to jsonl sinks; its streams are archived (`archive_fixture`), and each query with a sink is
backfilled to a second jsonl file from the whole archive and from a T1 inside the data, on two
tasks (keyed streams filtered in each) or on three through the shuffle. The files must be
identical line for line (at and after T1), so both the elements of every instant and their
canonical order within it agree.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.batch.backfill import plan_backfill, run_backfill
from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from cq_service.spec.model import SinkSpec
from tests.property import strategies as strat
from tests.property.harness import write_pipeline
from tests.unit.batch.archive_fixture import write_archive

FAMILIES = (
    strat.window_queries, strat.join_queries, strat.aggregate_queries, strat.setop_queries,
    strat.subquery_queries, strat.correlated_aggregate_queries, strat.r2s_queries,
    strat.view_pipelines, strat.mixed_queries,
)


def _lines(path: Path, start: int | None) -> list[str]:
    import json

    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and (start is None or json.loads(line)["_ts"] >= start):
            out.append(line)
    return out


def _check(case: strat.Case, spark, tmp: Path, pick: int, spread: tuple) -> None:
    path = write_pipeline(tmp, case.pipeline, case.data)
    run_pipeline(load_and_compile(path))
    spec = load_pipeline(path)
    end = write_archive(spec, tmp / "archive")
    stamps = sorted(int(r["ts"]) for rows in case.data.values() for r in rows
                    if isinstance(r.get("ts"), int))
    middle = stamps[pick % len(stamps)] if stamps else None
    for name, q in spec.queries.items():
        if q.sink is None:
            continue
        for start in (None, middle):
            out = tmp / "backfill" / f"{name}-{start}.jsonl"
            redirected = replace(spec, queries={
                **spec.queries, name: replace(q, sink=SinkSpec("file", str(out), "jsonl"))})
            plan = plan_backfill(redirected, name, start=start, end=end, root=tmp / "archive")
            run_backfill(plan, spark, sink=True, spread=spread[0], partitions=spread[1])
            expected = _lines(Path(q.sink.path), start)
            assert _lines(out, None) == expected, (plan.describe(), path.read_text())


@settings(max_examples=int(os.environ.get("CQ_BACKFILL_EXAMPLES", "14")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=st.one_of(*(strat.cases(f) for f in FAMILIES)), pick=st.integers(0, 1000),
       spread=st.sampled_from([(None, None), ("shuffle", 3)]))
def test_backfill_equals_cq_run_on_random_queries(spark, case: strat.Case, pick: int,
                                                  spread: tuple) -> None:
    with tempfile.TemporaryDirectory(prefix="cq-backfill-") as d:
        _check(case, spark, Path(d), pick, spread)
