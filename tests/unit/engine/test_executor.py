"""The executor: a small multi-query pipeline (windows, join, aggregates, a view, DISTINCT,
IN, UNION, Istream/Dstream/Rstream, out-of-order and late input) gives the same results
whatever the budget, the source chunk size and the scheduling order."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import numpy as np
import pytest

from cq_service.compiler import compile_pipeline
from cq_service.engine.build import SourceOptions, build_executor
from cq_service.engine.scheduler import (
    Chain,
    ChainBounded,
    ChainShare,
    Fifo,
    Greedy,
    RoundRobin,
)
from cq_service.io import open_source
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from tests.unit.engine.runs import Collect

PIPELINE = """\
version: 1
name: executor-test
time_unit: s
streams:
  S:
    schema: {k: int, v: int, tag: string}
    timestamp: ts
    max_delay: 2
    source: {type: file, path: data/s.csv, format: csv}
relations:
  R:
    schema: {k: int, name: string}
    timestamp: ts
    source: {type: file, path: data/r.csv, format: csv}
queries:
  joined:
    cql: SELECT Istream(S.v, R.name) FROM S [Range 3], R WHERE S.k = R.k
    sink: {type: file, path: out/joined.jsonl, format: jsonl}
  counts:
    cql: SELECT k, COUNT(*) AS n, MAX(v) AS m FROM S [Rows 4] GROUP BY k
    sink: {type: file, path: out/counts.jsonl, format: jsonl}
  total:
    cql: SELECT COUNT(*) AS n, MIN(v) AS lo FROM S [Range 5 Slide 2]
    sink: {type: file, path: out/total.jsonl, format: jsonl}
  recent:
    cql: SELECT k, tag FROM S [Partition By k Rows 2]
  tags:
    cql: SELECT DISTINCT tag FROM recent
    sink: {type: file, path: out/tags.jsonl, format: jsonl}
  known:
    cql: SELECT Rstream(k, v) FROM S [Now] WHERE k IN (SELECT k FROM R)
    sink: {type: file, path: out/known.jsonl, format: jsonl}
  gone:
    cql: SELECT Dstream(k) FROM S [Range 2]
    sink: {type: file, path: out/gone.jsonl, format: jsonl}
  both:
    cql: SELECT k FROM S [Rows 3] UNION SELECT k FROM R
    sink: {type: file, path: out/both.jsonl, format: jsonl}
"""
QUERIES = ["joined", "counts", "total", "tags", "known", "gone", "both"]


def write_pipeline(root: Path) -> Path:
    """The pipeline and its data under `root` (deterministic pseudo-random input)."""
    rnd = random.Random(5)
    (root / "data").mkdir(parents=True)
    lines = ["ts,k,v,tag"]
    t = 0
    for _ in range(300):
        t += rnd.choice([0, 0, 1, 1, 2])
        ts = max(0, t - rnd.choice([0, 0, 0, 1, 2, 5]))  # some reordering, some late
        k = rnd.choice(["", "1", "2", "3", "4"])
        lines.append(f"{ts},{k},{rnd.randint(-5, 20)},{rnd.choice('xyz')}")
    (root / "data" / "s.csv").write_text("\n".join(lines) + "\n")
    (root / "data" / "r.csv").write_text(
        textwrap.dedent(
            """\
            ts,_op,k,name
            0,+,1,one
            0,+,2,two
            40,+,3,three
            80,-,1,one
            90,+,,nul
            120,-,2,two
            130,+,1,uno
            """
        )
    )
    path = root / "pipeline.yaml"
    path.write_text(PIPELINE)
    return path


@pytest.fixture(scope="module")
def pipeline_dir(tmp_path_factory) -> Path:
    return write_pipeline(tmp_path_factory.mktemp("pipeline")).parent


def outputs(root: Path) -> dict[str, str]:
    return {q: (root / "out" / f"{q}.jsonl").read_text() for q in QUERIES}


def run_with_batch_rows(src: Path, dst: Path, batch_rows: int) -> dict[str, str]:
    path = write_pipeline(dst)
    assert path.read_text() == (src / "pipeline.yaml").read_text()
    report = run_pipeline(compile_pipeline(load_pipeline(path)), batch_rows=batch_rows)
    assert report.sources["S"]["late"] > 0  # the input does exercise late elements
    return outputs(dst)


def canonical_file(text: str) -> list[tuple]:
    """The lines of a result file, each instant's lines sorted (− first, then by row)."""
    lines = [json.loads(line) for line in text.splitlines()]
    keys = [(d["_ts"], d["_op"] != "-") for d in lines]
    assert keys == sorted(keys), "lines not in _ts order with − before + within an instant"
    return sorted((k, json.dumps(d, sort_keys=True)) for k, d in zip(keys, lines))


def test_results_do_not_depend_on_batch_rows(pipeline_dir, tmp_path):
    base = run_with_batch_rows(pipeline_dir, tmp_path / "big", 65_536)
    assert all(base[q] for q in QUERIES), "every query produces output"
    for rows in (1, 7, 64):
        got = run_with_batch_rows(pipeline_dir, tmp_path / f"b{rows}", rows)
        for q in QUERIES:
            assert canonical_file(got[q]) == canonical_file(base[q]), (rows, q)


