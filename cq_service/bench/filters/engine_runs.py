"""One run of a filter-ordering pipeline on the engine, metered (`cq bench filters`).

A run goes the way `cq run FILE --filter-order NAME --batch-rows B` does: `load_and_compile`
then `runner.run_pipeline`, in process, both inside the timer. Only the orderer factory is the
bench's: `runner.pipeline_orderers` is replaced for the run by one that wraps each orderer the
engine asks for in a `Metered` orderer. It passes every call through unchanged and records,
per batch, the rows each conjunct was evaluated on and the extra evaluations profiling made
(profiled rows × the filters each is evaluated on), so cost per tuple comes from what the
engine did. After the run each `Select`'s `Conjunction` counters (`evaluated`, `profiled`) are
read and cross-checked against the meter.

Orders:
- an adaptive name (``a-greedy``, ``sweep``, ``independent``, ``local-swaps``): that orderer,
  with `options` (e.g. ``p``) passed to it. Every batch runs in its order (the thesis counts
  evaluations) unless `options` has ``whole_pass=True``, as the engine's own factory does: then
  the selection runs one pass whenever that measures cheaper (engine/pass_choice.py), and such
  a batch counts n evaluations per tuple;
- ``fixed``: the conjuncts one at a time in the written order, never profiled — the thesis'
  static plan (the engine's ``static`` evaluates the whole predicate at once instead, every
  conjunct on every row; the optimum is ``fixed`` with the conjuncts written in the optimal
  order);
- ``static``: the engine's own written order, the whole predicate at once (cost n per tuple).

With `timed`, `Conjunction.apply` and `Conjunction._profile` are timed too (Table 4.2's split of
filter time into tuple processing, profile creation and re-optimization); that patch is
undone after the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from cq_service import runner
from cq_service.adaptive.filter_order import ALGORITHMS
from cq_service.compiler import load_and_compile
from cq_service.engine.conjunction import Conjunction
from cq_service.engine.filter_order import ConjunctOrderer, OrdererFactory
from cq_service.engine.operators.select import Select

__all__ = ["ADAPTIVE", "BATCH_ROWS", "FixedOrder", "Metered", "RunResult", "run"]

ADAPTIVE = ("a-greedy", "sweep", "independent", "local-swaps")
BATCH_ROWS = 1000  # `cq run --batch-rows`: rows per source read and operator step


class FixedOrder:
    """The written order, one conjunct at a time, never profiled."""

    name = "fixed"

    def __init__(self, n: int, **_: Any):
        self._order = list(range(n))

    def order(self) -> Sequence[int]:
        return self._order

    def sample(self, position: int, dropped: int) -> np.ndarray:
        return np.empty(0, np.int64)

    def profile_positions(self, position: int) -> Sequence[int]:
        return ()

    def observe(self, rows, seconds, known, drops) -> None:
        pass


@dataclass
class Timings:
    """Seconds spent in the selections: all of `apply`, in `_profile`, in the orderer's
    `observe` and `reoptimize` (re-optimization)."""

    apply: float = 0.0
    profile: float = 0.0
    observe: float = 0.0


class Metered:
    """Wraps an orderer: passes every call through, records what each batch cost."""

    def __init__(self, inner: ConjunctOrderer, timings: Timings | None = None):
        self.inner = inner
        self.name = inner.name
        self.profile_batch = getattr(inner, "profile_batch", 1)  # the selection reads these
        self.whole_pass = getattr(inner, "whole_pass", False)
        if not hasattr(inner, "observe_whole"):
            self.observe_whole = None  # type: ignore[assignment]  # the selection checks
        if not hasattr(inner, "reoptimize"):  # not a StreaMon re-optimizer: none registered
            self.reoptimize = None  # type: ignore[assignment]
        self.kind = getattr(inner, "kind", inner.name)
        self.watches = getattr(inner, "watches", "")
        self.timings = timings
        self._pending = 0  # profile evaluations of the batch in progress
        self._seen = 0  # tuples of the ordered batches so far (a running sum: O(1) a batch)
        self.batches: list[tuple[int, int, int]] = []  # (tuples, evaluations, profile evals)
        self.orders: list[tuple[int, tuple[int, ...]]] = []  # (tuples before, order) on change

    def order(self) -> Sequence[int]:
        return self.inner.order()

    def sample(self, position: int, dropped: int) -> np.ndarray:
        picked = self.inner.sample(position, dropped)
        if len(picked):
            self._pending += len(picked) * len(self.inner.profile_positions(position))
        return picked

    def profile_positions(self, position: int) -> Sequence[int]:
        return self.inner.profile_positions(position)

    def observe(self, rows, seconds, known, drops) -> None:
        order = tuple(self.inner.order())
        if not self.orders or self.orders[-1][1] != order:
            self.orders.append((self._seen, order))
        self.batches.append((int(max(rows)), int(sum(rows)), self._pending))
        self._seen += self.batches[-1][0]
        self._pending = 0
        start = time.perf_counter()
        self.inner.observe(rows, seconds, known, drops)
        if self.timings is not None:
            self.timings.observe += time.perf_counter() - start

    def observe_whole(self, rows: int, seconds: Sequence[float], passes: np.ndarray) -> None:
        """A one-pass batch (not in `batches`: the selection counts it in `one_pass_rows`)."""
        order = tuple(self.inner.order())
        if not self.orders or self.orders[-1][1] != order:
            self.orders.append((self._seen, order))
        start = time.perf_counter()
        self.inner.observe_whole(rows, seconds, passes)  # type: ignore[attr-defined]
        if self.timings is not None:
            self.timings.observe += time.perf_counter() - start

    def significant(self) -> bool:
        return self.inner.significant()  # type: ignore[attr-defined]

    def reoptimize(self) -> bool:
        start = time.perf_counter()
        changed = self.inner.reoptimize()  # type: ignore[attr-defined]
        if self.timings is not None:
            self.timings.observe += time.perf_counter() - start
        return changed

    def statistics(self) -> dict[str, object]:
        return self.inner.statistics()  # type: ignore[attr-defined]

    def costs(self) -> list[float] | None:
        """The inner orderer's a_i (seconds per row per filter), if it measures them."""
        c = getattr(self.inner, "costs", None)
        return None if c is None else c.values().tolist()


