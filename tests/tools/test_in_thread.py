"""Fast sync tools: ``tool(in_thread=False)`` / ``requires_approval(in_thread=False)``.

A sync tool marked so runs on the event loop's own thread (no worker-thread
hop); an unmarked one keeps running in a worker thread. Everything else —
errors, limits, deadlines, concurrency limits — behaves the same.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from toolguard import (
    SEED_VERBS,
    ApprovalRequiredError,
    Classifier,
    Limits,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolResult,
    guard,
    requires_approval,
    tool,
)
from toolguard._core.limits import bounded_result

OK = "sent to a@x"


class Threads:
    """Records the thread each tool body ran on."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def tools(self) -> list[Any]:
        """A marked and an unmarked sync tool, each guarded and unguarded."""
        seen = self.seen

        @tool(in_thread=False)
        def quick_lookup(key: str) -> str:
            """Look a key up in memory."""
            seen["quick_lookup"] = threading.get_ident()
            return f"value of {key}"

        @tool
        def slow_lookup(key: str) -> str:
            """Look a key up somewhere slow."""
            seen["slow_lookup"] = threading.get_ident()
            return f"value of {key}"

        @requires_approval(in_thread=False)
        def send_quick(to: str) -> str:
            """Queue a message."""
            seen["send_quick"] = threading.get_ident()
            return f"sent to {to}"

        @requires_approval
        def send_slow(to: str) -> str:
            """Send a message."""
            seen["send_slow"] = threading.get_ident()
            return f"sent to {to}"

        return [quick_lookup, slow_lookup, send_quick, send_slow]


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    """A flat tool call dict."""
    return {"id": call_id, "name": name, "args": args}


def ok(call_id: str, name: str, content: str) -> ToolResult:
    """A success result with a text value."""
    return ToolResult(call_id=call_id, name=name, status="success", content=content, value=content)


# --------------------------------------------------------------------------- which thread


async def test_marked_sync_tool_runs_on_the_loop_thread_unmarked_does_not() -> None:
    """Unguarded: the marked tool runs on the loop's thread, the unmarked one in a worker."""
    threads = Threads()
    runner = Runner(threads.tools())
    step = await runner.run(
        [call("c1", "quick_lookup", key="k"), call("c2", "slow_lookup", key="k")]
    )
    assert step.results == [
        ok("c1", "quick_lookup", "value of k"),
        ok("c2", "slow_lookup", "value of k"),
    ]
    loop = threading.get_ident()
    assert threads.seen["quick_lookup"] == loop
    assert threads.seen["slow_lookup"] != loop


async def test_approved_marked_tool_runs_on_the_loop_thread() -> None:
    """Guarded and approved: the marked tool runs on the loop's thread, the unmarked one not."""
    threads = Threads()
    runner = Runner(threads.tools())
    step = await runner.run([call("c1", "send_quick", to="a@x"), call("c2", "send_slow", to="a@x")])
    assert step.pending is not None
    assert threads.seen == {}
    done = await runner.resume(step.pending, [{"type": "approve"}, {"type": "approve"}])
    assert done.results == [ok("c1", "send_quick", OK), ok("c2", "send_slow", OK)]
    loop = threading.get_ident()
    assert threads.seen["send_quick"] == loop
    assert threads.seen["send_slow"] != loop


async def test_reviewed_chat_runs_the_marked_tool_on_the_loop_thread() -> None:
    """Through ReviewedChat too: pause, approve, the marked tool runs once on the loop's thread."""
    threads = Threads()
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ToolCall(id="c1", name="send_quick", args={"to": "a@x"})]),
            "Done.",
        ]
    )
    chat = ReviewedChat(model, threads.tools())
    turn = await chat.send_message("Mail a@x")
    assert turn.pending_review is not None
    assert threads.seen == {}
    done = await chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert done.reply == "Done."
    assert threads.seen == {"send_quick": threading.get_ident()}


async def test_chat_sync_in_thread_false_still_wins_for_unmarked_tools() -> None:
    """Runner(sync_in_thread=False) runs every sync tool on the loop's thread, marked or not."""
    threads = Threads()
    runner = Runner(threads.tools(), sync_in_thread=False)
    await runner.run([call("c1", "quick_lookup", key="k"), call("c2", "slow_lookup", key="k")])
    loop = threading.get_ident()
    assert threads.seen == {"quick_lookup": loop, "slow_lookup": loop}


async def test_async_tools_ignore_the_mark() -> None:
    """An async tool marked in_thread=False runs as before, on the loop's thread."""
    seen: list[int] = []

    @tool(in_thread=False)
    async def fetch(key: str) -> str:
        """Fetch a key."""
        seen.append(threading.get_ident())
        return key

    step = await Runner([fetch]).run([call("c1", "fetch", key="k")])
    assert step.results == [ok("c1", "fetch", "k")]
    assert seen == [threading.get_ident()]


# --------------------------------------------------------------------------- same behaviour


def failing_tools() -> list[Any]:
    """Two sync tools that raise the same error, one marked."""

    @tool(in_thread=False)
    def fail_quick(key: str) -> str:
        """Always fails."""
        msg = f"no {key}"
        raise LookupError(msg)

    @tool
    def fail_slow(key: str) -> str:
        """Always fails."""
        msg = f"no {key}"
        raise LookupError(msg)

    return [fail_quick, fail_slow]


