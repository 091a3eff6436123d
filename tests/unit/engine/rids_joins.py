"""The binary join under a RIDS(k) constraint, shared by its property and adherence tests:
many-one streams that keep RIDS(k_true) (with some late rows on demand), and a join run over
them instant by instant."""

from __future__ import annotations

import random
from collections import Counter, deque

from cq_service.cql.logical import ColRef
from cq_service.engine.operators.join import Join
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT = DataType.INT
TYPES = [INT, INT]  # many side (auction, bid), one side (id, seller)


def rids_streams(
    rng: random.Random, auctions: int, k_true: int, late: int, equal_bids: bool = True
) -> list[tuple[int, tuple]]:
    """Events (port, row) in arrival order: auctions 0..n−1 on port 1, and bids on port 0
    before each auction arrival i naming an auction ≤ i + k_true − 1 (join distance ≤ k_true),
    or −1 (no auction). `late` bids name auctions up to k_true + 3 further on (breaking it).
    With `equal_bids`, a fifth of the bids have id 0, so equal rows occur."""
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
            events.append((0, (a, bid if not equal_bids or rng.random() < 0.8 else 0)))
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
