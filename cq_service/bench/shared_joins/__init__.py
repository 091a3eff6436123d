"""Shared window joins (paper 002, Hammad et al.): the benchmark's engine-independent parts —
the analytical model, the experiments' inputs, the pipeline files and the charts."""

from cq_service.bench.shared_joins.model import (
    PAPER,
    ModelParams,
    alone_avg_rt,
    lwo_avg_rt,
    model_table,
    swf_avg_rt,
)
from cq_service.bench.shared_joins.pipeline import POLICIES, pipeline_yaml, query_cql
from cq_service.bench.shared_joins.workload import DISTRIBUTIONS, TimeScale, Workload, generate

__all__ = [
    "DISTRIBUTIONS",
    "PAPER",
    "POLICIES",
    "ModelParams",
    "TimeScale",
    "Workload",
    "alone_avg_rt",
    "generate",
    "lwo_avg_rt",
    "model_table",
    "pipeline_yaml",
    "query_cql",
    "swf_avg_rt",
]
