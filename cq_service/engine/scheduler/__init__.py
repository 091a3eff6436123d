"""Scheduling policies, chosen by name (a pipeline's `resources.scheduler`).

`POLICIES` are the names a pipeline file may give (`spec.model.SCHEDULERS`, in that order).
`chain_bounded` takes a latency bound and `chain_share` a share of FIFO steps (`policy`).
"""

from __future__ import annotations

from cq_service.engine.scheduler.base import SchedulingPolicy
from cq_service.engine.scheduler.by_owner import ByOwner
from cq_service.engine.scheduler.chain import Chain, ChainBounded, ChainShare
from cq_service.engine.scheduler.fifo import Fifo
from cq_service.engine.scheduler.greedy import Greedy
from cq_service.engine.scheduler.round_robin import RoundRobin

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "ByOwner",
    "Chain",
    "ChainBounded",
    "ChainShare",
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
    "chain_share": ChainShare,
}
DEFAULT_POLICY = "chain"


def policy(
    name: str, latency_bound: float | None = None, share: float | None = None
) -> SchedulingPolicy:
    """A fresh policy; `latency_bound` (seconds) is chain_bounded's bound, and only its;
    `share` (of FIFO steps, 0 to 1) is chain_share's, and only its."""
    if name not in POLICIES:
        raise ValueError(f"unknown scheduling policy '{name}' (known: {', '.join(POLICIES)})")
    if name == "chain_share":
        if share is None or latency_bound is not None:
            raise ValueError("chain_share needs a share of FIFO steps and no latency bound")
        return ChainShare(share)
    if share is not None:
        raise ValueError(f"a share of FIFO steps applies to chain_share only, not to {name}")
    if name == "chain_bounded":
        if latency_bound is None:
            raise ValueError("chain_bounded needs a latency bound")
        return ChainBounded(latency_bound)
    if latency_bound is not None:
        raise ValueError(f"a latency bound applies to chain_bounded only, not to {name}")
    return POLICIES[name]()
