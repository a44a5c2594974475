"""No redacted secret can be read back from what toolguard publishes about a call.

A tool marked ``requires_approval(redact=["pin"])`` never shows its PIN: the
review, the audit trail and the HTTP views show ``[redacted]``. But every
``requested``, ``decided``, ``vote`` and ``judged`` event also carries a
``digest`` of the call's real arguments, and the thread and review ids that
digest covers are in the same event. Unkeyed, a 4-digit PIN falls to 10,000
guesses in milliseconds. Every digest a chat publishes is therefore keyed
(HMAC-SHA-256) with the store's own secret when no ``signing_key`` is given:
this test tries all 10,000 PINs, in every form of digest toolguard makes,
against every 64-hex-digit string in ``audit_trail()``, ``export_audit()``,
the webhook bodies, ``GET /hitl/threads/{id}/audit`` and ``GET
/hitl/threads/{id}`` over real HTTP, and the gateway's ``GET /hitl/audit``,
on MemoryStore, SQLiteStore and PostgresStore (with
``TOOLGUARD_POSTGRES_DSN``), and finds nothing. It finds the PIN at once in
the unkeyed digest of a bare ``Runner`` (the control: the search works). The
key stays in the store, so a review paused before a restart is approved
after it.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.helpers import WEBHOOK_SECRET, fresh_postgres_table, postgres_dsn, running_receiver
from toolguard import (
    Judge,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    Webhook,
    requires_approval,
)
from toolguard._core.records import call_digest
from toolguard._enforce.judge import call_key
from toolguard._gateway.listen import quiet_server
from toolguard._http.app import create_app
from toolguard._stores.protocol import Store

PIN = "4821"

_PIN_TOKEN = re.compile(rf"(?<![0-9A-Za-z]){PIN}(?![0-9A-Za-z])")


def quotes_pin(text: str) -> bool:
    """Whether ``text`` holds the PIN as a value of its own (not four digits inside a random
    id, a hex digest or a timestamp's microseconds, where they turn up by chance)."""
    return _PIN_TOKEN.search(text) is not None


LIMIT = 30
HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
ASK = json.dumps(
    {"risk": "medium", "user_authorized": True, "outcome": "ask", "rationale": "A door."}
)
ALLOW = json.dumps(
    {"risk": "low", "user_authorized": True, "outcome": "allow", "rationale": "Asked for."}
)
Opener = Callable[[], AbstractAsyncContextManager[Store]]
"""Opens a store on the backend's data (a new store object each time, but the same data)."""


@requires_approval(redact=["pin"])
def unlock(door: str, pin: str) -> str:
    """Unlock a door with its PIN."""
    return f"{door} door open"


@requires_approval(redact=["pin"], approvals=2)
def open_vault(pin: str) -> str:
    """Open the vault (two people must approve)."""
    return "vault open"


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("unlock", {"door": "front"}),
    ("unlock", {"door": "back"}),
    ("open_vault", {}),
]
"""Every call of the tests, without its PIN: what an attacker knows of it."""


def proposes(name: str, call_id: str, **args: Any) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=call_id, name=name, args=args)])


# ---------------------------------------------------------------------- the brute force


def recovered(texts: Iterable[str], thread_ids: set[str], review_ids: set[str]) -> set[str]:
    """Every PIN whose digest, in any form toolguard makes without a key, appears in ``texts``.

    The forms: an approval's digest (``call_digest`` of the call in a thread and a review),
    and a judge's "same call" digest (``call_key`` of the call in a thread or the gateway's
    ledger). Thread and review ids are the ones the published events show.
    """
    published = {match for text in texts for match in HEX64.findall(text)}
    assert published, "nothing to attack: the outputs hold no digest at all"
    scopes = [(t, r) for t in thread_ids for r in {*review_ids, ""}]
    found = set()
    for number in range(10_000):
        pin = f"{number:04d}"
        for name, shown in CALLS:
            args = {**shown, "pin": pin}
            guesses = {call_digest(name, args, thread_id=t, review_id=r) for t, r in scopes}
            guesses |= {call_key(name, args, t, None) for t in thread_ids}
            if guesses & published:
                found.add(pin)
    return found


