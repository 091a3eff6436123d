"""`/metrics` in the Prometheus text format, from a worker's metrics snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

__all__ = ["parse_metrics", "render_metrics"]


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
        srows = GaugeMetricFamily(
            "cq_synopsis_rows", "Rows in an operator's synopses", labels=["operator"]
        )
        sbytes = GaugeMetricFamily(
            "cq_synopsis_bytes", "Bytes in an operator's synopses", labels=["operator"]
        )
        for name, (r, b) in d["synopses"].items():
            srows.add_metric([name], r)
            sbytes.add_metric([name], b)
        yield srows
        yield sbytes
        families = {
            "elements": CounterMetricFamily(
                "cq_source_elements", "Elements read", labels=["source"]
            ),
            "late": CounterMetricFamily(
                "cq_source_late", "Late elements (dropped or dead-lettered)", labels=["source"]
            ),
            "malformed": CounterMetricFamily(
                "cq_source_malformed", "Malformed records", labels=["source"]
            ),
            "dead_lettered": CounterMetricFamily(
                "cq_dead_lettered", "Records sent to a dead-letter sink or topic", labels=["source"]
            ),
        }
        lag = GaugeMetricFamily(
            "cq_source_lag", "Records behind the end of the source", labels=["source"]
        )
        watermark = GaugeMetricFamily(
            "cq_source_time", "The source's heartbeat (stream time)", labels=["source"]
        )
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
        yield GaugeMetricFamily(
            "cq_sources_paused", "1 while the queues are over budget", value=int(d["paused"])
        )
        paced = GaugeMetricFamily(
            "cq_source_paused",
            "1 while a pausable source waits for its deployments' memory budget",
            labels=["source"],
        )
        pauses = CounterMetricFamily(
            "cq_source_budget_pauses", "Times a source was paused for a memory budget",
            labels=["source"],
        )
        limit = GaugeMetricFamily(
            "cq_source_read_limit", "Rows a read of a paced source may return now",
            labels=["source"],
        )
        for key, pace in d.get("pacing", {}).items():
            paced.add_metric([key], int(pace["paused"]))
            pauses.add_metric([key], pace["pauses"])
            if pace["limit"] is not None:
                limit.add_metric([key], pace["limit"])
        yield paced
        yield pauses
        yield limit
        yield CounterMetricFamily("cq_checkpoints", "Checkpoints written", value=d["checkpoints"])
        yield CounterMetricFamily(
            "cq_adjustments", "Run-time adjustments logged", value=d["adjustments"]
        )
        deployments = CounterMetricFamily(
            "cq_deployments", "Pipeline deployments", labels=["status"]
        )
        for status, n in d["deployments"].items():
            deployments.add_metric([status], n)
        yield deployments
        rejected = CounterMetricFamily(
            "cq_deploy_rejected",
            "Deployments this worker rejected, by reason (unreadable, invalid, source_or_sink, "
            "internal)",
            labels=["reason"],
        )
        for reason, n in d.get("rejections", {}).items():
            rejected.add_metric([reason], n)
        yield rejected
        yield GaugeMetricFamily(
            "cq_peak_bytes", "Peak bytes in queues and synopses", value=d["peak_bytes"]
        )
        yield from _queued(d["queued"])
        yield from _latency(d["latency"])
        yield from _schedulers(d["schedulers"])
        yield from _windows(d.get("windows", {}))
        yield from _budgets(d.get("budgets", {}))
        yield from _dependencies(d.get("dependencies", {}), d.get("pending", {}))
        if d.get("checkpoint_age") is not None:
            yield GaugeMetricFamily(
                "cq_checkpoint_age_seconds", "Seconds since the last checkpoint was written",
                value=d["checkpoint_age"],
            )
        yield from _snapshots(d.get("snapshots"))
        yield from _constraints(d.get("constraints", {}))


def _constraints(constraints: dict[str, dict[str, Any]]) -> Iterator[Metric]:
    """Per operator exploiting a k-constraint: the k in use (+Inf while k-Mon has not learned
    it or after a reset) and its counters (engine/constraint_status.py)."""
    labels = ["operator", "kind", "attribute"]
    k = GaugeMetricFamily("cq_constraint_k", "The adherence k in use (+Inf: unknown)", labels=labels)
    counters = {
        field: CounterMetricFamily(f"cq_constraint_{field}", text, labels=labels)
        for field, text in (
            ("increases", "Increases of the learned k seen by k-Mon (each resets k to +Inf)"),
            ("violations", "Arrivals that broke the constraint at the k in use"),
            ("missed", "Results lost to violations (false negatives)"),
            ("dropped", "Rows (RIDS) or partitions (CA) the constraint freed"),
        )
    }
    for name, st in constraints.items():
        key = [name, st["kind"], st["attribute"]]
        k.add_metric(key, float(st["k"]))
        for field, fam in counters.items():
            fam.add_metric(key, st[field])
    yield k
    yield from counters.values()


def _snapshots(s: dict[str, Any] | None) -> Iterator[Metric]:
    if s is None:  # snapshots are off
        return
    yield CounterMetricFamily("cq_snapshots", "State snapshots written", value=s["written"])
    yield CounterMetricFamily(
        "cq_snapshot_failures", "State snapshots that could not be written", value=s["failures"]
    )
    yield CounterMetricFamily(
        "cq_snapshot_corrupt",
        "Snapshots skipped at start-up because they did not read back whole",
        value=s["corrupt"],
    )
    yield GaugeMetricFamily(
        "cq_snapshot_restored", "Number of the snapshot this worker started from (0: none)",
        value=s["restored"],
    )
    if s["seconds"] is not None:
        yield GaugeMetricFamily(
            "cq_snapshot_seconds", "Seconds the last state snapshot took (engine thread)",
            value=s["seconds"],
        )


def _dependencies(
    dependencies: dict[str, dict[str, Any]], pending: dict[str, tuple[int, int]]
) -> Iterator[Any]:
    """Whether each dependency (Kafka brokers, the catalog) answers, its outages and the
    retries they caused; what each sink holds that its broker has not acknowledged."""
    up = GaugeMetricFamily(
        "cq_dependency_up", "1 while the dependency answers, 0 while it is unreachable",
        labels=["dependency"],
    )
    outages = CounterMetricFamily(
        "cq_dependency_outages", "Outages of the dependency since the worker started",
        labels=["dependency"],
    )
    retries = CounterMetricFamily(
        "cq_dependency_retries",
        "Operations retried because the dependency was unreachable (checkpoints, "
        "deployments, catalog pings)",
        labels=["dependency"],
    )
    for name, state in dependencies.items():
        up.add_metric([name], int(state["up"]))
        outages.add_metric([name], state["outages"])
        retries.add_metric([name], state["retries"])
    yield up
    yield outages
    yield retries
    rows = GaugeMetricFamily(
        "cq_sink_pending_results", "Results written to a sink and not acknowledged yet",
        labels=["query"],
    )
    nbytes = GaugeMetricFamily(
        "cq_sink_pending_bytes", "Bytes of results not acknowledged yet", labels=["query"]
    )
    for query, (n, b) in pending.items():
        rows.add_metric([query], n)
        nbytes.add_metric([query], b)
    yield rows
    yield nbytes


def _budgets(budgets: dict[str, dict[str, Any]]) -> Iterator[Any]:
    """Each deployment with a memory budget: the budget, its reserve, what the resource
    manager estimates and measures, and the share of input each query sheds."""
    gauges = {
        key: GaugeMetricFamily(name, text, labels=["pipeline"])
        for key, name, text in [
            ("memory_budget", "cq_memory_budget_bytes", "A deployment's memory budget"),
            ("reserve", "cq_memory_reserve_bytes", "The part of the budget kept free"),
            ("estimated_bytes", "cq_memory_estimated_bytes",
             "The cost model's memory at the settings in force"),
            ("measured_bytes", "cq_memory_measured_bytes",
             "Bytes the deployment's operators hold, at the resource manager's last round"),
            ("queued_bytes", "cq_memory_queued_bytes",
             "Bytes queued for the deployment's operators then (part of the estimate)"),
            ("unreleased_bytes", "cq_memory_unreleased_bytes",
             "Of the estimate, what changed windows hold above their steady level until "
             "the tuples admitted before the change leave"),
            ("sampled_bytes", "cq_memory_sampled_bytes",
             "Bytes held and queued, sampled at every turn of the worker's loop"),
            ("peak_bytes", "cq_memory_peak_bytes", "The largest of those samples"),
        ]
    }
    over = CounterMetricFamily(
        "cq_memory_samples_over_budget", "Samples (one a turn) above the memory budget",
        labels=["pipeline"],
    )
    shed_tuples = CounterMetricFamily(
        "cq_shed_tuples", "Tuples a query's windows dropped (load shedding)",
        labels=["pipeline", "query"],
    )
    shed = GaugeMetricFamily(
        "cq_shed_fraction", "Share of a query's window input dropped (load shedding)",
        labels=["pipeline", "query"],
    )
    for pipeline, b in budgets.items():
        for key, fam in gauges.items():
            if b[key] is not None:
                fam.add_metric([pipeline], float(b[key]))
        for query, share in b["shedding"].items():
            shed.add_metric([pipeline, query.split("/", 1)[-1]], share)
        over.add_metric([pipeline], b["samples_over_budget"])
        for query, n in b.get("shed_tuples", {}).items():
            shed_tuples.add_metric([pipeline, query], n)
    yield from gauges.values()
    yield shed
    yield over
    yield shed_tuples


def _windows(windows: dict[tuple[str, str, str], tuple[int, int]]) -> Iterator[Any]:
    """The size and granularity now of every window a query's QoS makes adjustable."""
    labels = ["pipeline", "query", "window"]
    size = GaugeMetricFamily(
        "cq_window_size", "An adjustable Range window's size now (time_unit)", labels=labels
    )
    grain = GaugeMetricFamily(
        "cq_window_granularity",
        "An adjustable window's granularity Γ now (time_unit; 1: none)",
        labels=labels,
    )
    for key, (s, g) in windows.items():
        size.add_metric(list(key), s)
        grain.add_metric(list(key), g)
    yield size
    yield grain


