"""Arithmetic and math functions, vectorised with numpy.

Integers are int64; ``/`` on two ints truncates toward zero and ``%`` takes the sign of the
dividend. Where PostgreSQL raises an error — division or modulo by zero, int64 overflow, a float
result overflowing to ±Infinity or underflowing to 0, sqrt/ln/log10 outside their domain,
``power`` giving a complex result — the value is NULL, so a continuous query never stops.

Example: ``div(-7, 2)`` is ``-3``, ``mod(-7, 2)`` is ``-1``, ``div(1, 0)`` is NULL.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cq_service.cql.logical import BExpr
from cq_service.types import DataType, arrow_type

from ._arrays import (
    FLOAT,
    INT,
    Builder,
    CompileAs,
    Evaluator,
    from_numpy,
    null_mask,
    numeric_kind,
    or_masks,
    values,
)

__all__ = ["FUNCTIONS"]

I64_MIN = np.iinfo(np.int64).min
Kernel = Callable[..., tuple[np.ndarray, np.ndarray | None]]
"""numpy values in -> (result values, mask of results that are NULL or None)."""

# -- integer kernels (numpy wraps on overflow; the masks find where it did) -------------------


def _int_add(x, y):
    r = x + y
    return r, ((x ^ r) & (y ^ r)) < 0


def _int_sub(x, y):
    r = x - y
    return r, ((x ^ y) & (x ^ r)) < 0


def _int_mul(x, y):
    r = x * y
    safe = np.where((x == 0) | (x == -1), 1, x)
    wrong = (r // safe != y) | (r % safe != 0)
    return r, np.where(x == -1, y == I64_MIN, (x != 0) & wrong)


def _int_div(x, y):
    bad = (y == 0) | ((x == I64_MIN) & (y == -1))
    ys = np.where(bad, 1, y)
    return (x - np.fmod(x, ys)) // ys, bad


def _int_mod(x, y):
    bad = y == 0
    ys = np.where(bad | (y == -1), 1, y)  # x % -1 is 0; avoids INT64_MIN % -1 trapping
    return np.fmod(x, ys), bad


def _int_neg(x):
    return -x, x == I64_MIN


def _int_abs(x):
    return np.abs(x), x == I64_MIN


# -- float kernels (PostgreSQL's float8 checks: overflow and underflow are errors there) ------


def _overflow(r, *args):
    bad = np.isinf(r)
    for a in args:
        bad &= np.isfinite(a)
    return bad


def _float_add(x, y):
    r = x + y
    return r, _overflow(r, x, y)


def _float_sub(x, y):
    r = x - y
    return r, _overflow(r, x, y)


def _float_mul(x, y):
    r = x * y
    return r, _overflow(r, x, y) | ((r == 0.0) & (x != 0.0) & (y != 0.0))


def _float_div(x, y):
    zero = (y == 0.0) & ~np.isnan(x)  # PostgreSQL: NaN / 0 is NaN
    r = x / np.where(zero, 1.0, y)
    under = (r == 0.0) & (x != 0.0) & ~np.isinf(y)
    return r, zero | (np.isinf(r) & ~np.isinf(x)) | under


def _float_mod(x, y):
    zero = y == 0.0
    return np.fmod(x, np.where(zero, 1.0, y)), zero


def _float_neg(x):
    return -x, None


def _half_away(y):
    t = np.trunc(y)
    return t + np.where(np.abs(y - t) >= 0.5, np.sign(y), 0.0)


def _float_round(x):
    return _half_away(x), None


def _float_round_to(x, d):
    """round(x, d) half away from zero at decimal digit `d`, as PostgreSQL's numeric round of
    x's decimal form: a product within a few ulps of a half counts as the half (2.675 → 2.68)."""
    d = np.clip(d, -330, 330)
    up = np.power(10.0, np.abs(d).astype(np.float64))
    y = np.where(d >= 0, x * up, x / up)
    t = np.trunc(y)
    frac = np.abs(y - t)
    tol = np.abs(y) * (4 * np.finfo(np.float64).eps)
    r = t + np.where(frac >= 0.5 - tol, np.sign(y), 0.0)
    out = np.where(d >= 0, r / up, r * up)
    keep = ~np.isfinite(y) | (np.abs(y) >= 2.0**52) | (d >= 330)
    out = np.where(keep & np.isfinite(x), x, out)
    return out, _overflow(out, x)


