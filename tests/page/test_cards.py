"""The approval page for reviewers: outcome badges with who decided and when, backticks as
code, keyboard shortcuts, accessible names (axe-core), phone width, and edits checked
against the tool's schema before they are sent. Headless Chromium, as tests/page/test_page.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("axe_playwright_python", reason="the dev extra is not installed")

from fastapi import Header  # noqa: E402

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
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard.http import create_app  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name
MAIL = {"to": "bob@example.com", "subject": "Lunch", "body": "Friday at noon?"}
PRIORITY = {"ticket": 7, "level": "low", "note": None}
PRIORITY_DESCRIPTION = "Set the `level` of ticket `ticket`. Costs 1` credit"


class World:
    """What the tools did."""

    def __init__(self) -> None:
        self.done: list[tuple[str, dict[str, Any]]] = []


def make_tools(world: World) -> list[Any]:
    """send_email and set_priority, both guarded."""

    @requires_approval
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        world.done.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"Sent to {to}"

    @requires_approval(description=PRIORITY_DESCRIPTION)
    def set_priority(ticket: int, level: Literal["low", "high"], note: str | None = None) -> str:
        """Set a ticket's priority.

        Args:
            ticket: the ticket number.
            level: how urgent it is.
            note: why, optionally.
        """
        world.done.append(("set_priority", {"ticket": ticket, "level": level, "note": note}))
        return f"Ticket {ticket} is {level}"

    return [send_email, set_priority]


def react(messages: Sequence[Message]) -> ModelResponse:
    """Mail and/or set a priority on request; afterwards, report the results."""
    last = messages[-1]
    if last["role"] == "user":
        text = str(last["content"]).lower()
        calls = []
        if "mail" in text:
            calls.append(ToolCall(id=f"c{len(messages)}m", name="send_email", args=MAIL))
        if "priority" in text:
            calls.append(ToolCall(id=f"c{len(messages)}p", name="set_priority", args=PRIORITY))
        if calls:
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text="Hello.")
    return ModelResponse(text="Done.")


def who(x_reviewer: Annotated[str | None, Header()] = None) -> str | None:
    """The reviewer: the X-Reviewer header (a stand-in for a login)."""
    return x_reviewer


@pytest.fixture(scope="module")
def world() -> World:
    """What the tools did, shared by the module's server."""
    return World()


@pytest.fixture(scope="module")
def url(world: World) -> Iterator[str]:
    """The app with the page, its reviewer taken from the X-Reviewer header."""
    chat = ReviewedChat(ScriptedModel([react], repeat=True), make_tools(world))
    with serve_in_thread(create_app(chat, reviewer=who)) as base:
        yield base


def open_context(browser: Browser, width: int = 900) -> BrowserContext:
    """A context as reviewer 'maria', in UTC and US English (dates are deterministic)."""
    context = browser.new_context(
        viewport={"width": width, "height": 844},
        extra_http_headers={"X-Reviewer": "maria"},
        timezone_id="UTC",
        locale="en-US",
    )
    context.set_default_timeout(TIMEOUT_MS)
    return context


@pytest.fixture
def page(browser: Browser, url: str, world: World) -> Iterator[Page]:
    """A fresh page without a thread."""
    world.done.clear()
    context = open_context(browser)
    opened = context.new_page()
    opened.goto(url + "/")
    try:
        yield opened
    finally:
        context.close()


def ask(page: Page, text: str) -> Locator:
    """Send ``text`` and return the approval cards once shown."""
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("send").click()
    cards = page.get_by_test_id("approval-card")
    expect(cards.first).to_be_visible()
    return cards


def get_thread(page: Page, url: str) -> dict[str, Any]:
    """The thread of the page's URL, from the API."""
    answer = page.request.get(f"{url}/hitl/threads/{thread_id_from_url(page)}")
    assert answer.status == 200
    data: dict[str, Any] = answer.json()
    return data


def local_time(page: Page, iso: str) -> str:
    """``new Date(iso).toLocaleString()`` in the page (the context is UTC, en-US)."""
    text: str = page.evaluate("(iso) => new Date(iso).toLocaleString()", iso)
    return text


