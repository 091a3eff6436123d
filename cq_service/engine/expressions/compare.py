"""Comparisons, three-valued logic, NULL tests, IN lists and the NULL-handling functions
(coalesce, nullif, greatest, least).

Numbers compare numerically (an int against a float as a double, as PostgreSQL does), strings by
code point, bools with false < true. Floats follow PostgreSQL's total order: NaN equals NaN and
is greater than every other value. Any NULL operand makes a comparison NULL; AND/OR/NOT are
Kleene's three-valued logic.

Example: ``in_list(x, 1, NULL)`` is TRUE for x = 1 and NULL for x = 2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr
from cq_service.types import DataType, arrow_type

from ._arrays import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    TIMESTAMP,
    Builder,
    CompileAs,
    Evaluator,
    as_bool_numpy,
    const_of,
    from_numpy,
    null_mask,
    or_masks,
    typed_nulls,
    values,
)

__all__ = ["FUNCTIONS", "common_type", "compare_arrays"]

Compare = Callable[[pa.Array, pa.Array], pa.Array]


def common_type(*types: DataType) -> DataType:
    """The type values of `types` are compared in (NULL unifies with anything)."""
    known = {INT if t == TIMESTAMP else t for t in types} - {NULL}
    if not known:
        return NULL
    if known <= {INT, FLOAT}:
        return FLOAT if FLOAT in known else INT
    if len(known) == 1:
        return known.pop()
    raise NotImplementedError(f"cannot compare {' and '.join(sorted(map(str, known)))}")


_ARROW_CMP = {
    "eq": pc.equal,
    "ne": pc.not_equal,
    "lt": pc.less,
    "le": pc.less_equal,
    "gt": pc.greater,
    "ge": pc.greater_equal,
}


def _float_cmp(op: str) -> Compare:
    """Float comparison in PostgreSQL's order (NaN = NaN, NaN above everything)."""

    def cmp(a: pa.Array, b: pa.Array) -> pa.Array:
        x, y = values(a, 0.0), values(b, 0.0)
        nx, ny = np.isnan(x), np.isnan(y)
        with np.errstate(invalid="ignore"):
            if op in ("eq", "ne"):
                r = (x == y) | (nx & ny)
                r = ~r if op == "ne" else r
            elif op == "lt":
                r = (x < y) | (~nx & ny)
            elif op == "le":
                r = (x <= y) | ny
            elif op == "gt":
                r = (x > y) | (nx & ~ny)
            else:
                r = (x >= y) | nx
        return from_numpy(r, or_masks(null_mask(a), null_mask(b)), pa.bool_())

    return cmp


def compare_arrays(op: str, t: DataType) -> Compare:
    """The comparison `op` for two arrays of type `t`."""
    if t == FLOAT:
        return _float_cmp(op)
    if t == NULL:
        return lambda a, b: pa.nulls(len(a), pa.bool_())
    return _ARROW_CMP[op]


def _comparison(op: str) -> Builder:
    def build(args: tuple[BExpr, ...], rtype: DataType, sub: CompileAs):
        a, b = args
        t = common_type(a.type, b.type)
        ea, eb, cmp = sub(a, t), sub(b, t), compare_arrays(op, t)
        return (lambda cols, n: cmp(ea(cols, n), eb(cols, n))), BOOL

    return build


# -- logic ------------------------------------------------------------------------------------


def _kleene(fn: Callable[[pa.Array, pa.Array], pa.Array]) -> Builder:
    def build(args, rtype, sub):
        evs = [sub(a, BOOL) for a in args]

        def ev(cols, n):
            out = evs[0](cols, n)
            for e in evs[1:]:
                out = fn(out, e(cols, n))
            return out

        return ev, BOOL

    return build


def _not(args, rtype, sub):
    e = sub(args[0], BOOL)
    return (lambda cols, n: pc.invert(e(cols, n))), BOOL


def _null_test(negate: bool) -> Builder:
    def build(args, rtype, sub):
        e = sub(args[0], args[0].type)
        test = pc.is_valid if negate else pc.is_null
        return (lambda cols, n: test(e(cols, n))), BOOL

    return build


# -- IN lists ---------------------------------------------------------------------------------


