"""The NEXMark generator: the benchmark's proportions, valid references, determinism, files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cq_service.io.nexmark import KINDS, SCHEMAS, generate, write


def whole(events: int, **kw) -> dict[str, pa.Table]:
    parts = list(generate(events, **kw))
    return {k: pa.concat_tables([p.table(k) for p in parts]) for k in KINDS}


def test_proportions_are_one_three_forty_six():
    t = whole(5_000, chunk=1_000)
    assert (t["person"].num_rows, t["auction"].num_rows, t["bid"].num_rows) == (100, 300, 4_600)


def test_ids_count_up_and_references_point_at_existing_entities():
    t = whole(20_000, chunk=3_000)
    persons = t["person"].column("id").to_numpy()
    auctions = t["auction"].column("id").to_numpy()
    assert (np.diff(persons) == 1).all() and persons[0] == 1000
    assert (np.diff(auctions) == 1).all() and auctions[0] == 1000
    bid_time = t["bid"].column("dateTime").to_numpy()
    for col, ids, times in (
        ("auction", auctions, t["auction"].column("dateTime").to_numpy()),
        ("bidder", persons, t["person"].column("dateTime").to_numpy()),
    ):
        refs = t["bid"].column(col).to_numpy()
        pos = np.searchsorted(ids, refs)
        assert (ids[pos] == refs).all(), f"a bid's {col} does not exist"
        assert (times[pos] <= bid_time).all(), f"a bid's {col} comes from the future"
    sellers = t["auction"].column("seller").to_numpy()
    assert np.isin(sellers, persons).all()


def test_values_are_in_the_benchmarks_ranges():
    t = whole(10_000)
    price = t["bid"].column("price").to_numpy()
    assert price.min() >= 100 and price.max() <= 100_000_000
    a = t["auction"]
    assert (a.column("reserve").to_numpy() >= a.column("initialBid").to_numpy()).all()
    assert (a.column("expires").to_numpy() > a.column("dateTime").to_numpy()).all()
    assert set(a.column("category").to_pylist()) <= set(range(10, 15))
    hot = np.bincount(t["bid"].column("auction").to_numpy()).max()
    assert hot > t["bid"].num_rows / 100  # hot auctions draw many bids


def test_event_time_advances_at_the_rate():
    t = whole(10_000, rate=1_000.0)  # one event per millisecond
    times = np.sort(np.concatenate([t[k].column("dateTime").to_numpy() for k in KINDS]))
    assert times[-1] - times[0] == 9_999
    assert (np.diff(times) >= 0).all()


def test_same_seed_same_events_other_seed_other_events():
    a, b, c = whole(3_000, seed=7), whole(3_000, seed=7), whole(3_000, seed=8)
    assert all(a[k].equals(b[k]) for k in KINDS)
    assert not a["bid"].equals(c["bid"])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_write_every_format_with_the_documented_columns(tmp_path: Path, fmt: str):
    paths = write(tmp_path, 1_000, fmt=fmt, chunk=300)
    for kind, path in paths.items():
        if fmt == "parquet":
            names, rows = pq.read_table(path).column_names, pq.read_table(path).num_rows
        elif fmt == "csv":
            lines = path.read_text().splitlines()
            names, rows = [n.strip('"') for n in lines[0].split(",")], len(lines) - 1
        else:
            lines = path.read_text().splitlines()
            names, rows = list(json.loads(lines[0])), len(lines)
        assert names == list(SCHEMAS[kind])
        assert rows == {"person": 20, "auction": 60, "bid": 920}[kind]


def test_cli_generate(tmp_path: Path):
    cq = Path(sys.executable).with_name("cq")
    r = subprocess.run(
        [str(cq), "nexmark", "generate", "--out", str(tmp_path), "--events", "500", "--format", "csv"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "bid.csv").read_text().count("\n") == 461
    bad = subprocess.run(
        [str(cq), "nexmark", "generate", "--out", str(tmp_path), "--format", "xml"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2
