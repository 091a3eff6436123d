"""Pipeline files: YAML -> validated, typed `PipelineSpec` (DESIGN §3).

`load_pipeline(path)` returns the spec or raises `SpecErrors` listing every problem, each at its
file position (`SpecLimitExceeded` for a text whose YAML aliases expand too far or that nests
too deep: yaml_limits.py). The JSON Schema editors use is `pipeline_schema()` (published as
``schemas/pipeline.schema.json``).
"""

from cq_service.spec.exceptions import SpecErrors, SpecLimitExceeded
from cq_service.spec.loader import (
    FORMAT_EXTENSIONS,
    load_pipeline,
    load_pipeline_text,
    parse_duration,
    pipeline_schema,
)
from cq_service.spec.model import (
    TIME_UNITS,
    FieldSpec,
    PipelineSpec,
    QuerySpec,
    SinkSpec,
    SourceSpec,
    StreamSpec,
)

__all__ = [
    "FORMAT_EXTENSIONS",
    "TIME_UNITS",
    "FieldSpec",
    "PipelineSpec",
    "QuerySpec",
    "SinkSpec",
    "SourceSpec",
    "SpecErrors",
    "SpecLimitExceeded",
    "StreamSpec",
    "load_pipeline",
    "load_pipeline_text",
    "parse_duration",
    "pipeline_schema",
]
