"""Shared test helpers: tools, scripted models, stores, servers and the approval page's harness.

Test modules import what they share from here, never from one another. Optional dependencies
(uvicorn, Playwright, psycopg) are imported where they are used, so importing this module needs
only toolguard's core and pytest; a test module that needs one skips itself first
(``pytest.importorskip``). The scripted OpenAI-compatible server lives in
``tests/openai_server.py``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import toolguard
from toolguard import (
    ApproveDecision,
    EditDecision,
    EditedAction,
    Message,
    ModelError,
    ModelResponse,
    PendingTurn,
    RejectDecision,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    ToolResult,
)
from toolguard._core.reveal import scan
from toolguard._stores.protocol import ThreadState
from toolguard.records import Action

if TYPE_CHECKING:
    import httpx
    from playwright.sync_api import Browser, Locator, Page
    from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: the directory holding ``toolguard/`` and ``tests/``."""

Log = list[tuple[str, dict[str, Any]]]
"""What logged tools ran: ``(tool name, arguments)`` in order."""


# --- thread states (the store contract) ---------------------------------------------------------

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def secret_spellings(secret: str) -> set[str]:
    """``secret`` as any text may carry it: raw, JSON-escaped (with and without ASCII escapes),
    ``repr()`` and ``ascii()``, and each of those again inside a JSON string."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
    }
    return forms | {json.dumps(form)[1:-1] for form in forms}


def user_message(text: str) -> dict[str, Any]:
    """An OpenAI-format user message."""
    return {"role": "user", "content": text}


def conflict_text(thread_id: str, expected: int | None, found: int | None) -> str:
    """The exact conflict text of every store."""
    return (
        f"Thread {thread_id!r} was changed by someone else"
        f" (expected version {expected}, found {found})"
    )


def full_state(thread_id: str = "full") -> ThreadState:
    """A state with a paused turn, decisions and actions in every shape."""
    call_send = ToolCall(id="call_1", name="send_email", args={"to": "a@example.com", "n": [1, 2]})
    call_delete = ToolCall(id="call_2", name="delete_file", args={"path": "notes/x.txt"})
    call_bad = ToolCall(id="call_3", name="book_room", arguments_error="not JSON: {")
    call_read = ToolCall(id="call_4", name="read_file", args={})
    read_result = ToolResult(
        call_id="call_4", name="read_file", status="success", content="hello", value={"k": [1.5]}
    )
    bad_result = ToolResult(
        call_id="call_3", name="book_room", status="error", content="bad arguments"
    )
    send_action = Action(
        id="a1",
        call_id="call_1",
        name="send_email",
        args={"to": "a@example.com", "n": [1, 2]},
        description="Tool `send_email` menunggu persetujuan",
        status="approved",
        decision=ApproveDecision(),
        requested_at=T0,
        decided_at=T0,
    )
    delete_action = Action(
        id="a2",
        call_id="call_2",
        name="delete_file",
        args={"path": "notes/x.txt"},
        description="Tool `delete_file` menunggu persetujuan",
        status="rejected",
        decision=RejectDecision(message="no"),
        result=ToolResult(call_id="call_2", name="delete_file", status="error", content="no"),
        requested_at=T0,
        decided_at=T0,
        finished_at=T0,
    )
    old_action = Action(
        id="a0",
        call_id="call_0",
        name="move_file",
        args={"src": "a", "dst": "b"},
        description="Tool `move_file` menunggu persetujuan",
        status="executed",
        decision=EditDecision(
            edited_action=EditedAction(name="move_file", args={"src": "a", "dst": "c"})
        ),
        result=ToolResult(
            call_id="call_0", name="move_file", status="success", content="moved", value=None
        ),
        requested_at=T0,
        decided_at=T0,
        finished_at=T0,
    )
    return ThreadState(
        thread_id=thread_id,
        version=7,
        status="running",
        messages=[
            user_message("Mail Alice, delete x"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to": "a@example.com"}'},
                    }
                ],
            },
        ],
        pending=PendingTurn(
            review_id="r1",
            calls=[call_send, call_delete, call_bad, call_read],
            results=[bad_result, read_result],
            actions=[send_action, delete_action],
            replaced_calls=[call_delete],
        ),
        decisions=[
            ApproveDecision(),
            RejectDecision(message="no"),
            EditDecision(edited_action=EditedAction(name="x", args={"é": "ü", "n": None})),
            RejectDecision(),
        ],
        actions=[old_action, send_action, delete_action],
        created_at=T0,
        updated_at=T0,
    )


def expected(state: ThreadState, stored: ThreadState, version: int) -> ThreadState:
    """``state`` with the version and updated_at a save gives it."""
    return state.model_copy(update={"version": version, "updated_at": stored.updated_at})


# --- PostgreSQL ---------------------------------------------------------------------------------

POSTGRES_DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
"""The server the PostgresStore tests use (``scripts/start-postgres`` prints a DSN)."""
NO_POSTGRES = "set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres prints one)"


def postgres_dsn() -> str:
    """The PostgreSQL DSN; skips the test without one, and fails it in CI, which runs them."""
    if POSTGRES_DSN:
        return POSTGRES_DSN
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI runs the PostgreSQL tests: {NO_POSTGRES}")
    pytest.skip(NO_POSTGRES)


async def admin_execute(query: str | sql.Composed, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on a separate autocommit connection; its rows (if any)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(postgres_dsn(), autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description is not None else []


@contextlib.asynccontextmanager
async def fresh_postgres_table() -> AsyncIterator[str]:
    """A table name no test used before, dropped (with the store's side tables) afterwards."""
    from psycopg import sql

    name = f"tg_test_{uuid.uuid4().hex[:16]}"
    try:
        yield name
    finally:
        tables = await admin_execute(
            "SELECT tablename FROM pg_tables WHERE starts_with(tablename, %s)", (name,)
        )
        for (table,) in tables:
            await admin_execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


# --- logged tools and scripted turns (the chat and HTTP tests) ---------------------------------


def make_mail_tools(log: Log, *, with_delete_file: bool = False) -> list[Callable[..., Any]]:
    """send_email (guarded by the classifier) and search (not), logging each run; with
    ``with_delete_file`` also delete_file (guarded; it refuses to delete ``/``)."""

    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        log.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"Email sent to {to}"

    def search(query: str) -> list[str]:
        """Search the documents.

        Args:
            query: words to look for.
        """
        log.append(("search", {"query": query}))
        return [f"result for {query}"]

    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: the file to delete.
        """
        log.append(("delete_file", {"path": path}))
        if path == "/":
            msg = "refusing to delete /"
            raise RuntimeError(msg)
        return f"deleted {path}"

    return [send_email, search, delete_file] if with_delete_file else [send_email, search]


def calls(*tool_calls: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    """A model turn proposing ``(call_id, name, args)`` tool calls."""
    return ModelResponse(tool_calls=[ToolCall(id=i, name=n, args=a) for i, n, a in tool_calls])


ASK_ALICE = "Tell Alice the meeting is at 10."
ALICE_MAIL = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
BOB_MEETING_MAIL = {"to": "bob@example.com", "subject": "Meeting", "body": "The meeting is at 11."}
APPROVE = {"type": "approve"}
ONE_MAIL = calls(("call_1", "send_email", ALICE_MAIL))
TWO_MAILS = calls(("call_1", "send_email", ALICE_MAIL), ("call_2", "send_email", BOB_MEETING_MAIL))
LANGS = pytest.mark.parametrize("lang", ["en", "id"])
"""Run a test in English and in Indonesian (with the ``lang_env`` fixture of its module)."""


def make_mail_chat(script: Sequence[Any], log: Log, **options: Any) -> ReviewedChat:
    """A chat over the logged mail tools with a scripted model (MemoryStore unless given)."""
    return ReviewedChat(ScriptedModel(script), make_mail_tools(log), **options)


EMAIL = {"to": "alice@example.com", "body": "Hi"}


class MailingModel:
    """Proposes send_email to Alice for a user message; answers a tool result with text."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        self.calls += 1
        last = messages[-1]
        if last["role"] == "tool":
            return ModelResponse(text=f"Done: {last['content']}")
        return ModelResponse(
            tool_calls=[ToolCall(id=f"c{self.calls}", name="send_email", args=EMAIL)]
        )


def make_mailing_chat(store: Any, runs: list[str]) -> ReviewedChat:
    """A MailingModel chat whose guarded async send_email appends each recipient to ``runs``."""

    @toolguard.requires_approval
    async def send_email(to: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient.
            body: the text.
        """
        runs.append(to)
        return f"sent to {to}"

    return ReviewedChat(MailingModel(), [send_email], store=store)


# --- HTTP servers, clients and processes --------------------------------------------------------


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yield its base URL."""
    import uvicorn

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


@contextlib.asynccontextmanager
async def client_for(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client that talks HTTP to ``app`` in this event loop."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as client:
        yield client


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


MODEL_ENV_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOOLGUARD_MODEL")
"""The variables that choose `toolguard serve`'s model."""


@functools.cache
def test_runtime_dir() -> str:
    """A folder of the tests' own for the servers' runtime files (``TOOLGUARD_RUNTIME_DIR``),
    so a server a test starts never lists itself in the user's ``toolguard link``."""
    return tempfile.mkdtemp(prefix="toolguard-runtime-")


def command_env() -> dict[str, str]:
    """The environment for a `toolguard` subprocess: no model variables, the checkout importable,
    the runtime files in :func:`test_runtime_dir`."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TOOLGUARD_RUNTIME_DIR"] = test_runtime_dir()
    return env


def run_toolguard(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``python -m toolguard ARGS`` run to its end (at most 60 s),
    stdin closed, in :func:`command_env` plus ``env``."""
    done = subprocess.run(
        [sys.executable, "-m", "toolguard", *args],
        cwd=cwd,
        env={**command_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def offline_env(**extra: str) -> dict[str, str]:
    """The environment without any model configuration or language, plus ``extra``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (*MODEL_ENV_VARS, "TOOLGUARD_LANG")
    }
    env.update(PYTHONIOENCODING="utf-8", NO_PROXY="127.0.0.1,localhost", **extra)
    return env


SIGN_IN_LINE = re.compile(
    r"toolguard (?P<command>serve|mcp-proxy): sign in on the approval page with this link \(it"
    r" works once; toolguard link prints a new one\): (?P<link>(?P<page>http://\S+/)hitl/sign-in"
    r"\?code=(?P<code>[A-Za-z0-9_-]{43}))"
)
"""The start-up line of the sign-in link (a code of ``secrets.token_urlsafe(32)``)."""


def sign_in_link(line: str, command: str, page: str) -> str:
    """The link of ``command``'s sign-in ``line`` for ``page``; the whole line is checked."""
    found = SIGN_IN_LINE.fullmatch(line.rstrip("\n"))
    assert found is not None, line
    assert (found["command"], found["page"]) == (command, page)
    return found["link"]


@contextlib.contextmanager
def signed_in_client(link: str) -> Iterator[httpx.Client]:
    """An httpx client that opened the sign-in ``link``: it holds the session cookie."""
    import httpx

    with httpx.Client(timeout=10) as client:
        opened = client.get(link)
        assert (opened.status_code, opened.headers.get("location")) == (303, "/"), opened.text
        yield client


def wait_for_page(process: subprocess.Popen[bytes], url: str) -> httpx.Response | None:
    """GET ``url`` until the server answers, the process ends or 30 s pass (a bound)."""
    import httpx

    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            return httpx.get(url, timeout=2)
        time.sleep(0.05)
    return None


# --- the HTTP guards' answers ---------------------------------------------------------------------

CROSS_SITE = {
    "detail": (
        "Cross-site request refused: state-changing requests must come from this server's own"
        " pages, from clients that send no Origin header, or from an origin allowed with"
        " allowed_origins (--allow-origin of toolguard serve or mcp-proxy)."
    )
}
MISDIRECTED = {
    "detail": (
        "Misdirected request: this server does not answer to the host in the Host header"
        " (allow it with allowed_hosts, or --allow-host of toolguard serve or mcp-proxy)."
    )
}


def too_large(limit: int) -> dict[str, str]:
    """The 413 body for ``limit``."""
    return {"detail": f"The request body is larger than {limit} bytes."}


def security_header_values() -> dict[str, str]:
    """The security headers every answer carries, with their values."""
    from toolguard.http import CONTENT_SECURITY_POLICY

    return {
        "content-security-policy": CONTENT_SECURITY_POLICY,
        "x-content-type-options": "nosniff",
        "x-frame-options": "DENY",
        "referrer-policy": "no-referrer",
        "cross-origin-resource-policy": "same-origin",
        "cache-control": "no-store",
    }


def security_headers(response: httpx.Response) -> dict[str, list[str]]:
    """Every value of each security header (a header sent twice shows up twice)."""
    return {name: response.headers.get_list(name) for name in security_header_values()}


def security_headers_once() -> dict[str, list[str]]:
    """What :func:`security_headers` gives for an answer carrying each header exactly once."""
    return {name: [value] for name, value in security_header_values().items()}


# --- webhooks -----------------------------------------------------------------------------------

WEBHOOK_SECRET = "s3cret"  # noqa: S105 - a test secret


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1 that checks every signature."""

    url: str
    status: list[int] = field(default_factory=lambda: [200])
    received: list[dict[str, Any]] = field(default_factory=list)
    got: threading.Event = field(default_factory=threading.Event)
    """Every request: its body, whether the signature held, and the answer given."""

    @property
    def accepted(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.received if r["answer"] == 200]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A running Receiver answering 200 (set ``status[0]`` to answer otherwise)."""
    with running_receiver() as box:
        yield box


@contextlib.contextmanager
def running_receiver() -> Iterator[Receiver]:
    """A Receiver on a free 127.0.0.1 port while the block runs (for wider-scoped fixtures)."""
    box = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            key = WEBHOOK_SECRET.encode()
            expected = "sha256=" + hmac.new(key, raw, hashlib.sha256).hexdigest()
            signature = self.headers.get("X-Toolguard-Signature", "")
            answer = box.status[0]
            box.received.append(
                {
                    "body": json.loads(raw),
                    "signed": hmac.compare_digest(signature, expected),
                    "type": self.headers.get("Content-Type"),
                    "answer": answer,
                }
            )
            box.got.set()
            self.send_response(answer)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --- the approval page in headless Chromium -------------------------------------------------------

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
ARTIFACTS = ROOT / "test-artifacts"
NEEDS_CHROMIUM = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)
"""The page tests' ``pytestmark``: they drive Debian's Chromium, never a downloaded one."""

MODEL_DOWN = "The model service is down"
LONG_BODY = (
    "Hi Bob,\nShall we have lunch on Friday at noon? "
    + "The usual place by the river, the one with the green door. " * 5
).strip()
BOB_MAIL = {"to": "bob@example.com", "subject": "Lunch", "body": LONG_BODY}
EVENT = {"title": "Team lunch", "day": "Friday"}
ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


class Outbox:
    """What the page's tools really did, in order."""

    def __init__(self) -> None:
        self.done: list[tuple[str, dict[str, Any]]] = []


def make_page_tools(outbox: Outbox) -> list[Any]:
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


def page_call(messages: Sequence[Message], name: str, args: dict[str, Any]) -> ToolCall:
    """A tool call whose id is stable within a thread (it counts the messages)."""
    return ToolCall(id=f"call_{len(messages)}_{name}", name=name, args=args)


def react(messages: Sequence[Message]) -> ModelResponse:
    """The page's scripted model: mail and/or book on request, retry with a rejection's address."""
    last = messages[-1]
    if last["role"] == "user":
        text = str(last["content"]).lower()
        if "fail" in text:
            raise ModelError(MODEL_DOWN)
        proposed = []
        if "mail" in text:
            proposed.append(page_call(messages, "send_email", BOB_MAIL))
        if "book" in text:
            proposed.append(page_call(messages, "create_event", EVENT))
        if proposed:
            return ModelResponse(tool_calls=proposed)
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
                tool_calls=[page_call(messages, "send_email", mail)],
            )
    return ModelResponse(
        text="Done. " + " ".join(f"[{r['status']}] {r['content']}" for r in results)
    )


def make_page_chat(outbox: Outbox, **options: Any) -> ReviewedChat:
    """A chat with the reacting scripted model and the two guarded page tools."""
    return ReviewedChat(ScriptedModel([react], repeat=True), make_page_tools(outbox), **options)


class Server:
    """The running app: its base URL and what its tools did."""

    def __init__(self, url: str, outbox: Outbox) -> None:
        self.url = url
        self.outbox = outbox


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """The FastAPI app with the page, served by uvicorn on a free 127.0.0.1 port."""
    from toolguard.http import create_app

    outbox = Outbox()
    with serve_in_thread(create_app(make_page_chat(outbox))) as url:
        yield Server(url, outbox)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright (never ``playwright install``)."""
    from playwright.sync_api import Error, expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        try:
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=45_000
            )
        except Error:  # a start that hangs on a loaded machine: one more, bounded, try
            chromium = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, timeout=45_000
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


def pretty(value: Any) -> str:
    """JSON as the page prints it (``JSON.stringify(value, null, 2)``)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def send(page: Page, text: str) -> None:
    """Type a message into the chat box and press Send."""
    page.get_by_test_id("chat-input").fill(text)
    page.get_by_test_id("send").click()


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


def screenshot(page: Page, name: str) -> None:
    """Save the review area to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("review").screenshot(path=str(ARTIFACTS / f"{name}.png"))


def expect_card(page: Page, index: int, name: str, args: dict[str, Any]) -> None:
    """Card ``index`` shows the tool, the fixed description and the full pretty JSON args."""
    from playwright.sync_api import expect

    card = page.get_by_test_id("approval-card").nth(index)
    expect(card.get_by_test_id("tool-name")).to_have_text(name)
    expect(card.get_by_test_id("action-description")).to_have_text(
        f"Tool {name} is awaiting approval"  # the backticks render as a <code> element
    )
    expect(card.get_by_test_id("action-description").locator("code")).to_have_text(name)
    expect(card.get_by_test_id("action-args")).to_be_visible()
    assert card.get_by_test_id("action-args").text_content() == pretty(args)


# --- the terminal demo and hostile text -----------------------------------------------------------

DEMO_CARD_ALICE = [
    "== Approval 1/1: send_email ==",
    "Tool `send_email` is awaiting approval",
    "Why it asks: the word 'send' is an approval verb (messaging and publishing)",
    "Arguments:",
    "{",
    '  "to": "alice@example.com",',
    '  "subject": "The meeting moved to 11",',
    '  "body": "Hi Alice, the meeting moved to 11."',
    "}",
]
"""The demo's approval card for its mail to Alice."""
DEMO_SENT_ALICE = (
    '[executed] send_email: {"id": "sent-1", "status": "sent", "to": "alice@example.com",'
    ' "subject": "The meeting moved to 11"}'
)
"""The demo's line for that mail once sent."""


def nothing_hidden(text: str) -> bool:
    """``text`` can be written as UTF-8 and holds no control, bidi or invisible character
    (line feeds aside)."""
    text.encode()
    return scan(text, letters=False) == {}


def checkpoints_done(store: Any, timeout: float) -> bool:
    """Wait until a SQLiteStore has no background checkpoint asked for or running."""
    with store._checkpoint_lock:
        return bool(
            store._checkpoint_lock.wait_for(
                lambda: not (store._checkpoint_wanted or store._checkpoint_running), timeout
            )
        )


# --- OpenTelemetry -------------------------------------------------------------------------------


def ours(exporter: Any) -> list[Any]:
    """The finished spans toolguard itself recorded (its instrumentation scope), in order."""
    return [
        s
        for s in exporter.get_finished_spans()
        if s.instrumentation_scope is not None and s.instrumentation_scope.name == "toolguard"
    ]


def span_named(exporter: Any, name: str) -> Any:
    """The one finished span called ``name`` (fails when there are none or several)."""
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def tool_call_attributes(
    name: str, call_id: str, *, description: str | None = None, **more: Any
) -> dict[str, Any]:
    """An ``execute_tool`` span's whole attributes: the GenAI ones and ``toolguard.*`` from
    ``more`` (``review__wait_ms`` is ``toolguard.review.wait_ms``); a call that did not run
    has its outcome as ``error.type`` (a failed one gives its own)."""
    toolguard = {f"toolguard.{k.replace('__', '.')}": v for k, v in more.items()}
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        **toolguard,
    }
    if description is not None:
        attributes["gen_ai.tool.description"] = description
    if more.get("outcome") not in {None, "executed", "failed"}:
        attributes["error.type"] = more["outcome"]
    return attributes


MCP_SERVER_TABLE = """\
tool          approval  rule        reason
------------  --------  ----------  ---------------------------------------------------------------------------------------------------------------
read_file     no        annotation  the server marks it readOnlyHint: true and the word 'read' is a read verb
list_files    required  annotation  the server does not mark it readOnlyHint: true (MCP tools are destructive by default)
archive_file  required  verb        the word 'archive' is an approval verb (data)
purge_cache   required  verb        the word 'purge' is an approval verb (data); the server's readOnlyHint: true cannot exempt it
delete_file   required  verb        the word 'delete' is an approval verb (data); the server's readOnlyHint: true cannot exempt it
book_room     required  verb        the word 'book' is an approval verb (commerce, or scheduling); the server's readOnlyHint: true cannot exempt it
fail_always   no        annotation  the server marks it readOnlyHint: true and the name holds no known verb
stats         no        annotation  the server marks it readOnlyHint: true and the word 'stats' names information and the name holds no verb"""  # noqa: E501
"""How the default classifier reads the tools of tests/integrations/mcp_server.py, as a table."""


def serious_axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is (axe-core bundled by
    axe-playwright-python of the dev extra: no network)."""
    import axe_playwright_python

    axe = Path(axe_playwright_python.__file__).parent / "axe.min.js"
    page.evaluate(axe.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .filter((v) => v.impact === 'serious' || v.impact === 'critical')
            .map((v) => ({id: v.id, impact: v.impact,
                          targets: v.nodes.map((n) => n.target.join(' '))}))"""
    )
    return found
