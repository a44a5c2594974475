"""``toolguard mcp-proxy`` end to end: a real MCP client, the proxy and a real upstream, all stdio.

The proxy runs as ``python -m toolguard mcp-proxy`` in a subprocess in front of
``tests/integrations/mcp_proxy_upstream.py``, whose tools record each real
execution; the approval page listens on a free 127.0.0.1 port. Every wait is
bounded.

Starting a proxy (and its upstream) takes seconds, so the tests that only make
calls share one proxy process per client kind for the whole module (legacy
elicitation, 2026-07-28 elicitation, no elicitation); each such test sees only
the executions of its own calls. A test that needs its own options (a ttl, deny
rules, webhooks, another upstream) or its own process (killed, refused to start)
starts one.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from tests.helpers import WEBHOOK_SECRET, Receiver, receiver  # noqa: E402, F401 - a fixture
from toolguard import REJECTED_BY_USER_MESSAGE  # noqa: E402
from toolguard._gateway.question import APPROVAL_SCHEMA, visible  # noqa: E402

from .mcp_proxy_upstream import TOOLS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
LIMIT = 30  # seconds: the bound of every wait
pytestmark = pytest.mark.asyncio(loop_scope="module")  # the shared proxies live in this loop
EXPIRED = "The review of this action expired before anyone decided. It was not executed."

DELETE_MESSAGE = """\
Approve the tool call `delete_file`?
Tool description: Delete a file (claims read-only).
Arguments (JSON):
{
  "path": "d"
}"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Setup:
    """Paths and the port of one proxy under test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.log = tmp_path / "executions.jsonl"
        self.db = tmp_path / "proxy.sqlite3"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "TOOLGUARD_MCP_LOG": str(self.log),
            "TOOLGUARD_PROXY_PROBE": "the proxy's own environment",
        }

    def params(
        self,
        ttl: float = 60,
        pidfile: Path | None = None,
        upstream_url: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> StdioServerParameters:
        proxy = [
            "-m",
            "toolguard",
            "mcp-proxy",
            "--db",
            str(self.db),
            "--port",
            str(self.port),
            "--ttl",
            str(ttl),
            "--no-auth",  # the tests' own HTTP clients decide on the page
            *extra,
            *(["--upstream-url", upstream_url] if upstream_url else ["--", *UPSTREAM]),
        ]
        if pidfile is None:
            return StdioServerParameters(
                command=sys.executable, args=proxy, env=self.env(), cwd=str(ROOT)
            )
        script = f'echo $$ > "{pidfile}"; exec "$0" "$@"'
        return StdioServerParameters(
            command="/bin/sh",
            args=["-c", script, sys.executable, *proxy],
            env=self.env(),
            cwd=str(ROOT),
        )

    def executions(self, since: int = 0) -> list[dict[str, Any]]:
        """What the upstream ran, in order (from the ``since``-th execution on)."""
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines[since:]]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


class Asker:
    """An elicitation callback answering from a script and recording what it was shown."""

    def __init__(self, answer: types.ElicitResult) -> None:
        self.answer = answer
        self.asked: list[types.ElicitRequestFormParams] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return self.answer


class SharedProxy:
    """One proxy process and its client, kept open for every test of the module.

    pytest-asyncio sets a fixture up and tears it down in two different tasks,
    while an MCP client must be closed by the task that opened it: a task of
    its own (:meth:`hold`) keeps the client open until :attr:`stop` is set.
    """

    def __init__(
        self, setup: Setup, mode: str, *, elicit: bool, ttl: float, extra: tuple[str, ...]
    ) -> None:
        self.setup = setup
        self.mode = mode
        self.elicit = elicit
        self.ttl = ttl
        self.extra = extra
        self.asker = Asker(types.ElicitResult(action="decline"))
        self.client: Client | None = None
        self.ready = anyio.Event()
        self.stop = anyio.Event()

    async def ask(self, ctx: Any, params: Any) -> types.ElicitResult:
        """The elicitation callback: the current test's asker answers."""
        return await self.asker(ctx, params)

    async def hold(self) -> None:
        try:
            async with Client(
                self.setup.params(ttl=self.ttl, extra=self.extra),
                mode=self.mode,
                elicitation_callback=self.ask if self.elicit else None,
            ) as client:
                self.client = client
                self.ready.set()
                await self.stop.wait()
        finally:
            self.ready.set()  # a proxy that failed to start does not keep the fixture waiting


