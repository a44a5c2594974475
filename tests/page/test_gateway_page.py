"""The approval page of an MCP gateway (``toolguard mcp-proxy``), in a real headless Chromium.

One process: an in-memory MCP client (with its own ``clientInfo``) calls the proxy's server,
which fronts an in-memory upstream whose tool answers with chosen MCP content; the gateway's
app (``build_app``) is served by uvicorn on 127.0.0.1 in the same event loop, run in a
background thread; the test drives the page with Playwright and the client through the loop's
portal.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
pytest.importorskip("mcp", reason="the mcp extra is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("axe_playwright_python", reason="the dev extra is not installed")

from mcp import Client, types  # noqa: E402
from mcp.server import Server  # noqa: E402

from tests.helpers import (  # noqa: E402
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    browser,
    pretty,
    serious_axe_violations,
    tab,
)
from toolguard import MemoryStore  # noqa: E402
from toolguard._gateway.calls_info import upstream_target  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import build_app  # noqa: E402
from toolguard._http.routes import NO_MESSAGES  # noqa: E402
from toolguard.http import TokenAuth, new_token  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

__all__ = ["browser", "tab"]  # fixtures, used by name

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=TIMEOUT_MS)

TOOL = "send_report"
TOOLS = [
    {
        "name": TOOL,
        "description": "Send a report and answer with what was sent.",
        "inputSchema": {
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "required": ["kind"],
        },
    }
]
SERVER_TEXT = "toolguard-results-upstream 3.1.0 (python -m results_server)"
CLIENT_TEXT = "probe-client 2.5.0, titled “Probe Client”"  # the name identifies it
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
JPEG_START = base64.b64encode(bytes([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 0x4A, 0x46, 0x49])).decode()
SVG = base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=2">'
    b"<script>window.__pwned=3</script></svg>"
).decode()
HOSTILE_TEXT = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>&amp; <b>'
HUGE = "x" * 200_000
MARIA, MARIA_LINE = new_token("maria")
HOSTILE_ARG = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>&amp;'
REVOKED_TEXT = "Revoked the grant for send_report: its next calls wait for a review again."
STRUCTURED = {"sent": True, "pages": 3, "to": ["ops@example.com"]}
RESULTS: dict[str, dict[str, Any]] = {
    "mixed": {
        "content": [
            {"type": "text", "text": "Report sent.\n    indented line\ttab"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {
                "type": "resource_link",
                "uri": "file:///srv/report.pdf",
                "name": "report.pdf",
                "mimeType": "application/pdf",
            },
            {
                "type": "resource",
                "resource": {"uri": "file:///srv/notes.txt", "text": "line 1\nline 2"},
            },
        ],
        "structuredContent": STRUCTURED,
    },
    "hostile": {
        "content": [
            {"type": "text", "text": HOSTILE_TEXT},
            {"type": "image", "data": SVG, "mimeType": "image/svg+xml"},
            {"type": "image", "data": "!!not base64!!", "mimeType": "image/png"},
            {"type": "image", "data": JPEG_START, "mimeType": "image/png"},
            {"type": "text", "text": HUGE},
        ],
        "isError": True,
    },
}


def upstream(ran: list[dict[str, Any]]) -> Server[Any]:
    """The upstream: ``send_report`` (a verb, no annotations: it needs approval) answers
    ``RESULTS[kind]`` (another kind: ``sent KIND``); the arguments of each call it runs are
    appended to ``ran``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": TOOLS})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        ran.append(dict(params.arguments or {}))
        kind = str((params.arguments or {}).get("kind"))
        answer = RESULTS.get(kind, {"content": [{"type": "text", "text": f"sent {kind}"}]})
        return types.CallToolResult.model_validate(answer)

    return Server(
        "toolguard-results-upstream",
        version="3.1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class Gateway:
    """The running gateway: its page's URL, the MCP client, the proxy and the loop's portal."""

    def __init__(
        self,
        url: str,
        client: Client,
        proxy: MCPProxy,
        portal: anyio.from_thread.BlockingPortal,
        ran: list[dict[str, Any]],
    ) -> None:
        self.url = url
        self.client = client
        self.proxy = proxy
        self.portal = portal
        self.ran = ran  # the arguments of each call the upstream ran

    def call(self, kind: str) -> Future[types.CallToolResult]:
        """Start a call of the tool through the gateway; it waits for a decision."""
        return self.portal.start_task_soon(self.client.call_tool, TOOL, {"kind": kind})

    def cancel_all(self) -> None:
        """Cancel every waiting review (nothing runs), so that the next test starts empty."""

        async def cancel() -> None:
            for thread_id in await self.proxy.chat.store.thread_ids():  # type: ignore[attr-defined]
                state = await self.proxy.chat.get_thread(thread_id)
                if state.status == "awaiting_review":
                    await self.proxy.chat.cancel_review(thread_id, reason="the test ended")

        self.portal.call(cancel)

    def waiting(self) -> int:
        """How many calls wait for a review now."""

        async def count() -> int:
            ids = await self.proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            states = [await self.proxy.chat.get_thread(thread_id) for thread_id in ids]
            return sum(state.status == "awaiting_review" for state in states)

        return self.portal.call(count)


@asynccontextmanager
async def running(
    portal: anyio.from_thread.BlockingPortal, auth: Any = None
) -> AsyncIterator[Gateway]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    info = types.Implementation(name="probe-client", version="2.5.0", title="Probe Client")
    ran: list[dict[str, Any]] = []
    async with Client(upstream(ran), mode="legacy") as up:
        proxy = MCPProxy(up, TOOLS, store=MemoryStore(), ttl=600)
        proxy.calls.target = upstream_target("python", ["-m", "results_server"])
        app = build_app(proxy.chat, port=port, calls=proxy.calls, auth=auth)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", ws="none", http="h11", access_log=False
        )
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as tasks:
            proxy._tasks = tasks
            tasks.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                while not server.started:  # noqa: ASYNC110 - uvicorn has no event to wait on
                    await anyio.sleep(0.02)
            async with Client(proxy.server(), mode="legacy", client_info=info) as client:
                yield Gateway(f"http://127.0.0.1:{port}", client, proxy, portal, ran)
            server.should_exit = True
    sock.close()


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(running(portal)) as found,
    ):
        yield found


