"""`/metrics` in the Prometheus text format, from a worker's metrics snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["render_metrics"]


class _Snapshot:
    def __init__(self, data: dict[str, Any]):
        self.data = data

    def collect(self) -> Iterator[Any]:
        d = self.data
        rows = GaugeMetricFamily("cq_queue_rows", "Elements waiting in a queue", labels=["queue"])
        nbytes = GaugeMetricFamily("cq_queue_bytes", "Bytes waiting in a queue", labels=["queue"])
        for name, (r, b) in d["queues"].items():
            rows.add_metric([name], r)
            nbytes.add_metric([name], b)
        yield rows
        yield nbytes
        srows = GaugeMetricFamily("cq_synopsis_rows", "Rows in an operator's synopses", labels=["operator"])
        sbytes = GaugeMetricFamily("cq_synopsis_bytes", "Bytes in an operator's synopses", labels=["operator"])
        for name, (r, b) in d["synopses"].items():
            srows.add_metric([name], r)
            sbytes.add_metric([name], b)
        yield srows
        yield sbytes
        families = {
            "elements": CounterMetricFamily("cq_source_elements", "Elements read", labels=["source"]),
            "late": CounterMetricFamily("cq_source_late", "Late elements (dropped or dead-lettered)", labels=["source"]),
            "malformed": CounterMetricFamily("cq_source_malformed", "Malformed records", labels=["source"]),
            "dead_lettered": CounterMetricFamily("cq_dead_lettered", "Records sent to a dead-letter sink or topic", labels=["source"]),
        }
        lag = GaugeMetricFamily("cq_source_lag", "Records behind the end of the source", labels=["source"])
        watermark = GaugeMetricFamily("cq_source_time", "The source's heartbeat (stream time)", labels=["source"])
        for key, s in d["sources"].items():
            for field, fam in families.items():
                fam.add_metric([key], s[field])
            lag.add_metric([key], s["lag"])
            if s["watermark"] is not None:
                watermark.add_metric([key], s["watermark"])
        yield from families.values()
        yield lag
        yield watermark
        sinks = CounterMetricFamily("cq_results", "Result elements written", labels=["query"])
        for key, n in d["sinks"].items():
            sinks.add_metric([key], n)
        yield sinks
        yield GaugeMetricFamily("cq_sources_paused", "1 while the queues are over budget", value=int(d["paused"]))
        yield CounterMetricFamily("cq_checkpoints", "Checkpoints written", value=d["checkpoints"])
        yield CounterMetricFamily("cq_adjustments", "Run-time adjustments logged", value=d["adjustments"])
        deployments = CounterMetricFamily("cq_deployments", "Pipeline deployments", labels=["status"])
        for status, n in d["deployments"].items():
            deployments.add_metric([status], n)
        yield deployments
        yield GaugeMetricFamily("cq_peak_bytes", "Peak bytes in queues and synopses", value=d["peak_bytes"])


def render_metrics(snapshot: dict[str, Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot))
    return generate_latest(registry)
