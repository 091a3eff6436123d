"""An independent Linear Road validator: the expected notifications for a generated input,
computed in plain Python from the benchmark's rules (Arasu et al., VLDB 2004, §3;
docs/linear-road.md, "The validator"). It shares nothing with the engine, the planner or CQL,
so the engine's results can be checked against it.

Rules, per expressway x, direction d, segment s, minute m = ⌊time / 60⌋ + 1:

- **Segment statistics.** cars(x,d,s,m) = distinct vehicles reporting from the segment in minute
  m; avg(x,d,s,m) = the mean over those vehicles of each one's mean speed in that minute;
  LAV(x,d,s,m) = the mean of avg over minutes m−5..m−1 that had reports.
- **Stopped cars and accidents.** A car is stopped after four consecutive reports from one
  position (same xway, direction, lane, pos). Two or more stopped cars at one position are an
  accident, detected at the report that makes the second; it clears when one of them reports
  from elsewhere. It counts in minutes m with detection minute < m ≤ clearing minute + 1.
- **Crossings.** A position report from a segment other than the car's previous report's, not
  from the exit lane, triggers one toll notification; an accident counting this minute on the
  same xway and direction within 4 segments downstream (s..s+4 east, s−4..s west) also triggers
  an accident notification and makes the toll 0; else toll = 2·(cars(m−1) − 50)² when
  LAV(m) < 40 and cars(m−1) > 50, and 0 otherwise.
- **Charges and balances.** The toll notified for a segment is charged when the car next crosses
  into another segment (not when it leaves by the exit ramp). A balance query answers the sum
  charged so far and the time of the last charge (0 before any).

Notifications are expected at the report's time (``emit`` = ``time``); LAV is reported rounded.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cq_service.bench.linear_road.schema import BALANCE, EXIT_LANE, POSITION

__all__ = [
    "ACCIDENT_REACH",
    "LAV_MINUTES",
    "STOPPED_REPORTS",
    "Expected",
    "read_input",
    "toll",
    "validate",
]

STOPPED_REPORTS = 4  # consecutive reports from one position: a stopped car
LAV_MINUTES = 5
ACCIDENT_REACH = 4  # segments downstream an accident is announced to
TOLL_MAX_LAV = 40
TOLL_MIN_CARS = 50


def toll(lav: float | None, cars: int, accident: bool = False) -> int:
    """The segment toll: 2·(cars − 50)² when LAV < 40, cars > 50 and no accident, else 0."""
    if accident or lav is None or lav >= TOLL_MAX_LAV or cars <= TOLL_MIN_CARS:
        return 0
    return 2 * (cars - TOLL_MIN_CARS) ** 2


def minute(time: int) -> int:
    """The benchmark's minute of a time in seconds: 1 for 0-59."""
    return time // 60 + 1


@dataclass
class Expected:
    """The expected output: rows as dicts, in time order."""

    tolls: list[dict[str, int]] = field(default_factory=list)
    accident_alerts: list[dict[str, int]] = field(default_factory=list)
    balances: list[dict[str, int]] = field(default_factory=list)
    accidents: list[dict[str, int]] = field(default_factory=list)
    segment_stats: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Car:
    key: tuple[int, int, int, int] | None = None  # (xway, dir, lane, pos) of the last report
    seg: int | None = None
    same: int = 0  # consecutive reports at `key`
    pending: int | None = None  # toll notified for the current segment, not yet charged
    balance: int = 0
    charged_at: int = 0


