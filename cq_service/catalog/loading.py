"""Changes to stored relations from files and the command line, checked before they are stored.

A record is a mapping with a timestamp field (``ts`` by default), an optional ``_op`` (``+``
insert, the default, or ``-`` delete) and the row's columns. When the relation's schema is
known (a deployed pipeline declared it), values are converted exactly as a file source converts
them (``"42"`` is an int 42, ISO text is a timestamp in `time_unit`, …) and a column the schema
does not have is an error; otherwise rows are stored as given.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cq_service.catalog.exceptions import CatalogInputError
from cq_service.io.records import OP_FIELD, RecordLayout
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType

__all__ = ["Change", "check_records", "read_records"]

Change = tuple[int, str, dict[str, Any]]  # (ts, op, row), as Catalog.insert_relation_rows takes
_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def read_records(path: Path, fmt: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every record of a csv (with a header row) or jsonl file.

    Raises `CatalogInputError` listing every line that cannot be read."""
    fmt = fmt or _FORMATS.get(path.suffix.lower())
    if fmt not in ("csv", "jsonl"):
        raise CatalogInputError(f"{path}: cannot tell the format; use --format csv or jsonl")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogInputError(
            f"{path}: cannot read: {getattr(e, 'strerror', None) or e}"
        ) from None
    return _csv_records(path, text) if fmt == "csv" else _jsonl_records(path, text)


def _csv_records(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    lines = text.splitlines()
    if not lines:
        raise CatalogInputError(f"{path}: empty file (a csv file needs a header row)")
    reader = csv.reader(lines)
    header = [h.strip() for h in next(reader)]
    records, errors = [], []
    for number, fields in enumerate(reader, start=2):
        if not fields:
            continue
        if len(fields) != len(header):
            errors.append(f"{path}:{number}: expected {len(header)} fields, found {len(fields)}")
            continue
        records.append((number, dict(zip(header, fields))))
    if errors:
        raise CatalogInputError("\n".join(errors))
    return records


def _jsonl_records(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    records, errors = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            errors.append(f"{path}:{number}: invalid JSON: {e}")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{path}:{number}: not a JSON object")
            continue
        records.append((number, obj))
    if errors:
        raise CatalogInputError("\n".join(errors))
    return records


def check_records(
    records: Sequence[tuple[int, Mapping[str, Any]]],
    schema: Mapping[str, str] | None,
    *,
    where: str,
    ts_field: str = "ts",
    time_unit: str = "ms",
) -> list[Change]:
    """The records as (ts, op, row) changes, or `CatalogInputError` listing every problem as
    ``WHERE:LINE: reason`` (nothing is half-loaded)."""
    fields = tuple(FieldSpec(c, DataType(t)) for c, t in (schema or {}).items())
    stream = StreamSpec("relation", fields, SourceSpec("catalog"), ts_field, is_relation=True)
    layout = RecordLayout(stream, time_unit, where)
    errors = _unknown_columns(records, schema, ts_field)
    names = list(layout.needed)
    values = {n: [r.get(n) for _, r in records] for n in names}
    lines = np.array([line for line, _ in records], dtype=np.int64)
    chunk = layout.assemble(
        values, len(records), lines, np.arange(len(records)), lambda i: json.dumps(records[i][1])
    )
    errors.extend((d.record, d.reason) for d in chunk.dead)
    if errors:
        raise CatalogInputError("\n".join(f"{where}:{line}: {why}" for line, why in sorted(errors)))
    kept = {int(line) for line in chunk.record}
    columns = [c.to_pylist() for c in chunk.columns]
    changes: list[Change] = []
    k = 0
    for line, record in records:
        if line not in kept:
            continue
        if schema is None:
            row = {c: v for c, v in record.items() if c not in (ts_field, OP_FIELD)}
        else:
            row = {f.name: columns[j][k] for j, f in enumerate(fields)}
        bad = [c for c, v in row.items() if isinstance(v, float) and not math.isfinite(v)]
        if bad:
            raise CatalogInputError(
                f"{where}:{line}: column {bad[0]!r}: {row[bad[0]]} cannot be stored "
                "(JSON has no NaN or infinity)"
            )
        changes.append((int(chunk.ts[k]), "-" if chunk.ops[k] < 0 else "+", row))
        k += 1
    return changes


def _unknown_columns(
    records: Sequence[tuple[int, Mapping[str, Any]]],
    schema: Mapping[str, str] | None,
    ts_field: str,
) -> list[tuple[int, str]]:
    if schema is None:
        return []
    known = set(schema) | {ts_field, OP_FIELD}
    errors = []
    for line, record in records:
        extra = [c for c in record if c not in known]
        if extra:
            errors.append(
                (
                    line,
                    f"unknown column(s) {', '.join(map(repr, extra))} "
                    f"(the relation has: {', '.join(schema)})",
                )
            )
    return errors
