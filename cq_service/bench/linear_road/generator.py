"""A seeded Linear Road input generator (Arasu et al., VLDB 2004; docs/linear-road.md).

L expressways, each with two directions of segments 0-99; cars enter on the entrance ramp
(lane 0) of a random segment, drive in lanes 1-3 at a speed set by how crowded their segment is,
report their position every 30 s, and leave by the exit ramp (lane 4) of a later segment.
Entries ramp up from 10% to 100% of ``entry_rate`` over the run, as the benchmark's traffic
grows. Accidents: now and then a car stops where it is, and the nearest car behind it in the same
direction runs into it on its next report (same lane, same position); both stay stopped for
several reports, enough for the benchmark's "four reports at one position", then drive on.
Balance queries (type 2) follow a small fraction of position reports.

The same configuration gives the same rows. `generate` yields Arrow tables (time-ordered chunks)
so any duration fits in memory; `write` stores them as Parquet and JSONL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.bench.linear_road.schema import (
    BALANCE,
    ENTRY_LANE,
    EXIT_LANE,
    FEET_PER_MPH_30S,
    FIELDS,
    POSITION,
    SCHEMA,
    SEGMENT_FEET,
    SEGMENTS,
)

__all__ = ["GeneratorConfig", "generate", "write"]

FREE_SPEED = 100.0  # mph on an empty segment
JAM_CARS = 250.0  # default: cars in one segment and direction at which traffic stops
SPEED_NOISE = 5.0
LAST_POS = SEGMENTS * SEGMENT_FEET - 1


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. ``entry_rate``: cars entering per second per expressway at the end of
    the ramp; ``accident_interval``: mean seconds between accidents per expressway;
    ``balance_rate``: chance that a position report is followed by a balance query;
    ``stopped_reports``: how many reports the first car of an accident stays stopped (range);
    ``jam_cars``: cars in one segment and direction at which traffic stops."""

    scale: int = 1
    duration: int = 10_800
    seed: int = 0
    entry_rate: float = 10.0
    accident_interval: float = 600.0
    balance_rate: float = 0.01
    stopped_reports: tuple[int, int] = (6, 20)
    chunk_seconds: int = 300
    jam_cars: float = JAM_CARS

    def __post_init__(self) -> None:
        if min(self.scale, self.duration, self.chunk_seconds, self.jam_cars) <= 0:
            raise ValueError("scale, duration, chunk_seconds and jam_cars must be positive")
        if not 0 <= self.balance_rate <= 1:
            raise ValueError("balance_rate must be in [0, 1]")
        if self.stopped_reports[0] < 5 or self.stopped_reports[1] < self.stopped_reports[0]:
            raise ValueError("stopped_reports must be a range starting at 5 or more")


class _Cars:
    """Columns of every car that ever entered; a car is active until its exit report."""

    COLUMNS = ("vid", "xway", "dir", "lane", "pos", "speed", "exit_seg", "phase", "stop")

    def __init__(self) -> None:
        self.n = 0
        self.cols = {name: np.zeros(1024, dtype=np.int64) for name in self.COLUMNS}
        self.active = np.zeros(1024, dtype=bool)
        self.crash = np.full(1024, -1, dtype=np.int64)  # car it will run into next report

    def add(self, **values: np.ndarray) -> None:
        k = len(values["vid"])
        need = self.n + k
        if need > len(self.active):
            size = max(need, 2 * len(self.active))
            for name, col in self.cols.items():
                self.cols[name] = np.resize(col, size)
            self.active = np.resize(self.active, size)
            self.crash = np.resize(self.crash, size)
        for name, col in self.cols.items():
            col[self.n : need] = values[name]
        self.active[self.n : need] = True
        self.crash[self.n : need] = -1
        self.n = need


def _seg(pos: np.ndarray) -> np.ndarray:
    return pos // SEGMENT_FEET


