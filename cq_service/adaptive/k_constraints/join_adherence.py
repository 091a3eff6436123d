"""k-Mon behind the join's seam (engine/join_constraints.py): the `Adherence` of a `k: auto`
constraint is a monitor that learns k from the join's own arrivals.

`monitor_adherence` is the `AdherenceFactory` the runner gives the engine: for RIDS a
`RidsMonitor` fed the many side's keys as parents and the one side's as children, with the
thesis' defaults (c, p, W) = (1, 0.01, 500). While it knows no k (k_u = ∞: at the start, and
for W arrivals after every increase) the join drops nothing. Each increase is logged (one
warning with the old k and the distance that exceeded it) and counted (`increases`, SysStream's
`k_increases`).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence

from cq_service.adaptive.k_constraints.rids import RidsMonitor
from cq_service.engine.join_constraints import Adherence, JoinConstraint

__all__ = ["MonitoredRids", "monitor_adherence"]

log = logging.getLogger(__name__)


class MonitoredRids:
    """RIDS(k_u) for one join: k is the monitor's k_u."""

    def __init__(self, constraint: JoinConstraint, monitor: RidsMonitor | None = None) -> None:
        self.many = constraint.many
        self.label = constraint.label or constraint.describe()
        self.monitor = monitor or RidsMonitor()
        self.monitor.estimate.on_increase = self._increased  # a bound method: snapshots pickle

    def _increased(self, old: float, distance: int) -> None:
        log.warning(
            "k-Mon: RIDS %s: k increased from %d to at least %d (increase %d); k in use is "
            "infinite until %d more arrivals learn it again",
            self.label,
            int(old),
            distance,
            self.monitor.increases + 1,
            self.monitor.estimate.w,
        )

    @property
    def k(self) -> float:
        return self.monitor.k

    @property
    def increases(self) -> int:
        return self.monitor.increases

    def observe(self, port: int, keys: Sequence[Hashable]) -> None:
        if port == self.many:
            self.monitor.observe_parents(keys)
        else:
            self.monitor.observe_children(keys)


def monitor_adherence(constraint: JoinConstraint) -> Adherence:
    """The k-Mon monitor of a `k: auto` join constraint."""
    if constraint.kind != "rids":
        raise ValueError(f"no monitor for join constraint kind {constraint.kind!r}")
    return MonitoredRids(constraint)
