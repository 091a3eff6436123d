"""What the HTTP API accepts and answers, as pydantic models: FastAPI checks request bodies
against them and publishes them as the API's OpenAPI schema (``GET /openapi.json``, kept as
``schemas/api.openapi.json``).

Request bodies are strict (a string is not a number, a number not a boolean) and closed (an
unknown field is an error). Responses are described field by field; they may carry fields
added later (``additionalProperties``), and the parts that other modules shape (a budget, a
Spark job's status, a logged adjustment's detail) are plain objects.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "MAX_INT64",
    "AdjustIn",
    "AdjustOut",
    "DeployIn",
    "Deployed",
    "Error",
    "Health",
    "Pipeline",
    "PipelineControl",
    "PipelineControlIn",
    "Pipelines",
    "QueryControlIn",
    "QueryStatus",
    "Readiness",
    "Record",
    "install_openapi",
]

MAX_INT64 = 2**63 - 1


def _unicode(text: str) -> str:
    """JSON may carry lone UTF-16 surrogates (``"\\ud800"``), which are not text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid Unicode text (a lone surrogate)") from None
    return text


Text = Annotated[str, AfterValidator(_unicode)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- requests -----------------------------------------------------------------------------------


class PipelineControlIn(_In):
    """A deployment's control. PUT: a field left out is null; PATCH: only the fields given
    change (a scheduler other than chain_bounded drops the stored bound, one other than
    chain_share the stored share)."""

    scheduler: Text | None = Field(
        None, description="a scheduler name (null: the configuration's or the file's)"
    )
    latency_bound_ms: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="chain_bounded's bound, milliseconds"
    )
    share: float | None = Field(
        None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="chain_share's share of FIFO steps, 0 (chain) to 1 (fifo)",
    )


class QueryControlIn(_In):
    """A query's control table; the fields given change."""

    weight: float | None = Field(None, gt=0, allow_inf_nan=False)
    active: bool | None = None
    memory_budget: int | None = Field(
        None, gt=0, le=MAX_INT64, description="bytes (null: left as it is)"
    )
    qos: dict[Text, Annotated[list[float], Field(min_length=2, max_length=2)]] | None = Field(
        None, description="setting -> [min, max] (min <= max), e.g. {\"window\": [60, 600]}"
    )


class AdjustIn(_In):
    """A running query's window size or granularity, inside its QoS ranges."""

    knob: Text = Field(description='"window", "window:NAME" or "granularity"')
    value: int = Field(gt=0, le=MAX_INT64, description="in the pipeline's time_unit")


class DeployIn(_In):
    """A pipeline to deploy: its text (`yaml`, with the file name to show in messages), or a
    file inside the worker's pipelines folder (`path`). With both, the file is used if it
    holds that text and lies inside the folder, else the text."""

    yaml: Text | None = Field(None, description="the pipeline file's text")
    filename: Text | None = Field(
        None, min_length=1, max_length=255, pattern=r"^[^/\\\x00]+$",
        description="the file name its messages show (no folder)",
    )
    path: Text | None = Field(
        None, min_length=1, max_length=4096, pattern=r"^[^\x00]+$",
        description="a pipeline file inside the pipelines folder (relative to it, or absolute)",
    )

    @model_validator(mode="after")
    def _text_or_path(self) -> DeployIn:
        if self.yaml is None and self.path is None:
            raise ValueError('give {"yaml": TEXT} or {"path": FILE}')
        return self


# -- responses ----------------------------------------------------------------------------------


class Error(_Out):
    """Every refused request: `detail` names the problem; a body that does not fit the
    request's schema lists each problem in `errors` (where, and what)."""

    detail: str
    errors: list[dict[str, Any]] | None = None


class Health(_Out):
    status: Literal["ok"]


class Readiness(_Out):
    status: Literal["ready", "starting", "not ready"]
    reasons: list[str] | None = None


class Record(_Out):
    """A catalog row (a deployment, a logged adjustment), its times as ISO 8601 text."""

    id: int


class QueryStatus(_Out):
    pipeline: str
    name: str
    cql: str
    sink: dict[str, Any] | None
    weight: float
    active: bool
    qos: dict[str, Any]
    memory_budget: int | None
    spec_hash: str
    start_after: int | None
    status: str
    error: str | None
    updated_at: str
    running: bool
    results: int | None = Field(None, description="results written (while it runs)")
    frontier: int | None = None


class _Rejected(_Out):
    file: str
    errors: list[str]


class _ControlStored(_Out):
    scheduler: str | None
    latency_bound_ms: float | None
    share: float | None
    updated_at: str | None


class _SchedulerChoice(_Out):
    scheduler: str
    latency_bound_ms: float | None
    share: float | None
    from_: str = Field(alias="from")


class Pipeline(_Out):
    name: str
    queries: dict[str, QueryStatus]
    file: str | None = None
    rejected: _Rejected | None = None
    last_deployment: Record | None
    scheduling: _SchedulerChoice | None
    control: _ControlStored | None
    budget: dict[str, Any] | None
    spark: dict[str, Any] | None
    archive: dict[str, Any] | None


class Pipelines(_Out):
    pipelines: list[Pipeline]
    paused: bool


class PipelineControl(_ControlStored):
    pipeline: str
    effective: _SchedulerChoice | None


class Deployed(_Out):
    """What a deployment did (status rejected: `errors`, ``FILE:LINE:COL: message`` each)."""

    pipeline: str
    status: Literal["applied", "rejected", "unchanged", "removed", "waiting"]
    added: list[str]
    replaced: list[str]
    removed: list[str]
    kept: list[str]
    errors: list[str]
    rejected: dict[str, str]


class AdjustOut(_Out):
    adjustments: list[dict[str, Any]]


# -- the published schema -----------------------------------------------------------------------


def install_openapi(app: FastAPI) -> None:
    """Serve the API's OpenAPI schema with its bearer scheme on the endpoints that need it,
    and every 422 as an `Error` (FastAPI's own validation body is replaced by ours)."""

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version,
                              description=app.description, routes=app.routes)
            _bearer_and_errors(doc, app)
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


_REFS = "#/components/schemas/"


def _bearer_and_errors(doc: dict[str, Any], app: FastAPI) -> None:
    components = doc.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http", "scheme": "bearer",
        "description": "the worker's token (CQ_TOKEN); needed by every change",
    }
    schemas = components.get("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    secured = {  # the routes that depend on the bearer check
        (r.path, m) for r in app.routes if getattr(r, "dependencies", None) for m in r.methods
    }
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if (path, method.upper()) in secured:
                operation["security"] = [{"bearer": []}]
            queried = any(p.get("in") == "query" for p in operation.get("parameters", []))
            if "requestBody" not in operation and not queried:  # a str path parameter only:
                operation["responses"].pop("422", None)  # FastAPI's 422 cannot happen
            for status, response in operation.get("responses", {}).items():
                if int(status) >= 400:  # JSON, also where the success is text (PlainText)
                    types = response.get("content", {})
                    error = next(iter(types.values()), None) if len(types) == 1 else None
                    if error is not None:
                        response["content"] = {"application/json": error}
                content = response.get("content", {}).get("application/json", {})
                if content.get("schema", {}).get("$ref") == f"{_REFS}HTTPValidationError":
                    content["schema"] = {"$ref": f"{_REFS}Error"}
                    response["description"] = "the request does not fit the schema"
                if status == "422" and "description" not in response:
                    response["description"] = "Unprocessable Content"
