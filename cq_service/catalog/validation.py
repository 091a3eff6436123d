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
    if bound_ms is not None:
        if (
            isinstance(bound_ms, bool)
            or not isinstance(bound_ms, int | float)
            or not math.isfinite(bound_ms)
            or bound_ms <= 0
        ):
            raise CatalogInputError(
                f"latency_bound_ms must be a positive number of milliseconds, not {bound_ms!r}"
            )
        if scheduler != LATENCY_BOUNDED_SCHEDULER:
            chosen = "none (the configuration's or the file's)" if scheduler is None else scheduler
            raise CatalogInputError(
                f"latency_bound_ms applies to scheduler {LATENCY_BOUNDED_SCHEDULER} only, "
                f"but the scheduler is {chosen}"
            )
    elif scheduler == LATENCY_BOUNDED_SCHEDULER:
        raise CatalogInputError(
            f"scheduler {LATENCY_BOUNDED_SCHEDULER} needs latency_bound_ms (milliseconds > 0)"
        )
    if share is not None:
        if (
            isinstance(share, bool)
            or not isinstance(share, int | float)
            or not 0 <= share <= 1  # NaN fails too
        ):
            raise CatalogInputError(f"share must be a number from 0 to 1, not {share!r}")
        if scheduler != SHARE_SCHEDULER:
            chosen = "none (the configuration's or the file's)" if scheduler is None else scheduler
            raise CatalogInputError(
                f"share applies to scheduler {SHARE_SCHEDULER} only, "
                f"but the scheduler is {chosen}"
            )
    elif scheduler == SHARE_SCHEDULER:
        raise CatalogInputError(f"scheduler {SHARE_SCHEDULER} needs share (a number from 0 to 1)")
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
