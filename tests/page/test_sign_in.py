"""The approval page with sign-in (``create_app(chat, auth=...)``), in headless Chromium: the
token form and its errors, who is signed in, the HttpOnly SameSite=Strict session cookie,
sign-out, a session that ends while the page is open, and the notice of a sign-in proxy.
"""

# ruff: noqa: S105 - test tokens

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("axe_playwright_python", reason="the dev extra is not installed")

import httpx  # noqa: E402

from tests.helpers import (  # noqa: E402
    ARTIFACTS,
    BOB_MAIL,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    Outbox,
    Server,
    browser,
    make_page_chat,
    replies,
    send,
    serious_axe_violations,
    serve_in_thread,
    server,
    tab,
    thread_id_from_url,
)
from toolguard.http import HeaderAuth, TokenAuth, create_app, new_token  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser", "server", "tab"]  # fixtures, used by name

ALICE, ALICE_LINE = new_token("alice")
BOB, BOB_LINE = new_token("bob")
WRONG_TOKEN = "Sign-in failed: the token is not a reviewer's token."
NO_TOKEN = "Enter your token."
ENDED = (
    "Sign-in required: the session has ended (expired, signed out, or the reviewer's token was"
    " replaced or removed); sign in again."
)
PROXY_TEXT = (
    "This page must be opened through the sign-in proxy: open it at the proxy's address, where"
    " you sign in, not at this server's own address."
)
UNTRUSTED = (
    "Sign-in required: the X-Forwarded-User header is believed only from the trusted proxies"
    " (trusted_proxies, or --trusted-proxy of toolguard serve or mcp-proxy); sign in through the"
    " proxy."
)
LIVE = "Live: updates as reviews arrive."
ONLY_THE_GATE = ["sign-in"]


@pytest.fixture(scope="module")
def signed() -> Iterator[Server]:
    """The page's chat served with token sign-in for alice and bob."""
    outbox = Outbox()
    auth = TokenAuth(dict(line.split() for line in (ALICE_LINE, BOB_LINE)))
    with serve_in_thread(create_app(make_page_chat(outbox), auth=auth)) as url:
        yield Server(url, outbox)


@pytest.fixture(scope="module")
def proxied() -> Iterator[str]:
    """Header sign-in that believes only a proxy at 192.0.2.1: this browser is not it."""
    auth = HeaderAuth("X-Forwarded-User", trusted_proxies=["192.0.2.1/32"])
    with serve_in_thread(create_app(make_page_chat(Outbox()), auth=auth)) as url:
        yield url


@pytest.fixture(scope="module")
def behind_proxy() -> Iterator[str]:
    """Header sign-in that believes this machine (the default): the browser plays the proxy."""
    auth = HeaderAuth("X-Forwarded-User")
    with serve_in_thread(create_app(make_page_chat(Outbox()), auth=auth)) as url:
        yield url


@pytest.fixture
def gate(tab: Page, signed: Server) -> Page:
    """The page without a session cookie, freshly loaded; the outbox starts empty."""
    tab.context.clear_cookies()
    signed.outbox.done.clear()
    tab.goto(signed.url + "/")
    return tab


def open_page(browser: Browser, **options: Any) -> Page:
    """A page in a new context (closed with the page's context by the caller)."""
    context = browser.new_context(viewport={"width": 900, "height": 900}, **options)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def visible_parts(page: Page) -> list[str]:
    """The test ids of the page's parts that are shown (sign-in, proxy notice, app, account)."""
    parts = ["sign-in", "proxy-needed", "app", "account", "new-thread", "sign-out"]
    return [part for part in parts if page.get_by_test_id(part).is_visible()]


def sign_in(page: Page, token: str) -> None:
    """Type ``token`` into the sign-in form and submit it."""
    page.get_by_test_id("sign-in-token").fill(token)
    page.get_by_test_id("sign-in-submit").click()


def signed_in_as(page: Page, name: str) -> None:
    """Sign in with the token of ``name`` and wait until the page says so."""
    sign_in(page, {"alice": ALICE, "bob": BOB}[name])
    expect(page.get_by_test_id("signed-in")).to_have_text(f"Signed in as {name}")


def snap(page: Page, name: str) -> None:
    """Save the whole page to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def page_fetch(page: Page, method: str, path: str) -> int:
    """The status of ``fetch(path)`` made by the page itself (with its cookies)."""
    status: int = page.evaluate(
        "async ([method, path]) => (await fetch(path, {method})).status", [method, path]
    )
    return status


def audit_trail(url: str, thread_id: str, token: str) -> list[tuple[str, str | None]]:
    """``(kind, actor)`` of each event of a thread's audit trail, read with a bearer token."""
    answer = httpx.get(
        f"{url}/hitl/threads/{thread_id}/audit",
        headers={"Authorization": f"Bearer {token}"},
        timeout=TIMEOUT_MS / 1000,
    )
    assert answer.status_code == 200, answer.text
    return [(event["kind"], event["actor"]) for event in map(json.loads, answer.text.splitlines())]


