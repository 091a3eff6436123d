"""The engine loop with real-time arrivals: moved to cq_service/bench/paced.py."""

from cq_service.bench.paced import Arrivals, Run, run_shape

__all__ = ["Arrivals", "Run", "run_shape"]
