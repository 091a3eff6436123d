"""Stream characteristics and memory estimates: the cost model of paper 004 (PIPES).

Every edge of a plan carries (d, l, g): d the average distance between successive start
timestamps (1/d is the rate), l the average length of an element's validity interval, g the
time granularity, all in the pipeline's time unit. A source has the measured d, l = 1 and
g = 1; each operator maps its inputs' characteristics to its output's (formulas 1–8 of
brief-costmodel.md §2), and the memory an operator keeps follows from its inputs'
(§3). Estimates are steady-state averages for Poisson-like arrivals.

(1 − 1/d)^k, the chance that k time units see no element, needs d > 1: with several elements
per time unit it goes negative or meaningless. There the Poisson form e^(−k/d) is used instead
(the brief: "fits better in simulation"); `poisson=True` forces it everywhere.

>>> w = time_window(source(d=10.0), w=10_000)
>>> round(join_memory(w, w), 1)  # two 100-per-second streams, 10 s windows: elements kept
2003.0
>>> agg = time_window(source(d=50.0), w=6_000)
>>> aggregate_memory(agg), aggregate_memory(granularity(agg, 100))
(121, 52)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "Constants",
    "Edge",
    "JoinCpu",
    "aggregate",
    "aggregate_cpu",
    "aggregate_memory",
    "cross",
    "granularity",
    "group_by",
    "join_cpu",
    "join_memory",
    "project",
    "select",
    "source",
    "time_window",
    "union",
]


@dataclass(frozen=True)
class Edge:
    """(d, l, g) of one plan edge; d = inf for a stream that is empty."""

    d: float
    l: float  # noqa: E741 (the paper's name)
    g: int = 1

    @property
    def rate(self) -> float:
        """Elements per time unit."""
        return 0.0 if math.isinf(self.d) else 1.0 / self.d

    @property
    def size(self) -> float:
        """Elements valid at any instant (l/d): a relation's expected size."""
        return self.l * self.rate


EMPTY = Edge(math.inf, 0.0)


def source(d: float) -> Edge:
    """A source element is valid for one time unit: (e, [t, t + 1))."""
    if d <= 0:
        raise ValueError(f"a source's distance between elements must be > 0, got {d}")
    return Edge(d, 1.0, 1)


def project(e: Edge) -> Edge:
    """Formula 1: π changes neither rate nor lengths."""
    return e


def select(e: Edge, selectivity: float) -> Edge:
    """Formula 2: σ keeps a share of the elements."""
    if selectivity <= 0:
        return EMPTY
    return Edge(e.d / selectivity, e.l, e.g)


def union(*inputs: Edge) -> Edge:
    """Formula 3: rates add; lengths average weighted by rate."""
    rate = sum(e.rate for e in inputs)
    if rate == 0:
        return EMPTY
    return Edge(1 / rate, sum(e.l * e.rate for e in inputs) / rate, min(e.g for e in inputs))


def cross(a: Edge, b: Edge, selectivity: float = 1.0) -> Edge:
    """Formula 4: a product (`selectivity` 1) or theta-join: elements meet while both are
    valid, and a result lives for the overlap of their intervals."""
    if a.rate == 0 or b.rate == 0 or selectivity <= 0:
        return EMPTY
    span = a.l + b.l
    return Edge(a.d * b.d / (selectivity * span), a.l * b.l / span, max(a.g, b.g))


def aggregate(e: Edge, *, poisson: bool = False) -> Edge:
    """Formula 5: a scalar aggregate changes when an element starts or ends; at granularity g
    each of the 2g instants of a step may bring one."""
    if e.d >= e.l:
        return e
    length = e.g / _some(e.d, 2 * e.g, poisson)
    return Edge(length, length, e.g)


def group_by(e: Edge, groups: int, *, poisson: bool = False) -> Edge:
    """Formula 6: `groups` groups of equal share, each aggregated as in formula 5."""
    if groups < 1:
        raise ValueError("a grouping has at least one group")
    d = groups * e.d
    if d >= e.l:
        return e
    some = _some(d, 2 * e.g, poisson)
    return Edge(e.g / (groups * some), e.g / some, e.g)


def time_window(e: Edge, w: int) -> Edge:
    """Formula 7: ω(w) stretches each element's interval to w + 1 units, rounded down to the
    granularity; the rate is kept (d' = g·d/l, with l = g for a source)."""
    length = (w + 1) // e.g * e.g
    return Edge(e.g * e.d / e.l, float(length), e.g)


