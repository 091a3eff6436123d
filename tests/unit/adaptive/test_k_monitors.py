"""k-Mon monitors on scripted arrivals (thesis 003 §6.6.3, §6.7.3, §6.8.3): convergence to the
true k on stationary input, ∞ at once on an increase, and the chapter's examples digit for digit
(Examples 6.6.1, 6.7.1, 6.8.1)."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest

from cq_service.adaptive.k_constraints import (
    CA_C,
    CA_P,
    CA_W,
    OA_C,
    OA_W,
    RIDS_C,
    RIDS_P,
    RIDS_W,
    AdherenceEstimate,
    CaMonitor,
    OaMonitor,
    RidsMonitor,
)

# ---------------------------------------------------------------- scripted streams


def rids_events(distances: list[int], start: int = 0) -> list[tuple[str, int]]:
    """Children start, start+1, ...; child j's parent arrives with join distance distances[j]."""
    slots: dict[int, list[int]] = {}  # after child position -> parents arriving then
    for j, d in enumerate(distances):
        slots.setdefault(j - d, []).append(start + j)  # d = 0: after its child
    events: list[tuple[str, int]] = [("p", key) for key in slots.get(-1, [])]
    for j in range(len(distances)):
        events.append(("c", start + j))
        events.extend(("p", key) for key in slots.get(j, []))
    return events


def feed_rids(m: RidsMonitor, events: list[tuple[str, int]]) -> None:
    for side, key in events:
        (m.observe_parents if side == "p" else m.observe_children)([key])


def stationary_distances(n: int, k: int, seed: int) -> list[int]:
    """Uniform in [0, k] with k itself every 50 arrivals (every window of W sees it)."""
    rng = random.Random(seed)
    return [k if j % 50 == 0 else rng.randint(0, k) for j in range(n)]


def ca_blocks(blocks: int, k: int, start: int = 0) -> list[int]:
    """Blocks of k+1 fresh values, each block repeated twice: every clustering distance is k."""
    out: list[int] = []
    for b in range(blocks):
        values = list(range(start + b * (k + 1), start + (b + 1) * (k + 1)))
        out += values + values
    return out


def oa_blocks(blocks: int, k: int, start: int = 0) -> list[int]:
    """Ascending blocks of k+1 values, each block reversed: every scrambling distance ≤ k."""
    out: list[int] = []
    for b in range(blocks):
        out += list(range(start + (b + 1) * (k + 1) - 1, start + b * (k + 1) - 1, -1))
    return out


# ---------------------------------------------------------------- defaults and the estimate


def test_defaults_are_the_thesis_settings():
    assert (RIDS_C, RIDS_P, RIDS_W) == (1, 0.01, 500)
    assert (CA_C, CA_P, CA_W) == (1.2, 0.01, 1000)
    assert (OA_C, OA_W) == (1.2, 1000)
    assert RidsMonitor().estimate.w == 500
    assert CaMonitor().estimate.w == 1000
    assert OaMonitor().estimate.w == 1000


def test_estimate_starts_infinite_and_decreases_after_w():
    e = AdherenceEstimate(w=4)
    for d in (3, 1, 2):
        e.record(d)
        assert math.isinf(e.k)
    e.record(0)
    assert e.k == 3
    for d, k in ((1, 2), (1, 2), (1, 1)):  # the last 4 arrivals' largest distance
        e.record(d)
        assert e.k == k
    e.record(2)  # above k_u: an increase
    assert math.isinf(e.k) and e.increases == 1
    for d in (0, 0, 0):
        e.record(d)
    assert e.k == 2  # the increasing arrival counts among the next W


# ---------------------------------------------------------------- RIDS


def test_rids_example_6_6_1_distances():
    m = RidsMonitor(w=1)
    m.observe_children([10])  # the child (10, 12) came first
    m.observe_parents([10])  # s1 = (4, 10): join distance 0, nothing waits
    assert m.retained == 0
    m.observe_parents([4])
    assert list(m.observe_children([4])) == [1]  # the first S3 tuple after s1 is its child
    assert m.k == 1


@pytest.mark.parametrize("k", [0, 1, 7, 40])
def test_rids_converges_to_true_k(k):
    m = RidsMonitor(seed=1)
    feed_rids(m, rids_events(stationary_distances(3000, k, seed=k)))
    assert m.k == k
    assert m.increases == 0
    assert m.retained <= (k + 1) * 2  # parents wait only c·k_u children (plus the sampled few)


