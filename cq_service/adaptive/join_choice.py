"""`join: auto` (issue 25 part 4): a tree of binary joins, an MJoin, or an MJoin with A-Caching,
whichever the cost model expects to do least work.

Each leaf of the join has, from `estimate.estimate_plan`, a size N (rows its window or relation
holds) and an update rate u (insertions per time unit, doubled for a window whose rows also
expire); each equi-join edge a selectivity s (the tree's join it came from, as measured — split
evenly over that join's keys — else 0.1, `estimate`'s default), so probing input j by the edges
into the bound inputs finds N_j · Π s matches. Work is counted in rows per time unit, as the
A-Caching selector counts it (engine/operators/mjoin_caching.py): one per index lookup and one
per row produced.

- **tree**: each binary join does a lookup per update of either input and produces
  s · (u_a · N_b + u_b · N_a) rows; below the top, those rows are also stored in the parent's
  synopsis (one more each) and held: N = s · N_a · N_b.
- **mjoin**: input i's pipeline, in the greedy order A-Greedy converges to (smallest fanout
  first among the inputs joined to those bound), does one lookup per partial row at each
  position and produces the partial rows of the next; u_i times that, summed. It holds the
  leaves, once per key set each is probed by.
- **mjoin-caching**: the MJoin's work less, per pipeline, the best benefit of a cache on a
  segment of two or more probes, by the selector's formula
  rows_in · (hit · W − 1 − rows_out / rows_in) − updates, with hit the chance that a key is
  looked up again before an update to a segment input drops it — u_i·R / (u_i·R + Σ u_seg) —
  scaled by 4,096 slots / keys where there are more keys than slots; plus 1% of the MJoin's
  work for profiling (shadow caches). A negative benefit is no cache (the selector drops it).

The least work wins; forms within 1% of it count as equal, and the one holding fewest rows
wins among them (a tree's intermediate results cost memory the work count does not see). The choice is made when the plan is
built, from `Observed` statistics if any (`cq explain --costs` measures them), else from
defaults: every stream one element per time unit, stored relations 1,000 rows (`assumed`).
When the plain MJoin wins on statistics any of which are assumed, the MJoin runs with
A-Caching instead: defaults cannot tell a fast input whose keys repeat (where a cache pays:
the joins bench's residual case) from one where none does, and there the selector, which
measures, uses no cache — its profiling costs a few per cent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from cq_service.adaptive.cpu import EngineCosts
from cq_service.adaptive.estimate import FOREVER, Observed, OperatorEstimate, estimate_plan
from cq_service.cql import logical as L
from cq_service.plan.mjoins import FORMS, Chooser, JoinCandidate, JoinChoice, multiway_joins
from cq_service.plan.physical import PhysicalPlan

__all__ = ["JoinStats", "choose_join", "costs_of", "explain_choices", "join_chooser", "stats_of"]

DEFAULT_D = 1.0  # time units between a stream's elements when not measured
DEFAULT_RELATION_ROWS = 1_000.0
DEFAULT_EDGE_SELECTIVITY = 0.1  # estimate._join_default for an equi-join
CACHE_SLOTS = 4_096  # engine/operators/mjoin_cache.py's direct-mapped slots per cache
CACHE_POOL_ROWS = 262_144
TIE = 0.01  # work this close to the least counts as equal; the smaller state then wins
PROFILE_OVERHEAD = 0.01  # of the MJoin's work: shadow caches while candidates are profiled


@dataclass(frozen=True)
class JoinStats:
    """What the choice starts from: per leaf its rows held and updates per time unit, per edge
    its selectivity, per tree join its selectivity (edges indexed as `cand.op.edges`)."""

    size: tuple[float, ...]
    updates: tuple[float, ...]
    edge_sel: tuple[float, ...]
    join_sel: Mapping[int, float]
    assumed: tuple[str, ...] = ()


def join_chooser(observed: Observed | None = None, unit_seconds: float = 1e-3) -> Chooser:
    """The `Chooser` the compiler passes to `plan.mjoins.multiway_joins`."""
    cache: dict[int, dict[int, OperatorEstimate]] = {}

    def choose(plan: PhysicalPlan, cand: JoinCandidate) -> JoinChoice:
        if id(plan) not in cache:
            cache.clear()
            cache[id(plan)] = _estimates(plan, observed, unit_seconds)
        return choose_join(plan, cand, stats_of(plan, cand, cache[id(plan)], observed))

    return choose


def choose_join(plan: PhysicalPlan, cand: JoinCandidate, stats: JoinStats) -> JoinChoice:
    """The form of least estimated work — among those within `TIE` of it, the one holding
    fewest rows, then the simpler — with every form's costs."""
    costs = costs_of(plan, cand, stats)
    least = min(w for w, _ in costs.values())
    near = [f for f in FORMS if costs[f][0] <= least * (1 + TIE)]
    best = min(near, key=lambda f: (costs[f][1], FORMS.index(f)))
    if best == "mjoin" and stats.assumed:
        # the MJoin wins on assumed statistics: run it with A-Caching, whose selector measures
        # what a cache would save and uses none where none pays (at the cost of profiling)
        best = "mjoin-caching"
    return JoinChoice(best, costs, stats.assumed)


