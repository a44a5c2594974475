"""The approval page with a quorum of reviewers (``requires_approval(approvals=2)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from playwright.sync_api import expect

import toolguard
from tests.helpers import (
    BOB_MAIL,
    NEEDS_CHROMIUM,
    Outbox,
    Server,
    browser,
    make_page_tools,
    page,
    react,
    screenshot,
    send,
    serve_in_thread,
    server,
    tab,
    thread,
    thread_id_from_url,
)
from toolguard import QuorumReviewerError, ReviewedChat, ScriptedModel
from toolguard.http import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = NEEDS_CHROMIUM
__all__ = ["browser", "page", "server", "tab"]  # fixtures, used by name


def quorum_chat(outbox: Outbox) -> ReviewedChat:
    """The page's chat, with send_email needing two reviewers."""
    send_email, create_event = make_page_tools(outbox)
    guarded = toolguard.requires_approval(approvals=2)(send_email)
    return ReviewedChat(ScriptedModel([react], repeat=True), [guarded, create_event])


def test_the_card_shows_the_quorum_and_refuses_the_same_reviewer(tab: Page) -> None:
    """0 of 2, Alice approves: 1 of 2 and nothing runs; Alice again: the 400; Bob: it runs."""
    outbox = Outbox()
    who = ["alice"]
    app = create_app(quorum_chat(outbox), reviewer=lambda: who[0])
    with serve_in_thread(app) as url:
        tab.goto(url + "/")
        send(tab, "Please mail Bob about lunch")
        card = tab.get_by_test_id("approval-card")
        expect(card.get_by_test_id("approvals")).to_have_text("0 of 2 approvals")
        expect(card.get_by_test_id("approve-grant")).to_be_hidden()  # a grant would skip a quorum
        card.get_by_test_id("approve").click()
        expect(card.get_by_test_id("approvals")).to_have_text(
            "1 of 2 approvals (approved by alice)"
        )
        screenshot(tab, "quorum-1-of-2")
        assert outbox.done == []
        state: dict[str, Any] = thread(tab, Server(url, outbox), thread_id_from_url(tab))
        assert state["status"] == "awaiting_review"
        assert state["pending_review"]["review_configs"] == [
            {
                "action_name": "send_email",
                "allowed_decisions": ["approve", "edit", "reject"],
                "approvals": {"required": 2, "given": 1, "by": ["alice"]},
            }
        ]

        card.get_by_test_id("approve").click()  # Alice again
        refused = QuorumReviewerError("alice", "send_email", 2, ["alice"])
        expect(tab.get_by_test_id("error-text")).to_have_text(f"Error 400: {refused}")
        expect(card.get_by_test_id("approvals")).to_have_text(
            "1 of 2 approvals (approved by alice)"
        )
        assert outbox.done == []

        who[0] = "bob"
        card.get_by_test_id("approve").click()
        expect(tab.get_by_test_id("approval-card")).to_have_count(0)
        expect(tab.get_by_test_id("chat-input")).to_be_enabled()
        assert outbox.done == [("send_email", BOB_MAIL)]


def test_a_review_without_a_quorum_shows_no_count(page: Page) -> None:
    """An action needing one approval has no approvals line (its payload has no such key)."""
    send(page, "Please mail Bob about lunch")
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_count(1)
    expect(card.get_by_test_id("approvals")).to_have_count(0)
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
