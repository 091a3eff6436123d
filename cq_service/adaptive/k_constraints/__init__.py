"""k-Mon: monitors that learn the adherence k of k-constraints from arrivals (thesis 003 ch. 6;
docs/adaptive.md, "k-constraints and k-Mon").

One monitor per constraint kind — `RidsMonitor` (referential integrity on a many-one join),
`CaMonitor` (clustered arrival), `OaMonitor` (ordered arrival, for OAP and OAC alike) — each
with the thesis' defaults as named constants. Each exposes ``k`` (an int, or ``math.inf`` while
unknown) and ``increases``. `monitor_adherence` puts a RIDS monitor behind the binary join's
seam (engine/join_constraints.py) for a `k: auto` constraint.
"""

from __future__ import annotations

from cq_service.adaptive.k_constraints.base import INFINITE, AdherenceEstimate
from cq_service.adaptive.k_constraints.ca import CA_C, CA_P, CA_W, CaMonitor
from cq_service.adaptive.k_constraints.join_adherence import MonitoredRids, monitor_adherence
from cq_service.adaptive.k_constraints.oa import OA_C, OA_W, OaMonitor
from cq_service.adaptive.k_constraints.rids import RIDS_C, RIDS_P, RIDS_W, RidsMonitor

__all__ = [
    "CA_C",
    "CA_P",
    "CA_W",
    "INFINITE",
    "OA_C",
    "OA_W",
    "RIDS_C",
    "RIDS_P",
    "RIDS_W",
    "AdherenceEstimate",
    "CaMonitor",
    "MonitoredRids",
    "OaMonitor",
    "RidsMonitor",
    "monitor_adherence",
]
