"""The approval page holds long tool names, long commands and long reviewer lines at a phone's
width (390 px) and a desktop's (1280 px), in the light and the dark color scheme: nothing is
wider than the screen, and no text is squeezed into a column a few letters wide (a failed
call's "Edited by an unnamed reviewer at ..." line, a tool name beside a long upstream command).
A normal load asks nothing that answers an error (no 404 for ``GET /hitl/session``).

Headless Chromium over a real app; the thread and the gateway's answers are given with
``page.route`` so every long value is exactly the one the test chose. Screenshots go to
test-artifacts/.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from tests.helpers import ARTIFACTS, NEEDS_CHROMIUM, TIMEOUT_MS, browser, serve_in_thread  # noqa: E402
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, requires_approval  # noqa: E402
from toolguard.http import create_app  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name

WIDTHS = [390, 1280]
SCHEMES = ["light", "dark"]
BACKGROUNDS = {"light": "rgb(246, 247, 249)", "dark": "rgb(21, 24, 29)"}
WHEN = "2026-05-04T10:11:12Z"
LONG_TOOL = "send_the_quarterly_report_to_every_customer_in_the_enterprise_accounts_list"
LONG_REVIEWER = "a-reviewer-with-a-very-long-name-from-the-directory@example.com"
FAILURE = "Tool `send` failed: ConnectionError: the SMTP server refused the connection"
THREAD = "t-layout"
COMMANDS = [
    "uvx mcp-server-git --repository /home/someone/src/toolguard",
    "uvx mcp-server-git --repository /home/someone/src/toolguard-checkout-of-the-team",
    (
        "npx -y @modelcontextprotocol/server-git --repository"
        " /home/someone/projects/a-very-long-repository-name-used-for-checking-the-page-layout"
    ),
]
"""Upstream commands: the first one's line fits beside the tool's name at 1280 px (where the
name was squeezed to a few letters a line), the others take lines of their own."""
COMMAND = COMMANDS[-1]
GIT_TOOL = "git_create_branch"
GATEWAY_THREAD = "g-2"
SERVERS = [
    {"target": command, "name": "mcp-server-git", "version": "1.26.0", "title": None}
    for command in COMMANDS
]
SERVER = SERVERS[-1]
CLIENT = {"name": "claude-desktop-with-a-long-client-name", "version": "0.14.10", "title": "C"}

FEWEST_LETTERS_PER_LINE = 12
"""A line of text holds at least this many characters (unless the whole text is shorter)."""

MEASURE = """(selector) => [...document.querySelectorAll(selector)].map((node) => {
  const range = document.createRange();
  range.selectNodeContents(node);
  const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0)
    .map((r) => Math.round(r.top)));
  const box = node.getBoundingClientRect();
  return {text: node.textContent, lines: Math.max(tops.size, 1), right: box.right};
})"""
"""Each matching element's text, how many lines it takes and where its box ends."""


def action(
    call_id: str, name: str, status: str, decision: str | None, reviewer: str | None
) -> dict[str, Any]:
    """An action of the thread API."""
    return {
        "id": f"a-{call_id}",
        "call_id": call_id,
        "name": name,
        "args": {"to": "everyone@example.com"},
        "description": f"Tool `{name}` is awaiting approval",
        "status": status,
        "decision": {"type": decision} if decision else None,
        "result": None,
        "requested_at": WHEN,
        "decided_at": WHEN if decision else None,
        "finished_at": WHEN,
        "expires_at": None,
        "digest": "",
        "reviewer": reviewer,
    }


