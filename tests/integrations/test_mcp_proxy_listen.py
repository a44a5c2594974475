"""``toolguard mcp-proxy --listen URL``: one gateway, many MCP clients over streamable HTTP.

One proxy process (``python -m toolguard mcp-proxy --listen ... --token-env ...``
in front of ``tests/integrations/mcp_proxy_upstream.py``) serves every test of
the module; each test connects its own real ``mcp.Client``\\ s and sees only the
executions of its own calls. A call that needs approval is decided through the
approval page's API. The signal test starts its own process (loopback, no
token). Every wait is bounded; everything listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("uvicorn")

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402
from toolguard._gateway.listen import BAD_BEARER, NO_BEARER  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
LIMIT = 30  # seconds: the bound of every wait
TOKEN = "team-token-7f3a9c1e2b"  # noqa: S105 - a test value
ABANDONED = (
    "The review of this action was cancelled: the MCP client gave up on the call (it cancelled"
    " it, timed out or disconnected) before a decision arrived. It was not executed."
)


class Gateway:
    """A running ``mcp-proxy --listen`` process: its URLs and what its upstream ran."""

    def __init__(self, tmp: Path, *, token: str | None) -> None:
        self.tmp = tmp
        self.log = tmp / "executions.jsonl"
        self.db = tmp / "proxy.sqlite3"
        self.port = free_port()
        self.page = f"http://127.0.0.1:{self.port}"
        self.listen_port = free_port()
        self.mcp = f"http://127.0.0.1:{self.listen_port}/mcp"
        argv = ["--db", str(self.db), "--port", str(self.port), "--listen", self.mcp, "--no-auth"]
        env = {**command_env(), "TOOLGUARD_MCP_LOG": str(self.log)}
        if token is not None:
            argv += ["--token-env", "TG_LISTEN_TOKEN"]
            env["TG_LISTEN_TOKEN"] = token
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "mcp-proxy", *argv, "--", *UPSTREAM],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.warning = _first_line(self.process.stderr)  # --no-auth's, then the status line
        self.status = _first_line(self.process.stderr)

    def executions(self, since: int = 0) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines[since:]]

    def stop(self, sig: signal.Signals) -> tuple[int, str]:
        """Send ``sig``; the exit code and the rest of stderr."""
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        assert self.process.stderr is not None
        rest = self.process.stderr.read().decode()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return code, rest


def _first_line(stream: IO[bytes] | None) -> str:
    """The first line of ``stream`` (the status line), read within :data:`LIMIT` seconds."""
    assert stream is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout=LIMIT)
    return lines[0].decode() if lines else ""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    running = Gateway(tmp_path_factory.mktemp("listen"), token=TOKEN)
    try:
        assert running.status == (
            f"toolguard mcp-proxy: MCP {running.mcp} | approval page {running.page}/"
            f" | db: {running.db} | ttl: 300s | upstream: {shlex.join(UPSTREAM)}\n"
        )
        yield running
    finally:
        if running.process.poll() is None:
            running.stop(signal.SIGTERM)


@asynccontextmanager
async def connected(url: str, token: str | None = TOKEN) -> AsyncIterator[Client]:
    """A real MCP client over streamable HTTP, sending ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(LIMIT, read=300.0)  # a call waits while a person decides
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


async def pending(page: str, count: int) -> dict[str, dict[str, Any]]:
    """The pending reviews once there are exactly ``count``, by their call's ``path``."""
    async with httpx.AsyncClient(base_url=page, timeout=LIMIT) as http:
        with anyio.fail_after(LIMIT):
            while True:
                reviews = (await http.get("/hitl/reviews")).json()["reviews"]
                if len(reviews) == count:
                    break
                await anyio.sleep(0.02)
    found: dict[str, dict[str, Any]] = {}
    for review in reviews:
        [request] = review["pending_review"]["action_requests"]
        found[request["args"]["path"]] = review
    return found


async def decide(page: str, review: dict[str, Any], decision: dict[str, Any]) -> int:
    body = {
        "thread_id": review["thread_id"],
        "review_id": review["review_id"],
        "decisions": [decision],
    }
    async with httpx.AsyncClient(base_url=page, timeout=LIMIT) as http:
        return (await http.post("/hitl/review", json=body)).status_code


def texts(result: Any) -> list[str]:
    return [getattr(block, "text", "") for block in result.content]


# ---------------------------------------------------------------------------- many clients


async def test_two_clients_at_once_each_call_reviewed_on_its_own(gateway: Gateway) -> None:
    since = len(gateway.executions())
    results: dict[str, Any] = {}
    with anyio.fail_after(LIMIT):
        async with (
            connected(gateway.mcp) as alice,
            connected(gateway.mcp) as bob,
            anyio.create_task_group() as calls,
        ):
            assert [t.name for t in (await alice.list_tools()).tools] == [
                t.name for t in (await bob.list_tools()).tools
            ]

            async def call(client: Client, path: str) -> None:
                results[path] = await client.call_tool("delete_file", {"path": path})

            calls.start_soon(call, alice, "alice.txt")
            calls.start_soon(call, bob, "bob.txt")
            reviews = await pending(gateway.page, 2)
            assert gateway.executions(since) == []  # both wait for a person
            assert await decide(gateway.page, reviews["alice.txt"], {"type": "approve"}) == 200
            reject = {"type": "reject", "message": "not Bob's file"}
            assert await decide(gateway.page, reviews["bob.txt"], reject) == 200
    assert (results["alice.txt"].is_error, texts(results["alice.txt"])) == (
        False,
        ["delete_file done", '{"path": "alice.txt"}'],
    )
    assert (results["bob.txt"].is_error, texts(results["bob.txt"])) == (True, ["not Bob's file"])
    assert gateway.executions(since) == [{"tool": "delete_file", "args": {"path": "alice.txt"}}]


