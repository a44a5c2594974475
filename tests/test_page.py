"""End-to-end tests of the approval page (toolguard/static) in a real headless Chromium.

The app from ``toolguard.http.create_app`` runs under uvicorn on 127.0.0.1 in a
background thread, driven by a ScriptedModel that reacts to the conversation.
Screenshots of the approval cards are saved to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from toolguard import (  # noqa: E402 - after the skips above
    REJECTED_BY_USER_MESSAGE,
    Message,
    ModelError,
    ModelResponse,
    ReviewedChat,
    ReviewExpiredError,
    ScriptedModel,
    ToolCall,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

expect = sync_api.expect

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)
expect.set_options(timeout=TIMEOUT_MS)

REJECT_PROMPT = "Why are you rejecting this tool?"
MARK = "Rejected by the reviewer, not executed: "
"""How the default ResultTemplates mark a rejection in the tool message the model reads."""
MODEL_DOWN = "The model service is down"
LONG_BODY = (
    "Hi Bob,\nShall we have lunch on Friday at noon? "
    + "The usual place by the river, the one with the green door. " * 5
).strip()
BOB_MAIL = {"to": "bob@example.com", "subject": "Lunch", "body": LONG_BODY}
CAROL_MAIL = {**BOB_MAIL, "to": "carol@example.com"}
EVENT = {"title": "Team lunch", "day": "Friday"}
PAGE_FIELDS = ("thread_id", "status", "messages", "pending_review", "review_id")
ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


# --- the agent behind the page -----------------------------------------------------------------


class Outbox:
    """What the tools really did, in order."""

    def __init__(self) -> None:
        self.done: list[tuple[str, dict[str, Any]]] = []


def make_tools(outbox: Outbox) -> list[Any]:
    """Two guarded tools (their names contain the verbs 'send' and 'create')."""

    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text of the mail.
        """
        outbox.done.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"Sent to {to}: {subject}"

    def create_event(title: str, day: str) -> str:
        """Create a calendar event.

        Args:
            title: what the event is.
            day: the day it takes place.
        """
        outbox.done.append(("create_event", {"title": title, "day": day}))
        return f"Booked {title} on {day}"

    return [send_email, create_event]


def call(messages: Sequence[Message], name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call whose id is stable within a thread (it counts the messages)."""
    return ToolCall(id=f"call_{len(messages)}_{name}", name=name, args=args)


def react(messages: Sequence[Message]) -> ModelResponse:
    """The scripted model: mail and/or book on request, retry with a rejection's address."""
    last = messages[-1]
    if last["role"] == "user":
        text = str(last["content"]).lower()
        if "fail" in text:
            raise ModelError(MODEL_DOWN)
        calls = []
        if "mail" in text:
            calls.append(call(messages, "send_email", BOB_MAIL))
        if "book" in text:
            calls.append(call(messages, "create_event", EVENT))
        if calls:
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text=f"You said: {last['content']}")
    results: list[Message] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        results.insert(0, message)
    for result in results:
        found = ADDRESS.search(str(result["content"]))
        if result["status"] == "error" and found:
            mail = {**BOB_MAIL, "to": found.group(0)}
            return ModelResponse(
                text="Sure, I will use that address.",
                tool_calls=[call(messages, "send_email", mail)],
            )
    return ModelResponse(
        text="Done. " + " ".join(f"[{r['status']}] {r['content']}" for r in results)
    )


# --- fixtures ----------------------------------------------------------------------------------


class Server:
    """The running app: its base URL and what its tools did."""

    def __init__(self, url: str, outbox: Outbox) -> None:
        self.url = url
        self.outbox = outbox


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", ws="none", http="h11", access_log=False
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        ready = threading.Event()
        for _ in range(200):  # up to 10 s
            if uv.started or not thread.is_alive():
                break
            ready.wait(0.05)
        if not uv.started:
            pytest.fail("uvicorn did not start within 10 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


def make_chat(outbox: Outbox, **options: Any) -> ReviewedChat:
    """A chat with the reacting scripted model and the two guarded tools."""
    return ReviewedChat(ScriptedModel([react], repeat=True), make_tools(outbox), **options)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The FastAPI app with the page, served by uvicorn on a free 127.0.0.1 port."""
    from toolguard.http import create_app

    outbox = Outbox()
    with serve(create_app(make_chat(outbox))) as url:
        yield Server(url, outbox)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright (never ``playwright install``)."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=30_000
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def tab(browser: Browser) -> Iterator[Page]:
    """One browser tab for the module (a new context per test costs more than the test)."""
    context = browser.new_context(viewport={"width": 900, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    opened.set_default_navigation_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def page(tab: Page, server: Server) -> Page:
    """The page freshly loaded without a thread; the outbox starts empty."""
    server.outbox.done.clear()
    tab.goto(server.url + "/")
    return tab


# --- helpers -----------------------------------------------------------------------------------


def pretty(value: Any) -> str:
    """JSON as the page prints it (``JSON.stringify(value, null, 2)``)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def send(page: Page, text: str) -> None:
    """Type a message into the chat box and press Send."""
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("send").click()


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


def replies(page: Page) -> Locator:
    """The texts of the assistant's text replies."""
    return page.get_by_test_id("message-assistant").get_by_test_id("message-text")


def thread_id_from_url(page: Page) -> str:
    """The ``thread`` query parameter of the page's URL."""
    found = re.search(r"[?&]thread=([^&]+)", page.url)
    assert found is not None, page.url
    return found.group(1)


def thread(page: Page, server: Server, thread_id: str) -> dict[str, Any]:
    """``GET /hitl/threads/{id}`` as JSON."""
    answer = page.request.get(f"{server.url}/hitl/threads/{thread_id}", timeout=TIMEOUT_MS)
    assert answer.status == 200
    data: dict[str, Any] = answer.json()
    return data


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


def screenshot(page: Page, name: str) -> None:
    """Save the review area to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("review").screenshot(path=str(ARTIFACTS / f"{name}.png"))


def screenshot_page(page: Page, name: str) -> None:
    """Save the whole page to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def expect_card(page: Page, index: int, name: str, args: dict[str, Any]) -> None:
    """Card ``index`` shows the tool, the fixed description and the full pretty JSON args."""
    card = page.get_by_test_id("approval-card").nth(index)
    expect(card.get_by_test_id("tool-name")).to_have_text(name)
    expect(card.get_by_test_id("action-description")).to_have_text(
        f"Tool {name} is awaiting approval"  # the backticks render as a <code> element
    )
    expect(card.get_by_test_id("action-description").locator("code")).to_have_text(name)
    expect(card.get_by_test_id("action-args")).to_be_visible()
    assert card.get_by_test_id("action-args").text_content() == pretty(args)


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
    first, second = call([{}], "send_email", BOB_MAIL), call([{}] * 3, "send_email", CAROL_MAIL)
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
    assert state["messages"][1] == assistant_calls(None, call([{}], "send_email", edited))


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

    rejected = f"[error] {MARK}{REJECTED_BY_USER_MESSAGE}"
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
    chat = make_chat(outbox, review_ttl=60, clock=lambda: now[0])
    with serve(create_app(chat)) as url:
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
    assert len(server.outbox.done) == 2
