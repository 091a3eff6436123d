"""A discrete-time simulator for operator scheduling (Chain, paper 000), in cost units."""

from cq_service.bench.scheduling.optimum import optimum_memory
from cq_service.bench.scheduling.policies import POLICIES, Policy, make_policy
from cq_service.bench.scheduling.simulator import Result, run, simulate
from cq_service.bench.scheduling.workload import Arrival, Path, Workload, chart

__all__ = [
    "POLICIES",
    "Arrival",
    "Path",
    "Policy",
    "Result",
    "Workload",
    "chart",
    "make_policy",
    "optimum_memory",
    "run",
    "simulate",
]
