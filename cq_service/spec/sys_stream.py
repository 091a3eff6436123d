"""`SysStream`: the reserved stream of the engine's own statistics (docs/sys-stream.md).

Every pipeline may read it in CQL without declaring it. When a query names it, the compiler adds
it to the pipeline's streams as an ordinary `StreamSpec` whose source is of type ``system``: the
engine then publishes one element per entity (source, operator, queue, sink) every
`resources.statistics_interval` of the pipeline's time, stamped with that instant.
"""

from __future__ import annotations

from dataclasses import replace

from cq_service.spec.model import TIME_UNITS, FieldSpec, PipelineSpec, SourceSpec, StreamSpec
from cq_service.types import DataType

__all__ = [
    "SYSTEM_SOURCE",
    "SYS_STREAM",
    "SYS_STREAM_FIELDS",
    "default_interval",
    "is_sys_stream",
    "statistics_interval",
    "with_sys_stream",
]

SYS_STREAM = "SysStream"
SYSTEM_SOURCE = "system"  # the source type of SysStream (never written in a pipeline file)

_S, _I, _F = DataType.STRING, DataType.INT, DataType.FLOAT
# (name, type, meaning): the documented schema; docs/sys-stream.md and the JSON Schema's
# `$defs/sysStreamElement` list the same columns (a unit test checks).
SYS_STREAM_FIELDS: tuple[tuple[str, DataType, str], ...] = (
    (
        "pipeline",
        _S,
        "the deployment (pipeline name) the entity belongs to; '' for a source "
        "the worker shares between deployments",
    ),
    ("kind", _S, "source, operator, queue, sink or resource manager"),
    ("entity", _S, "its name: the stream, the operator's id (#3), the queue (q3), the query"),
    ("detail", _S, "what it is, as `cq run --stats` describes it"),
    ("rows_in", _I, "elements read so far (a queue: elements pushed so far)"),
    ("rows_out", _I, "elements emitted so far (a sink: results written so far)"),
    ("selectivity", _F, "rows out / rows in over the last interval; NULL with no input in it"),
    (
        "us_per_row",
        _F,
        "busy microseconds per input element over the last interval; NULL with no input in it, "
        "or when not timed (SysStream's source; the worker's sources, polled outside the "
        "executor's steps)",
    ),
    ("queued_rows", _I, "elements waiting in it (queues) or in its input queues (others)"),
    (
        "memory",
        _I,
        "bytes it holds now: a synopsis' state, a queue's elements, a source's reorder buffer",
    ),
    ("late", _I, "late elements so far (sources; 0 for others)"),
    ("dead_lettered", _I, "malformed records so far (sources; 0 for others)"),
    (
        "lag",
        _I,
        "the pipeline's time minus the entity's heartbeat, in time_unit; NULL before "
        "its first heartbeat",
    ),
    (
        "window",
        _S,
        "the current window and granularity of a window or windowed aggregate, e.g. "
        "'Range 600 Slide 10 granularity 5'; NULL for others",
    ),
    (
        "filter_order",
        _S,
        "the current order of a selection's (or join residual's) conjuncts, "
        "F1.. as written, e.g. 'a-greedy: F3, F1, F2', with ' (one pass)' while the whole "
        "predicate in one pass measures cheaper; NULL for others",
    ),
    (
        "constraint",
        _S,
        "the k-constraint the operator exploits to drop state: 'rids' (a join) or 'ca' (a "
        "partitioned rows window); NULL for others",
    ),
    (
        "constraint_on",
        _S,
        "what it constrains: 'Bid.auction -> Auction.id' (rids), 'Pos.car' (ca); NULL for others",
    ),
    (
        "k",
        _F,
        "the adherence k in use: declared, or learned by k-Mon for k: auto; Infinity while "
        "not learned (at the start, after an increase), in JSON null; NULL for others",
    ),
    ("k_increases", _I, "times k-Mon saw the learned k increase and reset it to Infinity"),
    ("k_violations", _I, "arrivals that broke the constraint at the k in use"),
    ("k_missed", _I, "results missed because of those violations (false negatives)"),
    ("k_dropped", _I, "rows (rids) or partitions (ca) dropped from the state by the constraint"),
)


def is_sys_stream(name: str) -> bool:
    """Whether `name` is the reserved stream (names are case-insensitive in CQL)."""
    return name.lower() == SYS_STREAM.lower()


def default_interval(time_unit: str) -> int:
    """One second in `time_unit` (at least one unit)."""
    return max(1, TIME_UNITS["s"] // TIME_UNITS[time_unit])


def statistics_interval(spec: PipelineSpec) -> int:
    """The pipeline's SysStream interval in its time_unit."""
    return spec.resources.statistics_interval or default_interval(spec.time_unit)


def with_sys_stream(spec: PipelineSpec) -> PipelineSpec:
    """`spec` with SysStream among its streams (once)."""
    if any(is_sys_stream(n) for n in spec.streams):
        return spec
    stream = StreamSpec(
        SYS_STREAM,
        tuple(FieldSpec(name, t) for name, t, _ in SYS_STREAM_FIELDS),
        SourceSpec(SYSTEM_SOURCE, options={"interval": statistics_interval(spec)}),
    )
    return replace(spec, streams={**spec.streams, SYS_STREAM: stream})