class Proxied:
    """One test's view of a shared proxy: its client, its asker, its own executions."""

    def __init__(self, shared: SharedProxy) -> None:
        assert shared.client is not None, "the shared proxy did not start"
        self.shared = shared
        self.client: Client = shared.client
        self.url = shared.setup.url
        self.port = shared.setup.port
        self.since = len(shared.setup.executions())
        shared.asker = Asker(types.ElicitResult(action="decline"))

    def answer(self, result: types.ElicitResult) -> Asker:
        """From now on the client's user answers ``result`` to every question."""
        self.shared.asker = Asker(result)
        return self.shared.asker

    def executions(self) -> list[dict[str, Any]]:
        """What the upstream ran since this test started."""
        return self.shared.setup.executions(self.since)


SHARED: dict[str, tuple[str, bool, float, tuple[str, ...]]] = {
    # name: the client's protocol, whether it can be asked (elicitation), --ttl, other options
    "legacy": ("legacy", True, 60, ()),
    "2026-07-28": ("2026-07-28", True, 60, ()),
    "plain": ("legacy", False, 60, ("--allow-host", "gateway.lan")),
    "brief": ("legacy", False, 1, ()),
}
"""The module's shared proxies."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_proxies(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[dict[str, SharedProxy]]:
    """Every shared proxy, started together and stopped together (each takes seconds)."""
    proxies = {
        name: SharedProxy(
            Setup(tmp_path_factory.mktemp(name)), mode, elicit=elicit, ttl=ttl, extra=extra
        )
        for name, (mode, elicit, ttl, extra) in SHARED.items()
    }
    loop = asyncio.get_running_loop()
    holders = [loop.create_task(shared.hold()) for shared in proxies.values()]
    try:
        with anyio.fail_after(LIMIT):
            for shared in proxies.values():
                await shared.ready.wait()
        yield proxies
    finally:
        for shared in proxies.values():
            shared.stop.set()
        with anyio.fail_after(LIMIT):
            for holder in holders:
                await holder


@pytest.fixture
def mode() -> str:
    """The client's protocol: ``legacy`` unless a test is parametrized over it."""
    return "legacy"


@pytest.fixture
def proxy(shared_proxies: dict[str, SharedProxy], mode: str) -> Proxied:
    """The shared proxy of ``mode``, its user declining until the test says otherwise."""
    return Proxied(shared_proxies[mode])


@pytest.fixture
def plain(shared_proxies: dict[str, SharedProxy]) -> Proxied:
    """The shared proxy whose client cannot be asked: only the approval page decides."""
    return Proxied(shared_proxies["plain"])


@pytest.fixture
def brief(shared_proxies: dict[str, SharedProxy]) -> Proxied:
    """The shared proxy whose calls wait one second for a decision (``--ttl 1``)."""
    return Proxied(shared_proxies["brief"])


@asynccontextmanager
async def proxied(
    setup: Setup, *, mode: str = "legacy", asker: Asker | None = None, **kw: Any
) -> AsyncIterator[Client]:
    with anyio.fail_after(LIMIT):
        async with Client(setup.params(**kw), mode=mode, elicitation_callback=asker) as client:
            yield client


def text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def pending_reviews(url: str) -> list[dict[str, Any]]:
    """``GET /hitl/reviews`` of the approval page at ``url`` until it lists something (bounded)."""
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        for _ in range(LIMIT * 20):
            try:
                answer = await http.get("/hitl/reviews")
            except httpx.TransportError:
                await anyio.sleep(0.05)
                continue
            reviews: list[dict[str, Any]] = answer.json()["reviews"]
            if reviews:
                return reviews
            await anyio.sleep(0.05)
    pytest.fail("no review appeared")


# ---------------------------------------------------------------------------- listing, read-only


