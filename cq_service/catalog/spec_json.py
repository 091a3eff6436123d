"""Pipeline spec parts as the JSON the catalog stores (streams, relations, sinks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cq_service.spec.model import SinkSpec, SourceSpec, StreamSpec

__all__ = ["sink_json", "source_json", "stream_json"]


def source_json(source: SourceSpec) -> dict[str, Any]:
    """``{"type": …, "path": …, "format": …, **options}`` (keys that are unset left out)."""
    out: dict[str, Any] = {"type": source.type}
    if source.path is not None:
        out["path"] = source.path
    if source.format is not None:
        out["format"] = source.format
    out.update(_plain(source.options))
    return out


def sink_json(sink: SinkSpec | None) -> dict[str, Any] | None:
    """A query's sink as JSON (None for a view)."""
    if sink is None:
        return None
    out: dict[str, Any] = {"type": sink.type}
    if sink.path is not None:
        out["path"] = sink.path
    if sink.format is not None:
        out["format"] = sink.format
    out.update(_plain(sink.options))
    return out


def stream_json(stream: StreamSpec) -> dict[str, Any]:
    """What `Catalog.upsert_source` takes: name, is_relation, schema (column -> type, in
    order), source and timestamp."""
    return {
        "name": stream.name,
        "is_relation": stream.is_relation,
        "schema": {f.name: f.type.value for f in stream.schema},
        "source": source_json(stream.source),
        "timestamp": stream.timestamp,
    }


def _plain(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(k): list(v) if isinstance(v, tuple) else v for k, v in options.items() if v is not None
    }
