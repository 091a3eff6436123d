"""The worker's configuration: one place, a file and the environment.

Precedence: command-line options > environment variables > the configuration file > defaults.
Every setting (docs/service.md lists them):

| file key | environment | default | meaning |
|---|---|---|---|
| pipelines | CQ_PIPELINES | pipelines | folder of pipeline files (a git checkout), watched |
| catalog | CQ_CATALOG | sqlite:///.cq/catalog.db | catalog database URL |
| host | CQ_HOST | 127.0.0.1 | HTTP API address |
| port | CQ_PORT | 8080 | HTTP API port (0: no API) |
| token | CQ_TOKEN | (none) | bearer token for mutating endpoints (none: they are refused) |
| name | CQ_WORKER_NAME | worker | the worker's name: its checkpoint and consumer-group commits |
| checkpoint_interval | CQ_CHECKPOINT_INTERVAL | 1.0 | seconds between checkpoints |
| reconcile_interval | CQ_RECONCILE_INTERVAL | 2.0 | seconds between scans of the pipelines folder |
| queue_budget | CQ_QUEUE_BUDGET | 1000000 | queued elements above which sources pause |
| batch_rows | CQ_BATCH_ROWS | 65536 | rows per source read |
| step_seconds | CQ_STEP_SECONDS | 0.002 | about how long one scheduling step runs an operator |
| turn_seconds | CQ_TURN_SECONDS | 0.05 | about the longest one turn of the worker's loop runs operators before it answers the API and samples memory |
| policy | CQ_POLICY | (none) | scheduler of every deployment; none: each pipeline's own |
| kafka_bootstrap | CQ_KAFKA_BOOTSTRAP | (none) | default Kafka address for sources and sinks that give none |
| manage_interval | CQ_MANAGE_INTERVAL | 5.0 | seconds between the resource manager's rounds (0: none) |
| memory_reserve | CQ_MEMORY_RESERVE | 0.1 | share of each memory budget kept free for bursts and adaptation delays |
| grow_margin | CQ_GROW_MARGIN | 0.1 | windows grow back only when the estimate is below (1 − this) of the budget less the reserve |
| spark_checkpoints | CQ_SPARK_CHECKPOINTS | .cq/spark | runner-spark pipelines' job checkpoints |
| spark_trigger | CQ_SPARK_TRIGGER | 5 seconds | runner-spark pipelines' micro-batch interval |
| spark_master | CQ_SPARK_MASTER | (none) | Spark master of runner-spark pipelines and scheduled archives (none: local[2]; e.g. spark://HOST:7077) |
| flush_timeout | CQ_FLUSH_TIMEOUT | 2.0 | seconds a Kafka sink's flush waits without any acknowledgement before the checkpoint is postponed |
| sink_buffer_bytes | CQ_SINK_BUFFER_BYTES | 67108864 | results held by sinks and not acknowledged yet (bytes) above which sources pause |
| retry_backoff | CQ_RETRY_BACKOFF | 0.5 | first wait (s) before retrying what failed on an unreachable dependency; doubled each time |
| retry_backoff_max | CQ_RETRY_BACKOFF_MAX | 10.0 | the longest such wait (s); each wait is drawn from [½, 1] of its value |
| catalog_timeout | CQ_CATALOG_TIMEOUT | 2.0 | seconds connecting to a PostgreSQL catalog, or a request on a connection, may take |
| snapshots | CQ_SNAPSHOTS | (beside the catalog) | folder of state snapshots, under the worker's name; default: `snapshots/` beside an SQLite catalog's file, else `.cq/snapshots` |
| snapshot_interval | CQ_SNAPSHOT_INTERVAL | 30.0 | seconds between state snapshots (0: none; restarts replay from the checkpoint's offsets) |
| snapshot_keep | CQ_SNAPSHOT_KEEP | 3 | snapshots kept; older ones are deleted |
| failpoints | CQ_FAILPOINTS | (none) | for crash tests: `NAME=N,…` kills the worker at the N-th hit of each point (failpoints.py) |

A deployment's scheduler: its control (`PUT /pipelines/{name}/control`, kept in the catalog),
else `policy` if set, else the pipeline file's `resources.scheduler`. `policy` cannot be
chain_bounded or chain_share, whose latency bound or share belongs to each pipeline (its file or
its control).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.engine import make_url

__all__ = ["DEFAULT_CATALOG", "ConfigError", "ServiceConfig", "load_config"]

from cq_service.catalog.database import DEFAULT_SQLITE_PATH
from cq_service.service.failpoints import FailpointError, check_failpoints
from cq_service.spec.model import LATENCY_BOUNDED_SCHEDULER, SCHEDULERS, SHARE_SCHEDULER

DEFAULT_CATALOG = f"sqlite:///{DEFAULT_SQLITE_PATH}"  # the catalog's own default


class ConfigError(ValueError):
    """A configuration file or variable that cannot be used."""


@dataclass(frozen=True)
class ServiceConfig:
    pipelines: str = "pipelines"
    catalog: str = DEFAULT_CATALOG
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    name: str = "worker"
    checkpoint_interval: float = 1.0
    reconcile_interval: float = 2.0
    queue_budget: int = 1_000_000
    batch_rows: int = 65_536
    step_seconds: float = 0.002
    turn_seconds: float = 0.05
    policy: str = ""  # "": each pipeline's own scheduler
    kafka_bootstrap: str | None = None
    manage_interval: float = 5.0
    memory_reserve: float = 0.1
    grow_margin: float = 0.1
    # runner-spark pipelines (service/spark_jobs.py): their jobs' checkpoints, under the
    # worker's name, their micro-batch interval, and the Spark master they and the scheduled
    # archives run on ("": local[2])
    spark_checkpoints: str = ".cq/spark"
    spark_trigger: str = "5 seconds"
    spark_master: str = ""
    # when Kafka or the catalog is away (docs/service.md, "When Kafka or the catalog is away")
    flush_timeout: float = 2.0
    sink_buffer_bytes: int = 64 * 1024 * 1024
    retry_backoff: float = 0.5
    retry_backoff_max: float = 10.0
    catalog_timeout: float = 2.0
    snapshots: str = ""  # "": beside an SQLite catalog's file, else .cq/snapshots
    snapshot_interval: float = 30.0
    snapshot_keep: int = 3
    failpoints: str = ""  # crash tests only (service/failpoints.py)

    @property
    def snapshot_folder(self) -> Path:
        """Where this worker's state snapshots go (`snapshots`/<name>)."""
        if self.snapshots:
            return Path(self.snapshots) / self.name
        url = make_url(self.catalog)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return Path(url.database).parent / "snapshots" / self.name
        return Path(".cq/snapshots") / self.name

    def __post_init__(self) -> None:
        if not 0.0 <= self.memory_reserve < 1.0:
            raise ConfigError(f"setting memory_reserve: {self.memory_reserve} is not in [0, 1)")
        if not 0.0 <= self.grow_margin < 1.0:
            raise ConfigError(f"setting grow_margin: {self.grow_margin} is not in [0, 1)")
        if self.manage_interval < 0:
            raise ConfigError(f"setting manage_interval: {self.manage_interval} is negative")
        if self.step_seconds <= 0:
            raise ConfigError(f"setting step_seconds: {self.step_seconds} is not positive")
        if self.turn_seconds <= 0:
            raise ConfigError(f"setting turn_seconds: {self.turn_seconds} is not positive")
        for key in ("flush_timeout", "retry_backoff", "catalog_timeout"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"setting {key}: {getattr(self, key)} is not positive")
        if self.retry_backoff_max < self.retry_backoff:
            raise ConfigError(
                f"setting retry_backoff_max: {self.retry_backoff_max} is below retry_backoff "
                f"({self.retry_backoff})"
            )
        if self.sink_buffer_bytes <= 0:
            raise ConfigError(f"setting sink_buffer_bytes: {self.sink_buffer_bytes} is not positive")
        if self.policy and self.policy not in SCHEDULERS:
            raise ConfigError(
                f"setting policy: unknown scheduler {self.policy!r} "
                f"(known: {', '.join(SCHEDULERS)}; empty: each pipeline's own)"
            )
        if self.snapshot_interval < 0:
            raise ConfigError(f"setting snapshot_interval: {self.snapshot_interval} is negative")
        if self.snapshot_keep < 1:
            raise ConfigError(f"setting snapshot_keep: {self.snapshot_keep} is below 1")
        try:
            check_failpoints(self.failpoints)
        except FailpointError as e:
            raise ConfigError(f"setting failpoints: {e}") from None
        if self.policy == LATENCY_BOUNDED_SCHEDULER:
            raise ConfigError(
                f"setting policy: {LATENCY_BOUNDED_SCHEDULER} needs a latency bound per "
                "pipeline: give it in the pipeline file (resources) or its control instead"
            )
        if self.policy == SHARE_SCHEDULER:
            raise ConfigError(
                f"setting policy: {SHARE_SCHEDULER} needs a share of FIFO steps per "
                "pipeline: give it in the pipeline file (resources) or its control instead"
            )


