"""NEXMark: a deterministic, vectorised generator of the online-auction benchmark's events.

The model follows the benchmark's reference generator (as in Apache Beam's NEXMark): events come
in blocks of 50 — 1 person, 3 auctions, 46 bids — so the proportion is 1 : 3 : 46. Ids count up
from 1000; a new auction's seller, a bid's auction and a bid's bidder are drawn from recent
("hot") entities: with probability 1 − 1/ratio the hottest one, otherwise one of the last
entities still in flight. Prices are log-uniform between $1 and $1M (in cents), categories
10–14, auctions expire some seconds to minutes after they open, and event time advances by
1/rate seconds per event. The same seed gives the same events, whatever the chunk size.

`generate(n, seed, rate)` yields `NexmarkChunk`s of three Arrow tables (person, auction, bid);
`write(...)` writes them as Parquet, CSV or JSONL files, one per kind.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

__all__ = ["KINDS", "SCHEMAS", "NexmarkChunk", "generate", "generate_kind", "write"]

PROPORTION = 50  # events per block: 1 person, 3 auctions, 46 bids
PERSONS, AUCTIONS = 1, 3
FIRST_ID = 1000
CATEGORIES = 5
FIRST_CATEGORY = 10
HOT_AUCTION_RATIO, HOT_BIDDER_RATIO, HOT_SELLER_RATIO = 2, 4, 4
IN_FLIGHT_AUCTIONS, ACTIVE_PEOPLE = 100, 1000
GENERATE_CHUNK = 1 << 20  # events per generated chunk: the events depend on it
DEFAULT_RATE = 10_000.0  # events per second of event time
BASE_TIME_MS = 1_436_918_400_000  # 2015-07-15, as in the reference generator

KINDS = ("person", "auction", "bid")
SCHEMAS: dict[str, dict[str, str]] = {
    "person": {
        "id": "int", "name": "string", "emailAddress": "string", "creditCard": "string",
        "city": "string", "state": "string", "dateTime": "timestamp", "extra": "string",
    },
    "auction": {
        "id": "int", "itemName": "string", "description": "string", "initialBid": "int",
        "reserve": "int", "dateTime": "timestamp", "expires": "timestamp", "seller": "int",
        "category": "int", "extra": "string",
    },
    "bid": {
        "auction": "int", "bidder": "int", "price": "int", "channel": "string", "url": "string",
        "dateTime": "timestamp", "extra": "string",
    },
}

_FIRST = np.array(["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"])
_LAST = np.array(["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"])
_CITIES = np.array(["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"])
_STATES = np.array(["AZ", "CA", "ID", "OR", "WA", "WY"])
_CHANNELS = np.array(["Google", "Facebook", "Baidu", "Apple"])


@dataclass(frozen=True)
class NexmarkChunk:
    person: pa.Table
    auction: pa.Table
    bid: pa.Table

    def table(self, kind: str) -> pa.Table:
        return getattr(self, kind)


def _rng(seed: int, start: int, stream: int) -> np.random.Generator:
    """A generator for one chunk: its draws depend only on (seed, first event, purpose)."""
    return np.random.default_rng([seed, start, stream])


def _price(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.round(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


def _strings(rng: np.random.Generator, choices: np.ndarray, n: int) -> pa.Array:
    return pa.array(choices[rng.integers(0, len(choices), n)])


def _prefixed(prefix: str, ids: np.ndarray) -> pa.Array:
    """prefix + str(id) for each id, in Arrow (no Python string per row)."""
    return pc.binary_join_element_wise(prefix, pc.cast(pa.array(ids), pa.string()), "")


def _events(start: int, stop: int, delay_ms: float, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Event numbers in [start, stop) of one kind, and their timestamps (ms)."""
    ev = np.arange(start, stop, dtype=np.int64)
    offset = ev % PROPORTION
    if kind == "person":
        ev = ev[offset < PERSONS]
    elif kind == "auction":
        ev = ev[(offset >= PERSONS) & (offset < PERSONS + AUCTIONS)]
    else:
        ev = ev[offset >= PERSONS + AUCTIONS]
    return ev, BASE_TIME_MS + np.floor(ev * delay_ms).astype(np.int64)


