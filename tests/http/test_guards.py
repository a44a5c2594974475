"""The HTTP API's own defences, through real HTTP clients: headers, cross-site, 415, 413, Host.

Each defence is in toolguard's code (the router's route class and
``create_app``'s middleware), not left to FastAPI or Starlette, so it holds
whatever their versions do. Most tests drive the app in process through
``httpx.ASGITransport``; the ones where the server matters run it with uvicorn
on 127.0.0.1 (see also ``tests/adversarial/test_http_hostile.py``).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any
from uuid import UUID

import httpx
import pytest
from fastapi import FastAPI, Header, HTTPException

from tests.helpers import (
    CROSS_SITE,
    MISDIRECTED,
    command_env,
    free_port,
    security_headers,
    security_headers_once,
    serve_in_thread,
    too_large,
    wait_for_page,
)
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._cli import serve as serve_defaults
from toolguard._cli.serve import serve
from toolguard._core.hosts import default_hosts
from toolguard.http import (
    CONTENT_SECURITY_POLICY,
    DEFAULT_MAX_BODY_BYTES,
    create_app,
    create_router,
)

BASE = "http://testserver"
MAIL = {"to": "alice@example.com", "body": "Hi"}
ONCE = security_headers_once()
"""The security headers, each sent exactly once."""
NOT_JSON = {"detail": "The request body must be JSON: send Content-Type: application/json (UTF-8)."}


class Outbox:
    """What the guarded tool really did."""

    def __init__(self) -> None:
        self.sent: list[dict[str, str]] = []


def make_chat(outbox: Outbox, **options: Any) -> ReviewedChat:
    """A chat whose model mails Alice (guarded) on "mail", else answers "Hello!"."""

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        outbox.sent.append({"to": to, "body": body})
        return f"sent to {to}"

    def react(messages: Any) -> ModelResponse:
        last = messages[-1]
        if last["role"] == "user" and "mail" in str(last["content"]):
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=MAIL)])
        return ModelResponse(text="Hello!")

    return ReviewedChat(ScriptedModel([react], repeat=True), [send_email], **options)


@contextlib.asynccontextmanager
async def client_for(app: FastAPI, base_url: str = BASE) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client; a 500 comes back as a response."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
        yield client


async def thread_ids(chat: ReviewedChat) -> list[str]:
    """The ids of the threads the chat's store holds."""
    ids: list[str] = await chat.store.thread_ids()  # type: ignore[attr-defined]
    return ids


async def paused_thread(client: httpx.AsyncClient) -> dict[str, Any]:
    """Start a thread whose send_email waits for a review."""
    response = await client.post("/hitl/chat", json={"message": "mail alice"})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    assert body["review_id"] is not None
    return body


# --- security headers ---------------------------------------------------------------------------


async def test_every_answer_of_create_app_carries_the_security_headers() -> None:
    """The page, its files, API answers and every kind of error carry each header exactly once."""
    app = create_app(make_chat(Outbox()), max_body_bytes=100)
    async with client_for(app) as client:
        answers = {
            "page": await client.get("/"),
            "static": await client.get("/static/app.js"),
            "static-404": await client.get("/static/missing.js"),
            "unknown-path": await client.get("/nope"),
            "chat-200": await client.post("/hitl/chat", json={"message": "hi"}),
            "thread-404": await client.get("/hitl/threads/unknown"),
            "audit-404": await client.get("/hitl/threads/unknown/audit"),
            "chat-422": await client.post("/hitl/chat", json={}),
            "chat-405": await client.put("/hitl/chat", json={"message": "hi"}),
            "chat-403": await client.post(
                "/hitl/chat", json={"message": "hi"}, headers={"Origin": "http://evil.example"}
            ),
            "chat-415": await client.post("/hitl/chat", content=b"message=hi"),
            "chat-413": await client.post("/hitl/chat", json={"message": "x" * 200}),
            "openapi": await client.get("/openapi.json"),
        }
    statuses = {name: response.status_code for name, response in answers.items()}
    assert statuses == {
        "page": 200,
        "static": 200,
        "static-404": 404,
        "unknown-path": 404,
        "chat-200": 200,
        "thread-404": 404,
        "audit-404": 404,
        "chat-422": 422,
        "chat-405": 405,
        "chat-403": 403,
        "chat-415": 415,
        "chat-413": 413,
        "openapi": 200,
    }
    for name, response in answers.items():
        assert (name, security_headers(response)) == (name, ONCE)


