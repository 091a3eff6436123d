"""MJoins fed and drained by hand, for the MJoin tests (unit and property): inputs of (k, v)
rows, the join of their relations by brute force, and scripted probe orderers and cache
selectors that change the join's choices at every chance."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from cq_service.cql.logical import ColRef
from cq_service.engine.cache_policy import Choice, SegmentStats
from cq_service.engine.operators.mjoin import MJoin
from cq_service.engine.probe_order import PositionProfile
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.plan.mjoins import Edge, static_order
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT, BOOL = DataType.INT, DataType.BOOL
TYPES = [INT, INT]  # every input: (k, v)


def col(i: int) -> ColRef:
    return ColRef(i, INT)


# A chain 0 —k— 1 —v=k— 2: I0.k = I1.k, I1.v = I2.k
CHAIN = (Edge(0, col(0), 1, col(0)), Edge(1, col(1), 2, col(0)))
# A triangle on k: I0.k = I1.k, I1.k = I2.k, I2.k = I0.k
TRIANGLE = (Edge(0, col(0), 1, col(0)), Edge(1, col(0), 2, col(0)), Edge(2, col(0), 0, col(0)))


class Inputs:
    """An MJoin over n inputs of (k, v) rows, fed and drained by hand."""

    def __init__(self, n: int, edges, filters=(), orders=None):
        self.queues = [Queue(f"in{i}") for i in range(n)]
        out = Queue("out")
        self.reader = out.reader()
        self.orders = orders or tuple(static_order(n, edges, i) for i in range(n))
        self.op = MJoin(
            "mj",
            [q.reader() for q in self.queues],
            out,
            [2] * n,
            edges,
            tuple(filters),
            self.orders,
        )
        self.op.out_types = TYPES * n
        self.elements: list[tuple[int, tuple, int]] = []
        self.fed: list[list[tuple]] = [[] for _ in range(n)]

    def push(self, port: int, *elems: tuple) -> None:
        self.fed[port].extend(elems)
        self.queues[port].push(make_batch(TYPES, elems))

    def beat(self, ts: int) -> None:
        for q in self.queues:
            q.push(Heartbeat(ts))

    def run(self) -> None:
        while self.op.runnable():
            self.op.run(1 << 20)
        last = None
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                continue
            ts = item.ts.tolist()
            assert ts == sorted(ts)
            if ts:
                assert last is None or ts[0] >= last
                last = ts[-1]
            self.elements.extend(zip(ts, item.rows(), item.w.tolist()))


def _rel(elems, t) -> Counter:
    c: Counter = Counter()
    for e in elems:
        if e[0] <= t:
            c[e[1]] += e[2] if len(e) > 2 else 1
    return +c


def brute(fed, t, match) -> Counter:
    out: Counter = Counter()
    rels = [_rel(f, t).items() for f in fed]
    for combo in product(*rels):
        rows = tuple(x for r, _ in combo for x in r)
        if match(rows):
            w = 1
            for _, c in combo:
                w *= c
            out[rows] += w
    return out


def eq(a, b) -> bool:
    return a is not None and b is not None and a == b


def chain_match(r) -> bool:  # (k0, v0, k1, v1, k2, v2)
    return eq(r[0], r[2]) and eq(r[3], r[4])


def triangle_match(r) -> bool:
    return eq(r[0], r[2]) and eq(r[2], r[4]) and eq(r[4], r[0])


def check(j: Inputs, match, upto: int) -> None:
    for t in range(upto + 1):
        assert relation_at(j.elements, t) == brute(j.fed, t, match), t


def feed_chain(j: Inputs) -> None:
    j.push(0, (1, (1, 10)), (2, (1, 11)), (2, (1, 11)))  # a duplicate
    j.push(1, (1, (1, 5)), (3, (None, 5)), (3, (2, 6)))  # a NULL key
    j.push(2, (2, (5, 0)), (2, (None, 1)), (3, (6, 2)))
    j.beat(3)
    j.push(0, (4, (2, 12)), (5, (1, 10), -1))  # a delete
    j.push(1, (4, (1, 5)), (5, (1, 5), -1))  # an insert and a delete of equal rows
    j.push(2, (4, (5, 0)), (6, (5, 0), -1))
    j.beat(6)
    j.run()


def feed_triangle(t: Inputs) -> None:
    """Duplicates, a delete and elements of every input at one instant, on TRIANGLE (to 3)."""
    t.push(0, (1, (1, 0)), (1, (1, 0)), (2, (2, 1)))
    t.push(1, (1, (1, 1)), (2, (2, 2)))
    t.push(2, (1, (1, 3)), (2, (1, 4)))
    t.beat(2)
    t.push(0, (3, (1, 9)), (3, (1, 0), -1))
    t.push(1, (3, (1, 7)))
    t.beat(3)
    t.run()


class RandomProbes:
    """A random order through the allowed candidates at every profile (every run), chosen as
    it is observed and handed over at the next re-optimization (engine/streamon.py)."""

    name = "random"
    kind = "probe order: random"
    watches = "nothing"
    every = 1
    rows = 64

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.profiles: list[PositionProfile] = []
        self._chosen: dict[int, tuple[int, ...]] = {}
        self._due = False

    def observe(
        self,
        pipeline: int,
        order: tuple[int, ...],
        profile: Sequence[PositionProfile],
        candidates: Callable[[frozenset[int]], Sequence[int]],
    ) -> None:
        self.profiles.extend(profile)
        self._due = True
        placed = [pipeline]
        while len(placed) < len(order):
            allowed = list(candidates(frozenset(placed)))
            if not allowed:
                return
            placed.append(int(self.rng.choice(allowed)))
        self._chosen[pipeline] = tuple(placed)

    def statistics(self) -> dict[str, object]:
        return {}

    def significant(self) -> bool:
        return self._due

    def reoptimize(self) -> bool:
        self._due = False
        return bool(self._chosen)

    def take_orders(self) -> dict[int, tuple[int, ...]]:
        chosen, self._chosen = self._chosen, {}
        return chosen


class AllCaches:
    """Every candidate used (overlaps: the first), from the first choice; `every` steps."""

    name = "all"

    def __init__(self, every: int = 1, rows: int | None = None):
        self.every = every
        self.rows = rows

    def choose(self, stats: Sequence[SegmentStats], pool_rows: int) -> Choice:
        return Choice({s.segment: self.rows or pool_rows for s in stats}, frozenset())


class RandomCaches:
    """A random subset used (random pool shares, some tiny), another profiled, every step."""

    name = "random"
    every = 1

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def choose(self, stats: Sequence[SegmentStats], pool_rows: int) -> Choice:
        used = {
            s.segment: int(self.rng.choice([1, 3, 1000])) for s in stats if self.rng.random() < 0.6
        }
        prof = frozenset(s.segment for s in stats if self.rng.random() < 0.5)
        return Choice(used, prof)
