"""`cq calibrate`: the NNLS fit, a quick calibration on the engine, the constants file and the
command. No assertion is about wall-clock time."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from cq_service.adaptive import calibrate as cal
from cq_service.adaptive.calibrate import Sample, calibrate, fit_kind, nnls
from cq_service.adaptive.cpu import EngineCosts, KindCost
from cq_service.cli import app


def _synthetic(
    kind: str, cost: KindCost, n: int = 40, noise: float = 0.02, seed: int = 0
) -> list[Sample]:
    """Samples whose busy time follows `cost` within ±`noise` (multiplicative)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        rows_in, rows_out = int(rng.integers(1_000, 50_000)), int(rng.integers(0, 80_000))
        pairs = int(rng.integers(0, 500_000)) if cost.per_pair else 0
        reads = float(rng.integers(10, 5_000)) if cost.per_read else 0.0
        exact = EngineCosts({kind: cost}).cpu(kind, rows_in, rows_out, pairs, reads)
        seconds = exact * (1 + rng.uniform(-noise, noise))
        out.append(Sample(kind, seconds, rows_in, rows_out, pairs, f"synthetic {i}", reads))
    return out


def _sq_error(cost: KindCost, samples: list[Sample]) -> float:
    """The objective the fit minimises: squared relative errors."""
    c = EngineCosts({"k": cost})
    return sum(((c.cpu("k", *s.terms()) - s.seconds) / s.seconds) ** 2 for s in samples)


@pytest.mark.parametrize(
    "truth",
    [
        KindCost(2e-6, 3e-7, 0.0),
        KindCost(5e-6, 4e-8, 2e-7),
        KindCost(1e-7, 0.0, 0.0),
        KindCost(3e-7, 1e-7, 0.0, 2e-4),
    ],
)
def test_fit_recovers_known_constants(truth):
    fit = fit_kind("K", _synthetic("K", truth))
    for got, want in zip(
        (fit.cost.per_in, fit.cost.per_out, fit.cost.per_pair, fit.cost.per_read),
        (truth.per_in, truth.per_out, truth.per_pair, truth.per_read),
        strict=True,
    ):
        assert got == pytest.approx(want, rel=0.1, abs=1e-9)
    assert fit.samples == 40
    assert fit.error < 0.05
    assert fit.error < fit.placeholder_error


def test_a_constant_that_is_zero_is_fitted_as_zero_not_negative():
    # per_out is truly 0: noise pulls the unconstrained fit below zero for some seeds
    truth = KindCost(3e-6, 0.0, 0.0)
    negatives = 0
    for seed in range(8):
        samples = _synthetic("K", truth, noise=0.2, seed=seed)
        a = np.array([s.terms()[:2] for s in samples], float)
        y = np.array([s.seconds for s in samples])
        free, *_ = np.linalg.lstsq(a / y[:, None], np.ones(len(y)), rcond=None)
        negatives += free[1] < 0
        fit = fit_kind("K", samples)
        assert fit.cost.per_out == 0.0 if free[1] < 0 else fit.cost.per_out >= 0.0
        assert fit.cost.per_in == pytest.approx(3e-6, rel=0.1)
        assert fit.cost.per_pair == 0.0  # no pairs measured: its column is all zero
    assert negatives  # the case was exercised


def test_nnls_meets_the_optimality_conditions():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, (30, 3))
    b = a @ np.array([1.0, -2.0, 0.5]) + rng.normal(0, 0.01, 30)
    x = nnls(a, b)
    assert (x >= 0).all()
    grad = a.T @ (a @ x - b)
    assert np.all(grad[x == 0] >= -1e-9)  # no zero coordinate could improve by growing
    assert np.allclose(grad[x > 0], 0, atol=1e-8)  # the free ones are at their optimum
    assert x[1] == 0.0


def test_proportional_columns_are_not_split():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    x = nnls(a, a[:, 0] * 5)
    assert x.tolist() == pytest.approx([5.0, 0.0])


