"""RIDS(k) on the binary join (issue 26): on random many-one streams that keep RIDS(k_true),
the join with k ≥ k_true gives the plain join's output at every instant and never holds more
rows; with k < k_true the output is the plain join's less exactly the pairs the join counts as
missed (a consistent relation: never a retraction of a pair it did not emit)."""

from __future__ import annotations

import random
from collections import Counter, deque

from hypothesis import given, settings
from hypothesis import strategies as st

from cq_service.cql.logical import ColRef
from cq_service.engine.join_constraints import FixedAdherence, JoinConstraint
from cq_service.engine.operators.join import Join
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT = DataType.INT
TYPES = [INT, INT]  # many side (auction, bid), one side (id, seller)


def rids_streams(
    rng: random.Random, auctions: int, k_true: int, late: int
) -> list[tuple[int, tuple]]:
    """Events (port, row) in arrival order: auctions 0..n−1 on port 1, and bids on port 0
    before each auction arrival i naming an auction ≤ i + k_true − 1 (join distance ≤ k_true),
    or −1 (no auction). `late` bids name auctions up to k_true + 3 further on (breaking it)."""
    events: list[tuple[int, tuple]] = []
    bid = 0
    for i in range(auctions):
        for _ in range(rng.randint(0, 3)):
            r = rng.random()
            if r < 0.1:
                a = -1
            elif late and rng.random() < 0.2:
                a = i + k_true + rng.randint(0, 3)
            else:
                a = (
                    rng.randint(max(0, i - 4), i + max(k_true, 1) - 1)
                    if k_true
                    else rng.randint(max(0, i - 4), max(0, i - 1))
                )
                if k_true == 0 and i == 0:
                    a = -1
            events.append((0, (a, bid if rng.random() < 0.8 else 0)))
            bid += 1
        events.append((1, (i, i % 3)))
    return events


def run(events, constraint, windows, per_instant, adherence=None, cut=False):
    """Feeds the events through a Join ([Rows n] windows as retractions of the oldest rows,
    `per_instant` events an instant); returns (elements, peak rows, join). With `cut`, the join
    runs every 5 instants and cuts every step of several instants in halves (its guard against
    quadratic pairs, forced)."""
    queues = [Queue("l"), Queue("r")]
    out = Queue("out")
    reader = out.reader()
    op = Join(
        "j",
        [q.reader() for q in queues],
        out,
        (ColRef(0, INT),),
        (ColRef(0, INT),),
        None,
        constraint=constraint,
        adherence=adherence,
    )
    op.out_types = TYPES + TYPES
    if cut:
        op.PAIRS_PER_ROW, op.MIN_CHECKED = -1, 0
    live: list[deque] = [deque(), deque()]
    elements: list[tuple[int, tuple, int]] = []
    peak = 0
    for start in range(0, len(events), per_instant):
        ts = start // per_instant
        pending: list[list] = [[], []]
        for port, row in events[start : start + per_instant]:
            pending[port].append((ts, row, 1))
            live[port].append(row)
            if windows[port] is not None and len(live[port]) > windows[port]:
                pending[port].append((ts, live[port].popleft(), -1))
        for p in (0, 1):
            if pending[p]:
                queues[p].push(make_batch(TYPES, pending[p]))
            queues[p].push(Heartbeat(ts))
        if cut and ts % 5 != 4 and start + per_instant < len(events):
            continue
        while op.runnable():
            op.run(1 << 20)
        while (item := reader.get()) is not None:
            if not isinstance(item, Heartbeat):
                elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
        peak = max(peak, op.state_size()[0])
    return elements, peak, op


def inserted(elements) -> Counter:
    """Rows inserted, net per instant (a pair inserted and retracted at one instant is not)."""
    net: Counter = Counter()
    for ts, row, w in elements:
        net[ts, row] += w
    c: Counter = Counter()
    for (_, row), w in net.items():
        if w > 0:
            c[row] += w
    return c


window = st.one_of(st.none(), st.integers(3, 30))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    k_true=st.integers(0, 6),
    slack=st.integers(0, 3),
    wl=window,
    wr=window,
    per_instant=st.integers(1, 4),
    cut=st.booleans(),
)
def test_exact_at_or_above_true_k(seed, k_true, slack, wl, wr, per_instant, cut):
    events = rids_streams(random.Random(seed), 40, k_true, late=0)
    plain, plain_peak, _ = run(events, None, (wl, wr), per_instant, cut=cut)
    c = JoinConstraint("rids", many=0, k=k_true + slack)
    got, peak, op = run(events, c, (wl, wr), per_instant, cut=cut)
    last = max((e[0] for e in events and plain + got), default=0)
    for t in range(last + 1):
        assert relation_at(got, t) == relation_at(plain, t), t
    assert peak <= plain_peak
    assert op.reduction.missed == 0


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    k_true=st.integers(1, 6),
    wl=window,
    per_instant=st.integers(1, 3),
    cut=st.booleans(),
)
def test_missed_pairs_below_true_k_are_counted(seed, k_true, wl, per_instant, cut):
    events = rids_streams(random.Random(seed), 40, k_true, late=1)
    plain, _, _ = run(events, None, (wl, None), per_instant, cut=cut)
    c = JoinConstraint("rids", many=0, k=k_true - 1)
    got, _, op = run(events, c, (wl, None), per_instant, cut=cut)
    last = max((e[0] for e in plain + got), default=0)
    for t in range(last + 1):
        g, p = relation_at(got, t), relation_at(plain, t)  # asserts no negative multiplicity
        assert not (g - p), t  # never a pair the plain join does not have
    assert sum((inserted(plain) - inserted(got)).values()) == op.reduction.missed


def test_fixed_adherence_and_dropped_rows():
    rng = random.Random(7)
    events = rids_streams(rng, 60, 2, late=0)
    c = JoinConstraint("rids", many=0, k=2)
    _, peak, op = run(events, c, (None, None), 1)
    _, plain_peak, _ = run(events, None, (None, None), 1)
    assert op.reduction.dropped > 0 and peak < plain_peak
    assert "RIDS(k=2" in op.describe()
    assert FixedAdherence(3).k == 3