async def test_one_client_disconnecting_cancels_only_its_own_review(gateway: Gateway) -> None:
    since = len(gateway.executions())
    kept: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with connected(gateway.mcp) as staying, anyio.create_task_group() as calls:

            async def leaving_client() -> None:
                async with connected(gateway.mcp) as leaving:
                    await leaving.call_tool("delete_file", {"path": "gone.txt"})

            async def staying_call() -> None:
                kept.append(await staying.call_tool("archive_file", {"path": "kept.txt"}))

            async with anyio.create_task_group() as leaver:
                leaver.start_soon(leaving_client)
                calls.start_soon(staying_call)
                reviews = await pending(gateway.page, 2)
                leaver.cancel_scope.cancel()  # the client gives up and closes its session
            remaining = await pending(gateway.page, 1)
            assert list(remaining) == ["kept.txt"]
            assert remaining["kept.txt"] == reviews["kept.txt"]
            assert await decide(gateway.page, reviews["gone.txt"], {"type": "approve"}) == 400
            assert await decide(gateway.page, reviews["kept.txt"], {"type": "approve"}) == 200
        async with httpx.AsyncClient(base_url=gateway.page, timeout=LIMIT) as http:
            thread = reviews["gone.txt"]["thread_id"]
            lines = (await http.get(f"/hitl/threads/{thread}/audit")).text.splitlines()
    audit = [json.loads(line) for line in lines]
    assert [(e["kind"], e["detail"]) for e in audit][-1] == ("cancelled", ABANDONED)
    assert texts(kept[0]) == ["archive_file done", '{"path": "kept.txt"}']
    assert gateway.executions(since) == [{"tool": "archive_file", "args": {"path": "kept.txt"}}]


# ---------------------------------------------------------------------------- the guards


async def test_a_missing_or_wrong_token_gets_a_401(gateway: Gateway) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    async with httpx.AsyncClient(timeout=LIMIT) as http:
        missing = await http.post(gateway.mcp, json=initialize)
        wrong = await http.post(
            gateway.mcp, json=initialize, headers={"Authorization": "Bearer not-the-token"}
        )
        basic = await http.post(
            gateway.mcp, json=initialize, headers={"Authorization": f"Basic {TOKEN}"}
        )
    assert (missing.status_code, missing.json(), missing.headers["www-authenticate"]) == (
        401,
        {"detail": NO_BEARER},
        'Bearer realm="toolguard mcp-proxy"',
    )
    for refused in (wrong, basic):
        assert (refused.status_code, refused.json(), refused.headers["www-authenticate"]) == (
            401,
            {"detail": BAD_BEARER},
            'Bearer realm="toolguard mcp-proxy", error="invalid_token"',
        )
    assert NO_BEARER == (
        "This MCP gateway needs a bearer token: send Authorization: Bearer TOKEN, where TOKEN is"
        " the value of the gateway's --token-env variable."
    )
    assert BAD_BEARER == (
        "The bearer token is not this MCP gateway's: send Authorization: Bearer TOKEN, where"
        " TOKEN is the value of the gateway's --token-env variable."
    )
    with pytest.raises(Exception):  # noqa: B017, PT011 - the SDK's own error for a 401
        async with connected(gateway.mcp, token="not-the-token") as client:  # noqa: S106
            await client.list_tools()


async def test_the_pages_host_origin_and_size_guards_hold_for_mcp(gateway: Gateway) -> None:
    """A foreign Host gets a 421 before the token is looked at; a cross-site page a 403."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    good = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=LIMIT) as http:
        rebound = await http.post(gateway.mcp, json=body, headers={"Host": "evil.example"})
        cross = await http.post(
            gateway.mcp, json=body, headers={**good, "Origin": "https://evil.example"}
        )
        large = await http.post(
            gateway.mcp,
            content=b"{" + b" " * (1024 * 1024) + b"}",
            headers={**good, "Content-Type": "application/json"},
        )
        elsewhere = await http.get(gateway.mcp.replace("/mcp", "/other"), headers=good)
    assert (rebound.status_code, rebound.json()) == (
        421,
        {
            "detail": "Misdirected request: this server does not answer to the host in the Host"
            " header (allow it with allowed_hosts, or --allow-host of toolguard serve or"
            " mcp-proxy)."
        },
    )
    assert (cross.status_code, cross.json()) == (
        403,
        {
            "detail": "Cross-site request refused: state-changing requests must come from this"
            " server's own pages, from clients that send no Origin header, or from an origin"
            " allowed with allowed_origins (--allow-origin of toolguard serve or mcp-proxy)."
        },
    )
    assert (large.status_code, large.json()) == (
        413,
        {"detail": "The request body is larger than 1048576 bytes."},
    )
    assert (elsewhere.status_code, elsewhere.json()) == (404, {"detail": "Not Found"})
    assert rebound.headers["x-frame-options"] == "DENY"  # the page's security headers


# ---------------------------------------------------------------------------- stopping


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130)])
async def test_a_signal_stops_the_listening_gateway_cleanly(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    """On loopback no token is needed; Ctrl-C ends the sessions, the server and the process."""
    running = Gateway(tmp_path, token=None)
    try:
        assert running.status.startswith(f"toolguard mcp-proxy: MCP {running.mcp} | ")
        with anyio.fail_after(LIMIT):
            async with connected(running.mcp, token=None) as client:
                read = await client.call_tool("read_file", {"path": "a"})
        assert texts(read) == ["read_file done", '{"path": "a"}']
    finally:
        exit_code, rest = running.stop(sig)
    assert (exit_code, rest) == (code, "")
    for port in (running.port, running.listen_port):  # both ports are free again
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
