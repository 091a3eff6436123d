"""The SQL catalog: deployed pipelines' streams and relations, stored relation rows, queries
with their run-time controls, deployments' scheduler controls, the deployment and adjustment
logs, statistics snapshots, worker checkpoints and the pipelines deployed through the API
(docs/catalog.md).

`Catalog(url)` is the repository; SQLite is embedded by default (`default_url()`: ``$CQ_CATALOG``
or ``sqlite:///.cq/catalog.db``), PostgreSQL by URL. Importing this package registers the
``catalog`` source type (stored relations read from the catalog).
"""

from cq_service.catalog.database import ENV_VAR, default_url, head_revision
from cq_service.catalog.exceptions import CatalogError, CatalogInputError, CatalogUnavailable
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
