"""The approval page offers "Approve and allow in this conversation" (a standing grant).

Runs the page of ``toolguard.http.create_app`` in headless Chromium, with the
server, browser and helpers of ``tests/page/test_page.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from playwright.sync_api import expect

from tests.helpers import (
    BOB_MAIL,
    NEEDS_CHROMIUM,
    Server,
    browser,
    expect_card,
    page,
    replies,
    screenshot,
    send,
    server,
    tab,
    thread,
    thread_id_from_url,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = NEEDS_CHROMIUM
__all__ = ["browser", "page", "server", "tab"]  # fixtures, used by name


def test_approve_and_allow_runs_later_calls_of_the_tool_without_a_review(
    page: Page, server: Server
) -> None:
    """The grant button approves and grants; the next mail of the thread runs without a card."""
    send(page, "Please mail Bob about lunch")
    card = page.get_by_test_id("approval-card").first
    expect_card(page, 0, "send_email", BOB_MAIL)
    allow = card.get_by_test_id("approve-grant")
    expect(allow).to_have_text("Approve and allow in this conversation")
    expect(card.get_by_test_id("grant-hint")).to_have_text(
        "Later calls of send_email in this conversation run without asking."
    )
    options = card.get_by_test_id("grant-ttl").locator("option")
    expect(options).to_have_text(["until revoked", "for 15 minutes", "for 1 hour", "for 8 hours"])
    card.get_by_test_id("grant-ttl").select_option("3600")
    screenshot(page, "grant-card")
    allow.click()

    first = "Done. [success] Sent to bob@example.com: Lunch"
    expect(replies(page)).to_have_text([first])
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    send(page, "Mail Bob once more")
    expect(replies(page)).to_have_text([first, first])
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    assert server.outbox.done == [("send_email", BOB_MAIL), ("send_email", BOB_MAIL)]

    state = thread(page, server, thread_id_from_url(page))
    [grant] = state["grants"]
    assert {k: grant[k] for k in ("tool", "match", "ttl", "uses", "uses_left", "status")} == {
        "tool": "send_email",
        "match": "tool",
        "ttl": 3600.0,
        "uses": None,
        "uses_left": None,
        "status": "active",
    }
    assert state["actions"][0]["decision"] == {
        "type": "approve",
        "grant": {"scope": "thread", "match": "tool", "uses": None, "ttl": 3600.0},
    }


def test_approve_and_allow_without_a_duration_sends_no_ttl(page: Page, server: Server) -> None:
    """ "until revoked" (the default) grants without a ttl."""
    send(page, "Please mail Bob about lunch")
    expect_card(page, 0, "send_email", BOB_MAIL)
    page.get_by_test_id("approval-card").first.get_by_test_id("approve-grant").click()
    expect(replies(page)).to_have_count(1)
    state = thread(page, server, thread_id_from_url(page))
    assert state["actions"][0]["decision"]["grant"] == {
        "scope": "thread",
        "match": "tool",
        "uses": None,
        "ttl": None,
    }
    assert [g["status"] for g in state["grants"]] == ["active"]
