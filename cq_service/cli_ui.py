"""`cq ui PIPELINE.yaml`: run a pipeline file as `cq run` does, inside a worker of its own
with the worker's HTTP API and web view (/ui), so the run can be watched and steered.

The worker keeps its catalog, checkpoints and snapshots in a state folder (a temporary one,
removed at the end, unless --state names one) and its pipelines folder there is empty: the
file is deployed as `cq deploy` would deploy it (its relative paths taken from its own folder,
its sinks written where `cq run` writes them). Ctrl-C (or SIGTERM) stops it."""

from __future__ import annotations

import logging
import secrets
import shutil
import socket
import tempfile
from pathlib import Path

import typer

__all__ = ["ui"]


def ui(
    file: Path = typer.Argument(..., help="pipeline file"),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP address"),
    port: int = typer.Option(8080, "--port", help="HTTP port (0: any free one)"),
    token: str = typer.Option(
        None,
        "--token",
        envvar="CQ_TOKEN",
        help="the API token the page asks for to change settings (default: a random one, printed)",
    ),
    state: Path = typer.Option(
        None,
        "--state",
        help="folder for the worker's catalog and checkpoints (default: a "
        "temporary one, removed at the end)",
    ),
) -> None:
    """Run a pipeline file in a worker of its own and serve its web view at /ui: the plan
    live, memory, control settings, results. Prints the address; Ctrl-C stops it."""
    from cq_service.catalog import Catalog
    from cq_service.compiler import load_and_compile
    from cq_service.errors import CQError
    from cq_service.service.config import ConfigError, load_config

    try:
        name = load_and_compile(file).spec.name
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    folder = Path(tempfile.mkdtemp(prefix="cq-ui-")) if state is None else state
    (folder / "pipelines").mkdir(parents=True, exist_ok=True)
    token = token or secrets.token_urlsafe(12)
    port = port or _free_port(host)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        cfg = load_config(
            None,
            {
                "pipelines": str(folder / "pipelines"),
                "catalog": f"sqlite:///{(folder / 'catalog.db').resolve()}",
                "host": host,
                "port": port,
                "token": token,
                "name": "ui",
            },
        )
        catalog = Catalog(cfg.catalog, timeout=cfg.catalog_timeout)
        catalog.upgrade()
        _serve(cfg, catalog, file, name)
    except (ConfigError, CQError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    finally:
        if state is None:
            shutil.rmtree(folder, ignore_errors=True)


def _serve(cfg, catalog, file: Path, name: str) -> None:
    """Deploy `file` on a new worker and run it with its API until stopped."""
    from cq_service.service.cli import run_until_stopped
    from cq_service.service.worker import Worker

    worker = Worker(cfg, catalog)
    result = worker.deploy_text(file.read_text(encoding="utf-8"), file.name, file.resolve())
    if result.status not in ("applied", "unchanged"):
        for line in result.errors:
            typer.echo(line, err=True)
        raise typer.Exit(1)
    run_until_stopped(
        worker,
        f"{file}: pipeline {name} running; web view http://{cfg.host}:{cfg.port}/ui/ "
        f"(API token {cfg.token}); Ctrl-C stops",
    )


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
