"""CAST between the column types, with PostgreSQL's conversions (vectorised).

- int → float is exact where a double can hold the value (nearest double otherwise);
- float → int rounds half to even (PostgreSQL's float8 → int8); NaN, ±Infinity and values out
  of the int64 range become NULL;
- numbers → string use PostgreSQL's text form (`float_to_text`), bool → string is
  ``true``/``false``;
- string → int/float/bool parse as PostgreSQL's input functions do (surrounding whitespace
  allowed); text that does not parse becomes NULL instead of an error;
- bool ↔ int is 1/0 and "non-zero is true"; timestamp behaves as int.

Example: ``convert(pa.array([2.5, 3.5]), FLOAT, INT)`` is ``[2, 4]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.types import DataType, arrow_type

from ._arrays import (
    BOOL,
    FLOAT,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    broadcast,
    from_numpy,
    null_mask,
    per_distinct,
    values,
)

__all__ = ["convert", "float_to_text", "to_text"]

_SPACE = " \t\n\r\f\v"  # what PostgreSQL's input functions skip (C isspace)
_I64_LIMIT = 2.0**63


def _kind(t: DataType) -> DataType:
    return INT if t == TIMESTAMP else t


def convert(arr: pa.Array, src: DataType, dst: DataType) -> pa.Array:
    """`arr` (values of type `src`) cast to `dst`; never raises on data."""
    s, d = _kind(src), _kind(dst)
    if s == d:
        return arr
    if s == NULL or d == NULL:
        return pa.nulls(len(arr), arrow_type(dst))
    fn = _CONVERSIONS.get((s, d))
    if fn is None:
        raise NotImplementedError(f"CAST from {src} to {dst}")
    return fn(arr)


# -- numbers and bools ------------------------------------------------------------------------


def _int_to_float(arr: pa.Array) -> pa.Array:
    return from_numpy(values(arr, 0).astype(np.float64), null_mask(arr), pa.float64())


def _float_to_int(arr: pa.Array) -> pa.Array:
    r = np.rint(values(arr, 0.0))
    ok = (r >= -_I64_LIMIT) & (r < _I64_LIMIT)  # False for NaN too
    mask = ~ok
    nm = null_mask(arr)
    if nm is not None:
        mask |= nm
    return from_numpy(np.where(ok, r, 0.0).astype(np.int64), mask, pa.int64())


def _to_bool(arr: pa.Array) -> pa.Array:
    return pc.not_equal(arr, pa.scalar(0, type=arr.type))


def _bool_to_int(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.int64())


def _bool_to_float(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.float64())


# -- to text ----------------------------------------------------------------------------------


def to_text(arr: pa.Array, src: DataType, *, bool_style: str = "cast") -> pa.Array:
    """`arr` as text. `bool_style` ``"cast"`` gives true/false (``CAST``, ``||``);
    ``"output"`` gives t/f (PostgreSQL's output function, used by ``concat``)."""
    if _kind(src) == BOOL and bool_style == "output":
        return pc.if_else(arr, "t", "f")
    return convert(arr, src, STRING)


def _bool_to_text(arr: pa.Array) -> pa.Array:
    return pc.if_else(arr, "true", "false")


def _int_to_text(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.string())


_SHORTEST = r"^(?P<neg>-?)(?P<int>\d+)(?:\.(?P<frac>\d+))?(?:e(?P<exp>[+-]?\d+))?$"


def float_to_text(arr: pa.Array) -> pa.Array:
    """PostgreSQL's float8 text form: the shortest digits that read back as the same double,
    written positionally when the decimal exponent is in [-4, 15), else as ``d.ddde±XX``;
    ``NaN``, ``Infinity``, ``-Infinity``, ``-0``.

    Arrow's cast gives the shortest digits (in its own layout); they are re-laid out here.
    """
    n = len(arr)
    v = values(arr, 1.0)
    special = ~np.isfinite(v) | (v == 0.0)
    nm = null_mask(arr)
    parts = pc.extract_regex(pc.cast(arr, pa.string()), _SHORTEST)
    int_part = pc.struct_field(parts, "int")
    digits = pc.binary_join_element_wise(int_part, pc.struct_field(parts, "frac"), "")
    stripped = pc.utf8_ltrim(digits, "0")
    lead_zeros = pc.subtract(pc.utf8_length(digits), pc.utf8_length(stripped))
    exp_text = pc.utf8_ltrim(pc.struct_field(parts, "exp"), "+")
    exp = pc.cast(pc.if_else(pc.equal(exp_text, ""), "0", exp_text), pa.int64())
    int_len = pc.cast(pc.utf8_length(int_part), pa.int64())
    e10 = values(pc.subtract(pc.add(exp, int_len), lead_zeros), 1).astype(np.int64) - 1
    sci = (e10 < -4) | (e10 >= 15)
    key = np.where(sci, 100, e10)
    key_mask = special if nm is None else special | nm
    exp_str = pc.binary_join_element_wise(
        pc.if_else(pa.array(e10 < 0), "e-", "e+"),
        pc.utf8_lpad(pc.cast(pa.array(np.abs(e10)), pa.string()), 2, "0"),
        "",
    )
    laid_out = per_distinct(
        [pc.utf8_rtrim(stripped, "0"), pc.struct_field(parts, "neg"), exp_str],
        [pa.array(key, mask=key_mask)],
        _layout,
        pa.string(),
    )
    if not special.any():
        return laid_out
    raw = values(arr, 0.0)
    words = np.full(n, None, dtype=object)
    words[np.isnan(raw)] = "NaN"
    words[raw == np.inf] = "Infinity"
    words[raw == -np.inf] = "-Infinity"
    zero = raw == 0.0
    words[zero & np.signbit(raw)] = "-0"
    words[zero & ~np.signbit(raw)] = "0"
    fill = pa.array(words, type=pa.string())
    pick = pa.array(special if nm is None else special & ~nm)
    return pc.if_else(pick, fill, laid_out)


def _layout(data: list[pa.Array], opts: tuple) -> pa.Array:
    """Lay out significant digits `d` (no leading/trailing zeros) with decimal exponent `e`
    (the key; 100 means scientific with the exponent text in data[2])."""
    d, neg, exp_str = data
    (e,) = opts
    if e == 100:
        head = pc.utf8_slice_codeunits(d, 0, 1)
        tail = pc.utf8_slice_codeunits(d, 1)
        body = pc.binary_join_element_wise(head, _dot_prefixed(tail), exp_str, "")
    elif e >= 0:
        whole = pc.utf8_rpad(pc.utf8_slice_codeunits(d, 0, e + 1), e + 1, "0")
        body = pc.binary_join_element_wise(
            whole, _dot_prefixed(pc.utf8_slice_codeunits(d, e + 1)), ""
        )
    else:
        body = pc.binary_join_element_wise(pa.scalar("0." + "0" * (-e - 1)), d, "")
    return pc.binary_join_element_wise(neg, body, "")


def _dot_prefixed(s: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(s, ""), "", pc.binary_join_element_wise(".", s, ""))


# -- from text --------------------------------------------------------------------------------

_INT_RE = r"^[+-]?[0-9]+$"
_FLOAT_RE = r"^[+-]?(inf|infinity|nan|([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?)$"
_TRUE = ["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"]
_FALSE = ["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"]
_I64_MAX_DIGITS = "9223372036854775807"
_I64_MIN_DIGITS = "9223372036854775808"


def _null_unless(ok: pa.Array, arr: pa.Array) -> pa.Array:
    return pc.if_else(ok, arr, pa.scalar(None, type=arr.type))


def _text_to_int(arr: pa.Array) -> pa.Array:
    s = pc.utf8_trim(arr, _SPACE)
    ok = pc.match_substring_regex(s, _INT_RE)
    negative = pc.starts_with(s, "-")
    digits = pc.utf8_ltrim(pc.utf8_ltrim(s, "+-"), "0")
    ndig = pc.utf8_length(digits)
    limit = pc.if_else(negative, _I64_MIN_DIGITS, _I64_MAX_DIGITS)
    in_range = pc.or_(pc.less(ndig, 19), pc.and_(pc.equal(ndig, 19), pc.less_equal(digits, limit)))
    ok = pc.and_(ok, in_range)
    signed = pc.binary_join_element_wise(pc.if_else(negative, "-", ""), digits, "")
    signed = pc.if_else(pc.equal(digits, ""), "0", signed)
    return pc.cast(_null_unless(ok, signed), pa.int64())


def _text_to_float(arr: pa.Array) -> pa.Array:
    s = pc.utf8_trim(arr, _SPACE)
    ok = pc.match_substring_regex(s, _FLOAT_RE, ignore_case=True)
    out = pc.cast(_null_unless(ok, s), pa.float64())
    v = values(out, 0.0)
    # Out of range: PostgreSQL rejects overflow to ±inf and underflow of non-zero digits to 0.
    bad = np.isinf(v) | (v == 0.0)
    if bad.any():
        word = pc.match_substring_regex(s, "inf", ignore_case=True)
        mantissa = pc.replace_substring_regex(s, "[eE].*$", "")
        nonzero = pc.match_substring_regex(mantissa, "[1-9]")
        wrong = pc.if_else(pa.array(np.isinf(v)), pc.invert(word), nonzero)
        out = _null_unless(pc.invert(pc.and_(pa.array(bad), wrong)), out)
    return out


def _text_to_bool(arr: pa.Array) -> pa.Array:
    s = pc.utf8_lower(pc.utf8_trim(arr, _SPACE))
    yes = pc.is_in(s, value_set=pa.array(_TRUE))
    no = pc.is_in(s, value_set=pa.array(_FALSE))
    return _null_unless(pc.or_(yes, no), yes)


_CONVERSIONS = {
    (INT, FLOAT): _int_to_float,
    (FLOAT, INT): _float_to_int,
    (INT, BOOL): _to_bool,
    (FLOAT, BOOL): _to_bool,
    (BOOL, INT): _bool_to_int,
    (BOOL, FLOAT): _bool_to_float,
    (INT, STRING): _int_to_text,
    (FLOAT, STRING): float_to_text,
    (BOOL, STRING): _bool_to_text,
    (STRING, INT): _text_to_int,
    (STRING, FLOAT): _text_to_float,
    (STRING, BOOL): _text_to_bool,
}


def convert_scalar(value: object, src: DataType, dst: DataType) -> object:
    """`convert` for one Python value (used when folding constants)."""
    return convert(broadcast(value, src, 1), src, dst)[0].as_py()
