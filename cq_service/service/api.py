"""The worker's HTTP API (FastAPI), documented in docs/service.md.

Reads are open; everything that changes what runs needs ``Authorization: Bearer <token>`` with
the configured token (with no token configured, changes are refused). Every handler hands its
work to the engine thread (`Worker.call`), so the API never races the engine.

Requests and responses are the models of api_models.py (the OpenAPI schema, ``GET
/openapi.json``); a request that is malformed, ill-typed, unauthorized, too large or names
what does not exist is refused with a 4xx JSON body (api_guard.py). A request that needs a
dependency that cannot be reached now (the catalog database, a source's brokers) is answered
503 with the reason; `/readyz` is 503 while any dependency the worker uses is unreachable,
`/healthz` stays 200.
"""

from __future__ import annotations

import asyncio
import json
import queue
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as InPath
from fastapi.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST

from cq_service.catalog import CatalogInputError
from cq_service.errors import AdjustmentError, Unreachable
from cq_service.service import views as w
from cq_service.service.api_guard import (
    BodyLimit,
    CatchAll,
    ErrorResponse,
    check_bearer,
    install_error_handlers,
    pipeline_file,
)
from cq_service.service.api_models import (
    AdjustIn,
    AdjustOut,
    Deployed,
    DeployIn,
    Error,
    Health,
    Pipeline,
    PipelineControl,
    PipelineControlIn,
    Pipelines,
    QueryControlIn,
    QueryStatus,
    Readiness,
    Record,
    install_openapi,
)
from cq_service.service.live_graph import LiveGraph
from cq_service.service.metrics import render_metrics
from cq_service.service.worker import Worker
from cq_service.spec import SpecErrors, SpecLimitExceeded
from cq_service.spec.positions import parse_yaml

__all__ = ["make_app"]

# The web view's built assets (web/, `make ui`), served at /ui.
UI_STATIC = Path(__file__).parent / "ui_static"