async def test_no_docs_page_runs_scripts_from_a_cdn() -> None:
    """/docs and /redoc (Swagger UI and ReDoc load scripts from a CDN) are never served: the
    page's origin runs only its own scripts. create_app serves the OpenAPI document as JSON
    under the same strict policy; with openapi=False it serves none."""
    async with client_for(create_app(make_chat(Outbox()))) as client:
        answers = {path: await client.get(path) for path in ("/docs", "/redoc", "/openapi.json")}
    async with client_for(create_app(make_chat(Outbox()), openapi=False)) as client:
        without = await client.get("/openapi.json")
    assert {path: a.status_code for path, a in answers.items()} == {
        "/docs": 404,
        "/redoc": 404,
        "/openapi.json": 200,
    }
    assert answers["/openapi.json"].json()["info"]["title"] == "toolguard"
    for answer in [*answers.values(), without]:
        assert security_headers(answer) == ONCE
    assert (without.status_code, without.json()) == (404, {"detail": "Not Found"})


async def test_an_unexpected_error_is_a_500_with_the_headers() -> None:
    """A crash inside a route answers 500 with a fixed text and the headers, nothing more."""
    chat = make_chat(Outbox())

    async def broken_load(thread_id: str) -> Any:
        raise RuntimeError("secret internals " + thread_id)

    chat.store.load = broken_load  # type: ignore[method-assign]
    async with client_for(create_app(chat)) as client:
        response = await client.get("/hitl/threads/t1")
    assert (response.status_code, response.json()) == (500, {"detail": "Internal Server Error"})
    assert security_headers(response) == ONCE


def login(x_user: Annotated[str | None, Header()] = None) -> str:
    """A stand-in login: the X-User header, else 401."""
    if x_user is None:
        raise HTTPException(status_code=401, detail="Log in first", headers={"X-Login": "here"})
    return x_user


async def test_the_router_in_a_plain_app_sends_the_headers_on_its_answers() -> None:
    """Mounted into the user's own app, the router's answers (also its errors) carry the headers."""
    app = FastAPI()
    app.include_router(create_router(make_chat(Outbox()), reviewer=login))
    async with client_for(app) as client:
        ok = await client.post("/hitl/chat", json={"message": "hi"}, headers={"X-User": "a"})
        missing = await client.get("/hitl/threads/nope", headers={"X-User": "a"})
        invalid = await client.post("/hitl/chat", json={}, headers={"X-User": "a"})
        unauthenticated = await client.post("/hitl/chat", json={"message": "hi"})
    assert [r.status_code for r in (ok, missing, invalid, unauthenticated)] == [200, 404, 422, 401]
    assert unauthenticated.json() == {"detail": "Log in first"}
    assert unauthenticated.headers["x-login"] == "here"
    for response in (ok, missing, invalid, unauthenticated):
        assert security_headers(response) == ONCE


# --- cross-site requests ------------------------------------------------------------------------

