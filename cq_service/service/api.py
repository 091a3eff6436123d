"""The worker's HTTP API (FastAPI), documented in docs/service.md.

Reads are open; everything that changes what runs needs ``Authorization: Bearer <token>`` with
the configured token (with no token configured, changes are refused). Every handler hands its
work to the engine thread (`Worker.call`), so the API never races the engine.

A request that needs a dependency that cannot be reached now (the catalog database, a
source's brokers) is answered 503 with the reason; `/readyz` is 503 while any dependency the
worker uses is unreachable, `/healthz` stays 200.
"""

from __future__ import annotations

import asyncio
import hmac
import queue
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST

from cq_service.catalog import CatalogInputError
from cq_service.errors import AdjustmentError, Unreachable
from cq_service.service import views as w
from cq_service.service.metrics import render_metrics
from cq_service.service.worker import Worker

__all__ = ["make_app"]


def make_app(worker: Worker) -> FastAPI:
    app = FastAPI(title="cq-service worker", version="1")
    token = worker.config.token

    @app.exception_handler(Unreachable)
    async def unreachable(_request: Request, error: Unreachable) -> JSONResponse:
        """A dependency the request needs cannot be reached now: try again later."""
        return JSONResponse(
            {"detail": error.outage.describe()}, status_code=503, headers={"Retry-After": "5"}
        )

    def authorized(authorization: str | None = Header(default=None)) -> None:
        if not token:
            raise HTTPException(403, "changes are disabled: no token is configured (CQ_TOKEN)")
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not authorization or not hmac.compare_digest(given, token):
            raise HTTPException(
                401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"}
            )

    def call(fn: Any) -> Any:
        try:
            return worker.call(fn)
        except KeyError as e:
            raise HTTPException(404, f"not found: {e.args[0]}") from None

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> Response:
        """200 once the first reconcile is done and while every dependency answers; 503 with
        the reasons otherwise (read without the engine thread: it answers even when busy)."""
        if not worker.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        reasons = worker.dependencies.reasons()
        if reasons:
            return JSONResponse({"status": "not ready", "reasons": reasons}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/pipelines")
    def pipelines() -> dict[str, Any]:
        return call(lambda: w.describe(worker))

    @app.get("/pipelines/{name}")
    def pipeline(name: str) -> dict[str, Any]:
        found = [p for p in call(lambda: w.describe(worker))["pipelines"] if p["name"] == name]
        if not found:
            raise HTTPException(404, f"not found: pipeline {name}")
        return found[0]

    @app.get("/pipelines/{name}/explain", response_class=PlainTextResponse)
    def explain(name: str) -> str:
        return call(lambda: w.explain_pipeline(worker, name))

    @app.get("/pipelines/{name}/control")
    def pipeline_control(name: str) -> dict[str, Any]:
        return call(lambda: w.pipeline_control(worker, name))

    @app.put("/pipelines/{name}/control", dependencies=[Depends(authorized)])
    async def put_pipeline_control(name: str, request: Request) -> dict[str, Any]:
        """Replace a deployment's control: {"scheduler": NAME or null, "latency_bound_ms": MS}
        (a field left out is null; null scheduler: the configuration's or the file's)."""
        return await _change_pipeline_control(name, request, merge=False)

    @app.patch("/pipelines/{name}/control", dependencies=[Depends(authorized)])
    async def patch_pipeline_control(name: str, request: Request) -> dict[str, Any]:
        """Change the fields given of a deployment's control (a scheduler other than
        chain_bounded drops the stored latency bound)."""
        return await _change_pipeline_control(name, request, merge=True)

    async def _change_pipeline_control(name: str, request: Request, merge: bool) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise HTTPException(
                422, 'give a JSON object: {"scheduler": ..., "latency_bound_ms": ...}'
            )
        unknown = set(body) - {"scheduler", "latency_bound_ms"}
        if unknown:
            raise HTTPException(422, f"unknown control field(s): {', '.join(sorted(unknown))}")
        try:
            return await asyncio.to_thread(
                call, lambda: w.set_pipeline_control(worker, name, body, merge=merge)
            )
        except CatalogInputError as e:
            raise HTTPException(422, str(e)) from None

    @app.post("/pipelines", dependencies=[Depends(authorized)])
    async def deploy(request: Request) -> JSONResponse:
        """Deploy a pipeline now: a JSON body {"path": FILE} (a file the worker can read) or
        {"yaml": TEXT, "filename": NAME} (relative paths in it are taken from the pipelines
        folder). A text is kept in the catalog and deployed again at every start-up. With
        both, if the worker sees the file with that text: a file of the pipelines folder is
        deployed as the file it is; one outside it, as a text whose relative paths are the
        file's folder's."""
        body = await request.json()
        path = Path(body["path"]) if "path" in body else None
        if path is not None and "yaml" in body and not _holds(path, body["yaml"]):
            path = None
        folder = Path(worker.config.pipelines).resolve()
        if path is not None and "yaml" in body and folder not in path.resolve().parents:
            text, at = body["yaml"], path
            result = await asyncio.to_thread(
                worker.call, lambda: worker.deploy_text(text, at.name, at)
            )
        elif path is not None:
            result = await asyncio.to_thread(worker.call, lambda: worker.deploy_file(path))
        elif "yaml" in body:
            text, filename = body["yaml"], body.get("filename") or "pipeline.yaml"
            result = await asyncio.to_thread(
                worker.call, lambda: worker.deploy_text(text, filename)
            )
        else:
            raise HTTPException(422, 'give {"path": ...} or {"yaml": ...}')
        status = {"rejected": 422, "waiting": 503}.get(result.status, 200)
        return JSONResponse(result.to_json(), status_code=status)

    @app.get("/queries")
    def queries() -> list[dict[str, Any]]:
        data = call(lambda: w.describe(worker))
        return [q for p in data["pipelines"] for q in p["queries"].values()]

    @app.get("/queries/{pipeline}/{name}")
    def query(pipeline: str, name: str) -> dict[str, Any]:
        return call(lambda: w.query_status(worker, pipeline, name))

    @app.put("/queries/{pipeline}/{name}/control", dependencies=[Depends(authorized)])
    @app.patch("/queries/{pipeline}/{name}/control", dependencies=[Depends(authorized)])
    async def control(pipeline: str, name: str, request: Request) -> dict[str, Any]:
        """Change a query's control table: weight, active, memory_budget, qos."""
        body = await request.json()
        unknown = set(body) - {"weight", "active", "memory_budget", "qos"}
        if unknown:
            raise HTTPException(422, f"unknown control field(s): {', '.join(sorted(unknown))}")

        def apply() -> dict[str, Any]:
            if worker.catalog.query(pipeline, name) is None:
                raise KeyError(f"{pipeline}/{name}")
            fields = {k: body[k] for k in ("weight", "memory_budget", "qos") if k in body}
            if fields:
                worker.catalog.set_control(pipeline, name, **fields)
            if "active" in body:
                worker.set_active(pipeline, name, bool(body["active"]))
            return w.query_status(worker, pipeline, name)

        return await asyncio.to_thread(call, apply)

    @app.post("/queries/{pipeline}/{name}/adjust", dependencies=[Depends(authorized)])
    async def adjust(pipeline: str, name: str, request: Request) -> dict[str, Any]:
        """Change a running query's window size or granularity inside its QoS ranges:
        ``{"knob": "window" | "window:NAME" | "granularity", "value": N}`` (time_unit)."""
        body = await request.json()
        knob, value = body.get("knob"), body.get("value")
        if not isinstance(knob, str) or not isinstance(value, int) or isinstance(value, bool):
            raise HTTPException(422, "give a knob (string) and a value (integer, time_unit)")
        try:
            return await asyncio.to_thread(
                call, lambda: w.adjust_query(worker, pipeline, name, knob, value)
            )
        except AdjustmentError as e:
            raise HTTPException(422, e.message) from None

    @app.get("/queries/{pipeline}/{name}/adjustments")
    def adjustments(pipeline: str, name: str) -> list[dict[str, Any]]:
        """The query's logged window changes, oldest first."""
        return call(lambda: w.query_adjustments(worker, pipeline, name))

    @app.get("/queries/{pipeline}/{name}/results")
    async def results(pipeline: str, name: str) -> StreamingResponse:
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

    @app.get("/metrics")
    def metrics() -> Response:
        snapshot = worker.call(lambda: w.metrics_snapshot(worker))
        return Response(render_metrics(snapshot), media_type=CONTENT_TYPE_LATEST)

    return app


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except OSError:
        return False
