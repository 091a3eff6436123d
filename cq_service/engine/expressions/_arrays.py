"""Array helpers shared by the expression kernels: Arrow ↔ numpy with a NULL mask, typed NULL
arrays, broadcasting a scalar, and running a scalar-option kernel once per distinct option."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr, Const
from cq_service.types import DataType, arrow_type

__all__ = [
    "BOOL",
    "FLOAT",
    "INT",
    "NULL",
    "STRING",
    "TIMESTAMP",
    "Builder",
    "CompileAs",
    "Evaluator",
    "Predicate",
    "as_bool_numpy",
    "broadcast",
    "const_of",
    "from_numpy",
    "null_mask",
    "numeric_kind",
    "or_masks",
    "per_distinct",
    "set_null",
    "typed_nulls",
    "values",
]

Evaluator = Callable[[Sequence[pa.Array], int], pa.Array]
"""A compiled expression: (input columns, row count) -> an Arrow array of that many rows."""

Predicate = Callable[[Sequence[pa.Array], int], np.ndarray]
"""A compiled condition: (input columns, row count) -> numpy bools, True where it is TRUE."""

CompileAs = Callable[["BExpr", DataType], Evaluator]
"""Compile a sub-expression so that it yields values of the given type (converting if needed)."""

Builder = Callable[[tuple["BExpr", ...], DataType, CompileAs], tuple[Evaluator, DataType]]
"""Compile one function: (arguments, the call's result type, compile_as) -> (evaluator, the
type the evaluator yields). The compiler converts that type to the call's type if they differ."""

INT, FLOAT, STRING, BOOL, TIMESTAMP, NULL = (
    DataType.INT,
    DataType.FLOAT,
    DataType.STRING,
    DataType.BOOL,
    DataType.TIMESTAMP,
    DataType.NULL,
)


def numeric_kind(*types: DataType) -> DataType:
    """FLOAT if any of `types` is FLOAT, else INT (PostgreSQL's promotion for arithmetic)."""
    return FLOAT if FLOAT in types else INT


def const_of(e: BExpr) -> tuple[bool, object]:
    """(True, value) when `e` is a constant (after folding), else (False, None)."""
    if isinstance(e, Const):
        return True, e.value
    return False, None


def typed_nulls(n: int, t: DataType) -> pa.Array:
    """`n` NULLs of the Arrow type of `t`."""
    return pa.nulls(n, arrow_type(t))


def broadcast(value: object, t: DataType, n: int) -> pa.Array:
    """`value` (a Python value, None for NULL) repeated `n` times as type `t`."""
    at = arrow_type(t)
    if value is None or t == DataType.NULL:
        return pa.nulls(n, at)
    return pc.fill_null(pa.nulls(n, at), pa.scalar(value, type=at))


def values(arr: pa.Array, fill: object) -> np.ndarray:
    """The values of `arr` as numpy, NULL slots replaced by `fill`."""
    if arr.null_count:
        arr = arr.fill_null(fill)
    return arr.to_numpy(zero_copy_only=False)


def null_mask(arr: pa.Array) -> np.ndarray | None:
    """True where `arr` is NULL; None when it has no NULL."""
    if not arr.null_count:
        return None
    return arr.is_null().to_numpy(zero_copy_only=False)


def or_masks(*masks: np.ndarray | None) -> np.ndarray | None:
    """The union of NULL masks (None stands for 'no NULL')."""
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else out | m
    return out


def from_numpy(vals: np.ndarray, mask: np.ndarray | None, t: pa.DataType) -> pa.Array:
    """An Arrow array of `vals`, NULL where `mask` is True."""
    if mask is not None and not mask.any():
        mask = None
    return pa.array(vals, type=t, mask=mask)


def set_null(arr: pa.Array, mask: np.ndarray | None) -> pa.Array:
    """`arr` with the slots where `mask` is True made NULL."""
    if mask is None or not mask.any():
        return arr
    return pc.if_else(pa.array(mask), pa.nulls(1, arr.type)[0], arr)


def as_bool_numpy(arr: pa.Array) -> np.ndarray:
    """A boolean Arrow array as numpy, NULL read as False."""
    return values(arr, False).astype(bool, copy=False)


def per_distinct(
    data: Sequence[pa.Array],
    options: Sequence[pa.Array],
    kernel: Callable[[Sequence[pa.Array], tuple], pa.Array],
    out_type: pa.DataType,
) -> pa.Array:
    """Apply `kernel(data_subset, option_values)` once per distinct combination of `options`.

    For functions whose Arrow kernel takes an argument as a scalar option (a LIKE pattern, a
    substring position) but the argument is a column: rows are grouped by the option values and
    each group runs the vectorised kernel. Rows where an option is NULL are NULL.
    """
    n = len(data[0]) if data else len(options[0])
    codes = np.zeros(n, dtype=np.int64)
    mask = None
    for opt in options:
        enc = pc.dictionary_encode(opt)
        codes = codes * max(len(enc.dictionary), 1) + values(enc.indices, 0).astype(np.int64)
        mask = or_masks(mask, null_mask(opt))
    if mask is not None:
        codes[mask] = -1
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) if n else []
    bounds = [*map(int, starts), n]
    parts, covered = [], []
    for lo, hi in itertools.pairwise(bounds):
        if sorted_codes[lo] < 0:
            continue
        rows = order[lo:hi]
        take = pa.array(rows, type=pa.int64())
        opts = tuple(opt[int(rows[0])].as_py() for opt in options)
        parts.append(kernel([d.take(take) for d in data], opts).cast(out_type))
        covered.append(rows)
    if not parts:
        return pa.nulls(n, out_type)
    # Scatter the group results back to row order; rows with a NULL option stay NULL.
    done = np.concatenate(covered)
    inverse = np.full(n, len(done), dtype=np.int64)
    inverse[done] = np.arange(len(done))
    combined = pa.concat_arrays([*parts, pa.nulls(1, out_type)])
    return combined.take(pa.array(inverse, type=pa.int64()))