SAME_ORIGIN = [
    pytest.param({}, id="no-origin"),
    pytest.param({"Origin": BASE}, id="own-origin"),
    pytest.param({"Origin": "http://testserver:80"}, id="own-origin-explicit-port"),
    pytest.param({"Origin": "HTTP://TestServer"}, id="own-origin-other-case"),
    pytest.param({"Origin": BASE, "Sec-Fetch-Site": "same-origin"}, id="fetch-same-origin"),
    pytest.param({"Sec-Fetch-Site": "none"}, id="fetch-none"),
    pytest.param({"Origin": "https://admin.example"}, id="allow-listed"),
    pytest.param(
        {"Origin": "https://admin.example:443", "Sec-Fetch-Site": "cross-site"},
        id="allow-listed-cross-site",
    ),
]
CROSS_SITE_HEADERS = [
    pytest.param({"Origin": "http://evil.example"}, id="other-origin"),
    pytest.param({"Origin": "https://testserver"}, id="other-scheme"),
    pytest.param({"Origin": "http://testserver:8080"}, id="other-port"),
    pytest.param({"Origin": "http://sub.testserver"}, id="subdomain"),
    pytest.param({"Origin": "null"}, id="null"),
    pytest.param({"Origin": "not a url"}, id="malformed"),
    pytest.param({"Origin": "http://testserver/path"}, id="with-path"),
    pytest.param({"Origin": "https://admin.example:8443"}, id="allow-listed-host-other-port"),
    pytest.param({"Sec-Fetch-Site": "cross-site"}, id="fetch-cross-site"),
    pytest.param({"Sec-Fetch-Site": "same-site"}, id="fetch-same-site"),
    pytest.param({"Sec-Fetch-Site": "unheard-of"}, id="fetch-unknown"),
    pytest.param({"Origin": BASE, "Sec-Fetch-Site": "cross-site"}, id="own-origin-cross-site"),
]


@pytest.mark.parametrize("headers", SAME_ORIGIN)
async def test_writes_from_the_same_origin_or_without_origin_are_served(
    headers: dict[str, str],
) -> None:
    """No Origin (scripts), the server's own origin, or an allow-listed one: the POST runs."""
    app = create_app(make_chat(Outbox()), allowed_origins=["https://admin.example"])
    async with client_for(app) as client:
        response = await client.post("/hitl/chat", json={"message": "hi"}, headers=headers)
    assert (response.status_code, response.json()["reply"]) == (200, "Hello!")


@pytest.mark.parametrize("path", ["/hitl/chat", "/hitl/review", "/hitl/cancel"])
@pytest.mark.parametrize("headers", CROSS_SITE_HEADERS)
async def test_cross_site_writes_are_403_and_change_nothing(
    path: str, headers: dict[str, str]
) -> None:
    """A foreign, null or malformed Origin, or Sec-Fetch-Site cross/same-site: 403, nothing runs."""
    outbox = Outbox()
    app = create_app(make_chat(outbox), allowed_origins=["https://admin.example"])
    async with client_for(app) as client:
        paused = await paused_thread(client)
        before = (await client.get(f"/hitl/threads/{paused['thread_id']}")).json()
        body = {
            "/hitl/chat": {"message": "mail again", "thread_id": None},
            "/hitl/review": {"thread_id": paused["thread_id"], "decisions": [{"type": "approve"}]},
            "/hitl/cancel": {"thread_id": paused["thread_id"]},
        }[path]
        response = await client.post(path, json=body, headers=headers)
        after = (await client.get(f"/hitl/threads/{paused['thread_id']}")).json()
        threads = await thread_ids(app.state.chat)
    assert (response.status_code, response.json()) == (403, CROSS_SITE)
    assert security_headers(response) == ONCE
    assert (after, outbox.sent, threads) == (before, [], [paused["thread_id"]])


async def test_two_origin_headers_are_refused() -> None:
    """A request carrying Origin twice is refused, even if one of them is the server's own."""
    async with client_for(create_app(make_chat(Outbox()))) as client:
        response = await client.post(
            "/hitl/chat",
            content=b'{"message": "hi"}',
            headers=[
                ("content-type", "application/json"),
                ("origin", BASE),
                ("origin", "http://evil.example"),
            ],
        )
    assert (response.status_code, response.json()) == (403, CROSS_SITE)


