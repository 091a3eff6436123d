"""The shared-join charts write PNGs from small synthetic results."""

from __future__ import annotations

import pytest

from cq_service.bench.shared_joins.plots import burst_chart, model_chart, window_chart

PNG = b"\x89PNG\r\n\x1a\n"


def test_window_chart(tmp_path):
    results = {
        policy: {
            dist: {str(w): {"avg": 0.01 * f * w, "max": 0.1 * f * w} for w in (1, 100, 600)}
            for dist in ("uniform", "small-large")
        }
        for f, policy in ((1, "mqt"), (2, "swf"), (3, "lwo"))
    }
    results["off"] = {"uniform": {1: {"avg": 0.5, "max": None}, 600: {"avg": 1.0, "max": 2.0}}}
    path = window_chart(results, tmp_path / "charts" / "windows.png", title="test")
    assert path.read_bytes()[:8] == PNG


def test_burst_chart(tmp_path):
    results = {
        p: {b: {"avg": f * b, "max_largest": 10 * f * b} for b in (1, 2, 3, 4, 5)}
        for f, p in ((1, "mqt"), (2, "swf"), (5, "lwo"))
    }
    assert burst_chart(results, tmp_path / "burst.png").read_bytes()[:8] == PNG


def test_model_chart(tmp_path):
    assert model_chart((1, 100, 600), tmp_path / "m.png").read_bytes()[:8] == PNG


def test_empty(tmp_path):
    with pytest.raises(ValueError):
        window_chart({}, tmp_path / "x.png")
    with pytest.raises(ValueError):
        burst_chart({}, tmp_path / "y.png")
