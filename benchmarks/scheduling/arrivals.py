"""Bursty arrivals for the scheduling benchmarks: the ON/OFF model of paper 000 (§6).

Flows start as a Poisson process; each flow sends elements at a fixed rate for a
Pareto-distributed duration (p(x) = α k^α x^(−α−1), x ≥ k; heavy-tailed with α = 1.3). Many
overlapping flows make bursts far above the mean rate, separated by quiet stretches.
"""

from __future__ import annotations

import numpy as np

__all__ = ["on_off_arrivals"]


def on_off_arrivals(
    n: int,
    mean_rate: float,
    *,
    flow_rate: float,
    min_duration: float | None = None,
    alpha: float = 1.3,
    seed: int = 1,
) -> np.ndarray:
    """Sorted arrival times (seconds from 0) of `n` elements whose long-run rate is
    `mean_rate` per second; each flow sends `flow_rate` elements per second while on, for at
    least `min_duration` seconds (the Pareto scale k; default: one element's time)."""
    rng = np.random.default_rng(seed)
    k = min_duration if min_duration is not None else 1.0 / flow_rate
    mean_duration = alpha * k / (alpha - 1)
    flows_per_second = mean_rate / (flow_rate * mean_duration)
    times: list[np.ndarray] = []
    total = 0
    start = 0.0
    while total < n:
        start += rng.exponential(1.0 / flows_per_second)
        duration = k * (1.0 + rng.pareto(alpha))
        count = max(1, int(duration * flow_rate))
        times.append(start + np.arange(count) / flow_rate)
        total += count
    t = np.sort(np.concatenate(times))[:n]
    return t - t[0]