def _estimates(
    plan: PhysicalPlan, observed: Observed | None, unit_seconds: float
) -> dict[int, OperatorEstimate]:
    obs = observed or Observed({})
    d = dict(obs.source_d)
    rel = dict(obs.relation_rows)
    for n in plan.nodes:
        if isinstance(n.op, L.Source):
            if n.op.is_relation:
                rel.setdefault(n.op.name, DEFAULT_RELATION_ROWS)
            else:
                d.setdefault(n.op.name, DEFAULT_D)
    obs = replace(obs, source_d=d, relation_rows=rel)
    return estimate_plan(plan, obs, costs=EngineCosts(), unit_seconds=unit_seconds)


def stats_of(
    plan: PhysicalPlan,
    cand: JoinCandidate,
    est: Mapping[int, OperatorEstimate],
    observed: Observed | None,
) -> JoinStats:
    """The leaves' sizes and update rates from `est`, the edges' selectivities measured on the
    tree's joins (`observed.selectivity`) or defaulted."""
    assumed: list[str] = []
    measured = dict(observed.selectivity) if observed else {}
    below, todo = set(), list(cand.leaves)  # the nodes under the join's leaves
    while todo:
        i = todo.pop()
        if i not in below:
            below.add(i)
            todo.extend(plan.nodes[i].inputs)
    sources = [plan.nodes[i].op for i in sorted(below) if isinstance(plan.nodes[i].op, L.Source)]
    for op in sources:
        known_d = observed.source_d if observed else {}
        known_r = observed.relation_rows if observed else {}
        if op.is_relation and op.name not in known_r:
            assumed.append(f"{op.name}: {DEFAULT_RELATION_ROWS:g} rows")
        elif not op.is_relation and op.name not in known_d:
            assumed.append(f"{op.name}: one element per time unit")
    size, updates = [], []
    for leaf in cand.leaves:
        e = est[leaf].edge
        size.append(e.size)
        expires = e.l < FOREVER / 2
        updates.append(e.rate * (2.0 if expires else 1.0))
    keys = {j: sum(1 for o in cand.edge_joins if o == j) for j in cand.joins}
    join_sel: dict[int, float] = {}
    for j in cand.joins:
        if j in measured:
            join_sel[j] = max(measured[j], 1e-12)
        else:
            join_sel[j] = DEFAULT_EDGE_SELECTIVITY ** max(1, keys[j])
            assumed.append(f"selectivity of #{j} {join_sel[j]:g}")
    edge_sel = tuple(join_sel[j] ** (1.0 / keys[j]) for j in cand.edge_joins)
    return JoinStats(tuple(size), tuple(updates), edge_sel, join_sel, tuple(dict.fromkeys(assumed)))


def costs_of(
    plan: PhysicalPlan, cand: JoinCandidate, stats: JoinStats
) -> dict[str, tuple[float, float]]:
    """form -> (work in rows per time unit, rows held)."""
    mjoin_work, pipelines = _mjoin_work(cand, stats)
    mjoin_state = _mjoin_state(cand, stats)
    tree = _tree(plan, cand, stats)
    saved, cached = 0.0, 0.0
    for p in pipelines:
        benefit, rows = _best_cache(cand, stats, *p)
        if benefit > 0:
            saved += benefit
            cached += rows
    caching = mjoin_work - saved + PROFILE_OVERHEAD * mjoin_work
    return {
        "tree": tree,
        "mjoin": (mjoin_work, mjoin_state),
        "mjoin-caching": (caching, mjoin_state + min(cached, CACHE_POOL_ROWS)),
    }


def _fanout(cand: JoinCandidate, stats: JoinStats, j: int, bound: set[int]) -> float:
    sel = [
        stats.edge_sel[k]
        for k, e in enumerate(cand.op.edges)
        if {e.left, e.right} & {j} and e.other(j) in bound
    ]
    return stats.size[j] * math.prod(sel)


