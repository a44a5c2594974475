"""The approval page with a quorum of reviewers (``requires_approval(approvals=2)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

import toolguard
from toolguard import QuorumReviewerError, ReviewedChat, ScriptedModel
from toolguard.http import create_app

from .test_page import (
    BOB_MAIL,
    CHROMIUM,
    Outbox,
    Server,
    browser,  # noqa: F401 - a fixture
    expect,
    make_tools,
    page,  # noqa: F401 - a fixture
    react,
    screenshot,
    send,
    serve,
    server,  # noqa: F401 - a fixture
    tab,  # noqa: F401 - a fixture
    thread,
    thread_id_from_url,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason=f"no Chromium at {CHROMIUM}")


def quorum_chat(outbox: Outbox) -> ReviewedChat:
    """The page's chat, with send_email needing two reviewers."""
    send_email, create_event = make_tools(outbox)
    guarded = toolguard.requires_approval(approvals=2)(send_email)
    return ReviewedChat(ScriptedModel([react], repeat=True), [guarded, create_event])


def test_the_card_shows_the_quorum_and_refuses_the_same_reviewer(tab: Page) -> None:  # noqa: F811
    """0 of 2, Alice approves: 1 of 2 and nothing runs; Alice again: the 400; Bob: it runs."""
    outbox = Outbox()
    who = ["alice"]
    app = create_app(quorum_chat(outbox), reviewer=lambda: who[0])
    with serve(app) as url:
        tab.goto(url + "/")
        send(tab, "Please mail Bob about lunch")
        card = tab.get_by_test_id("approval-card")
        expect(card.get_by_test_id("approvals")).to_have_text("0 of 2 approvals")
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


def test_a_review_without_a_quorum_shows_no_count(page: Page) -> None:  # noqa: F811
    """An action needing one approval has no approvals line (its payload has no such key)."""
    send(page, "Please mail Bob about lunch")
    card = page.get_by_test_id("approval-card")
    expect(card).to_have_count(1)
    expect(card.get_by_test_id("approvals")).to_have_count(0)
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
