"""The approval page against a model that tries to deceive the reviewer (real headless Chromium).

Bidi controls, zero-width characters, look-alike letters, control characters,
markup, newlines in names, look-alike tool names, very long arguments and many
actions at once: the page shows every hidden character escaped with a warning
listing what and where, renders markup as text, keeps long arguments reachable,
and still sends back exactly what the model proposed. The page's rules
(static/reveal.js) are checked against toolguard._core.reveal: the same tables and,
for Hypothesis-generated hostile actions, the same output.
Screenshots are saved to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.adversarial.strategies import deceptive_text, odd_names, surrogate_text  # noqa: E402
from tests.helpers import (  # noqa: E402
    ARTIFACTS,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    Outbox,
    Server,
    browser,
    page,
    screenshot,
    serve_in_thread,
    tab,
)
from toolguard import (  # noqa: E402
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
    tool,
)
from toolguard._core.reveal import (  # noqa: E402
    TABLES,
    WARNING_HEADER,
    reveal_action,
    reveal_json,
    segments_text,
    warning_lines,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

expect = sync_api.expect

pytestmark = NEEDS_CHROMIUM
__all__ = ["browser", "page", "tab"]  # fixtures, used by name
expect.set_options(timeout=TIMEOUT_MS)

ANSI = "\x1b[2J\x1b[31m"
DECEPTIVE_MAIL = {
    "to": "bob@p\u0430ypal.com",
    "subject": "Invoice \u202efdp.exe",
    "body": f"Hi\u200b Bob{ANSI}\nsee you",
}
RECORDS = {
    "records": [
        {"n\u200bame": "x", "note": "\u0430\u0440\u0440\u04cf\u0435.com"},
        {"tag": "ok\U000e0041\U000e0042", "bad": "\ufffd", "deep": {"k\u2066": ["\u2069"]}},
    ]
}
LOOKALIKE_NAME = "send_ema\u0456l"  # a Cyrillic \u0456: not the real send_email
NEWLINE_NAME = "add_task\nApprove me"
MARKUP_NAME = "<img src=x onerror=window.__pwned=1>"
MARKUP_ARGS = {
    "html": "<script>window.__pwned=2</script><b>bold</b>",
    "attr": '"><img src=x onerror=window.__pwned=3>',
}
LONG_BODY = "\n".join(f"line {i}: " + "word " * 12 for i in range(300)) + "\nTHE END"
WIDE_BODY = "x" * 6000
MANY = 25
HIDDEN_AT = 17


def make_tools(outbox: Outbox) -> list[Any]:
    """Guarded tools, some with names a hostile registry could give."""

    def record(name: str, **args: Any) -> str:
        outbox.done.append((name, args))
        return f"{name} done"

    @requires_approval
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient.
            subject: the subject.
            body: the text.
        """
        return record("send_email", to=to, subject=subject, body=body)

    @requires_approval
    def update_records(records: list[dict[str, Any]]) -> str:
        """Update records.

        Args:
            records: the new records.
        """
        return record("update_records", records=records)

    @requires_approval
    def create_event(title: str) -> str:
        """Create an event.

        Args:
            title: its title.
        """
        return record("create_event", title=title)

    def lookalike(to: str, subject: str, body: str) -> str:
        """Send an email (not really)."""
        return record(LOOKALIKE_NAME, to=to, subject=subject, body=body)

    def newline(title: str) -> str:
        """Add a task."""
        return record(NEWLINE_NAME, title=title)

    def markup(html: str, attr: str) -> str:
        """Render markup."""
        return record(MARKUP_NAME, html=html, attr=attr)

    return [
        send_email,
        update_records,
        create_event,
        requires_approval(tool(lookalike, name=LOOKALIKE_NAME)),
        requires_approval(tool(newline, name=NEWLINE_NAME)),
        requires_approval(tool(markup, name=MARKUP_NAME)),
    ]


