"""The approval page in shadow mode says so loudly: a banner above everything, and a call
that would have waited runs at once. Headless Chromium, as tests/page/test_cards.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from tests.helpers import (  # noqa: E402
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    Outbox,
    browser,
    make_page_chat,
    replies,
    send,
    serve_in_thread,
)
from toolguard.http import create_app  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name

SHADOW = (
    "Shadow mode: nothing waits for approval. Calls that would ask run at once; what would"
    " have happened is recorded in the audit trail. Deny rules still refuse."
)


@pytest.fixture(scope="module")
def plain_url() -> Iterator[str]:
    """A page without shadow mode."""
    with serve_in_thread(create_app(make_page_chat(Outbox()))) as url:
        yield url


def test_the_page_says_shadow_mode_is_on(browser: Browser) -> None:
    outbox = Outbox()
    context = browser.new_context(viewport={"width": 900, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        with serve_in_thread(create_app(make_page_chat(outbox, shadow=True))) as url:
            page.goto(url + "/")
            banner = page.get_by_test_id("shadow-banner")
            expect(banner).to_have_text(SHADOW)
            expect(banner).to_be_visible()
            send(page, "mail bob about lunch")
            expect(replies(page).last).to_contain_text("Sent to bob@example.com: Lunch")
            expect(page.get_by_test_id("queue-empty")).to_be_visible()
            assert [name for name, _ in outbox.done] == ["send_email"]  # ran at once
    finally:
        context.close()


def test_without_shadow_mode_there_is_no_banner(browser: Browser, plain_url: str) -> None:
    context = browser.new_context(viewport={"width": 900, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(plain_url + "/")
        expect(page.get_by_test_id("app")).to_be_visible()
        expect(page.get_by_test_id("shadow-banner")).to_be_hidden()
    finally:
        context.close()
