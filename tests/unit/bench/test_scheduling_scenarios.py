"""The simulator's named scenarios: the small tables, and the paper's orderings on bursty
ON/OFF traffic (seed 0) — memory, not invented percentages."""

from __future__ import annotations

import random

import pytest

from cq_service.bench.scheduling import run
from cq_service.bench.scheduling.scenarios import SCENARIOS, on_off_arrivals, scenario

POLICIES = ("fifo", "round_robin", "greedy", "chain")


def peaks(name: str) -> dict[str, float]:
    w = scenario(name).workload
    return {p: float(run(w, p).peak) for p in POLICIES}


def test_small_scenarios_are_the_tables():
    first = {
        name: [float(m) for m in run(scenario(name).workload, "fifo").memory[:8]]
        for name in ("example1", "counterexample", "stream-example")
    }
    assert first["example1"][:7] == [1.0, 1.2, 2.0, 2.2, 3.0, 3.2, 4.0]
    assert first["counterexample"][:7] == [1.0, 1.9, 2.9, 3.0, 3.9, 4.9, 5.0]
    assert first["stream-example"] == [0.0, 1.0, 1.2, 2.0, 2.2, 3.0, 3.2, 4.0]
    assert all(scenario(n).small for n in first) and not scenario("bursty").small


def test_two_operators_chain_is_greedy_and_fifo_is_worst():
    got = peaks("bursty-two-ops")
    assert got["chain"] == got["greedy"] < got["round_robin"] < got["fifo"]


@pytest.mark.parametrize("name", ["bursty-four-ops", "bursty-stored-join"])
def test_greedy_starves_the_selective_operator(name):
    got = peaks(name)
    assert (
        got["chain"] < min(got["fifo"], got["round_robin"]) and max(got.values()) == got["greedy"]
    )


def test_mixed_chain_beats_all():
    w = scenario("bursty").workload
    runs = {p: run(w, p) for p in POLICIES}
    for p in POLICIES[:-1]:
        assert runs["chain"].peak < runs[p].peak and runs["chain"].average < runs[p].average


def test_on_off_is_seeded_and_sized_for_the_load():
    lengths = [3, 7]
    assert on_off_arrivals(random.Random(5), lengths) == on_off_arrivals(random.Random(5), lengths)
    # One tuple per flow: the flow rate alone sets the load.
    single = on_off_arrivals(random.Random(5), lengths, max_duration=1, horizon=50_000)
    work = sum(a.count * lengths[a.path] for a in single)
    assert work / 50_000 == pytest.approx(0.8, rel=0.05)


def test_unknown_scenario():
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario("nope")
    assert "bursty" in SCENARIOS
