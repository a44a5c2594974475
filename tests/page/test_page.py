"""End-to-end tests of the approval page (toolguard/static) in a real headless Chromium.

The app from ``toolguard.http.create_app`` runs under uvicorn on 127.0.0.1 in a
background thread, driven by a ScriptedModel that reacts to the conversation.
Screenshots of the approval cards are saved to ``test-artifacts/``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from tests.helpers import (  # noqa: E402 - after the skips above
    ARTIFACTS,
    BOB_MAIL,
    EVENT,
    MODEL_DOWN,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    Outbox,
    Server,
    browser,
    expect_card,
    make_page_chat,
    page,
    page_call,
    pretty,
    replies,
    screenshot,
    send,
    serve_in_thread,
    server,
    tab,
    thread,
    thread_id_from_url,
)
from toolguard import (  # noqa: E402 - after the skips above
    REJECTED_BY_USER_MESSAGE,
    Message,
    ReviewExpiredError,
    ToolCall,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = ["browser", "page", "server", "tab"]  # fixtures, used by name

expect = sync_api.expect

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=TIMEOUT_MS)

REJECT_PROMPT = "Why are you rejecting this tool?"
MARK = "Rejected by the reviewer, not executed: "
"""How the default ResultTemplates mark a rejection in the tool message the model reads."""
CAROL_MAIL = {**BOB_MAIL, "to": "carol@example.com"}
PAGE_FIELDS = ("thread_id", "status", "messages", "pending_review", "review_id")
# --- the agent behind the page -----------------------------------------------------------------


# --- fixtures ----------------------------------------------------------------------------------


# --- helpers -----------------------------------------------------------------------------------


def shown_messages(page: Page) -> list[list[str | None]]:
    """The conversation as shown: ``[testid, text]`` per message item."""
    result: list[list[str | None]] = page.evaluate(
        """() => Array.from(document.querySelectorAll('#messages > li')).map((li) => {
            const q = (s) => li.querySelector(s)?.textContent ?? null;
            const id = li.dataset.testid;
            if (id === 'message-tool') {
                return [id, `${q('.tool-name')} [${q('[data-testid=tool-status]')}] `
                    + q('[data-testid=tool-content]')];
            }
            if (id === 'message-tool-calls') {
                const names = Array.from(li.querySelectorAll('[data-testid=tool-call] code'))
                    .map((c) => c.textContent).join(', ');
                return [id, `${q('.text') ?? ''} -> ${names}`];
            }
            return [id, q('.text')];
        })"""
    )
    return result


def assistant_calls(text: str | None, *calls: ToolCall) -> Message:
    """The stored assistant message proposing ``calls``."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args, ensure_ascii=False)},
            }
            for c in calls
        ],
    }


