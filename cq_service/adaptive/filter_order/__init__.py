"""Adaptive ordering of a selection's conjuncts (thesis 003 ch. 4; docs/adaptive.md, "Filter
ordering"): A-Greedy and its variants Sweep, Independent and LocalSwaps, chosen per pipeline by
`resources.filter_order` and injected into the engine as an `OrdererFactory`.

Example::

    factory = orderer_factory("a-greedy", seed=0)
    build_executor(plan, ..., filter_order=factory)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from cq_service.adaptive.caching import ACaching
from cq_service.adaptive.filter_order.a_greedy import AGreedy
from cq_service.adaptive.filter_order.base import ProfilingOrderer
from cq_service.adaptive.filter_order.independent import Independent
from cq_service.adaptive.filter_order.local_swaps import LocalSwaps
from cq_service.adaptive.filter_order.sweep import Sweep
from cq_service.adaptive.probe_order import GreedyProbes
from cq_service.engine.filter_order import ConjunctOrderer, OrdererFactory, StaticOrder
from cq_service.spec.model import DEFAULT_FILTER_ORDER, PipelineSpec

__all__ = [
    "ALGORITHMS",
    "AGreedy",
    "Independent",
    "LocalSwaps",
    "ProfilingOrderer",
    "Sweep",
    "orderer_factory",
    "pipeline_orderers",
]

# `resources.filter_order` -> the orderer of n conjuncts (keyword arguments: seed, p, ...).
ALGORITHMS: dict[str, Callable[..., ConjunctOrderer]] = {
    "a-greedy": AGreedy,
    "sweep": Sweep,
    "independent": Independent,
    "local-swaps": LocalSwaps,
    "static": lambda n, **_: StaticOrder(n),
}


def pipeline_orderers(spec: PipelineSpec, override: str | None = None) -> OrdererFactory:
    """The orderers of a pipeline's selections: `override` (``cq run --filter-order``) or its
    `resources.filter_order`. A fresh factory for every engine built from the pipeline, so
    each one's seeds, and its run, are the same every time. Every caller that builds an engine
    from a pipeline chooses here."""
    return orderer_factory(override or spec.resources.filter_order)


def orderer_factory(name: str | None = None, seed: int = 0) -> OrdererFactory:
    """The factory the engine calls once per selection (in plan order, so each selection's
    seed, and with it the whole run, is deterministic). `name` None: the default. Each
    selection may run its predicate in one pass while that measures cheaper than the order
    (`whole_pass`, engine/pass_choice.py)."""
    name = name or DEFAULT_FILTER_ORDER
    make = ALGORITHMS[name]
    seeds = itertools.count(seed)

    def factory(n: int) -> ConjunctOrderer:
        return make(n, seed=next(seeds), whole_pass=True)

    if name != "static":  # multi-way joins' probe orders adapt too (adaptive/probe_order.py)
        factory.probe_orders = GreedyProbes  # type: ignore[attr-defined]
    factory.caches = ACaching  # type: ignore[attr-defined]  # join: mjoin-caching
    return factory
