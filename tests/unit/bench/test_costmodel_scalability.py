"""Scalability of the resource manager (brief-costmodel §5, Fig. 12) on tiny configurations:
the generator draws the paper's mix inside its ranges; the worker holds a budget with a dozen
random queries, keeps every setting inside its query's ranges and rejects a query too big to
fit, with the reason; the model alone holds 200 queries under the budget. Instants are
application time, never wall-clock."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from cq_service.bench.costmodel import querymix as qm
from cq_service.bench.costmodel import scalability as sc

TINY = qm.Timeline(
    initial=12,
    trickle=1,
    trickle_every=900_000,  # 2 arrivals of one query
    burst=2,
    manage_every=120_000,
    scale=0.02,  # windows of 1.2–36 s, the run 180 s, the manager every 2.4 s
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict:
    mix = qm.generate(TINY, seed=1, streams=8)
    folder = tmp_path_factory.mktemp("scalability")
    (folder / "need").mkdir()
    qm.write_streams(mix, folder / "need", 0)
    full = qm.need(qm.managed_queries(mix, mix.arrived(0), folder / "need"), 1.0)
    # A query far too big for the budget: the two busiest streams joined with windows of the
    # whole run, arriving with the trickle (its streams are read by then, so their rates are
    # known to admission control).
    busiest = sorted(mix.rates, key=mix.rates.get)[-2:]
    window = TINY.ms(TINY.end)
    giant = qm.GenQuery(
        "giant",
        "join2",
        f"SELECT A.v AS va, B.v AS vb FROM {busiest[0]} [Range {window}] A, "
        f"{busiest[1]} [Range {window}] B WHERE A.k50 = B.k50",
        (window, window),
        (1, 10),
        1,
        TINY.ms(TINY.trickle_from),
        tuple(busiest),
        (qm.Join("hash", 1 / 50),),
        (),
    )
    mix = replace(mix, queries=(*mix.queries, giant))
    result = sc.run_engine(mix, folder / "engine", 0.5 * full)
    result["mix"] = mix
    return result


def test_the_mix_is_the_papers():
    mix = qm.generate(qm.Timeline(initial=5_000, trickle=0, burst=0), seed=0)
    shares = {k: n / 5_000 for k, n in mix.kinds.items()}
    assert shares == pytest.approx(dict(qm.KINDS), abs=0.02)
    joins = [j for q in mix.queries for j in q.joins]
    assert sum(j.kind == "nested-loop" for j in joins) / len(joins) == pytest.approx(
        1 / 3, abs=0.02
    )
    assert all(0.005 - 1e-4 <= j.selectivity <= 0.02 for j in joins)
    assert all(2 <= r <= 600 for r in mix.rates.values()) and len(mix.rates) == 50
    for q in mix.queries:
        lo, hi = q.window
        assert 60_000 <= lo <= hi <= 1_800_000
        assert q.ladder[0] == 1 and q.ladder[-1] in (100, 1_000, 10_000)
        assert all(b % a == 0 and b > a for a, b in zip(q.ladder, q.ladder[1:]))
        assert f"[Range {hi}]" in q.cql and q.weight in qm.WEIGHTS


def test_the_paper_timeline_scaled():
    arrivals = qm.Timeline(scale=0.1).arrivals()
    assert arrivals[0] == (0, 5_000)
    assert arrivals[1:26] == [(360_000 + 7_200 * k, 10) for k in range(25)]
    assert arrivals[26:] == [(720_000, 500)]


def test_the_worker_holds_the_budget_after_the_start(engine):
    s = engine["series"]
    t, measured = np.asarray(s["t"]), np.asarray(s["measured"])
    limit = engine["budget"] + engine["reserve"]
    after = t >= TINY.ms(TINY.manage_every)  # from the manager's first round on
    assert measured[after].max() <= limit
    assert measured.max() > 0.3 * engine["budget"]  # the queries did hold state
    assert engine["changes"].get("window", 0) > 0  # the manager had to work


def test_every_setting_on_record_is_inside_its_querys_ranges(engine):
    checks = engine["checks"]
    assert checks["settings_checked"] > 0 and checks["outside"] == []


def test_a_query_too_big_is_rejected_with_its_reason(engine):
    rejected = {r["query"]: r for r in engine["rejections"]}
    assert "giant" in rejected
    giant = rejected["giant"]
    assert "at the minimum settings of every query" in giant["reason"]
    assert giant["at"] == TINY.ms(TINY.trickle_from)
    assert engine["series"]["rejected"][-1] >= 1
    assert engine["changes"]["rejected"] == len(engine["rejections"])  # logged in the catalog


def test_the_model_holds_200_queries_inside_the_budget(tmp_path: Path):
    timeline = qm.Timeline(initial=200, trickle=2, burst=40, manage_every=600_000, scale=0.1)
    mix = qm.generate(timeline, seed=2)
    (tmp_path / "need").mkdir()
    qm.write_streams(mix, tmp_path / "need", 0)
    full = qm.need(qm.managed_queries(mix, mix.arrived(0), tmp_path / "need"), 1.0)
    result = sc.run_model(mix, tmp_path / "model", 0.4 * full)
    measured = np.asarray(result["series"]["measured"])
    assert measured.max() <= result["budget"]
    assert measured.max() > 0.5 * result["budget"]
    assert result["checks"]["settings_checked"] > 0 and result["checks"]["outside"] == []
    assert result["changes"]["window"] > 0
    arrived = sum(n for _, n in timeline.arrivals())
    assert result["series"]["running"][-1] + len(result["rejections"]) == arrived
    assert all(r["reason"] for r in result["rejections"])