def tool_items(page: Page) -> list[list[str | None]]:
    """Each tool result as [badge, badge class, decided line, its <time> datetime]."""
    items: list[list[str | None]] = page.evaluate(
        """() => Array.from(document.querySelectorAll('[data-testid=message-tool]')).map((li) => [
            li.querySelector('[data-testid=tool-status]').textContent,
            li.querySelector('[data-testid=tool-status]').className,
            li.querySelector('[data-testid=decided-by]')?.textContent ?? null,
            li.querySelector('[data-testid=decided-by] time')?.getAttribute('datetime') ?? null,
        ])"""
    )
    return items


# --- outcomes: own badges, who decided and when ----------------------------------------------


def test_rejected_and_executed_calls_get_their_own_badges_with_reviewer_and_time(
    page: Page, url: str, world: World
) -> None:
    """A rejection is 'rejected' (not the red error of a crash); each says who decided, when."""
    cards = ask(page, "Please mail Bob and set the priority")
    expect(cards).to_have_count(2)
    cards.nth(0).get_by_test_id("approve").click()
    cards.nth(1).get_by_test_id("reject").click()
    cards.nth(1).get_by_test_id("reject-reason").fill("Not now")
    page.get_by_test_id("submit-decisions").click()
    expect(page.get_by_test_id("message-assistant")).to_have_count(1)

    actions = get_thread(page, url)["actions"]
    assert [(a["name"], a["status"], a["reviewer"]) for a in actions] == [
        ("send_email", "executed", "maria"),
        ("set_priority", "rejected", "maria"),
    ]
    mailed, refused = (a["decided_at"] for a in actions)
    assert tool_items(page) == [
        ["executed", "badge success", f"Approved by maria at {local_time(page, mailed)}", mailed],
        [
            "rejected",
            "badge rejected",
            f"Rejected by maria at {local_time(page, refused)}",
            refused,
        ],
    ]
    assert world.done == [("send_email", MAIL)]
    page.reload()
    expect(page.get_by_test_id("message-tool")).to_have_count(2)
    assert [item[0] for item in tool_items(page)] == ["executed", "rejected"]


THREAD_ID = "t-outcomes"
WHEN = "2026-05-04T10:11:12Z"


def action(call_id: str, status: str, decision: str | None, reviewer: str | None) -> dict[str, Any]:
    """An action of the thread API with the given outcome."""
    return {
        "id": f"a-{call_id}",
        "call_id": call_id,
        "name": "send_email",
        "args": MAIL,
        "description": "Tool `send_email` is awaiting approval",
        "status": status,
        "decision": {"type": decision} if decision else None,
        "result": None,
        "requested_at": WHEN,
        "decided_at": WHEN if decision or status == "cancelled" else None,
        "finished_at": WHEN,
        "expires_at": None,
        "digest": "",
        "reviewer": reviewer,
    }


OUTCOMES = [
    ("c1", "executed", "edit", "maria", "success"),
    ("c2", "failed", "approve", None, "error"),
    ("c3", "expired", None, None, "error"),
    ("c4", "cancelled", None, "ops\u202egnp.exe", "error"),
    ("c5", "rejected", "reject", "maria", "error"),
]