def test_rids_increase_within_k_e_resets_at_once():
    m = RidsMonitor(p=0.0)
    feed_rids(m, rids_events(stationary_distances(1000, 5, seed=0)))
    assert m.k == 5
    parent_key = 10_000
    m.observe_parents([parent_key])
    m.observe_children(range(20_000, 20_005))  # five other children: distance would be 6
    assert m.k == 5
    m.observe_children([parent_key])
    assert math.isinf(m.k) and m.increases == 1
    feed_rids(m, rids_events([6] * RIDS_W, start=30_000))
    assert m.k == 6 and m.increases == 1


def test_rids_increase_beyond_k_e_is_seen_by_sampled_parents_only():
    for p, seen in ((1.0, True), (0.0, False)):
        m = RidsMonitor(p=p)
        feed_rids(m, rids_events(stationary_distances(1000, 5, seed=0)))
        m.observe_parents([10_000])
        m.observe_children(range(20_000, 20_100))
        m.observe_children([10_000])  # join distance 101, far beyond k_e = 5
        assert math.isinf(m.k) is seen and m.increases == int(seen)


def test_rids_accepts_numpy_and_arrow_batches():
    m = RidsMonitor(w=1)
    m.observe_parents(np.array([1, 2], dtype=np.int64))
    assert list(m.observe_children(pa.array([2, 1]))) == [1, 2]


# ---------------------------------------------------------------- CA


def test_ca_example_6_7_1():
    m = CaMonitor()
    assert list(m.observe([5, 8, 5, 10])) == [0, 0, 1, 0]  # S1.B of (6,5) (8,8) (4,5) (11,10)
    assert m.closed(5, k=1)  # two non-5 values after the first 5: no future B = 5
    assert not m.closed(5, k=2)
    assert not m.closed(10, k=1)


def test_ca_distance_is_from_the_first_tuple_of_the_value():
    m = CaMonitor()
    assert list(m.observe([1, 2, 1, 3, 1])) == [0, 0, 1, 0, 2]


@pytest.mark.parametrize("k", [0, 3, 25])
def test_ca_converges_to_true_k(k):
    m = CaMonitor(seed=2)
    m.observe(ca_blocks(3000 // (k + 1) + 20, k))
    assert m.k == k
    assert m.increases == 0


def test_ca_increase_resets_at_once_then_relearns():
    k = 10
    m = CaMonitor(p=0.0)
    m.observe(ca_blocks(200, k))
    assert m.k == k
    m.observe(ca_blocks(1, k + 2, start=100_000))  # distance 12 ≤ k_e = 12
    assert math.isinf(m.k) and m.increases == 1
    m.observe(ca_blocks(CA_W // 26 + 2, k + 2, start=200_000))
    assert m.k == k + 2


def test_ca_forgets_values_beyond_k_e():
    m = CaMonitor(p=0.0, w=10)
    m.observe(ca_blocks(20, 2))
    assert m.k == 2
    assert m.retained <= 4  # ⌊1.2·2⌋ + 1 other values since the first: the rest are gone


# ---------------------------------------------------------------- OA


def test_oa_example_6_8_1():
    m = OaMonitor()
    assert list(m.observe([7, 5, 10])) == [0, 1, 0]  # S3.B of (7,9) (5,3) (10,12)
    assert m.floor(2) == 7  # OAC(2): S3.B_lo = 7


def test_oa_distance_counts_arrivals_after_the_larger_tuple():
    m = OaMonitor()
    assert list(m.observe([1, 9, 2, 3, 4, 10, 8])) == [0, 0, 1, 2, 3, 0, 5]  # 8 is 5 after the 9


@pytest.mark.parametrize("k", [0, 1, 9, 60])
def test_oa_converges_to_true_k(k):
    m = OaMonitor()
    m.observe(oa_blocks(3000 // (k + 1) + 20, k))
    assert m.k == k
    assert m.increases == 0
    assert m.retained <= math.ceil(1.2 * k) + 1


def test_oa_increase_resets_at_once_even_beyond_the_window():
    m = OaMonitor()
    m.observe(oa_blocks(500, 4))
    assert m.k == 4
    m.observe([10**9, *range(10**6, 10**6 + 50), 10**5])  # 10**5 far below max_1..max_7
    assert math.isinf(m.k) and m.increases == 1
    m.observe(oa_blocks(OA_W // 8 + 2, 7, start=10**10))
    assert m.k == 7


def test_monitors_are_deterministic_for_a_seed():
    runs = []
    for _ in range(2):
        m = RidsMonitor(seed=7, p=0.3)
        feed_rids(m, rids_events(stationary_distances(2000, 9, seed=3)))
        runs.append((m.k, m.increases, m.retained))
    assert runs[0] == runs[1]
