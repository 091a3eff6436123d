"""State a window holds beyond its steady level: what a change of size has not released yet.

A change of a Range window's size applies to tuples from an instant on; the tuples already
admitted keep the interval they were given (docs/resources.md). So right after a shrink from
60 s to 10 s a window still holds its last 60 s of tuples, and while those leave, the new
ones arrive: at x time units after now the window holds

    H(x) + r·min(x, W)

where H(x) is the bytes of the tuples held now that are still held at now + x (known exactly
from their exit instants), r the bytes entering per time unit and W the size in force. The
steady level the cost model gives is r·W, so what a shrink has not released yet is the worst
excess over the coming time,

    max over x ≥ 0 of  H(x) − r·(W − x)⁺   (and 0 when that is negative).

For a window that has not changed this is 0 (its tuples leave as fast as new ones fill in).
The rate r is the larger of the model's (from the sources' smoothed rates, which take
seconds to believe a change) and what the window admitted lately (`HeldProfile.recent`), so
a burst counts from its first round: the window's whole level is then r·W + the excess.
`held_profile` samples H on a grid; `unreleased` takes the maximum, rounding each grid cell
the safe way (H at the cell's start, the new tuples at its end), so it never underestimates
the excess of the profile it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["GRID", "HeldProfile", "held_profile", "unreleased"]

GRID = 64  # cells of the sampled profile


@dataclass(frozen=True)
class HeldProfile:
    """H(x) of one window: bytes held now that are still held `offsets[i]` time units from
    now (offsets increasing from 0; H is non-increasing)."""

    offsets: tuple[int, ...]
    held: tuple[float, ...]
    recent: float = 0.0  # bytes per time unit admitted lately (a burst shows here first)

    @property
    def now(self) -> float:
        """Bytes held now (H(0))."""
        return self.held[0] if self.held else 0.0


def held_profile(held_after: Callable[[np.ndarray], np.ndarray], now: int, horizon: int,
                 cells: int = GRID, recent: float = 0.0) -> HeldProfile:
    """Sample `held_after(now + x)` (vectorised over instants) for x on a grid over
    [0, horizon] (the profile is 0 past the latest exit, which `horizon` should reach);
    `recent`: the bytes per time unit admitted lately."""
    horizon = max(1, int(horizon))
    step = max(1, -(-horizon // cells))
    offsets = tuple(range(0, horizon + step, step))
    held = held_after(now + np.asarray(offsets, dtype=np.int64))
    return HeldProfile(offsets, tuple(float(h) for h in held), recent)


def unreleased(profile: HeldProfile, size: int, per_unit: float) -> float:
    """The most the window will hold above its steady level r·W (`per_unit` = r, bytes per
    time unit; `size` = W) if its size is `size` from now on: max H(x) − r·(W − x)⁺, ≥ 0."""
    xs, hs = profile.offsets, profile.held
    if not xs:
        return 0.0
    if size <= 0:
        return max(0.0, hs[0])
    best = 0.0
    for i, x in enumerate(xs):
        if x >= size:
            break
        nxt = xs[i + 1] if i + 1 < len(xs) else None
        filling = 0.0 if nxt is None or nxt >= size else per_unit * (size - nxt)
        best = max(best, hs[i] - filling)
    return best
