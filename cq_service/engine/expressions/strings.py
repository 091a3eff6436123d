"""String functions and operators (LIKE, ``||``, concat, substr, ...), PostgreSQL semantics.

Lengths and positions count characters (code points), 1-based. Arguments that Arrow kernels take
as options (a LIKE pattern, a substr position) are usually constants; when they are columns the
kernel runs once per distinct value (`per_distinct`).

Example: ``substr('hello', 0, 3)`` is ``'he'``; ``strpos('héllo', 'l')`` is ``3``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr
from cq_service.types import DataType, arrow_type

from ._arrays import (
    BOOL,
    INT,
    NULL,
    STRING,
    Builder,
    CompileAs,
    Evaluator,
    broadcast,
    const_of,
    per_distinct,
)
from .cast import to_text

__all__ = ["FUNCTIONS"]

OptionKernel = Callable[[pa.Array, tuple], pa.Array]
"""(string values, option values as Python objects, none of them NULL) -> result."""


def _with_options(
    args: tuple[BExpr, ...],
    sub: CompileAs,
    option_types: Sequence[DataType],
    kernel: OptionKernel,
    out: DataType,
) -> Evaluator:
    """Evaluate `kernel(args[0], options)` where the options are args[1:]: directly when they
    are constants, once per distinct combination when they are columns."""
    at = arrow_type(out)
    es = sub(args[0], STRING)
    opts = args[1:]
    consts = [const_of(o) for o in opts]
    if all(c for c, _ in consts):
        vals = tuple(v for _, v in consts)
        if any(v is None for v in vals):
            return lambda cols, n: pa.nulls(n, at)
        return lambda cols, n: kernel(es(cols, n), vals).cast(at)
    eopts = [sub(o, t) for o, t in zip(opts, option_types)]

    def ev(cols, n):
        options = [e(cols, n) for e in eopts]
        return per_distinct([es(cols, n)], options, lambda d, v: kernel(d[0], v), at)

    return ev


def _string_in(fn: Callable[[pa.Array], pa.Array], out: DataType = STRING) -> Builder:
    def build(args, rtype, sub):
        e = sub(args[0], STRING)
        return (lambda cols, n: fn(e(cols, n))), out

    return build


# -- LIKE -------------------------------------------------------------------------------------


def _like_kernel(ignore_case: bool) -> OptionKernel:
    def kernel(s: pa.Array, opts: tuple) -> pa.Array:
        (pattern,) = opts
        trailing = len(pattern) - len(pattern.rstrip("\\"))
        if trailing % 2:  # a dangling escape: an error in PostgreSQL
            return pa.nulls(len(s), pa.bool_())
        return pc.match_like(s, pattern, ignore_case=ignore_case)

    return kernel


def _like(ignore_case: bool) -> Builder:
    def build(args, rtype, sub):
        return _with_options(args, sub, [STRING], _like_kernel(ignore_case), BOOL), BOOL

    return build


# -- concatenation ----------------------------------------------------------------------------


def _as_text(e: BExpr, sub: CompileAs, bool_style: str) -> Evaluator:
    if e.type in (STRING, NULL):
        return sub(e, STRING)
    inner = sub(e, e.type)
    return lambda cols, n: to_text(inner(cols, n), e.type, bool_style=bool_style)


def _concat_op(args, rtype, sub):
    """``a || b``: NULL if any operand is NULL."""
    evs = [_as_text(a, sub, "cast") for a in args]
    return (lambda cols, n: pc.binary_join_element_wise(*(e(cols, n) for e in evs), "")), STRING


def _concat(args, rtype, sub):
    """concat(...): NULL arguments are skipped; bools are written t/f (PostgreSQL's output)."""
    evs = [_as_text(a, sub, "output") for a in args if a.type != NULL]
    if not evs:
        return (lambda cols, n: broadcast("", STRING, n)), STRING

    def ev(cols, n):
        parts = [e(cols, n) for e in evs]
        return pc.binary_join_element_wise(*parts, "", null_handling="replace", null_replacement="")

    return ev, STRING


# -- substrings -------------------------------------------------------------------------------

_FAR = 2**62  # clamp for positions so that option arithmetic stays in int64


def _clamp(v: int) -> int:
    return max(-_FAR, min(_FAR, v))


def _substr_kernel(s: pa.Array, opts: tuple) -> pa.Array:
    start = _clamp(opts[0])
    if len(opts) == 1:
        return pc.utf8_slice_codeunits(s, max(start, 1) - 1)
    count = _clamp(opts[1])
    if count < 0:  # "negative substring length not allowed"
        return pa.nulls(len(s), pa.string())
    first, stop = max(start, 1), start + count  # 1-based, stop exclusive
    if stop <= first:
        return pc.utf8_slice_codeunits(s, 0, 0)
    return pc.utf8_slice_codeunits(s, first - 1, stop - 1)


def _substr(args, rtype, sub):
    return _with_options(args, sub, [INT] * (len(args) - 1), _substr_kernel, STRING), STRING


def _left_kernel(s: pa.Array, opts: tuple) -> pa.Array:
    (k,) = opts
    return pc.utf8_slice_codeunits(s, 0, _clamp(k))  # k < 0: all but the last -k


def _right_kernel(s: pa.Array, opts: tuple) -> pa.Array:
    k = _clamp(opts[0])
    if k == 0:
        return pc.utf8_slice_codeunits(s, 0, 0)
    return pc.utf8_slice_codeunits(s, -k)  # k < 0: all but the first -k


def _option_fn(kernel: OptionKernel, option_types: Sequence[DataType], out: DataType) -> Builder:
    def build(args, rtype, sub):
        return _with_options(args, sub, option_types, kernel, out), out

    return build


def _trim(fn: Callable[..., pa.Array]) -> Builder:
    """trim(s) strips spaces; trim(s, chars) strips any of `chars`."""

    def kernel(s: pa.Array, opts: tuple) -> pa.Array:
        chars = opts[0] if opts else " "
        return fn(s, chars) if chars else s

    def build(args, rtype, sub):
        return _with_options(args, sub, [STRING], kernel, STRING), STRING

    return build


def _replace_kernel(s: pa.Array, opts: tuple) -> pa.Array:
    old, new = opts
    if old == "":  # PostgreSQL returns the string unchanged (Arrow would loop forever)
        return s
    return pc.replace_substring(s, old, new)


# -- strpos -----------------------------------------------------------------------------------


def _char_positions(s: pa.Array, byte_pos: np.ndarray) -> np.ndarray:
    """Character counts of the first `byte_pos[i]` bytes of each string (UTF-8)."""
    if pc.all(pc.string_is_ascii(s)).as_py() is not False:
        return byte_pos
    _, offsets_buf, data_buf = s.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[s.offset : s.offset + len(s) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8)
    starts = np.cumsum(np.r_[0, (data & 0xC0) != 0x80])  # characters begun before each byte
    begin = offsets[:-1].astype(np.int64)
    return starts[begin + byte_pos] - starts[begin]


def _strpos_kernel(s: pa.Array, opts: tuple) -> pa.Array:
    (needle,) = opts
    found = pc.find_substring(s, needle)
    pos = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    hit = pos >= 0
    chars = _char_positions(s, np.where(hit, pos, 0))
    result = np.where(hit, chars + 1, 0)
    return pa.array(result, type=pa.int64(), mask=found.is_null().to_numpy(zero_copy_only=False))


FUNCTIONS: dict[str, Builder] = {
    "like": _like(ignore_case=False),
    "ilike": _like(ignore_case=True),
    "concat_op": _concat_op,
    "concat": _concat,
    "upper": _string_in(pc.utf8_upper),
    "lower": _string_in(pc.utf8_lower),
    "length": _string_in(lambda a: pc.cast(pc.utf8_length(a), pa.int64()), INT),
    "substr": _substr,
    "left": _option_fn(_left_kernel, [INT], STRING),
    "right": _option_fn(_right_kernel, [INT], STRING),
    "trim": _trim(pc.utf8_trim),
    "ltrim": _trim(pc.utf8_ltrim),
    "rtrim": _trim(pc.utf8_rtrim),
    "replace": _option_fn(_replace_kernel, [STRING, STRING], STRING),
    "strpos": _option_fn(_strpos_kernel, [STRING], INT),
}
