"""Source records -> typed `RawChunk`s: the conversion rules every source shares.

`RecordLayout` says which fields a stream needs from its records and turns parsed field values
into a chunk, converting each to its schema type and setting malformed records aside with a
reason; `JsonObjects` parses JSON objects into those values (jsonl files, Kafka). File, Kafka,
generator and catalog sources all build their chunks this way. Conversion runs on a fast path
first (vectorised casts); only a column that fails there is converted again value by value, to
find the malformed records and their reasons. The slow path accepts everything the fast path
accepts, with the same values.

Value conversion (every source; a string from a csv field or a JSON string is "text"):

- ``int``: integers, or integer-valued floats (``3.0``, ``1e3``); text also ``0x1F``.
- ``float``: numbers; text like ``1.5``, ``-2e-3``, ``NaN``, ``inf``, ``Infinity``.
- ``bool``: true/false; text ``true false t f 1 0 yes no`` in any case; JSON 0 and 1.
- ``string``: text only (a JSON number for a string column is malformed).
- ``timestamp`` (and the stream's `timestamp` field): an integer in `time_unit` as for ``int``,
  or ISO-8601 text (``2024-05-01``, ``2024-05-01T12:00:00.250Z``, ``… +02:00``; no offset means
  UTC), converted to `time_unit` since the Unix epoch, rounded down to a whole unit.
- Empty text is NULL for every type but ``string`` (where it is ``""``); so are a JSON null and
  a missing JSON key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pjson

from cq_service.io.base import DeadRecord, RawChunk, SourceError
from cq_service.spec.model import TIME_UNITS, StreamSpec
from cq_service.types import DataType, arrow_type

__all__ = ["NOT_UTF8", "OP_FIELD", "JsonObjects", "RecordLayout", "Values", "is_utf8"]

OP_FIELD = "_op"
NOT_UTF8 = "not valid UTF-8"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1)
_TYPE_NAMES = {
    DataType.INT: "an int",
    DataType.FLOAT: "a float",
    DataType.STRING: "a string",
    DataType.BOOL: "a bool",
    DataType.TIMESTAMP: "a timestamp",
    DataType.NULL: "null",
}
_TRUE = ("true", "t", "1", "yes")
_FALSE = ("false", "f", "0", "no")
_TRUE_SET = pa.array(_TRUE)
_FALSE_SET = pa.array(_FALSE)
_ARROW_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


# -- scalar conversion (the slow path) ------------------------------------------------------------


class _Bad(Exception):
    """A value that does not convert to its column's type."""


_INT_RE = re.compile(r"[+-]?\d+\Z")
_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]+\Z")
_ISO_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2})(?::?(\d{2})(?::?(\d{2})(?:[.,](\d{1,9}))?)?)?)?"
    r"\s*(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?\Z"
)


def _in_int64(v: int) -> int:
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise _Bad
    return v


def _text_float(s: str) -> float:
    if "_" in s:
        raise _Bad
    try:
        return float(s)
    except ValueError:
        raise _Bad from None


def _float_int(f: float) -> int:
    if not math.isfinite(f) or not f.is_integer():
        raise _Bad
    return _in_int64(int(f))


def _text_int(s: str) -> int:
    t = s.strip()
    if _INT_RE.match(t):
        return _in_int64(int(t))
    if _HEX_RE.match(t):
        return _in_int64(int(t, 16))
    return _float_int(_text_float(t))


def _text_bool(s: str) -> bool:
    t = s.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise _Bad


def _ns_to_unit(ns: int, unit_ns: int) -> int:
    return _in_int64(ns // unit_ns)


def _datetime_ns(dt: datetime) -> int:
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _iso_ns(s: str) -> int:
    m = _ISO_RE.match(s)
    if m is None:
        raise _Bad
    y, mo, d, hh, mi, ss, frac, _z, sign, oh, om = m.groups()
    try:
        dt = datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0))
    except ValueError:
        raise _Bad from None
    ns = _datetime_ns(dt) + (int(frac.ljust(9, "0")) if frac else 0)
    if sign:
        offset = timedelta(hours=int(oh), minutes=int(om or 0))
        ns -= (-1 if sign == "-" else 1) * int(offset.total_seconds()) * 1_000_000_000
    return ns


def _text_ts(s: str, unit_ns: int) -> int:
    t = s.strip()
    try:
        return _text_int(t)
    except _Bad:
        return _ns_to_unit(_iso_ns(t), unit_ns)


