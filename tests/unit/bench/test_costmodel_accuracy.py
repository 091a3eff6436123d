"""The accuracy experiment's out-of-sample protocol: nothing measured on the test workload may
reach its estimate. The engine is replaced by a measurement function whose test-workload
numbers can be made arbitrarily wrong; the estimates must not move."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest

from cq_service.adaptive.calibrate import Sample
from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.measure import Measured
from cq_service.bench.costmodel import accuracy as A
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L

FIT = [
    A.Case("join2 fit", "join2", 10.0, 2_000, 1, 5.0),
    A.Case("group fit", "group", 50.0, 6_000, 100, 8.0),
]


def _plan(case: A.Case):
    with tempfile.TemporaryDirectory() as tmp:
        return load_and_compile(A._pipeline(case, Path(tmp), 0)).plan


class FakeEngine:
    """Synthetic measurements; those of the test workload (seeds ≥ 1 000) scaled by `skew`."""

    def __init__(self, skew: float):
        self.skew = skew

    def __call__(self, case: A.Case, seed: int, repeat: int) -> A.CaseRun:
        k = self.skew if seed >= 1_000 else 1.0
        plan = _plan(case)
        sources = [f"S{i}" for i in range(case.streams)]
        sel = {n.id: 0.02 * k for n in plan.nodes if isinstance(n.op, L.Join)}
        groups = {n.id: 50.0 * k for n in plan.nodes if isinstance(n.op, L.Aggregate)}
        observed = Observed(
            source_d={s: case.d * k for s in sources},
            row_bytes={s: 40.0 * k for s in sources},
            selectivity=sel,
            groups=groups,
            read_rows={s: case.batch_rows * k for s in sources},
        )
        measured = {
            n.id: Measured(100.0 * k, 4_000.0 * k, 1e-3 * k, 1_000, 2_000, 1e5, 50)
            for n in plan.nodes
        }
        samples = [
            Sample(n.kind, 0.1 * k * (1 + n.id), 1_000, 2_000, 0, f"{case.name} #{n.id}", 50.0 * (1 + seed % 3))
            for n in plan.nodes
        ]
        return A.CaseRun(case, plan, observed, measured, samples)


def _estimates(outcome: A.Outcome) -> list[tuple]:
    return [(r.case, label, e, ec) for r in outcome.out_of_sample for label, (e, _, ec, _) in r.operators.items()]


@pytest.mark.parametrize("skew", [0.01, 7.0])
def test_test_workload_measurements_do_not_reach_its_estimates(skew):
    tests = [A.test_case(c) for c in FIT]
    honest = A.evaluate(FIT, tests, measure=FakeEngine(1.0))
    skewed = A.evaluate(FIT, tests, measure=FakeEngine(skew))
    assert _estimates(honest) == _estimates(skewed)  # estimates did not move
    measured = [[m for (_, m, _, mc) in r.operators.values()] for r in skewed.out_of_sample]
    honest_measured = [[m for (_, m, _, mc) in r.operators.values()] for r in honest.out_of_sample]
    assert measured != honest_measured  # while what they are compared with did
    assert honest.fitted == skewed.fitted


def test_fit_workload_measurements_do_reach_the_estimates():
    """The converse, so the test above is not vacuous: skewing the fit workload moves them."""
    tests = [A.test_case(c) for c in FIT]
    honest = A.evaluate(FIT, tests, measure=FakeEngine(1.0))

    class FitSkew(FakeEngine):
        def __call__(self, case, seed, repeat):
            r = super().__call__(case, seed, repeat)
            if seed >= 1_000:
                return r
            obs = dataclasses.replace(r.observed, groups={n: 5.0 for n in r.observed.groups})
            samples = [dataclasses.replace(s, seconds=s.seconds * 3) for s in r.samples]
            return dataclasses.replace(r, observed=obs, samples=samples)

    skewed = A.evaluate(FIT, tests, measure=FitSkew(1.0))
    assert _estimates(honest) != _estimates(skewed)


def test_the_test_workload_changes_rates_windows_and_seeds():
    for c in A.cases(quick=False):
        t = A.test_case(c)
        assert t.window == 2 * c.window and t.g == c.g and t.shape == c.shape
        assert 2 <= max(t.d / c.d, c.d / t.d) <= 4
    seeds = []
    A.evaluate(FIT, [A.test_case(c) for c in FIT], seed=3, measure=lambda c, s, r: seeds.append(s) or FakeEngine(1.0)(c, s, r))
    assert seeds[:2] == [3, 4] and all(s >= 1_000 for s in seeds[2:])


def test_predict_prices_each_read():
    """Fewer rows per read means more reads per second: the estimated CPU of every operator
    grows by its constant per read times the extra reads."""
    honest = A.fit([FakeEngine(1.0)(c, i, 1) for i, c in enumerate(FIT)])
    case = A.test_case(FIT[0])
    plan = _plan(case)
    small = A.predict(case, plan, honest)
    big = A.predict(dataclasses.replace(case, window=case.window * 4), plan, honest)  # 4× rows per read
    window = next(n.id for n in plan.nodes if isinstance(n.op, L.WindowOp))
    assert small[window].reads == pytest.approx(big[window].reads * 4, rel=0.05)
