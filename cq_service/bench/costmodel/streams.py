"""The cost-model experiments' input: Poisson arrivals of random integer keys.

Timestamps are integer milliseconds with exponential gaps (so arrivals are Poisson, the case
the model's formulas are stated for); keys are uniform on 0..KEYS−1, as in the paper's
equi-join (brief-costmodel §5).
"""

from __future__ import annotations

import numpy as np

__all__ = ["KEYS", "poisson_timestamps"]

KEYS = 50


def poisson_timestamps(rng: np.random.Generator, gap_ms: float, seconds: float) -> np.ndarray:
    """Arrival instants in [0, seconds) with exponential gaps of mean `gap_ms`."""
    n = int(seconds * 1000 / gap_ms * 1.2) + 100  # enough gaps to pass the end
    ts = np.floor(np.cumsum(rng.exponential(gap_ms, n))).astype(np.int64)
    return ts[ts < seconds * 1000]
