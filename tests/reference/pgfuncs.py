"""Scalar functions with PostgreSQL semantics that DuckDB lacks, written directly in Python.

Each function takes and returns Python values (None is NULL) and is registered in the DuckDB
connection as a UDF by `register`. They follow docs/semantics.md:
- float -> string: PostgreSQL's shortest round-trip form (``3``, ``2.5``, ``1e+20``, ``NaN``,
  ``Infinity``);
- string -> int / float / bool: PostgreSQL's input syntax; anything else casts to NULL;
- ``substr`` with PostgreSQL's handling of a start ≤ 0;
- ``round(x[, n])`` half away from zero, as PostgreSQL's numeric round.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Context, Decimal, localcontext

__all__ = [
    "pg_float_text",
    "pg_round_float",
    "pg_round_int",
    "pg_str_to_bool",
    "pg_str_to_float",
    "pg_str_to_int",
    "pg_substr",
    "register",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_INT_RE = re.compile(r"[ \t\n\r\f\v]*[+-]?[0-9]+[ \t\n\r\f\v]*")
_FLOAT_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SPECIAL_FLOATS = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}
# PostgreSQL's parse_bool: unique prefixes of true/false/yes/no, 'on', 'off' (at least 2
# characters), '1', '0'; case-insensitive, surrounding whitespace ignored.
_BOOL_WORDS = {
    **dict.fromkeys(["t", "tr", "tru", "true", "y", "ye", "yes", "on", "1"], True),
    **dict.fromkeys(["f", "fa", "fal", "fals", "false", "n", "no", "of", "off", "0"], False),
}


def pg_float_text(x: float | None) -> str | None:
    """PostgreSQL float8out (extra_float_digits = 1): shortest digits that round-trip;
    fixed notation when the decimal exponent is in [-4, 15), else ``d.ddde+XX``."""
    if x is None:
        return None
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    text_digits = "".join(map(str, digits))
    exp10 = len(digits) + exponent - 1  # exponent of the leading digit
    minus = "-" if sign else ""
    if -4 <= exp10 < 15:
        d = Decimal((0, digits, exponent))
        return minus + format(d, "f")
    mantissa = text_digits[0] + ("." + text_digits[1:] if len(text_digits) > 1 else "")
    esign = "+" if exp10 >= 0 else "-"
    return f"{minus}{mantissa}e{esign}{abs(exp10):02d}"


def pg_str_to_int(s: str | None) -> int | None:
    if s is None or not _INT_RE.fullmatch(s):
        return None
    v = int(s.strip())
    return v if INT64_MIN <= v <= INT64_MAX else None


def pg_str_to_float(s: str | None) -> float | None:
    if s is None:
        return None
    t = s.strip()
    special = _SPECIAL_FLOATS.get(t.lower())
    if special is not None:
        return special
    if not _FLOAT_RE.fullmatch(t):
        return None
    v = float(t)
    return None if math.isinf(v) else v  # out of range


def pg_str_to_bool(s: str | None) -> bool | None:
    if s is None:
        return None
    return _BOOL_WORDS.get(s.strip().lower())


def pg_substr(s: str | None, start: int | None, length: int | None = -1) -> str | None:
    """substr(s, start[, length]): the characters at 1-based positions p with
    max(start, 1) ≤ p < start + length (no upper bound without length). A negative length is
    an error in PostgreSQL; here it gives NULL."""
    if s is None or start is None or length is None:
        return None
    if length == -1:  # two-argument form
        return s[max(start, 1) - 1 :]
    if length < 0:
        return None
    lo = max(start, 1) - 1
    hi = max(start + length - 1, 0)
    return s[lo:hi]


def pg_substr3(s: str | None, start: int | None, length: int | None) -> str | None:
    if length is not None and length < 0:
        return None
    return pg_substr(s, start, length)


def _round_decimal(d: Decimal, n: int) -> Decimal:
    with localcontext(Context(prec=2000)):
        return d.quantize(Decimal(1).scaleb(-n), rounding=ROUND_HALF_UP)


def pg_round_float(x: float | None, n: int | None) -> float | None:
    """round(x, n) half away from zero on the decimal value of x (its shortest repr)."""
    if x is None or n is None:
        return None
    if math.isnan(x) or math.isinf(x):
        return x
    return float(_round_decimal(Decimal(repr(x)), n))


def pg_round_int(x: int | None, n: int | None) -> int | None:
    if x is None or n is None:
        return None
    if n >= 0:
        return x
    return int(_round_decimal(Decimal(x), n))


def register(con) -> None:
    """Register the functions above in DuckDB connection `con`."""
    special = {"null_handling": "special"}
    con.create_function("pg_float_text", pg_float_text, ["DOUBLE"], "VARCHAR", **special)
    con.create_function("pg_str_to_int", pg_str_to_int, ["VARCHAR"], "BIGINT", **special)
    con.create_function("pg_str_to_float", pg_str_to_float, ["VARCHAR"], "DOUBLE", **special)
    con.create_function("pg_str_to_bool", pg_str_to_bool, ["VARCHAR"], "BOOLEAN", **special)
    con.create_function(
        "pg_substr2", lambda s, a: pg_substr(s, a), ["VARCHAR", "BIGINT"], "VARCHAR", **special
    )
    con.create_function(
        "pg_substr3", pg_substr3, ["VARCHAR", "BIGINT", "BIGINT"], "VARCHAR", **special
    )
    con.create_function("pg_round_float", pg_round_float, ["DOUBLE", "BIGINT"], "DOUBLE", **special)
    con.create_function("pg_round_int", pg_round_int, ["BIGINT", "BIGINT"], "BIGINT", **special)
