"""Window reduction vs load shedding (brief-costmodel §5, Figs. 9–11) on a short run: both halve
the join's state; halving the windows keeps half the results (exactly the close pairs), shedding
a quarter; both keep only results of the full run."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.bench.costmodel import shedding


@pytest.fixture(scope="module")
def result() -> dict:
    return shedding.run(seconds=120, seed=0)


def test_both_ways_halve_the_join_state(result):
    for label in ("window", "shedding"):
        for k in ("state_rows", "state_bytes"):
            assert result["ratios"][label][k] == pytest.approx(0.5, abs=0.08), (label, k)


def test_full_state_matches_the_windows_contents(result):
    # Two windows of 10 s at 100 tuples/s each (brief §6: model 2,003 elements).
    expect = 2 * shedding.RATE * shedding.WINDOW_S
    assert result["runs"]["full"]["state_rows"] == pytest.approx(expect, rel=0.05)


def test_results_kept_half_by_window_reduction_a_quarter_by_shedding(result):
    ratios = result["ratios"]
    assert ratios["window"]["results"] == pytest.approx(0.5, abs=0.08)
    assert ratios["shedding"]["results"] == pytest.approx(0.25, abs=0.08)
    assert ratios["window"]["probe_work"] == pytest.approx(0.5, abs=0.08)
    assert ratios["shedding"]["probe_work"] == pytest.approx(0.25, abs=0.08)


def test_reduced_results_are_the_full_runs(result):
    checks = result["checks"]
    assert checks["window_subset"] and checks["shedding_subset"]
    assert checks["close_kept_by_window"] == 1.0
    assert checks["window_is_close_results"]


def test_shedding_drops_about_half_of_each_input(result):
    shed = result["runs"]["shedding"]
    assert shed["shed_in"] == sum(result["tuples"].values())
    assert shed["shed_dropped"] / shed["shed_in"] == pytest.approx(0.5, abs=0.02)
    assert result["runs"]["full"]["shed_in"] == result["runs"]["window"]["shed_in"] == 0


def test_text_shows_every_run_and_the_checks(result):
    out = shedding.text(result)
    assert "full 10 s windows" in out and "windows 5 s" in out and "shed p = 0.5" in out
    assert "window yes, shedding yes" in out


def test_input_is_poisson_at_the_rate_and_reproducible():
    a, b = shedding.generate(60, seed=3), shedding.generate(60, seed=3)
    for name in ("S", "T"):
        assert a[name].equals(b[name])
        ts = a[name].column("ts").to_numpy()
        assert (np.diff(ts) >= 0).all() and ts[-1] <= 60_000
        assert len(ts) == pytest.approx(60 * shedding.RATE, rel=0.1)
        keys = a[name].column("a").to_numpy()
        assert keys.min() >= 0 and keys.max() < shedding.KEYS
    assert not a["S"].equals(shedding.generate(60, seed=4)["S"])
