"""Fixtures of the browser tests: a worker serving a pipeline folder over HTTP, and Debian's
Chromium driven headless by Playwright (never Playwright's own browsers: `make chromium`)."""

from __future__ import annotations

import itertools
import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cq_service.service.worker import Worker
from tests.unit.service.serving import serving_http
from tests.unit.service.workers import sqlite_worker

CHROMIUM = os.environ.get("CQ_CHROMIUM", "/usr/bin/chromium")
TOKEN = "s3cret"

# Two queries sharing the source and its window, under a memory budget. The bids are NEXMark's,
# replayed in real time (`pace`: events per second), so the source keeps producing while the
# page is open (file sources are read once). A replay's clock is per process and (seed, rate,
# pace): each test takes a seed of its own, so its replay starts when its worker reads it.
SHOP = """\
version: 1
name: shop
time_unit: ms
resources: {memory_budget: 64 MiB}
streams:
  Bid:
    schema: {auction: int, bidder: int, price: int, channel: string, url: string,
             dateTime: timestamp, extra: string}
    timestamp: dateTime
    source: {type: generator, generator: nexmark, table: bid, events: 200000, seed: SEED,
             pace: 200}
queries:
  per_auction:
    cql: SELECT auction, COUNT(*) AS n FROM Bid [Range 10 Seconds] GROUP BY auction
    sink: {type: file, path: out/per_auction.jsonl, format: jsonl}
  high_bids:
    cql: |
      SELECT Istream(auction, price) FROM Bid [Range 10 Seconds]
      WHERE price > 1000
    sink: {type: file, path: out/high_bids.jsonl, format: jsonl}
"""

# A query whose window holds more than its deployment's budget allows: the resource manager
# (every second here) narrows the window inside its QoS range, and sheds once at the minimum.
TIGHT = """\
version: 1
name: tight
time_unit: ms
resources: {memory_budget: 128 KiB}
streams:
  Bid:
    schema: {auction: int, bidder: int, price: int, channel: string, url: string,
             dateTime: timestamp, extra: string}
    timestamp: dateTime
    source: {type: generator, generator: nexmark, table: bid, events: 200000, seed: SEED,
             pace: 400}
queries:
  recent:
    cql: SELECT auction, bidder, price FROM Bid [Range 60 Seconds]
    sink: {type: file, path: out/recent.jsonl, format: jsonl}
    qos: {window: [1000, 60000]}
"""

# A file with two malformed records among good ones: dead-lettered, with their reasons.
MESSY = """\
version: 1
name: messy
time_unit: ms
streams:
  Requests:
    schema: {client_id: int}
    timestamp: ts
    source: {type: file, path: data/requests.csv, format: csv}
queries:
  clients:
    cql: SELECT Istream(client_id) FROM Requests [Range 10 Seconds]
    sink: {type: file, path: out/clients.jsonl, format: jsonl}
"""
MESSY_CSV = "ts,client_id\n1,1\n2,oops\n3,3\nlater,4\n5,5\n"

# A pipeline whose query does not parse: rejected with FILE:LINE:COL.
BAD = """\
version: 1
name: bad
time_unit: ms
streams:
  Requests:
    schema: {client_id: int}
    timestamp: ts
    source: {type: file, path: data/requests.csv, format: csv}
queries:
  broken:
    cql: SELECT client_id FROM Requests [Range 10 Seconds WHERE
    sink: {type: stdout}
"""


_SEEDS = itertools.count(1000 + os.getpid() % 1000 * 1000)


@dataclass
class Served:
    url: str
    worker: Worker
    folder: Path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    folder = tmp_path / "p"
    shop = SHOP.replace("SEED", str(next(_SEEDS)))
    tight = TIGHT.replace("SEED", str(next(_SEEDS)))
    for name, text in (("shop", shop), ("bad", BAD), ("tight", tight), ("messy", MESSY)):
        (folder / name / "data").mkdir(parents=True)
        (folder / name / "pipeline.yaml").write_text(textwrap.dedent(text))
        csv = MESSY_CSV if name == "messy" else "ts,client_id\n"
        (folder / name / "data" / "requests.csv").write_text(csv)
    worker = sqlite_worker(
        tmp_path, folder, token=TOKEN, checkpoint_interval=0.5, manage_interval=1.0
    )
    with serving_http(worker) as url:
        yield Served(url, worker, folder)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser: object, served: Served) -> Iterator[object]:
    """A page of its own, closed before the worker stops (its event stream ends first)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    pg = context.new_page()
    yield pg
    context.close()
