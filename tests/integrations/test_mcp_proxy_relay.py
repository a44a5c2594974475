"""The gateway is transparent for what the client can do: the upstream's requests and
notifications reach the client, the client's reach the upstream, and a call waiting for
a person sends progress.

In one process (the upstream, the proxy and a real ``mcp.Client``, all in memory),
except the last test, which runs ``toolguard mcp-proxy`` and the upstream as
subprocesses over stdio. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from toolguard import MemoryStore  # noqa: E402
from toolguard._cli.main import main as cli_main  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.relay import NO_CLIENT, UNSUPPORTED, Relay  # noqa: E402
from toolguard._gateway.upstream import list_upstream, upstream_client  # noqa: E402

from .mcp_relay_upstream import (  # noqa: E402
    ADDED,
    FAKE_QUESTION,
    NOTES,
    NOTHING,
    TOOLS,
    State,
    build_server,
)

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30  # seconds: the bound of every wait
PAGE = "http://127.0.0.1:8765/"
INTERVAL = 0.05


class Seen:
    """What the client was asked and told."""

    def __init__(self) -> None:
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[Any] = []
        self.notes: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def sample(self, ctx: Any, params: Any) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="forty-two"), model="test-model"
        )

    async def elicit(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.elicited.append(params)
        if params.message.startswith("Approve the tool call"):  # toolguard's own question
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"text": "blue"})

    async def roots(self, ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate({"roots": [{"uri": "file:///home/me/project"}]})

    async def message(self, message: Any) -> None:
        self.notes.append(message)

    async def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    def kinds(self) -> list[str]:
        return [type(note).__name__ for note in self.notes if not isinstance(note, Exception)]


@asynccontextmanager
async def relayed(
    seen: Seen,
    *,
    capable: bool = True,
    state: State | None = None,
    elicit: Any = None,
    redact: dict[str, list[str]] | None = None,
) -> AsyncIterator[tuple[Client, MCPProxy, State]]:
    """The proxy in front of the relay upstream, with a client that can (or cannot) answer.

    A client that can answer gets a connection of its own to the upstream (an in-memory
    server of its own over the same ``state``), as a gateway process opens one per client.
    """
    state = state or State()
    shared = state

    def opener(declared: Any, callbacks: Any) -> Any:
        return upstream_client(build_server(shared), declared, callbacks, mode="legacy")

    relay = Relay(opener)
    callbacks: dict[str, Any] = {"message_handler": seen.message}
    if capable:
        callbacks |= {
            "sampling_callback": seen.sample,
            "elicitation_callback": elicit or seen.elicit,
            "list_roots_callback": seen.roots,
        }
    with anyio.fail_after(LIMIT):
        async with relay.connect(build_server(state), mode="legacy") as up:
            listed = await list_upstream(up)
            proxy = MCPProxy(up, listed, store=MemoryStore(), ttl=60, redact=redact)
            relay.attach(proxy, up, progress_interval=INTERVAL, page_url=PAGE)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(proxy.server(), mode="legacy", **callbacks) as client:
                    yield client, proxy, state
                tasks.cancel_scope.cancel()


async def until(check: Callable[[], bool]) -> None:
    """Wait until ``check()`` holds (bounded by the test's ``fail_after``)."""
    while True:
        if check():
            return
        await anyio.sleep(0.01)


def declined(name: str) -> str:
    """What a call answers when the client's user declined toolguard's question."""
    return (
        f"The review of this action was cancelled: The user declined to approve the call to"
        f" `{name}`. It was not executed."
    )


def text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def pending_review(proxy: MCPProxy) -> tuple[str, str]:
    """The thread and review id of the one call waiting for a decision (waits for it)."""
    while True:
        for thread_id in await proxy.chat.store.thread_ids():  # type: ignore[attr-defined]
            state = await proxy.chat.get_thread(thread_id)
            if state.status == "awaiting_review" and state.pending is not None:
                return thread_id, state.pending.review_id
        await anyio.sleep(0.01)


async def approve(proxy: MCPProxy, *, reviewer: str = "alice") -> str:
    """Approve the waiting call as a reviewer on the page would; its review id."""
    thread_id, review_id = await pending_review(proxy)
    await proxy.chat.submit_review([{"type": "approve"}], thread_id, reviewer=reviewer)
    return review_id


# ---------------------------------------------------------------------------- capabilities


async def test_sampling_elicitation_and_roots_of_the_upstream_reach_the_client() -> None:
    seen = Seen()
    async with relayed(seen) as (client, proxy, _):
        sampled = await client.call_tool("ask_model", {"text": "What is six times seven?"})
        asked = await client.call_tool("ask_user", {"text": "Your favourite colour?"})
        roots = await client.call_tool("show_roots", {})
        declared = await client.call_tool("capabilities", {})
        threads = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
    assert text(sampled) == ["model said: forty-two"]
    assert [m.content.text for p in seen.sampled for m in p.messages] == [  # type: ignore[union-attr]
        "What is six times seven?"
    ]
    assert text(asked) == ['user: accept {"text": "blue"}']
    assert [(p.message, p.requested_schema["required"]) for p in seen.elicited] == [
        ("Your favourite colour?", ["text"])
    ]
    assert text(roots) == ['roots: ["file:///home/me/project"]']
    # declared to the client's own upstream connection: what the client declared, no more
    assert json.loads(text(declared)[0]) == {
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
    }
    assert threads == []  # read-only tools: nobody was asked to approve anything


async def test_a_client_without_the_capability_answers_the_upstream_with_a_clear_error() -> None:
    seen = Seen()
    async with relayed(seen, capable=False) as (client, _, _):
        sampled = await client.call_tool("ask_model", {"text": "hi"})
        asked = await client.call_tool("ask_user", {"text": "hi"})
        roots = await client.call_tool("show_roots", {})
    assert (text(sampled), sampled.is_error) == (
        ["sampling failed: the MCP client connected to toolguard does not support sampling"],
        True,
    )
    assert text(asked) == [
        "elicitation failed: the MCP client connected to toolguard does not support elicitation"
    ]
    assert text(roots) == [
        "roots failed: the MCP client connected to toolguard does not support roots"
    ]
    assert (seen.sampled, seen.elicited) == ([], [])


async def test_with_no_client_connected_the_upstream_gets_an_error() -> None:
    relay = Relay()
    params = types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))],
        max_tokens=5,
    )
    answer = await relay.client_options()["sampling_callback"](None, params)
    roots = await relay.client_options()["list_roots_callback"](None)
    assert (answer, roots) == (
        types.ErrorData(
            code=types.INVALID_REQUEST, message=NO_CLIENT.format(method="sampling/createMessage")
        ),
        types.ErrorData(code=types.INVALID_REQUEST, message=NO_CLIENT.format(method="roots/list")),
    )
    assert UNSUPPORTED.format(what="roots") == (
        "the MCP client connected to toolguard does not support roots"
    )


