"""The Linear Road generator: deterministic, the benchmark's geometry and cadence, accidents and
balance queries, Parquet = JSONL, and `cq linear-road generate`."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cq_service.bench.linear_road.generator import GeneratorConfig, generate, write
from cq_service.bench.linear_road.schema import FIELDS, SCHEMA, SEGMENT_FEET
from cq_service.bench.linear_road.validator import validate
from cq_service.cli import app

SMALL = GeneratorConfig(scale=2, duration=900, seed=3, entry_rate=4.0, accident_interval=120.0)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return pa.concat_tables(generate(SMALL))


def test_same_seed_same_rows_other_seed_other_rows(table):
    assert pa.concat_tables(generate(SMALL)).equals(table)
    other = GeneratorConfig(**{**SMALL.__dict__, "seed": 4})
    assert not pa.concat_tables(generate(other)).equals(table)


def test_schema_geometry_and_time_order(table):
    assert table.schema == SCHEMA and tuple(table.column_names) == FIELDS
    t = table.column("time").to_numpy()
    assert (np.diff(t) >= 0).all() and t.min() >= 0 and t.max() < SMALL.duration
    reports = table.filter(pa.compute.equal(table.column("type"), 0)).to_pydict()
    pos, seg = np.array(reports["pos"]), np.array(reports["seg"])
    assert (pos >= 0).all() and (pos < 100 * SEGMENT_FEET).all()
    assert (seg == pos // SEGMENT_FEET).all()
    assert set(reports["lane"]) == {0, 1, 2, 3, 4}
    assert set(reports["dir"]) == {0, 1} and set(reports["xway"]) == {0, 1}
    assert set(reports["qid"]) == {-1}
    assert min(reports["speed"]) >= 0 and max(reports["speed"]) <= 100


def test_each_car_reports_every_30_s_from_entry_ramp_to_exit_ramp(table):
    reports = table.filter(pa.compute.equal(table.column("type"), 0)).to_pylist()
    cars: dict[int, list[dict]] = defaultdict(list)
    for r in reports:
        cars[r["vid"]].append(r)
    exited = 0
    for rows in cars.values():
        assert rows[0]["lane"] == 0
        assert all(b["time"] - a["time"] == 30 for a, b in itertools.pairwise(rows))
        assert len({(r["xway"], r["dir"]) for r in rows}) == 1
        lanes = [r["lane"] for r in rows]
        assert 4 not in lanes[:-1]
        exited += lanes[-1] == 4
        sign = 1 - 2 * rows[0]["dir"]
        steps = [sign * (b["pos"] - a["pos"]) for a, b in itertools.pairwise(rows)]
        assert min(steps, default=0) >= 0  # never backwards
    assert exited > 100  # short trips end within the 15 minutes


def test_balance_queries_follow_reports_of_the_same_car(table):
    rows = table.to_pylist()
    queries = [r for r in rows if r["type"] == 2]
    assert 0 < len(queries) < len(rows) * 0.05
    assert sorted(q["qid"] for q in queries) == list(range(len(queries)))
    reported = {(r["time"], r["vid"]) for r in rows if r["type"] == 0}
    assert all((q["time"], q["vid"]) in reported for q in queries)


def test_accidents_are_two_cars_stopped_at_one_position(table):
    expected = validate(table.to_pylist())
    assert len(expected.accidents) >= 2
    reports = [r for r in table.to_pylist() if r["type"] == 0]
    for a in expected.accidents:
        at = [
            r for r in reports if (r["xway"], r["dir"], r["pos"]) == (a["xway"], a["dir"], a["pos"])
        ]
        stopped = {vid for vid in {r["vid"] for r in at} if sum(r["vid"] == vid for r in at) >= 4}
        assert len(stopped) >= 2


def test_write_parquet_and_jsonl_hold_the_same_rows(tmp_path, table):
    config = GeneratorConfig(**{**SMALL.__dict__, "duration": 300})
    summary = write(config, tmp_path)
    from_parquet = pq.read_table(tmp_path / "input.parquet").to_pylist()
    with (tmp_path / "input.jsonl").open() as f:
        from_jsonl = [json.loads(line) for line in f]
    assert from_parquet == from_jsonl
    assert summary["position_reports"] + summary["balance_queries"] == len(from_jsonl)
    with pytest.raises(ValueError, match="formats"):
        write(config, tmp_path, ("csv",))


def test_config_rejects_nonsense():
    with pytest.raises(ValueError):
        GeneratorConfig(scale=0)
    with pytest.raises(ValueError):
        GeneratorConfig(stopped_reports=(3, 4))


def test_cli_generate_and_expected(tmp_path):
    runner = CliRunner()
    args = ["linear-road", "generate", "--scale", "1", "--duration", "240", "--seed", "5"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "in")])
    assert result.exit_code == 0, result.output
    assert "position reports" in result.output
    again = runner.invoke(app, [*args, "--out", str(tmp_path / "again"), "--format", "parquet"])
    assert again.exit_code == 0
    assert pq.read_table(tmp_path / "in" / "input.parquet").equals(
        pq.read_table(tmp_path / "again" / "input.parquet")
    )
    result = runner.invoke(
        app,
        [
            "linear-road",
            "expected",
            str(tmp_path / "in" / "input.jsonl"),
            "--out",
            str(tmp_path / "exp"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "exp" / "tolls.jsonl").stat().st_size > 0
    bad = runner.invoke(
        app, ["linear-road", "generate", "--scale", "0", "--out", str(tmp_path / "x")]
    )
    assert bad.exit_code == 2