class _Validator:
    def __init__(self) -> None:
        self.out = Expected()
        self.cars: dict[int, _Car] = defaultdict(_Car)
        # (xway, dir, seg, minute) -> vid -> [speed sum, reports]
        self.speeds: dict[tuple[int, int, int, int], dict[int, list[int]]] = defaultdict(dict)
        self.stats: dict[tuple[int, int, int, int], tuple[int, float]] = {}  # -> (cars, avg)
        self.stopped: dict[tuple[int, int, int, int], set[int]] = defaultdict(set)
        self.open: dict[tuple[int, int, int, int], dict[str, int]] = {}  # accidents by position
        self.counting: list[dict[str, int]] = []  # accidents that may still count
        self.finished = -1  # minutes up to this one are in `stats`

    def row(self, r: Mapping[str, int]) -> None:
        t = int(r["time"])
        self._finish_before(minute(t))
        if r["type"] == POSITION:
            self._position(r, t)
        elif r["type"] == BALANCE:
            car = self.cars[int(r["vid"])]
            self.out.balances.append(
                {
                    "type": 2,
                    "time": t,
                    "emit": t,
                    "resulttime": car.charged_at,
                    "qid": int(r["qid"]),
                    "bal": car.balance,
                }
            )

    def _finish_before(self, m: int) -> None:
        """Moves every minute before m from raw speeds into `stats`."""
        if self.finished >= m - 1:
            return
        for key in sorted(k for k in self.speeds if k[3] < m):
            per_car = self.speeds.pop(key)
            avg = sum(s / n for s, n in per_car.values()) / len(per_car)
            self.stats[key] = (len(per_car), avg)
            x, d, s, mm = key
            self.out.segment_stats.append(
                {"xway": x, "dir": d, "seg": s, "minute": mm, "cars": len(per_car), "avg": avg}
            )
        self.finished = m - 1

    def lav(self, x: int, d: int, s: int, m: int) -> float | None:
        avgs = [
            self.stats[(x, d, s, mm)][1]
            for mm in range(m - LAV_MINUTES, m)
            if (x, d, s, mm) in self.stats
        ]
        return sum(avgs) / len(avgs) if avgs else None

    def _position(self, r: Mapping[str, int], t: int) -> None:
        vid, x, d, lane = int(r["vid"]), int(r["xway"]), int(r["dir"]), int(r["lane"])
        s, pos, m = int(r["seg"]), int(r["pos"]), minute(t)
        car = self.cars[vid]
        per_car = self.speeds[(x, d, s, m)].setdefault(vid, [0, 0])
        per_car[0] += int(r["speed"])
        per_car[1] += 1
        self._stops(vid, car, (x, d, lane, pos), t, s)
        crossed = car.seg != s
        car.seg = s
        if lane == EXIT_LANE:
            car.pending = None  # leaves by the exit ramp: the last segment is free
            car.seg = None
            return
        if not crossed:
            return
        if car.pending is not None:
            car.balance += car.pending
            car.charged_at = t
        accident = self._accident_ahead(x, d, s, m)
        if accident is not None:
            self.out.accident_alerts.append(
                {"type": 1, "time": t, "emit": t, "seg": accident, "vid": vid}
            )
        cars = self.stats.get((x, d, s, m - 1), (0, 0.0))[0]
        lav = self.lav(x, d, s, m)
        amount = toll(lav, cars, accident is not None)
        self.out.tolls.append(
            {
                "type": 0,
                "vid": vid,
                "time": t,
                "emit": t,
                "lav": 0 if lav is None else math.floor(lav + 0.5),
                "toll": amount,
            }
        )
        car.pending = amount

    def _stops(self, vid: int, car: _Car, key: tuple[int, int, int, int], t: int, s: int) -> None:
        if car.key == key:
            car.same += 1
        else:
            if car.key is not None and car.same >= STOPPED_REPORTS:
                self._moves_off(vid, car.key, t)
            car.key, car.same = key, 1
        if car.same == STOPPED_REPORTS:
            here = self.stopped[key]
            here.add(vid)
            if len(here) >= 2 and key not in self.open:
                accident = {
                    "xway": key[0],
                    "dir": key[1],
                    "seg": s,
                    "pos": key[3],
                    "detected": t,
                    "cleared": -1,
                }
                self.open[key] = accident
                self.out.accidents.append(accident)
                self.counting.append(accident)

    def _moves_off(self, vid: int, key: tuple[int, int, int, int], t: int) -> None:
        here = self.stopped[key]
        here.discard(vid)
        if not here:
            del self.stopped[key]
        accident = self.open.pop(key, None)
        if accident is not None:
            accident["cleared"] = t

    def _accident_ahead(self, x: int, d: int, s: int, m: int) -> int | None:
        """The nearest accident counting in minute m within reach downstream of segment s."""
        self.counting = [
            a for a in self.counting if a["cleared"] < 0 or m <= minute(a["cleared"]) + 1
        ]  # time only moves on: an accident that stopped counting never counts again
        best: int | None = None
        for a in self.counting:
            if a["xway"] != x or a["dir"] != d or minute(a["detected"]) >= m:
                continue
            ahead = a["seg"] - s if d == 0 else s - a["seg"]
            if 0 <= ahead <= ACCIDENT_REACH and (best is None or ahead < abs(best - s)):
                best = a["seg"]
        return best


def validate(rows: Iterable[Mapping[str, int]]) -> Expected:
    """The expected notifications for input rows in time order (dicts with the input's fields)."""
    v = _Validator()
    last = -1
    for r in rows:
        if r["time"] < last:
            raise ValueError(f"input not in time order at time {r['time']} after {last}")
        last = int(r["time"])
        v.row(r)
    v._finish_before(minute(last) + 1)
    return v.out


def read_input(path: Path) -> Iterable[dict[str, int]]:
    """Rows of a generated ``input.parquet`` or ``input.jsonl``."""
    if path.suffix == ".jsonl":
        with path.open() as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
        return
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches():
        yield from batch.to_pylist()