class _Simulation:
    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.cars = _Cars()
        self.next_vid = 0
        self.next_qid = 0
        self.occupancy = np.zeros((config.scale, 2, SEGMENTS), dtype=np.int64)
        mean = config.accident_interval
        self.next_accident = [self._gap(mean) for _ in range(config.scale)]

    def _gap(self, mean: float) -> int:
        return int(self.rng.exponential(mean)) + 1

    def step(self, t: int) -> list[np.ndarray]:
        """Every report and query of second t, as columns in FIELDS order."""
        cfg, cars = self.config, self.cars
        if t % 30 == 0:
            self._count_occupancy()
        reporting = np.flatnonzero(cars.active[: cars.n] & (cars.cols["phase"][: cars.n] == t % 30))
        self._move(reporting)
        for x in range(cfg.scale):
            if t >= self.next_accident[x] and self._accident(x, reporting):
                self.next_accident[x] = t + self._gap(cfg.accident_interval)
        entered = self._enter(t)
        rows = np.concatenate([reporting, entered])
        return self._rows(t, rows)

    def _count_occupancy(self) -> None:
        c, n = self.cars.cols, self.cars.n
        live = self.cars.active[:n]
        occ = np.zeros(self.occupancy.size, dtype=np.int64)
        key = (c["xway"][:n] * 2 + c["dir"][:n]) * SEGMENTS + _seg(c["pos"][:n])
        np.add.at(occ, key[live], 1)
        self.occupancy = occ.reshape(self.occupancy.shape)

    def _target_speed(self, idx: np.ndarray) -> np.ndarray:
        c = self.cars.cols
        occ = self.occupancy[c["xway"][idx], c["dir"][idx], _seg(c["pos"][idx])]
        mean = FREE_SPEED * np.maximum(0.05, 1.0 - occ / self.config.jam_cars)
        noisy = mean + self.rng.normal(0.0, SPEED_NOISE, len(idx))
        return np.clip(np.rint(noisy), 1, FREE_SPEED).astype(np.int64)

    def _move(self, idx: np.ndarray) -> None:
        """Advances the cars reporting now by 30 s; cars past their exit segment leave."""
        if not len(idx):
            return
        cars, c = self.cars, self.cars.cols
        stopped = c["stop"][idx] > 0
        crashing = cars.crash[idx] >= 0
        driving = idx[~stopped & ~crashing]
        speed = self._target_speed(driving)
        sign = 1 - 2 * c["dir"][driving]
        pos = np.clip(c["pos"][driving] + sign * speed * FEET_PER_MPH_30S, 0, LAST_POS)
        c["pos"][driving], c["speed"][driving] = pos, speed
        c["lane"][driving] = np.where(
            c["lane"][driving] == ENTRY_LANE,
            self.rng.integers(1, 4, len(driving)),
            c["lane"][driving],
        )
        seg, exit_seg = _seg(pos), c["exit_seg"][driving]
        done = np.where(sign > 0, seg >= exit_seg, seg <= exit_seg)
        leaving = driving[done]
        start = exit_seg[done] * SEGMENT_FEET  # the exit report is from the exit segment
        c["pos"][leaving] = np.clip(pos[done], start, start + SEGMENT_FEET - 1)
        c["lane"][leaving] = EXIT_LANE
        cars.active[leaving] = False
        held = idx[stopped]
        c["stop"][held] -= 1
        c["speed"][held] = 0
        for car in idx[crashing]:  # runs into the stopped car ahead: same lane and position
            other = cars.crash[car]
            c["pos"][car], c["lane"][car] = c["pos"][other], c["lane"][other]
            c["speed"][car], c["stop"][car] = 0, max(4, c["stop"][other])
            cars.crash[car] = -1

    def _accident(self, x: int, reporting: np.ndarray) -> bool:
        """Stops a car that reports now and sends the nearest car behind it into it."""
        cars, c = self.cars, self.cars.cols
        live = cars.active[: cars.n] & (c["stop"][: cars.n] == 0) & (cars.crash[: cars.n] < 0)
        cand = reporting[
            live[reporting]
            & (c["xway"][reporting] == x)
            & (c["lane"][reporting] >= 1)
            & (c["lane"][reporting] <= 3)
        ]
        for first in self.rng.permutation(cand):
            d, pos = c["dir"][first], c["pos"][first]
            behind = np.flatnonzero(live & (c["xway"][: cars.n] == x) & (c["dir"][: cars.n] == d))
            behind = behind[(behind != first) & (c["lane"][behind] >= 1)]
            gap = (pos - c["pos"][behind]) * (1 - 2 * d)
            behind, gap = behind[gap > 0], gap[gap > 0]
            if not len(behind):
                continue
            second = behind[np.argmin(gap)]
            low, high = self.config.stopped_reports
            c["stop"][first] = int(self.rng.integers(low, high + 1)) - 1
            c["speed"][first] = 0
            c["exit_seg"][first] = self._exit_beyond(first, _seg(pos))
            c["exit_seg"][second] = self._exit_beyond(second, _seg(pos))
            cars.crash[second] = first
            return True
        return False

    def _exit_beyond(self, car: int, seg: int) -> int:
        """An exit segment at or past ``seg`` in the car's direction (its own if already so)."""
        c = self.cars.cols
        exit_seg = int(c["exit_seg"][car])
        if c["dir"][car] == 0:
            return max(exit_seg, min(seg + 1, SEGMENTS - 1))
        return min(exit_seg, max(seg - 1, 0))

    def _enter(self, t: int) -> np.ndarray:
        cfg, rng = self.config, self.rng
        ramp = 0.1 + 0.9 * t / max(cfg.duration - 1, 1)
        counts = rng.poisson(cfg.entry_rate * ramp, cfg.scale)
        k = int(counts.sum())
        if not k:
            return np.empty(0, dtype=np.int64)
        xway = np.repeat(np.arange(cfg.scale), counts)
        d = rng.integers(0, 2, k)
        entry = rng.integers(0, SEGMENTS, k)
        trip = rng.integers(1, SEGMENTS, k)
        exit_seg = np.where(
            d == 0, np.minimum(entry + trip, SEGMENTS - 1), np.maximum(entry - trip, 0)
        )
        pos = entry * SEGMENT_FEET + rng.integers(0, SEGMENT_FEET, k)
        start = self.cars.n
        self.cars.add(
            vid=np.arange(self.next_vid, self.next_vid + k),
            xway=xway,
            dir=d,
            lane=np.full(k, ENTRY_LANE),
            pos=pos,
            speed=self._entry_speed(xway, d, entry),
            exit_seg=exit_seg,
            phase=np.full(k, t % 30),
            stop=np.zeros(k, dtype=np.int64),
        )
        self.next_vid += k
        return np.arange(start, start + k)

    def _entry_speed(self, xway: np.ndarray, d: np.ndarray, seg: np.ndarray) -> np.ndarray:
        occ = self.occupancy[xway, d, seg]
        return np.rint(FREE_SPEED * np.maximum(0.05, 1.0 - occ / self.config.jam_cars) / 2).astype(
            np.int64
        )

    def _rows(self, t: int, idx: np.ndarray) -> list[np.ndarray]:
        c, k = self.cars.cols, len(idx)
        pos = c["pos"][idx]
        cols = {
            "type": np.full(k, POSITION),
            "time": np.full(k, t),
            "vid": c["vid"][idx],
            "speed": c["speed"][idx],
            "xway": c["xway"][idx],
            "lane": c["lane"][idx],
            "dir": c["dir"][idx],
            "seg": _seg(pos),
            "pos": pos,
            "qid": np.full(k, -1),
        }
        asks = idx[self.rng.random(k) < self.config.balance_rate]
        if len(asks):
            q = len(asks)
            queries = {name: np.full(q, -1) for name in FIELDS}
            queries.update(
                type=np.full(q, BALANCE),
                time=np.full(q, t),
                vid=c["vid"][asks],
                qid=np.arange(self.next_qid, self.next_qid + q),
            )
            self.next_qid += q
            cols = {name: np.concatenate([cols[name], queries[name]]) for name in FIELDS}
        return [cols[name] for name in FIELDS]


