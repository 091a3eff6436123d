"""One engine, several deployments, each with its own policy.

Operators carry the name of the deployment that owns them (`Operator.owner`; the live engine
sets it). Deployments take turns, one step each among those with work, and within its turn a
deployment's own policy picks the operator — so a FIFO deployment next to a Chain one keeps
its latency, and the Chain one its memory behaviour. Operators without an owner (sources) are
never picked here: the live worker polls them itself.
"""

from __future__ import annotations

from collections.abc import Callable

from cq_service.engine.operators.base import Operator
from cq_service.engine.scheduler.base import SchedulingPolicy

__all__ = ["ByOwner"]


class ByOwner:
    name = "by_deployment"

    def __init__(self, default: Callable[[], SchedulingPolicy]) -> None:
        self._default = default
        self.policies: dict[str, SchedulingPolicy] = {}
        self._members: dict[str, list[Operator]] = {}
        self._owners: list[str] = []
        self._next = 0
        self._cache: tuple[list[Operator] | None, dict[str, list[Operator]]] = (None, {})

    def set(self, owner: str, policy: SchedulingPolicy) -> None:
        """Schedule `owner`'s operators with `policy` from now on."""
        self.policies[owner] = policy
        policy.attach(self._members.get(owner, []))

    def policy_of(self, owner: str) -> SchedulingPolicy:
        p = self.policies.get(owner)
        if p is None:
            p = self.policies[owner] = self._default()
        return p

    def attach(self, operators: list[Operator]) -> None:
        members: dict[str, list[Operator]] = {}
        for op in operators:
            members.setdefault(op.owner, []).append(op)
        self._members = members
        self._owners = sorted(o for o in members if o)
        for owner in self._owners:
            self.policy_of(owner).attach(members[owner])
        for gone in set(self.policies) - set(members):
            del self.policies[gone]
        self._cache = (None, {})

    def choose(self, operators: list[Operator]) -> Operator | None:
        seen, split = self._cache
        if seen is not operators:
            split = {}
            for op in operators:
                if op.owner:
                    split.setdefault(op.owner, []).append(op)
            self._cache = (operators, split)
        n = len(self._owners)
        for k in range(n):
            owner = self._owners[(self._next + k) % n]
            candidates = split.get(owner)
            if not candidates:
                continue
            op = self.policy_of(owner).choose(candidates)
            if op is not None:
                self._next = (self._next + k + 1) % n
                return op
        return None
