"""The random query mix of the paper's scalability experiment (brief-costmodel §5, Fig. 12).

A seeded generator draws the paper's random plans: ω⋈ω 30%, 3-way left-deep join 20%, 4-way
left-deep 10%, bushy 4-way 10%, α(Γ(ω)) 10%, α(Γ(ω))⋈ω 10%, α(Γ(ω))⋈α(Γ(ω)) 10%, each over
distinct streams among 50 Poisson sources at 2–600 tuples/min (uniform). A stream has integer
keys k50, k80, k125 and k200 (uniform on 0..D−1) and a value v (0..999). A join is a hash join
(2 of 3) on an equi-predicate over one key, σ⋈ = 1/D ∈ {0.02, 0.0125, 0.008, 0.005}, or a
nested-loop join (1 of 3) on a band ``X.k200 >= Y.k200 AND X.k200 < Y.k200 + c``, c ∈ 1..4,
σ⋈ ≈ c/200 ∈ 0.005–0.02. An aggregation groups by one key with COUNT or SUM. Left-deep joins
follow the FROM order (the planner's); a bushy join's halves and the aggregations are subqueries
in FROM. Every query gets ``qos: {window: [lo, hi], granularity: [1, 10, …]}``: lo uniform in
1–15 min, hi uniform in lo–30 min, a ladder from 1 ms to a coarsest rung of 100, 1,000 or
10,000 ms; its windows start at hi (full precision); its weight is 1–4 (uniform).

The timeline is the paper's: the initial queries at 0; from 1 h to 1 h 30 min, new queries
every 72 s; at 2 h a burst; the end at 2 h 30 min. `Timeline.scale` multiplies every duration
(windows, granularities, instants); rates stay in tuples per minute, so a window holds `scale`
times the tuples of the paper's.

The generator knows each query's characteristics (its streams' rates, its joins' σ⋈, its
groupings' keys): `managed_queries` gives the resource manager's view of each query from them,
without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.manager import ManagedQuery, window_knobs
from cq_service.adaptive.poisson import poisson_timestamps
from cq_service.compiler import compile_pipeline
from cq_service.cql import logical as L
from cq_service.plan.physical import PhysicalPlan
from cq_service.plan.planner import plan_queries
from cq_service.spec import load_pipeline_text

__all__ = [
    "COLUMNS",
    "KINDS",
    "NESTED_LOOPS",
    "RATE_PER_MIN",
    "WEIGHTS",
    "GenQuery",
    "Join",
    "Mix",
    "Timeline",
    "generate",
    "managed_queries",
    "need",
    "pipeline_text",
    "write_streams",
]

# The paper's mix (brief-costmodel §5, Fig. 12).
KINDS = (
    ("join2", 0.30),
    ("join3", 0.20),
    ("join4", 0.10),
    ("bushy4", 0.10),
    ("agg", 0.10),
    ("aggjoin", 0.10),
    ("aggagg", 0.10),
)
NESTED_LOOPS = 1 / 3  # share of joins that are nested-loop (band) joins
KEY_DOMAINS = (50, 80, 125, 200)  # a hash join's σ⋈ = 1/D: 0.02 … 0.005
BAND_KEY = 200  # a band join's key domain; σ⋈ ≈ c/200 for a band of width c
BANDS = (1, 2, 3, 4)
VALUES = 1000  # v is uniform on 0..999
STREAMS = 50
RATE_PER_MIN = (2.0, 600.0)
MINUTE = 60_000  # ms
WINDOW_LOW = (1 * MINUTE, 15 * MINUTE)  # a query's smallest window, drawn uniformly
WINDOW_HIGH = 30 * MINUTE  # its largest: uniform between its smallest and this
RUNGS = (1, 10, 100, 1_000, 10_000)  # granularity ladders, ms
COARSEST = (100, 1_000, 10_000)
WEIGHTS = (1, 2, 3, 4)


@dataclass(frozen=True)
class Timeline:
    """When queries arrive, in the paper's time (ms), before `scale`: `initial` at 0, `trickle`
    queries every `trickle_every` from `trickle_from` to `trickle_to`, `burst` at `burst_at`;
    the run ends at `end`; the manager runs every `manage_every`."""

    initial: int = 5_000
    trickle: int = 10
    trickle_from: int = 3_600_000
    trickle_to: int = 5_400_000
    trickle_every: int = 72_000
    burst: int = 500
    burst_at: int = 7_200_000
    end: int = 9_000_000
    manage_every: int = 60_000
    scale: float = 1.0

    def ms(self, t: float) -> int:
        """A duration of the paper's time, scaled."""
        return max(1, round(t * self.scale))

    def arrivals(self) -> list[tuple[int, int]]:
        """(instant, queries arriving) in scaled time, the initial ones first."""
        out = [(0, self.initial)]
        t = self.trickle_from
        while t < self.trickle_to and self.trickle:
            out.append((self.ms(t), self.trickle))
            t += self.trickle_every
        if self.burst:
            out.append((self.ms(self.burst_at), self.burst))
        return out

    @property
    def total(self) -> int:
        return sum(n for _, n in self.arrivals())