def test_every_outcome_has_its_badge_and_line(page: Page) -> None:
    """executed / failed / expired / cancelled / rejected; reviewer texts are revealed."""
    calls = [
        {"id": c, "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
        for c, *_ in OUTCOMES
    ]
    messages = [
        {"role": "user", "content": "mail"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": c, "content": f"result {c}", "status": status}
            for c, _, _, _, status in OUTCOMES
        ),
    ]
    body = {
        "thread_id": THREAD_ID,
        "status": "idle",
        "messages": messages,
        "pending_review": None,
        "review_id": None,
        "expires_at": None,
        "actions": [action(c, s, d, r) for c, s, d, r, _ in OUTCOMES],
    }
    page.route(
        f"**/hitl/threads/{THREAD_ID}",
        lambda route: route.fulfill(status=200, json=body),
    )
    page.goto(page.url.split("?")[0] + f"?thread={THREAD_ID}")
    expect(page.get_by_test_id("message-tool")).to_have_count(5)
    when = local_time(page, WHEN)
    assert tool_items(page) == [
        ["executed", "badge success", f"Edited by maria at {when}", WHEN],
        ["failed", "badge error", f"Approved by an unnamed reviewer at {when}", WHEN],
        ["expired", "badge muted", f"Expired without a decision at {when}", WHEN],
        ["cancelled", "badge muted", f"Cancelled by ops\\u202egnp.exe at {when}", WHEN],
        ["rejected", "badge rejected", f"Rejected by maria at {when}", WHEN],
    ]
    unnamed = page.get_by_test_id("unnamed-reviewer")  # says how reviewers get their names
    expect(unnamed).to_have_count(1)
    expect(unnamed).to_have_text("an unnamed reviewer")
    expect(unnamed).to_have_attribute("href", "/static/naming-reviewers.html")
    expect(unnamed).to_have_attribute("target", "_blank")
    reviewer = page.get_by_test_id("decided-by").nth(3).locator(".reveal")
    expect(reviewer).to_have_attribute("title", "U+202E RIGHT-TO-LEFT OVERRIDE")


# --- backticks in descriptions ----------------------------------------------------------------


def test_paired_backticks_in_a_description_render_as_code(page: Page) -> None:
    """Pairs of backticks become <code> (text only); an unpaired one stays a backtick."""
    cards = ask(page, "Set the priority")
    description = cards.first.get_by_test_id("action-description")
    expect(description).to_have_text("Set the level of ticket ticket. Costs 1` credit")
    expect(description.locator("code")).to_have_text(["level", "ticket"])
    assert description.locator("*").evaluate_all("(n) => n.map((e) => e.tagName)") == [
        "CODE",
        "CODE",
    ]


# --- keyboard ---------------------------------------------------------------------------------


def test_keyboard_shortcuts_on_the_focused_card(page: Page, world: World) -> None:
    """a / e / r press the focused card's buttons, with visible focus; typing never does."""
    cards = ask(page, "Please mail Bob and set the priority")
    first, second = cards.nth(0), cards.nth(1)
    expect(first.get_by_test_id("card-keys")).to_have_text(
        "Keyboard, on this card: a: approve, e: edit, r: reject."
    )
    page.keyboard.press("Tab")  # from the focused heading to the first card
    expect(first).to_be_focused()
    assert first.evaluate("(n) => getComputedStyle(n).outlineStyle") == "solid"
    page.keyboard.press("a")
    expect(first.get_by_test_id("approve")).to_have_attribute("aria-pressed", "true")

    second.focus()
    page.keyboard.press("e")
    box = second.get_by_test_id("edit-args")
    expect(box).to_be_focused()
    page.keyboard.press("End")
    page.keyboard.type("r a e")  # typing in the box: no shortcut fires
    expect(second.get_by_test_id("edit").first).to_have_attribute("aria-pressed", "true")
    expect(second.get_by_test_id("reject-panel")).to_be_hidden()
    assert box.input_value().endswith("r a e")

    second.focus()
    page.keyboard.press("Control+r")  # a modifier: not a shortcut (the page is not reloaded)
    expect(second.get_by_test_id("edit")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("r")
    expect(second.get_by_test_id("reject")).to_have_attribute("aria-pressed", "true")
    expect(second.get_by_test_id("reject-reason")).to_be_focused()
    page.get_by_test_id("submit-decisions").click()
    expect(page.get_by_test_id("message-assistant")).to_have_count(1)
    assert world.done == [("send_email", MAIL)]


def test_a_approves_a_single_card(page: Page, world: World) -> None:
    """On a single card, 'a' approves at once, as the Approve button does."""
    cards = ask(page, "Please mail Bob")
    cards.first.focus()
    page.keyboard.press("a")
    expect(page.get_by_test_id("message-assistant").get_by_test_id("message-text")).to_have_text(
        ["Done."]
    )
    assert world.done == [("send_email", MAIL)]


def test_decision_buttons_have_names_that_say_which_action(page: Page) -> None:
    """Several cards: each button's accessible name names its tool and position."""
    cards = ask(page, "Please mail Bob and set the priority")
    expect(cards).to_have_count(2)
    names = page.locator("[data-testid=approval-card] .decisions button").evaluate_all(
        "(n) => n.map((b) => [b.getAttribute('aria-label'), b.getAttribute('aria-keyshortcuts')])"
    )
    assert names == [
        ["Approve send_email (1 of 2)", "a"],
        ["Edit send_email (1 of 2)", "e"],
        ["Reject send_email (1 of 2)", "r"],
        ["Approve set_priority (2 of 2)", "a"],
        ["Edit set_priority (2 of 2)", "e"],
        ["Reject set_priority (2 of 2)", "r"],
    ]


# --- axe-core ---------------------------------------------------------------------------------


def test_no_serious_accessibility_violations(page: Page) -> None:
    """axe-core finds nothing serious or critical: empty page, cards with panels, outcomes."""
    assert serious_axe_violations(page) == []
    cards = ask(page, "Please mail Bob and set the priority")
    cards.nth(0).get_by_test_id("edit").click()
    cards.nth(0).get_by_test_id("edit-args").fill("{")
    cards.nth(1).get_by_test_id("reject").click()
    page.get_by_test_id("submit-decisions").click()
    expect(cards.nth(0).get_by_test_id("edit-error")).to_be_visible()
    assert serious_axe_violations(page) == []
    cards.nth(0).get_by_test_id("approve").click()
    page.get_by_test_id("submit-decisions").click()
    expect(page.get_by_test_id("message-assistant")).to_have_count(1)
    assert serious_axe_violations(page) == []


# --- phone width ------------------------------------------------------------------------------


def test_usable_at_phone_width(browser: Browser, url: str) -> None:
    """At 390 px: no horizontal scroll, every button inside the screen; screenshots saved."""
    context = open_context(browser, width=390)
    try:
        phone = context.new_page()
        phone.goto(url + "/")
        cards = ask(phone, "Please mail Bob and set the priority")
        cards.nth(1).get_by_test_id("edit").click()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        boxes = phone.locator("button:visible").evaluate_all(
            "(n) => n.map((b) => [b.getBoundingClientRect().left, b.getBoundingClientRect().right])"
        )
        assert boxes
        assert all(left >= 0 and right <= 390 for left, right in boxes), boxes
        ARTIFACTS.mkdir(exist_ok=True)
        phone.screenshot(path=str(ARTIFACTS / "phone-approval-cards.png"), full_page=True)
        phone.get_by_test_id("reject-all").click()
        expect(phone.get_by_test_id("message-assistant")).to_have_count(1)
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        phone.screenshot(path=str(ARTIFACTS / "phone-conversation.png"), full_page=True)
    finally:
        context.close()


# --- edits checked against the schema ---------------------------------------------------------

SCHEMA_ERRORS = (
    "The arguments do not fit the tool's parameters:\n"
    "ticket: expected an integer\n"
    'level: must be one of "low", "high"\n'
    "urgent: unknown field"
)


def test_an_edit_the_schema_refuses_is_not_sent(page: Page, url: str, world: World) -> None:
    """Field errors show under the edit box; nothing is sent; a valid edit then runs."""
    cards = ask(page, "Set the priority")
    card = cards.first
    card.get_by_test_id("edit").click()
    box = card.get_by_test_id("edit-args")
    box.fill(json.dumps({"ticket": "7", "level": "urgent", "urgent": True}))
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    card.get_by_test_id("confirm-edit").click()
    expect(card.get_by_test_id("edit-error")).to_have_text(SCHEMA_ERRORS)
    expect(box).to_have_attribute("aria-invalid", "true")
    box.fill(json.dumps({"level": "high"}))
    card.get_by_test_id("confirm-edit").click()
    expect(card.get_by_test_id("edit-error")).to_have_text(
        "The arguments do not fit the tool's parameters:\nticket: missing (required)"
    )
    assert sent == []
    assert get_thread(page, url)["status"] == "awaiting_review"

    box.fill(json.dumps({"ticket": 8, "level": "high"}))
    card.get_by_test_id("confirm-edit").click()
    expect(page.get_by_test_id("message-assistant").get_by_test_id("message-text")).to_have_text(
        ["Done."]
    )
    assert world.done == [("set_priority", {"ticket": 8, "level": "high", "note": None})]


def test_the_tools_route_feeds_the_page(page: Page, url: str) -> None:
    """The page's schemas are GET /hitl/tools's."""
    answer = page.request.get(f"{url}/hitl/tools")
    tools = {tool["name"]: tool["parameters"] for tool in answer.json()["tools"]}
    assert tools["set_priority"] == {
        "additionalProperties": False,
        "properties": {
            "ticket": {"description": "the ticket number.", "type": "integer"},
            "level": {
                "description": "how urgent it is.",
                "enum": ["low", "high"],
                "type": "string",
            },
            "note": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "description": "why, optionally.",
            },
        },
        "required": ["ticket", "level"],
        "type": "object",
    }


NESTED = {
    "type": "object",
    "properties": {
        "to": {"type": "array", "items": {"$ref": "#/$defs/Person"}, "minItems": 1, "maxItems": 2},
        "count": {"type": "integer", "minimum": 1, "maximum": 5},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "code": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[A-Z]+$"},
        "when": {"type": "string", "format": "date-time"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "fixed": {"const": "yes"},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["to"],
    "additionalProperties": False,
    "$defs": {
        "Person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}},
            "required": ["name"],
            "additionalProperties": False,
        }
    },
}

CASES = [
    ({"to": [{"name": "Ann", "age": None}]}, []),
    (
        {"to": [], "count": 0, "ratio": 1, "code": "A", "when": "not a date", "maybe": None},
        [
            "to: must have at least 1 item",
            "count: must be at least 1",
            "ratio: must be less than 1",
            "code: must be at least 2 characters long",
        ],
    ),
    (
        {"to": [{"age": 1.5, "x": 1}, {"name": 3}, {"name": "C"}], "count": 6, "code": "ABCD"},
        [
            "to: must have at most 2 items",
            "to[0].name: missing (required)",
            "to[0].age: expected an integer or null",
            "to[0].x: unknown field",
            "to[1].name: expected a string",
            "count: must be at most 5",
            "code: must be at most 3 characters long",
        ],
    ),
    (
        {"to": "Ann", "maybe": "1", "either": "x", "fixed": "no", "extra": {"a": 1, "b": "2"}},
        [
            "to: expected a list",
            "maybe: expected an integer",
            "either: does not match any allowed form",
            'fixed: must be "yes"',
            "extra.b: expected an integer",
        ],
    ),
    ({"to": [{"name": "Ann"}], "ratio": 0}, ["ratio: must be greater than 0"]),
    ([], ["the arguments: expected an object"]),
]


@pytest.mark.parametrize(("value", "problems"), CASES)
def test_the_schema_subset(page: Page, value: Any, problems: list[str]) -> None:
    """The page's checker: the documented subset, exact texts; format and pattern ignored."""
    found = page.evaluate("([s, v]) => toolguardSchemaProblems(s, v)", [NESTED, value])
    assert found == problems


def test_markup_between_backticks_stays_text(page: Page) -> None:
    """Code built from a description holds text only: markup is shown, hidden characters too."""
    description = "Run `<img src=x onerror=alert(1)>` on `a\u200bb` then `"
    pending = {
        "action_requests": [{"name": "send_email", "args": MAIL, "description": description}],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    body = {
        "thread_id": THREAD_ID,
        "status": "awaiting_review",
        "messages": [{"role": "user", "content": "mail"}],
        "pending_review": pending,
        "review_id": "r1",
        "expires_at": None,
        "actions": [],
    }
    page.route(f"**/hitl/threads/{THREAD_ID}", lambda route: route.fulfill(status=200, json=body))
    page.goto(page.url.split("?")[0] + f"?thread={THREAD_ID}")
    shown = page.get_by_test_id("action-description")
    expect(shown).to_have_text("Run <img src=x onerror=alert(1)> on a\\u200bb then `")
    expect(shown.locator("code")).to_have_text(["<img src=x onerror=alert(1)>", "a\\u200bb"])
    expect(shown.locator("img")).to_have_count(0)
    expect(shown.locator("code .reveal")).to_have_attribute("title", "U+200B ZERO WIDTH SPACE")


def test_the_checker_survives_hostile_values_and_schemas(page: Page) -> None:
    """Deep values, self-referencing schemas and prototype keys: an answer, never a hang; past
    its depth budget the checker says it cannot check (null), never that the value fits."""
    found = page.evaluate(
        """() => {
            let deep = 1;
            for (let i = 0; i < 100000; i++) deep = [deep];
            const items = {type: 'array', items: {$ref: '#/$defs/L'}};
            const list = {$defs: {L: items}, $ref: '#/$defs/L'};
            const loop = {$defs: {A: {$ref: '#/$defs/A'}}, $ref: '#/$defs/A'};
            const closed = {type: 'object', properties: {}, additionalProperties: false};
            const proto = JSON.parse('{"__proto__": 1, "constructor": 2}');
            const wide = Object.fromEntries(Array.from({length: 5000}, (_, i) => ['k' + i, i]));
            return [
                toolguardSchemaProblems(list, deep),
                toolguardSchemaProblems(loop, {a: 1}),
                toolguardSchemaProblems(closed, proto),
                toolguardSchemaProblems(closed, wide).length,
                toolguardSchemaProblems({$ref: '#/$defs/missing'}, 1),
            ];
        }"""
    )
    assert found == [None, None, ["__proto__: unknown field", "constructor: unknown field"], 20, []]