_ENV = {
    "pipelines": "CQ_PIPELINES",
    "catalog": "CQ_CATALOG",
    "host": "CQ_HOST",
    "port": "CQ_PORT",
    "token": "CQ_TOKEN",
    "name": "CQ_WORKER_NAME",
    "checkpoint_interval": "CQ_CHECKPOINT_INTERVAL",
    "reconcile_interval": "CQ_RECONCILE_INTERVAL",
    "queue_budget": "CQ_QUEUE_BUDGET",
    "batch_rows": "CQ_BATCH_ROWS",
    "step_seconds": "CQ_STEP_SECONDS",
    "turn_seconds": "CQ_TURN_SECONDS",
    "policy": "CQ_POLICY",
    "kafka_bootstrap": "CQ_KAFKA_BOOTSTRAP",
    "manage_interval": "CQ_MANAGE_INTERVAL",
    "memory_reserve": "CQ_MEMORY_RESERVE",
    "grow_margin": "CQ_GROW_MARGIN",
    "spark_checkpoints": "CQ_SPARK_CHECKPOINTS",
    "spark_trigger": "CQ_SPARK_TRIGGER",
    "spark_master": "CQ_SPARK_MASTER",
    "flush_timeout": "CQ_FLUSH_TIMEOUT",
    "sink_buffer_bytes": "CQ_SINK_BUFFER_BYTES",
    "retry_backoff": "CQ_RETRY_BACKOFF",
    "retry_backoff_max": "CQ_RETRY_BACKOFF_MAX",
    "catalog_timeout": "CQ_CATALOG_TIMEOUT",
    "snapshots": "CQ_SNAPSHOTS",
    "snapshot_interval": "CQ_SNAPSHOT_INTERVAL",
    "snapshot_keep": "CQ_SNAPSHOT_KEEP",
    "failpoints": "CQ_FAILPOINTS",
}


def load_config(
    file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServiceConfig:
    """The configuration from `file` (YAML), then the environment, then `overrides` (None
    values in `overrides` are ignored)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if file is not None:
        try:
            data = yaml.safe_load(Path(file).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"{file}: cannot read the configuration: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: the configuration must be a mapping")
        unknown = sorted(set(data) - set(_ENV))
        if unknown:
            raise ConfigError(f"{file}: unknown setting(s) {', '.join(unknown)}")
        values.update(data)
    for key, var in _ENV.items():
        if var in environ and environ[var] != "":
            values[key] = environ[var]
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return _typed(values)


def _typed(values: dict[str, Any]) -> ServiceConfig:
    out: dict[str, Any] = {}
    for f in fields(ServiceConfig):
        if f.name not in values:
            continue
        v = values[f.name]
        kind = type(getattr(ServiceConfig(), f.name))
        try:
            if kind is int:
                v = int(v)
            elif kind is float:
                v = float(v)
            elif v is not None:
                v = str(v)
        except (TypeError, ValueError):
            raise ConfigError(f"setting {f.name}: {v!r} is not a {kind.__name__}") from None
        out[f.name] = v
    return ServiceConfig(**out)
