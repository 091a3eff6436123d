"""The web view's control tables in a real browser: a query's active flag, memory budget and
QoS ranges changed through the page with the API token (the catalog changes, the page shows
it); an invalid value is refused with the API's own message.

With ``CQ_UI_SCREENSHOTS=DIR`` the tests also save the screenshots shown in the README.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import TOKEN, Served
from tests.browser.pages import DEADLINE_MS, api_get, shot


def _open(page: Page, served: Served) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name="shop", exact=True).click()
    page.get_by_label("API token").fill(TOKEN)


def _row(page: Page, query: str) -> Locator:
    return page.locator(f"#queries tr[data-query={query}]")


def _api_refusal(served: Served, query: str, body: dict) -> tuple[int, str]:
    """What the API answers to a PATCH of `query`'s control with `body` (a refusal)."""
    request = urllib.request.Request(
        f"{served.url}/queries/shop/{query}/control",
        method="PATCH",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    try:
        urllib.request.urlopen(request, timeout=30)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["detail"]
    raise AssertionError(f"{body} was accepted")


def test_toggling_active_changes_the_catalog(page: Page, served: Served) -> None:
    _open(page, served)
    row = _row(page, "high_bids")
    expect(row.locator(".active")).to_have_text("yes", timeout=DEADLINE_MS)
    page.get_by_role("button", name="Deactivate high_bids").click()
    expect(page.locator("#control-message")).to_have_text(
        "high_bids is now inactive.", timeout=DEADLINE_MS
    )
    assert served.worker.catalog.query("shop", "high_bids").active is False
    assert "shop/high_bids" not in served.worker.queries  # it stopped
    expect(row.locator(".active")).to_have_text("no", timeout=DEADLINE_MS)
    page.get_by_role("button", name="Activate high_bids").press("Enter")  # keyboard only
    expect(page.locator("#control-message")).to_have_text(
        "high_bids is now active and running.", timeout=DEADLINE_MS
    )
    assert served.worker.catalog.query("shop", "high_bids").active is True
    expect(row.locator(".active")).to_have_text("yes", timeout=DEADLINE_MS)


def test_memory_budget_and_qos_set_through_the_page(page: Page, served: Served) -> None:
    _open(page, served)
    page.get_by_label("New memory budget of per_auction").fill("32 MiB")
    page.get_by_label("New memory budget of per_auction").press("Enter")
    expect(page.locator("#control-message")).to_have_text(
        "The memory budget of per_auction is now 32.0 MiB.", timeout=DEADLINE_MS
    )
    assert served.worker.catalog.query("shop", "per_auction").memory_budget == 32 * 2**20
    expect(_row(page, "per_auction").locator(".memory_budget")).to_have_text("32.0 MiB")

    page.get_by_label("New QoS ranges of per_auction").fill("window=5000..20000")
    _row(page, "per_auction").get_by_role("button", name="Set QoS").click()
    expect(page.locator("#control-message")).to_have_text(
        "The QoS ranges of per_auction are now window=5000..20000.", timeout=DEADLINE_MS
    )
    assert served.worker.catalog.query("shop", "per_auction").qos == {"window": [5000, 20000]}
    expect(_row(page, "per_auction").locator(".qos")).to_have_text("window=5000..20000")
    shot(page, "control.png")


def test_invalid_values_show_the_apis_message(page: Page, served: Served) -> None:
    _open(page, served)
    before = served.worker.catalog.query("shop", "per_auction")
    status, detail = _api_refusal(served, "per_auction", {"qos": {"window": [600, 60]}})
    page.get_by_label("New QoS ranges of per_auction").fill("window=600..60")
    page.get_by_label("New QoS ranges of per_auction").press("Enter")
    expect(page.locator("#control-message")).to_have_text(
        f"Setting the QoS ranges of per_auction was refused ({status}): {detail}",
        timeout=DEADLINE_MS,
    )
    assert "min <= max" in detail, detail

    status, detail = _api_refusal(served, "per_auction", {"memory_budget": 0})
    page.get_by_label("New memory budget of per_auction").fill("0")
    page.get_by_label("New memory budget of per_auction").press("Enter")
    expect(page.locator("#control-message")).to_have_text(
        f"Setting the memory budget of per_auction was refused ({status}): {detail}",
        timeout=DEADLINE_MS,
    )
    after = served.worker.catalog.query("shop", "per_auction")
    assert (after.qos, after.memory_budget) == (before.qos, before.memory_budget)


def test_results_arrive_in_the_page(page: Page, served: Served) -> None:
    _open(page, served)
    page.get_by_label("Follow the results of").select_option("per_auction")
    results = page.locator("#results-list li")
    expect(results.first).to_contain_text('"auction"', timeout=DEADLINE_MS)
    first = int(page.locator("#results-list").get_attribute("data-received") or 0)
    page.wait_for_function(
        f"Number(document.querySelector('#results-list').dataset.received) > {first}",
        timeout=DEADLINE_MS,
    )
    line = json.loads(results.first.text_content() or "")
    assert "auction" in line and "n" in line, line
    expect(page.locator("#results-status")).to_contain_text("results of per_auction received")
    shot(page, "results.png")
    # the source's late and dead-lettered counts, from the live feed
    source = page.locator("#bad-input tbody tr")
    expect(source).to_have_count(1, timeout=DEADLINE_MS)
    expect(source.locator(".late")).to_have_text("0")


def test_deployment_history_shows_errors_at_their_position(page: Page, served: Served) -> None:
    listed = api_get(served.url + "/pipelines")["pipelines"]
    name = next(p["name"] for p in listed if p.get("rejected"))  # the file's stem: it never loaded
    page.goto(served.url + "/ui")
    page.get_by_role("button", name=name, exact=True).click()
    rejected = page.locator("#deployments tr[data-status=rejected]")
    expect(rejected).to_have_count(1, timeout=DEADLINE_MS)
    [logged] = served.worker.catalog.deployments(name)
    assert logged.error and re.search(r"bad/pipeline\.yaml:\d+:\d+: ", logged.error), logged
    expect(rejected.locator("pre.errors")).to_have_text(logged.error)
    shot(page, "deployments.png")
    page.get_by_role("button", name="shop", exact=True).click()
    expect(page.locator("#deployments tr[data-status=applied]")).to_have_count(
        1, timeout=DEADLINE_MS
    )


def test_dead_letters_counted_with_samples(page: Page, served: Served) -> None:
    page.goto(served.url + "/ui")
    page.get_by_role("button", name="messy", exact=True).click()
    source = page.locator("#bad-input tbody tr")
    expect(source.locator(".dead")).to_have_text("2", timeout=DEADLINE_MS)
    samples = source.locator("ul.samples li")
    expect(samples).to_have_count(2)
    for text in samples.all_text_contents():
        entry = json.loads(text)
        assert entry["source"] == "Requests" and entry["reason"], entry
    expect(samples.first).to_contain_text("later")  # the newest first
    expect(source.locator(".late")).to_have_text("0")