def screenshot_page(page: Page, name: str) -> None:
    """Save the whole page to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


# --- tests -------------------------------------------------------------------------------------


def test_reject_with_reason_reload_then_approve(page: Page, server: Server) -> None:
    """A rejection's reason reaches the model, a reload restores the card, approval runs it."""
    chat_input = page.get_by_test_id("chat-input")
    expect(chat_input).to_be_enabled()
    send(page, "Please mail Bob about lunch")

    cards = page.get_by_test_id("approval-card")
    expect(cards).to_have_count(1)
    expect_card(page, 0, "send_email", BOB_MAIL)
    expect(chat_input).to_be_disabled()
    expect(page.get_by_test_id("send")).to_be_disabled()
    expect(page.get_by_test_id("approve-all")).to_be_hidden()
    screenshot(page, "approval-card")
    thread_id = thread_id_from_url(page)

    card = cards.first
    card.get_by_test_id("reject").click()
    reason = card.get_by_test_id("reject-reason")
    expect(reason).to_be_focused()
    expect(reason).to_have_attribute("placeholder", REJECT_PROMPT)
    expect(card.get_by_label(REJECT_PROMPT)).to_have_count(1)
    reason.fill("Use carol@example.com instead")
    screenshot(page, "approval-card-reject")
    card.get_by_test_id("confirm-reject").click()

    expect(page.get_by_test_id("message-tool")).to_have_count(1)
    expect_card(page, 0, "send_email", CAROL_MAIL)
    expect(chat_input).to_be_disabled()
    assert server.outbox.done == []

    page.reload()
    expect(cards).to_have_count(1)
    expect_card(page, 0, "send_email", CAROL_MAIL)
    expect(chat_input).to_be_disabled()
    assert thread_id_from_url(page) == thread_id
    assert shown_messages(page) == [
        ["message-user", "Please mail Bob about lunch"],
        ["message-tool-calls", " -> send_email"],
        ["message-tool", f"send_email [rejected] {MARK}Use carol@example.com instead"],
        ["message-tool-calls", "Sure, I will use that address. -> send_email"],
    ]
    screenshot_page(page, "page-after-reload")

    cards.first.get_by_test_id("approve").click()
    reply = "Done. [success] Sent to carol@example.com: Lunch"
    expect(replies(page)).to_have_text([reply])
    expect(cards).to_have_count(0)
    expect(page.get_by_test_id("review")).to_be_hidden()
    expect(chat_input).to_be_enabled()
    expect(page.get_by_test_id("send")).to_be_enabled()
    expect(page.get_by_test_id("error")).to_be_hidden()
    assert server.outbox.done == [("send_email", CAROL_MAIL)]
    screenshot_page(page, "conversation")
    assert shown_messages(page) == [
        ["message-user", "Please mail Bob about lunch"],
        ["message-tool-calls", " -> send_email"],
        ["message-tool", f"send_email [rejected] {MARK}Use carol@example.com instead"],
        ["message-tool-calls", "Sure, I will use that address. -> send_email"],
        ["message-tool", "send_email [executed] Sent to carol@example.com: Lunch"],
        ["message-assistant", reply],
    ]
    first, second = (
        page_call([{}], "send_email", BOB_MAIL),
        page_call([{}] * 3, "send_email", CAROL_MAIL),
    )
    state = thread(page, server, thread_id)
    assert {key: state[key] for key in PAGE_FIELDS} == {
        "thread_id": thread_id,
        "status": "idle",
        "messages": [
            {"role": "user", "content": "Please mail Bob about lunch"},
            assistant_calls(None, first),
            {
                "role": "tool",
                "tool_call_id": first.id,
                "content": f"{MARK}Use carol@example.com instead",
                "status": "error",
            },
            assistant_calls("Sure, I will use that address.", second),
            {
                "role": "tool",
                "tool_call_id": second.id,
                "content": "Sent to carol@example.com: Lunch",
                "status": "success",
            },
            {"role": "assistant", "content": reply},
        ],
        "pending_review": None,
        "review_id": None,
    }
    assert [(a["call_id"], a["status"], a["decision"]) for a in state["actions"]] == [
        (first.id, "rejected", {"type": "reject", "message": "Use carol@example.com instead"}),
        (second.id, "executed", {"type": "approve"}),
    ]


def test_edit_with_invalid_json_shows_inline_error_and_sends_nothing(
    page: Page, server: Server
) -> None:
    """Args that are not JSON, or not an object, are refused inline; no request is sent."""
    send(page, "Please mail Bob about lunch")
    card = page.get_by_test_id("approval-card").first
    expect_card(page, 0, "send_email", BOB_MAIL)
    posted: list[str] = []

    def record(request: Any) -> None:
        if request.method == "POST":
            posted.append(request.url)

    page.on("request", record)

    card.get_by_test_id("edit").click()
    edit_args = card.get_by_test_id("edit-args")
    expect(edit_args).to_be_focused()
    assert edit_args.input_value() == pretty(BOB_MAIL)

    edit_args.fill('{"to": "dave@example.com",')
    card.get_by_test_id("confirm-edit").click()
    parser_message = page.evaluate(
        "(text) => { try { JSON.parse(text); } catch (e) { return e.message; } }",
        '{"to": "dave@example.com",',
    )
    error = card.get_by_test_id("edit-error")
    expect(error).to_have_text(f"The arguments are not valid JSON: {parser_message}")
    expect(edit_args).to_have_attribute("aria-invalid", "true")
    screenshot(page, "approval-card-edit-error")

    edit_args.fill('["dave@example.com"]')
    expect(error).to_be_hidden()
    card.get_by_test_id("confirm-edit").click()
    expect(error).to_have_text("The arguments must be a JSON object, not an array.")

    edit_args.fill("null")
    card.get_by_test_id("confirm-edit").click()
    expect(error).to_have_text("The arguments must be a JSON object, not null.")

    page.remove_listener("request", record)
    assert posted == []
    assert server.outbox.done == []
    state = thread(page, server, thread_id_from_url(page))
    assert (state["status"], state["pending_review"]["action_requests"][0]["args"]) == (
        "awaiting_review",
        BOB_MAIL,
    )
    expect(page.get_by_test_id("chat-input")).to_be_disabled()