async def test_reads_from_other_origins_are_answered() -> None:
    """GETs are not refused (a page of another origin cannot read the answer without CORS)."""
    async with client_for(create_app(make_chat(Outbox()))) as client:
        paused = await paused_thread(client)
        response = await client.get(
            f"/hitl/threads/{paused['thread_id']}",
            headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        )
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_the_own_origin_follows_the_proxy_scheme_and_host() -> None:
    """Behind https the page's Origin is https://HOST: it matches the request's scheme and Host."""
    app = create_app(make_chat(Outbox()))
    async with client_for(app, "https://agent.example.com") as client:
        own = await client.post(
            "/hitl/chat",
            json={"message": "hi"},
            headers={"Origin": "https://agent.example.com"},
        )
        plain = await client.post(
            "/hitl/chat", json={"message": "hi"}, headers={"Origin": "http://agent.example.com"}
        )
    assert (own.status_code, plain.status_code) == (200, 403)


@pytest.mark.parametrize(
    ("origins", "error"),
    [
        (["null"], ValueError),
        (["https://a.example/path"], ValueError),
        (["a.example"], ValueError),
        (["ftp://a.example"], ValueError),
        ("https://a.example", TypeError),
        ([42], TypeError),
    ],
)
def test_invalid_allowed_origins_are_refused_at_creation(
    origins: Any, error: type[Exception]
) -> None:
    """allowed_origins takes a list of scheme://host[:port]; anything else is refused at once."""
    with pytest.raises(error) as caught:
        create_app(make_chat(Outbox()), allowed_origins=origins)
    texts = {
        ValueError: (
            f"allowed_origins: {origins[0]!r} is not an origin; write scheme://host[:port],"
            " e.g. 'https://admin.example.com' (no path; 'null' is never allowed)"
        ),
        TypeError: (
            "allowed_origins must be a list of origins, not one string: ['https://a.example']"
            if isinstance(origins, str)
            else "allowed_origins entries must be text, got int"
        ),
    }
    assert str(caught.value) == texts[error]


# --- content type -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-patch+json",
        "application/ld+json",
        "application/json; charset=latin-1",
        "json",
    ],
)
async def test_bodies_that_are_not_labelled_json_are_415(content_type: str | None) -> None:
    """Only application/json (UTF-8) is read; a form or text/plain body gets 415, nothing runs."""
    outbox = Outbox()
    headers = {"content-type": content_type} if content_type is not None else {}
    chat = make_chat(outbox)
    async with client_for(create_app(chat)) as client:
        response = await client.post(
            "/hitl/chat", content=b'{"message": "mail alice"}', headers=headers
        )
    threads = await thread_ids(chat)
    assert (response.status_code, response.json()) == (415, NOT_JSON)
    assert (threads, outbox.sent) == ([], [])


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON; Charset=UTF-8",
        'application/json;charset="utf-8"',
    ],
)
async def test_json_with_or_without_utf8_charset_is_read(content_type: str) -> None:
    """application/json, with or without charset=utf-8 (any case), is accepted."""
    async with client_for(create_app(make_chat(Outbox()))) as client:
        response = await client.post(
            "/hitl/chat", content=b'{"message": "hi"}', headers={"content-type": content_type}
        )
    assert (response.status_code, response.json()["reply"]) == (200, "Hello!")


# --- body size ----------------------------------------------------------------------------------


def chat_body(size: int) -> bytes:
    """A valid chat body of exactly ``size`` bytes."""
    frame = b'{"message": ""}'
    body = b'{"message": "' + b"x" * (size - len(frame)) + b'"}'
    assert len(body) == size
    return body


async def test_the_default_limit_is_one_mebibyte() -> None:
    """A body of exactly 1 MiB is read; one byte more is a 413."""
    assert DEFAULT_MAX_BODY_BYTES == 1_048_576
    assert serve_defaults.DEFAULT_MAX_BODY_BYTES == DEFAULT_MAX_BODY_BYTES
    async with client_for(create_app(make_chat(Outbox()))) as client:
        ok = await client.post(
            "/hitl/chat", content=chat_body(DEFAULT_MAX_BODY_BYTES), headers=JSON_TYPE
        )
        over = await client.post(
            "/hitl/chat", content=chat_body(DEFAULT_MAX_BODY_BYTES + 1), headers=JSON_TYPE
        )
    assert (ok.status_code, ok.json()["reply"]) == (200, "Hello!")
    assert (over.status_code, over.json()) == (413, too_large(DEFAULT_MAX_BODY_BYTES))


