"""The scheduling simulator against the papers: the three published tables digit for digit, the
lower-envelope hand checks, Theorems 1 and 2 against a brute-force clairvoyant optimum on random
small instances, and the policies' mechanics (round-robin quantum, bounded Chain)."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from cq_service.bench.scheduling import (
    Workload,
    chart,
    make_policy,
    optimum_memory,
    run,
    simulate,
)
from cq_service.bench.scheduling.optimum import optimum_memory_bfs
from cq_service.engine.scheduler.progress import (
    ProgressChart,
    chain_priorities,
    greedy_priorities,
    lower_envelope,
)

EXAMPLE1 = chart((0, 1), (1, 0.2), (2, 0))
COUNTER = chart((0, 1), (1, 0.9), (2, 0.9), (3, 0))
STORED_JOIN = chart((0, 1), (1, 0.9), (3, 1.8), (4, 0.2), (6, 0))
WORK_CONSERVING = ("fifo", "round_robin", "greedy", "chain")


def rows(workload: Workload, *policies: str) -> dict[str, list[float]]:
    return {p: [round(float(m), 10) for m in run(workload, p).memory] for p in policies}


def one_per_unit(c: ProgressChart, times: range) -> Workload:
    return Workload.build([c], [(t, 0, 1) for t in times])


# -- the published tables -------------------------------------------------------------------


def test_example1_table():
    """Paper 000, Example 1 (thesis 003 §2.3.2 for the digits)."""
    got = rows(one_per_unit(EXAMPLE1, range(7)), "fifo", "greedy", "chain")
    assert got["fifo"][:7] == [1.0, 1.2, 2.0, 2.2, 3.0, 3.2, 4.0]
    assert got["greedy"][:7] == got["chain"][:7] == [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    for memory in got.values():  # both empty after t = 13
        assert len(memory) == 15 and memory[14] == 0 and memory[13] > 0
    threshold = 3
    assert max(got["fifo"]) > threshold >= max(got["chain"])


def test_counterexample_table():
    """Per-operator greedy's bad case: Chain makes the three operators one chain, i.e. FIFO."""
    got = rows(one_per_unit(COUNTER, range(7)), "fifo", "greedy", "chain")
    assert got["fifo"][:7] == [1.0, 1.9, 2.9, 3.0, 3.9, 4.9, 5.0]
    assert got["greedy"][:7] == [1.0, 1.9, 2.8, 3.7, 4.6, 5.5, 6.4]
    assert round(sum(got["fifo"][:7]) / 7, 1) == 3.2
    assert round(sum(got["greedy"][:7]) / 7, 10) == 3.7
    assert got["chain"] == got["fifo"]


