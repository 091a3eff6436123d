"""The SQL catalog: deployed pipelines' streams and relations, stored relation rows, queries
with their run-time controls, deployments' scheduler controls, the deployment and adjustment
logs, statistics snapshots, worker checkpoints and the pipelines deployed through the API
(docs/catalog.md).

`Catalog(url)` is the repository; SQLite is embedded by default (`default_url()`: ``$CQ_CATALOG``
or ``sqlite:///.cq/catalog.db``), PostgreSQL by URL. The ``catalog`` source type (stored
relations read from the catalog) is `relation_source.CatalogRelationReader`, which `io.base`
loads when a pipeline first opens such a source.

The names below are imported on first use (PEP 562): SQLAlchemy, pandas and the io package take
seconds to import, and commands that never touch the catalog (`cq validate`, `cq --help`) should
not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cq_service.catalog.database import ENV_VAR, default_url, head_revision
    from cq_service.catalog.exceptions import (
        CatalogError,
        CatalogInputError,
        CatalogUnavailable,
    )
    from cq_service.catalog.records import (
        AdjustmentRecord,
        ArchiveState,
        Checkpoint,
        DeploymentRecord,
        PipelineControlRecord,
        QueryRecord,
        RelationRowRecord,
        SourceRecord,
        StatsRecord,
    )
    from cq_service.catalog.relation_source import CatalogRelationReader
    from cq_service.catalog.repository import Catalog
    from cq_service.catalog.spec_json import sink_json, source_json, stream_json
    from cq_service.catalog.stored_pipelines import StoredPipelineRecord

_HOMES = {
    "database": ("ENV_VAR", "default_url", "head_revision"),
    "exceptions": ("CatalogError", "CatalogInputError", "CatalogUnavailable"),
    "records": (
        "AdjustmentRecord",
        "ArchiveState",
        "Checkpoint",
        "DeploymentRecord",
        "PipelineControlRecord",
        "QueryRecord",
        "RelationRowRecord",
        "SourceRecord",
        "StatsRecord",
    ),
    "relation_source": ("CatalogRelationReader",),
    "repository": ("Catalog",),
    "spec_json": ("sink_json", "source_json", "stream_json"),
    "stored_pipelines": ("StoredPipelineRecord",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "ENV_VAR",
    "AdjustmentRecord",
    "ArchiveState",
    "Catalog",
    "CatalogError",
    "CatalogInputError",
    "CatalogRelationReader",
    "CatalogUnavailable",
    "Checkpoint",
    "DeploymentRecord",
    "PipelineControlRecord",
    "QueryRecord",
    "RelationRowRecord",
    "SourceRecord",
    "StatsRecord",
    "StoredPipelineRecord",
    "default_url",
    "head_revision",
    "sink_json",
    "source_json",
    "stream_json",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