@pytest.fixture(scope="module")
def quick():
    return calibrate(quick=True)


def test_quick_calibration_fits_the_main_kinds(quick):
    kinds = quick.costs.kinds
    for kind in ("Join", "Aggregate", "WindowOp", "Filter", "Project", "Source"):
        c = kinds[kind]
        assert min(c.per_in, c.per_out, c.per_pair, c.per_read) >= 0
        assert c.per_in + c.per_out + c.per_pair + c.per_read > 0, kind
    # the settings read 64 and 1 024 rows at a time: the runs' fixed cost shows
    assert kinds["WindowOp"].per_read > 0 and kinds["Join"].per_read > 0
    assert kinds["Join"].per_pair > 0 or kinds["Join"].per_out > 0
    assert all(k in quick.fits for k in kinds)
    assert "Python" in quick.costs.machine and "cores" in quick.costs.machine


def test_quick_calibration_predicts_better_than_the_placeholder(quick):
    by_kind: dict[str, list[Sample]] = {}
    for s in quick.samples:
        by_kind.setdefault(s.kind, []).append(s)
    assert set(by_kind) == set(quick.fits)
    for kind, samples in by_kind.items():
        fit = quick.fits[kind]
        assert fit.samples == len(samples)
        assert _sq_error(fit.cost, samples) <= _sq_error(KindCost(), samples) * (1 + 1e-6), kind
    for kind in ("Join", "Aggregate", "WindowOp"):
        assert quick.fits[kind].error < quick.fits[kind].placeholder_error


def test_nested_loop_joins_have_their_pairs_measured(quick):
    joins = [s for s in quick.samples if s.kind == "Join"]
    with_pairs = [s for s in joins if s.pairs]
    assert with_pairs and len(with_pairs) < len(joins)  # hash joins have none
    assert any(s.rows_out < s.pairs for s in with_pairs)  # residuals drop candidates


def test_constants_round_trip_through_the_file(quick, tmp_path):
    path = tmp_path / "costs.json"
    quick.save(path)
    loaded = EngineCosts.load(path)
    assert loaded == quick.costs
    data = json.loads(path.read_text())
    assert set(data["fit"]) == set(quick.fits)


def test_cli_writes_the_constants(quick, tmp_path, monkeypatch):
    monkeypatch.setattr(cal, "calibrate", lambda **kw: quick)  # the run is tested above
    out = tmp_path / "sub" / "costs.json"
    result = CliRunner().invoke(
        app, ["calibrate", "--quick", "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert EngineCosts.load(out) == quick.costs
    assert "Join" in result.stdout and str(out) in result.stdout

    out2 = tmp_path / "costs2.json"
    result = CliRunner().invoke(
        app, ["calibrate", "--json", "--out", str(out2)], catch_exceptions=False
    )
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (
        data["path"] == str(out2)
        and data["kinds"]["Join"] == json.loads(out2.read_text())["kinds"]["Join"]
    )


def test_cli_writes_to_the_user_file_by_default(quick, tmp_path, monkeypatch):
    monkeypatch.setattr(cal, "calibrate", lambda **kw: quick)
    monkeypatch.setenv("CQ_COSTS", str(tmp_path / "user.json"))
    result = CliRunner().invoke(app, ["calibrate"], catch_exceptions=False)
    assert result.exit_code == 0
    assert EngineCosts.load(tmp_path / "user.json") == quick.costs


def test_explain_costs_says_where_the_constants_come_from(quick, tmp_path, monkeypatch):
    from cq_service.explain_costs import _constants_origin

    user = tmp_path / "user.json"
    monkeypatch.setenv("CQ_COSTS", str(user))
    quick.save(user)
    assert _constants_origin(EngineCosts.load()).startswith(f"{user}, measured on ")
    user.unlink()
    monkeypatch.setattr("cq_service.explain_costs.DEFAULT_PATH", tmp_path / "none.json")
    assert "not calibrated" in _constants_origin(EngineCosts.load(tmp_path / "none.json"))
