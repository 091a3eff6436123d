"""Property tests: the engine agrees exactly with the reference evaluator on random pipelines.

Each test draws a pipeline (one feature family of queries, see `strategies`) and small data,
runs it through the engine in-process and through `tests.reference`, and compares the outputs
element for element (`harness.assert_same`). Queries with QoS run under a schedule of window
and granularity changes, compared with the reference replaying the engine's adjustment log.
The suite runs 15 × 60 = 900 cases by default;
set CQ_PROPERTY_EXAMPLES to change the count per test (e.g. 2000 for a long local run).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from cq_service.compiler import load_and_compile
from cq_service.cql.logical import Aggregate
from cq_service.plan.panes import PanedAggregateOp, fuse_panes
from tests.property import strategies as strat
from tests.property.harness import assert_same, run_adjusted, run_under_policies, write_pipeline

pytestmark = pytest.mark.property

EXAMPLES = int(os.environ.get("CQ_PROPERTY_EXAMPLES", "60"))

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(case: strat.Case) -> None:
    """The engine equals the reference under every scheduling policy."""
    with tempfile.TemporaryDirectory(prefix="cq-prop-") as d:
        engines, reference_out = run_under_policies(Path(d), case.pipeline, case.data)
        for engine_out in engines.values():
            assert_same(engine_out, reference_out)


@SETTINGS
@given(strat.cases(strat.window_queries))
def test_windows_and_filters(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.join_queries))
def test_joins(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.aggregate_queries))
def test_aggregates(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.aggregate_queries, wide=True))
def test_aggregates_over_many_groups(case: strat.Case) -> None:
    """Up to 150 elements whose int columns take up to 61 values: tens of groups at once, many
    created and emptied within one batch (the columnar group table, then the general path)."""
    check(case)


@SETTINGS
@given(strat.cases(strat.extreme_queries, wide=True))
def test_min_max_over_many_groups(case: strat.Case) -> None:
    """MIN/MAX of ints over windows with deletions, many groups (the columnar group table's
    multisets, group_multiset.py), with and without HAVING, under Istream, Dstream, Rstream."""
    check(case)


@SETTINGS
@given(strat.cases(strat.extreme_queries))
def test_min_max_over_few_groups(case: strat.Case) -> None:
    """The same over few values: repeated values, extremes deleted and re-inserted."""
    check(case)


@SETTINGS
@given(strat.cases(strat.distinct_queries, wide=True))
def test_distinct_aggregates_over_many_groups(case: strat.Case) -> None:
    """COUNT/SUM/AVG(DISTINCT) of ints over windows with deletions, many groups (the columnar
    group table's multisets, group_multiset.py), with and without HAVING, under Istream,
    Dstream, Rstream."""
    check(case)


@SETTINGS
@given(strat.paned_cases())
def test_paned_aggregates(case: strat.Case) -> None:
    """Aggregates over [Range T Slide L] with several slides per window, over many groups,
    maybe with HAVING, stretched time (empty slides) and Istream/Dstream/Rstream: each runs as
    one paned operator (plan/panes.py), which the plan must show."""
    with tempfile.TemporaryDirectory(prefix="cq-prop-") as d:
        compiled = load_and_compile(write_pipeline(Path(d) / "plan", case.pipeline, case.data))
        fused = [n for n in fuse_panes(compiled.plan).nodes if isinstance(n.op, PanedAggregateOp)]
        assert len(fused) >= 1 and all(
            isinstance(n.op, PanedAggregateOp) or not isinstance(n.op, Aggregate)
            for n in fuse_panes(compiled.plan).nodes
        ), "every aggregate runs paned"
    check(case)


@SETTINGS
@given(strat.cases(strat.setop_queries))
def test_set_operations(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.subquery_queries))
def test_subqueries(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.correlated_aggregate_queries))
def test_correlated_aggregate_subqueries(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.r2s_queries))
def test_relation_to_stream(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.view_pipelines))
def test_views(case: strat.Case) -> None:
    check(case)


@SETTINGS
@given(strat.cases(strat.mixed_queries))
def test_mixed(case: strat.Case) -> None:
    check(case)


def check_adjusted(case: strat.AdjustedCase) -> None:
    """Changed at run time, the engine equals the reference replaying its adjustment log, and
    a run replaying that log from the start (`cq run --adjustments`) gives the same again."""
    with tempfile.TemporaryDirectory(prefix="cq-prop-") as d:
        live, replayed, reference_out = run_adjusted(Path(d), case.pipeline, case.data, case.schedule)
        assert_same(live, reference_out)
        assert_same(replayed, reference_out)


@SETTINGS
@given(strat.adjusted_cases(strat.sized_window_queries))
def test_window_changes(case: strat.AdjustedCase) -> None:
    check_adjusted(case)


@SETTINGS
@given(strat.adjusted_cases(strat.view_pipelines))
def test_window_changes_on_views(case: strat.AdjustedCase) -> None:
    check_adjusted(case)


@SETTINGS
@given(strat.adjusted_cases(strat.mixed_queries))
def test_window_changes_on_mixed_queries(case: strat.AdjustedCase) -> None:
    check_adjusted(case)
