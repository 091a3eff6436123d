"""`cq serve` (the worker) and `cq deploy` (deploy a pipeline file to a running worker now)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import urllib.error
import urllib.request
from pathlib import Path

import typer

__all__ = ["deploy", "run_until_stopped", "serve"]


def serve(
    pipelines: Path = typer.Option(None, "--pipelines", help="folder of pipeline files, watched"),
    catalog: str = typer.Option(None, "--catalog", help="catalog database URL"),
    config: Path = typer.Option(None, "--config", help="configuration file (YAML)"),
    host: str = typer.Option(None, "--host", help="HTTP API address"),
    port: int = typer.Option(None, "--port", help="HTTP API port (0: no API)"),
    name: str = typer.Option(None, "--name", help="the worker's name (its checkpoint)"),
) -> None:
    """Run the worker: every pipeline in the folder, redeployed as files change, with the
    HTTP API. Stops cleanly on SIGTERM or SIGINT."""
    from cq_service.catalog import Catalog
    from cq_service.errors import CQError
    from cq_service.service.config import ConfigError, load_config
    from cq_service.service.worker import Worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cfg = load_config(
            config,
            {"pipelines": None if pipelines is None else str(pipelines), "catalog": catalog,
             "host": host, "port": port, "name": name},
        )
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if cfg.kafka_bootstrap:
        os.environ.setdefault("CQ_KAFKA_BOOTSTRAP", cfg.kafka_bootstrap)
    os.environ.setdefault("CQ_CATALOG", cfg.catalog)
    try:  # the worker starts from its catalog: without it, it cannot start
        cat = Catalog(cfg.catalog, timeout=cfg.catalog_timeout)
        cat.upgrade()
        worker = Worker(cfg, cat)
    except CQError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    if cfg.pipelines is not None and not Path(cfg.pipelines).is_dir():
        typer.echo(f"warning: {cfg.pipelines} is not a folder: no pipeline file will be deployed "
                   "from it until it exists", err=True)
    run_until_stopped(
        worker,
        f"cq worker {cfg.name}: pipelines {cfg.pipelines}, catalog {cfg.catalog}"
        + (f", API http://{cfg.host}:{cfg.port}" if cfg.port else ""),
    )


def run_until_stopped(worker, announce: str) -> None:
    """Run `worker`, with its HTTP API when its port is set, until SIGTERM or SIGINT (`cq
    serve`, `cq ui`); `announce` is printed once the API starts."""
    import uvicorn

    from cq_service.service.api import make_app

    cfg = worker.config
    server = None
    if cfg.port:
        server = uvicorn.Server(
            uvicorn.Config(make_app(worker), host=cfg.host, port=cfg.port, log_level="warning")
        )
        server.install_signal_handlers = lambda: None  # the worker's handlers below
        threading.Thread(target=server.run, name="api", daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    typer.echo(announce)
    try:
        worker.run()
    finally:
        if server is not None:
            server.should_exit = True


def deploy(
    file: Path = typer.Argument(..., help="pipeline file"),
    server: str = typer.Option(
        "http://127.0.0.1:8080", "--server", envvar="CQ_SERVER", help="the worker's API"
    ),
    token: str = typer.Option(None, "--token", envvar="CQ_TOKEN", help="bearer token"),
) -> None:
    """Validate a pipeline file and deploy it to a running worker now: only the queries that
    changed restart. Prints what was added, replaced, removed and kept."""
    from cq_service.compiler import load_and_compile
    from cq_service.errors import CQError

    try:
        load_and_compile(file)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    body = json.dumps(
        {"yaml": file.read_text(), "filename": file.name, "path": str(file.resolve())}
    ).encode()
    request = urllib.request.Request(
        server.rstrip("/") + "/pipelines",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token or ''}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            result = json.loads(response.read())
    except urllib.error.HTTPError as e:
        typer.echo(f"{file}: the worker refused the deployment ({e.code}): {_reason(e)}",
                   err=True)
        raise typer.Exit(2 if e.code in (400, 413, 422) else 1) from None  # 2: the file's fault
    except OSError as e:
        typer.echo(f"cannot reach the worker at {server}: {e}", err=True)
        raise typer.Exit(1) from None
    for what in ("added", "replaced", "removed", "kept"):
        if result.get(what):
            typer.echo(f"{what}: {', '.join(result[what])}")
    typer.echo(f"{result['pipeline']}: {result['status']}")


def _reason(error: urllib.error.HTTPError) -> str:
    """What the worker's JSON error body says (its `detail`, or a rejection's `errors`)."""
    text = error.read().decode(errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        return text
    if not isinstance(body, dict):
        return text
    if body.get("errors") and all(isinstance(e, str) for e in body["errors"]):
        return "\n".join(body["errors"])
    return str(body.get("detail") or text)
