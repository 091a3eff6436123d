"""Pruning never changes a result: random pipelines of the property suite run twice, once as
they are and once with every unused column of every stream source replaced by NULLs (whatever
the source's format), and their outputs must be identical."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

import cq_service.runner as runner
from cq_service.compiler import load_and_compile
from cq_service.io import open_source
from cq_service.io.base import RawChunk
from tests.property import strategies as strat
from tests.property.harness import batch_rows_for, read_sink, write_pipeline
from tests.unit.io.conftest import make_stream

EXAMPLES = int(os.environ.get("CQ_PRUNING_EXAMPLES", "12"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class _Nulled:
    """A reader whose columns outside `used` are all NULL."""

    def __init__(self, reader, used):
        self._reader = reader
        self._keep = [f.name in used for f in reader.stream.schema]

    def read(self):
        chunk = self._reader.read()
        if chunk is None:
            return None
        cols = tuple(c if k else pa.nulls(len(c), c.type) for c, k in zip(chunk.columns, self._keep))
        return RawChunk(cols, chunk.ts, chunk.ops, chunk.record, chunk.dead)

    def __getattr__(self, name):
        return getattr(self._reader, name)


def _outputs(path: Path, out: Path, batch_rows: int, nulled: bool, monkeypatch) -> dict:
    compiled = load_and_compile(path)

    def opener(stream, time_unit, rows, columns=None):
        reader = open_source(stream, time_unit, rows)
        return reader if columns is None or not nulled else _Nulled(reader, set(columns))

    monkeypatch.setattr(runner, "open_source", opener)
    runner.run_pipeline(compiled, batch_rows=batch_rows)
    results = {}
    for s in compiled.plan.sinks:
        els, cols, problem = read_sink(Path(s.sink.path), None)
        results[s.query] = (sorted(els, key=repr), cols, problem)
        Path(s.sink.path).rename(out / f"{s.query}.{'nulled' if nulled else 'full'}.jsonl")
    return results


def check(case: strat.Case) -> None:
    with tempfile.TemporaryDirectory(prefix="cq-prune-") as d, pytest.MonkeyPatch.context() as mp:
        path = write_pipeline(Path(d), case.pipeline, case.data)
        rows = batch_rows_for(case.data)
        keep = Path(d) / "kept"
        keep.mkdir()
        full = _outputs(path, keep, rows, False, mp)
        pruned = _outputs(path, keep, rows, True, mp)
        assert pruned == full, path.read_text()


FAMILIES = [
    strat.window_queries,
    strat.join_queries,
    strat.aggregate_queries,
    strat.setop_queries,
    strat.subquery_queries,
    strat.correlated_aggregate_queries,
    strat.r2s_queries,
    strat.view_pipelines,
    strat.mixed_queries,
]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_unused_columns_do_not_change_results(family) -> None:
    SETTINGS(given(strat.cases(family))(check))()


def test_nulled_reader_really_nulls(tmp_path) -> None:
    data = tmp_path / "s.jsonl"
    data.write_text('{"ts": 1, "a": 1, "b": 2}\n', encoding="utf-8")
    reader = open_source(make_stream(data, {"a": "int", "b": "int"}), "ms")
    chunk = _Nulled(reader, {"a"}).read()
    assert [c.to_pylist() for c in chunk.columns] == [[1], [None]]
