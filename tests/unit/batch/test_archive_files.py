"""`cq archive` of file sources, on a real local Spark: the archive holds exactly what the
engine's readers give (rows, timestamps, record numbers), laid out by date and hour; runs are
incremental and idempotent; malformed records are dead-lettered and counted."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cq_service.io  # noqa: F401 - registers the readers
from cq_service.batch.archive import DEAD_LETTER_SCHEMA, archive_pipeline, dead_letter_dir
from cq_service.batch.layout import (
    ARCHIVE_COLUMNS,
    archive_boundary,
    archive_root,
    archive_schema,
    hour_of,
    read_stream,
    stream_dir,
)
from cq_service.catalog import Catalog
from cq_service.io.base import open_source
from cq_service.spec import load_pipeline
from cq_service.spec.model import PipelineSpec, StreamSpec

HOUR = 3_600_000
PIPELINE = """\
version: 1
name: files
time_unit: ms
streams:
  Trips:
    schema: {id: int, fare: float, city: string, paid: bool, ts: timestamp}
    timestamp: ts
    source: {type: file, path: data/trips.csv}
  Clicks:
    schema: {user: string, n: int}
    source: {type: file, path: data/clicks.jsonl}
  Rows:
    schema: {k: int, v: string}
    timestamp: t
    source: {type: file, path: data/rows.parquet}
  Gen:
    schema: {id: int}
    source: {type: generator, generator: nexmark, table: bid, events: 10}
