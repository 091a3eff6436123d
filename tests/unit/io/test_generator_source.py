"""The `generator` source: NEXMark events fed to a stream as `cq nexmark generate` writes them."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest

from cq_service.io import SourceError, open_source
from cq_service.io.generator import replay_time
from cq_service.io.nexmark import generate
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


def _stream(table: str, columns: dict[str, DataType], **options) -> StreamSpec:
    opts = {"generator": "nexmark", "table": table, "events": 5_000, "seed": 3, **options}
    return StreamSpec(
        name="S",
        schema=tuple(FieldSpec(n, t) for n, t in columns.items()),
        source=SourceSpec("generator", options=opts),
        timestamp="dateTime",
    )


def _read_all(stream: StreamSpec, batch_rows: int = 700) -> tuple[list[pa.Array], np.ndarray]:
    with open_source(stream, "ms", batch_rows) as reader:
        chunks = list(reader)
    assert all(len(c) <= batch_rows for c in chunks)
    cols = [pa.concat_arrays([c.columns[i] for c in chunks]) for i in range(len(stream.schema))]
    return cols, np.concatenate([c.ts for c in chunks])


def test_bids_are_the_generated_bids_in_the_schema_order() -> None:
    stream = _stream("bid", {"price": DataType.INT, "auction": DataType.INT})
    cols, ts = _read_all(stream)
    expected = pa.concat_tables(c.bid for c in generate(5_000, seed=3))
    assert cols[0].to_pylist() == expected["price"].to_pylist()
    assert cols[1].to_pylist() == expected["auction"].to_pylist()
    assert ts.tolist() == expected["dateTime"].to_pylist()
    assert len(ts) == 5_000 // 50 * 46


def test_a_column_the_generator_does_not_make_is_an_error() -> None:
    with pytest.raises(SourceError, match=r"nexmark bid has no column.*'seller'"):
        open_source(_stream("bid", {"seller": DataType.INT}), "ms")


def test_an_unknown_table_is_an_error() -> None:
    with pytest.raises(SourceError, match="no table 'bids'"):
        open_source(_stream("bids", {"auction": DataType.INT}), "ms")


def test_a_paced_replay_releases_events_no_earlier_than_their_time() -> None:
    # 2,000 events at 20,000 per second: about 0.1 s of replay.
    stream = _stream("bid", {"auction": DataType.INT}, events=2_000, pace=20_000.0, seed=11)
    released = []
    with open_source(stream, "ms", 4096) as reader:
        while (chunk := reader.read()) is not None:
            released.append((time.perf_counter(), chunk.ts.copy()))
    assert len(released) > 1, "a paced replay hands events over as they fall due"
    for wall, ts in released:
        assert wall >= replay_time(ts, 11, 10_000.0, 20_000.0).max() - 1e-6
    total = np.concatenate([ts for _, ts in released])
    assert len(total) == 2_000 // 50 * 46