@pytest.fixture
def page(tab: Page, gateway: Gateway) -> Iterator[Page]:
    """The gateway's page, freshly loaded; every review still waiting is cancelled after."""
    tab.goto(gateway.url + "/")
    expect(tab.get_by_test_id("queue-empty")).to_have_text("No call is waiting.")
    yield tab
    tab.unroute("**/hitl/review")
    gateway.cancel_all()


@pytest.fixture(scope="module")
def signed_gateway() -> Iterator[Gateway]:
    """A second gateway, whose reviewers sign in with a token (maria's)."""
    auth = TokenAuth(dict([MARIA_LINE.split()]))
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(running(portal, auth=auth)) as found,
    ):
        yield found


@pytest.fixture(scope="module")
def maria(browser: Browser, signed_gateway: Gateway) -> Iterator[Page]:
    """A tab of its own (cookies are per host, not per port) signed in to ``signed_gateway``
    as maria."""
    context = browser.new_context(viewport={"width": 900, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    opened.goto(signed_gateway.url + "/")
    opened.get_by_test_id("sign-in-token").fill(MARIA)
    opened.get_by_test_id("sign-in-submit").click()
    expect(opened.get_by_test_id("signed-in")).to_have_text("Signed in as maria")
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def granting(maria: Page, signed_gateway: Gateway) -> Iterator[Page]:
    """maria's page on the signed gateway, reloaded, with no grant active; every review still
    waiting is cancelled and every grant still active revoked after."""
    maria.goto(signed_gateway.url + "/")
    expect(maria.get_by_test_id("queue-empty")).to_have_text("No call is waiting.")
    expect(maria.get_by_test_id("grants-empty")).to_have_text("No grant is active.")
    yield maria
    maria.unroute("**/hitl/grants**")
    signed_gateway.cancel_all()
    for grant in active_grants(maria, signed_gateway):
        maria.request.delete(f"{signed_gateway.url}/hitl/grants/{grant['id']}")


def active_grants(page: Page, gateway: Gateway) -> list[dict[str, Any]]:
    """The gateway's active grants, as GET /hitl/grants lists them."""
    answer = page.request.get(gateway.url + "/hitl/grants")
    assert answer.status == 200
    return [g for g in answer.json()["grants"] if g["status"] == "active"]


def local_time(page: Page, iso: str) -> str:
    """An ISO 8601 time as the page writes it in local time."""
    found: str = page.evaluate("(iso) => new Date(iso).toLocaleString()", iso)
    return found


def open_the_call(page: Page) -> None:
    """Wait for the one waiting call in the list and open it (with the keyboard)."""
    item = page.get_by_test_id("queue-item")
    expect(item).to_have_count(1)
    item.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("approval-card")).to_have_count(1)


def no_proxy_messages(page: Page) -> None:
    """Nothing of the proxy's own thread messages is anywhere in the page."""
    text = page.evaluate("() => document.documentElement.textContent")
    assert "toolguard mcp-proxy call" not in text
    assert "mcp-" not in text
    assert page.locator("#messages > li").count() == 0


# --- tests -------------------------------------------------------------------------------------


def test_the_gateway_page_has_no_chat(page: Page, gateway: Gateway) -> None:
    """No chat box, no new conversation, no conversation; POST /hitl/chat answers 404."""
    expect(page).to_have_title("toolguard gateway — MCP tool calls waiting for approval")
    expect(page.get_by_test_id("subtitle")).to_have_text(
        f"MCP gateway for {SERVER_TEXT}: tool calls from its clients wait here for your approval."
    )
    expect(page.locator("#queue-title")).to_have_text("Waiting calls")
    for hidden in ("chat-form", "chat-input", "new-thread", "empty", "messages", "call-result"):
        expect(page.get_by_test_id(hidden)).to_be_hidden()
    answer = page.request.post(gateway.url + "/hitl/chat", data={"message": "hello"})
    assert (answer.status, answer.json()) == (404, {"detail": NO_MESSAGES})
    info = page.request.get(gateway.url + "/hitl/info")
    assert info.json() == {
        "mode": "gateway",
        "server": {
            "target": "python -m results_server",
            "name": "toolguard-results-upstream",
            "version": "3.1.0",
            "title": None,
        },
    }
    assert gateway.portal.call(gateway.proxy.chat.store.thread_ids) == []  # type: ignore[attr-defined]
    assert serious_axe_violations(page) == []


def test_a_waiting_call_shows_server_tool_arguments_since_and_client(
    page: Page, gateway: Gateway
) -> None:
    """The list and the card name the call as a gateway's reviewer needs; the keyboard decides;
    the result shows as MCP content: text kept as it is, an image, links, structured data."""
    done = gateway.call("mixed")
    item = page.get_by_test_id("queue-item")
    expect(item).to_have_count(1)
    expect(item.get_by_test_id("queue-tools")).to_have_text(TOOL)
    expect(item.get_by_test_id("queue-server")).to_have_text(f"on {SERVER_TEXT}")
    expect(item.get_by_test_id("queue-client")).to_have_text(f"from {CLIENT_TEXT}")
    expect(item.get_by_test_id("queue-age")).to_have_text("waiting less than a minute")
    open_the_call(page)

    card = page.get_by_test_id("approval-card")
    thread_id = page.evaluate("() => new URL(location.href).searchParams.get('thread')")
    state = page.request.get(f"{gateway.url}/hitl/threads/{thread_id}").json()
    requested_at = state["actions"][0]["requested_at"]
    local = page.evaluate("(iso) => new Date(iso).toLocaleString()", requested_at)
    info = card.get_by_test_id("call-info")
    expect(info.locator("dt")).to_have_text(["Server", "Tool", "Client", "Waiting since"])
    expect(card.get_by_test_id("call-server")).to_have_text(SERVER_TEXT)
    expect(card.get_by_test_id("call-tool")).to_have_text(TOOL)
    expect(card.get_by_test_id("call-client")).to_have_text(CLIENT_TEXT)
    expect(card.get_by_test_id("call-since")).to_have_text(f"less than a minute ago ({local})")
    assert card.get_by_test_id("call-since").locator("time").get_attribute("datetime") == (
        requested_at
    )
    assert card.get_by_test_id("action-args").text_content() == pretty({"kind": "mixed"})
    expect(card.get_by_test_id("action-why")).to_have_text(
        "Why it asks: the word 'send' is an approval verb (messaging and publishing)"
    )
    no_proxy_messages(page)
    assert serious_axe_violations(page) == []

    card.focus()
    page.keyboard.press("a")  # approve
    result = page.get_by_test_id("mcp-result")
    expect(result).to_be_visible()
    expect(page.get_by_test_id("call-result-title")).to_be_focused()
    expect(page.get_by_test_id("call-status")).to_have_text("executed")
    assert result.get_attribute("data-error") == "false"
    texts = result.get_by_test_id("mcp-text")
    expect(texts).to_have_count(1)
    assert texts.text_content() == "Report sent.\n    indented line\ttab"
    assert texts.evaluate("(node) => getComputedStyle(node).whiteSpace") == "pre-wrap"
    image = result.get_by_test_id("mcp-image")
    expect(image).to_have_count(1)
    assert image.get_attribute("src") == f"data:image/png;base64,{PNG}"
    assert image.get_attribute("alt") == "Image 2 of the result (image/png, 68 bytes)"
    assert image.evaluate(
        "(img) => img.decode().then(() => [img.naturalWidth, img.naturalHeight])"
    ) == [1, 1]
    expect(result.get_by_test_id("mcp-resource-link")).to_have_text(
        "Resource link: file:///srv/report.pdf (application/pdf) “report.pdf”"
    )
    expect(result.get_by_test_id("mcp-resource-uri")).to_have_text(
        "Resource: file:///srv/notes.txt"
    )
    assert result.get_by_test_id("mcp-resource-text").text_content() == "line 1\nline 2"
    assert result.get_by_test_id("mcp-structured").text_content() == pretty(STRUCTURED)
    expect(page.get_by_test_id("approval-card")).to_have_count(0)
    expect(page.get_by_test_id("queue-item")).to_have_count(0)
    answer = done.result(timeout=10)
    assert answer.model_dump(by_alias=True, mode="json", exclude_none=True) == {
        **RESULTS["mixed"],
        "isError": False,
        "resultType": "complete",
    }
    no_proxy_messages(page)
    assert serious_axe_violations(page) == []


def test_a_hostile_result_is_shown_as_text_and_no_bad_image_is_drawn(
    page: Page, gateway: Gateway
) -> None:
    """HTML and script stay text; SVG, bad base64 and data of another type are described, not
    drawn; a huge text is cut with a note; the error result is marked as one."""
    page.evaluate("() => { window.__pwned = 0; }")
    done = gateway.call("hostile")
    open_the_call(page)
    page.get_by_test_id("approval-card").get_by_test_id("approve").click()
    result = page.get_by_test_id("mcp-result")
    expect(result).to_be_visible()
    assert result.get_attribute("data-error") == "true"
    expect(result.get_by_test_id("mcp-error")).to_have_text(
        "error The tool answered with an error."
    )
    texts = result.get_by_test_id("mcp-text")
    expect(texts).to_have_count(2)
    assert texts.nth(0).text_content() == HOSTILE_TEXT
    assert texts.nth(0).locator("*").count() == 0  # no element was made of the text
    assert texts.nth(1).text_content() == "x" * 100_000
    expect(result.get_by_test_id("mcp-text-cut")).to_have_text(
        "A long text: showing its first 100,000 of 200,000 characters."
    )
    expect(result.get_by_test_id("mcp-image")).to_have_count(0)
    expect(result.get_by_test_id("mcp-image-refused")).to_have_text(
        [
            (
                "An image not shown (image/svg+xml): the page shows only PNG, JPEG, GIF and WebP"
                " images."
            ),
            "An image not shown (image/png): its data is not base64.",
            "An image not shown (image/png): its data is not image/png.",
        ]
    )
    assert page.locator("img, svg, script:not([src])").count() == 0
    assert page.evaluate("() => window.__pwned") == 0
    assert done.result(timeout=10).is_error is True
    assert serious_axe_violations(page) == []


def test_the_grant_choices_are_for_every_client_of_the_gateway(
    page: Page, gateway: Gateway
) -> None:
    """Only server-wide grants are offered, worded for a gateway; the decision sent has
    scope "server" with the chosen match and limit (the request is stopped on its way)."""
    gateway.call("mixed")
    open_the_call(page)
    card = page.get_by_test_id("approval-card")
    allow = card.get_by_test_id("approve-grant")
    expect(allow).to_have_text("Approve and allow for every client")
    expect(card.get_by_test_id("grant-match").locator("option")).to_have_text(
        ["this tool, any arguments", "only these exact arguments"]
    )
    expect(card.get_by_test_id("grant-ttl").locator("option")).to_have_text(
        ["for 15 minutes", "for 1 hour", "for 8 hours", "for 1 more call", "for the next 10 calls"]
    )
    hint = card.get_by_test_id("grant-hint")
    expect(hint).to_have_text(
        f"Later calls of {TOOL} from every client of this gateway run without asking,"
        " for the next hour."
    )
    assert "conversation" not in card.inner_text()

    page.route("**/hitl/review", lambda route: route.abort())  # the decision is only read
    with page.expect_request("**/hitl/review") as first:
        allow.click()
    expect(page.get_by_test_id("error")).to_be_visible()
    card.get_by_test_id("grant-match").select_option("args")
    card.get_by_test_id("grant-ttl").select_option("uses:10")
    expect(hint).to_have_text(
        f"Later calls of {TOOL} with these exact arguments from every client of this gateway"
        " run without asking, for the next 10 calls."
    )
    allow.focus()
    with page.expect_request("**/hitl/review") as second:
        page.keyboard.press("Enter")
    body = first.value.post_data_json
    ids = {"thread_id": body["thread_id"], "review_id": body["review_id"]}
    assert body == {
        **ids,
        "decisions": [
            {"type": "approve", "grant": {"scope": "server", "match": "tool", "ttl": 3600}}
        ],
    }
    assert second.value.post_data_json == {
        **ids,
        "decisions": [
            {"type": "approve", "grant": {"scope": "server", "match": "args", "uses": 10}}
        ],
    }
    assert ids["thread_id"] == page.evaluate(
        "() => new URL(location.href).searchParams.get('thread')"
    )


def test_a_grant_made_on_the_page_is_listed_lets_the_next_call_run_and_is_revoked(
    granting: Page, signed_gateway: Gateway
) -> None:
    """maria approves a waiting call "for the next hour" (any arguments): the grant is listed
    with her name; the next call of the tool runs at once, through the upstream, with no review;
    Revoke (with the keyboard) ends the grant, listed under "Ended grants", and the next call
    waits for a review again."""
    page, gateway = granting, signed_gateway
    first = gateway.call("first")
    open_the_call(page)
    card = page.get_by_test_id("approval-card")
    expect(card.get_by_test_id("grant-hint")).to_have_text(
        f"Later calls of {TOOL} from every client of this gateway run without asking,"
        " for the next hour."
    )
    card.get_by_test_id("approve-grant").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("call-status")).to_have_text("executed")
    assert first.result(timeout=10).is_error is False

    [grant] = active_grants(page, gateway)
    assert grant == {
        "id": grant["id"],
        "tool": TOOL,
        "match": "tool",
        "args": None,
        "uses": None,
        "uses_left": None,
        "ttl": 3600.0,
        "granted_by": "maria",
        "granted_at": grant["granted_at"],
        "expires_at": grant["expires_at"],
        "status": "active",
        "ended_at": None,
        "ended_by": None,
    }
    item = page.get_by_test_id("grants-list").get_by_test_id("grant-item")
    expect(item).to_have_count(1)
    expect(page.get_by_test_id("grants-empty")).to_be_hidden()
    expect(page.get_by_test_id("grants-count")).to_have_text("(1)")
    expect(item.get_by_test_id("grant-title")).to_have_text(f"{TOOL}, any arguments")
    expect(item.locator("dt")).to_have_text(["Uses left", "Expires", "Granted by"])
    expect(item.get_by_test_id("grant-uses")).to_have_text("no limit")
    expect(item.get_by_test_id("grant-expires")).to_have_text(
        f"in 59 min ({local_time(page, grant['expires_at'])})"
    )
    expect(item.get_by_test_id("grant-by")).to_have_text("maria")
    expect(page.get_by_test_id("grants-ended")).to_be_hidden()
    assert serious_axe_violations(page) == []

    # The next call of the tool runs at once: no review, and the upstream ran it.
    answer = gateway.call("second").result(timeout=10)
    assert answer.model_dump(mode="json", exclude_none=True)["content"] == [
        {"type": "text", "text": "sent second"}
    ]
    assert gateway.ran == [{"kind": "first"}, {"kind": "second"}]
    assert gateway.waiting() == 0
    audit = page.request.get(gateway.url + "/hitl/audit").text()
    granted = [e for e in map(json.loads, audit.splitlines()) if e["kind"] == "granted"]
    assert [(e["tool"], e["args"], e["actor"], e["detail"]) for e in granted] == [
        (TOOL, {"kind": "second"}, "maria", f"server grant {grant['id']}; uses left: unlimited")
    ]
    expect(page.get_by_test_id("queue-empty")).to_have_text("No call is waiting.")

    revoke = item.get_by_test_id("grant-revoke")
    expect(revoke).to_have_text("Revoke")
    revoke.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("grants-status")).to_have_text(REVOKED_TEXT)
    expect(page.get_by_test_id("grants-title")).to_be_focused()
    expect(page.get_by_test_id("grants-list").get_by_test_id("grant-item")).to_have_count(0)
    expect(page.get_by_test_id("grants-empty")).to_have_text("No grant is active.")
    expect(page.get_by_test_id("grants-count")).to_have_text("")
    assert active_grants(page, gateway) == []
    ended = page.get_by_test_id("grants-ended")
    summary = ended.get_by_test_id("grants-ended-summary")
    everything = page.request.get(gateway.url + "/hitl/grants").json()["grants"]
    expect(summary).to_have_text(f"Ended grants ({len(everything)})")  # all ended
    ended_item = ended.get_by_test_id("grant-item").first  # the latest first
    expect(ended_item).to_have_attribute("data-grant", grant["id"])
    expect(ended_item).to_be_hidden()  # collapsed until opened
    summary.focus()
    page.keyboard.press("Enter")
    expect(ended_item).to_be_visible()
    expect(ended_item.get_by_test_id("grant-revoke")).to_have_count(0)
    revoked = everything[-1]
    assert (revoked["id"], revoked["status"], revoked["ended_by"]) == (
        grant["id"],
        "revoked",
        "maria",
    )
    expect(ended_item.locator("dt")).to_have_text(["Granted by", "Status"])
    expect(ended_item.get_by_test_id("grant-status")).to_have_text(
        f"revoked by maria, less than a minute ago ({local_time(page, revoked['ended_at'])})"
    )
    assert serious_axe_violations(page) == []

    # Revoked: the next call waits for a review again, and the upstream has not run it.
    gateway.call("third")
    expect(page.get_by_test_id("queue-item")).to_have_count(1)
    expect(page.get_by_test_id("queue-tools")).to_have_text(TOOL)
    assert gateway.waiting() == 1
    assert gateway.ran == [{"kind": "first"}, {"kind": "second"}]