async def test_exceptions_give_the_same_error_result() -> None:
    """A marked tool that raises gives the same failed result as an unmarked one."""
    step = await Runner(failing_tools(), classifier=Classifier(verbs=SEED_VERBS)).run(
        [call("c1", "fail_quick", key="k"), call("c2", "fail_slow", key="k")]
    )
    assert step.results == [
        ToolResult(
            call_id="c1",
            name="fail_quick",
            status="error",
            content="Tool `fail_quick` failed: LookupError: no k",
            outcome="failed",
        ),
        ToolResult(
            call_id="c2",
            name="fail_slow",
            status="error",
            content="Tool `fail_slow` failed: LookupError: no k",
            outcome="failed",
        ),
    ]


async def test_results_beyond_the_limits_are_bounded_the_same() -> None:
    """A marked tool's oversized result is recorded in the same bounded form."""

    @tool(in_thread=False)
    def big_quick(size: int) -> str:
        """A large text."""
        return "x" * size

    @tool
    def big_slow(size: int) -> str:
        """A large text."""
        return "x" * size

    runner = Runner(
        [big_quick, big_slow],
        limits=Limits(max_result_bytes=1024),
        classifier=Classifier(verbs=SEED_VERBS),
    )
    step = await runner.run([call("c1", "big_quick", size=5000), call("c2", "big_slow", size=5000)])
    content, value = bounded_result("x" * 5000, Limits(max_result_bytes=1024))
    assert value is None
    assert step.results == [
        ToolResult(call_id="c1", name="big_quick", status="success", content=content),
        ToolResult(call_id="c2", name="big_slow", status="success", content=content),
    ]


async def test_deadline_passed_before_start_expires_the_marked_tool_too() -> None:
    """An approved marked call whose review deadline passed does not run: it ends expired."""
    now = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    threads = Threads()
    runner = Runner(threads.tools(), review_ttl=60, clock=lambda: now[0])
    step = await runner.run([call("c1", "send_quick", to="a@x")])
    assert step.pending is not None
    now[0] += timedelta(seconds=61)
    done = await runner.resume(step.pending, [{"type": "approve"}])
    assert done.results == [
        ToolResult(
            call_id="c1",
            name="send_quick",
            status="error",
            content=(
                "The review of this action expired before the approved call could start."
                " It was not executed."
            ),
            outcome="expired",
        )
    ]
    assert [a.status for a in done.actions] == ["expired"]
    assert threads.seen == {}


async def test_marked_tools_respect_max_concurrency() -> None:
    """With a concurrency limit, marked tools run one after the other on the loop's thread."""
    order: list[str] = []

    @tool(in_thread=False)
    def step_one(label: str) -> str:
        """Record a label."""
        order.append(label)
        return label

    runner = Runner([step_one], max_concurrency=1, classifier=Classifier(verbs=SEED_VERBS))
    step = await runner.run([call("c1", "step_one", label="a"), call("c2", "step_one", label="b")])
    assert step.results == [ok("c1", "step_one", "a"), ok("c2", "step_one", "b")]
    assert sorted(order) == ["a", "b"]


def test_direct_calls_are_unchanged() -> None:
    """Calling the marked functions directly behaves as without the mark."""
    threads = Threads()
    quick_lookup, _, send_quick, _ = threads.tools()
    assert quick_lookup("k") == "value of k"
    with pytest.raises(ApprovalRequiredError) as caught:
        send_quick("a@x")
    assert str(caught.value) == "Tool `send_quick` is awaiting approval"
    assert "send_quick" not in threads.seen


# --------------------------------------------------------------------------- the flag itself


def test_the_mark_is_kept_through_wrapping() -> None:
    """False wins whichever way tool(), requires_approval() and as_tool() are stacked."""

    def work(key: str) -> str:
        """Work."""
        return key

    assert tool(work).in_thread is True
    assert tool(in_thread=False)(work).in_thread is False
    assert requires_approval(tool(in_thread=False)(work)).in_thread is False
    assert requires_approval(in_thread=False)(tool(work)).in_thread is False
    guarded = requires_approval(in_thread=False)(work)
    assert tool(guarded).in_thread is False
    assert tool(name="renamed")(guarded).in_thread is False
    assert tool(requires_approval(work)).in_thread is True
    assert tool(tool(work), in_thread=False).in_thread is False
    toolset = guard([tool(in_thread=False)(work)])
    marked = toolset.get("work")
    assert isinstance(marked, Tool)
    assert marked.in_thread is False


def test_schema_tools_keep_the_mark() -> None:
    """A JSON-Schema tool can be marked too, and a guarded copy keeps it."""
    pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"key": {"type": "string"}}}
    made = Tool.from_schema("lookup", "Look up.", schema, lambda key: key)
    assert made.in_thread is True
    marked = tool(made, in_thread=False)
    assert (type(marked).__name__, marked.in_thread) == ("SchemaTool", False)
    assert requires_approval(marked).in_thread is False


@pytest.mark.parametrize(("value", "shown"), [("no", "str 'no'"), (0, "int 0"), (None, "None")])
def test_in_thread_must_be_a_bool(value: Any, shown: str) -> None:
    """in_thread other than True/False is refused when the tool is made."""

    def work(key: str) -> str:
        """Work."""
        return key

    expected = f"in_thread must be True or False, got {shown}"
    with pytest.raises(TypeError) as caught:
        tool(work, in_thread=value)
    assert str(caught.value) == expected
    with pytest.raises(TypeError) as caught:
        requires_approval(in_thread=value)
    assert str(caught.value) == expected
    with pytest.raises(TypeError) as caught:
        Tool(work, in_thread=value)
    assert str(caught.value) == expected