def test_stream_paper_table():
    """Paper 001 §4: arrivals at τ = 1..7, measured after arrivals, before processing."""
    got = rows(one_per_unit(EXAMPLE1, range(1, 8)), "fifo", "greedy")
    assert got["fifo"][1:8] == [1, 1.2, 2, 2.2, 3, 3.2, 4]
    assert got["greedy"][1:8] == [1, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    for memory in got.values():  # drained at τ = 15
        assert len(memory) == 16 and memory[15] == 0 and memory[14] > 0


# -- lower envelopes by hand ----------------------------------------------------------------


def test_two_chains_where_chain_is_greedy():
    assert lower_envelope(EXAMPLE1) == [0, 1, 2]
    assert (
        chain_priorities(EXAMPLE1)
        == greedy_priorities(EXAMPLE1)
        == [Fraction(4, 5), Fraction(1, 5)]
    )


def test_one_chain_of_slope_one_third():
    assert lower_envelope(COUNTER) == [0, 3]
    assert chain_priorities(COUNTER) == [Fraction(1, 3)] * 3


def test_envelope_looks_past_a_join_bump():
    """Operator 2 joins a stored relation (σ = 2): the envelope skips the bump to the fast,
    selective operator 3, so operators 1–3 are one chain; greedy ranks the join last."""
    assert lower_envelope(STORED_JOIN) == [0, 3, 4]
    assert chain_priorities(STORED_JOIN) == [Fraction(1, 5)] * 3 + [Fraction(1, 10)]
    assert greedy_priorities(STORED_JOIN)[1] < 0
    burst = one_per_unit(STORED_JOIN, range(16))
    chain, greedy = run(burst, "chain"), run(burst, "greedy")
    assert chain.peak < greedy.peak and chain.average < greedy.average


# -- the theorems, against the clairvoyant optimum -----------------------------------------


def random_chart(rng: random.Random) -> ProgressChart:
    """1–3 operators of 1–3 units each, selectivities in {0, 1/10, …, 1}."""
    t, s, points = 0, Fraction(1), [(Fraction(0), Fraction(1))]
    m = rng.randint(1, 3)
    for i in range(m):
        t += rng.randint(1, 3)
        s = s * Fraction(rng.randint(0, 10), 10) if i < m - 1 else Fraction(0)
        points.append((Fraction(t), s))
    return ProgressChart(tuple(points))


def convex_chart(rng: random.Random) -> ProgressChart:
    """A random chart cut down to its lower envelope: its own envelope."""
    c = random_chart(rng)
    return ProgressChart(tuple(c.points[i] for i in lower_envelope(c)))


def random_workload(rng: random.Random, make=random_chart, sizes="step") -> Workload:
    n = rng.randint(1, 3)
    arrivals = [
        (rng.randint(0, 5), rng.randrange(n), rng.randint(1, 2)) for _ in range(rng.randint(1, 4))
    ]
    return Workload.build([make(rng) for _ in range(n)], arrivals, sizes)


def test_theorem2_chain_within_n_of_optimal():
    """Selectivities ≤ 1, n paths: Chain ≤ OPT(t) + n at every instant (1,200 instances)."""
    rng = random.Random(2)
    worst = Fraction(0)
    for _ in range(1200):
        w = random_workload(rng)
        chain = run(w, "chain").memory
        opt = optimum_memory(w, len(chain) - 1)
        n = len(w.paths)
        assert all(c <= o + n for c, o in zip(chain, opt, strict=True)), w
        worst = max(worst, *((c - o) / n for c, o in zip(chain, opt, strict=True)))
    assert 0 < worst < 1  # not always optimal on step charts; the largest gap per path is 1/2


def test_theorem1_chain_optimal_on_lower_envelopes():
    """On charts that are their own lower envelope, with tuples shrinking along the progress
    line (the paper's lower-envelope simulation), Chain ≤ OPT(t) ≤ any policy, every instant."""
    rng = random.Random(1)
    for _ in range(600):
        w = random_workload(rng, convex_chart, sizes="linear")
        chain = run(w, "chain").memory
        assert list(chain) == optimum_memory(w, len(chain) - 1), w
        for policy in ("fifo", "round_robin", "greedy"):
            other = run(w, policy).memory
            assert all(c <= o for c, o in zip(chain, other, strict=True)), (policy, w)


def test_theorem1_needs_the_envelope_simulation():
    """With step sizes (a tuple shrinks only when an operator completes) even convex charts can
    leave Chain behind OPT — by at most Lemma 1's Σδ, here 1 per path."""
    w = Workload.build(
        [chart((0, 1), (2, 0)), chart((0, 1), (1, 0.4), (2, 0))], [(0, 0, 1), (0, 1, 1)]
    )
    chain, opt = run(w, "chain").memory, optimum_memory(w)
    assert chain[2] == Fraction(7, 5) and opt[2] == 1
    assert all(c <= o + 2 for c, o in zip(chain, opt, strict=True))
    linear = Workload.build([p.chart for p in w.paths], w.arrivals, sizes="linear")
    assert list(run(linear, "chain").memory) == optimum_memory(linear)


def test_optimum_search_and_knapsack_agree():
    """Two independent OPTs: the state search and the knapsack over arrival times, including
    charts that grow past 1 (where the search keeps every state and may idle)."""
    rng = random.Random(3)

    def bumpy(rng: random.Random) -> ProgressChart:
        c = random_chart(rng)
        if c.operators < 2:
            return c
        (t0, s0), *rest = c.points
        return ProgressChart(((t0, s0), (rest[0][0], Fraction(rng.randint(10, 25), 10)), *rest[1:]))

    checked = growing = 0
    while checked < 160:
        w = random_workload(rng, bumpy if checked % 2 else random_chart)
        monotone = all(p.monotone for p in w.paths)
        if w.tuples > (5 if monotone else 4):  # no pruning without monotone sizes: keep it small
            continue
        horizon = len(run(w, "chain").memory) - 1
        assert optimum_memory(w, horizon) == optimum_memory_bfs(w, horizon), w
        checked += 1
        growing += not monotone
    assert growing > 40


# -- the policies' mechanics ----------------------------------------------------------------


def test_every_work_conserving_policy_ends_together():
    """Same total work: the system empties at the same instant under every policy."""
    got = rows(one_per_unit(EXAMPLE1, range(7)), *WORK_CONSERVING)
    assert {len(m) for m in got.values()} == {15}
    rng = random.Random(4)
    for _ in range(200):
        w = random_workload(rng)
        ends = {len(run(w, p).memory) for p in WORK_CONSERVING}
        ends.add(len(run(w, "chain_bounded", bound=1).memory))
        assert len(ends) == 1, w


def test_chain_switches_no_more_than_round_robin():
    w = one_per_unit(EXAMPLE1, range(7))
    chain, rr = run(w, "chain"), run(w, "round_robin")
    assert (chain.switches, rr.switches) == (1, 13)


def test_latencies_and_summary():
    r = run(one_per_unit(EXAMPLE1, range(7)), "fifo")
    assert r.latencies == (2, 3, 4, 5, 6, 7, 8)
    assert (r.latency(0.5), r.latency(0.99), r.peak) == (5, 8, 4)
    assert r.average == Fraction("1.96")  # 29.4 over 15 instants


@pytest.mark.parametrize(
    ("quantum", "memory", "switches"),
    [(1, [2, 2, 1.5, 1.5, 1.5, 1, 0.5, 0.5, 0], 5), (2, [2, 2, 1.5, 1.5, 1, 1, 0.5, 0.5, 0], 3)],
)
def test_round_robin_quantum(quantum, memory, switches):
    """Two 2-unit operators, two tuples at t = 0: an operator keeps its turn for up to
    `quantum` units or until its queue empties."""
    w = Workload.build([chart((0, 1), (2, 0.5), (4, 0))], [(0, 0, 2)])
    r = simulate(w, make_policy("round_robin", quantum=quantum))
    assert [float(m) for m in r.memory] == memory and r.switches == switches


def test_bounded_chain_between_fifo_and_chain():
    """A tuple waiting more than the bound is advanced first: bound 0 is FIFO here, a bound
    longer than the whole run is Chain."""
    w = one_per_unit(EXAMPLE1, range(7))
    fifo, chain = run(w, "fifo").memory, run(w, "chain").memory
    assert run(w, "chain_bounded", bound=0).memory == fifo
    assert run(w, "chain_bounded", bound=20).memory == chain
    middle, pure = run(w, "chain_bounded", bound=3), run(w, "chain")
    assert max(chain) < middle.peak == Fraction("3.4") < max(fifo)
    assert middle.latencies == (5, 5, 5, 5, 6, 7, 8) and pure.latencies == (8,) * 7


def test_bad_inputs():
    with pytest.raises(ValueError, match="integers"):
        Workload.build([chart((0, 1), (0.5, 0))], [])
    with pytest.raises(ValueError, match="ends at size 0"):
        Workload.build([chart((0, 1), (1, 0.5))], [])
    with pytest.raises(ValueError, match="needs a latency bound"):
        make_policy("chain_bounded")
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("lifo")


def test_chain_share_between_chain_and_fifo():
    """Every unit n with ⌊n·f⌋ > ⌊(n−1)·f⌋ goes to the oldest tuple: share 0 is Chain,
    share 1 FIFO, on Example 1 and on random workloads; share 1/3 lies between on Example 1."""
    w = one_per_unit(EXAMPLE1, range(7))
    fifo, chain = run(w, "fifo"), run(w, "chain")
    assert run(w, "chain_share", share=Fraction(0)).memory == chain.memory
    assert run(w, "chain_share", share=Fraction(1)).memory == fifo.memory
    third = run(w, "chain_share", share=Fraction(1, 3))
    assert [str(m) for m in third.memory[:8]] == ["1", "6/5", "7/5", "11/5", "12/5", "13/5",
                                                  "17/5", "13/5"]
    assert chain.peak < third.peak == Fraction(17, 5) < fifo.peak
    assert third.latencies == (3, 5, 7, 8, 8, 8, 8)  # FIFO: (2, …, 8), Chain: all 8
    rng = random.Random(5)
    for _ in range(100):
        w = random_workload(rng)
        assert run(w, "chain_share", share=Fraction(0)).memory == run(w, "chain").memory
        assert run(w, "chain_share", share=Fraction(1)).memory == run(w, "fifo").memory
    with pytest.raises(ValueError, match="needs a share"):
        make_policy("chain_share")
    with pytest.raises(ValueError, match="between 0 and 1"):
        make_policy("chain_share", share=Fraction(3, 2))