def _int_round_to(x, d):
    """round(int, d): identity for d ≥ 0, else half away from zero at 10^-d."""
    k = np.clip(-d, 0, 19)
    p = np.power(np.int64(10), np.minimum(k, 18))
    q, _ = _int_div(x, p)
    rem = x - q * p
    q = q + np.where(2 * np.abs(rem) >= p, np.sign(x), 0)
    r, bad = _int_mul(q, p)
    huge = k == 19  # rounding to 10^19: 0 below 5·10^18, out of range above
    r = np.where(huge, 0, np.where(k == 0, x, r))
    bad = np.where(huge, np.abs(x) >= 5 * 10**18, np.where(k == 0, False, bad))
    return r, bad


def _float_sqrt(x):
    return np.sqrt(np.where(x < 0, 0.0, x)), x < 0


def _float_power(x, y):
    r = np.power(x, y)
    fin = np.isfinite(x) & np.isfinite(y)
    bad = ((x == 0.0) & (y < 0)) | ((x < 0) & np.isfinite(y) & (y != np.trunc(y)))
    bad |= _overflow(r, x, y) | ((r == 0.0) & (x != 0.0) & fin)
    return r, bad


def _float_exp(x):
    r = np.exp(x)
    return r, _overflow(r, x) | ((r == 0.0) & np.isfinite(x))


def _log_kernel(fn):
    def kernel(x):
        bad = x <= 0
        return fn(np.where(bad, 1.0, x)), bad

    return kernel


def _float_sign(x):
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, 0.0)), None


def _int_sign(x):
    return np.sign(x), None


def _identity(x):
    return x, None


# -- builders ---------------------------------------------------------------------------------


def _run(kernel: Kernel, evs: list[Evaluator], out: DataType, fills: tuple) -> Evaluator:
    at = arrow_type(out)

    def ev(cols, n):
        arrays = [e(cols, n) for e in evs]
        xs = [values(a, f) for a, f in zip(arrays, fills)]
        with np.errstate(all="ignore"):
            r, bad = kernel(*xs)
        return from_numpy(r, or_masks(*(null_mask(a) for a in arrays), bad), at)

    return ev


def _numeric(int_kernel: Kernel | None, float_kernel: Kernel, *, float_only=False) -> Builder:
    """A function of numeric arguments computed in INT when all are ints, else FLOAT."""

    def build(args: tuple[BExpr, ...], rtype: DataType, sub: CompileAs):
        kind = FLOAT if float_only else numeric_kind(*(a.type for a in args), rtype)
        if int_kernel is None:
            kind = FLOAT
        kernel = float_kernel if kind == FLOAT else int_kernel
        fill = 1.0 if kind == FLOAT else 1
        evs = [sub(a, kind) for a in args]
        return _run(kernel, evs, kind, (fill,) * len(args)), kind

    return build


def _by_arg_type(int_kernel: Kernel, float_kernel: Kernel) -> Builder:
    """A one-argument function whose result has its argument's kind (abs, floor, ...)."""

    def build(args, rtype, sub):
        kind = numeric_kind(args[0].type)
        kernel = float_kernel if kind == FLOAT else int_kernel
        return _run(kernel, [sub(args[0], kind)], kind, (1,)), kind

    return build


def _round(args, rtype, sub):
    kind = numeric_kind(args[0].type)
    if len(args) == 1:
        kernel = _float_round if kind == FLOAT else _identity
        return _run(kernel, [sub(args[0], kind)], kind, (1,)), kind
    kernel = _float_round_to if kind == FLOAT else _int_round_to
    evs = [sub(args[0], kind), sub(args[1], INT)]
    return _run(kernel, evs, kind, (1, 0)), kind


FUNCTIONS: dict[str, Builder] = {
    "add": _numeric(_int_add, _float_add),
    "sub": _numeric(_int_sub, _float_sub),
    "mul": _numeric(_int_mul, _float_mul),
    "div": _numeric(_int_div, _float_div),
    "mod": _numeric(_int_mod, _float_mod),
    "neg": _numeric(_int_neg, _float_neg),
    "abs": _by_arg_type(_int_abs, lambda x: (np.abs(x), None)),
    "round": _round,
    "floor": _by_arg_type(_identity, lambda x: (np.floor(x), None)),
    "ceil": _by_arg_type(_identity, lambda x: (np.ceil(x), None)),
    "sign": _by_arg_type(_int_sign, _float_sign),
    "sqrt": _numeric(None, _float_sqrt, float_only=True),
    "power": _numeric(None, _float_power, float_only=True),
    "exp": _numeric(None, _float_exp, float_only=True),
    "ln": _numeric(None, _log_kernel(np.log), float_only=True),
    "log10": _numeric(None, _log_kernel(np.log10), float_only=True),
}