def test_edit_with_valid_json_runs_the_edited_args(page: Page, server: Server) -> None:
    """A valid edit runs the tool with exactly the edited args and records them."""
    send(page, "Please mail Bob about lunch")
    card = page.get_by_test_id("approval-card").first
    expect_card(page, 0, "send_email", BOB_MAIL)
    card.get_by_test_id("edit").click()
    edited = {"to": "dave@example.com", "subject": "Edited", "body": "Short and sweet."}
    card.get_by_test_id("edit-args").fill(json.dumps(edited))
    card.get_by_test_id("confirm-edit").click()

    reply = "Done. [success] Sent to dave@example.com: Edited"
    expect(replies(page)).to_have_text([reply])
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    assert server.outbox.done == [("send_email", edited)]
    state = thread(page, server, thread_id_from_url(page))
    assert state["messages"][1] == assistant_calls(None, page_call([{}], "send_email", edited))


def test_two_actions_one_approved_one_rejected_with_submit(page: Page, server: Server) -> None:
    """Each card gets its own decision; Submit waits for all and refuses a card's bad JSON."""
    send(page, "Please mail Bob and book the team lunch")
    cards = page.get_by_test_id("approval-card")
    expect(cards).to_have_count(2)
    expect_card(page, 0, "send_email", BOB_MAIL)
    expect_card(page, 1, "create_event", EVENT)
    submit = page.get_by_test_id("submit-decisions")
    expect(submit).to_be_disabled()
    expect(page.get_by_test_id("approve-all")).to_be_enabled()
    expect(page.get_by_test_id("reject-all")).to_be_enabled()

    cards.nth(0).get_by_test_id("approve").click()
    expect(cards.nth(0).get_by_test_id("approve")).to_have_attribute("aria-pressed", "true")
    expect(cards.nth(0).get_by_test_id("card-choice")).to_have_text("Your decision: Approve")
    expect(cards.nth(1).get_by_test_id("card-choice")).to_have_text("No decision yet")
    expect(submit).to_be_disabled()

    cards.nth(1).get_by_test_id("edit").click()
    expect(cards.nth(1).get_by_test_id("card-choice")).to_have_text("Your decision: Edit")
    cards.nth(1).get_by_test_id("edit-args").fill("Friday, please")
    expect(submit).to_be_enabled()
    submit.click()
    parser_message = page.evaluate(
        "(text) => { try { JSON.parse(text); } catch (e) { return e.message; } }",
        "Friday, please",
    )
    expect(cards.nth(1).get_by_test_id("edit-error")).to_have_text(
        f"The arguments are not valid JSON: {parser_message}"
    )
    expect(cards).to_have_count(2)
    assert server.outbox.done == []

    cards.nth(1).get_by_test_id("reject").click()
    expect(cards.nth(1).get_by_test_id("edit-panel")).to_be_hidden()
    reason = cards.nth(1).get_by_test_id("reject-reason")
    expect(reason).to_have_attribute("placeholder", REJECT_PROMPT)
    reason.fill("Not this week")
    expect(cards.nth(1).get_by_test_id("card-choice")).to_have_text("Your decision: Reject")
    expect(submit).to_be_enabled()
    screenshot(page, "approval-cards-two")
    submit.click()

    reply = f"Done. [success] Sent to bob@example.com: Lunch [error] {MARK}Not this week"
    expect(replies(page)).to_have_text([reply])
    expect(cards).to_have_count(0)
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    assert server.outbox.done == [("send_email", BOB_MAIL)]
    assert shown_messages(page) == [
        ["message-user", "Please mail Bob and book the team lunch"],
        ["message-tool-calls", " -> send_email, create_event"],
        ["message-tool", "send_email [executed] Sent to bob@example.com: Lunch"],
        ["message-tool", f"create_event [rejected] {MARK}Not this week"],
        ["message-assistant", reply],
    ]