def test_output_files_are_byte_identical_for_any_batch_rows(pipeline_dir, tmp_path):
    """Reproducible runs: not only the same bag per instant, the same file."""
    base = run_with_batch_rows(pipeline_dir, tmp_path / "big", 65_536)
    for rows in (1, 7, 64):
        got = run_with_batch_rows(pipeline_dir, tmp_path / f"b{rows}", rows)
        differing = [q for q in QUERIES if got[q] != base[q]]
        assert not differing, f"batch_rows={rows}: line order differs in {differing}"


# -- budgets and scheduling orders ------------------------------------------------------------


class RandomOrder:
    """Picks a random runnable operator (seeded)."""

    name = "random"

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def attach(self, operators):
        pass

    def choose(self, operators):
        runnable = [op for op in operators if op.runnable()]
        return self.rng.choice(runnable) if runnable else None


class DownstreamFirst:
    """Always the last runnable operator in plan order (drains queues eagerly)."""

    name = "downstream_first"

    def attach(self, operators):
        pass

    def choose(self, operators):
        for op in reversed(operators):
            if op.runnable():
                return op
        return None


class SourcesFirst:
    """Reads every source to the end before running anything else."""

    name = "sources_first"

    def attach(self, operators):
        pass

    def choose(self, operators):
        runnable = [op for op in operators if op.runnable()]
        if not runnable:
            return None
        srcs = [op for op in runnable if op.kind == "source"]
        return (srcs or runnable)[0]


def run_executor(root: Path, *, budget: int, policy, batch_rows: int = 16) -> dict[str, list]:
    spec = load_pipeline(root / "pipeline.yaml")
    compiled = compile_pipeline(spec)
    inputs = {**spec.streams, **spec.relations}
    readers = {n: open_source(s, spec.time_unit, batch_rows) for n, s in inputs.items()}
    options = {n: SourceOptions(s.is_relation, s.max_delay, s.late) for n, s in inputs.items()}
    writers = {s.query: Collect() for s in compiled.plan.sinks}
    executor = build_executor(
        compiled.plan,
        readers=readers,
        writers=writers,
        options=options,
        policy=policy,
        budget=budget,
    )
    try:
        executor.run()
    finally:
        for r in readers.values():
            r.close()
    for q in executor.queues:
        assert q.rows == 0, f"queue {q.name} not drained"
    return {q: w.out for q, w in writers.items()}


def canonical(out: dict[str, list]) -> dict[str, list]:
    """Each query's lines, checked for order (_ts, − before +) and sorted within an instant."""
    result = {}
    for q, lines in out.items():
        keys = [(t, op) for t, op, _ in lines]
        assert keys == sorted(keys), f"{q}: lines not in _ts order with − before +"
        result[q] = sorted(lines, key=lambda line: (line[0], line[1], repr(line[2])))
    return result


@pytest.fixture(scope="module")
def reference(pipeline_dir) -> dict[str, list]:
    return canonical(run_executor(pipeline_dir, budget=65_536, policy=RoundRobin()))


@pytest.mark.parametrize("budget", [1, 7, 65_536])
@pytest.mark.parametrize("batch_rows", [1, 16])
def test_round_robin_budgets_give_identical_results(pipeline_dir, reference, budget, batch_rows):
    got = run_executor(pipeline_dir, budget=budget, policy=RoundRobin(), batch_rows=batch_rows)
    assert canonical(got) == reference


ORDERS = {
    "random1": lambda: RandomOrder(1),
    "random2": lambda: RandomOrder(2),
    "downstream_first": DownstreamFirst,
    "sources_first": SourcesFirst,
    "fifo": Fifo,
    "greedy": Greedy,
    "chain": Chain,
    "chain_bounded_0": lambda: ChainBounded(0.0),
    "chain_bounded_1ms": lambda: ChainBounded(0.001),
    "chain_share_quarter": lambda: ChainShare(0.25),
    "chain_share_half": lambda: ChainShare(0.5),
}


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("budget", [1, 7])
def test_other_scheduling_orders_give_identical_results(pipeline_dir, reference, order, budget):
    policy = ORDERS[order]()
    assert canonical(run_executor(pipeline_dir, budget=budget, policy=policy)) == reference


def test_run_pipeline_matches_executor(pipeline_dir, reference, tmp_path):
    files = run_with_batch_rows(pipeline_dir, tmp_path / "p", 16)
    for q in QUERIES:
        lines = [json.loads(line) for line in files[q].splitlines()]
        got = [(d["_ts"], 1 if d["_op"] == "+" else -1) for d in lines]
        assert got == [(t, op) for t, op, _ in reference[q]]


def test_memory_is_sampled(pipeline_dir):
    spec = load_pipeline(pipeline_dir / "pipeline.yaml")
    compiled = compile_pipeline(spec)
    inputs = {**spec.streams, **spec.relations}
    readers = {n: open_source(s, spec.time_unit, 8) for n, s in inputs.items()}
    options = {n: SourceOptions(s.is_relation, s.max_delay, s.late) for n, s in inputs.items()}
    executor = build_executor(
        compiled.plan,
        readers=readers,
        writers={s.query: Collect() for s in compiled.plan.sinks},
        options=options,
    )
    executor.run()
    assert executor.steps > 0
    assert executor.memory.peak_total_bytes > 0
    assert any(u.peak_rows > 0 for u in executor.memory.synopses.values())
    assert np.all([q.rows == 0 for q in executor.queues])
