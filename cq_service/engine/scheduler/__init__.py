"""Scheduling policies, chosen by name (a pipeline's `resources.scheduler`).

`POLICIES` are the names a pipeline file may give. `chain_share` (Chain with a share of FIFO
steps) is chosen in code and in the benchmarks only, through `policy(..., share=)`.
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
    "ENGINE_ONLY_POLICIES",
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
}
DEFAULT_POLICY = "chain"
# Not (yet) a pipeline file's choice: code and benchmarks name it.
ENGINE_ONLY_POLICIES = {"chain_share": ChainShare}


def policy(
    name: str, latency_bound: float | None = None, share: float | None = None
) -> SchedulingPolicy:
    """A fresh policy; `latency_bound` (seconds) is chain_bounded's bound, and only its;
    `share` (of FIFO steps, 0 to 1) is chain_share's, and only its."""
    known = {**POLICIES, **ENGINE_ONLY_POLICIES}
    if name not in known:
        raise ValueError(f"unknown scheduling policy '{name}' (known: {', '.join(known)})")
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
