"""The page's approval statistics panel, in a real headless Chromium, on the scripted day of
tests/cli/day.py: the numbers of GET /hitl/stats, per tool, and the suggestions."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import anyio
import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from tests.cli.day import END, record_day
from tests.helpers import ARTIFACTS, NEEDS_CHROMIUM, TIMEOUT_MS, browser, serve_in_thread
from toolguard import MemoryStore, ReviewedChat, ScriptedModel
from toolguard.http import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser

__all__ = ["browser"]  # a fixture, used by name

pytestmark = NEEDS_CHROMIUM

NONE = "\u2013"
"""What the panel shows for no time to decide and nobody deciding (an en dash)."""


@pytest.fixture(scope="module")
def day_url() -> Iterator[str]:
    """The page over a store holding the scripted day."""
    store = MemoryStore()
    with ThreadPoolExecutor(1) as pool:  # Playwright's event loop runs in this thread
        pool.submit(anyio.run, record_day, store).result(timeout=60)
    with serve_in_thread(
        create_app(ReviewedChat(ScriptedModel([]), [], store=store, clock=lambda: END))
    ) as url:
        yield url


def test_the_panel_shows_each_tools_numbers_and_the_suggestions(
    browser: Browser, day_url: str
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(day_url + "/")
        expect(page.get_by_test_id("app")).to_be_visible()
        expect(page.get_by_test_id("stats-table")).to_be_hidden()
        page.get_by_test_id("stats-summary").click()
        rows = page.get_by_test_id("stats-row")
        expect(rows).to_have_count(6)
        cells = [[c.strip() for c in row.locator("th, td").all_inner_texts()] for row in rows.all()]
        assert cells == [
            ["delete_file", "7", "5", "0", "0", "5", "0", "0", "0", "2", "25 s", "45 s", "carol 5"],
            ["pay_invoice", "2", "0", "0", "0", "0", "0", "0", "0", "2", NONE, NONE, NONE],
            [
                "send_email", "5", "5", "5", "0", "0", "0", "0", "0", "0", "30 s", "5 min",
                "alice 3, bob 2",
            ],
            ["send_sms", "3", "1", "1", "0", "0", "0", "0", "0", "2", "5 s", "5 s", "alice 1"],
            [
                "transfer", "4", "4", "1", "1", "0", "1", "1", "0", "0", "10 s", "12 s",
                "alice 1, bob 1",
            ],
            ["wipe_disk", "2", "0", "0", "0", "0", "0", "0", "1", "1", NONE, NONE, NONE],
        ]  # fmt: skip
        assert rows.nth(1).get_by_test_id("stats-auto").get_attribute("title") == "judge 2"
        assert rows.nth(5).get_by_test_id("stats-auto").get_attribute("title") == (
            "shadow 1 (shadow mode: would deny 1)"
        )
        expect(page.get_by_test_id("stats-suggestion")).to_have_text(
            [
                "delete_file: rejected 5 of 5 in 1 day: a deny rule",
                (
                    "send_email: approved 5 of 5 unedited in 1 day: an allow rule or a standing"
                    " grant would save 5 asks"
                ),
            ]
        )
        expect(page.get_by_test_id("stats-status")).to_have_text(
            "Calls recorded up to 2026-03-02T18:00:00Z."
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "stats-panel.png"), full_page=True)
    finally:
        context.close()
