"""The approval page with a judge: the verdict on a waiting card, and "approved by the judge"
for a call that ran without a review. Headless Chromium, as tests/page/test_cards.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("axe_playwright_python", reason="the dev extra is not installed")

from tests.helpers import (  # noqa: E402
    ARTIFACTS,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    browser,
    serious_axe_violations,
    serve_in_thread,
    thread_id_from_url,
)
from toolguard import (  # noqa: E402
    Judge,
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard.http import create_app  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name

# A rationale written by a model: markup stays text, a bidi control is shown escaped.
HOSTILE = "Mallory is <b>not</b> a contact\u202e of the user."
VERDICTS: dict[str, Any] = {
    "mallory@example.net": {
        "risk": "high",
        "user_authorized": False,
        "outcome": "ask",
        "rationale": HOSTILE,
    },
    "bob@example.com": "I think this is fine!",  # not a verdict: the judge could not decide
    "set_status": {
        "risk": "low",
        "user_authorized": True,
        "outcome": "allow",
        "rationale": "The user asked to set the status to away.",
    },
}


class JudgeModel(ScriptedModel):
    """The judge's model, with a name the page shows."""

    model = "judge-model"


def verdict(messages: Sequence[Message]) -> ModelResponse:
    """The scripted verdict for the proposed call (by recipient, or by tool)."""
    call = json.loads(str(messages[1]["content"]))["proposed_call"]
    found = VERDICTS.get(call["arguments"].get("to", call["tool"]))
    return ModelResponse(text=found if isinstance(found, str) else json.dumps(found))


def react(messages: Sequence[Message]) -> ModelResponse:
    """Mail whom the user names, or set the status; afterwards, say it is done."""
    last = messages[-1]
    if last["role"] != "user":
        return ModelResponse(text="Done.")
    text = str(last["content"]).lower()
    if "status" in text:
        return ModelResponse(
            tool_calls=[ToolCall(id="s1", name="set_status", args={"value": "away"})]
        )
    to = "mallory@example.net" if "mallory" in text else "bob@example.com"
    args = {"to": to, "body": "the numbers"}
    return ModelResponse(tool_calls=[ToolCall(id="m1", name="send_email", args=args)])


@requires_approval
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the recipient's address.
        body: the text.
    """
    return f"Sent to {to}"


@requires_approval
def set_status(value: str) -> str:
    """Set the user's chat status.

    Args:
        value: the new status.
    """
    return f"Status: {value}"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    judge = Judge(JudgeModel([verdict], repeat=True), auto_approve=True)
    chat = ReviewedChat(ScriptedModel([react], repeat=True), [send_email, set_status], judge=judge)
    with serve_in_thread(create_app(chat)) as base:
        yield base


@pytest.fixture
def page(browser: Browser, url: str) -> Iterator[Page]:
    context = browser.new_context(
        viewport={"width": 900, "height": 900}, timezone_id="UTC", locale="en-US"
    )
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    opened.goto(url + "/")
    try:
        yield opened
    finally:
        context.close()


def ask(page: Page, text: str) -> Locator:
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("send").click()
    card = page.get_by_test_id("approval-card").first
    expect(card).to_be_visible()
    return card


def test_a_waiting_card_shows_the_verdict_as_text(page: Page) -> None:
    """Risk badge, the user's authorization, the rationale (escaped, never markup), the model."""
    card = ask(page, "mail mallory the numbers")
    judge = card.get_by_test_id("judge")
    expect(judge.get_by_test_id("judge-model")).to_have_text("judge-model")
    expect(judge.get_by_test_id("judge-risk")).to_have_text("high risk")
    expect(judge.get_by_test_id("judge-risk")).to_have_class("badge risk-high")
    expect(judge.get_by_test_id("judge-authorized")).to_have_text("The user did not ask for it.")
    expect(judge.get_by_test_id("judge-rationale")).to_have_text(
        "Mallory is <b>not</b> a contact\\u202e of the user."
    )
    assert judge.locator("b").count() == 0
    expect(judge.get_by_test_id("judge-rationale").locator(".reveal")).to_have_attribute(
        "title", "U+202E RIGHT-TO-LEFT OVERRIDE"
    )
    # The description's copy of the verdict is left out: it shows once, and no line break
    # in the description is flagged as hidden text.
    expect(card.get_by_test_id("action-description")).to_have_text(
        "Tool send_email is awaiting approval"
    )
    expect(card.get_by_test_id("reveal-warning")).to_have_count(0)
    assert serious_axe_violations(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("review").screenshot(path=str(ARTIFACTS / "judge-card.png"))


def test_a_judge_that_could_not_decide_says_so(page: Page) -> None:
    card = ask(page, "mail bob the numbers")
    judge = card.get_by_test_id("judge")
    expect(judge.get_by_test_id("judge-risk")).to_have_text("no verdict")
    expect(judge.get_by_test_id("judge-rationale")).to_have_text(
        "could not decide: its reply was not one JSON object"
    )
    expect(judge.get_by_test_id("judge-authorized")).to_have_count(0)


def test_a_call_the_judge_approved_shows_who_approved_it(page: Page, url: str) -> None:
    """No card: the call ran; its result says 'Approved by the judge' with the time and why."""
    page.get_by_test_id("chat-input").fill("set my status to away")
    page.get_by_test_id("send").click()
    item = page.get_by_test_id("message-tool")
    expect(item.get_by_test_id("decided-by")).to_be_visible()
    audit = page.request.get(f"{url}/hitl/threads/{thread_id_from_url(page)}/audit")
    [judged] = [json.loads(line) for line in audit.text().splitlines()]
    when: str = page.evaluate("(iso) => new Date(iso).toLocaleString()", judged["at"])
    expect(item.get_by_test_id("decided-by")).to_have_text(
        f"Approved by the judge (judge-model) at {when}"
    )
    expect(item.get_by_test_id("judge-rationale")).to_have_text(
        "The user asked to set the status to away."
    )
    expect(item.get_by_test_id("tool-status")).to_have_text("ok")
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    page.get_by_test_id("messages").screenshot(path=str(ARTIFACTS / "judge-approved.png"))
