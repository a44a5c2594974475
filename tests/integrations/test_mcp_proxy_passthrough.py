"""What the gateway passes on besides tool calls: log messages, completions, progress, resumption.

The upstream is ``tests/integrations/mcp_passthrough_upstream.py`` (a Python
MCP server over stdio). The gateway serves MCP over stdio (one client per
process) and over ``--listen`` (one process for the module, many clients).
Clients are real ``mcp.Client``\\ s, and raw HTTP clients on the same wire: one
that drops its connection and comes back with ``Last-Event-ID``, one that
declares only URL-mode elicitation. A call that needs a person is decided
through the approval page's API.
"""

from __future__ import annotations

import json
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

from mcp import Client, StdioServerParameters, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402
from toolguard._gateway.asking import URL_QUESTION  # noqa: E402
from toolguard._gateway.relay import waiting_message  # noqa: E402

pytestmark = pytest.mark.filterwarnings(  # logging is deprecated from 2026-07-28 on, not before
    "ignore::mcp.shared.exceptions.MCPDeprecationWarning"
)

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_passthrough_upstream"]
LIMIT = 30  # seconds: the bound of every wait
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
LEGACY = "2025-11-25"


def _line(stream: IO[bytes] | None) -> str:
    assert stream is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout=LIMIT)
    return lines[0].decode() if lines else ""


def _argv(tmp: Path, port: int) -> list[str]:
    return [
        *("--db", str(tmp / "proxy.sqlite3"), "--port", str(port), "--no-auth"),
        *("--progress-interval", "0.1", "--ttl", "60"),
    ]


class Listening:
    """A running ``mcp-proxy --listen`` process in front of the upstream."""

    def __init__(self, tmp: Path) -> None:
        self.log = tmp / "executions.jsonl"
        port = free_port()
        self.page = f"http://127.0.0.1:{port}"
        self.mcp = f"http://127.0.0.1:{free_port()}/mcp"
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "toolguard", "mcp-proxy", *_argv(tmp, port)),
                *("--listen", self.mcp, "--", *UPSTREAM),
            ],
            cwd=ROOT,
            env={**command_env(), "TOOLGUARD_MCP_LOG": str(self.log)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        _line(self.process.stderr)  # --no-auth's warning
        self.status = _line(self.process.stderr)

    def runs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listening]:
    running = Listening(tmp_path_factory.mktemp("passthrough"))
    try:
        assert running.status.startswith(f"toolguard mcp-proxy: MCP {running.mcp} | ")
        yield running
    finally:
        running.process.terminate()
        running.process.wait(timeout=LIMIT)
        assert running.process.stderr is not None
        running.process.stderr.close()


class Seen:
    """What one client was sent besides answers: log messages and progress."""

    def __init__(self) -> None:
        self.logs: list[tuple[str, Any, str | None]] = []
        self.progress: list[tuple[Any, float, float | None, str | None]] = []

    async def logged(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data, params.logger))

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            p = message.params
            self.progress.append((p.progress_token, p.progress, p.total, p.message))

    async def logs_count(self, count: int) -> list[tuple[str, Any, str | None]]:
        """The log messages, once there are ``count`` (they may follow the answer)."""
        with anyio.fail_after(LIMIT):
            while len(self.logs) < count:  # noqa: ASYNC110 - filled by the client's callback
                await anyio.sleep(0.01)
        await anyio.sleep(0.1)  # and no more come
        return self.logs


@asynccontextmanager
async def over_http(url: str, seen: Seen, **options: Any) -> AsyncIterator[Client]:
    timeout = httpx2.Timeout(LIMIT, read=LIMIT)
    async with (
        httpx2.AsyncClient(timeout=timeout) as http,
        Client(
            streamable_http_client(url, http_client=http),
            logging_callback=seen.logged,
            message_handler=seen.message,
            **{"mode": "legacy", **options},
        ) as client,
    ):
        yield client


def meta_of(result: Any) -> dict[str, Any]:
    """The ``_meta`` the upstream got, as its tools answer it."""
    answer: dict[str, Any] = json.loads(result.content[0].text)
    return answer["meta"]  # type: ignore[no-any-return]


ALL_LEVELS = [
    ("debug", "debug a", "upstream"),
    ("info", "info a", "upstream"),
    ("warning", "warning a", "upstream"),
    ("error", "error a", "upstream"),
]
WARNINGS_UP = [("warning", "warning b", "upstream"), ("error", "error b", "upstream")]
STEPS = [
    ("tok-1", 1.0, 3.0, "s step 1"),
    ("tok-1", 2.0, 3.0, "s step 2"),
    ("tok-1", 3.0, 3.0, "s step 3"),
]


# ---------------------------------------------------------------------------- over stdio