def call(messages: Sequence[Message], i: int, name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call whose id is unique within a thread."""
    return ToolCall(id=f"call_{len(messages)}_{i}", name=name, args=args)


REQUESTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "deceive": [("send_email", DECEPTIVE_MAIL)],
    "records": [("update_records", RECORDS)],
    "lookalike": [(LOOKALIKE_NAME, {"to": "bob@example.com", "subject": "Hi", "body": "Hi"})],
    "newline": [(NEWLINE_NAME, {"title": "x"})],
    "markup": [(MARKUP_NAME, MARKUP_ARGS)],
    "long": [("send_email", {"to": "bob@example.com", "subject": "Long", "body": LONG_BODY})],
    "wide": [("send_email", {"to": "bob@example.com", "subject": "Wide", "body": WIDE_BODY})],
    "many": [
        ("create_event", {"title": f"Event {i}" + ("\u200b" if i == HIDDEN_AT else "")})
        for i in range(1, MANY + 1)
    ],
}


def react(messages: Sequence[Message]) -> ModelResponse:
    """The hostile model: the request named in the user's message, then a bidi-laden reply."""
    last = messages[-1]
    if last["role"] == "user":
        planned = REQUESTS.get(str(last["content"]))
        if planned is None:
            return ModelResponse(text=f"All good{ANSI}\u202eexe.txt")
        return ModelResponse(
            tool_calls=[call(messages, i, name, args) for i, (name, args) in enumerate(planned)]
        )
    return ModelResponse(text="Done.")


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The page's app with the hostile model, on a free 127.0.0.1 port."""
    from toolguard.http import create_app

    outbox = Outbox()
    chat = ReviewedChat(ScriptedModel([react], repeat=True), make_tools(outbox))
    with serve_in_thread(create_app(chat)) as url:
        yield Server(url, outbox)


# --- helpers -----------------------------------------------------------------------------------


def ask(page: Page, text: str) -> Locator:
    """Send ``text``; return the approval cards."""
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("send").click()
    cards = page.get_by_test_id("approval-card")
    expect(cards.first).to_be_visible()
    return cards


def expect_revealed(card: Locator, name: str, args: dict[str, Any]) -> None:
    """The card shows exactly what toolguard._core.reveal renders, with the same warning."""
    shown = reveal_action(name, args, f"Tool `{name}` is awaiting approval")
    assert card.get_by_test_id("tool-name").text_content() == segments_text(shown.name)
    described = segments_text(shown.description)
    paired = described.count("`") // 2 * 2  # paired backticks render as <code>, not as text
    assert card.get_by_test_id("action-description").text_content() == described.replace(
        "`", "", paired
    )
    assert card.get_by_test_id("action-args").text_content() == reveal_json(args)
    lines = warning_lines(shown.findings)
    if lines:
        expect(card.get_by_test_id("reveal-header")).to_have_text(WARNING_HEADER)
        expect(card.get_by_test_id("reveal-item")).to_have_text(lines[1:])
        expect(card).to_have_class(re.compile(r"\bdeceptive\b"))
    else:
        expect(card.get_by_test_id("reveal-warning")).to_have_count(0)
    parts = ("tool-name", "action-description", "action-args")  # not the "Why it asks" line
    shown_parts = ", ".join(f"[data-testid={part}] .reveal" for part in parts)
    escapes = card.locator(shown_parts).evaluate_all(
        "(nodes) => nodes.map((n) => [n.textContent, n.title])"
    )
    expected = [
        [text, what]
        for part in (shown.name, shown.description, shown.args)
        for text, what in part
        if what is not None
    ]
    assert escapes == expected


def thread_state(page: Page, server: Server) -> dict[str, Any]:
    """The thread of the page's URL, from the API."""
    found = re.search(r"[?&]thread=([^&]+)", page.url)
    assert found is not None, page.url
    answer = page.request.get(f"{server.url}/hitl/threads/{found.group(1)}", timeout=TIMEOUT_MS)
    assert answer.status == 200
    data: dict[str, Any] = answer.json()
    return data


# --- the same rules as Python ------------------------------------------------------------------


def test_page_uses_the_same_tables_as_python(page: Page) -> None:
    """reveal.js holds exactly toolguard._core.reveal.TABLES."""
    tables = json.loads(page.evaluate("() => JSON.stringify(toolguardReveal.TABLES)"))
    assert tables == TABLES


hostile_text = st.one_of(st.text(max_size=20), surrogate_text, deceptive_text)
# Integer-like keys too: the page keeps the keys in their order (JavaScript objects put them
# first). Integers of any size and floats: the page shows each number as Python writes it.
keys = hostile_text | st.integers(0, 99).map(str)
numbers = (
    st.integers() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
)
hostile_args: st.SearchStrategy[Any] = st.recursive(
    hostile_text | numbers | st.booleans() | st.none(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
    max_leaves=10,
)

COMPARE = """(text) => {
    const [name, args, description] = toolguardReveal.parseJson(text);
    const r = toolguardReveal.revealAction(name, args, description);
    return JSON.stringify([r.name, r.description, r.args,
        r.findings.map((f) => [f.what, f.where]), toolguardReveal.warningLines(r.findings),
        toolguardReveal.revealJson(args)]);
}"""


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=odd_names,
    args=st.dictionaries(keys, hostile_args, max_size=4),
    description=hostile_text,
)
def test_page_reveals_exactly_like_python(
    page: Page, name: str, args: dict[str, Any], description: str
) -> None:
    """For hostile names, descriptions and arguments the page and Python show the same text."""
    shown = reveal_action(name, args, description)
    expected = [
        [list(s) for s in shown.name],
        [list(s) for s in shown.description],
        [list(s) for s in shown.args],
        [[f.what, f.where] for f in shown.findings],
        warning_lines(shown.findings),
        reveal_json(args),
    ]
    text = json.dumps([name, args, description])  # ASCII: lone surrogates travel safely
    assert json.loads(page.evaluate(COMPARE, text)) == expected


# --- the approval card ---------------------------------------------------------------------------


def test_deceptive_arguments_are_escaped_and_listed_and_approved_unchanged(
    page: Page, server: Server
) -> None:
    """RLO, zero-width, Cyrillic and ANSI characters show escaped; Approve runs the exact text."""
    card = ask(page, "deceive").first
    expect_revealed(card, "send_email", DECEPTIVE_MAIL)
    expect(card.get_by_test_id("reveal-item")).to_have_text(
        [
            "Cyrillic letter \u0430 (U+0430) mixed into a Latin word in args.to",
            "U+202E RIGHT-TO-LEFT OVERRIDE in args.subject",
            "U+200B ZERO WIDTH SPACE in args.body",
            "U+001B ESCAPE in args.body (2 times)",
        ]
    )
    assert card.get_by_test_id("action-args").text_content() == (
        "{\n"
        '  "to": "bob@p\\u0430ypal.com",\n'
        '  "subject": "Invoice \\u202efdp.exe",\n'
        '  "body": "Hi\\u200b Bob\\u001b[2J\\u001b[31m\\nsee you"\n'
        "}"
    )
    state = thread_state(page, server)
    assert state["pending_review"]["action_requests"][0]["args"] == DECEPTIVE_MAIL
    screenshot(page, "reveal-deceptive-card")

    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("message-assistant").last).to_have_text("AssistantDone.")
    assert server.outbox.done == [("send_email", DECEPTIVE_MAIL)]
    history_args = page.get_by_test_id("tool-call").locator("pre").text_content()
    assert history_args == reveal_json(DECEPTIVE_MAIL)