def _in_list(args, rtype, sub):
    x, items = args[0], args[1:]
    t = common_type(x.type, *(i.type for i in items))
    ex = sub(x, t)
    consts = [const_of(i) for i in items]
    if t != NULL and all(is_const for is_const, _ in consts):
        listed = [v for _, v in consts if v is not None]
        has_null = len(listed) < len(items)
        value_set = pa.array(listed, type=arrow_type(t))
        if t == FLOAT:  # hash lookup: make -0.0 find 0.0 (NaN already finds NaN)
            value_set = pc.add(value_set, 0.0)

        def ev(cols, n):
            xa = ex(cols, n)
            probe = pc.add(xa, 0.0) if t == FLOAT else xa
            found = as_bool_numpy(pc.is_in(probe, value_set=value_set, skip_nulls=True))
            mask = ~found if has_null else null_mask(xa)
            return from_numpy(found, mask, pa.bool_())

        return ev, BOOL
    # General case: x = i1 OR x = i2 OR ... (SQL's definition, NULLs included).
    eq = compare_arrays("eq", t)
    evs = [sub(i, t) for i in items]

    def ev_general(cols, n):
        xa = ex(cols, n)
        out = eq(xa, evs[0](cols, n))
        for e in evs[1:]:
            out = pc.or_kleene(out, eq(xa, e(cols, n)))
        return out

    return ev_general, BOOL


# -- NULL-handling functions ------------------------------------------------------------------


def _coalesce(args, rtype, sub):
    evs = [sub(a, rtype) for a in args if a.type != NULL]
    if not evs:
        return (lambda cols, n: typed_nulls(n, rtype)), rtype
    if len(evs) == 1:
        return evs[0], rtype
    return (lambda cols, n: pc.coalesce(*(e(cols, n) for e in evs))), rtype


def _nullif(args, rtype, sub):
    a, b = args
    t = common_type(a.type, b.type)
    ea, eb, ca = sub(a, t), sub(b, t), sub(a, rtype)
    eq = compare_arrays("eq", t)

    def ev(cols, n):
        same = as_bool_numpy(eq(ea(cols, n), eb(cols, n)))
        va = ca(cols, n)
        return pc.if_else(pa.array(same), pa.scalar(None, type=va.type), va)

    return ev, rtype


def _extreme(largest: bool) -> Builder:
    """greatest / least: NULLs are ignored; NULL only when every argument is NULL."""

    def build(args, rtype, sub):
        t = common_type(rtype, *(a.type for a in args))
        evs = [sub(a, t) for a in args if a.type != NULL]
        if not evs or t == NULL:
            return (lambda cols, n: typed_nulls(n, t)), t
        if t == FLOAT:
            return _float_extreme(evs, largest), t
        if t == BOOL:
            ints = _arrow_extreme([_as_int(e) for e in evs], largest)
            return (lambda cols, n: pc.cast(ints(cols, n), pa.bool_())), t
        return _arrow_extreme(evs, largest), t

    return build


def _as_int(e: Evaluator) -> Evaluator:
    return lambda cols, n: pc.cast(e(cols, n), pa.int8())


def _arrow_extreme(evs: list[Evaluator], largest: bool) -> Evaluator:
    fn = pc.max_element_wise if largest else pc.min_element_wise
    return lambda cols, n: fn(*(e(cols, n) for e in evs), skip_nulls=True)


def _float_extreme(evs: list[Evaluator], largest: bool) -> Evaluator:
    """NaN is the largest float (PostgreSQL): greatest is NaN if any argument is; least is NaN
    only if every non-NULL argument is."""

    def ev(cols, n):
        arrays = [e(cols, n) for e in evs]
        xs = np.stack([values(a, np.nan) for a in arrays])
        present = np.stack(
            [~m if (m := null_mask(a)) is not None else np.ones(n, bool) for a in arrays]
        )
        nan = np.isnan(xs) & present
        usable = present & ~nan
        with np.errstate(invalid="ignore"):
            if largest:
                r = np.where(usable, xs, -np.inf).max(axis=0)
                r = np.where(nan.any(axis=0), np.nan, r)
            else:
                r = np.where(usable, xs, np.inf).min(axis=0)
                r = np.where(usable.any(axis=0), r, np.nan)
        return from_numpy(r, ~present.any(axis=0), pa.float64())

    return ev


FUNCTIONS: dict[str, Builder] = {
    **{op: _comparison(op) for op in _ARROW_CMP},
    "and": _kleene(pc.and_kleene),
    "or": _kleene(pc.or_kleene),
    "not": _not,
    "is_null": _null_test(negate=False),
    "is_not_null": _null_test(negate=True),
    "in_list": _in_list,
    "coalesce": _coalesce,
    "nullif": _nullif,
    "greatest": _extreme(largest=True),
    "least": _extreme(largest=False),
}
