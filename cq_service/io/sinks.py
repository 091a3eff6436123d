"""Result sinks: jsonl, csv and parquet files, stdout, and the counting blackhole.

Output follows DESIGN §5. A jsonl line is one element: ``_ts`` (int), ``_op`` (``"+"`` or
``"-"``), then the columns by name. Values: ints, floats (always with a fraction or an exponent,
e.g. ``3.0``, ``1e+20``; NaN and ±infinity are written as null), strings (UTF-8, escaped as
``json.dumps(…, ensure_ascii=False)`` does), booleans and null. Lines are built column-wise with
Arrow kernels, never one Python object per element.

csv: a header ``_ts,_op,<names>``, then one line per element; a NULL is an empty field, a string
is quoted when it holds a comma, a quote or a line break, or is empty; floats as in jsonl, with
``NaN``, ``Infinity`` and ``-Infinity``. parquet: columns ``_ts`` (int64), ``_op`` (string),
then the result columns, one row group per `row_group_rows` elements (option, default 65536).

File sinks create missing parent folders and truncate the file when opened (``cq run``); under
``cq serve`` jsonl file sinks append instead, so a restarted worker keeps earlier results.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cq_service.io.base import Sink, SinkError, register_sink
from cq_service.spec.model import SinkSpec
from cq_service.types import DataType, arrow_type

__all__ = [
    "BlackholeSink",
    "CsvSink",
    "JsonlSink",
    "ParquetSink",
    "StdoutSink",
    "csv_lines",
    "json_lines",
]

_SLICE = 1 << 16  # elements encoded at once: bounds memory and 32-bit string offsets
_STRING_NULL = pa.scalar(None, pa.string())


def _plain(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = pa.concat_arrays(col.chunks) if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_large_string(col.type) or pa.types.is_string_view(col.type):
        col = col.cast(pa.string())
    return col


def _join(*pieces: Any) -> pa.Array:
    return pc.binary_join_element_wise(*pieces, "")


def _float_text(col: pa.Array) -> pa.Array:
    """Shortest round-trip text of finite floats, integral ones with ``.0``; others NULL."""
    f = col.cast(pa.float64())
    text = f.cast(pa.string())
    integral = pc.match_substring_regex(text, r"^-?\d+$")
    text = pc.if_else(integral, _join(text, ".0"), text)
    return pc.if_else(pc.is_finite(f), text, _STRING_NULL)


def _escape_json_strings(col: pa.Array) -> pa.Array:
    """Each string as a JSON string literal (NULL stays NULL)."""
    s = pc.replace_substring(col, "\\", "\\\\")
    s = pc.replace_substring(s, '"', '\\"')
    s = _join('"', s, '"')
    control = pc.match_substring_regex(col, r"[\x00-\x1f]").fill_null(False)
    if pc.any(control).as_py():
        mask = np.asarray(control.to_numpy(zero_copy_only=False), dtype=bool)
        picked = col.filter(control).to_pylist()
        fixed = pa.array([json.dumps(v, ensure_ascii=False) for v in picked], pa.string())
        s = pc.replace_with_mask(s, pa.array(mask), fixed)
    return s


def _json_values(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as JSON value texts (``null`` for NULL)."""
    col = _plain(col)
    t = col.type
    if pa.types.is_integer(t):
        text = col.cast(pa.string())
    elif pa.types.is_floating(t):
        text = _float_text(col)
    elif pa.types.is_boolean(t):
        text = pc.if_else(col, "true", "false")
    elif pa.types.is_string(t):
        text = _escape_json_strings(col)
    elif pa.types.is_null(t):
        text = pa.nulls(len(col), pa.string())
    else:
        text = pa.array(
            [None if v is None else json.dumps(v, default=str) for v in col.to_pylist()],
            pa.string(),
        )
    return text.fill_null("null")