async def test_logs_completions_and_progress_over_stdio(tmp_path: Path) -> None:
    seen = Seen()
    env = {**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "runs.jsonl")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolguard", "mcp-proxy", *_argv(tmp_path, free_port()), "--", *UPSTREAM],
        env=env,
        cwd=str(ROOT),
    )
    with anyio.fail_after(LIMIT):
        async with Client(
            params, mode="legacy", logging_callback=seen.logged, message_handler=seen.message
        ) as client:
            capabilities = client.server_capabilities
            assert (capabilities.logging, capabilities.completions) == (
                types.LoggingCapability(),
                types.CompletionsCapability(),
            )
            completed = await client.complete(
                types.PromptReference(name="summarise"), {"name": "topic", "value": "al"}
            )
            assert completed.completion.values == ["alpha", "alps"]
            await client.call_tool("chatty", {"tag": "a"})
            assert await seen.logs_count(4) == ALL_LEVELS
            await client.set_logging_level("warning")
            await client.call_tool("chatty", {"tag": "b"})
            assert await seen.logs_count(6) == [*ALL_LEVELS, *WARNINGS_UP]
            result = await client.call_tool(
                "steps", {"tag": "s"}, meta={"progressToken": "tok-1", "traceparent": TRACE}
            )
    assert meta_of(result) == {"progressToken": "tok-1", "traceparent": TRACE}
    assert seen.progress == STEPS


# ---------------------------------------------------------------------------- over --listen


async def test_log_level_filter_and_completions_over_http(gateway: Listening) -> None:
    seen = Seen()
    with anyio.fail_after(LIMIT):
        async with over_http(gateway.mcp, seen) as client:
            assert client.server_capabilities.logging == types.LoggingCapability()
            completed = await client.complete(
                types.PromptReference(name="summarise"), {"name": "topic", "value": "b"}
            )
            await client.call_tool("chatty", {"tag": "a"})
            assert await seen.logs_count(4) == ALL_LEVELS
            await client.set_logging_level("warning")
            await client.call_tool("chatty", {"tag": "b"})
            assert await seen.logs_count(6) == [*ALL_LEVELS, *WARNINGS_UP]
    assert completed.completion.values == ["beta"]


async def test_a_2026_client_gets_the_logs_it_opted_in_to(gateway: Listening) -> None:
    seen = Seen()
    with anyio.fail_after(LIMIT):
        async with over_http(gateway.mcp, seen, mode="auto", log_level="warning") as client:
            assert client.protocol_version == "2026-07-28"
            await client.call_tool("chatty", {"tag": "b"})
            assert await seen.logs_count(2) == WARNINGS_UP


async def test_progress_reaches_the_client_that_asked_two_clients_at_once(
    gateway: Listening,
) -> None:
    first, second = Seen(), Seen()
    results: dict[str, Any] = {}
    with anyio.fail_after(LIMIT):
        async with (
            over_http(gateway.mcp, first) as one,
            over_http(gateway.mcp, second) as two,
            anyio.create_task_group() as calls,
        ):

            async def call(client: Client, tag: str) -> None:
                meta: Any = {"progressToken": "same", "traceparent": TRACE}
                results[tag] = await client.call_tool("steps", {"tag": tag}, meta=meta)

            calls.start_soon(call, one, "one")
            calls.start_soon(call, two, "two")
    assert first.progress == [("same", float(n), 3.0, f"one step {n}") for n in (1, 2, 3)]
    assert second.progress == [("same", float(n), 3.0, f"two step {n}") for n in (1, 2, 3)]
    tokens = sorted(meta_of(result)["progressToken"] for result in results.values())
    assert tokens[0] == "same"  # as the client sent it; the other one at the same time: ours
    assert tokens[1] == "same" or tokens[1].startswith("toolguard-progress-")
    assert [meta_of(result)["traceparent"] for result in results.values()] == [TRACE, TRACE]


async def pending(page: str) -> dict[str, Any]:
    """The one pending review (bounded)."""
    async with httpx.AsyncClient(base_url=page, timeout=LIMIT) as http:
        with anyio.fail_after(LIMIT):
            while not (reviews := (await http.get("/hitl/reviews")).json()["reviews"]):  # noqa: ASYNC110
                await anyio.sleep(0.02)
    [review] = reviews
    return review  # type: ignore[no-any-return]


async def approve(page: str, review: dict[str, Any]) -> None:
    body = {
        "thread_id": review["thread_id"],
        "review_id": review["review_id"],
        "decisions": [{"type": "approve"}],
    }
    async with httpx.AsyncClient(base_url=page, timeout=LIMIT) as http:
        assert (await http.post("/hitl/review", json=body)).status_code == 200


async def test_waiting_and_upstream_progress_make_one_increasing_stream(
    gateway: Listening,
) -> None:
    seen = Seen()
    before = len(gateway.runs())
    with anyio.fail_after(LIMIT):
        async with over_http(gateway.mcp, seen) as client, anyio.create_task_group() as calls:
            results: list[Any] = []

            async def call() -> None:
                meta: Any = {"progressToken": "tok-d"}
                results.append(await client.call_tool("deploy", {"tag": "d"}, meta=meta))

            calls.start_soon(call)
            review = await pending(gateway.page)
            while len(seen.progress) < 2:  # noqa: ASYNC110 - the client's own stream
                await anyio.sleep(0.02)
            await approve(gateway.page, review)
    waited = len(seen.progress) - 2
    message = waiting_message("deploy", review["review_id"], f"{gateway.page}/")
    assert seen.progress == [
        *[("tok-d", float(n), None, message) for n in range(1, waited + 1)],
        ("tok-d", waited + 2.0, waited + 3.0, "d step 1"),
        ("tok-d", waited + 3.0, waited + 3.0, "d step 2"),
    ]
    assert meta_of(results[0]) == {"progressToken": "tok-d"}
    assert gateway.runs()[before:] == [{"tool": "deploy", "args": {"tag": "d"}}]


