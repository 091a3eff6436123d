"""File sources: csv, jsonl and parquet, read in chunks of at most `batch_rows` records.

Each chunk is parsed on a fast path first (pyarrow's csv/json readers); only a block that fails
there is parsed again line by line, to find the malformed records and their reasons. The slow
path accepts everything the fast path accepts, with the same values, so results never depend on
where a chunk boundary falls. Values are converted to the schema types as every source's are
(`records.RecordLayout`, whose module lists the rules).

A record is one line in csv and jsonl (a quoted csv field cannot hold a line break). Empty lines
are skipped and are not records; every other line is a record, well-formed or not, so the
ordinal timestamps of streams without a `timestamp` field stay stable.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Collection, Sequence
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from cq_service.io.base import (
    RawChunk,
    SourceError,
    SourceReader,
    json_safe,
    register_source,
)
from cq_service.io.records import NOT_UTF8, JsonObjects, RecordLayout, Values, is_utf8
from cq_service.spec.model import StreamSpec

__all__ = ["CsvReader", "JsonlReader", "ParquetReader"]


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
        return is_utf8(self.data)

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
        self._size = os.fstat(self._file.fileno()).st_size
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

    def progress(self) -> tuple[int, int] | None:
        """Bytes read (blocks ahead of the records parsed included) of the file's size."""
        return (self._size if self._file.closed else self._file.tell()), self._size

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

    def progress(self) -> tuple[int, int] | None:
        return self._next_row, self._file.metadata.num_rows

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
