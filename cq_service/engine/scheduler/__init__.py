"""Scheduling policies, chosen by name."""

from cq_service.engine.scheduler.base import SchedulingPolicy
from cq_service.engine.scheduler.round_robin import RoundRobin

__all__ = ["POLICIES", "RoundRobin", "SchedulingPolicy", "policy"]

POLICIES = {"round_robin": RoundRobin}


def policy(name: str) -> SchedulingPolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown scheduling policy '{name}' (known: {', '.join(POLICIES)})") from None
