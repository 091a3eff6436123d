"""Scheduling policies, chosen by name (a pipeline's `resources.scheduler`)."""

from __future__ import annotations

from cq_service.engine.scheduler.base import SchedulingPolicy
from cq_service.engine.scheduler.by_owner import ByOwner
from cq_service.engine.scheduler.chain import Chain, ChainBounded
from cq_service.engine.scheduler.fifo import Fifo
from cq_service.engine.scheduler.greedy import Greedy
from cq_service.engine.scheduler.round_robin import RoundRobin

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "ByOwner",
    "Chain",
    "ChainBounded",
    "Fifo",
    "Greedy",
    "RoundRobin",
    "SchedulingPolicy",
    "policy",
]

POLICIES = {
    "fifo": Fifo,
    "round_robin": RoundRobin,
    "greedy": Greedy,
    "chain": Chain,
    "chain_bounded": ChainBounded,
}
DEFAULT_POLICY = "chain"


def policy(name: str, latency_bound: float | None = None) -> SchedulingPolicy:
    """A fresh policy; `latency_bound` (seconds) is chain_bounded's bound, and only its."""
    if name not in POLICIES:
        raise ValueError(f"unknown scheduling policy '{name}' (known: {', '.join(POLICIES)})")
    if name == "chain_bounded":
        if latency_bound is None:
            raise ValueError("chain_bounded needs a latency bound")
        return ChainBounded(latency_bound)
    if latency_bound is not None:
        raise ValueError(f"a latency bound applies to chain_bounded only, not to {name}")
    return POLICIES[name]()
