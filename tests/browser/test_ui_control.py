"""The web view's control tables in a real browser: a query's active flag, memory budget and
QoS ranges changed through the page with the API token (the catalog changes, the page shows
it); an invalid value is refused with the API's own message.

With ``CQ_UI_SCREENSHOTS=DIR`` the tests also save the screenshots shown in the README.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import TOKEN, Served
from tests.browser.test_ui import DEADLINE_MS, _shot


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
    _shot(page, "control.png")


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
