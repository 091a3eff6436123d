"""Read a pipeline file and its data files for the reference evaluator (DESIGN §3).

Independent of cq_service.spec and cq_service.io: YAML via yaml.safe_load, data via csv, json
and pyarrow.parquet. A record that does not fit its schema is skipped (the engine
dead-letters it); it still counts as a position for arrival-order timestamps.

Conventions for CSV (a header row is required): an empty field is NULL except in a string
column, where it is the empty string; bools are true/false/t/f/1/0 in any case.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["PipelineInputs", "read_pipeline", "read_qos"]

PipelineInputs = tuple[
    str,  # time_unit
    dict[str, tuple[list[tuple[str, str]], list[tuple[int, tuple]]]],  # streams
    dict[str, tuple[list[tuple[str, str]], list[tuple[int, str, tuple]]]],  # relations
    list[tuple[str, str, bool]],  # queries (name, cql, has_sink)
    dict[str, int],  # max_delay per source
]


class BadRecord(ValueError):
    pass


def _convert(value: Any, typ: str, from_text: bool) -> Any:
    if value is None:
        return None
    if from_text:
        if value == "" and typ != "string":
            return None
        if typ in ("int", "timestamp"):
            try:
                return int(value)
            except ValueError:
                raise BadRecord(value) from None
        if typ == "float":
            try:
                return float(value)
            except ValueError:
                raise BadRecord(value) from None
        if typ == "bool":
            low = value.strip().lower()
            if low in ("true", "t", "1"):
                return True
            if low in ("false", "f", "0"):
                return False
            raise BadRecord(value)
        return value
    if typ in ("int", "timestamp"):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise BadRecord(value)
    if typ == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise BadRecord(value)
    if typ == "bool":
        if isinstance(value, bool):
            return value
        raise BadRecord(value)
    if isinstance(value, str):
        return value
    raise BadRecord(value)


def _records(source: dict, base: Path) -> tuple[list[dict], bool]:
    """(records as dicts, whether values are text) of a file source."""
    source = {**source, **(source.get("options") or {})}
    if source.get("type", "file") != "file":
        raise NotImplementedError(f"source type {source.get('type')}")
    path = base / source["path"]
    fmt = source.get("format") or path.suffix.lstrip(".")
    if fmt == "csv":
        if source.get("header", True) is False:
            raise NotImplementedError("CSV without a header row")
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, delimiter=source.get("delimiter", ","))
            return list(reader), True
    if fmt in ("jsonl", "json", "ndjson"):
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()], False
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist(), False
    raise NotImplementedError(f"format {fmt}")


def _read_source(spec: dict, base: Path, is_relation: bool):
    schema = [(str(k), str(v)) for k, v in spec["schema"].items()]
    records, text = _records(spec["source"], base)
    ts_field = spec.get("timestamp")
    out = []
    for pos, rec in enumerate(records):
        try:
            if ts_field is None:
                ts = pos
            else:
                ts = _convert(rec.get(ts_field), "timestamp", text)
                if ts is None:
                    raise BadRecord("no timestamp")
            row = tuple(_convert(rec.get(col), typ, text) for col, typ in schema)
            if is_relation:
                op = rec.get("_op") or "+"
                if op not in ("+", "-"):
                    raise BadRecord(op)
                out.append((ts, op, row))
            else:
                out.append((ts, row))
        except BadRecord:
            continue
    return schema, out


def _delay(spec: dict) -> int:
    value = spec.get("max_delay", 0) or 0
    if not isinstance(value, int):
        raise NotImplementedError(f"max_delay {value!r} (only an integer in time_unit)")
    return value


def read_pipeline(path: str | Path) -> PipelineInputs:
    """The time unit, stream and relation data, queries and max_delays of a pipeline file."""
    path = Path(path)
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    base = path.parent
    streams = {}
    relations = {}
    delays = {}
    for name, spec in (doc.get("streams") or {}).items():
        streams[name] = _read_source(spec, base, is_relation=False)
        delays[name] = _delay(spec)
    for name, spec in (doc.get("relations") or {}).items():
        relations[name] = _read_source(spec, base, is_relation=True)
        delays[name] = _delay(spec)
    queries = [
        (name, spec["cql"], spec.get("sink") is not None)
        for name, spec in (doc.get("queries") or {}).items()
    ]
    return doc.get("time_unit", "ms"), streams, relations, queries, delays


def read_qos(path: str | Path) -> dict[str, tuple[tuple[str | None, ...], int | None]]:
    """Per query with `qos`: (the FROM items its window ranges name, None for a range over
    every window; the finest granularity rung or None). Ranges and rungs must be integers in
    time_unit here."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    out = {}
    for name, spec in (doc.get("queries") or {}).items():
        qos = spec.get("qos") if isinstance(spec, dict) else None
        if not qos:
            continue
        window = qos.get("window")
        if window is None:
            windows: tuple[str | None, ...] = ()
        elif isinstance(window, list):
            windows = (None,)
        else:
            windows = tuple(window)
        ladder = qos.get("granularity")
        if ladder is not None and not all(isinstance(g, int) for g in ladder):
            raise NotImplementedError(f"granularity {ladder!r} (only integers in time_unit)")
        out[name] = (windows, ladder[0] if ladder else None)
    return out
