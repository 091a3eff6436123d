"""Changing a running query's windows inside its QoS, and making logged changes again.

Every change — from the API or the resource manager — is checked against the query's `qos`
(pipeline file) and logged in the catalog with the query's version, so a restored query of the
same version makes it again (docs/resources.md).
"""

from __future__ import annotations

import logging
from typing import Any

from cq_service.catalog import AdjustmentRecord
from cq_service.engine.adjust import KNOBS, Adjustment, on_item, parse_knob
from cq_service.errors import AdjustmentError
from cq_service.service.running import RunningQuery, Runtime
from cq_service.spec.model import QosSpec

__all__ = ["adjust", "check_qos", "logged_adjustment", "qos_ranges", "replay_adjustments"]

log = logging.getLogger("cq.worker")


def adjust(
    rt: Runtime, pipeline: str, query: str, knob: str, value: int, reason: str = "api"
) -> list[Adjustment]:
    """Change a running query's window size or granularity inside its QoS; each change is
    logged in the catalog with the query's version. Raises KeyError for a query that does not
    run and AdjustmentError for a knob or value its QoS does not allow."""
    spec = rt.pipelines.get(pipeline)
    q = rt.queries.get(f"{pipeline}/{query}")
    if spec is None or q is None:
        raise KeyError(f"{pipeline}/{query}")
    kind, name = parse_knob(knob)
    for win in on_item(rt.engine.windows(pipeline, query), name):
        check_qos(spec.queries[query].qos, kind, value, win.names)
    made = rt.engine.adjust(pipeline, query, knob, value, reason)
    for a in made:
        detail = {**a.to_json(), "version": q.version}
        del detail["query"], detail["knob"]
        rt.catalog.log_adjustment(pipeline, a.knob, detail, query=query)
        log.info("%s/%s: %s of %s %d -> %d from %d (%s)", pipeline, query, a.knob,
                 a.window, a.old, a.new, a.since, reason)
    return made


def replay_adjustments(rt: Runtime, q: RunningQuery) -> None:
    """A restored query's logged changes (those of its version), made again."""
    records = [
        logged_adjustment(r)
        for r in rt.catalog.adjustments(q.pipeline, query=q.name)
        if r.kind in KNOBS and r.detail.get("version") == q.version
    ]
    if records:
        rt.engine.replay(q.pipeline, records)


def logged_adjustment(record: AdjustmentRecord) -> Adjustment:
    """A window change as the catalog's adjustments log keeps it (`adjust`)."""
    return Adjustment.from_json({**record.detail, "query": record.query, "knob": record.kind})


def qos_ranges(qos: QosSpec) -> dict[str, list[int]] | None:
    """A query's QoS ranges as the catalog keeps them: `window` (every Range window) or
    `window:NAME`, and `granularity` as [finest, coarsest] of its ladder (time_unit)."""
    if not qos.adjustable:
        return None
    out: dict[str, Any] = {
        ("window" if r.stream is None else f"window:{r.stream}"): [r.low, r.high]
        for r in qos.windows
    }
    if qos.granularity:
        out["granularity"] = [qos.granularity[0], qos.granularity[-1]]
    return out


def check_qos(qos: QosSpec, kind: str, value: int, names: tuple[str, ...]) -> None:
    """`value` for knob `kind` of the window on FROM item `names` lies inside `qos`."""
    if kind == "granularity":
        if value not in qos.granularity:
            rungs = ", ".join(map(str, qos.granularity)) or "none"
            raise AdjustmentError(f"granularity {value} is not a rung of the qos ladder ({rungs})")
        return
    r = qos.window_range(names)
    if r is None:
        raise AdjustmentError(f"the window of {names[0]} has no qos.window range")
    if not r.low <= value <= r.high:
        raise AdjustmentError(
            f"window {value} for {names[0]} is outside its qos range [{r.low}, {r.high}]"
        )
