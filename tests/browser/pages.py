"""What the browser tests share (test_ui.py, test_ui_budgets.py, test_ui_control.py): the
deadline that bounds their polling, a plain GET of the worker's API (`api_get`) and the README's
screenshots (`shot`, saved under ``CQ_UI_SCREENSHOTS=DIR`` when that is set)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

DEADLINE_MS = 120_000
SHOTS = os.environ.get("CQ_UI_SCREENSHOTS")


def api_get(url: str) -> Any:
    """GET `url`: its JSON when it answers JSON, else its text."""
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read().decode()
        return json.loads(body) if r.headers.get_content_type() == "application/json" else body


def shot(page: Page, name: str, height: int | None = None) -> None:
    """Save a screenshot of the page as `name` under CQ_UI_SCREENSHOTS, when that is set."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        if height is not None:  # room for the whole graph (its box is 75% of the window)
            page.set_viewport_size({"width": 1400, "height": height})
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)
