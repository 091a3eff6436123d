"""The Re-optimizer's matrix view V over the profile window (thesis 003 §4.3.2).

Columns follow the current order: V[i, j] (positions, 0-based here, 1-based in the thesis) is the
number of profile tuples dropped by the filter at position j among those not dropped by the
filters at positions 0..i-1; it is proportional to d(j | i-1). `update` is Figure 4.5 (insert,
or delete with sign -1), `recompute_row` the full scan of Figure 4.7, `entries` the same counts
for tuples with unknown verdicts (the variants' partial profiles).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MatrixView", "entries"]


class MatrixView:
    """V for `n` filters: an n×n upper-triangular matrix of counts."""

    def __init__(self, n: int):
        self.n = n
        self.v = np.zeros((n, n), dtype=np.int64)

    def update(self, order: Sequence[int], drops: np.ndarray, sign: int = 1) -> None:
        """Figure 4.5: a profile tuple (verdicts by filter index) enters (`sign` 1) or leaves
        (-1) the window."""
        b = drops[list(order)]
        hit = np.flatnonzero(b)
        if not len(hit):
            return
        dc = hit[0]  # first position whose filter dropped it
        self.v[: dc + 1, hit] += sign

    def update_many(self, order: Sequence[int], drops: np.ndarray, sign: int = 1) -> None:
        """`update` for a (t, n) block of tuples at once (each must drop somewhere)."""
        if not len(drops):
            return
        b = drops[:, list(order)]
        dc = b.argmax(axis=1)  # first dropping position of each
        reach = np.arange(self.n)[None, :] <= dc[:, None]  # rows 0..dc
        self.v += sign * (reach.T.astype(np.int64) @ b.astype(np.int64))

    def recompute_row(self, r: int, order: Sequence[int], drops: np.ndarray) -> None:
        """Figure 4.7, lines 6-13: row `r` by a full scan of the window's verdicts `drops`
        ((tuples, n) by filter index)."""
        b = drops[:, list(order)]
        alive = ~b[:, :r].any(axis=1)
        self.v[r, r:] = b[alive, r:].sum(axis=0)
        self.v[r, :r] = 0

    def rotate(self, r: int, c: int, rows: int) -> None:
        """Move column `c` to `r` (columns r..c-1 shift right) in rows 0..rows-1: the filter at
        position c moved to position r."""
        block = self.v[:rows, r : c + 1].copy()
        self.v[:rows, r] = block[:, -1]
        self.v[:rows, r + 1 : c + 1] = block[:, :-1]

    def swap(self, i: int, j: int, rows: int) -> None:
        """Swap columns i and j in rows 0..rows-1."""
        self.v[:rows, [i, j]] = self.v[:rows, [j, i]]

    def rows(self) -> list[list[int]]:
        """The upper triangle, row by row (row i: columns i..n-1), as the thesis prints it."""
        return [self.v[i, i:].tolist() for i in range(self.n)]


def entries(
    known: np.ndarray, drops: np.ndarray, order: Sequence[int], i: int, j: int
) -> tuple[int, int]:
    """(V[i, i], V[i, j]) counted over the profile tuples whose verdicts on the filters at
    positions 0..i and j are all known (the same population for both, so their ratio estimates
    d(i | i-1) / d(j | i-1))."""
    f = list(order)
    need = [*f[: i + 1], f[j]]
    ok = known[:, need].all(axis=1) & ~drops[:, f[:i]].any(axis=1)
    return int(drops[ok, f[i]].sum()), int(drops[ok, f[j]].sum())