def test_two_actions_approve_all(page: Page, server: Server) -> None:
    """Approve all runs every pending action at once."""
    send(page, "Please mail Bob and book the team lunch")
    expect(page.get_by_test_id("approval-card")).to_have_count(2)
    page.get_by_test_id("approve-all").click()

    reply = "Done. [success] Sent to bob@example.com: Lunch [success] Booked Team lunch on Friday"
    expect(replies(page)).to_have_text([reply])
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    # Approved tools run concurrently: compare without regard to order.
    assert sorted(server.outbox.done, key=lambda item: item[0]) == [
        ("create_event", EVENT),
        ("send_email", BOB_MAIL),
    ]


def test_each_card_says_why_its_tool_asks(page: Page, server: Server) -> None:
    """Under the description, each card shows the classifier's reason for its tool."""
    send(page, "Please mail Bob and book the team lunch")
    cards = page.get_by_test_id("approval-card")
    expect(cards).to_have_count(2)
    expect(cards.nth(0).get_by_test_id("action-why")).to_have_text(
        "Why it asks: the word 'send' is an approval verb (messaging and publishing)"
    )
    expect(cards.nth(1).get_by_test_id("action-why")).to_have_text(
        "Why it asks: the word 'create' is an approval verb (data)"
    )
    screenshot(page, "approval-cards-why")
    page.get_by_test_id("reject-all").click()
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    assert server.outbox.done == []


def test_two_actions_reject_all(page: Page, server: Server) -> None:
    """Reject all runs nothing; without reasons the model reads the default text."""
    send(page, "Please mail Bob and book the team lunch")
    expect(page.get_by_test_id("approval-card")).to_have_count(2)
    page.get_by_test_id("reject-all").click()

    rejected = f"[error] {REJECTED_BY_USER_MESSAGE}"  # one statement, no marker before it
    reply = f"Done. {rejected} {rejected}"
    expect(replies(page)).to_have_text([reply])
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    assert server.outbox.done == []


def test_model_error_is_shown_in_the_error_area(page: Page, server: Server) -> None:
    """A 502 from the API appears in the alert area; the typed message is kept."""
    send(page, "Please fail now")
    error = page.get_by_role("alert").filter(has=page.get_by_test_id("error-text"))
    expect(error).to_be_visible()
    expect(page.get_by_test_id("error-text")).to_have_text(f"Error 502: {MODEL_DOWN}")
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    expect(page.get_by_test_id("chat-input")).to_have_value("Please fail now")
    expect(page.locator("#messages > li")).to_have_count(0)
    assert page.url == server.url + "/"

    send(page, "Hello there")
    expect(replies(page)).to_have_text(["You said: Hello there"])
    expect(page.get_by_test_id("error")).to_be_hidden()


def test_unknown_thread_in_url_shows_the_404(page: Page, server: Server) -> None:
    """A reload with a thread id the server does not know shows the 404 and drops the id."""
    page.goto(server.url + "/?thread=missing")
    expect(page.get_by_test_id("error-text")).to_have_text(
        "Error 404: Unknown thread_id 'missing': start a conversation with POST /hitl/chat"
    )
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    assert page.url == server.url + "/"


def test_review_deadline_is_shown_and_a_late_decision_is_refused(tab: Page) -> None:
    """The card shows the deadline; deciding after it shows the 400 and runs nothing."""
    from toolguard.http import create_app

    outbox = Outbox()
    now = [datetime(2030, 1, 2, 12, 0, tzinfo=timezone.utc)]
    chat = make_page_chat(outbox, review_ttl=60, clock=lambda: now[0])
    with serve_in_thread(create_app(chat)) as url:
        tab.goto(url + "/")
        send(tab, "Please mail Bob about lunch")
        expect_card(tab, 0, "send_email", BOB_MAIL)
        answer = tab.request.get(f"{url}/hitl/threads/{thread_id_from_url(tab)}")
        state = answer.json()
        assert state["expires_at"] == "2030-01-02T12:01:00Z"
        local = tab.evaluate("(iso) => new Date(iso).toLocaleString()", state["expires_at"])
        expect(tab.get_by_test_id("review-deadline")).to_have_text(
            f"Decide before {local}. After that the actions expire and do not run."
        )

        now[0] += timedelta(minutes=5)
        tab.get_by_test_id("approval-card").first.get_by_test_id("approve").click()
        expect(tab.get_by_test_id("error-text")).to_have_text(
            f"Error 400: {ReviewExpiredError(state['review_id'])}"
        )
        expect(tab.get_by_test_id("approval-card")).to_have_count(0)
        expect(tab.get_by_test_id("review-deadline")).to_be_hidden()
        expect(tab.get_by_test_id("chat-input")).to_be_enabled()
        assert outbox.done == []


