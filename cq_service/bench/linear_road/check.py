"""Run the Linear Road queries in CQL (pipelines/linear-road/linear-road.yaml) with the engine and
compare every output row with the independent validator's (docs/linear-road.md, "The queries")."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cq_service.bench.linear_road.validator import Expected, minute, validate

__all__ = [
    "OUTPUTS",
    "PIPELINE",
    "Comparison",
    "check",
    "comparable_expected",
    "read_outputs",
    "run_engine",
    "write_input",
]

PIPELINE = Path(__file__).resolve().parents[3] / "pipelines" / "linear-road" / "linear-road.yaml"
# The pipeline's file sinks, named as the validator's outputs.
OUTPUTS = ("tolls", "accident_alerts", "balances", "accidents", "segment_stats")


@dataclass
class Comparison:
    """Rows per output: the engine's, the validator's, and those only one side has."""

    engine: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    only_engine: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    only_expected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0  # the engine's run

    @property
    def equal(self) -> bool:
        return not any(self.only_engine.values()) and not any(self.only_expected.values())


def write_input(rows: Iterable[Mapping[str, int]], workdir: Path) -> None:
    """Writes ``rows`` to workdir/data/input.jsonl, where the pipeline reads them."""
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    with (workdir / "data" / "input.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(dict(r), separators=(",", ":")) + "\n")


def read_outputs(workdir: Path) -> dict[str, list]:
    """Each sink's rows in workdir/out (without ``_ts``/``_op``; every result is a stream of
    ``+`` elements)."""
    out: dict[str, list] = {}
    for name in OUTPUTS:
        got = []
        with (workdir / "out" / f"{name}.jsonl").open() as f:
            for line in f:
                row = json.loads(line)
                if row.pop("_op") != "+":
                    raise AssertionError(f"{name}: a retraction in a stream result: {line}")
                row.pop("_ts")
                got.append(row)
        out[name] = got
    return out


def run_engine(rows: Iterable[Mapping[str, int]], workdir: Path) -> tuple[dict[str, list], float]:
    """Writes ``rows`` to workdir/data/input.jsonl, runs the pipeline there, and returns each
    sink's rows (`read_outputs`) and the run's wall time in seconds."""
    from cq_service.compiler import load_and_compile
    from cq_service.runner import run_pipeline

    write_input(rows, workdir)
    shutil.copy(PIPELINE, workdir / PIPELINE.name)
    start = time.perf_counter()
    run_pipeline(load_and_compile(workdir / PIPELINE.name))
    seconds = time.perf_counter() - start
    return read_outputs(workdir), seconds


def comparable_expected(expected: Expected, last_time: int) -> dict[str, list]:
    """The validator's rows the engine can produce: accidents once cleared (the engine writes an
    accident when it clears) and the statistics of minutes before the last report's (a minute
    is final for the engine only once a later one starts)."""
    last_minute = minute(last_time)
    return {
        "tolls": expected.tolls,
        "accident_alerts": expected.accident_alerts,
        "balances": expected.balances,
        "accidents": [a for a in expected.accidents if a["cleared"] >= 0],
        "segment_stats": [s for s in expected.segment_stats if s["minute"] < last_minute],
    }


def _key(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def check(rows: list[Mapping[str, int]], workdir: Path) -> Comparison:
    """Runs the engine and the validator on ``rows`` (in time order) and compares every row."""
    got, seconds = run_engine(rows, workdir)
    last = max((int(r["time"]) for r in rows), default=0)
    want = comparable_expected(validate(rows), last)
    result = Comparison(seconds=seconds)
    for name in OUTPUTS:
        g = sorted(got[name], key=_key)
        e = sorted(want[name], key=_key)
        result.engine[name], result.expected[name] = len(g), len(e)
        gk = [_key(r) for r in g]
        ek = [_key(r) for r in e]
        result.only_engine[name] = _bag_minus(g, gk, ek)
        result.only_expected[name] = _bag_minus(e, ek, gk)
    return result


def _bag_minus(rows: list, keys: list[str], other: list[str]) -> list:
    counts: dict[str, int] = {}
    for k in other:
        counts[k] = counts.get(k, 0) + 1
    left = []
    for r, k in zip(rows, keys, strict=True):
        if counts.get(k, 0):
            counts[k] -= 1
        else:
            left.append(r)
    return left
