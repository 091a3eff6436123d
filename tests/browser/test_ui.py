"""The web view in a real browser (Debian's Chromium, headless): the pipelines list, the live
plan graph, editing a query's weight with the API token, and a rejected file's FILE:LINE:COL.

Deadlines are generous and only bound polling: nothing here measures time. With
``CQ_UI_SCREENSHOTS=DIR`` the tests also save the screenshots shown in the README (docs/ui/).
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import TOKEN, Served
from tests.browser.pages import DEADLINE_MS, api_get, shot


def _open_plan(page: Page, served: Served, pipeline: str) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name=pipeline, exact=True).click()
    expect(page.locator("#graph g.node").first).to_be_visible(timeout=DEADLINE_MS)


def test_plan_graph_shows_every_operator_of_explain(page: Page, served: Served) -> None:
    _open_plan(page, served, "shop")
    explain = api_get(served.url + "/pipelines/shop/explain")
    listed = re.findall(r"^  (#\d+ .+?)  <- ", explain, flags=re.M)
    assert len(listed) == 7, explain
    titles = page.locator("#graph g.node text.title")
    for label in listed:
        expect(titles.filter(has_text=re.compile("^" + re.escape(label) + "$"))).to_have_count(
            1, timeout=DEADLINE_MS
        )
    # the shared window serves both queries; every sink is drawn
    window = page.locator("#graph g.node", has=page.locator("text.title", has_text="window"))
    for query in ("per_auction", "high_bids"):
        expect(window).to_contain_text(re.compile(r"serves: .*\b" + query))
    for sink in ("per_auction", "high_bids"):
        expect(page.locator("#graph g.node.sink", has_text=f"sink {sink}")).to_have_count(1)
    expect(page.locator("#plan-summary")).to_contain_text("64.0 MiB budget")


def test_counters_change_as_data_flows(page: Page, served: Served) -> None:
    _open_plan(page, served, "shop")
    counter = page.locator("#graph g.node.source text[data-stat=rows_in]")
    expect(counter).to_have_text(re.compile(r"^in [1-9]"), timeout=DEADLINE_MS)
    first = counter.text_content()
    expect(counter).not_to_have_text(first or "", timeout=DEADLINE_MS)  # no reload: the feed
    shot(page, "plan.png", height=1900)


def test_weight_set_through_the_page(page: Page, served: Served) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name="shop", exact=True).click()
    page.get_by_label("API token").fill(TOKEN)
    page.get_by_label("New weight of per_auction").fill("2.5")
    page.get_by_role("row", name=re.compile("per_auction")).get_by_role(
        "button", name="Set weight"
    ).click()
    expect(page.locator("#control-message")).to_have_text(
        "The weight of per_auction is now 2.5.", timeout=DEADLINE_MS
    )
    assert served.worker.catalog.query("shop", "per_auction").weight == 2.5
    shot(page, "weight.png")


def test_wrong_token_refused_in_the_page(page: Page, served: Served) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name="shop", exact=True).click()
    page.get_by_label("API token").fill("not-the-token")
    page.get_by_label("New weight of per_auction").fill("7")
    page.get_by_label("New weight of per_auction").press("Enter")  # keyboard only
    expect(page.locator("#control-message")).to_have_text(
        "Setting the weight of per_auction was refused (401): the token is not valid",
        timeout=DEADLINE_MS,
    )
    assert served.worker.catalog.query("shop", "per_auction").weight != 7


def test_invalid_pipeline_shows_its_position(page: Page, served: Served) -> None:
    page.goto(served.url + "/ui")
    rejected = next(
        p
        for p in api_get(served.url + "/pipelines")["pipelines"]
        if p.get("rejected") and p["rejected"]["file"].endswith("bad/pipeline.yaml")
    )
    errors = rejected["rejected"]["errors"]
    assert errors and all(re.search(r"bad/pipeline\.yaml:\d+:\d+", str(e)) for e in errors), errors
    row = page.locator(f"#pipelines tr[data-pipeline='{rejected['name']}']")
    expect(row.locator(".status")).to_have_text("rejected", timeout=DEADLINE_MS)
    for e in errors:
        expect(row.locator(".errors")).to_contain_text(str(e))
    shot(page, "pipelines.png")
