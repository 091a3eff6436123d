"""Filter ordering never changes results: random data, random conjunctions, every
`resources.filter_order`, and an orderer that switches to a random order at every batch while
profiling every dropped row, with every third batch in one pass (under every scheduling
policy), all against the reference
evaluator (docs/adaptive.md)."""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from cq_service.adaptive.filter_order import ALGORITHMS
from cq_service.engine import conjunction
from cq_service.spec.model import FILTER_ORDERS
from tests.property import strategies as strat
from tests.property.harness import assert_same, run_both, run_under_policies
from tests.unit.engine.filter_orderers import Alternating, Switching

pytestmark = pytest.mark.property

EXAMPLES = int(os.environ.get("CQ_PROPERTY_EXAMPLES", "60"))


def _switching() -> contextlib.AbstractContextManager:
    """`a-greedy` replaced by an orderer that switches to a random order at every batch, and
    every third batch run in one pass (engine/pass_choice.py)."""
    stack = contextlib.ExitStack()
    switching = lambda n, seed=0, whole_pass=False: Switching(n, seed, whole_pass)  # noqa: E731
    stack.enter_context(mock.patch.dict(ALGORITHMS, {"a-greedy": switching}))
    stack.enter_context(mock.patch.object(conjunction, "PassChooser", Alternating))
    return stack


def _with(case: strat.Case, filter_order: str) -> dict:
    pipeline = copy.deepcopy(case.pipeline)
    pipeline["resources"] = {"filter_order": filter_order}
    return pipeline


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(strat.cases(strat.conjunctive_queries))
def test_every_filter_order_gives_the_reference_result(case: strat.Case) -> None:
    with tempfile.TemporaryDirectory(prefix="cq-prop-") as d:
        for name in FILTER_ORDERS:
            engine_out, reference_out = run_both(Path(d) / name, _with(case, name), case.data)
            assert_same(engine_out, reference_out)
        # forced switches mid-stream: a random order at every batch (and profiling), under
        # every scheduling policy
        with _switching():
            pipeline = _with(case, "a-greedy")
            engines, reference_out = run_under_policies(Path(d) / "switching", pipeline, case.data)
        for engine_out in engines.values():
            assert_same(engine_out, reference_out)


@settings(
    max_examples=max(1, EXAMPLES // 2),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(strat.cases(strat.join_queries))
def test_join_residuals_and_pushed_filters_under_switching_orders(case: strat.Case) -> None:
    """Joins' residual predicates and the filters pushed below them are ordered too."""
    with tempfile.TemporaryDirectory(prefix="cq-prop-") as d:
        engine_out, reference_out = run_both(Path(d) / "ag", _with(case, "a-greedy"), case.data)
        assert_same(engine_out, reference_out)
        with _switching():
            pipeline = _with(case, "a-greedy")
            engine_out, reference_out = run_both(Path(d) / "switching", pipeline, case.data)
        assert_same(engine_out, reference_out)
