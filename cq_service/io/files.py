"""File sources: csv, jsonl and parquet, read in chunks of at most `batch_rows` records.

Each chunk is parsed on a fast path first (pyarrow's csv/json readers, then vectorised casts to
the schema types); only a block or column that fails there is parsed again value by value, to
find the malformed records and their reasons. The slow path accepts everything the fast path
accepts, with the same values, so results never depend on where a chunk boundary falls.

Value conversion (all formats; a string from a csv field or a JSON string is "text"):

- ``int``: integers, or integer-valued floats (``3.0``, ``1e3``); text also ``0x1F``.
- ``float``: numbers; text like ``1.5``, ``-2e-3``, ``NaN``, ``inf``, ``Infinity``.
- ``bool``: true/false; text ``true false t f 1 0 yes no`` in any case; JSON 0 and 1.
- ``string``: text only (a JSON number for a string column is malformed).
- ``timestamp`` (and the stream's `timestamp` field): an integer in `time_unit` as for ``int``,
  or ISO-8601 text (``2024-05-01``, ``2024-05-01T12:00:00.250Z``, ``… +02:00``; no offset means
  UTC), converted to `time_unit` since the Unix epoch, rounded down to a whole unit.
- Empty text is NULL for every type but ``string`` (where it is ``""``); so are a JSON null and
  a missing JSON key.

A record is one line in csv and jsonl (a quoted csv field cannot hold a line break). Empty lines
are skipped and are not records; every other line is a record, well-formed or not, so the
ordinal timestamps of streams without a `timestamp` field stay stable.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from cq_service.io.base import (
    DeadRecord,
    RawChunk,
    SourceError,
    SourceReader,
    json_safe,
    register_source,
)
from cq_service.spec.model import TIME_UNITS, StreamSpec
from cq_service.types import DataType, arrow_type

__all__ = ["CsvReader", "JsonObjects", "JsonlReader", "ParquetReader", "RecordLayout"]

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


# -- line-oriented files --------------------------------------------------------------------------


class _Block:
    """Complete lines of a file: `data` (each line ends with a newline), the offsets of its
    newlines, and the 1-based file line number of each line. `first_pos` is the record
    position of the first line (for ordinal timestamps)."""

    def __init__(self, data: bytes, newlines: np.ndarray, lines: np.ndarray, first_pos: int):
        self.data = data
        self.newlines = newlines
        self.lines = lines
        self.first_pos = first_pos

    def __len__(self) -> int:
        return len(self.lines)

    def line_bytes(self, k: int) -> bytes:
        start = int(self.newlines[k - 1]) + 1 if k > 0 else 0
        return self.data[start : int(self.newlines[k])].rstrip(b"\r")

    def line(self, k: int) -> str:
        """Line `k` as text (undecodable bytes replaced), for reasons and dead records."""
        return self.line_bytes(k).decode("utf-8", errors="replace")

    def is_utf8(self) -> bool:
        """Whether the whole block is valid UTF-8."""
        return _is_utf8(self.data)

    def without_blank_lines(self, whitespace: bool) -> _Block:
        """This block minus its empty lines (also whitespace-only ones if `whitespace`)."""
        if not len(self):
            return self
        raw = np.frombuffer(self.data, dtype=np.uint8)
        starts = np.concatenate(([0], self.newlines[:-1] + 1))
        length = self.newlines - starts
        blank = (length == 0) | ((length == 1) & (raw[starts] == 13))
        if whitespace:
            blank |= np.array([not self.line_bytes(k).strip() for k in range(len(self))])
        if not blank.any():
            return self
        keep = ~blank
        data = raw[np.repeat(keep, length + 1)].tobytes()
        newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
        return _Block(data, newlines, self.lines[keep], self.first_pos)


class _LineReader:
    """Reads a binary file in blocks of at most `max_lines` complete lines."""

    def __init__(self, f: BinaryIO):
        self._f = f
        self._rest = b""
        self._rest_newlines = np.empty(0, dtype=np.int64)
        self._eof = False
        self._next_line = 1
        self._bytes_read = 0
        self._lines_seen = 0

    def take(self, max_lines: int) -> tuple[bytes, np.ndarray, int] | None:
        """(data, offsets of its newlines, number of its first line), or None at the end."""
        parts, newlines = [self._rest], [self._rest_newlines]
        size, count = len(self._rest), len(self._rest_newlines)
        while count < max_lines and not self._eof:
            chunk = self._f.read(self._read_size(max_lines - count))
            if not chunk:
                self._eof = True
                break
            nl = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + size
            self._bytes_read += len(chunk)
            self._lines_seen += len(nl)
            parts.append(chunk)
            newlines.append(nl)
            size += len(chunk)
            count += len(nl)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        nl = newlines[0] if len(newlines) == 1 else np.concatenate(newlines)
        if not data:
            return None
        if count >= max_lines:
            cut = int(nl[max_lines - 1]) + 1
            self._rest, self._rest_newlines = data[cut:], nl[max_lines:] - cut
            data, nl = data[:cut], nl[:max_lines]
        else:
            self._rest, self._rest_newlines = b"", np.empty(0, dtype=np.int64)
            if not data.endswith(b"\n"):
                data += b"\n"
                nl = np.append(nl, len(data) - 1)
        first = self._next_line
        self._next_line += len(nl)
        return data, nl, first

    def _read_size(self, lines_wanted: int) -> int:
        per_line = self._bytes_read / self._lines_seen if self._lines_seen else 128
        return int(min(max(per_line * lines_wanted * 1.05, 1 << 16), 1 << 26))


def _check_options(stream: StreamSpec, allowed: Sequence[str]) -> None:
    unknown = sorted(set(stream.source.options) - set(allowed))
    if unknown:
        fmt = stream.source.format or "file"
        raise SourceError(
            f"{stream.name}: unknown {fmt} source option(s): {', '.join(unknown)}",
            stream.source.span,
        )


class _LineFileReader(SourceReader):
    """Shared by csv and jsonl: a file read block by block; subclasses parse a block.

    Every column is read, used or not: a bad value in any of them makes its record malformed."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        path = stream.source.path
        if not path:
            raise SourceError(f"{stream.name}: a file source needs a path", stream.source.span)
        self.path = path
        self.layout = RecordLayout(stream, time_unit, path)
        try:
            self._file: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as e:
            raise SourceError(
                f"{stream.name}: cannot open {path}: {e.strerror}", stream.source.span
            ) from None
        self._lines = _LineReader(self._file)
        self._next_pos = 0

    def read(self) -> RawChunk | None:
        while True:
            taken = self._lines.take(self.batch_rows)
            if taken is None:
                return None
            data, newlines, first_line = taken
            lines = np.arange(first_line, first_line + len(newlines), dtype=np.int64)
            block = _Block(data, newlines, lines, self._next_pos)
            block = block.without_blank_lines(whitespace=False)
            chunk, records = self._parse(block)
            self._next_pos += records
            if len(chunk) or chunk.dead:
                return chunk

    def _parse(self, block: _Block) -> tuple[RawChunk, int]:
        """The chunk of a block without empty lines, and how many records the block held."""
        raise NotImplementedError

    def close(self) -> None:
        self._file.close()


