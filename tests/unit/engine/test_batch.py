"""Batch helpers: `merge_ticks` is the sorted union of tick arrays, whatever their overlap."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.engine.batch import EMPTY_TICKS, merge_ticks


def _ticks(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def test_merge_ticks_trivial_cases():
    assert merge_ticks() is EMPTY_TICKS
    assert merge_ticks(EMPTY_TICKS, EMPTY_TICKS) is EMPTY_TICKS
    a = _ticks(1, 3)
    assert merge_ticks(EMPTY_TICKS, a) is a
    assert merge_ticks(a, _ticks(4, 9)).tolist() == [1, 3, 4, 9]  # consecutive


def test_merge_ticks_equal_parts():
    a, b = _ticks(1, 5, 7), _ticks(1, 5, 7)
    assert merge_ticks(a, b, a).tolist() == [1, 5, 7]
    assert merge_ticks(a, _ticks(1, 5, 8)).tolist() == [1, 5, 7, 8]  # same length, not equal


def test_merge_ticks_overlapping_and_interleaved():
    assert merge_ticks(_ticks(1, 4, 9), _ticks(2, 4, 10), _ticks(0, 9)).tolist() == [
        0, 1, 2, 4, 9, 10,
    ]


@pytest.mark.parametrize("seed", range(20))
def test_merge_ticks_is_the_sorted_union(seed):
    rng = np.random.default_rng(seed)
    parts = [
        np.unique(rng.integers(0, int(rng.integers(1, 60)), size=int(rng.integers(0, 30))))
        for _ in range(int(rng.integers(1, 5)))
    ]
    got = merge_ticks(*[p.astype(np.int64) for p in parts])
    want = np.unique(np.concatenate(parts)) if parts else EMPTY_TICKS
    assert got.dtype == np.int64
    assert got.tolist() == want.tolist()