def granularity(e: Edge, g: int) -> Edge:
    """Formula 8: Γ(g) rounds each interval inward to multiples of g, dropping those that
    vanish (g must be a multiple of the input's granularity)."""
    if g <= 0 or g % e.g:
        raise ValueError(f"granularity {g} is not a multiple of the input's {e.g}")
    if e.l >= 2 * g:
        return Edge(e.d, e.l - g, g)
    if e.l > g:
        return Edge(e.d * g / (e.l - g), float(g), g)
    return Edge(math.inf, 0.0, g)


def join_memory(a: Edge, b: Edge, size_a: float = 1, size_b: float = 1) -> float:
    """Memory of a symmetric join's two tables (formula 9), in units of the element sizes:
    each side keeps its valid elements, plus those that wait for the other side's next
    element before they can expire."""
    return _kept(a, b) * size_a + _kept(b, a) * size_b


def aggregate_memory(e: Edge, size: float = 1, *, poisson: bool = False) -> float:
    """Memory of a scalar aggregate's list of partial aggregates (formula 15): one per step of
    g within an element's interval that sees an element start, or one in all."""
    if e.rate == 0:
        return 0
    if e.d >= e.l:
        return size
    return math.ceil(e.l / e.g * _some(e.d, e.g, poisson)) * size


def _kept(own: Edge, other: Edge) -> float:
    if own.rate == 0:
        return 0.0
    wait = 0.0 if other.rate == 0 else other.d / (2 * own.d)
    return math.ceil(own.l / own.d) + wait


def _some(d: float, k: float, poisson: bool) -> float:
    """The chance that k time units see at least one element, with d units between elements."""
    if poisson or d <= 1:
        return -math.expm1(-k / d)
    return 1 - (1 - 1 / d) ** k


@dataclass(frozen=True)
class Constants:
    """Seconds (or any one unit) per elementary step, as in the paper: C_P a predicate,
    C_F building a result, C_T a union's merge step, C_S a window's timestamp change, C_Q a
    queue operation, C_round a rounding; a join's C_B bucket operation, C_H hash, C_E expiry
    check, C_R heap operation; an aggregation's C_U update, C_I initialisation, C_O overlap
    check, C_L list operation."""

    predicate: float = 1.0
    result: float = 1.0
    merge: float = 1.0
    stamp: float = 1.0
    queue: float = 1.0
    rounding: float = 1.0
    bucket: float = 1.0
    hash: float = 1.0
    expiry: float = 1.0
    heap: float = 1.0
    update: float = 1.0
    init: float = 1.0
    overlap: float = 1.0
    list_op: float = 1.0


@dataclass(frozen=True)
class JoinCpu:
    """A symmetric join's CPU per unit of application time, by part."""

    insert: float
    probe: float
    result: float
    reorg: float

    @property
    def total(self) -> float:
        return self.insert + self.probe + self.result + self.reorg


def join_cpu(
    a: Edge,
    b: Edge,
    selectivity: float,
    c: Constants = Constants(),
    *,
    buckets: tuple[int, int] | None = None,
) -> JoinCpu:
    """The join's CPU (§3): each arrival is inserted, probes the other side's bucket, builds
    its results and purges what expired. `buckets` (#B of each side) for a hash join; None is
    nested loops (one bucket, no hashing)."""
    arrivals = a.rate + b.rate
    both = a.rate * b.rate
    hashing = 0.0 if buckets is None else c.hash
    ba, bb = buckets or (1, 1)
    return JoinCpu(
        insert=arrivals * (hashing + c.bucket + c.heap),
        probe=both * (b.l / bb + a.l / ba) * c.predicate + arrivals * hashing,
        result=selectivity * (a.l + b.l) * both * c.result,
        reorg=arrivals * (2 * c.expiry + c.bucket + c.heap),
    )


def aggregate_cpu(e: Edge, c: Constants = Constants(), *, poisson: bool = False) -> float:
    """A scalar aggregation's CPU (§3): updating the partial aggregates an element overlaps,
    starting new ones, and emitting and dropping those that ended."""
    if e.rate == 0:
        return 0.0
    out = aggregate(e, poisson=poisson)
    if e.d < e.l:
        update = e.l / (e.d * e.g) * _some(e.d, e.g, poisson) * (c.overlap + c.update)
        new = c.list_op / e.d + c.init / (2 * e.d)
    else:
        update, new = 0.0, (c.list_op + c.init) / e.d
    return update + new + (c.overlap + c.list_op) / out.d + c.overlap / e.d
