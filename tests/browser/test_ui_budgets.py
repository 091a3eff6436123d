"""The web view's memory and budget views in a real browser: the memory chart grows with the
live feed, the resource manager's adjustments under budget pressure and admission control's
rejections show in the timeline with their reasons.

With ``CQ_UI_SCREENSHOTS=DIR`` the tests also save the screenshots shown in the README.
"""

from __future__ import annotations

import json
import re
import urllib.request

from playwright.sync_api import Page, expect

from tests.browser.conftest import TOKEN, Served
from tests.browser.pages import DEADLINE_MS, SHOTS, shot


def _open(page: Page, served: Served, pipeline: str) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name=pipeline, exact=True).click()
    expect(page.locator("#memory-section")).to_be_visible(timeout=DEADLINE_MS)


def _points(page: Page) -> int:
    return int(page.locator("#memory-chart").get_attribute("data-points") or 0)


def test_memory_chart_grows_as_data_flows(page: Page, served: Served) -> None:
    _open(page, served, "shop")
    chart = page.locator("#memory-chart")
    expect(chart).to_have_attribute("data-points", re.compile(r"^[2-9]|\d\d"), timeout=DEADLINE_MS)
    first = _points(page)
    page.wait_for_function(
        f"Number(document.querySelector('#memory-chart').dataset.points) > {first + 1}",
        timeout=DEADLINE_MS,
    )
    expect(chart.locator("path.memory")).to_have_count(1)
    expect(chart.locator("line.budget")).to_have_count(1)
    expect(chart.locator("text.budget-label")).to_have_text("budget 64.0 MiB")
    numbers = page.locator("#memory-numbers")
    expect(numbers).to_contain_text("budget 64.0 MiB")
    expect(numbers).to_contain_text(re.compile(r"memory now \d"))
    expect(numbers).to_contain_text(re.compile(r"\d+ of \d+ samples over the budget"))


def test_budget_pressure_shows_in_the_timeline(page: Page, served: Served) -> None:
    _open(page, served, "tight")
    narrowed = page.locator("#timeline li[data-kind=window]").last  # the oldest: newest first
    expect(narrowed.locator(".what")).to_have_text(
        re.compile(r"^Bid: 60000 → \d+$"), timeout=DEADLINE_MS
    )
    expect(narrowed.locator("strong")).to_have_text("recent")
    # the reason: the estimate before, the budget and the estimate after
    expect(narrowed.locator(".why")).to_have_text(
        re.compile(
            r"why: budget: .+ estimated at the settings in force, .+ allowed; "
            r".+ estimated at the new settings"
        )
    )
    logged = served.worker.catalog.adjustments("tight")
    assert any(a.kind == "window" and a.detail["old"] == 60000 for a in logged), logged
    expect(page.locator("#memory-numbers")).to_contain_text("budget 128.0 KiB")
    if SHOTS:  # a chart with some history
        page.wait_for_function(
            "Number(document.querySelector('#memory-chart').dataset.points) >= 40",
            timeout=DEADLINE_MS,
        )
    shot(page, "memory.png")

    # A query added that cannot fit even with every window at its minimum: rejected.
    file = served.folder / "tight" / "pipeline.yaml"
    file.write_text(
        file.read_text()
        + (
            "  everything:\n"
            "    cql: SELECT * FROM Bid [Range 60 Seconds]\n"
            "    sink: {type: file, path: out/everything.jsonl, format: jsonl}\n"
        )
    )
    request = urllib.request.Request(
        served.url + "/pipelines",
        method="POST",
        data=json.dumps({"path": str(file)}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        deployed = json.loads(r.read())
    assert "everything" in deployed["rejected"], deployed
    rejected = page.locator("#timeline li[data-kind=rejected]")
    expect(rejected.locator("strong")).to_have_text("everything", timeout=DEADLINE_MS)
    expect(rejected.locator(".what")).to_have_text("by admission control")
    expect(rejected.locator(".why")).to_have_text("why: " + deployed["rejected"]["everything"])
