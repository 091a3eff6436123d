"""k: auto on the binary join: a RIDS monitor behind the engine's seam learns k from the join's
arrivals; once it knows k the join drops state, and the output stays the plain join's on
stationary input. An increase past k_u resets it to ∞ at once."""

from __future__ import annotations

import math
import random

from cq_service.adaptive.k_constraints import MonitoredRids, RidsMonitor, monitor_adherence
from cq_service.engine.join_constraints import JoinConstraint
from tests.unit.engine.batches import relation_at
from tests.unit.engine.rids_joins import rids_streams, run

C = JoinConstraint("rids", many=0, k=None)


def test_auto_k_learns_and_stays_exact():
    events = rids_streams(random.Random(3), 400, 3, late=0)
    monitors: list[MonitoredRids] = []

    def factory(c):
        m = MonitoredRids(c, RidsMonitor(w=40, p=0.0))
        monitors.append(m)
        return m

    plain, plain_peak, _ = run(events, None, (None, None), 1)
    got, peak, op = run(events, C, (None, None), 1, adherence=factory)
    (m,) = monitors
    assert m.k <= 3  # one event an instant: the join sees the true arrival order
    assert op.reduction.dropped > 0 and peak < plain_peak
    last = max(e[0] for e in plain)
    for t in range(0, last + 1, 7):
        assert relation_at(got, t) == relation_at(plain, t)
    assert relation_at(got, last) == relation_at(plain, last)


def test_monitor_resets_on_increase():
    m = MonitoredRids(C, RidsMonitor(w=5, p=1.0))  # every parent sampled
    for i in range(20):  # child first: distance 0
        m.observe(1, [i])
        m.observe(0, [i])
    assert m.k == 0
    m.observe(0, [100])  # a parent whose child comes 3 arrivals later
    m.observe(1, [20, 21, 100])
    assert math.isinf(m.k) and m.increases == 1


def test_factory_makes_rids_monitors():
    assert isinstance(monitor_adherence(C), MonitoredRids)
