"""Adaptation delays (brief-costmodel §4, Fig. 7) on the quick run (times × ½): a join's windows
shrunk 30 s → 15 s at 40 s and grown back at 75 s change its state from t + min(l, l') to
t + max(l, l'); a Γ change of a grouped aggregation settles by t + l. Instants are application
time, never wall-clock."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.bench.costmodel import delays

SECOND = 1000  # ms


@pytest.fixture(scope="module")
def result() -> dict:
    return delays.run(quick=True, seed=0)


def test_changes_are_made_at_their_instants_on_both_windows(result):
    made = result["join"]["adjustments"]
    assert [(a["window"], a["new"], a["since"]) for a in made] == [
        ("S", 15_000, 40_000),
        ("T", 15_000, 40_000),
        ("S", 30_000, 75_000),
        ("T", 30_000, 75_000),
    ]
    (gamma,) = result["aggregation"]["adjustments"]
    assert (gamma["knob"], gamma["old"], gamma["new"], gamma["since"]) == (
        "granularity",
        1,
        10_000,
        40_000,
    )


def test_join_state_changes_from_t_plus_min_to_t_plus_max(result):
    events = result["join"]["events"]
    assert [e["predicted"] for e in events] == [(55_000, 70_000), (90_000, 105_000)]
    for e in events:
        m = e["measured"]
        start, complete = e["predicted"]
        assert m["start"] == pytest.approx(start, abs=2 * SECOND), e
        assert m["complete"] == pytest.approx(complete, abs=2 * SECOND), e
        # the bands are crossed after the state starts to move and before it arrives
        assert start <= m["exit"] <= m["entry"] <= complete + SECOND, e


def test_aggregation_settles_one_window_after_a_granularity_change(result):
    (e,) = result["aggregation"]["events"]
    assert e["predicted"] == (40_000, 70_000)
    assert e["measured"]["start"] == pytest.approx(40_000, abs=2 * SECOND)
    assert e["measured"]["complete"] == pytest.approx(70_000, abs=2 * SECOND)


def test_join_state_levels_follow_the_windows(result):
    # the join's state is its windows' tuples (its rows held also count retractions it has
    # not consolidated, an implementation matter the bench reports but does not judge)
    before, shrunk, grown = (s["measured"]["windows"] for s in result["join"]["steady"])
    assert shrunk / before == pytest.approx(0.5, abs=0.05)
    assert grown / before == pytest.approx(1.0, abs=0.05)
    for s in result["join"]["steady"]:
        assert s["measured"]["windows"] == pytest.approx(s["estimated"]["windows"], rel=0.05)


def test_aggregation_holds_fewer_groups_as_the_model_estimates(result):
    fine, coarse = result["aggregation"]["steady"]
    for s in (fine, coarse):
        assert s["measured"]["aggregate"] == pytest.approx(s["estimated"]["aggregate"], rel=0.06)
    measured = coarse["measured"]["aggregate"] / fine["measured"]["aggregate"]
    estimated = coarse["estimated"]["aggregate"] / fine["estimated"]["aggregate"]
    assert measured < 0.8 and measured == pytest.approx(estimated, abs=0.05)


def test_text_json_and_chart(result, tmp_path):
    out = delays.text(result)
    assert "join: window 30 s → 15 s" in out and "aggregation: Γ 1 ms → 10 s" in out
    assert "samples" not in delays.as_json(result)["join"]
    path = tmp_path / "delays.png"
    delays.chart(result, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_detect_reads_a_noisy_ramp():
    rng = np.random.default_rng(1)
    t = np.arange(0, 100_000, 500, dtype=float)
    level = np.interp(t, [0, 30_000, 60_000, 100_000], [4000, 4000, 2000, 2000])
    v = level + rng.normal(0, np.sqrt(level))
    m = delays.detect(t, v, 10_000, 100_000, 4000, 2000, span=15_000)
    assert m["start"] == pytest.approx(30_000, abs=1_000)
    assert m["complete"] == pytest.approx(60_000, abs=1_000)
    assert 30_000 < m["exit"] < m["entry"] < 60_000
    assert m["old_level"] == pytest.approx(4000, rel=0.02)
    assert m["new_level"] == pytest.approx(2000, rel=0.02)


def test_detect_without_a_change_reports_none():
    t = np.arange(0, 50_000, 1000, dtype=float)
    m = delays.detect(t, np.full(len(t), 4000.0), 10_000, 50_000, 4000, 2000, span=5_000)
    assert m["exit"] is None and m["entry"] is None and m["start"] is None
