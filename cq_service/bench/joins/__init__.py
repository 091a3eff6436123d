"""`cq bench joins`: thesis 003 chapter 5's experiments on the real engine — a windowed
multi-way join run as a tree of binary joins, as one MJoin, as an MJoin with A-Caching, and
under `join: auto` (the form its cost model picks), on uniform and skewed keys (workload.py,
runs.py). Throughput is input tuples per wall-clock second of a run to completion; state is
the peak of the join operators' synopses, caches and intermediate results, sampled as the run
goes."""

from cq_service.bench.joins.runs import SETTINGS, run_all
from cq_service.bench.joins.workload import CASES

__all__ = ["CASES", "SETTINGS", "run_all"]
