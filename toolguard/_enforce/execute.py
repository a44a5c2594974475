"""Running the calls that may run: concurrently, bounded, each result recorded whatever it is."""

from __future__ import annotations

from typing import Any

import anyio

from toolguard._core.limits import Limits, bounded_result
from toolguard._core.records import ToolCall, ToolResult, trusted
from toolguard._enforce.decide import failure_text
from toolguard._enforce.step import error_result
from toolguard._policy.redact import scrub, scrub_data
from toolguard._tools.tool import Tool

Job = tuple[ToolCall, Tool[Any, Any], dict[str, Any]]
"""A call to run: the call, its tool and its validated arguments."""


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
    ) -> ToolResult:
        """Run one call; never raises: a failure is an error result, secrets scrubbed.

        ``in_thread``: sync tools run in a worker thread (unless the tool says
        otherwise); ``limits`` bound the recorded result.
        """
        try:
            if self._limiter is not None:
                async with self._limiter:
                    value = await tool.execute(args, in_thread=in_thread)
            else:
                value = await tool.execute(args, in_thread=in_thread)
        except Exception as exc:  # the one failure text of every path, secrets scrubbed
            return error_result(call, failure_text(tool, exc, args, call.args), "failed", tool.name)
        # Never raises: the tool ran, so its result is recorded whatever it is (see Limits).
        content, data = bounded_result(value, limits)
        if tool.redacted:  # a result echoing a secret argument: recorded and shown scrubbed
            secrets = tool.secret_texts(args) + tool.secret_texts(call.args)
            content, data = scrub(content, secrets), scrub_data(data, secrets)
        return trusted(
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

    async def run_all(
        self, jobs: list[Job], *, in_thread: bool, limits: Limits
    ) -> list[ToolResult]:
        """Run every job concurrently; one result per job, in order."""
        if len(jobs) == 1:
            return [await self.run(*jobs[0], in_thread=in_thread, limits=limits)]
        out: list[ToolResult | None] = [None] * len(jobs)

        async def one(i: int) -> None:
            out[i] = await self.run(*jobs[i], in_thread=in_thread, limits=limits)

        async with anyio.create_task_group() as tg:
            for i in range(len(jobs)):
                tg.start_soon(one, i)
        return [r for r in out if r is not None]