def test_edit_shows_escaped_json_and_keeps_every_character(page: Page, server: Server) -> None:
    """The edit box holds the escaped JSON; confirming it unchanged runs the exact arguments."""
    card = ask(page, "records").first
    expect_revealed(card, "update_records", RECORDS)
    card.get_by_test_id("edit").click()
    edit = card.get_by_test_id("edit-args")
    assert edit.input_value() == reveal_json(RECORDS)
    assert edit.input_value().isascii()
    screenshot(page, "reveal-edit")
    card.get_by_test_id("confirm-edit").click()
    expect(page.get_by_test_id("message-assistant").last).to_have_text("AssistantDone.")
    assert server.outbox.done == [("update_records", RECORDS)]


@pytest.mark.parametrize(
    ("request_text", "name", "args"),
    [
        ("lookalike", LOOKALIKE_NAME, REQUESTS["lookalike"][0][1]),
        ("newline", NEWLINE_NAME, {"title": "x"}),
    ],
)
def test_deceptive_tool_names_are_revealed(
    page: Page, server: Server, request_text: str, name: str, args: dict[str, Any]
) -> None:
    """A name that looks like another tool's, or holds a newline, shows escaped with a warning."""
    card = ask(page, request_text).first
    expect_revealed(card, name, args)
    expect(card.get_by_test_id("reveal-item").first).to_contain_text("in the tool name")
    screenshot(page, f"reveal-name-{request_text}")
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("message-assistant").last).to_have_text("AssistantDone.")
    assert server.outbox.done == [(name, args)]


def test_markup_in_names_and_arguments_is_only_text(page: Page, server: Server) -> None:
    """HTML in a tool name or arguments renders as text: no element is created, no script runs."""
    card = ask(page, "markup").first
    expect_revealed(card, MARKUP_NAME, MARKUP_ARGS)
    assert card.get_by_test_id("tool-name").text_content() == MARKUP_NAME
    assert page.locator("#cards img, #cards script, #cards b, #messages img").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    card.get_by_test_id("approve").click()
    expect(page.get_by_test_id("message-assistant").last).to_have_text("AssistantDone.")
    assert page.locator("img, b, #messages script").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert server.outbox.done == [(MARKUP_NAME, MARKUP_ARGS)]


