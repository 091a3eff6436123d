"""Pipeline file (YAML) -> validated, typed `PipelineSpec` (DESIGN §3).

Three passes, each reporting every problem it finds with its position:
1. YAML with positions (`positions.parse_yaml`): syntax errors, duplicate keys, boolean keys;
2. the JSON Schema (`pipeline.schema.json`), each error mapped to the offending key or value
   (`schema`);
3. checks the schema cannot express, run once the schema passes (`builder`): names unique
   across streams, relations and queries (case-insensitively, as in CQL) and none of them
   `SysStream` (reserved: spec/sys_stream.py), the timestamp
   column's type, source files that must exist, formats known from the extension, durations in
   whole time units, a `resources.latency_bound` exactly when the scheduler is chain_bounded,
   a `resources.share` exactly when it is chain_share,
   QoS ranges with min <= max and granularity ladders whose rungs divide each other, sizes of
   memory budgets.
CQL text is not parsed here; each query keeps the file position of every character.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path as FsPath

from cq_service.errors import CQError, Span, SpecError
from cq_service.spec.builder import SpecBuilder
from cq_service.spec.endpoints import FORMAT_EXTENSIONS, KAFKA_SINK_OPTIONS, KAFKA_SOURCE_OPTIONS
from cq_service.spec.exceptions import SpecErrors
from cq_service.spec.model import (
    PipelineSpec,
)
from cq_service.spec.positions import parse_yaml
from cq_service.spec.quantities import parse_duration
from cq_service.spec.schema import pipeline_schema, schema_errors

__all__ = [
    "FORMAT_EXTENSIONS",
    "KAFKA_SINK_OPTIONS",
    "KAFKA_SOURCE_OPTIONS",
    "load_pipeline",
    "load_pipeline_text",
    "parse_duration",
    "pipeline_schema",
]


def load_pipeline(path: str | FsPath) -> PipelineSpec:
    """Read, validate and type the pipeline file at `path`.

    Raises `SpecErrors` listing every problem found, each rendered ``FILE:LINE:COL: message``.
    """
    shown = str(path)
    try:
        text = FsPath(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecErrors([SpecError(f"cannot read pipeline file: {reason}", file=shown)]) from None
    except UnicodeDecodeError as exc:
        error = SpecError(f"pipeline file is not UTF-8 text: {exc.reason}", file=shown)
        raise SpecErrors([error]) from None
    return load_pipeline_text(text, path)


def load_pipeline_text(text: str, path: str | FsPath = "pipeline.yaml") -> PipelineSpec:
    """Validate and type pipeline `text`, as if read from `path`.

    Relative paths in the text are resolved against `path`'s folder; `path` itself need not
    exist. Raises `SpecErrors` listing every problem found.
    """
    shown = str(path)
    doc = parse_yaml(text, shown)
    errors: list[CQError] = list(doc.errors)
    invalid = schema_errors(doc)
    errors.extend(invalid)
    spec = None
    if not invalid:
        absolute = FsPath(path).resolve()
        builder = SpecBuilder(doc, absolute.parent)
        spec = builder.build(str(absolute))
        errors.extend(builder.errors)
    if errors or spec is None:
        raise SpecErrors(_in_file_order(errors), file=shown)
    return spec


def _in_file_order(errors: Iterable[CQError]) -> list[CQError]:
    """Errors sorted by position, one per position and message."""
    seen: set[tuple[int, int, str]] = set()
    unique = []
    for error in errors:
        span = error.span or Span(0, 0)
        if (span.line, span.col, error.message) not in seen:
            seen.add((span.line, span.col, error.message))
            unique.append(error)
    return sorted(unique, key=lambda e: (e.span.line, e.span.col) if e.span else (0, 0))


