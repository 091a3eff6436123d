"""The independent Linear Road validator on small hand-built inputs with known tolls, accidents
and balances (rules: cq_service/bench/linear_road/validator.py, docs/linear-road.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cq_service.bench.linear_road.validator as validator_module
from cq_service.bench.linear_road.schema import SEGMENT_FEET
from cq_service.bench.linear_road.validator import toll, validate


def report(t, vid, seg, speed=30, lane=1, d=0, xway=0, pos=None):
    pos = seg * SEGMENT_FEET + 100 if pos is None else pos
    return {"type": 0, "time": t, "vid": vid, "speed": speed, "xway": xway, "lane": lane,
            "dir": d, "seg": pos // SEGMENT_FEET, "pos": pos, "qid": -1}  # fmt: skip


def balance(t, vid, qid):
    row = {name: -1 for name in ("speed", "xway", "lane", "dir", "seg", "pos")}
    return {**row, "type": 2, "time": t, "vid": vid, "qid": qid}


def crowd(minute: int, seg: int, cars: int, speed: int, first_vid: int = 1000, d: int = 0):
    """``cars`` distinct cars reporting once from ``seg`` in ``minute`` (1-based)."""
    t = (minute - 1) * 60
    return [report(t + i % 60, first_vid + i, seg, speed, d=d) for i in range(cars)]


def by_time(rows):
    return sorted(rows, key=lambda r: r["time"])


def test_toll_formula():
    assert toll(30.0, 60) == 2 * 10**2 == 200
    assert toll(39.9, 51) == 2
    assert toll(40.0, 100) == 0  # LAV must be below 40
    assert toll(30.0, 50) == 0  # more than 50 cars
    assert toll(30.0, 60, accident=True) == 0
    assert toll(None, 60) == 0


def test_congested_segment_tolls_the_next_minute():
    rows = [*crowd(1, 10, 60, 30), report(70, 1, 10)]  # minute 2: 60 cars at 30 mph before
    out = validate(by_time(rows))
    last = out.tolls[-1]
    assert last == {"type": 0, "vid": 1, "time": 70, "emit": 70, "lav": 30, "toll": 200}
    assert all(r["toll"] == 0 for r in out.tolls[:-1])  # minute 1 has no history: no toll
    assert {"xway": 0, "dir": 0, "seg": 10, "minute": 1, "cars": 60, "avg": 30.0} in (
        out.segment_stats
    )


def test_no_toll_when_fast_or_few_or_other_direction():
    fast = validate(by_time([*crowd(1, 10, 60, 45), report(70, 1, 10)]))
    assert fast.tolls[-1]["toll"] == 0 and fast.tolls[-1]["lav"] == 45
    few = validate(by_time([*crowd(1, 10, 50, 30), report(70, 1, 10)]))
    assert few.tolls[-1]["toll"] == 0
    west = validate(by_time([*crowd(1, 10, 60, 30, d=1), report(70, 1, 10)]))
    assert west.tolls[-1]["toll"] == 0


def test_lav_averages_the_minutes_averages_over_the_last_five():
    rows = []
    for m, speed in zip(range(1, 7), (90, 20, 30, 40, 50, 20), strict=True):
        rows += crowd(m, 10, 2, speed, first_vid=100 * m)
    rows += crowd(6, 10, 59, 20, first_vid=5000)[2:]  # minute 6: 59 cars, mean 20
    rows.append(report(7 * 60 - 30, 1, 10))  # minute 7 looks at minutes 2-6
    out = validate(by_time(rows))
    assert out.tolls[-1]["lav"] == 32  # (20 + 30 + 40 + 50 + 20) / 5
    assert out.tolls[-1]["toll"] == 2 * 9**2


def test_a_car_counts_once_per_minute_with_its_mean_speed():
    rows = [report(0, 7, 3, 10), report(30, 7, 3, 50), report(5, 8, 3, 60)]
    out = validate(by_time(rows))
    stats = {s["seg"]: s for s in out.segment_stats}
    assert stats[3]["cars"] == 2 and stats[3]["avg"] == (30 + 60) / 2


def test_one_notification_per_crossing_none_from_the_exit_lane():
    rows = [report(0, 1, 5, lane=0), report(30, 1, 5), report(60, 1, 6), report(90, 1, 6),
            report(120, 1, 7, lane=4)]  # fmt: skip
    out = validate(rows)
    assert [(r["time"], r["toll"]) for r in out.tolls] == [(0, 0), (60, 0)]


def stopped_pair(seg=20, start=0, reports=5, pos=None):
    """Cars 1 and 2 stopped at one position from ``start``, car 2 arriving 10 s later."""
    pos = seg * SEGMENT_FEET + 777 if pos is None else pos
    rows = []
    for i in range(reports):
        rows.append(report(start + 30 * i, 1, seg, speed=0, lane=2, pos=pos))
        rows.append(report(start + 10 + 30 * i, 2, seg, speed=0, lane=2, pos=pos))
    return rows


def test_accident_detected_at_the_second_cars_fourth_report_and_cleared_when_one_moves():
    rows = [*stopped_pair(reports=5), report(150, 1, 21)]  # car 1 drives on at 150
    out = validate(by_time(rows))
    assert out.accidents == [
        {"xway": 0, "dir": 0, "seg": 20, "pos": 20 * SEGMENT_FEET + 777, "detected": 100,
         "cleared": 150}
    ]  # fmt: skip


def test_three_reports_or_one_car_is_no_accident():
    assert validate(by_time(stopped_pair(reports=3))).accidents == []
    lone = [r for r in stopped_pair(reports=6) if r["vid"] == 1]
    assert validate(lone).accidents == []
    apart = [r if r["vid"] == 1 else {**r, "lane": 3} for r in stopped_pair(reports=6)]
    assert validate(by_time(apart)).accidents == []  # other lane: another position


@pytest.mark.parametrize(
    ("seg", "t", "d", "alert"),
    [
        (18, 125, 0, True),  # 2 upstream, the minute after detection (minute 3 > 2)
        (16, 125, 0, True),  # 4 upstream: within reach
        (15, 125, 0, False),  # 5 upstream: out of reach
        (20, 125, 0, True),  # the accident's own segment
        (21, 125, 0, False),  # past it
        (18, 110, 0, False),  # the detection minute itself (minute 2)
        (18, 125, 1, False),  # the other direction
    ],
)
def test_accident_alerts_upstream_within_four_segments(seg, t, d, alert):
    congestion = crowd(2, seg, 70, 10, first_vid=5000, d=d)  # would toll without the accident
    rows = stopped_pair(reports=8) + congestion + [report(t, 9, seg, d=d)]
    out = validate(by_time(rows))
    alerts = [a for a in out.accident_alerts if a["vid"] == 9]
    assert alerts == ([{"type": 1, "time": t, "emit": t, "seg": 20, "vid": 9}] if alert else [])
    mine = [r for r in out.tolls if r["vid"] == 9]
    assert mine[0]["toll"] == (0 if alert or t < 120 else 2 * 20**2)  # 70 cars at 10 mph


def test_westbound_accident_reaches_higher_segments():
    rows = [{**r, "dir": 1} for r in stopped_pair(reports=8)]
    rows += [report(125, 9, 23, d=1), report(126, 10, 17, d=1)]
    alerts = validate(by_time(rows)).accident_alerts
    assert [(a["vid"], a["seg"]) for a in alerts] == [(9, 20)]


def test_accident_counts_until_the_minute_after_clearing():
    rows = [*stopped_pair(reports=5), report(150, 1, 21)]  # detected minute 2, cleared minute 3
    rows += [report(200, 9, 18), report(245, 10, 18), report(250, 11, 30)]
    out = validate(by_time(rows))
    # minute(200) = 4 = minute(150) + 1: still alerted; minute(245) = 5: no longer
    assert [a["vid"] for a in out.accident_alerts] == [9]


def test_tolls_are_charged_on_the_next_crossing_and_balances_answer_them():
    rows = [
        *crowd(1, 10, 60, 30),
        report(70, 1, 10),  # notified 200 for segment 10
        balance(80, 1, 0),  # nothing charged yet
        report(100, 1, 11),  # crosses into 11: 200 charged
        balance(101, 1, 1),
        report(130, 1, 11, lane=4),  # leaves from 11: its toll (0) is not charged
        balance(140, 1, 2),
        balance(141, 99, 3),  # a car never seen
    ]
    out = validate(by_time(rows))
    assert out.balances == [
        {"type": 2, "time": 80, "emit": 80, "resulttime": 0, "qid": 0, "bal": 0},
        {"type": 2, "time": 101, "emit": 101, "resulttime": 100, "qid": 1, "bal": 200},
        {"type": 2, "time": 140, "emit": 140, "resulttime": 100, "qid": 2, "bal": 200},
        {"type": 2, "time": 141, "emit": 141, "resulttime": 0, "qid": 3, "bal": 0},
    ]


def test_input_out_of_time_order_is_refused():
    with pytest.raises(ValueError, match="time order"):
        validate([report(30, 1, 1), report(0, 2, 1)])


def test_validator_imports_nothing_from_the_engine_planner_or_cql():
    tree = ast.parse(Path(validator_module.__file__).read_text())
    names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if n.split(".")[:2] in (["cq_service", p] for p in
                ("engine", "plan", "cql", "compiler", "runner"))]  # fmt: skip
