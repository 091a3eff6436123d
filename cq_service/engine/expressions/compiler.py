"""Compile a bound expression into a closure tree evaluated over columnar batches.

``compile_expr(e)`` walks `e` once: constant sub-expressions are folded to `Const` first, then
every node becomes a closure over its children's closures, so evaluating a batch runs Arrow /
numpy kernels only, with no dispatch on node types. Function calls are looked up by name in
`FUNCTIONS` (one registry, filled by the arithmetic, compare and strings modules).

Example::

    ev = compile_expr(Call("add", (ColRef(0, INT), Const(1, INT)), INT))
    ev([pa.array([1, None])], 2)  # -> [2, null]
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr, Call, CaseExpr, CastExpr, ColRef, Const
from cq_service.errors import EngineError
from cq_service.types import DataType, arrow_type

from . import arithmetic, compare, strings
from ._arrays import (
    BOOL,
    INT,
    NULL,
    TIMESTAMP,
    Builder,
    Evaluator,
    Predicate,
    as_bool_numpy,
    broadcast,
)
from .cast import convert, convert_scalar

__all__ = ["FUNCTIONS", "Predicate", "compile_expr", "compile_predicate", "fold_constants"]

FUNCTIONS: dict[str, Builder] = {
    **arithmetic.FUNCTIONS,
    **compare.FUNCTIONS,
    **strings.FUNCTIONS,
}


def compile_expr(e: BExpr) -> Evaluator:
    """An evaluator ``(columns, n) -> pa.Array`` of `n` values of type ``arrow_type(e.type)``.

    Raises `EngineError` for a function or CAST the engine does not implement.
    """
    return _compile(fold_constants(e))


def compile_predicate(e: BExpr) -> Predicate:
    """An evaluator of a boolean expression as a numpy mask: True where `e` is TRUE (NULL and
    FALSE are both False), as WHERE, HAVING and join conditions need."""
    if e.type == NULL:
        return lambda cols, n: np.zeros(n, dtype=bool)
    ev = compile_expr(e)
    return lambda cols, n: as_bool_numpy(ev(cols, n))


def fold_constants(e: BExpr) -> BExpr:
    """`e` with every sub-expression that reads no column replaced by its value (a new tree)."""
    if isinstance(e, ColRef | Const):
        return e
    if isinstance(e, Call):
        node: BExpr = dataclasses.replace(e, args=tuple(fold_constants(a) for a in e.args))
        children: tuple[BExpr, ...] = node.args
    elif isinstance(e, CastExpr):
        node = dataclasses.replace(e, operand=fold_constants(e.operand))
        children = (node.operand,)
    elif isinstance(e, CaseExpr):
        whens = tuple((fold_constants(c), fold_constants(v)) for c, v in e.whens)
        else_ = None if e.else_ is None else fold_constants(e.else_)
        node = dataclasses.replace(e, whens=whens, else_=else_)
        children = (*(x for w in whens for x in w), *((else_,) if else_ is not None else ()))
    else:
        raise EngineError(f"not an expression: {e!r}")
    if all(isinstance(c, Const) for c in children):
        return Const(_compile(node)((), 1)[0].as_py(), e.type)
    return node


# -- nodes ------------------------------------------------------------------------------------


def _compile(e: BExpr) -> Evaluator:
    if isinstance(e, ColRef):
        i = e.index
        return lambda cols, n: cols[i]
    if isinstance(e, Const):
        return _constant(e.value, e.type)
    if isinstance(e, Call):
        return _call(e)
    if isinstance(e, CastExpr):
        return _cast(e)
    if isinstance(e, CaseExpr):
        return _case(e)
    raise EngineError(f"not an expression: {e!r}")


def _constant(value: object, t: DataType) -> Evaluator:
    """The constant broadcast to the batch size: the longest array built so far is kept, and a
    shorter batch gets a zero-copy slice of it (batches and their slices vary in length)."""
    longest: list[pa.Array] = [broadcast(value, t, 0)]

    def ev(cols, n):
        arr = longest[0]
        if len(arr) < n:
            arr = longest[0] = broadcast(value, t, n)
        return arr if len(arr) == n else arr.slice(0, n)

    return ev


def _same_kind(a: DataType, b: DataType) -> bool:
    return a == b or {a, b} == {INT, TIMESTAMP}


def _compile_as(e: BExpr, t: DataType) -> Evaluator:
    """`e` compiled so that it yields type `t`."""
    if _same_kind(e.type, t) or t == NULL:
        return _compile(e)
    if isinstance(e, Const):
        return _constant(_convert_const(e.value, e.type, t), t)
    inner, src = _compile(e), e.type
    try:
        convert(pa.nulls(0, arrow_type(src)), src, t)
    except NotImplementedError as err:
        raise EngineError(f"unsupported conversion: {err}") from None
    return lambda cols, n: convert(inner(cols, n), src, t)


def _convert_const(value: object, src: DataType, dst: DataType) -> object:
    try:
        return convert_scalar(value, src, dst)
    except NotImplementedError as err:
        raise EngineError(f"unsupported conversion: {err}") from None


def _call(e: Call) -> Evaluator:
    build = FUNCTIONS.get(e.fn)
    if build is None:
        raise EngineError(f"unsupported function {e.fn!r}")
    try:
        ev, produced = build(e.args, e.type, _compile_as)
    except NotImplementedError as err:
        raise EngineError(f"unsupported call to {e.fn}: {err}") from None
    if _same_kind(produced, e.type):
        return ev
    if e.type == NULL:
        return lambda cols, n: pa.nulls(n)
    src, dst = produced, e.type
    return lambda cols, n: convert(ev(cols, n), src, dst)


def _cast(e: CastExpr) -> Evaluator:
    return _compile_as(e.operand, e.type)


def _case(e: CaseExpr) -> Evaluator:
    t = e.type
    if t == NULL:
        return lambda cols, n: pa.nulls(n)
    conds = [_compile_as(c, BOOL) for c, _ in e.whens]
    results = [_compile_as(v, t) for _, v in e.whens]
    other = _constant(None, t) if e.else_ is None else _compile_as(e.else_, t)
    names = [f"w{i}" for i in range(len(conds))]

    def ev(cols, n):
        picks = [pc.fill_null(c(cols, n), False) for c in conds]
        if len(picks) == 1:
            return pc.if_else(picks[0], results[0](cols, n), other(cols, n))
        cases = pc.make_struct(*picks, field_names=names)
        return pc.case_when(cases, *(r(cols, n) for r in results), other(cols, n))

    return ev
