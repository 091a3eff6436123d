"""The shared-join experiments' inputs (paper 002 §5): windows, arrivals, bursts, keys, preload."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from cq_service.bench.shared_joins.workload import (
    DISTRIBUTIONS,
    TimeScale,
    arrival_seconds,
    burst_mean,
    burst_shape,
    generate,
    zeta,
)


def test_table_1():
    assert DISTRIBUTIONS["small-large"] == (1, 5, 15, 300, 510, 570, 600)
    assert all(len(ws) == 7 and ws[0] == 1 and ws[-1] == 600 for ws in DISTRIBUTIONS.values())


def test_zeta_and_burst_shape():
    assert zeta(2.0) == pytest.approx(math.pi**2 / 6, rel=1e-10)
    assert zeta(4.0) == pytest.approx(math.pi**4 / 90, rel=1e-10)
    assert burst_shape(1) == math.inf
    for e in (2, 3, 4, 5):
        assert zeta(burst_shape(e)) == pytest.approx(e, rel=1e-9)
    with pytest.raises(ValueError):
        burst_shape(0.5)


@pytest.mark.parametrize(("mean_burst", "max_burst"), [(1, None), (2, None), (5, None), (5, 1000)])
def test_bursts_keep_the_overall_rate(mean_burst, max_burst):
    rng = np.random.default_rng(7)
    t = arrival_seconds(rng, 100.0, 20_000.0, mean_burst, max_burst)
    assert np.all(np.diff(t) >= 0) and t[-1] < 20_000
    sizes = np.unique(t, return_counts=True)[1]
    if max_burst is None and mean_burst == 5:
        # α ≈ 1.23: infinite variance, the sample mean converges slowly and from below
        assert 70 < len(t) / 20_000 < 110
    else:
        assert len(t) / 20_000 == pytest.approx(100, rel=0.03)
        assert np.mean(sizes) == pytest.approx(mean_burst, rel=0.05)
    if max_burst is not None:
        assert sizes.max() <= max_burst


def test_truncated_bursts_keep_the_mean():
    alpha = burst_shape(5, 1000)
    assert burst_mean(alpha, 1000) == pytest.approx(5, rel=1e-9)
    assert alpha < burst_shape(5)  # a truncated tail needs to be heavier
    with pytest.raises(ValueError):
        burst_shape(5, 10)  # even α → 1 gives at most H_10 ≈ 2.93


def test_generate_is_deterministic_with_a_preload():
    a = generate("uniform", new_tuples=2_000, seed=3)
    b = generate("uniform", new_tuples=2_000, seed=3)
    c = generate("uniform", new_tuples=2_000, seed=4)
    for name in ("A", "B"):
        assert np.array_equal(a.streams[name].ts, b.streams[name].ts)
        assert np.array_equal(a.streams[name].k, b.streams[name].k)
    assert not np.array_equal(a.streams["A"].ts, c.streams["A"].ts)
    assert a.measure_from == 600_000 and a.window_units == (1000, *range(100_000, 600_001, 100_000))
    assert a.new_tuples == 2_000  # Poisson at ms resolution: no tie at the cut here
    for s in a.streams.values():
        assert np.all(np.diff(s.ts) >= 0) and s.ts[0] >= 0
        assert np.array_equal(s.v, np.arange(len(s)))
        # the preload holds about λ·w_max = 60,000 tuples per stream
        assert np.sum(s.ts < a.measure_from) == pytest.approx(60_000, rel=0.03)


def test_keys_give_selectivity_0_002():
    w = generate("mostly-small", new_tuples=1_000, seed=1)
    ka, kb = w.streams["A"].k, w.streams["B"].k
    assert ka.min() >= 0 and max(ka.max(), kb.max()) < 500
    counts_a = np.bincount(ka, minlength=500)
    counts_b = np.bincount(kb, minlength=500)
    selectivity = float(counts_a @ counts_b) / (len(ka) * len(kb))
    assert selectivity == pytest.approx(0.002, rel=0.05)


def test_time_scale_compresses_time_not_counts():
    fast = generate([1, 10], new_tuples=500, scale=TimeScale(10, "ms"), seed=2)
    real = generate([1, 10], new_tuples=500, seed=2)
    assert fast.window_units == (10, 100) and fast.measure_from == 100
    assert real.window_units == (1000, 10_000)
    assert "1 paper second = 10 ms" in fast.describe()
    assert abs(len(fast.streams["A"]) - len(real.streams["A"])) < 60


def test_bursty_workload_and_csv(tmp_path):
    w = generate("small-large", new_tuples=3_000, mean_burst=4, seed=5)
    assert w.new_tuples >= 3_000
    paths = w.write_csv(tmp_path / "in")
    assert set(paths) == {"A", "B"}
    with paths["A"].open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["ts", "k", "v"] and len(rows) == len(w.streams["A"]) + 1
    assert [int(x) for x in rows[1]] == [int(w.streams["A"].ts[0]), int(w.streams["A"].k[0]), 0]
    assert w.streams["B"].table().column_names == ["ts", "k", "v"]


def test_bad_windows():
    with pytest.raises(ValueError):
        generate([5, 1])
    with pytest.raises(KeyError):
        generate("normal")