def ids_in(lines: str) -> tuple[set[str], set[str]]:
    """The thread and review ids the JSON lines of an audit export name."""
    events = [json.loads(line) for line in lines.splitlines()]
    return (
        {e["thread_id"] for e in events},
        {e["review_id"] for e in events if e["review_id"] is not None},
    )


def test_the_brute_force_finds_the_pin_in_an_unkeyed_digest() -> None:
    """The control: a bare Runner without signing_key digests with a plain SHA-256."""
    step = Runner([unlock]).run_sync(
        [{"id": "c1", "name": "unlock", "args": {"door": "front", "pin": PIN}}], thread_id="t1"
    )
    assert step.pending is not None
    digest = step.pending.actions[0].digest
    assert recovered([digest], {"t1"}, {step.pending.review_id}) == {PIN}


# ---------------------------------------------------------------------- the stores


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens a store on one backend's data; every store opened shares it."""
    if request.param == "memory":
        memory = MemoryStore()

        @asynccontextmanager
        async def same() -> AsyncIterator[Store]:
            yield memory

        yield same
    elif request.param == "sqlite":
        path = tmp_path / "toolguard.db"

        @asynccontextmanager
        async def file() -> AsyncIterator[Store]:
            async with SQLiteStore(path) as store:
                yield store

        yield file
    else:
        dsn = postgres_dsn()
        from toolguard.postgres import PostgresStore

        async with fresh_postgres_table() as table:

            @asynccontextmanager
            async def database() -> AsyncIterator[Store]:
                async with PostgresStore(dsn, table=table) as store:
                    yield store

            yield database