@dataclass(frozen=True)
class Join:
    """One join of a query, in plan order (bottom-up, left to right): hash or nested-loop,
    its predicate's σ⋈."""

    kind: str  # "hash" or "nested-loop"
    selectivity: float


@dataclass(frozen=True)
class GenQuery:
    """A generated query: its CQL, QoS range and ladder (scaled ms), weight, arrival instant,
    the streams it reads, its joins and its aggregations' key counts, in plan order."""

    name: str
    kind: str
    cql: str
    window: tuple[int, int]
    ladder: tuple[int, ...]
    weight: int
    arrives: int
    streams: tuple[str, ...]
    joins: tuple[Join, ...]
    groups: tuple[int, ...]

    def yaml(self) -> str:
        lo, hi = self.window
        ladder = ", ".join(map(str, self.ladder))
        return (
            f"  {self.name}:\n"
            f"    cql: {self.cql}\n"
            f"    sink: {{type: blackhole}}\n"
            f"    qos: {{window: [{lo}, {hi}], granularity: [{ladder}]}}\n"
            f"    weight: {self.weight}\n"
        )


@dataclass(frozen=True)
class Mix:
    """The generated workload: each stream's rate (tuples per minute) and every query in order
    of arrival."""

    rates: dict[str, float]
    queries: tuple[GenQuery, ...]
    timeline: Timeline
    seed: int
    nested_loops: float = NESTED_LOOPS
    kinds: dict[str, int] = field(default_factory=dict)

    def arrived(self, t: int) -> list[GenQuery]:
        """The queries that arrived by instant `t` (scaled ms)."""
        return [q for q in self.queries if q.arrives <= t]


def stream_name(i: int) -> str:
    return f"S{i:02d}"


def generate(
    timeline: Timeline, seed: int = 0, streams: int = STREAMS, nested_loops: float = NESTED_LOOPS
) -> Mix:
    """The seeded random workload of `timeline`; a share `nested_loops` of its joins are band
    (nested-loop) joins."""
    rng = np.random.default_rng(seed)
    rates = {stream_name(i): float(rng.uniform(*RATE_PER_MIN)) for i in range(streams)}
    names = list(rates)
    kinds = [k for k, _ in KINDS]
    shares = np.array([p for _, p in KINDS])
    queries = []
    counts: dict[str, int] = dict.fromkeys(kinds, 0)
    for instant, n in timeline.arrivals():
        for _ in range(n):
            kind = kinds[int(rng.choice(len(kinds), p=shares))]
            counts[kind] += 1
            name = f"q{len(queries):04d}"
            queries.append(_query(rng, name, kind, instant, names, timeline, nested_loops))
    return Mix(rates, tuple(queries), timeline, seed, nested_loops, counts)


def _ladder(timeline: Timeline, coarsest: int) -> tuple[int, ...]:
    """RUNGS up to `coarsest`, scaled; each a larger multiple of the one before."""
    out: list[int] = []
    for g in RUNGS:
        if g > coarsest:
            break
        s = 1 if g == 1 else timeline.ms(g)
        if not out or (s > out[-1] and s % out[-1] == 0):
            out.append(s)
    if len(out) < 2:  # a ladder needs two rungs
        out.append(2 * out[-1])
    return tuple(out)


def _predicate(
    rng: np.random.Generator, left: str, right: str, nested_loops: float
) -> tuple[str, Join]:
    """A join predicate between two FROM items' keys, and its join."""
    if rng.random() < nested_loops:
        c = int(rng.choice(BANDS))
        k = f"k{BAND_KEY}"
        text = f"{left}.{k} >= {right}.{k} AND {left}.{k} < {right}.{k} + {c}"
        return text, Join("nested-loop", _band_selectivity(c, BAND_KEY))
    d = int(rng.choice(KEY_DOMAINS))
    return f"{left}.k{d} = {right}.k{d}", Join("hash", 1.0 / d)


def _band_selectivity(c: int, d: int) -> float:
    """P(0 <= X − Y < c) for X, Y uniform on 0..d−1."""
    return sum(d - j for j in range(c)) / (d * d)