def generate(config: GeneratorConfig) -> Iterator[pa.Table]:
    """The input in time order, as tables of ``config.chunk_seconds`` seconds each."""
    sim = _Simulation(config)
    for start in range(0, config.duration, config.chunk_seconds):
        parts = [
            sim.step(t) for t in range(start, min(start + config.chunk_seconds, config.duration))
        ]
        columns = [np.concatenate([p[i] for p in parts]) for i in range(len(FIELDS))]
        yield pa.Table.from_arrays(
            [pa.array(col, type=SCHEMA.field(i).type) for i, col in enumerate(columns)],
            schema=SCHEMA,
        )


def write(
    config: GeneratorConfig, out: Path, formats: tuple[str, ...] = ("parquet", "jsonl")
) -> dict[str, object]:
    """Writes ``out/input.parquet`` and/or ``out/input.jsonl``; returns paths and counts."""
    unknown = set(formats) - {"parquet", "jsonl"}
    if unknown or not formats:
        raise ValueError(f"formats must be parquet and/or jsonl, got {sorted(formats)}")
    out.mkdir(parents=True, exist_ok=True)
    paths = {fmt: out / f"input.{fmt}" for fmt in formats}
    writer = pq.ParquetWriter(paths["parquet"], SCHEMA) if "parquet" in paths else None
    jsonl = paths["jsonl"].open("w") if "jsonl" in paths else None
    counts = {"position_reports": 0, "balance_queries": 0}
    try:
        for table in generate(config):
            types = table.column("type").to_numpy()
            counts["position_reports"] += int((types == POSITION).sum())
            counts["balance_queries"] += int((types == BALANCE).sum())
            if writer is not None:
                writer.write_table(table)
            if jsonl is not None:
                for row in table.to_pylist():
                    jsonl.write(json.dumps(row, separators=(",", ":")) + "\n")
    finally:
        if writer is not None:
            writer.close()
        if jsonl is not None:
            jsonl.close()
    return {"paths": {k: str(v) for k, v in paths.items()}, **counts}
