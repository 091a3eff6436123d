"""What a selection's conjuncts cost per batch: one pass, ordered, or chosen (docs/adaptive.md,
"One pass or ordered").

One `Select` in process, fed the same batches three ways, interleaved, in the same process:
``static`` (the whole predicate in one pass), ``ordered`` (A-Greedy, every batch one conjunct
at a time on the survivors, profiling) and ``a-greedy`` (as the engine runs it: one pass
whenever that measures cheaper, engine/pass_choice.py). Two predicates:

- ``cheap``: three integer comparisons, ``a < 90 AND b < 50 AND a + b > 10``;
- ``like``: ``s LIKE '%cq-match%' AND a < 50 AND b < 50`` over 256-character strings, the LIKE
  written first (half the strings hold the needle; a and b each keep half the rows).

The figure is milliseconds per batch (medians of --repeat runs of --batches batches, after one
warm-up run), for batches of 50, 1,000 and 5,000 rows.

    .venv/bin/python benchmarks/filter_pass.py [--batches 600] [--repeat 5] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from cq_service.adaptive.filter_order import AGreedy
from cq_service.cql.logical import BExpr, Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.filter_order import StaticOrder
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Queue
from cq_service.types import DataType

INT, BOOL, STRING = DataType.INT, DataType.BOOL, DataType.STRING
TYPES = [INT, INT, STRING]
A, B, S = ColRef(0, INT, "a"), ColRef(1, INT, "b"), ColRef(2, STRING, "s")
NEEDLE = "cq-match"


def _and(*xs: BExpr) -> BExpr:
    e = xs[0]
    for x in xs[1:]:
        e = Call("and", (e, x), BOOL)
    return e


def _cmp(fn: str, left: BExpr, value: int) -> BExpr:
    return Call(fn, (left, Const(value, INT)), BOOL)


PREDICATES = {
    "cheap": _and(
        _cmp("lt", A, 90), _cmp("lt", B, 50), _cmp("gt", Call("add", (A, B), INT), 10)
    ),
    "like": _and(
        Call("like", (S, Const(f"%{NEEDLE}%", STRING)), BOOL), _cmp("lt", A, 50), _cmp("lt", B, 50)
    ),
}

WAYS = {
    "static": lambda n: StaticOrder(n),
    "ordered": lambda n: AGreedy(n, seed=0),
    "a-greedy": lambda n: AGreedy(n, seed=0, whole_pass=True),
}


def _batches(rows: int, count: int, seed: int = 1) -> list[Batch]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        a = rng.integers(0, 100, rows)
        b = rng.integers(0, 100, rows)
        letters = rng.integers(ord("a"), ord("z") + 1, size=(rows, 256), dtype=np.uint8)
        hit = rng.random(rows) < 0.5
        letters[hit, 100 : 100 + len(NEEDLE)] = np.frombuffer(NEEDLE.encode(), np.uint8)
        s = [bytes(r).decode() for r in letters]
        ts = np.full(rows, i, dtype=np.int64)
        out.append(
            Batch.from_rows(list(zip(a.tolist(), b.tolist(), s, strict=True)), ts,
                            np.ones(rows, np.int64), TYPES)
        )
    return out


def _run(predicate: BExpr, way: str, batches: list[Batch]) -> float:
    """Seconds to select `batches` (a fresh operator, planning excluded: it is one Select)."""
    op = Select("#s", [], Queue("q"), predicate, WAYS[way])
    op.out_types = TYPES
    op.emit = lambda _b: None  # type: ignore[method-assign]
    start = time.perf_counter()
    for bt in batches:
        op.on_batch(bt)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="60 batches, 2 repeats")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    count, repeat = (60, 2) if args.quick else (args.batches, args.repeat)
    results: dict[str, dict[int, dict[str, float]]] = {}
    for name, predicate in PREDICATES.items():
        results[name] = {}
        for rows in (50, 1000, 5000):
            # Few distinct batches, reused: building 256-character strings dominates otherwise.
            distinct = _batches(rows, 20)
            batches = [distinct[i % len(distinct)] for i in range(count)]
            for way in WAYS:
                _run(predicate, way, batches)  # warm-up
            seconds: dict[str, list[float]] = {way: [] for way in WAYS}
            for _ in range(repeat):
                for way in WAYS:
                    seconds[way].append(_run(predicate, way, batches))
            per = {w: statistics.median(s) / count * 1e3 for w, s in seconds.items()}
            results[name][rows] = per
            if not args.json:
                print(
                    f"{name:5} batches of {rows:5,}: "
                    + ", ".join(f"{w} {ms:.3f} ms" for w, ms in per.items())
                    + f"  (a-greedy / static {per['a-greedy'] / per['static']:.2f}x)"
                )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
