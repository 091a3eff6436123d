"""Plan estimates: the engine's formulas on compiled plans, and the meter on real runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cq_service.adaptive.estimate import (
    Observed,
    estimate_plan,
    groups_present,
    range_window_edge,
    solve_groups,
)
from cq_service.adaptive.rates import RateMeter
from cq_service.bench.costmodel.accuracy import Case, run_case
from cq_service.compiler import compile_pipeline
from cq_service.cql import logical as L
from cq_service.spec import load_pipeline_text

PIPELINE = """
version: 1
name: est
time_unit: ms
streams:
  S: {{schema: {{a: int}}, timestamp: ts, source: {{type: file, path: {folder}/s.jsonl, format: jsonl}}}}
  T: {{schema: {{a: int}}, timestamp: ts, source: {{type: file, path: {folder}/t.jsonl, format: jsonl}}}}
queries:
  q: {{cql: "{cql}", sink: {{type: blackhole}}}}
"""


def plan_of(cql: str, folder):
    for name in ("s", "t"):
        (folder / f"{name}.jsonl").write_text("")
    text = PIPELINE.format(cql=cql, folder=folder)
    return compile_pipeline(load_pipeline_text(text, str(folder / "p.yaml"))).plan


def node(plan, kind):
    return next(n for n in plan.nodes if isinstance(n.op, kind))


@pytest.mark.parametrize(
    "size, slide, g", [(10, None, 1), (10, None, 4), (9, None, 5), (10, 3, 1), (20, 6, 4), (3, None, 5)]
)
def test_range_window_edge_is_the_mean_over_every_timestamp(size, slide, g):
    """Brute force: the interval the engine gives each timestamp (range_window.py)."""
    lives, lengths, stays = [], [], []
    for t in range(1000, 1000 + 2 * math.lcm(slide or 1, g) * 7):
        enter, leave = (t, t + size + 1) if slide is None else (
            -(-t // slide) * slide, ((t + size) // slide + 1) * slide
        )
        enter, leave = -(-enter // g) * g, leave // g * g
        lives.append(enter < leave)
        if enter < leave:
            lengths.append(leave - enter)
            stays.append(enter - t + leave - t)
    live, length, stay = range_window_edge(size, slide, g)
    assert live == pytest.approx(np.mean(lives))
    if lengths:
        assert length == pytest.approx(np.mean(lengths))
        assert stay == pytest.approx(np.mean(stays))
    else:
        assert live == 0


def test_groups_present_and_its_inverse():
    assert groups_present(50, 1000) == pytest.approx(50 * (1 - math.exp(-20)))
    assert groups_present(math.inf, 30) == 30
    for n in (3, 50, 2_000):
        assert solve_groups(groups_present(n, 500), 500) == pytest.approx(n, rel=1e-6)
    assert solve_groups(500, 500) == math.inf


def test_join_estimate_from_rates_and_selectivity(tmp_path):
    plan = plan_of("SELECT * FROM S [Range 999], T [Range 1999] WHERE S.a = T.a", tmp_path)
    join = node(plan, L.Join)
    est = estimate_plan(plan, Observed({"S": 10.0, "T": 20.0}, selectivity={join.id: 0.02}))
    e = est[join.id]
    assert e.rows == pytest.approx(1000 / 10 + 2000 / 20)  # both windows' contents
    assert e.size == pytest.approx(0.02 * 100 * 100)  # σ·N1·N2 results at any instant
    assert not e.assumed
    # the resource manager's question: what if both windows were halved?
    windows = [n.id for n in plan.nodes if isinstance(n.op, L.WindowOp)]
    half = estimate_plan(
        plan, Observed({"S": 10.0, "T": 20.0}, selectivity={join.id: 0.02}),
        windows={windows[0]: (499, 1), windows[1]: (999, 1)},
    )
    assert half[join.id].rows == pytest.approx(e.rows / 2)
    assert half[join.id].size == pytest.approx(e.size / 4)


def test_unmeasured_inputs_are_marked_assumed(tmp_path):
    plan = plan_of("SELECT a, COUNT(*) FROM S [Range 1000] WHERE a > 3 GROUP BY a", tmp_path)
    est = estimate_plan(plan, Observed({"S": 10.0}))
    assert any("selectivity" in a for a in est[node(plan, L.Filter).id].assumed)
    assert any("keys" in a for a in est[node(plan, L.Aggregate).id].assumed)
    missing = estimate_plan(plan, Observed({}))
    s = next(n for n in plan.nodes if isinstance(n.op, L.Source) and n.op.name == "S")
    assert missing[s.id].assumed == ("rate of S",)


def test_rate_meter_ignores_noise_and_follows_a_change():
    rng = np.random.default_rng(0)
    m = RateMeter(interval=1_000)
    ts = np.cumsum(rng.exponential(10.0, 20_000))  # Poisson, d = 10
    ts = np.concatenate([ts, ts[-1] + np.cumsum(rng.exponential(2.5, 40_000))])  # then d = 2.5
    for k in range(0, len(ts), 50):
        m.observe(float(ts[k]), k)
        if 2_000 < ts[k] < 190_000:
            assert m.changed == 0 and m.d == pytest.approx(10.0, rel=0.25)
    assert m.changed == 1
    assert m.d == pytest.approx(2.5, rel=0.1)


@pytest.mark.parametrize(
    "case",
    [
        Case("join", "join2", 10.0, 2_000, 1, 200),
        Case("join g", "join2", 10.0, 2_000, 500, 200),
        Case("grouped", "group", 10.0, 6_000, 100, 200),
        Case("scalar", "scalar", 50.0, 6_000, 1, 200),
    ],
    ids=lambda c: c.name,
)
def test_memory_estimates_match_the_engine(case):
    """Steady-state memory of windows, joins and aggregations on real runs over Poisson
    streams, estimated from the measured rates alone: within 5%."""
    r = run_case(case)
    assert r.operators
    for label in r.operators:
        assert r.memory_error(label) < 0.05, (label, r.operators[label])


def test_join_memory_error_grows_by_at_most_one_percent_per_level():
    """brief-costmodel: the average relative error grows by at most 1% per level of plan
    height. A left-deep join of four windows (joins at levels 1, 2, 3): a join fed by a join
    holds exactly its input's current rows (no retractions waiting for a consolidation), so the
    model's l/d of each side is what the engine keeps."""
    r = run_case(Case("join4", "join4", 40.0, 2_000, 1, 120))
    joins = sorted(
        (label for label in r.operators if label.startswith("join")),
        key=lambda label: int(label.split("#")[1]),
    )
    assert len(joins) == 3
    errors = [r.memory_error(label) for label in joins]
    assert errors[0] < 0.02, errors
    for level, err in enumerate(errors[1:], start=2):
        assert err <= errors[0] + 0.01 * (level - 1), (level, errors)


