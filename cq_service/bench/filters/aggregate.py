"""How `cq bench filters` turns repeated runs into one figure with its spread.

- `spread`: mean, median, min, max and quartiles of a sample (experiment (a): cost per tuple
  over placements of the filters into correlation groups); a value of None ("never", e.g. an
  orderer that did not re-converge within the phase) counts as larger than every number, so a
  median of None says at least half the runs never got there.
- `steps`: a meter's batches as evaluations and tuples per step of `step` tuples.
- `settle`: tuples after a change until a window of `window` tuples, and the `hold` − 1 windows
  after it, each cost at most `within` × the optimal order's cost on the same tuples; the
  window may start at any step, so the resolution is `step` tuples, not `window`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import numpy as np

__all__ = ["settle", "spread", "steps"]


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of sorted values (inf allowed)."""
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi or ordered[lo] == ordered[hi]:
        return ordered[lo]
    if math.isinf(ordered[hi]):
        return math.inf if pos > lo else ordered[lo]
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _none_if_inf(x: float, ints: bool = False) -> float | None:
    """None for inf; an int when every value was one and `x` is whole (tuple counts)."""
    if math.isinf(x):
        return None
    return int(x) if ints and float(x).is_integer() else x


def spread(values: Sequence[float | None]) -> dict:
    """{"values", "n", "never", "mean", "median", "q1", "q3", "min", "max"} of `values`
    (None: never, larger than any number; "mean" is None if any value is)."""
    if not values:
        raise ValueError("no values")
    xs = sorted(math.inf if v is None else float(v) for v in values)
    never = sum(v is None for v in values)
    ints = all(v is None or isinstance(v, int) for v in values)
    return {
        "values": list(values),
        "n": len(xs),
        "never": never,
        "mean": None if never else float(np.mean(xs)),
        **{
            k: _none_if_inf(_quantile(xs, q), ints)
            for k, q in (("median", 0.5), ("q1", 0.25), ("q3", 0.75), ("min", 0.0), ("max", 1.0))
        },
    }


def steps(
    batches: Sequence[tuple[int, int, int]], step: int, tuples: int
) -> tuple[np.ndarray, np.ndarray]:
    """(evaluations incl. profiling, tuples) per step of `step` tuples, a batch counted in the
    step it starts in (batches of `step` rows or a divisor of it fall exactly)."""
    evals = np.zeros(-(-tuples // step))
    rows = np.zeros_like(evals)
    seen = 0
    for t, e, p in batches:
        k = min(seen // step, len(evals) - 1)
        evals[k] += e + p
        rows[k] += t
        seen += t
    return evals, rows


def settle(
    evals: np.ndarray,
    reference: np.ndarray,
    *,
    start: int,
    stop: int,
    window: int,
    hold: int,
    within: float,
) -> int | None:
    """Steps from `start` to the end of the first window of `window` steps that opens `hold`
    consecutive windows each costing at most `within` × `reference` (evaluations of the
    optimal order per step) over the same steps, all of them before step `stop` (None: none).
    """
    if window < 1 or hold < 1:
        raise ValueError("a window and a hold of at least one step")
    e = np.concatenate([[0.0], np.cumsum(evals)])
    r = np.concatenate([[0.0], np.cumsum(reference)])
    for s in range(start, stop - hold * window + 1):
        ends = [s + k * window for k in range(hold + 1)]
        if all(e[b] - e[a] <= within * (r[b] - r[a]) for a, b in pairwise(ends)):
            return s + window - start
    return None