@register_source("file:csv")
class CsvReader(_LineFileReader):
    """A csv file whose header row names the columns (their order and extra columns do not
    matter). Options: ``delimiter`` (one character, default ``,``); ``header: false`` with
    ``columns: [names…]`` for a file without a header row."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        try:
            self._open_header()
        except BaseException:
            self.close()
            raise

    def _open_header(self) -> None:
        stream = self.stream
        opts = stream.source.options
        _check_options(stream, ("delimiter", "header", "columns"))
        delimiter = opts.get("delimiter", ",")
        if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '\r\n"':
            raise SourceError(
                f"{stream.name}: csv delimiter must be one character, not {delimiter!r}",
                stream.source.span,
            )
        self._delimiter = delimiter
        if opts.get("header", True):
            taken = self._lines.take(1)
            text = taken[0].decode("utf-8-sig", errors="replace") if taken else ""
            header = next(csv.reader([text.rstrip("\r\n")], delimiter=delimiter), [])
            names = [h.strip() for h in header]
        else:
            names = [str(c) for c in opts.get("columns") or [f.name for f in stream.schema]]
        missing = [c for c in self.layout.required if c not in names]
        if missing:
            has = ", ".join(names) if names else "no columns"
            raise SourceError(
                f"{stream.name}: {self.path}: missing column(s) "
                f"{', '.join(map(repr, missing))} (the header has: {has})",
                stream.source.span,
            )
        twice = [c for c in self.layout.needed if names.count(c) > 1]
        if twice:
            raise SourceError(
                f"{stream.name}: {self.path}: column {twice[0]!r} appears more than once",
                stream.source.span,
            )
        # Unneeded columns get private names, so duplicates among them do no harm.
        self._file_columns = [
            c if c in self.layout.needed else f"\0{i}" for i, c in enumerate(names)
        ]
        self._include = [c for c in self.layout.needed if c in names]
        # An empty include list would mean "every column": read one column at least.
        include = self._include or self._file_columns[:1]
        self._convert_options = pcsv.ConvertOptions(
            include_columns=include,
            column_types={c: pa.string() for c in include},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
        )

    def _parse(self, block: _Block) -> tuple[RawChunk, int]:
        parsed = self._parse_fast(block)
        if parsed is None:
            parsed = self._parse_slow(block)
        values, rows, bad = parsed
        records = block.lines[rows]
        chunk = self.layout.assemble(
            values,
            len(rows),
            records,
            block.first_pos + rows,
            lambda i: block.line(int(rows[i])),
            [(int(block.lines[k]), reason, block.line(k)) for k, reason in bad],
        )
        return chunk, len(block)

    def _parse_fast(self, block: _Block) -> tuple[dict[str, Values], np.ndarray, list] | None:
        if not len(block):
            return {}, np.empty(0, np.int64), []
        if not block.is_utf8():
            return None
        for threads in (True, False):
            invalid: list[tuple[int | None, int, int]] = []

            def handler(row: Any, invalid: list = invalid) -> str:
                invalid.append((row.number, row.expected_columns, row.actual_columns))
                return "skip"

            try:
                table = pcsv.read_csv(
                    pa.BufferReader(block.data),
                    read_options=pcsv.ReadOptions(
                        column_names=self._file_columns,
                        use_threads=threads,
                        block_size=max(len(block.data) // 2 + 1, 1 << 20),
                    ),
                    parse_options=pcsv.ParseOptions(
                        delimiter=self._delimiter, invalid_row_handler=handler
                    ),
                    convert_options=self._convert_options,
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            if invalid and any(num is None for num, _, _ in invalid):
                continue  # row numbers are only known when reading on one thread
            if table.num_rows + len(invalid) != len(block):
                return None  # a quoted line break joined lines into one row
            bad_idx = np.array([num - 1 for num, _, _ in invalid], dtype=np.int64)
            rows = np.setdiff1d(np.arange(len(block), dtype=np.int64), bad_idx, assume_unique=True)
            bad = [
                (int(num) - 1, f"expected {exp} fields, found {act}") for num, exp, act in invalid
            ]
            return {c: table.column(c) for c in self._include}, rows, bad
        return None

    def _parse_slow(self, block: _Block) -> tuple[dict[str, Values], np.ndarray, list]:
        ncols = len(self._file_columns)
        positions = {c: self._file_columns.index(c) for c in self._include}
        values: dict[str, list[str]] = {c: [] for c in self._include}
        rows: list[int] = []
        bad: list[tuple[int, str]] = []
        for k in range(len(block)):
            try:
                text = block.line_bytes(k).decode("utf-8")
            except UnicodeDecodeError:
                bad.append((k, NOT_UTF8))
                continue
            try:
                fields = next(csv.reader([text], delimiter=self._delimiter, strict=True), [""])
            except csv.Error as e:
                bad.append((k, f"cannot parse csv: {e}"))
                continue
            if len(fields) != ncols:
                bad.append((k, f"expected {ncols} fields, found {len(fields)}"))
                continue
            rows.append(k)
            for c, j in positions.items():
                values[c].append(fields[j])
        return dict(values), np.array(rows, dtype=np.int64), bad


def _is_utf8(data: bytes) -> bool:
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
        if not _is_utf8(data):
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


@register_source("file:jsonl")
class JsonlReader(_LineFileReader):
    """One JSON object per line; missing keys and nulls are NULL; blank lines are skipped."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        try:
            _check_options(stream, ())
        except BaseException:
            self.close()
            raise
        self._json = JsonObjects(self.layout)

    def _parse(self, block: _Block) -> tuple[RawChunk, int]:
        values = self._json.fast(block.data, len(block))
        if values is not None:
            n = len(block)
            rows = np.arange(n, dtype=np.int64)
            return (
                self.layout.assemble(values, n, block.lines, block.first_pos + rows, block.line),
                n,
            )
        block = block.without_blank_lines(whitespace=True)
        values_list, rows, bad = self._json.slow([block.line_bytes(k) for k in range(len(block))])
        chunk = self.layout.assemble(
            values_list,
            len(rows),
            block.lines[rows],
            block.first_pos + rows,
            lambda i: block.line(int(rows[i])),
            [(int(block.lines[k]), reason, block.line(k)) for k, reason in bad],
        )
        return chunk, len(block)