def _value(v: Any, dtype: DataType, unit_ns: int) -> Any:
    """`v` (a Python value read from a file) as a value of `dtype`; raises `_Bad`."""
    if v is None:
        return None
    if dtype is DataType.STRING:
        if isinstance(v, str):
            return v
        raise _Bad
    if dtype is DataType.NULL:
        raise _Bad
    if isinstance(v, str):
        if v == "":
            return None
        if dtype is DataType.INT:
            return _text_int(v)
        if dtype is DataType.FLOAT:
            return _text_float(v.strip())
        if dtype is DataType.BOOL:
            return _text_bool(v)
        return _text_ts(v, unit_ns)
    if isinstance(v, bool):
        if dtype is DataType.BOOL:
            return v
        raise _Bad
    if isinstance(v, int | float | Decimal):
        if dtype is DataType.FLOAT:
            return float(v)
        if dtype is DataType.BOOL:
            if v in (0, 1) and not isinstance(v, float):
                return bool(v)
            raise _Bad
        return _in_int64(v) if isinstance(v, int) else _float_int(float(v))
    if dtype is DataType.TIMESTAMP:
        if isinstance(v, datetime):
            return _ns_to_unit(_datetime_ns(v), unit_ns)
        if isinstance(v, date):
            return _ns_to_unit(_datetime_ns(datetime(v.year, v.month, v.day)), unit_ns)
    raise _Bad


# -- column conversion (fast path, with the slow path as fallback) --------------------------------


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous, non-dictionary array; large/view strings become plain strings."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            arr = arr.chunk(0)
        elif arr.num_chunks == 0:
            arr = pa.array([], type=arr.type)
        else:
            arr = pa.concat_arrays(arr.chunks)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.string())
    return arr


def _with_nulls(values: np.ndarray, nulls: np.ndarray | None, type_: pa.DataType) -> pa.Array:
    return pa.array(values, type=type_, mask=nulls if nulls is not None and nulls.any() else None)


def _null_mask(arr: pa.Array) -> np.ndarray | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _rescale_ns(ns: pa.Array, unit_ns: int, from_ns: int = 1) -> pa.Array | None:
    """Integer timestamps in units of `from_ns` nanoseconds, in units of `unit_ns` (floor)."""
    if from_ns == unit_ns:
        return ns
    nulls = _null_mask(ns)
    vals = ns.fill_null(0).to_numpy()
    if from_ns > unit_ns:
        k = from_ns // unit_ns
        if len(vals) and int(np.abs(vals).max()) > _INT64_MAX // k:
            return None
        return _with_nulls(vals * k, nulls, pa.int64())
    return _with_nulls(np.floor_divide(vals, unit_ns // from_ns), nulls, pa.int64())


def _text_to_ts(arr: pa.Array, unit_ns: int) -> pa.Array | None:
    try:
        return arr.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    for tz in (None, "UTC"):
        try:
            ns = arr.cast(pa.timestamp("ns", tz)).cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        return _rescale_ns(ns, unit_ns)
    return None


def _text_to_bool(arr: pa.Array) -> pa.Array | None:
    lower = pc.utf8_lower(arr)
    is_true = pc.is_in(lower, value_set=_TRUE_SET)
    is_false = pc.is_in(lower, value_set=_FALSE_SET)
    ok = pc.or_(pc.or_(is_true, is_false), pc.is_null(arr))
    if not pc.all(ok).as_py():
        return None
    return pc.if_else(is_true, True, pc.if_else(is_false, False, pa.scalar(None, pa.bool_())))


def _fast(arr: pa.Array, dtype: DataType, unit_ns: int) -> pa.Array | None:
    """`arr` converted to `dtype` with vectorised kernels, or None if any value resists."""
    t = arr.type
    target = arrow_type(dtype)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), target)
    if dtype is DataType.NULL:
        return None
    try:
        if pa.types.is_string(t):
            if dtype is DataType.STRING:
                return arr
            empty = pc.equal(arr, "")
            if pc.any(empty).as_py():
                arr = pc.if_else(empty, pa.scalar(None, pa.string()), arr)
            if dtype is DataType.INT:
                return arr.cast(pa.int64())
            if dtype is DataType.FLOAT:
                return arr.cast(pa.float64())
            if dtype is DataType.BOOL:
                return _text_to_bool(arr)
            return _text_to_ts(arr, unit_ns)
        if dtype is DataType.STRING:
            return None
        if pa.types.is_boolean(t):
            return arr if dtype is DataType.BOOL else None
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            if dtype is DataType.BOOL:
                return None
            return arr.cast(target)
        if pa.types.is_timestamp(t) and dtype is DataType.TIMESTAMP:
            return _rescale_ns(arr.cast(pa.int64()), unit_ns, _ARROW_UNIT_NS[t.unit])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return None


Values = pa.Array | pa.ChunkedArray | Sequence[Any] | None


