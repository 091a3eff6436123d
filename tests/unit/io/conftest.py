"""Factory fixtures for io tests: write a data file, describe a stream over it, read it all."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cq_service.io import DeadRecord, RawChunk, open_source
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


@dataclass
class ReadResult:
    """Everything a source produced, chunks concatenated."""

    chunks: list[RawChunk]
    rows: list[tuple] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)
    ops: list[int] = field(default_factory=list)
    records: list[int] = field(default_factory=list)
    dead: list[DeadRecord] = field(default_factory=list)

    @property
    def reasons(self) -> list[tuple[int, str]]:
        return [(d.record, d.reason) for d in self.dead]


def collect(chunks: list[RawChunk]) -> ReadResult:
    out = ReadResult(chunks)
    for c in chunks:
        assert c.ts.dtype == np.int64 and c.ops.dtype == np.int8 and c.record.dtype == np.int64
        assert len(c.ops) == len(c.record) == len(c)
        assert all(len(col) == len(c) for col in c.columns)
        cols = [col.to_pylist() for col in c.columns]
        out.rows.extend(zip(*cols) if cols else [()] * len(c))
        out.ts.extend(c.ts.tolist())
        out.ops.extend(c.ops.tolist())
        out.records.extend(c.record.tolist())
        out.dead.extend(c.dead)
    return out


def make_stream(
    path: Path,
    schema: Mapping[str, str],
    *,
    timestamp: str | None = "ts",
    relation: bool = False,
    fmt: str | None = None,
    options: Mapping[str, Any] | None = None,
    name: str = "S",
) -> StreamSpec:
    fields = tuple(FieldSpec(n, DataType(t)) for n, t in schema.items())
    fmt = fmt or path.suffix.lstrip(".")
    source = SourceSpec("file", str(path), fmt, dict(options or {}))
    return StreamSpec(name, fields, source, timestamp=timestamp, is_relation=relation)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """Write a data file into tmp_path; returns its path."""

    def _write(name: str, content: str | bytes) -> Path:
        p = tmp_path / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        return p

    return _write


@pytest.fixture
def read() -> Callable[..., ReadResult]:
    """Read a whole source: read(path, schema, time_unit="ms", batch_rows=65536, **stream)."""

    def _read(
        path: Path,
        schema: Mapping[str, str],
        *,
        time_unit: str = "ms",
        batch_rows: int = 65536,
        **kwargs: Any,
    ) -> ReadResult:
        stream = make_stream(path, schema, **kwargs)
        with open_source(stream, time_unit, batch_rows) as reader:
            chunks = list(reader)
            assert reader.read() is None  # stays exhausted
        return collect(chunks)

    return _read


@pytest.fixture
def stream() -> Callable[..., StreamSpec]:
    """A StreamSpec over a data file: stream(path, schema, timestamp="ts", relation=False, …)."""
    return make_stream