def _query(
    rng: np.random.Generator,
    name: str,
    kind: str,
    arrives: int,
    names: list[str],
    timeline: Timeline,
    nested_loops: float,
) -> GenQuery:
    low = float(rng.uniform(*WINDOW_LOW))
    high = float(rng.uniform(low, WINDOW_HIGH))
    lo, hi = timeline.ms(low), timeline.ms(high)
    ladder = _ladder(timeline, int(rng.choice(COARSEST)))
    weight = int(rng.choice(WEIGHTS))
    arity = {"join2": 2, "join3": 3, "join4": 4, "bushy4": 4, "agg": 1}.get(kind, 2)
    streams = tuple(names[i] for i in rng.choice(len(names), arity, replace=False))
    w = f"[Range {hi}]"
    joins: list[Join] = []
    groups: list[int] = []

    def pred(left: str, right: str) -> str:
        text, j = _predicate(rng, left, right, nested_loops)
        joins.append(j)
        return text

    def aggregate(stream: str, alias: str, out: str) -> tuple[str, str, bool]:
        """A grouped aggregation subquery; its text, the key column it groups by, and whether
        the join above is a band join."""
        band = rng.random() < nested_loops
        d = BAND_KEY if band else int(rng.choice(KEY_DOMAINS))
        groups.append(d)
        agg = "COUNT(*) AS n" if out == "n" else "SUM(v) AS s"
        return f"(SELECT k{d} AS g, {agg} FROM {stream} {w} {alias} GROUP BY k{d})", f"k{d}", band

    def group_join(left: str, right: str, key: str, band: bool, d_right: str) -> str:
        if band:
            c = int(rng.choice(BANDS))
            joins.append(Join("nested-loop", _band_selectivity(c, BAND_KEY)))
            return f"{left}.g >= {right}.{d_right} AND {left}.g < {right}.{d_right} + {c}"
        joins.append(Join("hash", 1.0 / int(key[1:])))
        return f"{left}.g = {right}.{d_right}"

    s = streams
    if kind == "join2":
        where = pred("A", "B")
        cql = f"SELECT A.v AS va, B.v AS vb FROM {s[0]} {w} A, {s[1]} {w} B WHERE {where}"
    elif kind in ("join3", "join4"):
        aliases = "ABCD"[: len(s)]
        items = ", ".join(f"{st} {w} {a}" for st, a in zip(s, aliases, strict=True))
        where = " AND ".join(pred(aliases[i], aliases[i + 1]) for i in range(len(s) - 1))
        cols = ", ".join(f"{a}.v AS v{a.lower()}" for a in aliases)
        cql = f"SELECT {cols} FROM {items} WHERE {where}"
    elif kind == "bushy4":
        x = pred("A", "B")
        y = pred("C", "D")
        top, top_join = _predicate(rng, "X", "Y", nested_loops)
        top = top.replace("X.k", "X.x").replace("Y.k", "Y.y")
        key = _key_of(top_join)
        joins.append(top_join)
        cql = (
            f"SELECT X.va, Y.vc FROM "
            f"(SELECT A.{key} AS x{key[1:]}, A.v AS va FROM {s[0]} {w} A, {s[1]} {w} B "
            f"WHERE {x}) X, "
            f"(SELECT C.{key} AS y{key[1:]}, C.v AS vc FROM {s[2]} {w} C, {s[3]} {w} D "
            f"WHERE {y}) Y WHERE {top}"
        )
    elif kind == "agg":
        d = int(rng.choice(KEY_DOMAINS))
        groups.append(d)
        cql = f"SELECT k{d} AS g, COUNT(*) AS n, SUM(v) AS s FROM {s[0]} {w} A GROUP BY k{d}"
    elif kind == "aggjoin":
        sub, key, band = aggregate(s[0], "A", "n")
        on = group_join("G", "B", key, band, key)
        cql = f"SELECT G.g, G.n, B.v FROM {sub} G, {s[1]} {w} B WHERE {on}"
    else:  # aggagg
        sub_g, key, band = aggregate(s[0], "A", "n")
        # the other side groups by the same key, so the join's σ⋈ is 1/D or the band's
        d = int(key[1:])
        groups.append(d)
        sub_h = f"(SELECT {key} AS g, SUM(v) AS s FROM {s[1]} {w} B GROUP BY {key})"
        on = group_join("G", "H", key, band, "g")
        cql = f"SELECT G.g, G.n, H.s FROM {sub_g} G, {sub_h} H WHERE {on}"
    return GenQuery(
        name, kind, cql, (lo, hi), ladder, weight, arrives, streams, tuple(joins), tuple(groups)
    )