def test_the_page_works_under_its_content_security_policy(browser: Browser, server: Server) -> None:
    """The strict CSP is sent, a review runs without a violation, inline script is blocked."""
    from toolguard.http import CONTENT_SECURITY_POLICY

    server.outbox.done.clear()
    context = browser.new_context(viewport={"width": 900, "height": 900})
    csp_tab = context.new_page()
    csp_tab.set_default_timeout(TIMEOUT_MS)
    console: list[str] = []
    csp_tab.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    csp_tab.add_init_script(
        "window.__violations = [];"
        " document.addEventListener('securitypolicyviolation',"
        " (e) => window.__violations.push(e.effectiveDirective));"
    )
    try:
        loaded = csp_tab.goto(server.url + "/")
        assert loaded is not None
        assert loaded.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        send(csp_tab, "Please mail Bob and book the team lunch")
        expect(csp_tab.get_by_test_id("approval-card")).to_have_count(2)
        csp_tab.get_by_test_id("approve-all").click()
        expect(replies(csp_tab)).to_have_count(1)
        csp_tab.reload()
        expect(replies(csp_tab)).to_have_count(1)
        assert csp_tab.evaluate("window.__violations") == []
        assert [line for line in console if "Content Security Policy" in line] == []
        ran = csp_tab.evaluate(
            """() => { const s = document.createElement('script');
                s.textContent = 'window.__inline = true'; document.body.appendChild(s);
                return window.__inline === true; }"""
        )
        assert ran is False
        assert csp_tab.evaluate("window.__violations") == ["script-src-elem"]
    finally:
        context.close()


def test_the_favicon_and_the_reviewer_naming_page_load_under_the_policy(
    browser: Browser, server: Server
) -> None:
    """The page names its icon (no /favicon.ico asked for), which loads under the CSP; the
    page on naming reviewers, linked from "an unnamed reviewer", loads without a violation."""
    from toolguard.http import CONTENT_SECURITY_POLICY

    context = browser.new_context()
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    asked: list[str] = []
    tab.on("request", lambda request: asked.append(request.url))
    tab.add_init_script(
        "window.__violations = [];"
        " document.addEventListener('securitypolicyviolation',"
        " (e) => window.__violations.push(e.effectiveDirective));"
    )
    try:
        tab.goto(server.url + "/")
        icon = tab.evaluate(
            """() => { const link = document.querySelector('link[rel="icon"]');
                return [link.getAttribute('href'), link.type]; }"""
        )
        assert icon == ["/static/favicon.svg", "image/svg+xml"]
        drawn = tab.evaluate(
            """() => new Promise((done) => { const img = new Image();
                img.onload = () => done([img.naturalWidth > 0, img.naturalHeight > 0]);
                img.onerror = () => done('failed'); img.src = '/static/favicon.svg'; })"""
        )
        assert drawn == [True, True]
        answer = tab.request.get(server.url + "/static/favicon.svg")
        assert (answer.status, answer.headers["content-type"]) == (200, "image/svg+xml")
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY

        shown = tab.goto(server.url + "/static/naming-reviewers.html")
        assert shown is not None
        assert shown.status == 200
        expect(tab).to_have_title("How reviewers are named — toolguard")
        expect(tab.get_by_test_id("naming-reviewers").locator("li")).to_have_count(2)
        assert tab.evaluate("window.__violations") == []
        assert [url for url in asked if url.endswith("/favicon.ico")] == []
    finally:
        context.close()
    assert len(server.outbox.done) == 2
