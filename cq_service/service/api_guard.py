"""How the HTTP API refuses a request: every refusal is a JSON ``{"detail": ...}`` with a 4xx
status, and a handler's unexpected exception a logged 500 without its traceback.

- a body over `MAX_BODY_BYTES`: 413, before it is read whole;
- a body that is not JSON, or not a JSON object: 400; one that does not fit the endpoint's
  schema (api_models.py): 422 with each problem in ``errors``;
- a missing or wrong ``Authorization: Bearer <token>``: 401 with ``WWW-Authenticate``
  (RFC 6750; the scheme name in any case, the token ASCII, compared in constant time);
- a pipeline path outside the pipelines folder: 403; one that is not a file in it: 400.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = [
    "MAX_BODY_BYTES",
    "BodyLimit",
    "CatchAll",
    "ErrorResponse",
    "check_bearer",
    "install_error_handlers",
    "pipeline_file",
]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # 1 MiB: a pipeline file is a few KiB

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ErrorResponse(JSONResponse):
    """JSON with non-ASCII escaped: an error may quote what the client sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


async def _send_error(send: Send, status: int, detail: str) -> None:
    body = ErrorResponse({"detail": detail}).body
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Reads a request's body up to `limit` bytes before the app sees it; 413 past that."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is over {self.limit:,} bytes"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _send_error(send, 413, too_large)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _send_error(send, 413, too_large)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: the disconnect, for streams
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)


class CatchAll:
    """A handler's unexpected exception: logged with its traceback, answered 500 without it."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception:
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if scope["type"] == "http" and not started:
                await _send_error(send, 500, "internal error (logged by the worker)")


def install_error_handlers(app: FastAPI) -> None:
    """JSON bodies for FastAPI's own refusals (404, 405, validation)."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, error: StarletteHTTPException) -> ErrorResponse:
        return ErrorResponse({"detail": str(error.detail)}, error.status_code, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, error: RequestValidationError) -> ErrorResponse:
        problems = list(error.errors())
        whole = [p for p in problems if tuple(p["loc"]) == ("body",)]
        if any(p["type"] == "json_invalid" for p in problems):
            reason = next(p for p in problems if p["type"] == "json_invalid")
            context = reason.get("ctx", {}).get("error", "")
            return ErrorResponse({"detail": f"the body is not valid JSON: {context}"}, 400)
        if whole and whole[0]["type"] != "value_error":
            return ErrorResponse(
                {"detail": "the body must be a JSON object (Content-Type: application/json)"}, 400
            )
        listed = [
            {"field": ".".join(str(x) for x in p["loc"][1:]) or "(body)", "problem": p["msg"]}
            for p in problems
        ]
        detail = "; ".join(f"{p['field']}: {p['problem']}" for p in listed)
        return ErrorResponse({"detail": detail, "errors": listed}, 422)

    @app.exception_handler(TimeoutError)
    async def busy(_request: Request, _error: TimeoutError) -> ErrorResponse:
        return ErrorResponse(
            {"detail": "the engine thread did not answer in time; try again"}, 503,
            {"Retry-After": "5"},
        )


def check_bearer(authorization: str | None, token: str | None) -> None:
    """Refuse a request without ``Authorization: Bearer <token>`` (HTTPException 401; 403
    when no token is configured, so changes are disabled)."""
    if not token:
        raise HTTPException(403, "changes are disabled: no token is configured (CQ_TOKEN)")
    realm = 'Bearer realm="cq-service"'
    if not authorization:
        raise HTTPException(401, "a bearer token is required (Authorization: Bearer TOKEN)",
                            {"WWW-Authenticate": realm})
    scheme, _, given = authorization.strip().partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given:
        raise HTTPException(401, "the Authorization header must be 'Bearer TOKEN'",
                            {"WWW-Authenticate": f'{realm}, error="invalid_request"'})
    invalid = {"WWW-Authenticate": f'{realm}, error="invalid_token"'}
    if not given.isascii():
        raise HTTPException(401, "the token must be ASCII", invalid)
    if not hmac.compare_digest(given.encode("ascii"), token.encode("utf-8")):
        raise HTTPException(401, "the token is not valid", invalid)


def pipeline_file(folder: Path, given: str) -> Path:
    """The file `given` (relative to `folder`, or absolute) names, after symlinks and ``..``;
    HTTPException 403 if that is outside `folder`, 400 if it is not a file there."""
    root = folder.resolve()
    try:
        path = (root / given).resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise HTTPException(400, f"cannot resolve the path {given!r}: {e}") from None
    if not path.is_relative_to(root):
        raise HTTPException(
            403, f"{given!r} is outside the pipelines folder; send the pipeline's text instead"
        )
    try:
        is_file = path.is_file()
    except OSError:  # a name too long, …
        is_file = False
    if not is_file:
        raise HTTPException(400, f"{given!r} is not a file in the pipelines folder")
    return path
