"""Poisson arrivals of random integer keys: the input `cq calibrate` and the cost-model
experiments (`cq bench costmodel`) run.

Timestamps are integer milliseconds with exponential gaps (so arrivals are Poisson, the case
the model's formulas are stated for); keys are uniform on 0..KEYS−1, as in the paper's
equi-join (brief-costmodel §5).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["KEYS", "poisson_stream", "poisson_timestamps"]

KEYS = 50


def poisson_timestamps(rng: np.random.Generator, gap_ms: float, seconds: float) -> np.ndarray:
    """Arrival instants in [0, seconds) with exponential gaps of mean `gap_ms`."""
    n = int(seconds * 1000 / gap_ms * 1.2) + 100  # enough gaps to pass the end
    ts = np.floor(np.cumsum(rng.exponential(gap_ms, n))).astype(np.int64)
    return ts[ts < seconds * 1000]


def poisson_stream(d: float, seconds: float, seed: int) -> pa.Table:
    """Integer millisecond timestamps with exponential gaps of mean `d`, keys `a` uniform on
    0..KEYS-1, values `v` uniform on 0..999."""
    rng = np.random.default_rng(seed)
    ts = poisson_timestamps(rng, d, seconds)
    return pa.table({"ts": ts, "a": rng.integers(0, KEYS, len(ts)), "v": rng.integers(0, 1000, len(ts))})
