"""Pipeline spec parts as the JSON the catalog stores (streams, relations, sinks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cq_service.spec.model import SinkSpec, SourceSpec, StreamSpec

__all__ = ["sink_json", "source_json", "stream_json"]


def source_json(source: SourceSpec) -> dict[str, Any]:
    """``{"type": …, "path": …, "format": …, **options}`` (keys that are unset left out)."""
    return _endpoint_json(source)


def sink_json(sink: SinkSpec | None) -> dict[str, Any] | None:
    """A query's sink as JSON, shaped like `source_json` (None for a view)."""
    return None if sink is None else _endpoint_json(sink)


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


def _endpoint_json(part: SourceSpec | SinkSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"type": part.type}
    if part.path is not None:
        out["path"] = part.path
    if part.format is not None:
        out["format"] = part.format
    out.update(_plain(part.options))
    return out


def _plain(options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(k): list(v) if isinstance(v, tuple) else v for k, v in options.items() if v is not None
    }