def _convert(
    values: Values, n: int, dtype: DataType, unit_ns: int
) -> tuple[pa.Array, dict[int, Any]]:
    """A column of `dtype` (NULL where a value is bad), and {row: offending value}."""
    target = arrow_type(dtype)
    if values is None:
        return pa.nulls(n, target), {}
    if isinstance(values, pa.Array | pa.ChunkedArray):
        arr = _plain(values)
        fast = _fast(arr, dtype, unit_ns)
        if fast is not None:
            return fast, {}
        values = arr.to_pylist()
    out: list[Any] = []
    bad: dict[int, Any] = {}
    for i, v in enumerate(values):
        try:
            out.append(_value(v, dtype, unit_ns))
        except _Bad:
            out.append(None)
            bad[i] = v
    return pa.array(out, type=target), bad


def _convert_ops(values: Values, n: int) -> tuple[np.ndarray, dict[int, Any]]:
    """Relation operations: ``+``, empty or missing is +1, ``-`` is -1."""
    ops = np.ones(n, dtype=np.int8)
    if values is None:
        return ops, {}
    if isinstance(values, pa.Array | pa.ChunkedArray):
        arr = _plain(values)
        if pa.types.is_string(arr.type):
            filled = arr.fill_null("+")
            minus = pc.equal(filled, "-")
            plus = pc.is_in(filled, value_set=pa.array(["+", ""]))
            if pc.all(pc.or_(plus, minus)).as_py():
                ops[np.asarray(minus.to_numpy(zero_copy_only=False), dtype=bool)] = -1
                return ops, {}
        values = arr.to_pylist()
    bad: dict[int, Any] = {}
    for i, v in enumerate(values):
        if v == "-":
            ops[i] = -1
        elif v not in (None, "", "+"):
            bad[i] = v
    return ops, bad


def _show(v: Any) -> str:
    """A value as it appears in a reason: strings quoted, other values as JSON."""
    if isinstance(v, str):
        s = repr(v)
    else:
        try:
            s = json.dumps(v)
        except (TypeError, ValueError):
            s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


# -- assembling chunks ----------------------------------------------------------------------------


class RecordLayout:
    """What a stream needs from its source records, and how records become a `RawChunk`."""

    def __init__(self, stream: StreamSpec, time_unit: str, path: str):
        if time_unit not in TIME_UNITS:
            raise SourceError(f"{stream.name}: unknown time unit {time_unit!r}", stream.span)
        self.stream = stream
        self.name = stream.name
        self.path = path
        self.unit_ns = TIME_UNITS[time_unit]
        self.ts_field = stream.timestamp
        self.has_op = stream.is_relation
        needed = [f.name for f in stream.schema]
        if self.ts_field is not None:
            needed.append(self.ts_field)
        self.required = tuple(dict.fromkeys(needed))  # every record must be able to carry these
        self.needed = self.required + (
            (OP_FIELD,) if self.has_op and OP_FIELD not in needed else ()
        )

    def unread(
        self, used: frozenset[str] | None, file_types: Mapping[str, pa.DataType]
    ) -> frozenset[str]:
        """The schema columns that need not be read: not in `used` (None: all are used), not
        the timestamp field, and stored (`file_types`) exactly as their Arrow type, so no value
        of theirs could fail to convert and make a record malformed. They become NULLs."""
        if used is None:
            return frozenset()
        return frozenset(
            f.name
            for f in self.stream.schema
            if f.name not in used
            and f.name != self.ts_field
            and f.name in file_types
            and file_types[f.name] == arrow_type(f.type)
        )

    def field_type(self, name: str) -> DataType:
        """The type a source field is read as (the timestamp field: timestamp, unless listed)."""
        for f in self.stream.schema:
            if f.name == name:
                return f.type
        return DataType.STRING if name == OP_FIELD else DataType.TIMESTAMP

    def assemble(
        self,
        values: Mapping[str, Values],
        n: int,
        records: np.ndarray,
        positions: np.ndarray,
        raw: Callable[[int], str],
        parse_dead: Sequence[tuple[int, str, str]] = (),
    ) -> RawChunk:
        """A chunk from `n` parsed records (`values` by field name) plus records that did not
        parse at all (`parse_dead`: record number, reason, raw text)."""
        reasons: dict[int, str] = {}
        ts_col: pa.Array | None = None
        if self.ts_field is not None:
            ts_col, bad = _convert(values.get(self.ts_field), n, DataType.TIMESTAMP, self.unit_ns)
            for i, v in bad.items():
                reasons[i] = f"timestamp {self.ts_field!r}: {_show(v)} is not a timestamp"
            nulls = _null_mask(ts_col)
            if nulls is not None:
                for i in np.flatnonzero(nulls).tolist():
                    reasons.setdefault(i, f"timestamp {self.ts_field!r} is missing")
            filled = ts_col if ts_col.null_count == 0 else ts_col.fill_null(0)
            ts = filled.to_numpy().astype(np.int64, copy=False)
        else:
            ts = positions.astype(np.int64, copy=True)
        if self.has_op:
            ops, bad = _convert_ops(values.get(OP_FIELD), n)
            for i, v in bad.items():
                reasons.setdefault(i, f"_op: {_show(v)} is not '+' or '-'")
        else:
            ops = np.ones(n, dtype=np.int8)
        columns = []
        for f in self.stream.schema:
            if f.name == self.ts_field and f.type is DataType.TIMESTAMP and ts_col is not None:
                columns.append(ts_col)
                continue
            col, bad = _convert(values.get(f.name), n, f.type, self.unit_ns)
            for i, v in bad.items():
                reasons.setdefault(i, f"column {f.name!r}: {_show(v)} is not {_TYPE_NAMES[f.type]}")
            columns.append(col)
        dead = [(int(records[i]), reason, raw(i)) for i, reason in reasons.items()]
        if reasons:
            keep = np.ones(n, dtype=bool)
            keep[list(reasons)] = False
            idx = pa.array(np.flatnonzero(keep))
            columns = [c.take(idx) for c in columns]
            ts, ops, records = ts[keep], ops[keep], records[keep]
        if parse_dead:
            dead.extend(parse_dead)
        dead.sort(key=lambda d: d[0])
        return RawChunk(
            tuple(columns),
            np.ascontiguousarray(ts, dtype=np.int64),
            ops,
            np.asarray(records, dtype=np.int64),
            [DeadRecord(self.name, self.path, rec, reason, text) for rec, reason, text in dead],
        )


