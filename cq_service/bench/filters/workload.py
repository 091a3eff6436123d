"""The synthetic input of `cq bench filters` (thesis 003 §4.7; brief §1, "Experiments").

Stream S0 has an id and one integer column per filter, v1 … vn. Filter F_i is the one-probe set
membership ``v_i IN (<constant set>)``: a tuple passes F_i when v_i is drawn from the set and is
dropped when it is drawn from its complement, so the generator decides each tuple's verdicts
first (its *drop bits*) and picks the values to match.

Correlation (the thesis' generator): ⌈n/Γ⌉ groups of Γ filters; by default consecutive ones
(F1, F2 | F3, F4 | …; the last group may be smaller), or, with a `placement` (a permutation of
the filter indices), consecutive ones of the placement, so which filters share a group is not
tied to the order they are written in (`random_placement`). Per tuple and group a coin with probability `q` decides
whether the group's filters share one uniform draw U_g or each draws its own U_i; F_i drops the
tuple when its draw is below its drop probability d_i. Each filter's unconditional drop
probability is exactly d_i whatever q is, and with the default d_i = 0.5 and Γ = 2, q = 0.6
makes the two filters of a group give the same result on q + (1 − q)/2 = 80% of tuples, the
thesis' figure (`coupling` computes q for any Γ).

Adaptivity (the thesis' generator "periodically permute selectivities"): the drop
probabilities may differ per filter and every `period` tuples they are permuted (seeded), so
another filter becomes the most selective and the best order changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "DOMAIN",
    "SET_SIZE",
    "Workload",
    "coupling",
    "generate",
    "groups",
    "random_placement",
]

GAMMA = 2  # the correlation factor Γ
AGREE = 0.8  # filters in a group give the same result on this share of tuples
SET_SIZE = 64  # the constant set of each filter: SET_SIZE values out of 0 .. DOMAIN-1
DOMAIN = 128


def groups(n: int, gamma: int = GAMMA, placement: Sequence[int] | None = None) -> list[list[int]]:
    """⌈n/Γ⌉ groups of Γ consecutive filter indices (the last may be smaller); with
    `placement`, Γ consecutive entries of it."""
    at = list(range(n)) if placement is None else [int(f) for f in placement]
    if sorted(at) != list(range(n)):
        raise ValueError(f"a placement is a permutation of 0 … {n - 1}, got {at}")
    return [at[g : g + gamma] for g in range(0, n, gamma)]


def random_placement(n: int, k: int) -> list[int]:
    """The k-th placement of `cq bench filters`: k = 0 the identity (consecutive filters
    grouped), k ≥ 1 a permutation seeded by k."""
    if k == 0:
        return list(range(n))
    return np.random.default_rng(10_000 + k).permutation(n).tolist()


def coupling(gamma: int = GAMMA, agree: float = AGREE, drop: float = 0.5) -> float:
    """q such that Γ filters of drop probability `drop` all agree on `agree` of tuples: they
    agree always when sharing a draw, and with probability drop^Γ + (1 − drop)^Γ otherwise."""
    by_chance = drop**gamma + (1 - drop) ** gamma
    if gamma < 2 or by_chance >= agree:
        return 0.0
    return (agree - by_chance) / (1 - by_chance)


@dataclass
class Workload:
    """`drops[t, i]`: filter F_{i+1} drops tuple t; `values[t, i]` its column v_{i+1};
    `phases[k]` the drop probabilities in force from tuple k·period on."""

    drops: np.ndarray
    values: np.ndarray
    sets: list[list[int]]
    phases: list[list[float]]
    period: int
    seed: int
    rows_per_instant: int = 1000
    groups: list[list[int]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.drops.shape[1]

    @property
    def tuples(self) -> int:
        return self.drops.shape[0]

    def phase_of(self, t: int) -> int:
        """The phase (index into `phases`) tuple `t` belongs to."""
        return min(t // self.period, len(self.phases) - 1)

    def passing(self) -> int:
        """Tuples no filter drops: the output of every order."""
        return int((~self.drops.any(axis=1)).sum())

    def table(self) -> pa.Table:
        """id, v1 … vn and the timestamp ts (`rows_per_instant` tuples per instant)."""
        ids = np.arange(self.tuples, dtype=np.int64)
        cols = {"id": ids}
        for i in range(self.n):
            cols[f"v{i + 1}"] = self.values[:, i]
        cols["ts"] = ids // self.rows_per_instant
        return pa.table(cols)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(self.table(), path)
        return path

    def describe(self) -> str:
        return (
            f"{self.tuples:,} tuples, n = {self.n}, {len(self.phases)} phase(s) of "
            f"{self.period:,} tuples, {self.passing():,} pass every filter"
        )


def generate(
    n: int,
    tuples: int,
    *,
    drop: Sequence[float] | None = None,
    period: int | None = None,
    gamma: int = GAMMA,
    agree: float = AGREE,
    seed: int = 0,
    rows_per_instant: int = 1000,
    placement: Sequence[int] | None = None,
) -> Workload:
    """`tuples` tuples for `n` filters. `drop`: the drop probabilities (default 0.5 each, the
    thesis' unconditional selectivity); with `period`, they are permuted every `period` tuples
    (the first phase keeps them as given); `placement`: which filters share a group
    (`groups`)."""
    members = groups(n, gamma, placement)
    if n < 1 or tuples < 1:
        raise ValueError("at least one filter and one tuple")
    rng = np.random.default_rng(seed)
    base = np.full(n, 0.5) if drop is None else np.asarray(drop, dtype=float)
    if base.shape != (n,) or ((base < 0) | (base > 1)).any():
        raise ValueError(f"{n} drop probabilities in [0, 1], got {list(base)}")
    period = tuples if period is None else period
    if period < 1:
        raise ValueError("a period is at least one tuple")
    phases = [base]
    for _ in range(1, -(-tuples // period)):
        prev = phases[-1]
        perm = rng.permutation(n)
        while n > 1 and np.array_equal(base[perm], prev):  # a change, not the same again
            perm = rng.permutation(n)
        phases.append(base[perm])
    d = np.empty((tuples, n))
    for k, probs in enumerate(phases):
        d[k * period : (k + 1) * period] = probs
    q = coupling(gamma, agree)
    draws = rng.random((tuples, n))
    for g in members:
        shared = rng.random(tuples)
        together = rng.random(tuples) < q
        draws[:, g] = np.where(together[:, None], shared[:, None], draws[:, g])
    drops = draws < d
    sets = [sorted(rng.choice(DOMAIN, SET_SIZE, replace=False).tolist()) for _ in range(n)]
    values = np.empty((tuples, n), dtype=np.int64)
    for i, s in enumerate(sets):
        inside = np.asarray(s, dtype=np.int64)
        outside = np.setdiff1d(np.arange(DOMAIN), inside)
        pick_in = inside[rng.integers(0, len(inside), tuples)]
        pick_out = outside[rng.integers(0, len(outside), tuples)]
        values[:, i] = np.where(drops[:, i], pick_out, pick_in)
    return Workload(
        drops,
        values,
        sets,
        [p.tolist() for p in phases],
        period,
        seed,
        rows_per_instant,
        members,
    )