def test_a_grant_of_hostile_arguments_is_shown_as_text_and_a_stale_revoke_says_why(
    granting: Page, signed_gateway: Gateway
) -> None:
    """A grant of exact arguments holding HTML and script lists them literally (no element
    made, nothing run); revoked elsewhere meanwhile, its Revoke shows the API's 404 text and the
    list is read again."""
    page, gateway = granting, signed_gateway
    page.evaluate("() => { window.__pwned = 0; }")
    done = gateway.call(HOSTILE_ARG)
    open_the_call(page)
    card = page.get_by_test_id("approval-card")
    card.get_by_test_id("grant-match").select_option("args")
    card.get_by_test_id("grant-ttl").select_option("uses:1")
    card.get_by_test_id("approve-grant").click()
    expect(page.get_by_test_id("call-status")).to_have_text("executed")
    assert done.result(timeout=10).is_error is False

    item = page.get_by_test_id("grants-list").get_by_test_id("grant-item")
    expect(item).to_have_count(1)
    expect(item.get_by_test_id("grant-title")).to_have_text(f"{TOOL}, these exact arguments")
    expect(item.locator("dt")).to_have_text(["Arguments", "Uses left", "Expires", "Granted by"])
    args = item.get_by_test_id("grant-args")
    assert args.text_content() == pretty({"kind": HOSTILE_ARG})
    expect(args.locator("pre")).to_have_count(1)
    assert args.locator("pre *").count() == 0  # no element was made of the text
    expect(item.get_by_test_id("grant-uses")).to_have_text("1 of 1")
    expect(item.get_by_test_id("grant-expires")).to_have_text("never (until revoked)")
    expect(item.get_by_test_id("grant-by")).to_have_text("maria")
    assert page.locator("img, script:not([src])").count() == 0
    assert page.evaluate("() => window.__pwned") == 0
    assert serious_axe_violations(page) == []

    [grant] = active_grants(page, gateway)
    assert grant["args"] == {"kind": HOSTILE_ARG}
    expect(page.get_by_test_id("queue-item")).to_have_count(0)
    assert gateway.ran[-1] == {"kind": HOSTILE_ARG}

    # Another reviewer revokes it; the page has not read the list since (its reads fail until
    # the page sends its own DELETE), so it still offers Revoke.
    held = {"reads": True}

    def hold(route: Route) -> None:
        if route.request.method == "DELETE":
            held["reads"] = False
        if route.request.method == "GET" and held["reads"]:
            route.abort()
        else:
            route.continue_()

    page.route("**/hitl/grants**", hold)
    assert page.request.delete(f"{gateway.url}/hitl/grants/{grant['id']}").status == 200
    item.get_by_test_id("grant-revoke").click()
    expect(page.get_by_test_id("grants-error")).to_have_text(
        f"Error 404: The grant '{grant['id']}' is no longer active (revoked)"
    )
    expect(page.get_by_test_id("grants-status")).to_have_text("")
    expect(page.get_by_test_id("grants-list").get_by_test_id("grant-item")).to_have_count(0)
    ended = page.get_by_test_id("grants-ended-list").get_by_test_id("grant-item").first
    expect(ended).to_have_attribute("data-grant", grant["id"])
    expect(ended).to_have_attribute("data-status", "revoked")
    expect(ended.locator("dt")).to_have_text(["Arguments", "Granted by", "Status"])
    assert ended.get_by_test_id("grant-args").text_content() == pretty({"kind": HOSTILE_ARG})
    assert page.evaluate("() => window.__pwned") == 0
