"""The clairvoyant optimum: OPT(t) = the least memory at instant t over all schedules (any tuple
each unit, or idle), for checking the theorems on small instances. Two independent ways:

- `optimum_memory` (the default): tuples are independent jobs on one processor, so a set of
  targets (progress p_j for each tuple j arrived by t) is reachable at t iff for every arrival
  time r, the work asked of tuples arriving at or after r fits in t − r (one machine, preemptive,
  common deadline). OPT(t) is then a small knapsack over arrival times, latest first.
- `optimum_memory_bfs`: a breadth-first search over reachable states. A state is, per path, the
  sorted progresses of the tuples that have arrived (a departed tuple stays at t_m, so states at
  one instant have the same shape). When no path's size grows with progress, a state whose
  sorted progresses are all ≥ another's is as good now and at every later instant (it can shadow
  the other's moves), so only Pareto-maximal states are kept and idling is never needed.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from cq_service.bench.scheduling.workload import Workload

__all__ = ["optimum_memory", "optimum_memory_bfs"]

State = tuple[tuple[int, ...], ...]


def optimum_memory(workload: Workload, horizon: int | None = None) -> list[Fraction]:
    """OPT(t) for t = 0..horizon (default: until every tuple can have left after the last
    arrival), by the knapsack over arrival times."""
    if horizon is None:
        horizon = _drain_time(workload)
    return [_optimum_at(workload, t) for t in range(horizon + 1)]


def _drain_time(workload: Workload) -> int:
    """The first instant, at or after the last arrival, by which every tuple can have left."""
    t = 0
    for a in workload.arrivals:
        t = max(t, a.time) + a.count * workload.paths[a.path].length
    return max(t, workload.last_arrival)


def _optimum_at(workload: Workload, t: int) -> Fraction:
    # Targets worth considering: progresses where the size changes (in a step chart, going
    # further into an operator costs work and frees nothing until it completes).
    targets = [
        [
            (x, path.sizes[x])
            for x in range(path.length + 1)
            if x == 0 or path.sizes[x] != path.sizes[x - 1]
        ]
        for path in workload.paths
    ]
    best: dict[int, Fraction] = {0: Fraction(0)}  # work given to later arrivals → least memory
    for a in sorted((a for a in workload.arrivals if a.time <= t), key=lambda a: -a.time):
        room = t - a.time
        for _ in range(a.count):
            nxt: dict[int, Fraction] = {}
            for work, mem in best.items():
                for x, size in targets[a.path]:
                    if work + x <= room and (work + x not in nxt or mem + size < nxt[work + x]):
                        nxt[work + x] = mem + size
            best = nxt
    return min(best.values())


def optimum_memory_bfs(
    workload: Workload, horizon: int | None = None, *, max_states: int = 200_000
) -> list[Fraction]:
    """OPT(t) for t = 0..horizon (default: until every tuple can have left after the last
    arrival), by search. Raises ValueError when the frontier outgrows `max_states`."""
    paths = workload.paths
    lengths = [p.length for p in paths]
    monotone = all(p.monotone for p in paths)
    arriving: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for a in workload.arrivals:
        arriving[a.time].append((a.path, a.count))
    states: set[State] = {tuple(() for _ in paths)}
    out: list[Fraction] = []
    t = 0
    while True:
        for k, count in arriving.get(t, ()):
            states = {(*s[:k], (0,) * count + s[k], *s[k + 1 :]) for s in states}
        out.append(min(_memory(workload, s) for s in states))
        if horizon is not None and t >= horizon:
            return out
        if (
            horizon is None
            and t >= workload.last_arrival
            and any(_done(s, lengths) for s in states)
        ):
            return out
        states = {n for s in states for n in _moves(s, lengths, idle=not monotone)}
        if monotone:
            states = _pareto(states)
        if len(states) > max_states:
            raise ValueError(f"OPT frontier exceeds {max_states} states at t = {t}")
        t += 1


def _done(state: State, lengths: list[int]) -> bool:
    return all(v == n for vals, n in zip(state, lengths, strict=True) for v in vals)


def _memory(workload: Workload, state: State) -> Fraction:
    return sum(
        (path.sizes[p] for path, vals in zip(workload.paths, state, strict=True) for p in vals),
        Fraction(0),
    )


def _moves(state: State, lengths: list[int], idle: bool) -> list[State]:
    """Every state one unit of processing away (advance the last tuple of each distinct
    progress, keeping the order sorted); idling when asked or when nothing can move."""
    out: list[State] = []
    for k, vals in enumerate(state):
        n = len(vals)
        for i, v in enumerate(vals):
            if v < lengths[k] and (i + 1 == n or vals[i + 1] != v):
                out.append((*state[:k], (*vals[:i], v + 1, *vals[i + 1 :]), *state[k + 1 :]))
    if idle or not out:
        out.append(state)
    return out


def _pareto(states: set[State]) -> set[State]:
    """The states not dominated (componentwise ≤ on the flattened sorted progresses)."""
    flat = sorted(
        ((sum(f), f, s) for s in states for f in [tuple(v for vals in s for v in vals)]),
        reverse=True,
    )
    kept: list[tuple[int, ...]] = []
    out: set[State] = set()
    for _, f, s in flat:
        if not any(all(a >= b for a, b in zip(g, f, strict=True)) for g in kept):
            kept.append(f)
            out.add(s)
    return out
