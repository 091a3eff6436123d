"""The Linear Road queries in CQL (pipelines/linear-road/linear-road.yaml), run by the engine,
against the independent validator: every toll notification, accident notification, balance,
cleared accident and final segment statistic, row for row (docs/linear-road.md, "The queries")."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from cq_service.bench.linear_road.check import OUTPUTS, check
from cq_service.bench.linear_road.generator import GeneratorConfig, generate
from cq_service.bench.linear_road.schema import SEGMENT_FEET
from cq_service.cli import app


def assert_equal(result, at_least: dict[str, int]) -> None:
    for name in OUTPUTS:
        assert result.only_engine[name] == [], (name, result.only_engine[name][:5])
        assert result.only_expected[name] == [], (name, result.only_expected[name][:5])
        assert result.engine[name] == result.expected[name]
    for name, n in at_least.items():
        assert result.expected[name] >= n, (name, result.expected)


def test_generated_run_with_accidents(tmp_path):
    """L = 1, 4 minutes, seeded; traffic jams early, cars crash every ~45 s and stay 5-6 reports
    (7 accidents, 3 of them cleared, 71 accident notifications)."""
    config = GeneratorConfig(
        duration=240,
        seed=6,
        entry_rate=8.0,
        jam_cars=8.0,
        accident_interval=45.0,
        stopped_reports=(5, 6),
    )
    rows = pa.concat_tables(generate(config)).to_pylist()
    result = check(rows, tmp_path)
    assert_equal(
        result,
        {
            "tolls": 2000,
            "accident_alerts": 70,
            "accidents": 3,
            "balances": 40,
            "segment_stats": 100,
        },
    )


def congested(seed: int, cars: int = 70, minutes: int = 9) -> list[dict[str, int]]:
    """``cars`` cars crawling east through segments 10-13 at 5-45 mph, each reporting every
    30 s from its own second, with a balance query after one report in eight: more than 50 cars
    a minute in a segment, LAV around 25-40, so tolls, charges and balances are not zero."""
    rng = random.Random(seed)
    rows: list[dict[str, int]] = []
    qid = 0
    for vid in range(cars):
        pos = 10 * SEGMENT_FEET + rng.randrange(2 * SEGMENT_FEET)
        t = rng.randrange(30)
        while t < minutes * 60 and pos < 14 * SEGMENT_FEET:
            speed = rng.randrange(5, 46)
            rows.append({"type": 0, "time": t, "vid": vid, "speed": speed, "xway": 0,
                         "lane": 1 + vid % 3, "dir": 0, "seg": pos // SEGMENT_FEET, "pos": pos,
                         "qid": -1})  # fmt: skip
            if rng.random() < 0.125:
                rows.append({"type": 2, "time": t, "vid": vid, "speed": -1, "xway": -1,
                             "lane": -1, "dir": -1, "seg": -1, "pos": -1, "qid": qid})  # fmt: skip
                qid += 1
            pos += speed * 44 * 3  # a fast-forward: about a segment every few minutes
            t += 30
    return sorted(rows, key=lambda r: (r["time"], r["vid"], r["type"]))


@pytest.mark.parametrize("seed", [0, 1])
def test_congested_segments_charge_tolls(tmp_path, seed):
    rows = congested(seed)
    result = check(rows, tmp_path)
    assert_equal(result, {"tolls": 100, "balances": 50})
    tolls = [r for r in result_rows(tmp_path, "tolls") if r["toll"] > 0]
    balances = [r for r in result_rows(tmp_path, "balances") if r["bal"] > 0]
    assert tolls and balances


def result_rows(workdir, name):
    return [json.loads(line) for line in (workdir / "out" / f"{name}.jsonl").open()]


def test_check_command(tmp_path):
    args = ["linear-road", "check", "--duration", "90", "--workdir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "tolls: engine" in result.output and "rows differ" not in result.output