PipelineName = Annotated[str, InPath(description="a pipeline's name", examples=["web-proxy"])]
QueryName = Annotated[str, InPath(description="a query's name", examples=["domain_load"])]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses: each status answers an `Error` body."""
    return {status: {"model": Error} for status in statuses}


_READ = _errors(404, 503)  # a read of a named pipeline or query
_CHANGE = _errors(400, 401, 403, 404, 413, 422, 503)  # a change with a JSON body


def make_app(worker: Worker) -> FastAPI:
    app = FastAPI(title="cq-service worker", version="1", redirect_slashes=False,
                  description="The worker's HTTP API: docs/service.md, HTTP API.")
    install_openapi(app)
    app.add_middleware(BodyLimit)
    app.add_middleware(CatchAll)  # outermost: also catches what BodyLimit lets through
    install_error_handlers(app)
    token = worker.config.token

    @app.exception_handler(Unreachable)
    async def unreachable(_request: Request, error: Unreachable) -> JSONResponse:
        """A dependency the request needs cannot be reached now: try again later."""
        return ErrorResponse(
            {"detail": error.outage.describe()}, status_code=503, headers={"Retry-After": "5"}
        )

    def authorized(
        authorization: str | None = Header(default=None, include_in_schema=False),
    ) -> None:
        check_bearer(authorization, token)

    def call(fn: Any) -> Any:
        try:
            return worker.call(fn)
        except KeyError as e:
            raise HTTPException(404, f"not found: {e.args[0]}") from None

    @app.get("/healthz", response_model=Health)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
    def readyz() -> Response:
        """200 once the first reconcile is done and while every dependency answers; 503 with
        the reasons otherwise (read without the engine thread: it answers even when busy)."""
        if not worker.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        reasons = worker.dependencies.reasons()
        if reasons:
            return JSONResponse({"status": "not ready", "reasons": reasons}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/pipelines", response_model=Pipelines, responses=_errors(503))
    def pipelines() -> dict[str, Any]:
        return call(lambda: w.describe(worker))

    @app.get("/pipelines/{name}", response_model=Pipeline, responses=_READ)
    def pipeline(name: PipelineName) -> dict[str, Any]:
        found = [p for p in call(lambda: w.describe(worker))["pipelines"] if p["name"] == name]
        if not found:
            raise HTTPException(404, f"not found: pipeline {name}")
        return found[0]

    @app.get("/pipelines/{name}/explain", response_class=PlainTextResponse,
             responses=_errors(404, 422, 503))  # 422: a `live` that is not a boolean
    def explain(name: PipelineName, live: bool = False) -> str:
        """The physical plan, the current filter orders and adjustable windows; with
        `live=true`, every entity's statistics now (docs/sys-stream.md)."""
        return call(lambda: w.explain_pipeline(worker, name, live))

    @app.get("/pipelines/{name}/events", response_class=StreamingResponse,
             responses={**_READ, 200: {"content": {"text/event-stream": {
                 "schema": {"type": "string"}}}, "description": "server-sent events"}})
    async def pipeline_events(name: PipelineName) -> StreamingResponse:
        """The running plan as a graph with every node's statistics, as server-sent events:
        one JSON object a second ({"pipeline", "nodes", "edges", "memory", "budget",
        "entities"}: the web view's data; "entities" are `explain?live=true`'s rows)."""
        graph = LiveGraph(worker, name)
        first = await asyncio.to_thread(call, lambda: w.live_feed(worker, graph))

        async def events() -> Any:
            data = first
            while True:
                yield f"data: {json.dumps(data, default=str)}\n\n"
                await asyncio.sleep(1.0)
                try:
                    data = await asyncio.to_thread(worker.call, lambda: w.live_feed(worker, graph))
                except KeyError:
                    yield "event: end\ndata: the pipeline stopped\n\n"
                    return

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/pipelines/{name}/control", response_model=PipelineControl, responses=_READ)
    def pipeline_control(name: PipelineName) -> dict[str, Any]:
        return call(lambda: w.pipeline_control(worker, name))

    @app.put("/pipelines/{name}/control", dependencies=[Depends(authorized)],
             response_model=PipelineControl, responses=_CHANGE)
    async def put_pipeline_control(name: PipelineName, body: PipelineControlIn) -> dict[str, Any]:
        """Replace a deployment's control: {"scheduler": NAME or null, "latency_bound_ms": MS,
        "share": F} (a field left out is null; null scheduler: the configuration's or the
        file's)."""
        return await _change_pipeline_control(name, body.model_dump(), merge=False)

    @app.patch("/pipelines/{name}/control", dependencies=[Depends(authorized)],
               response_model=PipelineControl, responses=_CHANGE)
    async def patch_pipeline_control(name: PipelineName, body: PipelineControlIn) -> dict[str, Any]:
        """Change the fields given of a deployment's control (a scheduler other than
        chain_bounded drops the stored latency bound, one other than chain_share the stored
        share)."""
        fields = body.model_dump(include=body.model_fields_set)
        return await _change_pipeline_control(name, fields, merge=True)

    async def _change_pipeline_control(
        name: str, fields: dict[str, Any], merge: bool
    ) -> dict[str, Any]:
        try:
            return await asyncio.to_thread(
                call, lambda: w.set_pipeline_control(worker, name, fields, merge=merge)
            )
        except CatalogInputError as e:
            raise HTTPException(422, str(e)) from None

    @app.get("/pipelines/{name}/deployments", response_model=list[Record], responses=_READ)
    def pipeline_deployments(name: PipelineName) -> list[dict[str, Any]]:
        """The pipeline's deployment log, oldest first (a rejected file's `error` is
        ``FILE:LINE:COL: message``)."""
        return call(lambda: w.pipeline_deployments(worker, name))

    @app.get("/pipelines/{name}/adjustments", response_model=list[Record],
             responses=_errors(404, 422, 503))  # 422: a `limit` out of range
    def pipeline_adjustments(
        name: PipelineName, limit: Annotated[int, Query(ge=1, le=10_000)] = 200
    ) -> list[dict[str, Any]]:
        """The newest `limit` entries of the pipeline's adjustments log, oldest first: the
        resource manager's window, granularity and shedding changes (detail `reason`: the
        estimate before and after, and the budget), those made through the API, scheduler
        changes, and admission control's rejections (kind `rejected`, with the reason)."""
        return call(lambda: w.pipeline_adjustments(worker, name, limit))

    @app.post("/pipelines", dependencies=[Depends(authorized)], response_model=Deployed,
              responses={**_errors(400, 401, 403, 413, 503),
                         422: {"model": Deployed | Error,
                               "description": "a rejected pipeline (Deployed, status "
                               "rejected) or a body that does not fit (Error)"},
                         503: {"model": Deployed | Error,
                               "description": "waiting for a dependency (Deployed, status "
                               "waiting) or the engine did not answer (Error)"}})
    async def deploy(body: DeployIn) -> JSONResponse:
        """Deploy a pipeline now: {"yaml": TEXT, "filename": NAME} (kept in the catalog and
        deployed again at every start-up; relative paths in it are taken from the pipelines
        folder) or {"path": FILE} (a file in the pipelines folder, deployed as the file it
        is). With both (what `cq deploy` sends), the file is used if it is in the folder and
        holds that text; otherwise the text is, its relative paths taken from FILE's folder if
        the worker has that folder, else from the pipelines folder — a file outside the
        pipelines folder is never read."""
        folder = Path(worker.config.pipelines)
        path = None
        if body.path is not None:
            try:
                path = pipeline_file(folder, body.path)
            except HTTPException:
                if body.yaml is None:
                    raise
            if path is not None and body.yaml is not None and not _holds(path, body.yaml):
                path = None
        if path is not None:
            _check_bounds(_read(path), str(path))
            file = path
            result = await asyncio.to_thread(worker.call, lambda: worker.deploy_file(file))
        else:
            assert body.yaml is not None  # DeployIn holds a text or a path
            text = body.yaml
            # FILE's folder for relative paths when the worker has it (cq deploy on the
            # worker's machine), else the pipelines folder's (from another machine)
            at = None if body.path is None else Path(body.path)
            filename = at.name if at is not None else body.filename or "pipeline.yaml"
            if at is not None and not (at.is_absolute() and at.parent.is_dir()):
                at = None
            _check_bounds(text, filename)
            result = await asyncio.to_thread(
                worker.call, lambda: worker.deploy_text(text, filename, at)
            )
        status = {"rejected": 422, "waiting": 503}.get(result.status, 200)
        return JSONResponse(result.to_json(), status_code=status)

    @app.get("/queries", response_model=list[QueryStatus], responses=_errors(503))
    def queries() -> list[dict[str, Any]]:
        data = call(lambda: w.describe(worker))
        return [q for p in data["pipelines"] for q in p["queries"].values()]

    @app.get("/queries/{pipeline}/{name}", response_model=QueryStatus, responses=_READ)
    def query(pipeline: PipelineName, name: QueryName) -> dict[str, Any]:
        return call(lambda: w.query_status(worker, pipeline, name))

    @app.put("/queries/{pipeline}/{name}/control", dependencies=[Depends(authorized)],
             response_model=QueryStatus, responses=_CHANGE)
    @app.patch("/queries/{pipeline}/{name}/control", dependencies=[Depends(authorized)],
               response_model=QueryStatus, responses=_CHANGE)
    async def control(
        pipeline: PipelineName, name: QueryName, body: QueryControlIn
    ) -> dict[str, Any]:
        """Change a query's control table: weight, active, memory_budget, qos (the fields
        given; null leaves a field as it is)."""

        def apply() -> dict[str, Any]:
            if worker.catalog.query(pipeline, name) is None:
                raise KeyError(f"{pipeline}/{name}")
            fields = {
                k: v for k, v in body.model_dump(exclude={"active"}).items() if v is not None
            }
            if fields:
                worker.catalog.set_control(pipeline, name, **fields)
            if body.active is not None:
                worker.set_active(pipeline, name, body.active)
            return w.query_status(worker, pipeline, name)

        try:
            return await asyncio.to_thread(call, apply)
        except CatalogInputError as e:
            raise HTTPException(422, str(e)) from None

    @app.post("/queries/{pipeline}/{name}/adjust", dependencies=[Depends(authorized)],
              response_model=AdjustOut, responses=_CHANGE)
    async def adjust(pipeline: PipelineName, name: QueryName, body: AdjustIn) -> dict[str, Any]:
        """Change a running query's window size or granularity inside its QoS ranges:
        ``{"knob": "window" | "window:NAME" | "granularity", "value": N}`` (time_unit)."""
        try:
            return await asyncio.to_thread(
                call, lambda: w.adjust_query(worker, pipeline, name, body.knob, body.value)
            )
        except AdjustmentError as e:
            raise HTTPException(422, e.message) from None

    @app.get("/queries/{pipeline}/{name}/adjustments", response_model=list[Record],
             responses=_READ)
    def adjustments(pipeline: PipelineName, name: QueryName) -> list[dict[str, Any]]:
        """The query's logged window changes, oldest first."""
        return call(lambda: w.query_adjustments(worker, pipeline, name))

    @app.get("/queries/{pipeline}/{name}/results", response_class=StreamingResponse,
             responses={**_READ, 200: {"content": {"text/event-stream": {
                 "schema": {"type": "string"}}}, "description": "server-sent events"}})
    async def results(pipeline: PipelineName, name: QueryName) -> StreamingResponse:
        """The query's results as they are produced, as server-sent events (one DESIGN §5
        object per event)."""
        tee, sub = await asyncio.to_thread(call, lambda: w.subscribe(worker, pipeline, name))

        async def events() -> Any:
            try:
                while True:
                    try:
                        line = await asyncio.to_thread(sub.lines.get, True, 1.0)
                    except queue.Empty:
                        if sub.overflowed:
                            yield "event: error\ndata: the reader fell too far behind\n\n"
                            return
                        yield ": keep-alive\n\n"
                        continue
                    if line is None:
                        yield "event: end\ndata: the query stopped\n\n"
                        return
                    yield f"data: {line}\n\n"
            finally:
                worker.call(lambda: tee.unsubscribe(sub))

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/metrics", response_class=PlainTextResponse, responses=_errors(503))
    def metrics() -> Response:
        snapshot = worker.call(lambda: w.metrics_snapshot(worker))
        return Response(render_metrics(snapshot), media_type=CONTENT_TYPE_LATEST)

    if UI_STATIC.joinpath("index.html").is_file():
        @app.get("/ui", include_in_schema=False)
        def ui() -> RedirectResponse:
            return RedirectResponse("/ui/")

        app.mount("/ui/", StaticFiles(directory=UI_STATIC, html=True), name="ui")
    return app


def _check_bounds(text: str, filename: str) -> None:
    """400 for a pipeline text whose YAML aliases expand too far or that nests too deep
    (spec/yaml_limits.py); other problems are the deployment's to report."""
    try:
        parse_yaml(text, filename)
    except SpecLimitExceeded as e:
        raise HTTPException(400, "; ".join(e.lines())) from None
    except SpecErrors:  # a syntax error: the deployment rejects it, with its position
        return


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return ""  # the deployment says why it cannot read it


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except OSError:
        return False
