"""The validator on a generated, congested run, against a second derivation of the tolls written
differently (pandas group-bys over the whole input) — two readings of the rules that must agree
on every toll notification."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cq_service.bench.linear_road.generator import GeneratorConfig, generate
from cq_service.bench.linear_road.validator import validate

CONGESTED = GeneratorConfig(
    duration=1200, seed=11, entry_rate=15.0, jam_cars=60.0, accident_interval=300.0
)


@pytest.fixture(scope="module")
def run():
    table = pa.concat_tables(generate(CONGESTED))
    return table.to_pandas(), validate(table.to_pylist())


def expected_tolls(df: pd.DataFrame, alerted: set[tuple[int, int]]) -> pd.DataFrame:
    r = df[df["type"] == 0].copy()
    r["minute"] = r["time"] // 60 + 1
    seg = ["xway", "dir", "seg"]
    per_car = r.groupby([*seg, "minute", "vid"])["speed"].mean().rename("car_avg").reset_index()
    stats = per_car.groupby([*seg, "minute"]).agg(cars=("vid", "size"), avg=("car_avg", "mean"))
    stats = stats.reset_index()
    rows = []
    for offset in range(1, 6):  # LAV of minute m from minutes m-5..m-1
        shifted = stats[[*seg, "minute", "avg"]].copy()
        shifted["minute"] += offset
        rows.append(shifted)
    lav = pd.concat(rows).groupby([*seg, "minute"])["avg"].mean().rename("lav")
    prev = stats[[*seg, "minute", "cars"]].copy()
    prev["minute"] += 1
    prev = prev.set_index([*seg, "minute"])["cars"]

    r = r.sort_values(["vid", "time"], kind="stable")
    before = r.groupby("vid")["seg"].shift(1)
    crossing = (r["seg"] != before) & (r["lane"] != 4)
    c = r[crossing].set_index([*seg, "minute"])
    c = c.join(lav, how="left").join(prev, how="left").reset_index()
    c["cars"] = c["cars"].fillna(0).astype(int)
    congested = (c["lav"] < 40) & (c["cars"] > 50)
    alert = np.array([(v, t) in alerted for v, t in zip(c["vid"], c["time"], strict=True)])
    c["toll"] = np.where(congested & ~alert, 2 * (c["cars"] - 50) ** 2, 0)
    return c[["vid", "time", "toll"]].sort_values(["time", "vid"]).reset_index(drop=True)


def test_every_toll_agrees_with_a_second_derivation(run):
    df, out = run
    alerted = {(a["vid"], a["time"]) for a in out.accident_alerts}
    mine = pd.DataFrame(out.tolls)[["vid", "time", "toll"]]
    mine = mine.sort_values(["time", "vid"]).reset_index(drop=True)
    theirs = expected_tolls(df, alerted)
    assert len(mine) == len(theirs)
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
    assert (mine["toll"] > 0).sum() > 100  # the run is congested enough to toll
    assert out.accidents and out.accident_alerts