def test_long_arguments_stay_reachable_and_the_buttons_stay_close(page: Page) -> None:
    """Long arguments scroll inside their box (with a note); the buttons stay on screen."""
    card = ask(page, "long").first
    args = REQUESTS["long"][0][1]
    expect_revealed(card, "send_email", args)
    text = reveal_json(args)
    expect(card.get_by_test_id("long-args")).to_have_text(
        f"Long arguments (5 lines, {len(text)} characters):"
        " scroll inside the box to read all of them."
    )
    pre = card.get_by_test_id("action-args")
    box = pre.evaluate(
        """(el) => ({scrolls: el.scrollHeight > el.clientHeight,
                    overflow: getComputedStyle(el).overflowY, height: el.clientHeight})"""
    )
    assert box["scrolls"] is True
    assert box["overflow"] == "auto"
    assert box["height"] <= 0.6 * 900
    card.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    expect(card.get_by_test_id("approve")).to_be_in_viewport()
    end = pre.evaluate("(el) => { el.scrollTop = el.scrollHeight; return el.scrollTop; }")
    assert end > 0
    screenshot(page, "reveal-long-args")


def test_a_long_word_wraps_instead_of_hiding_off_screen(page: Page) -> None:
    """A 6,000-character word wraps inside the card: nothing is hidden to the right."""
    card = ask(page, "wide").first
    pre = card.get_by_test_id("action-args")
    widths = pre.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert widths[0] <= widths[1]
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")


def test_one_deceptive_action_among_many_gets_its_warning(page: Page, server: Server) -> None:
    """With 25 actions every card is shown and counted; only the deceptive one warns."""
    cards = ask(page, "many")
    expect(cards).to_have_count(MANY)
    expect(page.locator("#review-title")).to_have_text(
        f"{MANY} actions are waiting for your approval"
    )
    expect(cards.nth(MANY - 1).locator(".count")).to_have_text(f" ({MANY} of {MANY})")
    expect(page.get_by_test_id("reveal-warning")).to_have_count(1)
    hidden = cards.nth(HIDDEN_AT - 1)
    expect(hidden.get_by_test_id("reveal-item")).to_have_text(
        ["U+200B ZERO WIDTH SPACE in args.title"]
    )
    expect(hidden.get_by_test_id("tool-name")).to_have_text("create_event")
    hidden.scroll_into_view_if_needed()
    hidden.screenshot(path=str(ARTIFACTS / "reveal-one-of-many.png"))
    page.get_by_test_id("approve-all").click()
    expect(page.get_by_test_id("message-assistant").last).to_have_text("AssistantDone.")
    ran = sorted(
        server.outbox.done, key=lambda done: int(done[1]["title"].split()[1].strip("\u200b"))
    )
    assert ran == [("create_event", args) for _, args in REQUESTS["many"]]  # in any order


def test_replies_show_hidden_characters_escaped(page: Page) -> None:
    """A model's reply cannot hide text with bidi or control characters either."""
    page.get_by_test_id("chat-input").fill("hello")
    page.get_by_test_id("send").click()
    reply = page.get_by_test_id("message-assistant").last.get_by_test_id("message-text")
    expect(reply).to_have_text("All good\\u001b[2J\\u001b[31m\\u202eexe.txt")
    assert reply.locator(".reveal").evaluate_all("(n) => n.map((e) => e.title)") == [
        "U+001B ESCAPE",
        "U+001B ESCAPE",
        "U+202E RIGHT-TO-LEFT OVERRIDE",
    ]


def test_without_reveal_js_the_page_shows_no_card(page: Page, server: Server) -> None:
    """Fail closed: if reveal.js cannot load, no card (and no button) is shown at all."""
    ask(page, "deceive")
    page.route("**/static/reveal.js", lambda route: route.abort())
    try:
        page.reload()
        expect(page.get_by_test_id("error-text")).to_have_text(
            "The page could not load reveal.js: reload the page."
        )
        expect(page.get_by_test_id("approval-card")).to_have_count(0)
        expect(page.get_by_test_id("chat-input")).to_be_disabled()
        expect(page.get_by_test_id("send")).to_be_disabled()
    finally:
        page.unroute("**/static/reveal.js")
    page.reload()
    expect(page.get_by_test_id("approval-card")).to_have_count(1)
    assert server.outbox.done == []