def _key_of(j: Join) -> str:
    """The key column a join's predicate compares."""
    if j.kind == "nested-loop":
        return f"k{BAND_KEY}"
    return f"k{round(1 / j.selectivity)}"


# -- the pipeline file and its streams --------------------------------------------------------

# Chain's choice scans every operator at each step: with thousands of operators the scheduling
# would take most of the run. Round-robin sweeps them in plan order; what operators hold (the
# state measured here) does not depend on the order, only what waits in queues does.
SCHEDULER = "round_robin"
COLUMNS = (*(f"k{d}" for d in KEY_DOMAINS), "v")


def write_streams(mix: Mix, folder: Path, end: int) -> None:
    """Each stream as `folder/<name>.parquet`: Poisson arrivals at its rate up to `end` ms."""
    rng = np.random.default_rng(mix.seed + 1)
    for name, per_min in mix.rates.items():
        ts = poisson_timestamps(rng, MINUTE / per_min, end / 1000)
        cols = {"ts": ts}
        for d in KEY_DOMAINS:
            cols[f"k{d}"] = rng.integers(0, d, len(ts), dtype=np.int64)
        cols["v"] = rng.integers(0, VALUES, len(ts), dtype=np.int64)
        pq.write_table(pa.table(cols), folder / f"{name}.parquet")


def pipeline_text(mix: Mix, queries: list[GenQuery], budget: float | None, name: str) -> str:
    """The pipeline file running `queries` (its streams in the same folder)."""
    schema = ", ".join(f"{c}: int" for c in COLUMNS)
    lines = ["version: 1", f"name: {name}", "time_unit: ms"]
    if budget is not None:
        lines.append(f"resources: {{memory_budget: {int(budget)} B, scheduler: {SCHEDULER}}}")
    lines.append("streams:")
    for s in mix.rates:
        lines.append(
            f"  {s}: {{schema: {{{schema}}}, timestamp: ts, "
            f"source: {{type: file, path: {s}.parquet, format: parquet}}}}"
        )
    lines.append("queries:")
    return "\n".join(lines) + "\n" + "".join(q.yaml() for q in queries)


# -- the model's view of each query ------------------------------------------------------------

COMPILE_CHUNK = 200  # queries compiled together (a file's validation grows faster than its size)
# Bytes of a source element as the engine holds it (its five int64 columns, timestamp, weight,
# tick flag and validity bitmaps), as the worker measures them.
ROW_BYTES = 65.0


def managed_queries(mix: Mix, queries: list[GenQuery], folder: Path) -> list[ManagedQuery]:
    """One `ManagedQuery` per query, each planned alone, with what the generator knows of it:
    its streams' rates, its joins' σ⋈, its groupings' keys. `folder` holds the streams' files
    (`write_streams`; empty ones do)."""
    by_name = {q.name: q for q in queries}
    out = []
    for i in range(0, len(queries), COMPILE_CHUNK):
        text = pipeline_text(mix, queries[i : i + COMPILE_CHUNK], None, "scalability-model")
        compiled = compile_pipeline(load_pipeline_text(text, folder / "scalability-model.yaml"))
        for bq in compiled.queries:
            plan = plan_queries([(bq, compiled.spec.queries[bq.name].sink)])
            out.append(_managed(mix, by_name[bq.name], plan))
    return out


def _managed(mix: Mix, q: GenQuery, plan: PhysicalPlan) -> ManagedQuery:
    joins = [n.id for n in plan.nodes if isinstance(n.op, L.Join)]
    aggregates = [n.id for n in plan.nodes if isinstance(n.op, L.Aggregate)]
    if len(joins) != len(q.joins) or len(aggregates) != len(q.groups):
        raise AssertionError(f"{q.name}: the plan's joins or aggregations are not the generator's")
    observed = Observed(
        {s: MINUTE / mix.rates[s] for s in q.streams},
        dict.fromkeys(q.streams, ROW_BYTES),
        selectivity={n: j.selectivity for n, j in zip(joins, q.joins, strict=True)},
        groups={n: float(g) for n, g in zip(aggregates, q.groups, strict=True)},
    )
    lo, hi = q.window
    return ManagedQuery(
        q.name,
        plan,
        observed,
        float(q.weight),
        window_knobs(plan, q.name, lambda names: (lo, hi)),
        q.ladder,
    )


def need(queries: list[ManagedQuery], f: float) -> float:
    """The model's memory for `queries`, every one at the same f (1: full precision)."""
    return sum(q.cost(q.settings(f, f)).memory for q in queries)
