"""Named workloads for the simulator: the paper's three small tables and bursty ON/OFF traffic.

Small tables (one tuple per arrival):

- ``example1``: chart (0,1),(1,0.2),(2,0) — O1 takes 1 unit per tuple, σ = 0.2; O2 takes 5 units
  per tuple, so 1 unit per original tuple. One tuple at each t = 0..6 (paper 000, Example 1).
- ``counterexample``: chart (0,1),(1,0.9),(2,0.9),(3,0) (σ = 0.9, 1, 0), same arrivals: the
  per-operator greedy's bad case, where Chain equals FIFO.
- ``stream-example``: example1's chart with arrivals at τ = 1..7 (paper 001 §4's table).

Bursty traffic (the paper's synthetic data set, its digits lost; our numbers): flows start as a
Poisson process; each sends one tuple per time unit to one path (chosen uniformly) for a
Pareto-distributed duration, p(x) = αk^α x^(−α−1), x ≥ k, with k = 1, α = 1.4 (heavy-tailed:
finite mean 3.5, infinite variance), truncated to whole units, at most 500. The flow rate is set so
that the *offered* load (processing units asked per unit of time) averages 80% of capacity; a
single seeded run over 2,000 units realises more or less than that (the tail). The paths:

- ``two-ops``: (0,1),(1,0.1),(3,0) — a fast, very selective operator, then a slow one.
- ``four-ops``: (0,1),(2,0.8),(4,0.8),(5,0.1),(7,0) — slow σ = 0.8; slow σ = 1; fast and very
  selective (σ = 0.125); slow. Greedy ranks operator 2 last and so starves operator 3.
- ``stored-join``: (0,1),(1,0.9),(3,1.8),(4,0.2),(6,0) — operator 2 joins a stored relation
  (σ = 2), operator 3 is fast and selective; Chain makes operators 1–3 one chain.
- ``mixed``: the three paths together.

Scenarios ``bursty-two-ops``, ``bursty-four-ops``, ``bursty-stored-join``, ``bursty-mixed``;
``bursty`` is ``bursty-mixed``.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cq_service.bench.scheduling.workload import Arrival, Workload, chart
from cq_service.engine.scheduler.progress import ProgressChart

__all__ = ["SCENARIOS", "SHAPES", "Scenario", "on_off_arrivals", "scenario"]

EXAMPLE1 = chart((0, 1), (1, 0.2), (2, 0))
COUNTER = chart((0, 1), (1, 0.9), (2, 0.9), (3, 0))

SHAPES: dict[str, ProgressChart] = {
    "two-ops": chart((0, 1), (1, 0.1), (3, 0)),
    "four-ops": chart((0, 1), (2, 0.8), (4, 0.8), (5, 0.1), (7, 0)),
    "stored-join": chart((0, 1), (1, 0.9), (3, 1.8), (4, 0.2), (6, 0)),
}
SHAPES_OF = {**{name: (name,) for name in SHAPES}, "mixed": tuple(SHAPES)}

LOAD, ALPHA, K, MAX_DURATION, HORIZON = 0.8, 1.4, 1, 500, 20_000


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    workload: Workload
    small: bool  # memory per instant is worth printing; the brute-force optimum is affordable


def on_off_arrivals(
    rng: random.Random,
    lengths: Sequence[int],
    *,
    load: float = LOAD,
    alpha: float = ALPHA,
    k: int = K,
    max_duration: int = MAX_DURATION,
    horizon: int = HORIZON,
) -> list[Arrival]:
    """ON/OFF arrivals over paths needing `lengths` units per tuple: Poisson flow starts in
    [0, horizon), each flow one tuple per unit to a uniformly chosen path for
    min(⌊Pareto(α, k)⌋, max_duration) units, the flow rate set for an offered `load`."""
    # E[min(⌊D⌋, cap)] = Σ_{n=1}^{cap} P(D ≥ n), and P(D ≥ n) = min(1, (k/n)^α).
    mean_tuples = sum(min(1.0, (k / n) ** alpha) for n in range(1, max_duration + 1))
    flow_rate = load / (mean_tuples * sum(lengths) / len(lengths))
    counts: Counter[tuple[int, int]] = Counter()
    start = rng.expovariate(flow_rate)
    while start < horizon:
        path = rng.randrange(len(lengths))
        duration = min(math.floor(k * rng.paretovariate(alpha)), max_duration)
        first = math.floor(start)
        for t in range(first, first + duration):
            counts[t, path] += 1
        start += rng.expovariate(flow_rate)
    return [Arrival(t, p, n) for (t, p), n in sorted(counts.items())]


def _table(name: str, description: str, c: ProgressChart, times: range) -> Scenario:
    return Scenario(name, description, Workload.build([c], [(t, 0, 1) for t in times]), True)


def _bursty(shape: str) -> Callable[[int], Scenario]:
    def build(seed: int) -> Scenario:
        charts = [SHAPES[s] for s in SHAPES_OF[shape]]
        workload = Workload.build(charts, [])
        lengths = [p.length for p in workload.paths]
        arrivals = on_off_arrivals(random.Random(seed), lengths)
        description = (
            f"ON/OFF bursts over {', '.join(SHAPES_OF[shape])}: Pareto α={ALPHA}, k={K}, "
            f"target load {LOAD:.0%}, {HORIZON} units, seed {seed}"
        )
        return Scenario(f"bursty-{shape}", description, Workload.build(charts, arrivals), False)

    return build


SCENARIOS: dict[str, Callable[[int], Scenario]] = {
    "example1": lambda seed: _table(
        "example1", "Example 1: (0,1),(1,0.2),(2,0); a tuple at t = 0..6", EXAMPLE1, range(7)
    ),
    "counterexample": lambda seed: _table(
        "counterexample",
        "greedy's bad case: (0,1),(1,0.9),(2,0.9),(3,0); a tuple at t = 0..6",
        COUNTER,
        range(7),
    ),
    "stream-example": lambda seed: _table(
        "stream-example",
        "STREAM §4: (0,1),(1,0.2),(2,0); a tuple at τ = 1..7",
        EXAMPLE1,
        range(1, 8),
    ),
    **{f"bursty-{shape}": _bursty(shape) for shape in SHAPES_OF},
    "bursty": _bursty("mixed"),
}


def scenario(name: str, seed: int = 0) -> Scenario:
    """A scenario by name (`seed` drives the bursty ones)."""
    try:
        return SCENARIOS[name](seed)
    except KeyError:
        raise ValueError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})") from None