@register_source("file:parquet")
class ParquetReader(SourceReader):
    """A parquet file; columns are found by name and cast to the schema types.

    Given the `columns` used, a column that is not used and is stored exactly as its Arrow type
    is not read (it is NULL in every element); the raw text of a malformed record still shows
    the whole row."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        path = stream.source.path
        if not path:
            raise SourceError(f"{stream.name}: a file source needs a path", stream.source.span)
        _check_options(stream, ())
        self.path = path
        self.layout = RecordLayout(stream, time_unit, path)
        try:
            self._file = pq.ParquetFile(path)
        except OSError as e:
            raise SourceError(
                f"{stream.name}: cannot open {path}: {e}", stream.source.span
            ) from None
        except pa.ArrowException as e:
            raise SourceError(
                f"{stream.name}: {path} is not a parquet file: {e}", stream.source.span
            ) from None
        names = self._file.schema_arrow.names
        missing = [c for c in self.layout.required if c not in names]
        if missing:
            self._file.close()
            raise SourceError(
                f"{stream.name}: {path}: missing column(s) {', '.join(map(repr, missing))} "
                f"(the file has: {', '.join(names)})",
                stream.source.span,
            )
        self._all_columns = [c for c in self.layout.needed if c in names]
        file_types = {f.name: f.type for f in self._file.schema_arrow}
        self.unread = self.layout.unread(self.columns_used, file_types)
        # An empty column list would read no rows: keep one column at least.
        self._include = [c for c in self._all_columns if c not in self.unread] or (
            self._all_columns[:1]
        )
        self._batches = self._file.iter_batches(batch_size=batch_rows, columns=self._include)
        self._next_row = 0
        self._group: tuple[int, int, pa.Table] | None = None  # (first row, rows, table) for raw

    def read(self) -> RawChunk | None:
        while True:
            batch = next(self._batches, None)
            if batch is None:
                return None
            n = batch.num_rows
            if n == 0:
                continue
            first = self._next_row
            self._next_row += n
            positions = np.arange(first, first + n, dtype=np.int64)
            values = {c: batch.column(c) for c in self._include if c not in self.unread}
            if len(self._include) == len(self._all_columns):
                raw = lambda i, b=batch: _row_json(b, i)  # noqa: E731
            else:
                raw = lambda i, p=first: self._whole_row_json(p + i)  # noqa: E731
            return self.layout.assemble(values, n, positions + 1, positions, raw)

    def _whole_row_json(self, row: int) -> str:
        """Row `row` (0-based) with every column, read again from its row group."""
        if self._group is None or not self._group[0] <= row < self._group[0] + self._group[1]:
            meta, start = self._file.metadata, 0
            for g in range(meta.num_row_groups):
                size = meta.row_group(g).num_rows
                if row < start + size:
                    table = self._file.read_row_group(g, columns=self._all_columns)
                    self._group = (start, size, table)
                    break
                start += size
        assert self._group is not None
        start, _, table = self._group
        return _row_json(table.slice(row - start, 1).to_batches()[0], 0)

    def close(self) -> None:
        self._file.close()


def _row_json(batch: pa.RecordBatch, i: int) -> str:
    row = batch.slice(i, 1).to_pylist()[0]
    return json.dumps(json_safe(row), ensure_ascii=False, default=str)