def test_rate_meter_of_a_slow_stream_is_not_its_latest_sample():
    """A few elements per interval (90 tuples/min, 1 s intervals): each sample's Poisson noise
    is far past a 25% drift threshold, so the estimate must not jump to it, nor be biased by
    averaging Δt/Δn."""
    rng = np.random.default_rng(1)
    d = 60_000 / 90
    ts = np.cumsum(rng.exponential(d, 2_000))
    m = RateMeter(interval=1_000)
    ratios = []
    for t in range(0, 600_000, 600):
        m.observe(t, int(np.searchsorted(ts, t, side="right")))
        if t > 30_000:
            ratios.append(m.d / d)
    assert m.changed == 0
    assert float(np.median(ratios)) == pytest.approx(1.0, abs=0.1)
    assert float(np.quantile(ratios, 0.9)) < 1.6 and float(np.quantile(ratios, 0.1)) > 0.65


MULTIWAY = """
version: 1
name: multiway
time_unit: ms
streams:
{streams}
queries:
  q: {{cql: "{cql}", sink: {{type: blackhole}}}}
"""


def _multiway_run(tmp_path, cql: str, rates: dict[str, float], seconds: float = 120.0):
    """Run `cql` over Poisson streams (k125 and k200 uniform keys, a value) at `rates`
    (time units between elements); the estimate from what was measured, and the
    measurement."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cq_service.adaptive.measure import PlanMeter
    from cq_service.adaptive.poisson import poisson_timestamps
    from cq_service.compiler import load_and_compile
    from cq_service.runner import run_pipeline

    lines = []
    for i, (name, d) in enumerate(rates.items()):
        rng = np.random.default_rng(10 + i)
        t = poisson_timestamps(rng, d, seconds)
        cols = {"ts": t, "k125": rng.integers(0, 125, len(t)), "k200": rng.integers(0, 200, len(t))}
        cols["v"] = rng.integers(0, 1000, len(t))
        pq.write_table(pa.table(cols), tmp_path / f"{name}.parquet")
        lines.append(
            f"  {name}: {{schema: {{k125: int, k200: int, v: int}}, timestamp: ts, "
            f"source: {{type: file, path: {tmp_path / name}.parquet, format: parquet}}}}"
        )
    (tmp_path / "p.yaml").write_text(MULTIWAY.format(streams="\n".join(lines), cql=cql))
    compiled = load_and_compile(tmp_path / "p.yaml")
    meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
    report = run_pipeline(compiled, batch_rows=4, after_step=meter)
    meter.finish(report.executor)
    est = estimate_plan(compiled.plan, meter.observed(), unit_seconds=1e-3)
    joins = [n.id for n in compiled.plan.nodes if isinstance(n.op, L.Join)]
    return joins, est, meter.measured()


def test_join_bytes_of_a_multiway_join_match_the_engine(tmp_path):
    """Bytes, not only rows, of a left-deep 3-way join (an equi-join on a key of 125 values,
    then a band join on another key) over steady Poisson streams. A join fed by a join keeps
    its input's columns only (not a batch's timestamp, weight and ticks twice) plus its key,
    weight, index and row hash; a window-fed side keeps some expired rows until its oldest
    run merges. The old accounting was 20% over at level 2."""
    cql = (
        "SELECT A.v AS va, B.v AS vb, C.v AS vc FROM S0 [Range 10000] A, S1 [Range 10000] B, "
        "S2 [Range 10000] C WHERE A.k125 = B.k125 AND B.k200 >= C.k200 AND B.k200 < C.k200 + 3"
    )
    joins, est, measured = _multiway_run(tmp_path, cql, {"S0": 40.0, "S1": 50.0, "S2": 60.0})
    first, second = joins
    for node, tolerance in ((first, 0.08), (second, 0.05)):
        e, m = est[node].bytes, measured[node].bytes
        assert e == pytest.approx(m, rel=tolerance), (node, e, m)
    total_e = sum(est[j].bytes for j in joins)
    total_m = sum(measured[j].bytes for j in joins)
    assert total_e == pytest.approx(total_m, rel=0.05)


def test_cpu_prices_each_source_read_at_every_operator_it_reaches(tmp_path):
    """A join of two windows gets both sources' reads; halving the rows per read doubles the
    reads, and the CPU grows by exactly per_read times the extra reads at each operator."""
    from cq_service.adaptive.cpu import BATCH_ROWS, EngineCosts, KindCost

    plan = plan_of("SELECT * FROM S [Range 1000], T [Range 1000] WHERE S.a = T.a", tmp_path)
    costs = EngineCosts({k: KindCost(1e-6, 1e-6, 0.0, 5e-4) for k in ("Source", "WindowOp", "Join")})
    base = Observed({"S": 10.0, "T": 40.0}, selectivity={}, read_rows={"S": 20.0, "T": 20.0})
    small = Observed({"S": 10.0, "T": 40.0}, selectivity={}, read_rows={"S": 10.0, "T": 10.0})
    a = estimate_plan(plan, base, costs=costs, unit_seconds=1e-3)
    b = estimate_plan(plan, small, costs=costs, unit_seconds=1e-3)
    join = node(plan, L.Join).id
    assert a[join].reads == pytest.approx(1 / (10 * 20) + 1 / (40 * 20))
    assert b[join].reads == pytest.approx(2 * a[join].reads)
    for nid in a:
        assert b[nid].cpu - a[nid].cpu == pytest.approx(5e-4 * (b[nid].reads - a[nid].reads) / 1e-3)
    unknown = estimate_plan(plan, Observed({"S": 10.0, "T": 40.0}), costs=costs, unit_seconds=1e-3)
    assert unknown[join].reads == pytest.approx(1 / (10 * BATCH_ROWS) + 1 / (40 * BATCH_ROWS))
