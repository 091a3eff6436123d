"""The offline optimum of `cq bench filters`: the order of least expected cost over the
generated drop bits, by exhaustive search (the thesis' "exhaustive optimum", n ≤ 8).

With unit costs (every filter one hash probe, as in the thesis' experiments) an order's cost
per tuple is the mean number of filters evaluated before a tuple is dropped (or all n if it
passes): Σ_i P(a tuple reaches position i), the thesis' model (4.1) with t_i = 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

__all__ = ["MAX_EXHAUSTIVE", "cost_of", "optimum"]

MAX_EXHAUSTIVE = 8  # 8! = 40,320 orders


def cost_of(drops: np.ndarray, order: Sequence[int], costs: Sequence[float] | None = None) -> float:
    """Expected cost per tuple of `order` (filter indices) over `drops` ((tuples, n) bool)."""
    if not len(drops):
        return 0.0
    t = np.ones(drops.shape[1]) if costs is None else np.asarray(costs, dtype=float)
    alive = np.ones(len(drops), dtype=bool)
    total = 0.0
    for f in order:
        total += t[f] * alive.sum()
        alive &= ~drops[:, f]
    return total / len(drops)


def optimum(drops: np.ndarray, costs: Sequence[float] | None = None) -> tuple[list[int], float]:
    """(the cheapest order, its cost per tuple) over every permutation of the n filters.

    Rows are first collapsed to their distinct drop patterns (at most 2^n) with counts, so each
    of the n! orders costs O(2^n · n), not O(tuples · n)."""
    n = drops.shape[1]
    if n > MAX_EXHAUSTIVE:
        raise ValueError(f"exhaustive search is for n ≤ {MAX_EXHAUSTIVE}, got {n}")
    if not len(drops):
        return list(range(n)), 0.0
    t = np.ones(n) if costs is None else np.asarray(costs, dtype=float)
    codes = drops.astype(np.int64) @ (1 << np.arange(n, dtype=np.int64))
    counts = np.bincount(codes, minlength=1 << n).astype(float)
    patterns = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    best: tuple[float, list[int]] | None = None
    for order in itertools.permutations(range(n)):
        alive = counts.copy()
        total = 0.0
        for f in order:
            total += t[f] * alive.sum()
            alive[patterns[:, f]] = 0.0
        if best is None or total < best[0] - 1e-9:
            best = (total, list(order))
    assert best is not None
    return best[1], best[0] / len(drops)