JSON_TYPE = {"content-type": "application/json"}


class Chunks:
    """A request body sent in 100-byte chunks without Content-Length; counts what was pulled."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        body = chat_body(self.total)
        for start in range(0, self.total, 100):
            self.pulled += 1
            yield body[start : start + 100]


async def test_a_chunked_body_over_the_limit_is_413_before_it_is_all_read() -> None:
    """Without Content-Length the body is counted as it arrives and refused once past the limit."""
    chunks = Chunks(100_000)
    async with client_for(create_app(make_chat(Outbox()), max_body_bytes=1_000)) as client:
        response = await client.post("/hitl/chat", content=chunks, headers=JSON_TYPE)
        small = await client.post("/hitl/chat", content=Chunks(1_000), headers=JSON_TYPE)
    assert (response.status_code, response.json()) == (413, too_large(1_000))
    assert chunks.pulled == 11  # 1,100 bytes pulled of 100,000
    assert (small.status_code, small.json()["reply"]) == (200, "Hello!")


async def test_a_lying_content_length_does_not_get_a_large_body_through() -> None:
    """Content-Length says 10, the body has 5,000 bytes: the bytes are counted, 413."""
    async with client_for(create_app(make_chat(Outbox()), max_body_bytes=1_000)) as client:
        response = await client.post(
            "/hitl/chat",
            content=chat_body(5_000),
            headers={**JSON_TYPE, "content-length": "10"},
        )
    assert (response.status_code, response.json()) == (413, too_large(1_000))


async def test_a_large_content_length_is_413_without_reading_the_body() -> None:
    """Content-Length over the limit is refused from the header: not one chunk is pulled."""
    chunks = Chunks(500)
    async with client_for(create_app(make_chat(Outbox()), max_body_bytes=1_000)) as client:
        response = await client.post(
            "/hitl/chat", content=chunks, headers={**JSON_TYPE, "content-length": "5000000"}
        )
    assert (response.status_code, response.json()) == (413, too_large(1_000))
    assert chunks.pulled == 0


async def test_the_router_takes_the_limit_too() -> None:
    """create_router(max_body_bytes=...) limits the routes in the user's own app."""
    app = FastAPI()
    app.include_router(create_router(make_chat(Outbox()), max_body_bytes=50))
    async with client_for(app) as client:
        response = await client.post("/hitl/chat", content=chat_body(51), headers=JSON_TYPE)
        ok = await client.post("/hitl/chat", content=chat_body(50), headers=JSON_TYPE)
    assert (response.status_code, response.json()) == (413, too_large(50))
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (0, ValueError, "max_body_bytes must be at least 1, got 0"),
        (-5, ValueError, "max_body_bytes must be at least 1, got -5"),
        (True, TypeError, "max_body_bytes must be an int (bytes), got bool"),
        ("1000", TypeError, "max_body_bytes must be an int (bytes), got str"),
        (1.5, TypeError, "max_body_bytes must be an int (bytes), got float"),
    ],
)
def test_an_invalid_body_limit_is_refused_at_creation(value: Any, error: type, text: str) -> None:
    """max_body_bytes must be a positive int."""
    with pytest.raises(error) as caught:
        create_router(make_chat(Outbox()), max_body_bytes=value)
    assert str(caught.value) == text


