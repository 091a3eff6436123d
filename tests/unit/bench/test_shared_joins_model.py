"""Paper 002's analytical model (§3.1.1, §3.2.1) against the brief's computed values."""

from __future__ import annotations

import pytest

from cq_service.bench.shared_joins.model import (
    PAPER,
    ModelParams,
    alone_avg_rt,
    buffer_sizes,
    lwo_avg_rt,
    model_table,
    swf_avg_rt,
)
from cq_service.bench.shared_joins.workload import DISTRIBUTIONS

UNIFORM = DISTRIBUTIONS["uniform"]


def test_paper_parameters():
    assert (PAPER.t_p, PAPER.lam, PAPER.m) == (1e-8, 100.0, 50)
    assert buffer_sizes(UNIFORM, PAPER.lam) == [100, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000]


def test_brief_values_to_the_printed_precision():
    lwo, alone, swf = lwo_avg_rt(UNIFORM), alone_avg_rt(UNIFORM), swf_avg_rt(UNIFORM)
    # w = 1 s: LWO 0.0147, alone 2.5005e−5, SWF 2.55e−5
    assert f"{lwo[0]:.4f}" == "0.0147"
    assert f"{alone[0]:.4e}" == "2.5005e-05"
    assert f"{swf[0]:.2e}" == "2.55e-05"
    # w = 600 s: LWO 0.0150, alone 0.0150, SWF 0.02755
    assert f"{lwo[-1]:.4f}" == "0.0150"
    assert f"{alone[-1]:.4f}" == "0.0150"
    assert f"{swf[-1]:.5f}" == "0.02755"


def test_exact_values():
    # (t_p/2)·((S_1 + 1) + 49·60000) with S_1 = 100; SWF w_7 = 50·50000·t_p + 25.5·10000·t_p
    assert lwo_avg_rt(UNIFORM)[0] == pytest.approx(5e-9 * 2_940_101, rel=1e-12)
    assert alone_avg_rt(UNIFORM)[-1] == pytest.approx(5e-9 * 3_000_001, rel=1e-12)
    assert swf_avg_rt(UNIFORM)[-1] == pytest.approx(0.025 + 0.00255, rel=1e-12)


def test_shapes_of_the_curves():
    for ws in DISTRIBUTIONS.values():
        lwo, alone, swf = lwo_avg_rt(ws), alone_avg_rt(ws), swf_avg_rt(ws)
        # LWO is nearly flat (dominated by (m−1)·S_max), and equals "alone" at w_max
        assert max(lwo) / min(lwo) < 1.05
        assert lwo[-1] == pytest.approx(alone[-1])
        # SWF and "alone" grow with the window; SWF beats LWO on the smallest window
        assert swf == sorted(swf) and alone == sorted(alone)
        assert swf[0] < lwo[0] / 100


def test_one_window_swf_is_the_completion_time_average():
    # one window: the k-th tuple completes at k·S·t_p, so the mean is (m + 1)/2·S·t_p
    p = ModelParams(t_p=1.0, lam=1.0, m=3)
    assert swf_avg_rt([4], p) == [8.0]
    assert lwo_avg_rt([4], p) == alone_avg_rt([4], p) == [0.5 * (3 * 4 + 1)]


def test_table_and_bad_windows():
    table = model_table(UNIFORM)
    assert set(table) == {"lwo", "alone", "swf"}
    assert list(table["swf"]) == [float(w) for w in UNIFORM]
    with pytest.raises(ValueError):
        lwo_avg_rt([100, 1])
    with pytest.raises(ValueError):
        swf_avg_rt([0, 1])
