"""Quantities as written in pipeline files: durations (``"5 seconds"``, ``"500 ms"``) in whole
time units, and sizes (``"64 MiB"``, ``"1 GB"``) in bytes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

from cq_service.spec.model import TIME_UNITS

__all__ = ["parse_duration", "parse_size"]

# Duration unit spellings (lower case) -> nanoseconds.
_DURATION_UNITS: Mapping[str, int] = {
    **{u: 1 for u in ("ns", "nanosecond", "nanoseconds")},
    **{u: 1_000 for u in ("us", "microsecond", "microseconds")},
    **{u: 1_000_000 for u in ("ms", "millisecond", "milliseconds")},
    **{u: 1_000_000_000 for u in ("s", "sec", "secs", "second", "seconds")},
    **{u: 60_000_000_000 for u in ("min", "mins", "minute", "minutes")},
    **{u: 3_600_000_000_000 for u in ("h", "hour", "hours")},
    **{u: 86_400_000_000_000 for u in ("d", "day", "days")},
}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*$")
_SIZE_UNITS: Mapping[str, int] = {
    "B": 1,
    **{f"{p}B": 1000 ** (k + 1) for k, p in enumerate("KMGT")},
    **{f"{p}iB": 1024 ** (k + 1) for k, p in enumerate("KMGT")},
}


def parse_duration(text: str, time_unit: str) -> int:
    """A duration such as ``"5 seconds"`` or ``"500 ms"`` as a whole number of `time_unit`.

    Raises ValueError for an unknown unit or a duration that is not a whole number of units.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not a duration such as '5 seconds' or '500 ms'")
    number, unit = match.groups()
    unit_ns = _DURATION_UNITS.get(unit.lower())
    if unit_ns is None:
        raise ValueError(
            f"unknown unit '{unit}' in duration '{text.strip()}' "
            "(use ns, us, ms, s, min, h, d or their names, e.g. 'seconds')"
        )
    units = Fraction(number) * unit_ns / TIME_UNITS[time_unit]
    if units.denominator != 1:
        raise ValueError(f"duration '{text.strip()}' is not a whole number of {time_unit}")
    return int(units)


def parse_size(text: str) -> int:
    """A size such as ``"64 MiB"`` in bytes: a number with B, KB, MiB, ... or none (1 KB =
    1000 B, 1 KiB = 1024 B).

    Raises ValueError for a text that is not a size or not a whole number of bytes > 0.
    """
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"'{text.strip()}' is not a size such as '64 MiB' or '1 GB'")
    number, unit = match.groups()
    size = Fraction(number) * _SIZE_UNITS[unit or "B"]
    if size.denominator != 1 or size <= 0:
        raise ValueError(f"'{text.strip()}' is not a whole number of bytes > 0")
    return int(size)