def _queued(q: dict[str, float]) -> Iterator[Any]:
    """Every queue together: now, at the peak, and averaged over time."""
    for key, name, what in [
        ("rows", "cq_queued_rows", "Elements waiting in all queues"),
        ("bytes", "cq_queued_bytes", "Bytes waiting in all queues"),
        ("peak_rows", "cq_queued_peak_rows", "Most elements ever waiting in all queues"),
        ("peak_bytes", "cq_queued_peak_bytes", "Most bytes ever waiting in all queues"),
        (
            "average_rows",
            "cq_queued_average_rows",
            "Elements waiting in all queues, time-weighted average",
        ),
        (
            "average_bytes",
            "cq_queued_average_bytes",
            "Bytes waiting in all queues, time-weighted average",
        ),
    ]:
        yield GaugeMetricFamily(name, what, value=q[key])


def _latency(latency: dict[tuple[str, str], dict[str, float]]) -> Iterator[Any]:
    """Result latency per query: a summary (p50, p99, count, sum) and the largest."""
    summary = Metric(
        "cq_result_latency_seconds",
        "Seconds from an input entering the engine to the results it made being written",
        "summary",
    )
    largest = GaugeMetricFamily(
        "cq_result_latency_max_seconds", "Largest result latency", labels=["pipeline", "query"]
    )
    for (pipeline, query), h in latency.items():
        labels = {"pipeline": pipeline, "query": query}
        for q, key in (("0.5", "p50"), ("0.99", "p99")):
            summary.add_sample("cq_result_latency_seconds", {**labels, "quantile": q}, h[key])
        summary.add_sample("cq_result_latency_seconds_count", labels, h["count"])
        summary.add_sample("cq_result_latency_seconds_sum", labels, h["sum"])
        largest.add_metric([pipeline, query], h["max"])
    yield summary
    yield largest


