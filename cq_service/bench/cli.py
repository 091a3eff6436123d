"""``cq nexmark …`` and ``cq bench …``, mounted by cq_service.cli. Each benchmark family's
commands live beside it and register on `bench_app` (bench/app.py) when imported here."""

from __future__ import annotations

from cq_service.bench import adaptive_cli, service_cli  # noqa: F401  (registers commands)
from cq_service.bench.app import bench_app
from cq_service.bench.costmodel import cli as costmodel_cli  # noqa: F401  (registers)
from cq_service.bench.linear_road import cli as linear_road
from cq_service.bench.nexmark_cli import nexmark_app

__all__ = ["bench_app", "nexmark_app"]

bench_app.command("linear-road")(linear_road.bench_linear_road)