def _persons(seed: int, start: int, stop: int, delay_ms: float) -> pa.Table:
    """People: one per block."""
    p_ev, p_ts = _events(start, stop, delay_ms, "person")
    p_rng = _rng(seed, start, 1)
    n = len(p_ev)
    p_id = FIRST_ID + p_ev // PROPORTION
    first = _FIRST[p_rng.integers(0, len(_FIRST), n)]
    last = _LAST[p_rng.integers(0, len(_LAST), n)]
    name = np.char.add(np.char.add(first, " "), last)
    return pa.table({
        "id": p_id,
        "name": pa.array(name),
        "emailAddress": pa.array(np.char.add(np.char.add(np.char.lower(last), "@"), "example.com")),
        "creditCard": pa.array([f"{a:04d} {b:04d} {c:04d} {d:04d}" for a, b, c, d in p_rng.integers(0, 10_000, (n, 4))]),
        "city": _strings(p_rng, _CITIES, n),
        "state": _strings(p_rng, _STATES, n),
        "dateTime": p_ts,
        "extra": _empty(n),
    })


def _auctions(seed: int, start: int, stop: int, delay_ms: float) -> pa.Table:
    """Auctions: three per block, each sold by a recent (often the hottest) person."""
    a_ev, a_ts = _events(start, stop, delay_ms, "auction")
    a_rng = _rng(seed, start, 2)
    n = len(a_ev)
    a_block, a_off = a_ev // PROPORTION, a_ev % PROPORTION - PERSONS
    a_id = FIRST_ID + a_block * AUCTIONS + a_off
    last_person = a_block  # people so far, minus one
    hot = a_rng.integers(0, HOT_SELLER_RATIO, n) > 0
    recent = np.maximum(last_person - a_rng.integers(0, ACTIVE_PEOPLE, n), 0)
    seller = FIRST_ID + np.where(hot, (last_person // HOT_SELLER_RATIO) * HOT_SELLER_RATIO, recent)
    initial = _price(a_rng, n)
    return pa.table({
        "id": a_id,
        "itemName": _prefixed("item-", a_id),
        "description": _prefixed("description of item ", a_id),
        "initialBid": initial,
        "reserve": initial + _price(a_rng, n),
        "dateTime": a_ts,
        "expires": a_ts + a_rng.integers(10_000, 600_000, n),
        "seller": seller,
        "category": FIRST_CATEGORY + a_rng.integers(0, CATEGORIES, n),
        "extra": _empty(n),
    })


def _bids(seed: int, start: int, stop: int, delay_ms: float) -> pa.Table:
    """Bids: 46 per block, on a recent (often the hottest) auction, by a recent person."""
    b_ev, b_ts = _events(start, stop, delay_ms, "bid")
    b_rng = _rng(seed, start, 3)
    n = len(b_ev)
    b_block = b_ev // PROPORTION
    last_auction = b_block * AUCTIONS + AUCTIONS - 1
    hot_a = b_rng.integers(0, HOT_AUCTION_RATIO, n) > 0
    any_a = np.maximum(last_auction - b_rng.integers(0, IN_FLIGHT_AUCTIONS, n), 0)
    b_auction = FIRST_ID + np.where(hot_a, (last_auction // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO, any_a)
    hot_b = b_rng.integers(0, HOT_BIDDER_RATIO, n) > 0
    any_b = np.maximum(b_block - b_rng.integers(0, ACTIVE_PEOPLE, n), 0)
    bidder = FIRST_ID + np.where(hot_b, (b_block // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO, any_b)
    return pa.table({
        "auction": b_auction,
        "bidder": bidder,
        "price": _price(b_rng, n),
        "channel": _strings(b_rng, _CHANNELS, n),
        "url": _prefixed("https://www.nexmark.com/item/", b_auction),
        "dateTime": b_ts,
        "extra": _empty(n),
    })


_MAKERS = {"person": _persons, "auction": _auctions, "bid": _bids}


def _empty(n: int) -> pa.Array:
    return pa.repeat("", n) if n else pa.array([], pa.string())


def generate_kind(
    kind: str, events: int, *, seed: int = 0, rate: float = 10_000.0, chunk: int = GENERATE_CHUNK
) -> Iterator[pa.Table]:
    """Only the `kind` events (person, auction or bid) of `generate(...)`, chunk by chunk; the
    other kinds are not computed."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown NEXMark kind {kind!r} (person, auction or bid)")
    make = _MAKERS[kind]
    for start, stop, delay_ms in _chunks(events, rate, chunk):
        yield make(seed, start, stop, delay_ms)


def _chunks(events: int, rate: float, chunk: int) -> Iterator[tuple[int, int, float]]:
    if events < 0 or rate <= 0:
        raise ValueError("events must be ≥ 0 and rate > 0")
    chunk = max(PROPORTION, chunk - chunk % PROPORTION)
    delay_ms = 1000.0 / rate
    for start in range(0, events, chunk):
        yield start, min(events, start + chunk), delay_ms


def generate(
    events: int, *, seed: int = 0, rate: float = 10_000.0, chunk: int = GENERATE_CHUNK
) -> Iterator[NexmarkChunk]:
    """`events` events in chunks, event time advancing `1/rate` seconds per event.

    Chunk boundaries fall on whole blocks of 50 events, and each block's random draws depend
    only on the seed and the chunk's first event, so a given `chunk` size always yields the
    same events."""
    for start, stop, delay_ms in _chunks(events, rate, chunk):
        yield NexmarkChunk(*(make(seed, start, stop, delay_ms) for make in _MAKERS.values()))


def write(
    folder: str | Path,
    events: int,
    *,
    fmt: str = "parquet",
    seed: int = 0,
    rate: float = 10_000.0,
    chunk: int = GENERATE_CHUNK,
) -> dict[str, Path]:
    """Write person, auction and bid files (`fmt`: parquet, csv or jsonl) into `folder`.

    Chunks are generated by a small thread pool, a few ahead of the writer (every chunk's
    events depend only on the seed and its position, and numpy and Arrow release the GIL for
    most of the work), and written in order."""
    if fmt not in ("parquet", "csv", "jsonl"):
        raise ValueError(f"unknown format {fmt!r} (parquet, csv or jsonl)")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = {k: out / f"{k}.{fmt}" for k in KINDS}
    files = {
        k: p.open("w", encoding="utf-8") if fmt == "jsonl" else p.open("wb") for k, p in paths.items()
    }
    writers: dict[str, pq.ParquetWriter | pacsv.CSVWriter] = {}
    jobs = (
        (kind, part) for part in _chunks(events, rate, chunk) for kind in KINDS
    )
    try:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="nexmark") as pool:
            ahead: deque = deque()

            def submit() -> None:
                job = next(jobs, None)
                if job is not None:
                    kind, (start, stop, delay_ms) = job
                    ahead.append((kind, pool.submit(_MAKERS[kind], seed, start, stop, delay_ms)))

            for _ in range(2 * len(KINDS)):
                submit()
            while ahead:
                kind, made = ahead.popleft()
                table = made.result()
                submit()
                if fmt == "jsonl":
                    _write_jsonl(files[kind], table)  # type: ignore[arg-type]
                    continue
                if kind not in writers:
                    writers[kind] = (
                        pq.ParquetWriter(files[kind], table.schema)
                        if fmt == "parquet"
                        else pacsv.CSVWriter(files[kind], table.schema)
                    )
                writers[kind].write_table(table)
    finally:
        for w in writers.values():
            w.close()
        for f in files.values():
            f.close()  # zero events still gives (empty) files
    return paths


def _write_jsonl(f: TextIO, table: pa.Table) -> None:
    cols = [c.to_pylist() for c in table.columns]
    names = table.column_names
    f.write("".join(json.dumps(dict(zip(names, row))) + "\n" for row in zip(*cols)))