# --- token sign-in ------------------------------------------------------------------------------


def test_without_a_session_the_page_shows_only_the_sign_in_form(
    browser: Browser, signed: Server
) -> None:
    """Nothing but the form: no chat, no list, no stream; the only request asks who is in."""
    page = open_page(browser)
    asked: list[tuple[str, str]] = []
    page.on("request", lambda request: asked.append((request.method, request.url)))
    try:
        page.goto(signed.url + "/")
        expect(page.get_by_test_id("sign-in")).to_be_visible()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        field = page.get_by_label("Token")
        assert field.get_attribute("type") == "password"
        expect(field).to_be_focused()
        expect(page.get_by_test_id("sign-in-error")).to_be_hidden()
        assert visible_parts(page) == ONLY_THE_GATE
        assert [(m, u) for m, u in asked if "/hitl/" in u] == [
            ("GET", f"{signed.url}/hitl/session")
        ]
        assert serious_axe_violations(page) == []
        snap(page, "sign-in-form")
    finally:
        page.context.close()


def test_a_wrong_token_shows_the_servers_error_and_signs_nobody_in(gate: Page) -> None:
    """The server's detail, word for word; the field is emptied; no cookie; still the form."""
    sign_in(gate, "not-a-reviewer-token")
    expect(gate.get_by_test_id("sign-in-error")).to_have_text(WRONG_TOKEN)
    assert gate.get_by_test_id("sign-in-token").input_value() == ""
    assert gate.get_by_test_id("sign-in-token").get_attribute("aria-invalid") == "true"
    assert gate.context.cookies() == []
    assert visible_parts(gate) == ONLY_THE_GATE
    assert serious_axe_violations(gate) == []
    snap(gate, "sign-in-wrong-token")

    gate.get_by_test_id("sign-in-submit").click()  # an empty field sends nothing
    expect(gate.get_by_test_id("sign-in-error")).to_have_text(NO_TOKEN)
    sign_in(gate, "x" * 2000)  # longer than any token the server accepts
    expect(gate.get_by_test_id("sign-in-error")).to_have_text(
        "Error 422: body.token: String should have at most 1024 characters"
    )
    assert gate.context.cookies() == []


def test_the_right_token_signs_in_and_the_page_decides_as_that_reviewer(
    gate: Page, signed: Server
) -> None:
    """alice signs in: named in the header, the stream connects, her approval is audited as hers.

    The token is kept nowhere in the page (field, storage, URL); the cookie is HttpOnly and
    SameSite=Strict, and holds her name, never the token."""
    signed_in_as(gate, "alice")
    assert visible_parts(gate) == ["app", "account", "new-thread", "sign-out"]
    expect(gate.get_by_test_id("queue-live")).to_have_text(LIVE)
    assert gate.get_by_test_id("sign-in-token").input_value() == ""
    assert gate.evaluate(
        "() => [localStorage.length, sessionStorage.length, location.href, document.cookie]"
    ) == [0, 0, signed.url + "/", ""]
    cookies = gate.context.cookies()
    assert [(c["name"], c["path"], c["httpOnly"], c["sameSite"], c["secure"]) for c in cookies] == [
        ("toolguard_session", "/", True, "Strict", False)
    ]
    assert cookies[0]["value"].startswith("alice.")
    assert ALICE not in cookies[0]["value"]
    assert serious_axe_violations(gate) == []
    snap(gate, "signed-in")

    send(gate, "Please mail Bob")
    card = gate.get_by_test_id("approval-card")
    expect(card).to_have_count(1)
    card.get_by_test_id("approve").click()
    expect(replies(gate)).to_have_text(["Done. [success] Sent to bob@example.com: Lunch"])
    expect(gate.get_by_test_id("decided-by")).to_contain_text("Approved by alice at ")
    assert signed.outbox.done == [("send_email", BOB_MAIL)]
    thread_id = thread_id_from_url(gate)
    assert audit_trail(signed.url, thread_id, BOB) == [
        ("requested", None),
        ("decided", "alice"),
        ("executed", "alice"),
    ]

    gate.reload()  # the cookie keeps alice signed in; the page knows she can sign out
    expect(gate.get_by_test_id("signed-in")).to_have_text("Signed in as alice")
    expect(gate.get_by_test_id("message-tool")).to_have_count(1)
    assert visible_parts(gate) == ["app", "account", "new-thread", "sign-out"]
    expect(gate.get_by_test_id("queue-live")).to_have_text(LIVE)