async def test_the_listing_is_the_upstreams_unchanged(plain: Proxied) -> None:
    setup = plain.shared.setup
    direct = StdioServerParameters(
        command=UPSTREAM[0], args=UPSTREAM[1:], env=setup.env(), cwd=str(ROOT)
    )
    with anyio.fail_after(LIMIT):
        async with Client(direct, mode="legacy") as client:
            upstream = (await client.list_tools()).tools
        listed = (await plain.client.list_tools()).tools
    assert [t.model_dump(by_alias=True, exclude_none=True) for t in listed] == [
        t.model_dump(by_alias=True, exclude_none=True) for t in upstream
    ]
    assert [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed] == TOOLS
    assert plain.executions() == []


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_read_only_tools_are_forwarded_at_once_and_faithfully(proxy: Proxied) -> None:
    asker = proxy.answer(types.ElicitResult(action="decline"))
    client = proxy.client
    with anyio.fail_after(LIMIT):
        read = await client.call_tool("read_file", {"path": "a"})
        stats = await client.call_tool("stats", {})
        failed = await client.call_tool("fail_always", {"path": "x"})
        env = await client.call_tool("show_env", {})
    assert (text(read), read.is_error) == (["read_file done", '{"path": "a"}'], False)
    assert (stats.structured_content, text(stats)) == (
        {"files": 3, "bytes": 42},
        ['{"files": 3, "bytes": 42}'],
    )
    assert (text(failed), failed.is_error) == (["no such file: x"], True)
    assert text(env) == ["the proxy's own environment"]
    assert asker.asked == []
    assert proxy.executions() == [
        {"tool": "read_file", "args": {"path": "a"}},
        {"tool": "stats", "args": {}},
        {"tool": "fail_always", "args": {"path": "x"}},
        {"tool": "show_env", "args": {}},
    ]


# ---------------------------------------------------------------------------- elicitation


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_approve_by_elicitation_runs_the_tool_once(proxy: Proxied) -> None:
    asker = proxy.answer(types.ElicitResult(action="accept", content={"decision": "approve"}))
    with anyio.fail_after(LIMIT):
        result = await proxy.client.call_tool("delete_file", {"path": "d"})
    assert (text(result), result.is_error) == (["delete_file done", '{"path": "d"}'], False)
    assert [(p.message, p.requested_schema) for p in asker.asked] == [
        (DELETE_MESSAGE, APPROVAL_SCHEMA)
    ]
    assert proxy.executions() == [{"tool": "delete_file", "args": {"path": "d"}}]


async def test_webhooks_from_the_gateway_are_signed(
    setup: Setup,
    receiver: Receiver,  # noqa: F811 - the fixture
) -> None:
    """--notify-url/--notify-secret: the receiver gets requested then decided, each signed."""
    asker = Asker(types.ElicitResult(action="accept", content={"decision": "approve"}))
    hook = ("--notify-url", receiver.url, "--notify-secret", WEBHOOK_SECRET)
    async with proxied(setup, asker=asker, extra=hook) as client:
        result = await client.call_tool("delete_file", {"path": "d"})
        with anyio.fail_after(LIMIT):
            while len(receiver.received) < 2:  # noqa: ASYNC110 - the receiver is a thread
                await anyio.sleep(0.05)
    assert result.is_error is False
    assert [(r["body"]["event"], r["signed"]) for r in receiver.received] == [
        ("review.requested", True),
        ("review.decided", True),
    ]
    assert setup.executions() == [{"tool": "delete_file", "args": {"path": "d"}}]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"decision": "reject", "message": "not that file"}, "not that file"),
        ({"decision": "reject"}, REJECTED_BY_USER_MESSAGE),
    ],
)
async def test_reject_by_elicitation_runs_nothing(
    proxy: Proxied, content: dict[str, Any], expected: str
) -> None:
    asker = proxy.answer(types.ElicitResult(action="accept", content=content))
    with anyio.fail_after(LIMIT):
        result = await proxy.client.call_tool("archive_file", {"path": "z"})
    assert (text(result), result.is_error) == ([expected], True)
    assert len(asker.asked) == 1
    assert proxy.executions() == []


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (
            "decline",
            (
                "The review of this action was cancelled: The user declined to approve the call"
                " to `delete_file`. It was not executed."
            ),
        ),
        (
            "cancel",
            (
                "The review of this action was cancelled: The user cancelled the approval of the"
                " call to `delete_file`. It was not executed."
            ),
        ),
    ],
)
async def test_decline_or_cancel_by_elicitation_runs_nothing(
    proxy: Proxied, action: str, expected: str
) -> None:
    proxy.answer(types.ElicitResult(action=action))  # type: ignore[arg-type]
    with anyio.fail_after(LIMIT):
        result = await proxy.client.call_tool("delete_file", {"path": "d"})
    assert (text(result), result.is_error) == ([expected], True)
    assert proxy.executions() == []