@asynccontextmanager
async def served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` served by uvicorn on a free 127.0.0.1 port, in this event loop; a client of it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = quiet_server(app, host="127.0.0.1", port=port)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, no event
                await anyio.sleep(0.01)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                yield http
            server.should_exit = True


# ---------------------------------------------------------------------- a chat


async def test_no_pin_in_the_audit_exports_webhooks_or_http_of_a_chat(opener: Opener) -> None:
    """Asked, auto-approved and quorum calls with a PIN: no digest anywhere gives it away."""
    agent = ScriptedModel(
        [
            proposes("unlock", "c1", door="front", pin=PIN),
            proposes("unlock", "c2", door="back", pin=PIN),
            proposes("open_vault", "c3", pin=PIN),
            "All open.",
        ]
    )
    judge = Judge(ScriptedModel([ASK, ALLOW, ALLOW]), auto_approve=True)
    with anyio.fail_after(LIMIT), running_receiver() as receiver:
        async with opener() as store:
            chat = ReviewedChat(
                agent,
                [unlock, open_vault],
                store=store,
                judge=judge,
                notify=Webhook(receiver.url, secret=WEBHOOK_SECRET),
            )
            first = await chat.send_message("Open the front door, then the back, then the vault.")
            vault = await chat.submit_review([{"type": "approve"}], first.thread_id)
            assert vault.pending_review is not None  # the back door ran on the judge's word
            await chat.submit_review([{"type": "approve"}], vault.thread_id, reviewer="alice")
            done = await chat.submit_review([{"type": "approve"}], vault.thread_id, reviewer="bob")
            assert done.reply == "All open."
            trail = await chat.audit_trail(done.thread_id)
            exported = await chat.export_audit()
            assert await chat.deliver_notifications() == len(receiver.accepted) > 0
            async with served(create_app(chat)) as http:
                audit = await http.get(f"/hitl/threads/{done.thread_id}/audit")
                thread = await http.get(f"/hitl/threads/{done.thread_id}")
    assert (audit.status_code, thread.status_code) == (200, 200)
    kinds = [e.kind for e in trail]
    assert {"requested", "decided", "vote", "judged"} <= set(kinds)
    assert sum(1 for e in trail if e.digest) >= 6  # the digests are there, keyed
    webhooks = [json.dumps(body) for body in receiver.accepted]
    texts = [to_text(trail), exported, *webhooks, audit.text, thread.text]
    assert not any(quotes_pin(text) for text in texts)
    thread_ids, review_ids = ids_in(exported)
    assert recovered(texts, thread_ids, review_ids) == set()


def to_text(events: list[Any]) -> str:
    return "\n".join(event.model_dump_json() for event in events)


@pytest.mark.parametrize("opener", ["sqlite", "postgres"], indirect=True)
async def test_a_review_paused_before_a_restart_is_approved_after_it(opener: Opener) -> None:
    """The key is the store's: a new chat on the same data (a new process) finds it."""
    ran: list[str] = []

    @requires_approval(redact=["pin"])
    def unlock_logged(door: str, pin: str) -> str:
        """Unlock a door with its PIN."""
        ran.append(f"{door} {pin}")
        return "open"

    with anyio.fail_after(LIMIT):
        async with opener() as store:
            chat = ReviewedChat(
                ScriptedModel([proposes("unlock_logged", "c1", door="front", pin=PIN)]),
                [unlock_logged],
                store=store,
            )
            paused = await chat.send_message("Open the front door.")
            key = await store.digest_key()  # type: ignore[attr-defined]
        async with opener() as store:
            assert await store.digest_key() == key  # type: ignore[attr-defined]
            chat = ReviewedChat(ScriptedModel(["Opened."]), [unlock_logged], store=store)
            done = await chat.submit_review(
                [{"type": "approve"}], paused.thread_id, review_id=paused.review_id
            )
    assert (done.reply, ran) == ("Opened.", [f"front {PIN}"])


# ---------------------------------------------------------------------- the gateway


async def test_no_pin_in_the_gateways_audit(opener: Opener) -> None:
    """The gateway's GET /hitl/audit: asked, approved and auto-approved calls with a PIN."""
    mcp = pytest.importorskip("mcp")
    from mcp import Client, types
    from mcp.server import Server

    from toolguard._gateway.proxy import JUDGE_THREAD, MCPProxy
    from toolguard._gateway.routes import build_app

    listed = [
        {
            "name": "unlock",
            "description": "Unlock a door with its PIN.",
            "inputSchema": {
                "type": "object",
                "properties": {"door": {"type": "string"}, "pin": {"type": "string"}},
                "required": ["door", "pin"],
            },
        }
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": listed})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        door = (params.arguments or {}).get("door")
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": door}]})

    async def approve(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    upstream_server = Server("doors", on_list_tools=list_tools, on_call_tool=call_tool)
    judge = Judge(ScriptedModel([ASK, ALLOW]), auto_approve=True)
    with anyio.fail_after(LIMIT):
        async with opener() as store, Client(upstream_server, mode="legacy") as upstream:
            proxy = MCPProxy(
                upstream, listed, store=store, ttl=60, redact={"unlock": ["pin"]}, judge=judge
            )
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(proxy.server(), mode="legacy", elicitation_callback=approve) as (
                    client
                ):
                    asked = await client.call_tool("unlock", {"door": "front", "pin": PIN})
                    judged = await client.call_tool("unlock", {"door": "back", "pin": PIN})
                async with served(build_app(proxy.chat, allow_hosts=["*"])) as http:
                    exported = await http.get("/hitl/audit")
                tasks.cancel_scope.cancel()
            assert mcp is not None
    assert (asked.is_error, judged.is_error) == (False, False)
    assert exported.status_code == 200
    events = [json.loads(line) for line in exported.text.splitlines()]
    assert {"requested", "decided", "judged"} <= {e["kind"] for e in events}
    assert any(e["thread_id"] == JUDGE_THREAD and e["digest"] for e in events)
    assert not quotes_pin(exported.text)
    thread_ids, review_ids = ids_in(exported.text)
    assert recovered([exported.text], thread_ids, review_ids) == set()
