"""QoS ranges per query and memory/CPU budgets per deployment (issue 6, part 1)."""

from __future__ import annotations

import pytest

from cq_service.compiler import compile_pipeline
from cq_service.spec.exceptions import SpecErrors
from cq_service.spec.model import QosSpec, WindowRange

HEADER = """\
version: 1
name: p
time_unit: ms
streams:
  S:
    schema: {k: int}
    timestamp: ts
    source: {type: file, path: s.csv}
queries:
  q:
    cql: SELECT COUNT(*) FROM S [Range 10 Seconds] AS A
"""


@pytest.fixture
def files(pipeline_dir):
    (pipeline_dir / "s.csv").write_text("ts,k\n1,1\n")
    return pipeline_dir


def test_ranges_ladder_and_budgets(load, files):
    spec = load(HEADER + """\
    qos:
      window: [2 seconds, 10 s]
      granularity: [1 ms, 10 ms, 1 s]
resources:
  memory_budget: 64 MiB
""")
    qos = spec.queries["q"].qos
    assert qos == QosSpec((WindowRange(None, 2_000, 10_000),), (1, 10, 1_000))
    assert qos.adjustable and not spec.queries["q"].__class__(name="x", cql="").qos.adjustable
    assert (qos.span.line, qos.span.col) == (12, 5)
    assert spec.resources.memory_budget == 64 * 2**20


@pytest.mark.parametrize(
    ("size", "expected"),
    [("1000", 1000), ("2 GB", 2 * 10**9), ("1.5 KiB", 1536), ("512B", 512), ("3 TiB", 3 * 2**40)],
)
def test_memory_budget_sizes(load, files, size, expected):
    spec = load(HEADER + f"resources:\n  memory_budget: {size}\n")
    assert spec.resources.memory_budget == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("    qos:\n      window: [20 s, 10 s]\n",
         "13:15: window of the qos of query 'q' must have 0 < min <= max, got [20000, 10000] ms"),
        ("    qos:\n      window: [1 s]\n",
         "13:15: window of the qos of query 'q' must be a range [min, max], got 1 values"),
        ("    qos:\n      window: {A: 5 s}\n",
         "13:19: A of the window of the qos of query 'q' must be a range [min, max]"),
        ("    qos:\n      window: {}\n",
         "13:15: window of the qos of query 'q': name at least one FROM item"),
        ("    qos:\n      granularity: [10 ms, 15 ms]\n",
         "13:28: granularity of the qos of query 'q': each granularity must be a larger multiple "
         "of the one before it (finest first), but 15 ms follows 10 ms"),
        ("    qos:\n      granularity: [0, 10]\n",
         "13:21: granularity of the qos of query 'q': the finest granularity must be > 0"),
        ("    qos:\n      granularity: [1 ms]\n",
         "13:20: granularity of the qos of query 'q' must have at least 2 items, got 1"),
        ("    qos:\n      latency: [1, 2]\n",
         "13:7: unknown key 'latency' in the qos of query 'q' (expected one of: window, "
         "granularity)"),
        ("resources:\n  memory_budget: lots\n",
         "13:18: memory_budget of resources 'lots' is not a size such as '64 MiB' or '2 GB'"),
        ("resources:\n  memory_budget: 0.5 B\n",
         "13:18: memory_budget of resources: '0.5 B' is not a whole number of bytes > 0"),
        ("resources:\n  cpu_budget: 0.5\n",
         "13:3: resources: cpu_budget is no longer offered: the cost model's CPU estimates of "
         "joins and aggregations are not within 25% out of sample (docs/resources.md), too far "
         "to hold a CPU bound by; bound the deployment with memory_budget"),
    ],
)
def test_problems(problems, files, text, expected):
    assert problems(HEADER + text) == [expected]


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ("[2 s, 5 s]", "query 'q': the window of A is 10000 ms, outside its qos range [2000, 5000] ms"),
        ("{T: [1 s, 20 s]}", "query 'q': qos.window names 'T', which is not a FROM item of the "
         "query with a Range window of a given size"),
    ],
)
def test_window_ranges_are_checked_against_the_query(load, files, window, expected):
    spec = load(HEADER + f"    qos:\n      window: {window}\n")
    with pytest.raises(SpecErrors) as caught:
        compile_pipeline(spec)
    assert [(e.span.line, e.message) for e in caught.value.errors] == [(12, expected)]


@pytest.mark.parametrize("window", ["[1 s, 10 s]", "{A: [1 s, 10 s]}", "{S: [10 s, 1 min]}"])
def test_a_window_in_its_range_by_name_alias_or_for_all(load, files, window):
    compile_pipeline(load(HEADER + f"    qos:\n      window: {window}\n"))


def test_a_query_without_a_sized_range_window_cannot_have_a_window_range(load, files):
    spec = load(HEADER.replace("[Range 10 Seconds]", "[Now]") + "    qos:\n      window: [1, 2]\n")
    with pytest.raises(SpecErrors, match=r"qos\.window needs a Range window of a given size"):
        compile_pipeline(spec)


@pytest.mark.parametrize("window", ["[1 s, 10 s]", "{X: [1 s, 10 s]}"])
def test_a_windowed_subquery_has_a_range_too(load, files, window):
    """The plan makes a subquery's Range window adjustable (plan/knobs.py), so the check
    counts it: by the subquery's alias or in a range for every window."""
    text = HEADER.replace("FROM S [Range 10 Seconds] AS A", "FROM (SELECT * FROM S) [Range 10 s] AS X")
    compiled = compile_pipeline(load(text + f"    qos:\n      window: {window}\n"))
    [window_op] = [n.op for n in compiled.plan.nodes if type(n.op).__name__ == "WindowOp"]
    assert window_op.owner == "q"
    spec = load(text + "    qos:\n      window: {X: [1 s, 5 s]}\n")
    with pytest.raises(SpecErrors, match="the window of X is 10000 ms, outside"):
        compile_pipeline(spec)