def _schedulers(schedulers: dict[str, dict[str, Any]]) -> Iterator[Any]:
    """Each running deployment's scheduler (an info gauge, always 1), latency bound and share."""
    info = GaugeMetricFamily(
        "cq_pipeline_scheduler",
        "The scheduler of a deployment, and where it was chosen (control, config, file)",
        labels=["pipeline", "scheduler", "origin"],
    )
    bound = GaugeMetricFamily(
        "cq_pipeline_latency_bound_seconds",
        "The latency bound of a chain_bounded deployment",
        labels=["pipeline"],
    )
    share = GaugeMetricFamily(
        "cq_pipeline_scheduler_share",
        "The share of steps a chain_share deployment gives the oldest waiting input",
        labels=["pipeline"],
    )
    for pipeline, s in schedulers.items():
        info.add_metric([pipeline, s["scheduler"], s["from"]], 1)
        if s["latency_bound_ms"] is not None:
            bound.add_metric([pipeline], s["latency_bound_ms"] / 1000)
        if s.get("share") is not None:
            share.add_metric([pipeline], s["share"])
    yield info
    yield bound
    yield share


def render_metrics(snapshot: dict[str, Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot))
    return generate_latest(registry)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as {`name{labels}`: value}, comments left out (for clients and tests)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out
