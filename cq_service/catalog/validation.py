"""Checks of the values callers hand the catalog: each returns the value as stored or raises
`CatalogInputError` with what was wrong."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cq_service.catalog.exceptions import CatalogInputError
from cq_service.spec.model import LATENCY_BOUNDED_SCHEDULER, SCHEDULERS, SHARE_SCHEDULER

__all__ = [
    "check_choice",
    "int64_or_none",
    "json_value",
    "scheduler_control",
    "valid_budget",
    "valid_qos",
    "valid_weight",
]

_INT64 = (-(2**63), 2**63 - 1)


def check_choice(what: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise CatalogInputError(f"{what} must be one of {', '.join(allowed)}, not {value!r}")


def valid_weight(weight: float) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise CatalogInputError(f"weight must be a number, not {weight!r}")
    if not math.isfinite(weight) or weight <= 0:
        raise CatalogInputError(f"weight must be a positive number, not {weight!r}")
    return float(weight)


def valid_budget(budget: int | None) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise CatalogInputError(f"memory_budget must be a positive integer (bytes), not {budget!r}")
    return int64_or_none("memory_budget", budget)


def valid_qos(qos: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """QoS ranges: {setting: [min, max]} with min <= max."""
    if not isinstance(qos, Mapping):
        raise CatalogInputError(f"qos must map settings to [min, max], not {qos!r}")
    out: dict[str, list[float]] = {}
    for key, bounds in qos.items():
        ok = (
            isinstance(bounds, Sequence)
            and not isinstance(bounds, str)
            and len(bounds) == 2
            and all(
                isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b)
                for b in bounds
            )
        )
        if not ok or bounds[0] > bounds[1]:
            raise CatalogInputError(
                f"qos {key!r} must be a range [min, max] of numbers with min <= max, not {bounds!r}"
            )
        out[str(key)] = [bounds[0], bounds[1]]
    return out


def scheduler_control(
    scheduler: str | None, bound_ms: float | None, share: float | None = None
) -> dict[str, Any]:
    """A pipeline control's scheduler, latency bound and share, checked together."""
    if scheduler is not None and scheduler not in SCHEDULERS:
        raise CatalogInputError(f"unknown scheduler {scheduler!r} (known: {', '.join(SCHEDULERS)})")
    settings = (  # each scheduler's own setting: its value, whether valid, the words for it
        (
            "latency_bound_ms", bound_ms, LATENCY_BOUNDED_SCHEDULER,
            lambda v: math.isfinite(v) and v > 0,
            "a positive number of milliseconds", "milliseconds > 0",
        ),
        ("share", share, SHARE_SCHEDULER, lambda v: 0 <= v <= 1, "a number from 0 to 1",
         "a number from 0 to 1"),  # NaN fails the range too
    )
    for key, value, owner, valid, wanted, needs in settings:
        if value is None:
            if scheduler == owner:
                raise CatalogInputError(f"scheduler {owner} needs {key} ({needs})")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not valid(value):
            raise CatalogInputError(f"{key} must be {wanted}, not {value!r}")
        if scheduler != owner:
            chosen = "none (the configuration's or the file's)" if scheduler is None else scheduler
            raise CatalogInputError(
                f"{key} applies to scheduler {owner} only, but the scheduler is {chosen}"
            )
    return {
        "scheduler": scheduler,
        "latency_bound_ms": None if bound_ms is None else float(bound_ms),
        "share": None if share is None else float(share),
    }


def int64_or_none(what: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CatalogInputError(f"{what} must be an integer, not {value!r}")
    if not _INT64[0] <= value <= _INT64[1]:
        raise CatalogInputError(f"{what} {value} is out of the 64-bit range")
    return value


def json_value(what: str, value: Any) -> Any:
    """`value` as it will read back from a JSON column (no NaN, string keys)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise CatalogInputError(f"{what} is not JSON: {e}") from None
