"""The column types of pipeline schemas and CQL, and their Arrow representation."""

from __future__ import annotations

from enum import StrEnum

import pyarrow as pa

__all__ = ["DataType", "arrow_type", "common_numeric", "parse_type"]


class DataType(StrEnum):
    """A column type. `timestamp` values are integers in the pipeline's `time_unit`."""

    INT = "int"
    FLOAT = "float"
    STRING = "string"
    BOOL = "bool"
    TIMESTAMP = "timestamp"
    NULL = "null"  # the type of a bare NULL literal; unifies with anything

    @property
    def is_numeric(self) -> bool:
        return self in (DataType.INT, DataType.FLOAT, DataType.TIMESTAMP)

    def __str__(self) -> str:
        return self.value


_ARROW = {
    DataType.INT: pa.int64(),
    DataType.FLOAT: pa.float64(),
    DataType.STRING: pa.string(),
    DataType.BOOL: pa.bool_(),
    DataType.TIMESTAMP: pa.int64(),
    DataType.NULL: pa.null(),
}


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type a column of type `t` is stored as."""
    return _ARROW[t]


def parse_type(name: str) -> DataType:
    """A schema type name (``int``, ``float``, ``string``, ``bool``, ``timestamp``)."""
    return DataType(name)


def common_numeric(a: DataType, b: DataType) -> DataType:
    """The result type of arithmetic between `a` and `b` (PostgreSQL promotion)."""
    if a == DataType.NULL:
        return b
    if b == DataType.NULL:
        return a
    if DataType.FLOAT in (a, b):
        return DataType.FLOAT
    return DataType.INT