# ---------------------------------------------------------------------------- resumption


def _events(text: str) -> list[dict[str, str]]:
    """The SSE events of ``text``, each as its fields."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


async def test_a_dropped_stream_resumes_with_the_result_of_the_reviewed_call(
    gateway: Listening,
) -> None:
    before = len(gateway.runs())
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "deploy", "arguments": {"tag": "r"}},
    }
    with anyio.fail_after(LIMIT):
        async with httpx.AsyncClient(timeout=LIMIT) as http:
            opened = await http.post(gateway.mcp, json=initialize, headers=headers)
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            session["mcp-protocol-version"] = LEGACY
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(gateway.mcp, json=done, headers={**headers, **session})
            async with http.stream(
                "POST", gateway.mcp, json=call, headers={**headers, **session}
            ) as stream:
                first = await anext(stream.aiter_text())  # the priming event, then it drops
        review = await pending(gateway.page)
        await approve(gateway.page, review)
        async with httpx.AsyncClient(timeout=LIMIT) as http:
            resumed = {**session, "Accept": "text/event-stream"}
            resumed["Last-Event-ID"] = _events(first)[0]["id"]
            other = await http.post(gateway.mcp, json=initialize, headers=headers)
            foreign = {**resumed, "mcp-session-id": other.headers["mcp-session-id"]}
            elsewhere = await http.get(gateway.mcp, headers=foreign)  # another session's id
            text = ""
            async with http.stream("GET", gateway.mcp, headers=resumed) as stream:
                async for chunk in stream.aiter_text():
                    text += chunk
                    if '"id":7' in text.replace(" ", ""):
                        break
    assert (elsewhere.status_code, elsewhere.text) == (200, "")  # nothing of this session
    assert _events(first)[0].keys() == {"id", "data", "retry"}
    assert (_events(first)[0]["data"], _events(first)[0]["retry"]) == ("", "1000")
    answers = [json.loads(e["data"]) for e in _events(text) if e.get("data")]
    assert answers[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [
                {
                    "type": "text",
                    "text": json.dumps({"meta": {}, "tag": "r", "tool": "deploy"}),
                }
            ],
            "isError": False,
        },
    }
    assert gateway.runs()[before:] == [{"tool": "deploy", "args": {"tag": "r"}}]


# ---------------------------------------------------------------------------- URL elicitation


async def test_a_client_that_declares_only_url_elicitation_is_asked_to_open_the_review(
    gateway: Listening,
) -> None:
    before = len(gateway.runs())
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {"elicitation": {"url": {}}},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "deploy", "arguments": {"tag": "url"}},
    }
    seen: list[dict[str, Any]] = []
    with anyio.fail_after(LIMIT):
        async with httpx.AsyncClient(timeout=LIMIT) as http:
            opened = await http.post(gateway.mcp, json=initialize, headers=headers)
            session = {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": LEGACY,
            }
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(gateway.mcp, json=done, headers={**headers, **session})
            async with http.stream(
                "POST", gateway.mcp, json=call, headers={**headers, **session}
            ) as stream:
                text = ""
                async for chunk in stream.aiter_text():
                    text += chunk
                    messages = [json.loads(e["data"]) for e in _events(text) if e.get("data")]
                    new = messages[len(seen) :]
                    seen.extend(new)
                    for message in new:
                        if message.get("method") == "elicitation/create":  # the user opens it
                            accept = {"jsonrpc": "2.0", "id": message["id"]}
                            accept["result"] = {"action": "accept"}
                            headed = {**headers, **session}
                            await http.post(gateway.mcp, json=accept, headers=headed)
                            await approve(gateway.page, await pending(gateway.page))
                    if any(message.get("id") == 9 for message in new):
                        break
    [asked] = [m for m in seen if m.get("method") == "elicitation/create"]
    thread_id = asked["params"]["elicitationId"]
    review_id = asked["params"]["message"].split("(review ")[1].split(")")[0]
    assert asked["params"] == {
        "mode": "url",
        "message": URL_QUESTION.format(name="deploy", review_id=review_id),
        "url": f"{gateway.page}/?thread={thread_id}",
        "elicitationId": thread_id,
    }
    after = [m for m in seen if m.get("method") != "elicitation/create"]
    result = json.dumps({"meta": {}, "tag": "url", "tool": "deploy"}, sort_keys=True)
    assert after == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": thread_id},
        },
        {
            "jsonrpc": "2.0",
            "id": 9,
            "result": {"content": [{"type": "text", "text": result}], "isError": False},
        },
    ]
    assert gateway.runs()[before:] == [{"tool": "deploy", "args": {"tag": "url"}}]