# -- JSON objects ---------------------------------------------------------------------------------


def is_utf8(data: bytes) -> bool:
    """Whether `data` is valid UTF-8 (checked without decoding it in Python)."""
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    text = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


class JsonObjects:
    """JSON objects -> the values of a layout's fields (jsonl files and Kafka share it).

    `fast` parses many objects at once with pyarrow's JSON reader and the schema types;
    `slow` parses them one by one and says which are malformed and why. Both take missing keys
    and nulls as NULL and ignore keys the layout does not need."""

    def __init__(self, layout: RecordLayout):
        self.needed = layout.needed
        typed = {n: arrow_type(layout.field_type(n)) for n in layout.needed}
        as_text = {
            n: (pa.string() if layout.field_type(n) is DataType.TIMESTAMP else t)
            for n, t in typed.items()
        }
        # Timestamps come as integers or as ISO strings: try both before the slow path.
        self._schemas = [pa.schema(list(typed.items()))]
        if as_text != typed:
            self._schemas.append(pa.schema(list(as_text.items())))
        self._first_schema = 0

    def fast(self, data: bytes, n: int) -> dict[str, Values] | None:
        """The values of `n` objects, one per newline-terminated line of `data`, or None if
        any line is not a well-formed object of the schema types (then use `slow`)."""
        if not n:
            return {}
        if not is_utf8(data):
            return None
        order = self._schemas[self._first_schema :] + self._schemas[: self._first_schema]
        for schema in order:
            try:
                table = pjson.read_json(
                    pa.BufferReader(data),
                    read_options=pjson.ReadOptions(block_size=max(len(data) // 2 + 1, 1 << 20)),
                    parse_options=pjson.ParseOptions(
                        explicit_schema=schema, unexpected_field_behavior="ignore"
                    ),
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            if table.num_rows != n:
                return None  # whitespace-only lines, or several objects on one line
            self._first_schema = self._schemas.index(schema)
            return {name: table.column(name) for name in schema.names}
        return None

    def slow(
        self, texts: Sequence[bytes]
    ) -> tuple[dict[str, Values], np.ndarray, list[tuple[int, str]]]:
        """The values of the well-formed objects among `texts`, their indices, and
        (index, reason) of the others."""
        values: dict[str, list[Any]] = {c: [] for c in self.needed}
        rows: list[int] = []
        bad: list[tuple[int, str]] = []
        for k, text in enumerate(texts):
            try:
                obj = json.loads(text)
            except UnicodeDecodeError:
                bad.append((k, NOT_UTF8))
                continue
            except json.JSONDecodeError as e:
                bad.append((k, f"invalid JSON: {e.msg} at column {e.colno}"))
                continue
            except (ValueError, RecursionError) as e:
                bad.append((k, f"invalid JSON: {e}"))
                continue
            if not isinstance(obj, dict):
                bad.append((k, f"not a JSON object: {type(obj).__name__}"))
                continue
            rows.append(k)
            for c, col in values.items():
                col.append(obj.get(c))
        return dict(values), np.array(rows, dtype=np.int64), bad