archive: {path: history}
"""


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "trips.csv").write_text(
        "id,fare,city,paid,ts\n"
        f"1,9.5,Oslo,true,{HOUR - 1}\n"
        f"2,3.0,Rome,false,{HOUR}\n"
        "3,x,Rome,true,5\n"  # malformed: fare
        f"4,1.25,,yes,{5 * HOUR + 7}\n"
        "5,2,Oslo,true,\n"  # malformed: no timestamp
        f"6,,Oslo,no,2024-05-01T12:30:00Z\n"
    )
    (data / "clicks.jsonl").write_text(
        '{"user": "a", "n": 1}\n\n{"user": "b", "n": "many"}\n{"user": "c"}\nnot json\n'
    )
    pq.write_table(
        pa.table({"k": [1, 2, 3], "v": ["x", None, "z"], "t": [30, 10, 2 * HOUR]}),
        data / "rows.parquet",
    )
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    return path


@pytest.fixture
def catalog(tmp_path: Path):
    c = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    c.upgrade()
    yield c
    c.close()


def engine_view(spec: PipelineSpec, stream: StreamSpec) -> tuple[pa.Table, list]:
    """What the engine's reader gives: the elements as archived columns, and the dead records."""
    schema = archive_schema(stream)
    tables, dead = [], []
    with open_source(stream, spec.time_unit) as reader:
        for chunk in reader:
            dead.extend(chunk.dead)
            n = len(chunk)
            arrays = [*chunk.columns, pa.array(chunk.ts), pa.array(np.zeros(n, np.int32)),
                      pa.array(chunk.record)]
            tables.append(pa.Table.from_arrays(arrays, schema=schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.sort_by([(c, "ascending") for c in ARCHIVE_COLUMNS]), dead


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def test_the_archive_is_the_engines_view(spark, pipeline: Path, catalog: Catalog):
    spec = load_pipeline(pipeline)
    result = archive_pipeline(spec, catalog, spark=spark)
    root = archive_root(spec)
    assert root == pipeline.parent / "history"
    by_name = {r.stream: r for r in result.streams}
    assert by_name["Gen"].skipped and not (root / "Gen").exists()
    for name in ("Trips", "Clicks", "Rows"):
        stream = spec.streams[name]
        archived = read_stream(root, stream, spec.time_unit)
        expected, dead = engine_view(spec, stream)
        assert archived.schema == archive_schema(stream)
        assert archived.to_pylist() == expected.to_pylist(), name
        assert by_name[name].rows == archived.num_rows
        assert by_name[name].dead_letters == len(dead)
        # the dead letters, with their reasons and record numbers
        if not dead:
            assert not dead_letter_dir(root, name).exists()
            continue
        letters = pq.read_table(dead_letter_dir(root, name))
        assert letters.schema.remove_metadata() == DEAD_LETTER_SCHEMA
        assert sorted(letters.column("record").to_pylist()) == [d.record for d in dead]
        assert set(letters.column("reason").to_pylist()) == {d.reason for d in dead}
        assert letters.column("_offset").to_pylist() == letters.column("record").to_pylist()
    trips = read_stream(root, spec.streams["Trips"], "ms")
    assert trips.column("_offset").to_pylist() == [2, 3, 5, 7]  # line numbers, header is 1
    clicks = read_stream(root, spec.streams["Clicks"], "ms")
    assert clicks.column("_ts").to_pylist() == [0, 2]  # arrival order: record positions
    assert clicks.column("n").to_pylist() == [1, None]
    assert by_name["Clicks"].dead_letters == 2


def test_the_layout_by_date_and_hour(spark, pipeline: Path, catalog: Catalog):
    spec = load_pipeline(pipeline)
    archive_pipeline(spec, catalog, spark=spark, streams=["Trips"])
    folder = stream_dir(archive_root(spec), "Trips")
    hours = sorted(str(p.parent.relative_to(folder)) for p in folder.rglob("*.parquet"))
    assert hours == [
        "date=1970-01-01/hour=00",
        "date=1970-01-01/hour=01",
        "date=1970-01-01/hour=05",
        "date=2024-05-01/hour=12",
    ]
    for path in folder.rglob("*.parquet"):
        table = pq.read_table(path, partitioning=None)
        assert table.column_names == ["id", "fare", "city", "paid", "ts", *ARCHIVE_COLUMNS]
        assert [str(t) for t in table.schema.types] == [
            "int64", "double", "string", "bool", "int64", "int64", "int32", "int64"
        ]
        for ts in table.column("_ts").to_pylist():
            date, hour = hour_of(ts, "ms")
            assert path.parent.name == f"hour={hour}"
            assert path.parent.parent.name == f"date={date}"
    assert read_stream(archive_root(spec), spec.streams["Trips"], "ms", HOUR, 5 * HOUR + 7).column(
        "id"
    ).to_pylist() == [2, 4]
    assert archive_boundary(catalog, "files", "Trips") == 1714566600000  # the largest _ts


def test_the_to_override(spark, pipeline: Path, catalog: Catalog, tmp_path: Path):
    spec = load_pipeline(pipeline)
    result = archive_pipeline(spec, catalog, spark=spark, root=tmp_path / "elsewhere",
                              streams=["Rows"])
    assert result.root == tmp_path / "elsewhere"
    assert read_stream(tmp_path / "elsewhere", spec.streams["Rows"], "ms").column(
        "_ts"
    ).to_pylist() == [10, 30, 2 * HOUR]
    assert not (pipeline.parent / "history").exists()


def test_runs_are_incremental_and_idempotent(spark, pipeline: Path, catalog: Catalog):
    spec = load_pipeline(pipeline)
    root = archive_root(spec)
    first = archive_pipeline(spec, catalog, spark=spark, streams=["Trips", "Clicks"])
    files = files_of(root)
    # nothing new: nothing written, nothing committed
    again = archive_pipeline(spec, catalog, spark=spark, streams=["Trips", "Clicks"])
    assert all(r.run is None and not r.wrote for r in again.streams)
    assert files_of(root) == files
    assert catalog.archive_state("files", "Trips").run == 1
    # appended lines: only the new records are archived
    with open(pipeline.parent / "data" / "trips.csv", "a") as f:
        f.write(f"7,4.5,Oslo,true,{6 * HOUR}\n8,bad,Oslo,true,1\n")
    third = archive_pipeline(spec, catalog, spark=spark, streams=["Trips", "Clicks"])
    trips = next(r for r in third.streams if r.stream == "Trips")
    assert (trips.rows, trips.dead_letters, trips.run, trips.rewritten) == (1, 1, 2, False)
    assert trips.offsets == {0: (8, 9)}
    assert next(r for r in third.streams if r.stream == "Clicks").run is None
    archived = read_stream(root, spec.streams["Trips"], "ms")
    expected, _ = engine_view(spec, spec.streams["Trips"])
    assert archived.to_pylist() == expected.to_pylist()
    state = catalog.archive_state("files", "Trips")
    assert (state.rows, state.dead_letters, state.offsets) == (5, 3, {0: 9})
    assert first.streams[0].rows == 4


def test_a_rewritten_file_replaces_its_archive(spark, pipeline: Path, catalog: Catalog):
    spec = load_pipeline(pipeline)
    archive_pipeline(spec, catalog, spark=spark, streams=["Rows"])
    pq.write_table(pa.table({"k": [9], "v": ["new"], "t": [HOUR]}),
                   pipeline.parent / "data" / "rows.parquet")
    result = archive_pipeline(spec, catalog, spark=spark, streams=["Rows"])
    assert result.streams[0].rewritten and result.streams[0].run == 2
    archived = read_stream(archive_root(spec), spec.streams["Rows"], "ms")
    assert archived.to_pylist() == [{"k": 9, "v": "new", "_ts": HOUR, "_partition": 0,
                                     "_offset": 1}]
    assert catalog.archive_state("files", "Rows").boundary == HOUR


def test_a_crash_before_the_commit_duplicates_nothing(
    spark, pipeline: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
):
    spec = load_pipeline(pipeline)
    archive_pipeline(spec, catalog, spark=spark, streams=["Trips"])
    with open(pipeline.parent / "data" / "trips.csv", "a") as f:
        f.write(f"7,4.5,Oslo,true,{6 * HOUR}\n")

    def crash(state):
        raise RuntimeError("killed between the files and the offsets")

    monkeypatch.setattr(catalog, "save_archive_state", crash)
    with pytest.raises(RuntimeError, match="killed"):
        archive_pipeline(spec, catalog, spark=spark, streams=["Trips"])
    monkeypatch.undo()
    root = archive_root(spec)
    assert any("part-00000002" in f for f in files_of(root))  # the crashed run's files
    os.utime(pipeline.parent / "data" / "trips.csv")  # no matter: same content
    result = archive_pipeline(spec, catalog, spark=spark, streams=["Trips"])
    assert result.streams[0].run == 2
    archived = read_stream(root, spec.streams["Trips"], "ms")
    expected, _ = engine_view(spec, spec.streams["Trips"])
    assert archived.to_pylist() == expected.to_pylist()
    assert archived.num_rows == 5