def _mjoin_work(
    cand: JoinCandidate, stats: JoinStats
) -> tuple[float, list[tuple[int, tuple[int, ...], list[float]]]]:
    """Total work and per pipeline (input, greedy order, partial rows before each position)."""
    n = len(cand.leaves)
    total = 0.0
    pipes = []
    for i in range(n):
        bound, order, rows, partial = {i}, [i], 1.0, [1.0]
        work = 0.0
        while len(bound) < n:
            nxt = [
                j
                for j in range(n)
                if j not in bound
                and any({e.left, e.right} == {j, b} for e in cand.op.edges for b in bound)
            ]
            j = min(nxt, key=lambda k: (_fanout(cand, stats, k, bound), k))
            work += rows  # lookups
            rows *= _fanout(cand, stats, j, bound)
            work += rows  # rows produced
            bound.add(j)
            order.append(j)
            partial.append(rows)
        total += stats.updates[i] * work
        pipes.append((i, tuple(order), partial))
    return total, pipes


def _mjoin_state(cand: JoinCandidate, stats: JoinStats) -> float:
    """Each leaf once per distinct key expression it is probed on (at least once)."""
    out = 0.0
    for i, n in enumerate(stats.size):
        keys = {repr(e.side(i)) for e in cand.op.edges if i in (e.left, e.right)}
        out += n * max(1, len(keys))
    return out


def _best_cache(
    cand: JoinCandidate, stats: JoinStats, i: int, order: tuple[int, ...], partial: list[float]
) -> tuple[float, float]:
    """(net benefit, rows held) of the best cache on a segment of pipeline i (none: (0, 0))."""
    best = (0.0, 0.0)
    m = len(order) - 1  # probes
    u = stats.updates[i]
    for start in range(1, m):  # segment = probes start..m (two or more)
        reach = partial[start - 1]
        seg = order[start:]
        w = sum(partial[k - 1] + partial[k] for k in range(start, m + 1)) / reach
        out = partial[m] / reach
        bound = set(order[:start])
        key_sel = math.prod(
            stats.edge_sel[k]
            for k, e in enumerate(cand.op.edges)
            if (e.left in bound) != (e.right in bound) and (e.left in seg or e.right in seg)
        )
        keys = 1.0 / key_sel if key_sel > 0 else math.inf
        upd = sum(stats.updates[j] for j in seg)
        lookups = u * reach
        hit = lookups / (lookups + upd) if lookups + upd > 0 else 0.0
        hit *= min(1.0, CACHE_SLOTS / keys)
        benefit = lookups * (hit * w - 1 - out) - upd
        if benefit > best[0]:
            best = (benefit, min(keys, CACHE_SLOTS) * out)
    return best


def _tree(plan: PhysicalPlan, cand: JoinCandidate, stats: JoinStats) -> tuple[float, float]:
    """(work, rows held) of the tree as planned."""
    leaf_at = {node: k for k, node in enumerate(cand.leaves)}
    work = state = 0.0

    def visit(node_id: int) -> tuple[float, float]:  # (rows, updates per time unit)
        nonlocal work, state
        if node_id in leaf_at:
            k = leaf_at[node_id]
            return stats.size[k], stats.updates[k]
        a_id, b_id = plan.nodes[node_id].inputs
        (na, ua), (nb, ub) = visit(a_id), visit(b_id)
        s = stats.join_sel[node_id]
        produced = s * (ua * nb + ub * na)
        work += ua + ub + produced
        state += na + nb
        if node_id != cand.root:
            work += produced  # stored in the parent's synopsis
        return s * na * nb, produced

    visit(cand.root)
    return work, state


def explain_choices(
    plan: PhysicalPlan, setting: str, observed: Observed | None, unit_seconds: float
) -> list[str]:
    """`cq explain --costs`'s lines on `join: auto`: per eligible tree of `plan` (the tree
    plan, whose join ids `observed` measured), every form's estimated work and state and the
    form chosen from `observed`, next to what the plan runs (`setting`, or under ``auto`` the
    choice from default statistics, which is what the plan is built from)."""
    measured = join_chooser(observed, unit_seconds)
    planned = join_chooser(None, unit_seconds)
    lines: list[str] = []

    def show(p: PhysicalPlan, cand: JoinCandidate) -> JoinChoice:
        choice = measured(p, cand)
        runs = planned(p, cand).form if setting == "auto" else setting
        who = ", ".join(p.nodes[cand.root].queries) or "an unread query"
        lines.append(
            f"  {who}'s {len(cand.leaves)}-way join: from measured statistics auto chooses "
            f"{choice.form}; the plan runs {runs}"
            + (" (chosen from default statistics)" if setting == "auto" else f" (join: {setting})")
        )
        for form, (work, rows) in choice.costs.items():
            mark = "  <- chosen" if form == choice.form else ""
            lines.append(
                f"    {form:<14} {work:>12.4g} rows of work per time unit {rows:>12.4g} rows kept{mark}"
            )
        if choice.assumed:
            lines.append(f"    assumed (not measured): {', '.join(choice.assumed)}")
        return JoinChoice("tree")

    multiway_joins(plan, "auto", show)
    if lines:
        lines.insert(0, "join forms (resources.join auto; adaptive/join_choice.py):")
    return lines
