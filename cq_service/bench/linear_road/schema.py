"""The Linear Road input tuple (Arasu et al., VLDB 2004, §3): the columns the generator writes
and the validator reads, and the benchmark's fixed geometry."""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "BALANCE",
    "ENTRY_LANE",
    "EXIT_LANE",
    "FEET_PER_MPH_30S",
    "FIELDS",
    "POSITION",
    "SCHEMA",
    "SEGMENTS",
    "SEGMENT_FEET",
]

POSITION = 0  # type 0: a car's position report, every 30 s
BALANCE = 2  # type 2: an account-balance query
SEGMENTS = 100  # segments 0-99 per expressway and direction
SEGMENT_FEET = 5280  # one mile: position 0..527,999
ENTRY_LANE = 0  # lane 0 is the entrance ramp, 1-3 travel lanes, 4 the exit ramp
EXIT_LANE = 4
FEET_PER_MPH_30S = 44  # feet travelled in 30 s at 1 mph (5280 / 3600 · 30)

# type, time (s), vid, speed (mph), xway, lane, dir (0 east, 1 west), seg, pos (feet), qid
# (a balance query's id; -1 on position reports, whose fields a query leaves at -1).
FIELDS = ("type", "time", "vid", "speed", "xway", "lane", "dir", "seg", "pos", "qid")
SCHEMA = pa.schema([(name, pa.int32() if name != "time" else pa.int64()) for name in FIELDS])
