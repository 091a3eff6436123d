"""The inputs of paper 002's experiments (§5), as seeded, deterministic generators.

- Two streams A and B with columns ``ts`` (integer time units), ``k`` (join key) and ``v``
  (payload: the tuple's sequence number in its stream, so every tuple and pair is distinct).
- Window sets: Table 1's four distributions of seven windows, in paper seconds.
- Arrivals (§5.1): Poisson at ``rate`` tuples per paper second per stream (100/s for the hash
  join, 15/s for nested loops). Burstiness (§5.2): an ON/OFF process — bursts start as a Poisson
  process of rate λ/E and all tuples of a burst arrive at one instant; the burst size is
  Pareto, P(x) = α·b^α / x^{α+1}, x ≥ b = 1 (the text prints "b ≥ x"; its remark that
  E(x) → 1 for large α fixes b = 1). The paper sets α from E(x) = α·b/(α − 1). Tuples are
  whole, so here a burst holds ⌊x⌋ tuples, whose mean is ζ(α); α is chosen with ζ(α) = E so
  the mean burst size is exactly E and the overall rate exactly λ (the paper's "fixed overall
  average rate"; its printed "λ/E(x)" is the rate of bursts). E = 1 is plain Poisson arrivals.
  With α < 2 (E ≥ 2) the variance is infinite and a finite run's rate is usually well below λ
  (86/s in one run of E = 5 with 1.7·10⁶ tuples); ``max_burst`` (not in the paper) truncates bursts
  and re-solves α for the same mean, so the realised rate stays near λ.
- Join selectivity (§5: "approximated as 0.002"): keys uniform over ``keys`` = 500 values, so a
  pair matches with probability 1/500 = 0.002.
- Preload (§5): the streams start w_max before the measured part (``measure_from``); then they
  run until ``new_tuples`` (100,000 in the paper, both streams together) have arrived.
- Time scale: one paper second is ``TimeScale.units_per_second`` time units of the pipeline
  (default 1000 ms: real time); a smaller factor compresses time, keeping tuple counts.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

__all__ = [
    "DISTRIBUTIONS",
    "KEYS",
    "StreamData",
    "TimeScale",
    "Workload",
    "arrival_seconds",
    "burst_mean",
    "burst_shape",
    "generate",
    "zeta",
]

# Table 1 (seconds).
DISTRIBUTIONS: dict[str, tuple[int, ...]] = {
    "uniform": (1, 100, 200, 300, 400, 500, 600),
    "mostly-small": (1, 5, 15, 30, 60, 300, 600),
    "mostly-large": (1, 60, 300, 420, 510, 570, 600),
    "small-large": (1, 5, 15, 300, 510, 570, 600),
}
KEYS = 500  # uniform keys: pair selectivity 1/500 = 0.002
STREAMS = ("A", "B")


@dataclass(frozen=True)
class TimeScale:
    """Maps the paper's seconds to the pipeline's integer time units."""

    units_per_second: float = 1000.0
    time_unit: str = "ms"

    def units(self, seconds: float) -> int:
        """A duration of paper seconds in whole time units (at least 1)."""
        return max(1, round(seconds * self.units_per_second))

    def describe(self) -> str:
        return f"1 paper second = {self.units_per_second:g} {self.time_unit}"


def zeta(alpha: float, terms: int = 1000) -> float:
    """Riemann ζ(α) for α > 1: the mean of ⌊X⌋, X ~ Pareto(α, b = 1) (P(⌊X⌋ ≥ k) = k^−α).
    Direct sum plus the Euler–Maclaurin tail; error far below 1e−9 for α ≥ 1.05."""
    if alpha <= 1:
        raise ValueError(f"ζ(α) diverges for α ≤ 1 (α = {alpha})")
    k = np.arange(1, terms, dtype=np.float64)
    n = float(terms)
    tail = n ** (1 - alpha) / (alpha - 1) + n**-alpha / 2 + alpha * n ** (-alpha - 1) / 12
    return float(np.sum(k**-alpha) + tail)


def burst_mean(alpha: float, max_burst: int | None = None) -> float:
    """The mean of min(⌊X⌋, max_burst), X ~ Pareto(α, b = 1): ζ(α), or Σ_{k ≤ max_burst} k^−α."""
    if max_burst is None:
        return zeta(alpha)
    return float(np.sum(np.arange(1, max_burst + 1, dtype=np.float64) ** -alpha))


def burst_shape(mean_burst: float, max_burst: int | None = None) -> float:
    """The Pareto shape α whose burst size has mean `mean_burst`; ∞ for E = 1."""
    if mean_burst < 1:
        raise ValueError(f"the mean burst size is at least 1 (got {mean_burst})")
    if mean_burst == 1:
        return float("inf")
    lo, hi = 1.0 + 1e-9, 64.0  # the mean decreases towards 1 as α grows
    if burst_mean(lo, max_burst) <= mean_burst:
        raise ValueError(f"max_burst {max_burst} is too small for a mean burst of {mean_burst}")
    for _ in range(200):
        mid = (lo + hi) / 2
        if burst_mean(mid, max_burst) > mean_burst:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def arrival_seconds(
    rng: np.random.Generator,
    rate: float,
    seconds: float,
    mean_burst: float = 1.0,
    max_burst: int | None = None,
) -> np.ndarray:
    """Sorted arrival times in [0, seconds): bursts start as a Poisson process of rate
    rate/E, each carrying ⌊Pareto(α, 1)⌋ tuples (at most `max_burst`) at its start
    (E = 1: Poisson arrivals)."""
    alpha = burst_shape(mean_burst, max_burst)
    burst_rate = rate / mean_burst
    n = int(seconds * burst_rate * 1.2) + 100
    starts = np.cumsum(rng.exponential(1 / burst_rate, n))
    while starts[-1] < seconds:  # rare: extend until past the end
        starts = np.concatenate(
            [starts, starts[-1] + np.cumsum(rng.exponential(1 / burst_rate, n))]
        )
    starts = starts[starts < seconds]
    if np.isinf(alpha):
        return starts
    sizes = np.floor(rng.pareto(alpha, len(starts)) + 1).astype(np.int64)  # Pareto(α, b = 1)
    if max_burst is not None:
        sizes = np.minimum(sizes, max_burst)
    return np.repeat(starts, sizes)


@dataclass(frozen=True)
class StreamData:
    """One stream's tuples in timestamp order: ts (time units), k (key), v (sequence number)."""

    ts: np.ndarray
    k: np.ndarray
    v: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    def table(self) -> pa.Table:
        return pa.table({"ts": self.ts, "k": self.k, "v": self.v})

    def write_csv(self, path: Path) -> Path:
        """`ts,k,v` with a header: the CSV a pipeline's file source reads."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(("ts", "k", "v"))
            w.writerows(zip(self.ts.tolist(), self.k.tolist(), self.v.tolist(), strict=True))
        return path


@dataclass(frozen=True)
class Workload:
    """The streams and windows of one run. `windows` are paper seconds, `window_units` the same
    in time units; tuples with ts < `measure_from` (= w_max in units) are the preload."""

    windows: tuple[float, ...]
    window_units: tuple[int, ...]
    scale: TimeScale
    streams: dict[str, StreamData]
    measure_from: int
    rate: float
    mean_burst: float
    seed: int
    keys: int = KEYS
    max_burst: int | None = None

    @property
    def new_tuples(self) -> int:
        """Tuples after the preload, both streams together."""
        return sum(int(np.sum(s.ts >= self.measure_from)) for s in self.streams.values())

    def describe(self) -> str:
        return (
            f"windows {list(self.windows)} s, {self.rate:g} tuples/s per stream, mean burst "
            f"{self.mean_burst:g}"
            + (f" (at most {self.max_burst})" if self.max_burst else "")
            + f", keys uniform on {self.keys} (selectivity {1 / self.keys:g}), "
            f"preload {self.measure_from} {self.scale.time_unit}, {self.new_tuples} new tuples; "
            f"{self.scale.describe()}"
        )

    def write_csv(self, folder: Path) -> dict[str, Path]:
        """Each stream as `folder/<name>.csv`; returns {stream: path}."""
        return {name: s.write_csv(folder / f"{name}.csv") for name, s in self.streams.items()}


def generate(
    windows: str | Sequence[float] = "uniform",
    *,
    rate: float = 100.0,
    new_tuples: int = 100_000,
    mean_burst: float = 1.0,
    max_burst: int | None = None,
    keys: int = KEYS,
    scale: TimeScale | None = None,
    seed: int = 0,
) -> Workload:
    """The two streams for `windows` (a Table 1 name or seconds): a preload of w_max, then
    arrivals until `new_tuples` new tuples (both streams) — every tuple at the instant of the
    last counted one is kept, so ties may add a few."""
    ws = tuple(float(w) for w in (DISTRIBUTIONS[windows] if isinstance(windows, str) else windows))
    if not ws or list(ws) != sorted(set(ws)) or ws[0] <= 0:
        raise ValueError(f"windows must be positive and increasing: {ws}")
    scale = scale or TimeScale()
    w_max = ws[-1]
    measure_from = scale.units(w_max)
    span = new_tuples / (2 * rate) * 1.5 + 10 * mean_burst / rate
    for _ in range(8):  # heavy tails may fall short: lengthen the run, same seed
        children = np.random.SeedSequence(seed).spawn(len(STREAMS))
        rngs = {name: np.random.default_rng(c) for name, c in zip(STREAMS, children, strict=True)}
        times = {
            name: np.floor(
                arrival_seconds(rng, rate, w_max + span, mean_burst, max_burst)
                * scale.units_per_second
            ).astype(np.int64)
            for name, rng in rngs.items()
        }
        new = np.sort(np.concatenate([t[t >= measure_from] for t in times.values()]))
        if len(new) >= new_tuples:
            break
        span *= 2
    else:
        raise ValueError(f"generated only {len(new)} new tuples (< {new_tuples})")
    cut = new[new_tuples - 1] if new_tuples else measure_from - 1
    streams = {}
    for name, t in times.items():
        t = t[t <= cut]
        rng = rngs[name]
        streams[name] = StreamData(
            t, rng.integers(0, keys, len(t), dtype=np.int64), np.arange(len(t), dtype=np.int64)
        )
    return Workload(
        windows=ws,
        window_units=tuple(scale.units(w) for w in ws),
        scale=scale,
        streams=streams,
        measure_from=measure_from,
        rate=rate,
        mean_burst=mean_burst,
        seed=seed,
        keys=keys,
        max_burst=max_burst,
    )