async def test_invisible_characters_are_shown_escaped(proxy: Proxied) -> None:
    asker = proxy.answer(types.ElicitResult(action="decline"))
    with anyio.fail_after(LIMIT):
        await proxy.client.call_tool("delete_file", {"path": "a\u202eexe.txt\u200b"})
    assert asker.asked[0].message.splitlines()[-2] == '  "path": "a\\u202eexe.txt\\u200b"'
    assert visible("ok\n\x1b[31m\u00a0") == "ok\n\\u001b[31m\\u00a0"
    assert proxy.executions() == []


@pytest.mark.parametrize("mode", ["2026-07-28"])
async def test_the_input_required_state_is_single_use_and_bound_to_the_call(
    proxy: Proxied,
) -> None:
    """2026-07-28: the echoed requestState is only a key; a forged or reused answer runs nothing."""
    approve = {
        "toolguard_approval": types.ElicitResult(action="accept", content={"decision": "approve"})
    }
    unused = proxy.answer(types.ElicitResult(action="decline"))  # the client can be asked
    with anyio.fail_after(LIMIT):
        session = proxy.client.session
        first = await session.call_tool("delete_file", {"path": "d"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert list(first.input_requests or {}) == ["toolguard_approval"]
        state = first.request_state
        other = await session.call_tool(
            "delete_file",
            {"path": "/etc"},
            allow_input_required=True,
            input_responses=approve,  # type: ignore[arg-type]
            request_state=state,
        )
        forged = await session.call_tool(
            "delete_file",
            {"path": "d"},
            allow_input_required=True,
            input_responses=approve,  # type: ignore[arg-type]
            request_state="forged",
        )
        assert proxy.executions() == []
        done = await session.call_tool(
            "delete_file",
            {"path": "d"},
            allow_input_required=True,
            input_responses=approve,  # type: ignore[arg-type]
            request_state=state,
        )
        again = await session.call_tool(
            "delete_file",
            {"path": "d"},
            allow_input_required=True,
            input_responses=approve,  # type: ignore[arg-type]
            request_state=state,
        )
    bad = (
        "This approval answer does not match a question the proxy asked for this exact call"
        " (unknown, already used, or for another tool or other arguments). Nothing was"
        " executed; call the tool again."
    )
    for refused in (other, forged, again):
        assert isinstance(refused, types.CallToolResult)
        assert (text(refused), refused.is_error) == ([bad], True)
    assert isinstance(done, types.CallToolResult)
    assert text(done) == ["delete_file done", '{"path": "d"}']
    assert proxy.executions() == [{"tool": "delete_file", "args": {"path": "d"}}]
    assert unused.asked == []


# ---------------------------------------------------------------------------- the approval page


async def test_approve_through_the_http_api(plain: Proxied) -> None:
    """A reviewer approves on the API; a rebinding Host or a cross-site page cannot."""
    results: list[types.CallToolResult] = []
    with anyio.fail_after(LIMIT):  # the proxy answers the Host gateway.lan too

        async def call() -> None:
            results.append(await plain.client.call_tool("delete_file", {"path": "d"}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            reviews = await pending_reviews(plain.url)
            assert plain.executions() == []
            [review] = reviews
            assert review["pending_review"]["action_requests"] == [
                {
                    "name": "delete_file",
                    "args": {"path": "d"},
                    "description": "Tool `delete_file` is awaiting approval",
                }
            ]
            approve = {
                "thread_id": review["thread_id"],
                "review_id": review["review_id"],
                "decisions": [{"type": "approve"}],
            }
            async with httpx.AsyncClient(base_url=plain.url, timeout=LIMIT) as http:
                refused = [
                    await http.post("/hitl/review", json=approve, headers=headers)
                    for headers in (
                        {"Host": f"rebound.evil.example:{plain.port}"},
                        {"Origin": "http://evil.example"},
                    )
                ]
                named = await http.get("/hitl/reviews", headers={"Host": "gateway.lan"})
                assert [r.status_code for r in refused] == [421, 403]
                assert (named.status_code, named.json()["reviews"]) == (200, reviews)
                assert plain.executions() == []
                answer = await http.post("/hitl/review", json=approve)
                after = await http.get("/hitl/reviews")
        async with httpx.AsyncClient(base_url=plain.url, timeout=LIMIT) as http:
            audit = await http.get(f"/hitl/threads/{review['thread_id']}/audit")
    # The decision answers once the call started: its result reaches the MCP client.
    assert (answer.status_code, answer.json()) == (
        200,
        {
            "thread_id": review["thread_id"],
            "reply": None,
            "pending_review": None,
            "review_id": None,
        },
    )
    assert after.json() == {"reviews": []}
    assert text(results[0]) == ["delete_file done", '{"path": "d"}']
    assert plain.executions() == [{"tool": "delete_file", "args": {"path": "d"}}]
    kinds = [json.loads(line)["kind"] for line in audit.text.splitlines()]
    assert kinds == ["requested", "decided", "executed"]


async def test_a_call_nobody_decides_expires(brief: Proxied) -> None:
    with anyio.fail_after(LIMIT):
        result = await brief.client.call_tool("archive_file", {"path": "z"})
    assert (text(result), result.is_error) == ([EXPIRED], True)
    assert brief.executions() == []


async def test_a_killed_proxy_never_runs_the_waiting_call(setup: Setup) -> None:
    pidfile = setup.tmp / "proxy.pid"
    with anyio.move_on_after(LIMIT):
        try:
            async with Client(setup.params(pidfile=pidfile), mode="legacy") as client:

                async def call() -> None:
                    await client.call_tool("delete_file", {"path": "d"})

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call)
                    [review] = await pending_reviews(setup.url)
                    os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
        except Exception:  # noqa: S110 - the connection dies with the proxy
            pass
    assert setup.executions() == []
    async with proxied(setup) as client:
        await client.list_tools()
        async with httpx.AsyncClient(base_url=setup.url, timeout=LIMIT) as http:
            listed = await http.get("/hitl/reviews")
            late = await http.post(
                "/hitl/review",
                json={
                    "thread_id": review["thread_id"],
                    "review_id": review["review_id"],
                    "decisions": [{"type": "approve"}],
                },
            )
            thread = await http.get(f"/hitl/threads/{review['thread_id']}")
            audit = await http.get(f"/hitl/threads/{review['thread_id']}/audit")
    assert listed.json() == {"reviews": []}
    assert late.status_code == 400
    assert [a["status"] for a in thread.json()["actions"]] == ["cancelled"]
    events = [json.loads(line) for line in audit.text.splitlines()]
    assert [e["kind"] for e in events] == ["requested", "cancelled"]
    assert setup.executions() == []


async def test_a_streamable_http_upstream(setup: Setup) -> None:
    port = free_port()
    upstream = await anyio.open_process(
        [*UPSTREAM, "--http", str(port)], env=setup.env(), cwd=str(ROOT)
    )
    try:
        async with httpx.AsyncClient(timeout=5) as http:
            for _ in range(LIMIT * 20):
                try:
                    await http.get(f"http://127.0.0.1:{port}/mcp")
                    break
                except httpx.TransportError:
                    await anyio.sleep(0.05)
        asker = Asker(types.ElicitResult(action="accept", content={"decision": "approve"}))
        url = f"http://127.0.0.1:{port}/mcp"
        async with proxied(setup, asker=asker, upstream_url=url) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            read = await client.call_tool("read_file", {"path": "a"})
            deleted = await client.call_tool("delete_file", {"path": "d"})
    finally:
        upstream.terminate()
        with anyio.move_on_after(LIMIT):
            await upstream.wait()
    assert names == [t["name"] for t in TOOLS]
    assert text(read) == ["read_file done", '{"path": "a"}']
    assert text(deleted) == ["delete_file done", '{"path": "d"}']
    assert len(asker.asked) == 1
    assert setup.executions() == [
        {"tool": "read_file", "args": {"path": "a"}},
        {"tool": "delete_file", "args": {"path": "d"}},
    ]


async def test_a_busy_port_stops_the_proxy_at_once(setup: Setup) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", setup.port))
        taken.listen()
        params = setup.params()
        with anyio.fail_after(LIMIT):
            done = await anyio.run_process(
                [params.command, *params.args],
                env=params.env,
                cwd=params.cwd,
                check=False,
                stdin=subprocess.DEVNULL,
            )
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"error: --port {setup.port}: the approval page cannot listen on 127.0.0.1:{setup.port}:"
        " the port is in use by another program; choose another --port (or --host)\n"
    )
    assert setup.executions() == []


# ---------------------------------------------------------------------------- deny rules


DENIED = (
    'The call to `read_file` is denied by the rule `deny read_file(path="/etc/*")`.'
    " It was not executed."
)


async def test_a_denied_call_is_in_the_audit_trail_and_sends_no_webhook(
    setup: Setup,
    receiver: Receiver,  # noqa: F811 - the fixture
) -> None:
    """--rules: a denied call asks nobody, runs nothing, and is audited with its rule and time.

    ``GET /hitl/audit`` (every call) and the thread's own ``/audit`` show the same
    ``denied`` event; the webhook receiver gets only the reviewed call's events.
    """
    rules = setup.tmp / "rules.toml"
    rules.write_text("[rules]\ndeny = ['read_file(path=\"/etc/*\")']\n", encoding="utf-8")
    asker = Asker(types.ElicitResult(action="accept", content={"decision": "approve"}))
    extra = ("--rules", str(rules), "--notify-url", receiver.url, "--notify-secret", WEBHOOK_SECRET)
    async with proxied(setup, asker=asker, extra=extra) as client:
        before = datetime.now(UTC)
        denied = await client.call_tool("read_file", {"path": "/etc/passwd"})
        after = datetime.now(UTC)
        reviewed = await client.call_tool("delete_file", {"path": "d"})
        with anyio.fail_after(LIMIT):
            while len(receiver.received) < 2:  # noqa: ASYNC110 - the receiver is a thread
                await anyio.sleep(0.05)
        async with httpx.AsyncClient(base_url=setup.url, timeout=LIMIT) as http:
            everything = await http.get("/hitl/audit")
            events = [json.loads(line) for line in everything.text.splitlines()]
            thread_id = events[0]["thread_id"]
            own = await http.get(f"/hitl/threads/{thread_id}/audit")
            thread = await http.get(f"/hitl/threads/{thread_id}")
    assert (text(denied), denied.is_error) == ([DENIED], True)
    assert reviewed.is_error is False
    assert asker.asked == [asker.asked[0]]  # only the reviewed call asked anyone
    assert setup.executions() == [{"tool": "delete_file", "args": {"path": "d"}}]
    assert (everything.status_code, everything.headers["content-type"]) == (
        200,
        "application/x-ndjson",
    )
    assert events[0] == {
        "id": events[0]["id"],
        "at": events[0]["at"],
        "kind": "denied",
        "thread_id": thread_id,
        "review_id": None,
        "action_id": None,
        "tool": "read_file",
        "args": {"path": "/etc/passwd"},
        "actor": None,
        "decision": None,
        "detail": DENIED,
        "digest": None,
    }
    assert before <= datetime.fromisoformat(events[0]["at"]) <= after
    assert [(e["kind"], e["tool"]) for e in events[1:]] == [
        ("requested", "delete_file"),
        ("decided", "delete_file"),
        ("executed", "delete_file"),
    ]
    assert events[1]["thread_id"] != thread_id
    assert own.text == everything.text.splitlines(keepends=True)[0]
    assert (thread.json()["status"], thread.json()["actions"]) == ("idle", [])
    assert [(r["body"]["event"], r["body"]["thread_id"]) for r in receiver.received] == [
        ("review.requested", events[1]["thread_id"]),
        ("review.decided", events[1]["thread_id"]),
    ]