@dataclass
class RunResult:
    order: str
    seconds: float
    tuples: int
    output_rows: int
    output_digest: str
    evaluations: int  # conjunct evaluations on tuples (Σ evaluated)
    profile_evaluations: int
    profiled: int  # profile tuples
    final_order: str
    batches: list[tuple[int, int, int]] = field(default_factory=list)
    orders: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    timings: Timings | None = None
    costs: list[float] | None = None
    cpu_seconds: float = (
        0.0  # the process's CPU time: less sensitive than `seconds` to a shared machine
    )

    @property
    def cost_per_tuple(self) -> float:
        return (self.evaluations + self.profile_evaluations) / max(self.tuples, 1)

    def as_json(self, *, series: bool = False) -> dict:
        out = {
            "order": self.order,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "tuples": self.tuples,
            "output_rows": self.output_rows,
            "cost_per_tuple": self.cost_per_tuple,
            "evaluations": self.evaluations,
            "profile_evaluations": self.profile_evaluations,
            "profiled": self.profiled,
            "final_order": self.final_order,
        }
        if self.costs is not None:
            out["seconds_per_row"] = self.costs
        if series:
            out["orders"] = [[t, list(o)] for t, o in self.orders]
        return out


def _factory(
    order: str, meters: list[Metered], timings: Timings | None, options: dict[str, Any]
) -> OrdererFactory:
    make = FixedOrder if order == "fixed" else ALGORITHMS[order]
    seeds = iter(range(1 << 30))

    def factory(n: int) -> ConjunctOrderer:
        m = Metered(make(n, seed=next(seeds), **options), timings)
        meters.append(m)
        return m

    return factory


@contextlib.contextmanager
def _timed(timings: Timings) -> Iterator[None]:
    """Time `Conjunction.apply` and, inside it, profile creation: keeping the sampled rows
    (`_wait`), evaluating them (`_profiles_due`) and measuring per-call overheads."""
    apply = Conjunction.apply

    def timed_apply(self: Conjunction, batch: Any) -> Any:
        start = time.perf_counter()
        try:
            return apply(self, batch)
        finally:
            timings.apply += time.perf_counter() - start

    def timing(method: Any) -> Any:
        def timed(self: Conjunction, *args: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(self, *args)
            finally:
                timings.profile += time.perf_counter() - start

        return timed

    profiling = ("_wait", "_profiles_due", "_measure_overhead")
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(Conjunction, "apply", timed_apply))
        for name in profiling:
            stack.enter_context(
                mock.patch.object(Conjunction, name, timing(getattr(Conjunction, name)))
            )
        yield


def _digest(path: Path) -> tuple[int, str]:
    """(lines, sha256) of a jsonl output."""
    h = hashlib.sha256()
    lines = 0
    if path.exists():
        with path.open("rb") as f:
            for line in f:
                h.update(line)
                lines += 1
    return lines, h.hexdigest()


def run(
    path: Path,
    order: str,
    *,
    out: Path,
    batch_rows: int = BATCH_ROWS,
    timed: bool = False,
    **options: Any,
) -> RunResult:
    """Run the pipeline at `path` (one query whose sink writes `out`) under `order`."""
    meters: list[Metered] = []
    timings = Timings() if timed else None
    out.unlink(missing_ok=True)
    patch = (
        contextlib.nullcontext()
        if order == "static"
        else mock.patch.object(
            runner, "pipeline_orderers", lambda *_a, **_k: _factory(order, meters, timings, options)
        )
    )
    with patch, _timed(timings) if timings is not None else contextlib.nullcontext():
        start, cpu = time.perf_counter(), time.process_time()
        compiled = load_and_compile(path)
        report = runner.run_pipeline(
            compiled, batch_rows=batch_rows, filter_order="static" if order == "static" else None
        )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    selects = [op.conjunction for op in report.executor.operators if isinstance(op, Select)]
    conj = max(selects, key=lambda c: len(c.conjuncts))
    tuples = sum(s["elements"] for s in report.sources.values())
    n = len(conj.conjuncts)
    evaluations = sum(conj.evaluated)  # a row evaluated in one pass counts n
    rows, digest = _digest(out)
    meter = meters[0] if meters else None
    ordered = evaluations - n * conj.one_pass_rows  # the meter sees only ordered batches
    if meter is not None and sum(b[1] for b in meter.batches) != ordered:
        raise RuntimeError("the meter and the selection's counters disagree")
    return RunResult(
        order=order,
        seconds=seconds,
        tuples=tuples,
        output_rows=rows,
        output_digest=digest,
        evaluations=evaluations,
        profile_evaluations=sum(b[2] for b in meter.batches) if meter else 0,
        profiled=conj.profiled,
        final_order=conj.describe(),
        batches=meter.batches if meter else [],
        orders=meter.orders if meter else [],
        timings=timings,
        costs=meter.costs() if meter else None,
        cpu_seconds=cpu,
    )