def raw_request(port: int, head: bytes, body_parts: list[bytes]) -> bytes:
    """Send ``head`` and ``body_parts`` over one socket to 127.0.0.1; return what comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        for part in body_parts:
            sock.sendall(part)
        received = b""
        while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    return received


def test_over_uvicorn_the_413_comes_before_the_body(tmp_path: Path) -> None:
    """With uvicorn: a large Content-Length, and a chunked body past the limit that never ends,
    are both answered 413 while the client is still expected to send."""
    with serve_in_thread(create_app(make_chat(Outbox()), max_body_bytes=1_000)) as url:
        port = int(url.rsplit(":", 1)[1])
        declared = raw_request(
            port,
            b"POST /hitl/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n",
            [],
        )
        chunk = b"x" * 600
        chunked = raw_request(
            port,
            b"POST /hitl/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n",
            [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 2,  # 1,200 bytes, no final chunk
        )
    for answer in (declared, chunked):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 ")
        assert b"\r\nx-frame-options: DENY" in head
        assert json.loads(body) == too_large(1_000)


# --- the Host header (DNS rebinding) ------------------------------------------------------------

LOCAL_8000 = ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"]


@pytest.mark.parametrize(
    ("allowed", "host", "status"),
    [
        (LOCAL_8000, "127.0.0.1:8000", 200),
        (LOCAL_8000, "localhost:8000", 200),
        (LOCAL_8000, "LocalHost:8000", 200),
        (LOCAL_8000, "[::1]:8000", 200),
        (LOCAL_8000, "evil.example:8000", 421),
        (LOCAL_8000, "evil.example", 421),
        (LOCAL_8000, "localhost:8001", 421),
        (LOCAL_8000, "localhost", 421),
        (LOCAL_8000, "localhost.:8000", 421),
        (LOCAL_8000, "127.0.0.1.nip.io:8000", 421),
        (LOCAL_8000, "localhost:8000@evil.example", 421),
        (LOCAL_8000, "[::1", 421),
        (LOCAL_8000, "", 421),
        (["agent.example"], "agent.example:1234", 200),
        (["agent.example"], "agent.example", 200),
        (["agent.example"], "www.agent.example", 421),
        (["agent.example:80"], "agent.example", 200),
        (["*"], "anything.example:1", 200),
    ],
)
async def test_hosts_outside_the_allow_list_are_421(
    allowed: list[str], host: str, status: int
) -> None:
    """allowed_hosts: HOST:PORT exactly, HOST any port, * anything; others get 421 everywhere."""
    app = create_app(make_chat(Outbox()), allowed_hosts=allowed)
    async with client_for(app) as client:
        answers = [
            await client.get("/", headers={"Host": host}),
            await client.get("/hitl/threads/x", headers={"Host": host}),
            await client.post("/hitl/chat", json={"message": "hi"}, headers={"Host": host}),
        ]
    if status == 421:
        assert [(a.status_code, a.json()) for a in answers] == [(421, MISDIRECTED)] * 3
    else:
        assert [a.status_code for a in answers] == [200, 404, 200]
    assert [security_headers(a) for a in answers] == [ONCE] * 3


async def test_without_allowed_hosts_any_host_is_answered() -> None:
    """create_app(allowed_hosts=None), the default, does not check Host (serve passes a list)."""
    async with client_for(create_app(make_chat(Outbox()))) as client:
        response = await client.get("/", headers={"Host": "whatever.example"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("entries", "error", "text"),
    [
        (
            ["::1"],
            ValueError,
            (
                "allowed_hosts: '::1' is not a host; write HOST, HOST:PORT or [IPv6]:PORT,"
                " e.g. 'localhost:8000', or '*' for any host"
            ),
        ),
        (
            ["a:b"],
            ValueError,
            (
                "allowed_hosts: 'a:b' is not a host; write HOST, HOST:PORT or [IPv6]:PORT,"
                " e.g. 'localhost:8000', or '*' for any host"
            ),
        ),
        (
            [""],
            ValueError,
            (
                "allowed_hosts: '' is not a host; write HOST, HOST:PORT or [IPv6]:PORT,"
                " e.g. 'localhost:8000', or '*' for any host"
            ),
        ),
        (
            "localhost",
            TypeError,
            "allowed_hosts must be a list of hosts, not one string: ['localhost']",
        ),
        ([8000], TypeError, "allowed_hosts entries must be text, got int"),
    ],
)
def test_invalid_allowed_hosts_are_refused_at_creation(
    entries: Any, error: type, text: str
) -> None:
    """Unbracketed IPv6, a bad port, an empty entry, one string, a non-text entry: refused."""
    with pytest.raises(error) as caught:
        create_app(make_chat(Outbox()), allowed_hosts=entries)
    assert str(caught.value) == text


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 8000, ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"]),
        ("0.0.0.0", 80, ["0.0.0.0:80", "127.0.0.1:80", "localhost:80", "[::1]:80"]),  # noqa: S104
        ("::", 9000, ["[::]:9000", "127.0.0.1:9000", "localhost:9000", "[::1]:9000"]),
        ("Agent.Example", 1, ["agent.example:1", "127.0.0.1:1", "localhost:1", "[::1]:1"]),
    ],
)
def test_serve_answers_the_bound_host_and_loopback_by_default(
    host: str, port: int, expected: list[str]
) -> None:
    """default_hosts: the bound address and localhost, 127.0.0.1, [::1], with the port."""
    assert default_hosts(host, port) == expected


def test_serve_with_an_invalid_option_prints_the_error_and_returns_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """serve(): an invalid origin or host is named by its command-line option; exit code 2."""
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    origin = serve(tools=None, model=None, base_url=None, db=None, allow_origins=["null"])
    host = serve(tools=None, model=None, base_url=None, db=None, allow_hosts=["::1"])
    assert (origin, host) == (2, 2)
    assert capsys.readouterr() == (
        "",
        (
            "error: --allow-origin: 'null' is not an origin; write scheme://host[:port],"
            " e.g. 'https://admin.example.com' (no path; 'null' is never allowed)\n"
            "error: --allow-host: '::1' is not a host; write HOST, HOST:PORT or [IPv6]:PORT,"
            " e.g. 'localhost:8000', or '*' for any host\n"
        ),
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """`python -m toolguard serve` with the new options, on 127.0.0.1; yields (url, port)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolguard",
                "serve",
                "--port",
                str(port),
                "--max-body-bytes",
                "2000",
                "--allow-origin",
                "http://admin.example:9000",
                "--allow-host",
                "agent.internal",
                "--no-auth",
            ],
            cwd=tmp_path,
            env=command_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        page = wait_for_page(process, f"{url}/")
        assert page is not None, f"the server did not answer; stderr:\n{err.read_text()}"
        yield url, port
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def test_toolguard_serve_checks_host_origin_and_size(served: tuple[str, int]) -> None:
    """The real command: DNS-rebinding Hosts get 421, foreign Origins 403, big bodies 413."""
    url, port = served

    def status(method: str, path: str, **options: Any) -> int:
        return httpx.request(method, url + path, timeout=10, **options).status_code

    assert status("GET", "/") == 200
    assert status("GET", "/", headers={"Host": f"localhost:{port}"}) == 200
    assert status("GET", "/", headers={"Host": "agent.internal:443"}) == 200
    assert status("GET", "/", headers={"Host": f"rebound.evil.example:{port}"}) == 421
    assert status("GET", "/", headers={"Host": f"localhost:{port + 1}"}) == 421
    hi = {"json": {"message": "hi"}}
    assert status("POST", "/hitl/chat", **hi) == 200
    assert status("POST", "/hitl/chat", headers={"Origin": url}, **hi) == 200
    assert (
        status("POST", "/hitl/chat", headers={"Origin": "http://admin.example:9000"}, **hi) == 200
    )
    assert status("POST", "/hitl/chat", headers={"Origin": "http://evil.example"}, **hi) == 403
    assert status("POST", "/hitl/chat", content=b'{"message": "hi"}') == 415

    def chunks() -> Iterator[bytes]:
        yield from [b'{"message": "', b"x" * 3_000, b'"}']

    big = httpx.post(url + "/hitl/chat", content=chunks(), headers=JSON_TYPE, timeout=10)
    assert (big.status_code, big.json()) == (413, too_large(2_000))
    assert big.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


