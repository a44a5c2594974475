"""Running the calls that may run: concurrently, bounded, each result recorded whatever it is."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any

import anyio

from toolguard._core import telemetry
from toolguard._core.jsonable import to_json_data
from toolguard._core.limits import Limits, bounded_result
from toolguard._core.records import ToolCall, ToolResult, trusted
from toolguard._enforce.decide import failure_text
from toolguard._enforce.step import error_result
from toolguard._policy.redact import scrub, scrub_data
from toolguard._tools.tool import Tool

Job = tuple[ToolCall, Tool[Any, Any], dict[str, Any]]
"""A call to run: the call, its tool and its validated arguments."""


async def run_body(
    tool: Tool[Any, Any], validated: Mapping[str, Any], *, in_thread: bool = True
) -> Any:
    """Run one tool's body with its validated arguments: every body toolguard runs starts here.

    The runner's executor, the resume and the framework integrations call it;
    a directly called guarded function runs its own body once ``allow_once``
    covers the call.
    """
    return await tool.execute(validated, in_thread=in_thread)


def run_body_sync(tool: Tool[Any, Any], validated: Mapping[str, Any]) -> Any:
    """:func:`run_body` from synchronous code (LangChain's ``invoke``).

    A sync body runs in this thread; an async one in its own event loop when
    none is running here.

    Raises:
        RuntimeError: an async tool called from inside a running event loop.
    """
    if tool.is_async:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(functools.partial(run_body, tool, validated))
        msg = f"The tool `{tool.name}` is async: call it with ainvoke inside an event loop"
        raise RuntimeError(msg)
    coroutine = run_body(tool, validated, in_thread=False)
    try:
        coroutine.send(None)  # a sync body runs to the end on the first step
    except StopIteration as done:
        return done.value
    coroutine.close()  # pragma: no cover - execute() of a sync tool never suspends
    msg = f"The tool `{tool.name}` suspended while running synchronously"  # pragma: no cover
    raise RuntimeError(msg)  # pragma: no cover


class DeadlinePassed(Exception):  # noqa: N818 - a signal, never escapes the executor
    """Raised by a job's tool when its review's deadline passed before it could start."""


class CallCancelled(Exception):  # noqa: N818 - a signal, never escapes the executor
    """Raised by a tool's body that stopped because its caller gave up after the call started.

    The call ends ``cancelled`` (outcome ``cancelled``), not ``failed``; the text of the
    exception is the result the model reads (the MCP gateway raises it when its client
    gives up on a call that is running on the upstream server).
    """


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    """``value`` as JSON data with every spelling of ``secrets`` replaced, or ``value`` itself
    when it is not JSON data (:func:`~toolguard._core.limits.bounded_result` then says so)."""
    try:
        return scrub_data(to_json_data(value), secrets)
    except Exception:  # a hostile value (too deep, unconvertible): bounded_result's to handle
        return value


class Executor:
    """Runs validated calls: at most ``max_concurrency`` at once (``None``: no limit).

    The limit is shared by every batch this executor runs (a runner keeps
    one for all its turns).
    """

    __slots__ = ("_limiter",)

    def __init__(self, max_concurrency: int | None) -> None:
        self._limiter = anyio.CapacityLimiter(max_concurrency) if max_concurrency else None

    async def run(
        self,
        call: ToolCall,
        tool: Tool[Any, Any],
        args: dict[str, Any],
        *,
        in_thread: bool,
        limits: Limits,
        decided: telemetry.Decided | None = None,
    ) -> ToolResult:
        """Run one call; never raises: a failure is an error result, secrets scrubbed.

        ``in_thread``: sync tools run in a worker thread (unless the tool says
        otherwise); ``limits`` bound the recorded result; ``decided``: who let
        it run, for its span (when the application traces).
        """
        otel = telemetry.tracer()
        if otel is None:
            return (await self._run(call, tool, args, in_thread, limits))[0]
        with telemetry.running(otel, call.id, tool.name, decided, tool=tool) as span:
            result, error = await self._run(call, tool, args, in_thread, limits)
            if isinstance(error, DeadlinePassed):
                telemetry.finish(span, "expired")
            else:
                error_type = type(error).__qualname__ if error is not None else None
                telemetry.finish(span, telemetry.outcome_of(result), error_type)
        return result

    async def _run(
        self,
        call: ToolCall,
        tool: Tool[Any, Any],
        args: dict[str, Any],
        in_thread: bool,  # noqa: FBT001 - private, positional for speed
        limits: Limits,
    ) -> tuple[ToolResult, Exception | None]:
        """The call's result, and the exception the tool raised (if it did)."""
        try:
            if self._limiter is not None:
                async with self._limiter:
                    value = await run_body(tool, args, in_thread=in_thread)
            else:
                value = await run_body(tool, args, in_thread=in_thread)
        except CallCancelled as exc:  # stopped where it ran: its caller gave up
            return error_result(call, str(exc), "cancelled", tool.name), exc
        except Exception as exc:  # the one failure text of every path, secrets scrubbed
            text = failure_text(tool, exc, args, call.args)
            return error_result(call, text, "failed", tool.name), exc
        secrets: list[str] = []
        if tool.redacted:  # a result echoing a secret argument: recorded and shown scrubbed
            secrets = tool.secret_texts(args) + tool.secret_texts(call.args)
            # Before the text is cut to Limits.max_result_bytes, so no piece of a secret is left.
            value = _scrubbed(value, secrets)
        # Never raises: the tool ran, so its result is recorded whatever it is (see Limits).
        content, data = bounded_result(value, limits)
        if secrets:  # a secret the JSON text spells across two of its texts
            content, data = scrub(content, secrets), scrub_data(data, secrets)
        result = trusted(
            ToolResult,
            {
                "call_id": call.id,
                "name": tool.name,
                "status": "success",
                "content": content,
                "value": data,
                "outcome": None,
            },
        )
        return result, None

    async def run_all(
        self,
        jobs: list[Job],
        *,
        in_thread: bool,
        limits: Limits,
        decided: Mapping[str, telemetry.Decided] | None = None,
    ) -> list[ToolResult]:
        """Run every job concurrently; one result per job, in order.

        ``decided``: who let each call run, by call id (for the spans).
        """
        by = decided or {}
        if len(jobs) == 1:
            call = jobs[0][0]
            return [
                await self.run(
                    *jobs[0], in_thread=in_thread, limits=limits, decided=by.get(call.id)
                )
            ]
        out: list[ToolResult | None] = [None] * len(jobs)

        async def one(i: int) -> None:
            call = jobs[i][0]
            out[i] = await self.run(
                *jobs[i], in_thread=in_thread, limits=limits, decided=by.get(call.id)
            )

        async with anyio.create_task_group() as tg:
            for i in range(len(jobs)):
                tg.start_soon(one, i)
        return [r for r in out if r is not None]