def pending(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "action_requests": [
            {"name": name, "args": args, "description": f"Tool `{name}` is awaiting approval"}
        ],
        "review_configs": [
            {"action_name": name, "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }


CALLS = [
    {"id": c, "type": "function", "function": {"name": LONG_TOOL, "arguments": "{}"}}
    for c in ("c1", "c2")
]
CHAT_THREAD = {
    "thread_id": THREAD,
    "status": "awaiting_review",
    "messages": [
        {"role": "user", "content": "mail the report"},
        {"role": "assistant", "content": None, "tool_calls": CALLS},
        {"role": "tool", "tool_call_id": "c1", "content": FAILURE, "status": "error"},
        {"role": "tool", "tool_call_id": "c2", "content": "sent", "status": "success"},
    ],
    "pending_review": pending(LONG_TOOL, {"to": "everyone@example.com", "note": "x" * 300}),
    "review_id": "r-1",
    "expires_at": None,
    "actions": [
        action("c1", LONG_TOOL, "failed", "edit", None),
        action("c2", LONG_TOOL, "executed", "edit", LONG_REVIEWER),
    ],
}
GATEWAY_PENDING = pending(
    GIT_TOOL, {"repo_path": "/srv/repo", "branch_name": "feature/" + "y" * 80}
)
GATEWAY_THREAD_BODY = {
    "thread_id": GATEWAY_THREAD,
    "status": "awaiting_review",
    "messages": [],
    "pending_review": GATEWAY_PENDING,
    "review_id": "r-g",
    "expires_at": None,
    "actions": [action("c9", GIT_TOOL, "requested", None, None)],
}
REVIEWS = {
    "reviews": [
        {
            "thread_id": f"g-{index}",
            "review_id": f"r-{index}",
            "pending_review": GATEWAY_PENDING,
            "requested_at": WHEN,
            "call": {"server": server, "client": CLIENT},
        }
        for index, server in enumerate(SERVERS)
    ]
}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A chat app with the page and no sign-in."""

    @requires_approval
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    chat = ReviewedChat(ScriptedModel([ModelResponse(text="Hello.")], repeat=True), [send_email])
    with serve_in_thread(create_app(chat)) as base:
        yield base


@pytest.fixture
def opened(browser: Browser) -> Iterator[dict[str, Any]]:
    """The contexts a test opens, closed afterwards."""
    contexts: dict[str, Any] = {}
    yield contexts
    for context in contexts.values():
        context.close()


def new_page(browser: Browser, opened: dict[str, Any], width: int, scheme: str) -> Page:
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        color_scheme=scheme,  # type: ignore[arg-type]
        timezone_id="UTC",
        locale="en-US",
    )
    context.set_default_timeout(TIMEOUT_MS)
    opened[f"{width}-{scheme}-{len(opened)}"] = context
    return context.new_page()


def squeezed(page: Page, selector: str) -> list[dict[str, Any]]:
    """The elements of ``selector`` whose lines hold too few characters, or that end beyond
    the screen."""
    width = page.viewport_size["width"] if page.viewport_size else 0
    found = page.evaluate(MEASURE, selector)
    assert found, f"nothing matches {selector}"
    return [
        item
        for item in found
        if len(item["text"]) / item["lines"] < min(FEWEST_LETTERS_PER_LINE, len(item["text"]))
        or item["right"] > width
    ]


def assert_fits(page: Page, name: str, scheme: str, selectors: list[str]) -> None:
    """Nothing is wider than the screen, no text is squeezed; a screenshot is kept."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == BACKGROUNDS[scheme]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert {selector: squeezed(page, selector) for selector in selectors} == {
        selector: [] for selector in selectors
    }


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_cards_hold_long_names_results_and_reviewer_lines(
    browser: Browser, opened: dict[str, Any], url: str, width: int, scheme: str
) -> None:
    page = new_page(browser, opened, width, scheme)
    page.route(f"**/hitl/threads/{THREAD}", lambda route: route.fulfill(json=CHAT_THREAD))
    page.goto(f"{url}/?thread={THREAD}")
    expect(page.get_by_test_id("message-tool")).to_have_count(2)
    expect(page.get_by_test_id("decided-by").first).to_contain_text(
        "Edited by an unnamed reviewer at"
    )
    expect(page.get_by_test_id("decided-by").nth(1)).to_contain_text(LONG_REVIEWER)
    assert_fits(
        page,
        f"layout-chat-{width}-{scheme}",
        scheme,
        [
            "[data-testid=decided-by]",
            "[data-testid=tool-content]",
            ".msg .tool-name",
            "[data-testid=tool-call] summary code",
            ".card h3",
            ".card .description",
        ],
    )
    # The failed call's line is as wide as its message: no column beside the result.
    boxes = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid=message-tool]')].map((li) => {
          const line = li.querySelector('[data-testid=decided-by]').getBoundingClientRect();
          return line.width / li.clientWidth;
        })"""
    )
    assert [share > 0.8 for share in boxes] == [True, True]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_a_gateway_call_keeps_its_tool_name_whole_beside_a_long_command(
    browser: Browser, opened: dict[str, Any], url: str, width: int, scheme: str
) -> None:
    page = new_page(browser, opened, width, scheme)
    events = f"event: reviews\ndata: {json.dumps(REVIEWS)}\n\n"
    page.route(
        "**/hitl/info", lambda route: route.fulfill(json={"mode": "gateway", "server": SERVER})
    )
    page.route(
        "**/hitl/events",
        lambda route: route.fulfill(body=events, headers={"content-type": "text/event-stream"}),
    )
    page.route("**/hitl/grants", lambda route: route.fulfill(json={"grants": []}))
    page.route(
        f"**/hitl/threads/{GATEWAY_THREAD}", lambda route: route.fulfill(json=GATEWAY_THREAD_BODY)
    )
    page.goto(f"{url}/?thread={GATEWAY_THREAD}")
    expect(page.get_by_test_id("queue-tools")).to_have_text([GIT_TOOL] * len(COMMANDS))
    expect(page.get_by_test_id("queue-server").last).to_contain_text(COMMAND)
    expect(page.get_by_test_id("call-server")).to_contain_text(COMMAND)
    assert_fits(
        page,
        f"layout-gateway-{width}-{scheme}",
        scheme,
        [
            "[data-testid=queue-tools]",
            "[data-testid=queue-server]",
            "[data-testid=queue-client]",
            "[data-testid=call-server]",
            "[data-testid=call-tool]",
            ".card h3",
        ],
    )
    name = page.evaluate(MEASURE, "[data-testid=queue-tools]")
    assert [(item["text"], item["lines"]) for item in name] == [(GIT_TOOL, 1)] * len(COMMANDS)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_normal_load_asks_nothing_that_answers_an_error(
    browser: Browser, opened: dict[str, Any], url: str, width: int
) -> None:
    """Without sign-in, GET /hitl/session answers {"reviewer": null}: no 404, no console error."""
    page = new_page(browser, opened, width, "light")
    answers: list[tuple[str, int]] = []
    errors: list[str] = []
    page.on("response", lambda response: answers.append((response.url, response.status)))
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.goto(f"{url}/")
    expect(page.get_by_test_id("queue-live")).to_have_text("Live: updates as reviews arrive.")
    page.get_by_test_id("chat-input").fill("hello")
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_test_id("message-assistant")).to_have_text(["AssistantHello."])
    assert [(where, status) for where, status in answers if status >= 400] == []
    assert errors == []
    assert f"{url}/hitl/session" in [where for where, _ in answers]
    session = page.request.get(f"{url}/hitl/session")
    assert (session.status, session.json()) == (200, {"reviewer": None})
