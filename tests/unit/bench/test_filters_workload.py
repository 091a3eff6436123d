"""`cq bench filters`' generator: the thesis' correlation and selectivity, checked as
statistics of a seeded sample, and values that make each filter's verdict the generated one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cq_service.bench.filters.pipeline import pipeline_yaml, query_cql
from cq_service.bench.filters.workload import coupling, generate, groups

TOL = 0.01  # 200,000 tuples: a share's standard error is about 0.0011


def test_groups_are_gamma_consecutive_filters() -> None:
    assert groups(5) == [[0, 1], [2, 3], [4]]
    assert groups(6, 3) == [[0, 1, 2], [3, 4, 5]]


def test_default_selectivity_and_correlation() -> None:
    """Every filter drops 50% of tuples; the two filters of a group agree on 80%, filters of
    different groups are independent (agree on 50%)."""
    w = generate(6, 200_000, seed=3)
    assert np.allclose(w.drops.mean(axis=0), 0.5, atol=TOL)
    for a, b in ((0, 1), (2, 3), (4, 5)):
        assert abs((w.drops[:, a] == w.drops[:, b]).mean() - 0.8) < TOL
    for a, b in ((0, 2), (1, 4), (3, 5)):
        assert abs((w.drops[:, a] == w.drops[:, b]).mean() - 0.5) < TOL


def test_coupling_gives_the_agreement() -> None:
    assert coupling(2, 0.8, 0.5) == pytest.approx(0.6)
    assert coupling(2, 0.8, 0.05) == 0.0  # already agreeing more by chance: no coupling
    w = generate(3, 200_000, gamma=3, seed=4)
    same = (w.drops == w.drops[:, :1]).all(axis=1).mean()
    assert abs(same - 0.8) < TOL


def test_permuted_selectivities() -> None:
    """Each phase holds a permutation of the given drop probabilities, and the tuples follow
    it; consecutive phases differ."""
    drop = [0.2, 0.4, 0.6, 0.8]
    w = generate(4, 200_000, drop=drop, period=50_000, seed=5)
    assert len(w.phases) == 4
    for k, probs in enumerate(w.phases):
        assert sorted(probs) == pytest.approx(drop)
        block = w.drops[k * 50_000 : (k + 1) * 50_000]
        assert np.allclose(block.mean(axis=0), probs, atol=2 * TOL)
        if k:
            assert probs != w.phases[k - 1]
    assert w.phases[0] == pytest.approx(drop)
    assert w.phase_of(49_999) == 0 and w.phase_of(50_000) == 1


def test_values_match_the_drop_bits() -> None:
    """v_i is in F_i's constant set exactly when F_i passes the tuple."""
    w = generate(3, 5_000, seed=6)
    t = w.table()
    for i, s in enumerate(w.sets):
        found = pc.is_in(t[f"v{i + 1}"], value_set=pa.array(s))
        inside = found.to_numpy(zero_copy_only=False)
        assert (inside == ~w.drops[:, i]).all()
    assert w.passing() == int((~w.drops.any(axis=1)).sum())


def test_seeded() -> None:
    a, b = generate(4, 1_000, seed=9), generate(4, 1_000, seed=9)
    assert (a.drops == b.drops).all() and (a.values == b.values).all() and a.sets == b.sets


def test_pipeline_text_writes_the_order() -> None:
    cql = query_cql([[1, 2], [3]], [1, 0])
    assert cql == "SELECT * FROM S0 WHERE v2 IN (3) AND v1 IN (1, 2)"
    text = pipeline_yaml(2, cql)
    assert "v1: int, v2: int" in text and cql in text