def _buffer(lines: pa.Array) -> memoryview:
    """The bytes of a string array's values, back to back."""
    offsets = np.frombuffer(
        lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4
    )
    data = lines.buffers()[2]
    return memoryview(data)[int(offsets[0]) : int(offsets[-1])]


def _op_text(ops: np.ndarray, minus: str, plus: str) -> pa.Array:
    return pc.if_else(pa.array(np.asarray(ops) < 0), minus, plus)


def json_lines(
    ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array], names: Sequence[str]
) -> pa.Array:
    """One JSON object text per element, each ending with a newline (DESIGN §5)."""
    pieces: list[Any] = ['{"_ts":', pa.array(ts, pa.int64()).cast(pa.string()), ',"_op":']
    pieces.append(_op_text(ops, '"-"', '"+"'))
    for name, col in zip(names, columns, strict=True):
        pieces.append("," + json.dumps(name, ensure_ascii=False) + ":")
        pieces.append(_json_values(col))
    pieces.append("}\n")
    return _join(*pieces)


def _csv_field(text: str) -> str:
    if text == "" or any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_values(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as csv field texts (empty for NULL)."""
    col = _plain(col)
    t = col.type
    if pa.types.is_integer(t):
        text = col.cast(pa.string())
    elif pa.types.is_floating(t):
        f = col.cast(pa.float64())
        text = pc.if_else(
            pc.is_nan(f),
            "NaN",
            pc.if_else(
                pc.is_inf(f), pc.if_else(pc.greater(f, 0), "Infinity", "-Infinity"), _float_text(f)
            ),
        )
    elif pa.types.is_boolean(t):
        text = pc.if_else(col, "true", "false")
    elif pa.types.is_string(t):
        quote = pc.or_(pc.match_substring_regex(col, '[,"\r\n]'), pc.equal(col, ""))
        quoted = _join('"', pc.replace_substring(col, '"', '""'), '"')
        text = pc.if_else(quote, quoted, col)
    elif pa.types.is_null(t):
        text = pa.nulls(len(col), pa.string())
    else:
        text = pa.array(
            [None if v is None else _csv_field(str(v)) for v in col.to_pylist()], pa.string()
        )
    return text.fill_null("")


def csv_lines(ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> pa.Array:
    """One csv line per element (``_ts,_op,<columns>``), each ending with a newline."""
    pieces: list[Any] = [pa.array(ts, pa.int64()).cast(pa.string()), ","]
    pieces.append(_op_text(ops, "-", "+"))
    for col in columns:
        pieces.append(",")
        pieces.append(_csv_values(col))
    pieces.append("\n")
    return _join(*pieces)


def _check_options(spec: SinkSpec, allowed: Sequence[str]) -> None:
    unknown = sorted(set(spec.options) - set(allowed) - {"append"})  # append: set by the worker
    if unknown:
        raise SinkError(f"unknown sink option(s): {', '.join(unknown)}", spec.span)


def _open_for_write(spec: SinkSpec) -> BinaryIO:
    path = spec.path
    if not path:
        raise SinkError("a file sink needs a path", spec.span)
    try:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        # The worker appends (`append` option): a restarted worker must not erase results.
        mode = "ab" if spec.options.get("append") else "wb"
        return open(path, mode, buffering=1 << 20)
    except OSError as e:
        raise SinkError(f"cannot open {path} for writing: {e.strerror}", spec.span) from None


class _LineSink(Sink):
    """A sink writing one text line per element to a binary stream."""

    def _lines(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> pa.Array:
        raise NotImplementedError

    def _out(self) -> BinaryIO:
        raise NotImplementedError

    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        out = self._out()
        for start in range(0, len(ts), _SLICE):
            stop = start + _SLICE
            cols = [c.slice(start, _SLICE) for c in columns]
            out.write(_buffer(self._lines(ts[start:stop], ops[start:stop], cols)))


@register_sink("file:jsonl")
class JsonlSink(_LineSink):
    """One JSON object per line (DESIGN §5)."""

    def __init__(self, spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]):
        super().__init__(spec, names, types)
        _check_options(spec, ())
        self._file = _open_for_write(spec)

    def _out(self) -> BinaryIO:
        return self._file

    def _lines(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> pa.Array:
        return json_lines(ts, ops, columns, self.names)

    def flush(self) -> None:
        self._file.flush()

    def _close(self) -> None:
        self._file.close()


@register_sink("file:csv")
class CsvSink(_LineSink):
    """A header ``_ts,_op,<names>``, then one line per element."""

    def __init__(self, spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]):
        super().__init__(spec, names, types)
        _check_options(spec, ())
        self._file = _open_for_write(spec)
        header = ",".join(_csv_field(n) for n in ("_ts", "_op", *self.names))
        self._file.write(header.encode() + b"\n")

    def _out(self) -> BinaryIO:
        return self._file

    def _lines(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> pa.Array:
        return csv_lines(ts, ops, columns)

    def flush(self) -> None:
        self._file.flush()

    def _close(self) -> None:
        self._file.close()


@register_sink("stdout")
class StdoutSink(_LineSink):
    """jsonl lines on the process's standard output."""

    def _out(self) -> BinaryIO:
        out = sys.stdout
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            return _TextAdapter(out)
        out.flush()  # keep order with text already written to sys.stdout
        return buffer

    def _lines(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> pa.Array:
        return json_lines(ts, ops, columns, self.names)

    def flush(self) -> None:
        sys.stdout.flush()


class _TextAdapter:
    """Writes bytes to a text stream (a sys.stdout without a binary buffer)."""

    def __init__(self, out: Any):
        self._out = out

    def write(self, data: Any) -> int:
        return self._out.write(bytes(data).decode("utf-8"))


@register_sink("blackhole")
class BlackholeSink(Sink):
    """Discards elements and only counts them."""

    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        pass


def _unique(names: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, k = name, 2
        while candidate in seen:
            candidate, k = f"{name}_{k}", k + 1
        seen.add(candidate)
        out.append(candidate)
    return out


@register_sink("file:parquet")
class ParquetSink(Sink):
    """Columns ``_ts``, ``_op``, then the result columns; duplicate names get ``_2``, ``_3``."""

    def __init__(self, spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]):
        super().__init__(spec, names, types)
        _check_options(spec, ("row_group_rows", "compression"))
        self._row_group_rows = int(spec.options.get("row_group_rows", 65536))
        if self._row_group_rows < 1:
            raise SinkError("row_group_rows must be positive", spec.span)
        fields = [pa.field("_ts", pa.int64()), pa.field("_op", pa.string())]
        unique = _unique(["_ts", "_op", *self.names])[2:]
        fields += [pa.field(n, arrow_type(t)) for n, t in zip(unique, self.types, strict=True)]
        self._schema = pa.schema(fields)
        self._file = _open_for_write(spec)
        try:
            self._writer = pq.ParquetWriter(
                self._file, self._schema, compression=spec.options.get("compression", "snappy")
            )
        except (pa.ArrowException, ValueError) as e:
            self._file.close()
            raise SinkError(f"cannot write parquet to {spec.path}: {e}", spec.span) from None
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        arrays = [pa.array(ts, pa.int64()), _op_text(ops, "-", "+")]
        for col, field in zip(columns, list(self._schema)[2:], strict=True):
            col = _plain(col)
            arrays.append(col if col.type == field.type else col.cast(field.type))
        self._pending.append(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
        self._pending_rows += len(ts)
        if self._pending_rows >= self._row_group_rows:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            table = pa.Table.from_batches(self._pending, schema=self._schema)
            self._writer.write_table(table, row_group_size=max(len(table), 1))
            self._pending, self._pending_rows = [], 0

    def flush(self) -> None:
        self._write_pending()

    def _close(self) -> None:
        self._write_pending()
        self._writer.close()
        self._file.close()