def test_sign_out_returns_to_the_form_and_the_page_can_no_longer_call_the_api(
    gate: Page, signed: Server
) -> None:
    """After sign-out: the form, no cookie, nothing of the conversation left in the page, and
    the page's own calls answer 401; bob signs in and the thread and the stream come back."""
    signed_in_as(gate, "alice")
    send(gate, "hello")
    expect(replies(gate)).to_have_text(["You said: hello"])
    thread_id = thread_id_from_url(gate)

    gate.get_by_test_id("sign-out").click()
    expect(gate.get_by_test_id("sign-in")).to_be_visible()
    assert visible_parts(gate) == ONLY_THE_GATE
    expect(gate.get_by_label("Token")).to_be_focused()
    expect(gate.get_by_test_id("sign-in-error")).to_be_hidden()
    assert gate.context.cookies() == []
    assert gate.get_by_test_id("messages").inner_html() == ""
    assert gate.get_by_test_id("queue-live").text_content() == ""
    assert [
        page_fetch(gate, "GET", f"/hitl/threads/{thread_id}"),
        page_fetch(gate, "GET", "/hitl/reviews"),
        page_fetch(gate, "GET", "/hitl/session"),
    ] == [401, 401, 401]
    snap(gate, "signed-out")

    signed_in_as(gate, "bob")
    expect(replies(gate)).to_have_text(["You said: hello"])
    expect(gate.get_by_test_id("queue-live")).to_have_text(LIVE)
    assert visible_parts(gate) == ["app", "account", "new-thread", "sign-out"]


def test_a_session_that_ends_while_the_page_is_open_brings_back_the_form(gate: Page) -> None:
    """The next call answers 401: the form says why; signing in again lets the reviewer go on."""
    signed_in_as(gate, "alice")
    gate.context.clear_cookies()  # as if the session had expired
    send(gate, "hello")
    expect(gate.get_by_test_id("sign-in")).to_be_visible()
    expect(gate.get_by_test_id("sign-in-error")).to_have_text(
        "Sign-in required: send Authorization: Bearer TOKEN, or sign in with your token on the"
        " approval page."
    )
    assert visible_parts(gate) == ONLY_THE_GATE

    signed_in_as(gate, "alice")
    expect(gate.get_by_test_id("error")).to_be_hidden()
    send(gate, "hello again")
    expect(replies(gate)).to_have_text(["You said: hello again"])


def test_a_revoked_cookie_shows_the_servers_reason(gate: Page, signed: Server) -> None:
    """A cookie the server no longer accepts (here: forged) gets the 'session has ended' text."""
    signed_in_as(gate, "alice")
    expect(gate.get_by_test_id("queue-live")).to_have_text(LIVE)
    gate.context.add_cookies(
        [{"name": "toolguard_session", "value": "alice.99999999999.00", "url": signed.url}]
    )
    send(gate, "hello")
    expect(gate.get_by_test_id("sign-in-error")).to_have_text(ENDED)
    assert visible_parts(gate) == ONLY_THE_GATE


# --- header sign-in -----------------------------------------------------------------------------


def test_header_sign_in_from_an_untrusted_peer_shows_the_proxy_notice(
    browser: Browser, proxied: str
) -> None:
    """No token form (there is no token to give): the page says to come through the proxy."""
    page = open_page(browser, extra_http_headers={"X-Forwarded-User": "mallory"})
    try:
        page.goto(proxied + "/")
        expect(page.get_by_test_id("proxy-needed")).to_be_visible()
        expect(page.get_by_role("heading", name="Sign in through the proxy")).to_be_visible()
        expect(page.get_by_test_id("proxy-text")).to_have_text(PROXY_TEXT)
        expect(page.get_by_test_id("proxy-detail")).to_have_text(UNTRUSTED)
        assert visible_parts(page) == ["proxy-needed"]
        assert serious_axe_violations(page) == []
        snap(page, "sign-in-proxy-needed")
    finally:
        page.context.close()


def test_a_name_from_the_proxy_is_shown_as_text_without_a_sign_out(
    browser: Browser, behind_proxy: str
) -> None:
    """The proxy's name is text (markup stays text, hidden characters are shown escaped)."""
    name = "<img src=x onerror=alert(1)>carol\u202e"
    page = open_page(
        browser, extra_http_headers={"X-Forwarded-User": name.encode().decode("latin-1")}
    )
    try:
        page.goto(behind_proxy + "/")
        expect(page.get_by_test_id("signed-in")).to_have_text(
            "Signed in as <img src=x onerror=alert(1)>carol\\u202e"
        )
        assert page.get_by_test_id("signed-in").locator("img").count() == 0
        assert visible_parts(page) == ["app", "account", "new-thread"]
        expect(page.get_by_test_id("queue-live")).to_have_text(LIVE)
        send(page, "hello")
        expect(replies(page)).to_have_text(["You said: hello"])
    finally:
        page.context.close()


# --- no sign-in -------------------------------------------------------------------------------


def test_without_sign_in_the_page_names_nobody(browser: Browser, server: Server) -> None:
    """No sign-in configured (GET /hitl/session answers {"reviewer": null}): no form, no name,
    the chat works."""
    page = open_page(browser)
    try:
        page.goto(server.url + "/")
        expect(page.get_by_test_id("queue-live")).to_have_text(LIVE)
        assert visible_parts(page) == ["app", "new-thread"]
        send(page, "hello")
        expect(replies(page)).to_have_text(["You said: hello"])
    finally:
        page.context.close()