# --- the reviewer's id --------------------------------------------------------------------------

UUID_ID = UUID("12345678-1234-5678-1234-567812345678")


class Name(str):
    """A str subclass, as some login libraries return."""


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("maria", "maria"),
        (Name("maria"), "maria"),
        (42, "42"),
        (UUID_ID, "12345678-1234-5678-1234-567812345678"),
        (None, None),
        ("\ud800x", "\ufffdx"),
    ],
    ids=["str", "str-subclass", "int", "uuid", "none", "lone-surrogate"],
)
async def test_reviewer_ids_of_any_usual_type_reach_the_hooks_as_text(
    value: Any, text: str | None
) -> None:
    """A reviewer dependency may return str, int or UUID: the hooks and the audit see text."""
    seen: list[tuple[str, Any]] = []

    def authorize(reviewer: Any, thread: Any, actions: Any) -> bool:
        seen.append(("authorize", reviewer))
        return True

    def access(actor: Any, thread: Any, operation: str) -> bool:
        seen.append((operation, actor))
        return True

    chat = make_chat(Outbox(), authorize=authorize, access=access)
    app = create_app(chat, reviewer=lambda: value)
    async with client_for(app) as client:
        paused = await paused_thread(client)
        thread_id = paused["thread_id"]
        done = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [{"type": "approve"}]}
        )
        thread = (await client.get(f"/hitl/threads/{thread_id}")).json()
        audit = (await client.get(f"/hitl/threads/{thread_id}/audit")).text
    assert done.status_code == 200
    assert seen == [("authorize", text), ("read", text), ("audit", text)]
    assert all(type(actor) in (str, type(None)) for _, actor in seen)
    assert thread["actions"][0]["reviewer"] == text
    assert [json.loads(line)["actor"] for line in audit.splitlines()] == [None, text, text]


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (4.5, "float"),
        (True, "bool"),
        (b"maria", "bytes"),
        (["maria"], "list"),
        (object(), "object"),
    ],
)
async def test_a_reviewer_of_another_type_is_a_clear_500_that_changes_nothing(
    value: Any, kind: str
) -> None:
    """Another type is a bug in the server's setup: a 500 saying so, on every route; no change."""
    outbox = Outbox()
    chat = make_chat(outbox)
    async with client_for(create_app(chat)) as setup:
        paused = await paused_thread(setup)
    thread_id = paused["thread_id"]
    before = await chat.get_thread(thread_id)
    async with client_for(create_app(chat, reviewer=lambda: value)) as client:
        answers = [
            await client.post("/hitl/chat", json={"message": "hi"}),
            await client.post(
                "/hitl/review", json={"thread_id": thread_id, "decisions": [{"type": "approve"}]}
            ),
            await client.post("/hitl/cancel", json={"thread_id": thread_id}),
            await client.get(f"/hitl/threads/{thread_id}"),
            await client.get(f"/hitl/threads/{thread_id}/audit"),
        ]
    detail = (
        "Server misconfigured: the reviewer dependency must return a str, an int, a UUID or"
        f" None, not a {kind}."
    )
    assert [(a.status_code, a.json()) for a in answers] == [(500, {"detail": detail})] * 5
    assert (await chat.get_thread(thread_id), outbox.sent) == (before, [])
    assert await thread_ids(chat) == [thread_id]


async def test_a_reviewer_dependency_may_still_refuse_with_its_own_error() -> None:
    """The reviewer dependency's own HTTPException (e.g. 401) passes through unchanged."""
    app = FastAPI()
    app.include_router(create_router(make_chat(Outbox()), reviewer=login))

    async with client_for(app) as client:
        response = await client.get("/hitl/threads/x")
    assert (response.status_code, response.json()) == (401, {"detail": "Log in first"})