class Named(Seen):
    """A client whose model answers with its own name."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    async def sample(self, ctx: Any, params: Any) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=self.name), model="test-model"
        )


async def test_two_clients_making_the_same_call_each_answer_their_own_sampling() -> None:
    """Two clients make the same call (tool and arguments) at once, twice: run at once, and
    approved on the page. The upstream (a process per client, over stdio: its requests carry
    nothing of the call they serve) samples during each call; each client answers its own
    call's request, and each result is its own model's answer."""
    one, two = Named("from one"), Named("from two")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.integrations.mcp_relay_upstream"],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    def opener(declared: Any, callbacks: Any) -> Any:
        return upstream_client(params, declared, callbacks, mode="legacy")

    relay = Relay(opener)
    results: dict[tuple[str, str], list[str]] = {}
    with anyio.fail_after(LIMIT):
        async with relay.connect(params, mode="legacy") as up, anyio.create_task_group() as tasks:
            proxy = MCPProxy(up, await list_upstream(up), store=MemoryStore(), ttl=60)
            relay.attach(proxy, up, progress_interval=INTERVAL, page_url=PAGE)
            proxy._tasks = tasks  # where the clients' own upstream connections live
            async with (
                Client(proxy.server(), mode="legacy", sampling_callback=one.sample) as first,
                Client(proxy.server(), mode="legacy", sampling_callback=two.sample) as second,
            ):

                async def call(who: str, client: Client, tool: str) -> None:
                    answer = await client.call_tool(tool, {"text": "Summarise Q3."})
                    results[(who, tool)] = text(answer)

                async with anyio.create_task_group() as calls:
                    for who, client in (("one", first), ("two", second)):
                        calls.start_soon(call, who, client, "ask_model")  # runs at once
                        calls.start_soon(call, who, client, "send_summary")  # waits
                    for _ in range(2):  # approved on the page, one after the other
                        await approve(proxy)
            tasks.cancel_scope.cancel()
    assert results == {
        ("one", "ask_model"): ["model said: from one"],
        ("two", "ask_model"): ["model said: from two"],
        ("one", "send_summary"): ["model said: from one"],
        ("two", "send_summary"): ["model said: from two"],
    }
    asked = [[m.content.text for m in p.messages] for p in one.sampled]  # type: ignore[union-attr]
    assert asked == [["Summarise Q3."], ["Summarise Q3."]]
    assert len(two.sampled) == 2


async def test_sampling_reaches_the_client_of_a_call_approved_on_the_page() -> None:
    """The approved call runs in the reviewer's request, yet its sampling goes to its client."""
    seen = Seen()
    async with relayed(seen, elicit=_never_asked) as (client, proxy, state):
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("send_summary", {"text": "Summarise Q3."}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await approve(proxy)
    assert text(results[0]) == ["model said: forty-two"]
    assert [m.content.text for p in seen.sampled for m in p.messages] == [  # type: ignore[union-attr]
        "Summarise Q3."
    ]
    assert state.events == [["called", "send_summary", {"text": "Summarise Q3."}]]


async def _never_asked(ctx: Any, params: Any) -> types.ElicitResult:
    """An elicitation callback that leaves toolguard's questions to the page."""
    await anyio.sleep_forever()
    raise AssertionError  # pragma: no cover


async def test_an_upstream_question_that_looks_like_an_approval_approves_nothing() -> None:
    """The upstream may ask the client anything, even in toolguard's words: the answer goes
    to the upstream only; the waiting review stays open and its call does not run."""
    seen = Seen()
    release = anyio.Event()
    questions: list[str] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        questions.append(params.message)
        if len(questions) == 1:  # toolguard's question about send_summary: held, then declined
            await release.wait()
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with relayed(seen, elicit=elicit) as (client, proxy, state):
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("send_summary", {"text": "Q3"}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            thread_id, _ = await pending_review(proxy)
            fake = await client.call_tool("fake_approval", {"text": "x"})
            waiting = await proxy.chat.get_thread(thread_id)
            release.set()
    assert text(fake) == ['user: accept {"decision": "approve"}']
    assert questions[1] == FAKE_QUESTION
    assert waiting.status == "awaiting_review"
    assert text(results[0]) == [declined("send_summary")]
    assert [event[1] for event in state.events] == ["fake_approval"]  # send_summary never ran


# ---------------------------------------------------------------------------- progress


async def test_progress_names_the_review_while_a_person_decides_and_stops_with_it() -> None:
    seen = Seen()
    async with relayed(seen, elicit=_never_asked) as (client, proxy, _):
        results: list[types.CallToolResult] = []

        async def call() -> None:
            result = await client.call_tool(
                "send_summary", {"text": "Q3"}, progress_callback=seen.progressed
            )
            results.append(result)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            _, review_id = await pending_review(proxy)
            await until(lambda: len(seen.progress) >= 3)
            await approve(proxy)
        after_result = len(seen.progress)
        await anyio.sleep(INTERVAL * 4)  # the progress task has ended: nothing more comes
    assert text(results[0]) == ["model said: forty-two"]
    message = f"Waiting for a person to approve `send_summary` (review {review_id}) on {PAGE}"
    assert seen.progress[:3] == [(1.0, None, message), (2.0, None, message), (3.0, None, message)]
    assert [p for p, _, _ in seen.progress] == [float(n) for n in range(1, after_result + 1)]
    assert {(total, text_) for _, total, text_ in seen.progress} == {(None, message)}
    assert len(seen.progress) == after_result


async def test_no_progress_without_a_progress_token() -> None:
    seen = Seen()
    async with relayed(seen, elicit=_never_asked) as (client, proxy, _):
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("send_summary", {"text": "Q3"}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await pending_review(proxy)
            await anyio.sleep(INTERVAL * 4)  # several intervals pass while it waits
            await approve(proxy)
    assert text(results[0]) == ["model said: forty-two"]
    # a progress notification, had one been sent, would reach the message handler
    assert "ProgressNotification" not in seen.kinds()


async def test_a_client_that_restarts_its_timeout_on_progress_outlives_a_long_review() -> None:
    """A 1 s request timeout restarted by each progress notification (as the TypeScript SDK's
    resetTimeoutOnProgress does; the Python SDK's read timeout is not restarted) survives a
    review of 3 s; without progress the same timeout gives up and the review is cancelled."""
    seen = Seen()
    timeout = 1.0
    async with relayed(seen, elicit=_never_asked) as (client, proxy, state):
        proxy.progress_interval = 0.2
        with anyio.CancelScope() as deadline:
            deadline.deadline = anyio.current_time() + timeout

            async def restart(progress: float, total: float | None, message: str | None) -> None:
                deadline.deadline = anyio.current_time() + timeout

            async with anyio.create_task_group() as tasks:

                async def decide_later() -> None:
                    await pending_review(proxy)
                    await anyio.sleep(3)
                    await approve(proxy)

                tasks.start_soon(decide_later)
                survived = await client.call_tool(
                    "send_summary", {"text": "long"}, progress_callback=restart
                )
        with anyio.move_on_after(timeout) as gave_up:
            await client.call_tool("send_summary", {"text": "no progress"})
        statuses: list[str] = []
        while "cancelled" not in statuses:  # the client gave up: its review is cancelled
            await anyio.sleep(0.01)
            threads = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            states = [await proxy.chat.get_thread(thread_id) for thread_id in threads]
            statuses = sorted(action.status for state in states for action in state.actions)
    assert (deadline.cancelled_caught, text(survived)) == (False, ["model said: forty-two"])
    assert gave_up.cancelled_caught
    assert statuses == ["cancelled", "executed"]
    assert [event[2] for event in state.events] == [{"text": "long"}]


# ---------------------------------------------------------------------------- list_changed


async def test_a_changed_tool_list_is_taken_classified_and_announced() -> None:
    seen = Seen()

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        if "`delete_backup`" in params.message:
            return types.ElicitResult(action="decline")
        return await _never_asked(ctx, params)  # the page decides about `report`

    async with relayed(seen, elicit=elicit) as (client, proxy, state):
        results: list[types.CallToolResult] = []

        async def waiting_call() -> None:  # waits for a person across the change
            results.append(await client.call_tool("report", {}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(waiting_call)
            await pending_review(proxy)
            added = await client.call_tool("grow_toolbox", {})
            await until(lambda: "ToolListChangedNotification" in seen.kinds())
            await approve(proxy)
        listed = [tool.name for tool in (await client.list_tools()).tools]
        counted = await client.call_tool("count_backups", {})
        deleted = await client.call_tool("delete_backup", {"text": "all"})
        explained = proxy.toolset.explain("delete_backup")
    assert text(added) == ["added"]
    assert listed == [tool["name"] for tool in [*TOOLS, *ADDED]]
    assert text(counted) == ["count_backups done"]
    # new, marked read-only, but named with an approval verb: it waits, and was declined
    assert explained.needs_approval is True
    assert (text(deleted), deleted.is_error) == ([declined("delete_backup")], True)
    assert text(results[0]) == ['{"rows": 3}']  # the review opened before the change ran
    assert [event[1] for event in state.events] == ["grow_toolbox", "report", "count_backups"]


async def test_a_new_listing_that_cannot_be_guarded_leaves_the_tools_as_they_were(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The secret argument of ``ask_user`` is gone from its new schema: rather than show
    it unredacted, the gateway keeps the tools it had and tells nobody of a change."""
    seen = Seen()
    state = State()
    async with relayed(seen, state=state, redact={"ask_user": ["text"]}) as (client, proxy, _):
        await client.list_tools()  # its own connection is open (and listed the tools)
        state.tools = [
            {**tool, "inputSchema": NOTHING} if tool["name"] == "ask_user" else tool
            for tool in [*state.tools, *ADDED]
        ]
        await proxy.relay.relist()  # type: ignore[union-attr]
        listed = [tool.name for tool in (await client.list_tools()).tools]
        still = proxy.toolset["ask_user"].parameters
    assert listed == [tool["name"] for tool in TOOLS]
    assert still["required"] == ["text"]
    assert "ToolListChangedNotification" not in seen.kinds()
    assert capsys.readouterr().err == (
        "toolguard mcp-proxy: the upstream's tools changed but could not be taken (redact"
        " names 'text', which is not a parameter of the tool 'ask_user'. Its parameters: []);"
        " the previous tools stay in force\n"
    )


# ---------------------------------------------------------------------------- resources, roots


async def test_subscriptions_and_change_notifications_are_forwarded() -> None:
    seen = Seen()
    async with relayed(seen) as (client, _, state):
        capabilities = client.server_capabilities
        subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=NOTES))
        await client.session.send_request(subscribe, types.EmptyResult)
        await client.call_tool("ping_resource", {"uri": NOTES})
        await client.call_tool("refresh_lists", {})
        await until(lambda: len(seen.kinds()) >= 3)
        await client.session.send_notification(types.RootsListChangedNotification())
        await until(lambda: ["roots changed"] in state.events)
        unsubscribe = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=NOTES))
        await client.session.send_request(unsubscribe, types.EmptyResult)
        kinds = sorted(seen.kinds())
        updated = [
            str(n.params.uri)
            for n in seen.notes
            if type(n).__name__ == "ResourceUpdatedNotification"
        ]
    assert capabilities.resources is not None
    assert (capabilities.resources.subscribe, capabilities.resources.list_changed) == (True, True)
    assert capabilities.prompts is not None
    assert capabilities.prompts.list_changed is True
    assert capabilities.tools is not None
    assert capabilities.tools.list_changed is True
    assert kinds == [
        "PromptListChangedNotification",
        "ResourceListChangedNotification",
        "ResourceUpdatedNotification",
    ]
    assert updated == [NOTES]
    assert [e for e in state.events if e[0] != "called"] == [
        ["subscribe", NOTES],
        ["roots changed"],
        ["unsubscribe", NOTES],
    ]


# ---------------------------------------------------------------------------- structured content


async def test_a_reviewed_result_with_structured_content_reaches_the_client_as_sent() -> None:
    seen = Seen()
    answer = types.ElicitResult(action="accept", content={"decision": "approve"})

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        return answer

    async with relayed(seen, elicit=elicit) as (client, proxy, _):
        reviewed = await client.call_tool("report", {})
        direct = await proxy.upstream.call_tool("report", {})
    shown = reviewed.model_dump(by_alias=True, exclude_none=True)
    assert shown == direct.model_dump(by_alias=True, exclude_none=True)
    assert (shown["content"], shown["structuredContent"]) == (
        [{"type": "text", "text": '{"rows": 3}'}],
        {"rows": 3},
    )


# ---------------------------------------------------------------------------- the CLI, end to end


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_the_progress_interval_must_be_positive(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["mcp-proxy", "--progress-interval", value, "--", "server"]) == 2
    shown = float(value)
    assert capsys.readouterr() == (
        "",
        f"error: --progress-interval must be a positive number of seconds, got {shown}\n",
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_the_gateway_process_relays_and_reports_progress(tmp_path: Path) -> None:
    """``toolguard mcp-proxy`` over stdio in front of the relay upstream over stdio."""
    port = free_port()
    seen = Seen()
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3"),
            "--port", str(port), "--progress-interval", "0.2", "--no-auth",
            "--", sys.executable, "-m", "tests.integrations.mcp_relay_upstream",
        ],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )  # fmt: skip
    page = f"http://127.0.0.1:{port}/"
    with anyio.fail_after(LIMIT):
        async with Client(
            params,
            mode="legacy",
            sampling_callback=seen.sample,
            list_roots_callback=seen.roots,
            message_handler=seen.message,
        ) as client:
            sampled = await client.call_tool("ask_model", {"text": "Six times seven?"})
            roots = await client.call_tool("show_roots", {})
            results: list[types.CallToolResult] = []

            async def call() -> None:
                result = await client.call_tool(
                    "send_summary", {"text": "Q3"}, progress_callback=seen.progressed
                )
                results.append(result)

            async with anyio.create_task_group() as tasks, httpx.AsyncClient(base_url=page) as http:
                tasks.start_soon(call)
                await until(lambda: bool(seen.progress))
                [review] = (await http.get("/hitl/reviews")).json()["reviews"]
                decided = await http.post(
                    "/hitl/review",
                    json={
                        "thread_id": review["thread_id"],
                        "review_id": review["review_id"],
                        "decisions": [{"type": "approve"}],
                    },
                )
            await client.call_tool("grow_toolbox", {})
            await until(lambda: "ToolListChangedNotification" in seen.kinds())
            listed = [tool.name for tool in (await client.list_tools()).tools]
    assert text(sampled) == ["model said: forty-two"]
    assert text(roots) == ['roots: ["file:///home/me/project"]']
    assert decided.status_code == 200
    assert seen.progress[0] == (
        1.0,
        None,
        f"Waiting for a person to approve `send_summary` (review {review['review_id']}) on {page}",
    )
    assert text(results[0]) == ["model said: forty-two"]
    assert listed == [tool["name"] for tool in [*TOOLS, *ADDED]]
