"""A deployment's running plan as a graph with every node's statistics now: what the web view
draws (``GET /pipelines/{name}/events``, docs/service.md).

Nodes are the plan's sources, operators (with their synopses), the queues between them and the
sinks; edges follow the data. Each node carries the queries it serves and its numbers now:
rows in and out, rows per second and selectivity over the interval since the previous
snapshot, queued rows, memory, the current window and filter order, an MJoin's probe orders,
the deployment's scheduler's priority (policies that rank operators: Chain, Greedy); a source
also its late
and dead-lettered counts and the newest dead-letter entries as samples. Queries deployed at
different times run in different groups (engine/live.py): each group is drawn on its own,
with ids prefixed ``gK.``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cq_service.cql import logical as L
from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.operators.mjoin import MJoin
from cq_service.engine.operators.sink import SinkOperator
from cq_service.engine.queues import Queue
from cq_service.engine.statistics import window_setting
from cq_service.plan.explain import describe, synopsis
from cq_service.plan.physical import PhysicalPlan

if TYPE_CHECKING:
    from cq_service.service.worker import Worker

__all__ = ["LiveGraph"]


@dataclass
class _Last:
    rows_in: int
    rows_out: int
    at: float


class LiveGraph:
    """Snapshots of one deployment's graph; remembers the previous one's totals so the next
    reports per-interval rates (one instance per reader). Call on the engine thread."""

    def __init__(self, worker: Worker, pipeline: str):
        self.worker = worker
        self.pipeline = pipeline
        self._last: dict[str, _Last] = {}
        self._priority_of: Any = None

    def snapshot(self) -> dict[str, Any]:
        """{"pipeline", "nodes", "edges", "memory", "budget"}; KeyError when the deployment
        does not run."""
        worker = self.worker
        if self.pipeline not in worker.pipelines:
            raise KeyError(f"pipeline {self.pipeline}")
        now = time.monotonic()
        # The deployment's scheduler; its priorities when it ranks operators (not FIFO).
        self._priority_of = getattr(worker.scheduling.policy_of(self.pipeline), "priority_of", None)
        nodes: list[dict[str, Any]] = []
        edges: list[dict[str, str]] = []
        for k, (plan, by_node, source_keys) in enumerate(self._groups()):
            self._group(f"g{k}", plan, by_node, source_keys, now, nodes, edges)
        memory = sum(n["stats"]["memory"] for n in nodes if n["kind"] != "source")
        budget = worker.budgets.states.get(self.pipeline)
        return {
            "pipeline": self.pipeline,
            "nodes": nodes,
            "edges": edges,
            "memory": memory,
            "budget": None if budget is None else budget.to_json(),
        }

    def _groups(self) -> list[tuple[PhysicalPlan, dict[int, Operator], dict[str, str]]]:
        """The running groups of the deployment's queries, each once, in query order."""
        out, seen = [], set()
        for key, q in sorted(self.worker.queries.items()):
            if q.pipeline != self.pipeline:
                continue
            plan, by_node = self.worker.engine.plan_of(key)
            if id(plan) not in seen:
                seen.add(id(plan))
                out.append((plan, by_node, q.source_keys))
        return out

    def _group(
        self,
        gid: str,
        plan: PhysicalPlan,
        by_node: dict[int, Operator],
        source_keys: dict[str, str],
        now: float,
        nodes: list[dict[str, Any]],
        edges: list[dict[str, str]],
    ) -> None:
        prefix = f"{self.pipeline}/"
        keys = {**source_keys}
        for n in plan.nodes:
            op = by_node.get(n.id)
            if op is None:  # removed with the last query that used it
                continue
            nid = f"{gid}.n{n.id}"
            queries = [q.removeprefix(prefix) for q in n.queries]
            if isinstance(n.op, L.Source):
                source = self.worker.engine.sources.get(keys.get(n.op.name, ""))
                stats = self._stats(nid, source or op, now)
                # what waits in the source's queue for this group's gate
                stats["queued_rows"] = sum(r.pending_rows() for r in op.inputs)
                if source is not None:
                    stats["late"] = source.late_count
                    stats["dead_lettered"] = source.malformed_count
                running = self.worker.sources.get(keys.get(n.op.name, ""))
                # the newest dead-letter entries (malformed records, late elements when the
                # stream's late policy is dead_letter), JSON text each
                stats["dead_letter_samples"] = (
                    [] if running is None else list(running.dead_letter.recent)
                )
                kind = "source"
            else:
                stats = self._stats(nid, op, now)
                kind = "operator"
            nodes.append(
                {
                    "id": nid,
                    "kind": kind,
                    "label": f"#{n.id} {describe(n.op)}",
                    "synopsis": synopsis(n.op),
                    "queries": queries,
                    "stream": n.op.is_stream,
                    "stats": stats,
                }
            )
            qid = f"{gid}.q{n.id}"
            nodes.append(_queue_node(qid, f"q{n.id}", op.output, queries))
            edges.append({"from": nid, "to": qid})
            edges.extend({"from": f"{gid}.q{i}", "to": nid} for i in n.inputs)
        for s in plan.sinks:
            sink = self.worker.engine.sinks.get(s.query)
            if sink is None:
                continue
            nid = f"{gid}.sink.{s.query.removeprefix(prefix)}"
            kind = s.sink.type + (f" {s.sink.format}" if s.sink.format else "")
            nodes.append(
                {
                    "id": nid,
                    "kind": "sink",
                    "label": f"sink {s.query.removeprefix(prefix)}",
                    "synopsis": kind,
                    "queries": [s.query.removeprefix(prefix)],
                    "stream": s.is_stream,
                    "stats": self._stats(nid, sink, now),
                }
            )
            edges.append({"from": f"{gid}.q{s.input}", "to": nid})

    def _stats(self, nid: str, op: Operator, now: float) -> dict[str, Any]:
        rows_out = op.written if isinstance(op, SinkOperator) else op.rows_out
        last = self._last.get(nid)
        self._last[nid] = _Last(op.rows_in, rows_out, now)
        rate = selectivity = None
        if last is not None and now > last.at:
            came = op.rows_in - last.rows_in
            rate = came / (now - last.at)
            if came > 0:
                selectivity = (rows_out - last.rows_out) / came
        return {
            "rows_in": op.rows_in,
            "rows_out": rows_out,
            "rows_per_s": rate,
            "selectivity": selectivity,
            "queued_rows": sum(r.pending_rows() for r in op.inputs),
            "memory": op.state_size()[1],
            "window": window_setting(op) or None,
            "filter_order": op.filter_order() or None,
            "probe_orders": op.describe_orders() if isinstance(op, MJoin) else None,
            "priority": None if self._priority_of is None else self._priority_of(op),
            "watermark": None if op.watermark == NEVER else int(op.watermark),
        }


def _queue_node(nid: str, label: str, q: Queue, queries: list[str]) -> dict[str, Any]:
    return {
        "id": nid,
        "kind": "queue",
        "label": label,
        "synopsis": "",
        "queries": queries,
        "stream": None,
        "stats": {
            "queued_rows": q.rows,
            "memory": q.bytes,
            "peak_rows": q.peak_rows,
            "rows_in": q.total_rows,
            "readers": q.readers,
        },
    }
