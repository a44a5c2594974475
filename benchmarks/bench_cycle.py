"""Full human-in-the-loop cycle: toolguard's ReviewedChat against LangChain's HITL agent.

One cycle is what a chat user goes through when the agent wants to do
something dangerous: a user message; the model proposes one guarded
``send_email`` call; the run pauses for review; a person approves; the tool
runs; the model answers with text; the final reply comes back. Every cycle
starts a new conversation thread. The model is scripted (no network), so
only the frameworks' own overhead is measured.

Subjects:

* toolguard: ``await chat.send_message(text)`` then
  ``await chat.submit_review([{"type": "approve"}], thread_id)``, with a
  ``MemoryStore`` and with a ``SQLiteStore`` (a file in a temporary folder).
* LangChain (when ``langchain`` and ``langgraph`` are installed, the
  ``bench`` extra): ``create_agent`` + ``HumanInTheLoopMiddleware`` with
  ``agent.invoke(...)`` -> ``__interrupt__`` ->
  ``agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)``,
  with ``InMemorySaver`` and ``SqliteSaver``, and the same through
  ``ainvoke`` with ``AsyncSqliteSaver``.

* the same cycle through the real ``openai`` client (``AsyncOpenAI`` on an
  ``httpx.MockTransport`` that answers like a Chat Completions server, no
  network): a hand-written loop on the bare client ("bare openai loop",
  state in a dict), and ``ReviewedChat`` + ``OpenAIChatModel`` in memory
  and with SQLite, on the very same transport. Their ratio is toolguard's
  whole cost next to the model call; its verdict is the median of the
  per-round ratios of the adjacent batches (steadier on a shared machine
  than the ratio of the two medians, which is printed too).
* peers on that same transport (when installed; ``--no-peers`` leaves them
  out): Pydantic AI deferred tools (``Agent(..., output_type=[str,
  DeferredToolRequests])``, a tool with ``requires_approval=True``, approved
  with ``DeferredToolResults(approvals={id: True})``, the message history
  kept in a dict) and the OpenAI Agents SDK's approvals
  (``function_tool(needs_approval=True)``, ``result.interruptions``,
  ``state.approve(...)``, ``Runner.run(agent, state)``, the ``RunState``
  kept in a dict; tracing disabled).

The LangChain/toolguard ratio of a store compares toolguard's main row with
the *fastest* LangChain variant measured for that store, so no calling
style or setting is picked to flatter toolguard.

Every cycle is checked while it is timed: the first call must pause with a
review of ``send_email`` and must not have run the tool; the second must
run the tool exactly once and return the model's final text. After each
batch the model-call count and the stored history of the last thread are
checked too. A broken cycle stops the benchmark with an error.

Run from the repository root::

    .venv/bin/pip install -e '.[bench]'                  # LangChain, LangGraph (optional)
    .venv/bin/python benchmarks/bench_cycle.py           # full run (a minute or two)
    .venv/bin/python benchmarks/bench_cycle.py --quick   # a few cycles (smoke test)
    .venv/bin/python benchmarks/bench_cycle.py --json    # machine-readable output
    .venv/bin/python benchmarks/bench_cycle.py --profile # where toolguard's time goes
    .venv/bin/python benchmarks/bench_cycle.py --no-langchain  # toolguard only
    .venv/bin/python benchmarks/bench_cycle.py --no-openai     # without the openai rows
    .venv/bin/python benchmarks/bench_cycle.py --no-peers      # without Pydantic AI, Agents SDK

Each number is the median over 41 short batches of the time per cycle in a
batch; the batches of all rows are interleaved so that drift of the machine
hits every row alike. Like :mod:`timeit`, the garbage collector is disabled
while a batch is timed.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import importlib.metadata
import importlib.util
import inspect
import itertools
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import anyio

import toolguard

USER_TEXT = "Mail Alice that the meeting is at 10."
EMAIL_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
TOOL_OUTPUT = "sent to alice@example.com"
REPLY = f"Done: {TOOL_OUTPUT}"
APPROVE = [{"type": "approve"}]

TARGETS = {"memory": 20.0, "sqlite": 5.0}
"""Least LangChain/toolguard ratio wanted, per store."""

OPENAI_TARGETS = {"memory": 1.15, "sqlite": 1.30}
"""Most (toolguard + OpenAIChatModel) / (bare openai loop) ratio wanted, per toolguard store."""

FRAMEWORK_TARGETS_US = {"memory": 150.0, "sqlite": 500.0}
"""Most µs per cycle wanted for toolguard's main row (scripted model), per store."""

STORE_NAMES = {"memory": "memory", "sqlite": "SQLite"}

# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """How long to measure."""

    batches: int
    """Batches per row; the median is taken over them."""
    toolguard_cycles: int
    """Timed toolguard cycles per batch."""
    langchain_cycles: int
    """Timed LangChain cycles per batch (they are much slower)."""
    peer_cycles: int
    """Timed cycles per batch of Pydantic AI and the OpenAI Agents SDK (slower too)."""
    warmup: int
    """Untimed cycles at the start of every batch."""


# Many short batches rather than a few long ones: on a shared machine the median of 41
# batches (and the per-round ratios of adjacent ones) shrugs off slow spells far better.
FULL = Settings(batches=41, toolguard_cycles=50, langchain_cycles=8, peer_cycles=10, warmup=3)
QUICK = Settings(batches=2, toolguard_cycles=10, langchain_cycles=3, peer_cycles=3, warmup=1)

# ----------------------------------------------------------------------------- results


@dataclass
class Probe:
    """What the scripted model and the tool saw: the benchmark's proof of work."""

    tool_runs: int = 0
    model_calls: int = 0


@dataclass
class Batch:
    """One timed batch: its cycles and what they did."""

    ns_per_cycle: float
    cpu_ns_per_cycle: float
    cycles: int
    pauses: int
    tool_runs: int
    model_calls: int


@dataclass
class Case:
    """One row: a framework, a store and a way of calling it."""

    framework: str
    store: str
    variant: str
    main: bool
    """Whether the row takes part in the ratios (toolguard: its main row per store)."""
    run_batch: Callable[[int], Batch]
    """Runs one timed batch (its index is given, for unique thread ids)."""
    batches: list[Batch] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The row as JSON data."""
        samples = [b.ns_per_cycle / 1_000 for b in self.batches]
        cpu = [b.cpu_ns_per_cycle / 1_000 for b in self.batches]
        return {
            "framework": self.framework,
            "store": self.store,
            "variant": self.variant,
            "main": self.main,
            "median_us": round(statistics.median(samples), 1),
            "min_us": round(min(samples), 1),
            "batches_us": [round(s, 1) for s in samples],
            "cpu_median_us": round(statistics.median(cpu), 1),
            "batches": len(self.batches),
            "cycles": sum(b.cycles for b in self.batches),
            "pauses": sum(b.pauses for b in self.batches),
            "tool_runs": sum(b.tool_runs for b in self.batches),
            "model_calls": sum(b.model_calls for b in self.batches),
            "verified": all(
                b.pauses == b.cycles == b.tool_runs and b.model_calls == 2 * b.cycles
                for b in self.batches
            ),
        }


def _fail(what: str) -> NoReturn:
    """Stop: a cycle did not do what the benchmark measures."""
    msg = f"bench_cycle: the cycle is broken: {what}"
    raise SystemExit(msg)


def _check_batch(label: str, batch: Batch, probe: Probe, warmup: int) -> Batch:
    """Fail unless every timed cycle paused once, ran the tool once and made 2 model calls."""
    total = batch.cycles + warmup
    if batch.pauses != batch.cycles or batch.tool_runs != batch.cycles:
        _fail(
            f"{label}: {batch.cycles} cycles, but {batch.pauses} paused correctly"
            f" and {batch.tool_runs} ran the tool once after approval"
        )
    if probe.tool_runs != total or probe.model_calls != 2 * total:
        _fail(
            f"{label}: {total} cycles ran the tool {probe.tool_runs} times"
            f" and called the model {probe.model_calls} times (expected {total} and {2 * total})"
        )
    return batch


class _Timed:
    """Times a section in wall-clock and in process CPU time, with the GC off (as timeit does)."""

    wall_ns: int = 0
    cpu_ns: int = 0

    def __enter__(self) -> _Timed:
        gc.collect()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._cpu = time.process_time_ns()
        self._wall = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_ns = time.perf_counter_ns() - self._wall
        self.cpu_ns = time.process_time_ns() - self._cpu
        if self._gc_was_enabled:
            gc.enable()


# ----------------------------------------------------------------------------- toolguard


class BenchModel:
    """A scripted ChatModel: proposes ``send_email`` to a user, then answers the tool's result."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.ids = itertools.count()

    async def complete(self, messages: Any, tools: Any) -> toolguard.ModelResponse:
        """Answer the last message (the ``toolguard.ChatModel`` protocol)."""
        self.probe.model_calls += 1
        last = messages[-1]
        if last["role"] == "tool":
            return toolguard.ModelResponse(text=f"Done: {last['content']}")
        call = toolguard.ToolCall(
            id=f"call_{next(self.ids)}", name="send_email", args=dict(EMAIL_ARGS)
        )
        return toolguard.ModelResponse(tool_calls=[call])


def fast_sync_tools_available() -> bool:
    """Whether this toolguard has ``requires_approval(in_thread=False)`` (0.2: yes)."""
    return "in_thread" in inspect.signature(toolguard.requires_approval).parameters


def _toolguard_tools(probe: Probe, *, sync: bool, in_thread: bool = True) -> dict[str, Any]:
    """The guarded ``send_email`` tool, counting its runs in ``probe``.

    ``in_thread=False`` marks the sync tool to run on the event loop's thread.
    """
    if sync:
        guard = toolguard.requires_approval(in_thread=False) if not in_thread else None

        def send_email_sync(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            probe.tool_runs += 1
            return f"sent to {to}"

        if guard is None:
            return {"send_email": toolguard.requires_approval(send_email_sync)}
        return {"send_email": guard(send_email_sync)}

    @toolguard.requires_approval
    async def send_email_async(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        probe.tool_runs += 1
        return f"sent to {to}"

    return {"send_email": send_email_async}


async def _toolguard_cycle(chat: toolguard.ReviewedChat, probe: Probe) -> tuple[bool, bool, str]:
    """One cycle; returns (paused correctly, tool ran once and reply is right, thread id)."""
    before = probe.tool_runs
    turn = await chat.send_message(USER_TEXT)
    review = turn.pending_review
    paused = (
        review is not None
        and turn.reply is None
        and probe.tool_runs == before
        and [a.name for a in review.action_requests] == ["send_email"]
    )
    done = await chat.submit_review(APPROVE, turn.thread_id)
    finished = done.reply == REPLY and done.pending_review is None and probe.tool_runs == before + 1
    return paused, finished, turn.thread_id


def _toolguard_case(
    store_kind: str, settings: Settings, *, sync_tool: bool = False, in_thread: bool = True
) -> Case:
    label = (
        f"toolguard/{store_kind}" + ("/sync" if sync_tool else "") + ("" if in_thread else "/fast")
    )

    async def batch(index: int) -> Batch:
        probe = Probe()
        with tempfile.TemporaryDirectory(prefix="bench_cycle_") as folder:
            store: toolguard.Store
            if store_kind == "sqlite":
                store = toolguard.SQLiteStore(Path(folder) / "toolguard.db")
            else:
                store = toolguard.MemoryStore()
            chat = toolguard.ReviewedChat(
                BenchModel(probe),
                _toolguard_tools(probe, sync=sync_tool, in_thread=in_thread),
                store=store,
            )
            for _ in range(settings.warmup):
                await _toolguard_cycle(chat, probe)
            cycles = settings.toolguard_cycles
            pauses = finished = 0
            thread_ids: set[str] = set()
            with _Timed() as timed:
                for _ in range(cycles):
                    paused, done, thread_id = await _toolguard_cycle(chat, probe)
                    pauses += paused
                    finished += done
                    thread_ids.add(thread_id)
            if len(thread_ids) != cycles:
                _fail(f"{label}: {cycles} cycles used only {len(thread_ids)} threads")
            state = await chat.get_thread(thread_id)
            roles = [m["role"] for m in state.messages]
            statuses = [a.status for a in state.actions]
            if roles != ["user", "assistant", "tool", "assistant"] or statuses != ["executed"]:
                _fail(f"{label}: stored thread has roles {roles} and action statuses {statuses}")
            if isinstance(store, toolguard.SQLiteStore):
                await store.aclose()
        timed_model_calls = probe.model_calls - 2 * settings.warmup
        result = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            timed_model_calls,
        )
        return _check_batch(label, result, probe, settings.warmup)

    how = "sync tool (worker thread)" if in_thread else "sync tool, in_thread=False (on the loop)"
    variant = "await send_message + submit_review, " + (how if sync_tool else "async tool")
    return Case(
        framework="toolguard",
        store=store_kind,
        variant=variant,
        main=not sync_tool,
        run_batch=lambda index: anyio.run(batch, index),
    )


# ----------------------------------------------------------------------------- openai client

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "the recipient's address."},
                    "subject": {"type": "string", "description": "the subject line."},
                    "body": {"type": "string", "description": "the text."},
                },
                "required": ["to", "subject", "body"],
                "additionalProperties": False,
            },
        },
    }
]


def openai_available() -> bool:
    """Whether the ``openai`` client (and httpx) can be imported."""
    return importlib.util.find_spec("openai") is not None


def _completion(index: int, message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _openai_client(probe: Probe) -> Any:
    """An ``AsyncOpenAI`` whose transport answers like a Chat Completions server.

    The same scripted answers for every subject: a user message gets a
    ``send_email`` tool call, a tool message gets ``Done: <its content>``.
    """
    import httpx
    import openai

    ids = itertools.count()

    def answer(request: httpx.Request) -> httpx.Response:
        probe.model_calls += 1
        body = json.loads(request.content)
        last = body["messages"][-1]
        index = next(ids)
        if last["role"] == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": f"Done: {last['content']}"}
            return httpx.Response(200, json=_completion(index, message, "stop"))
        call = {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "send_email", "arguments": json.dumps(EMAIL_ARGS)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return httpx.Response(200, json=_completion(index, message, "tool_calls"))

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return openai.AsyncOpenAI(
        api_key="bench", base_url="http://bench.invalid/v1", http_client=http, max_retries=0
    )


class _BareLoop:
    """A hand-written tool-calling loop on the bare client: what toolguard is compared with.

    It does the least a correct loop must: ask the model, hold a call to a
    dangerous tool until a person decides (state in a dict), then run it,
    give the model the result and return its answer.
    """

    DANGEROUS = frozenset({"send_email"})

    def __init__(self, client: Any, probe: Probe) -> None:
        self.client = client
        self.probe = probe
        self.paused: dict[str, tuple[list[dict[str, Any]], list[Any]]] = {}
        self.ids = itertools.count()

    async def send_email(self, to: str, subject: str, body: str) -> str:
        self.probe.tool_runs += 1
        return f"sent to {to}"

    async def send_message(self, text: str) -> tuple[str, list[str]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
        completion = await self.client.chat.completions.create(
            model="bench", messages=messages, tools=OPENAI_TOOLS, parallel_tool_calls=True
        )
        reply = completion.choices[0].message
        calls = list(reply.tool_calls or [])
        messages.append(reply.model_dump(exclude_none=True))
        waiting = [c.function.name for c in calls if c.function.name in self.DANGEROUS]
        thread_id = f"t{next(self.ids)}"
        self.paused[thread_id] = (messages, calls)
        return thread_id, waiting

    async def approve(self, thread_id: str) -> str:
        messages, calls = self.paused.pop(thread_id)
        for call in calls:
            output = await self.send_email(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        completion = await self.client.chat.completions.create(
            model="bench", messages=messages, tools=OPENAI_TOOLS, parallel_tool_calls=True
        )
        return str(completion.choices[0].message.content)


def _bare_openai_case(settings: Settings) -> Case:
    label = "bare openai loop"

    async def batch(index: int) -> Batch:
        probe = Probe()
        client = _openai_client(probe)
        loop = _BareLoop(client, probe)

        async def cycle() -> tuple[bool, bool]:
            before = probe.tool_runs
            thread_id, waiting = await loop.send_message(USER_TEXT)
            paused = waiting == ["send_email"] and probe.tool_runs == before
            reply = await loop.approve(thread_id)
            return paused, reply == REPLY and probe.tool_runs == before + 1

        for _ in range(settings.warmup):
            await cycle()
        cycles = settings.toolguard_cycles
        pauses = finished = 0
        with _Timed() as timed:
            for _ in range(cycles):
                paused, done = await cycle()
                pauses += paused
                finished += done
        await client.close()
        result = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            probe.model_calls - 2 * settings.warmup,
        )
        return _check_batch(label, result, probe, settings.warmup)

    return Case(
        framework="bare openai loop",
        store="memory",
        variant="AsyncOpenAI on a mock transport, hand-written loop, state in a dict",
        main=True,
        run_batch=lambda index: anyio.run(batch, index),
    )


def _toolguard_openai_case(store_kind: str, settings: Settings) -> Case:
    label = f"toolguard+openai/{store_kind}"
    from toolguard.openai import OpenAIChatModel

    async def batch(index: int) -> Batch:
        probe = Probe()
        client = _openai_client(probe)
        with tempfile.TemporaryDirectory(prefix="bench_cycle_") as folder:
            store: toolguard.Store
            if store_kind == "sqlite":
                store = toolguard.SQLiteStore(Path(folder) / "toolguard.db")
            else:
                store = toolguard.MemoryStore()
            chat = toolguard.ReviewedChat(
                OpenAIChatModel(client, model="bench"),
                _toolguard_tools(probe, sync=False),
                store=store,
            )
            for _ in range(settings.warmup):
                await _toolguard_cycle(chat, probe)
            cycles = settings.toolguard_cycles
            pauses = finished = 0
            with _Timed() as timed:
                for _ in range(cycles):
                    paused, done, _thread = await _toolguard_cycle(chat, probe)
                    pauses += paused
                    finished += done
            if isinstance(store, toolguard.SQLiteStore):
                await store.aclose()
        await client.close()
        result = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            probe.model_calls - 2 * settings.warmup,
        )
        return _check_batch(label, result, probe, settings.warmup)

    return Case(
        framework="toolguard+openai",
        store=store_kind,
        variant="ReviewedChat + OpenAIChatModel on the same mock transport",
        main=True,
        run_batch=lambda index: anyio.run(batch, index),
    )


# ----------------------------------------------------------------------------- peers

PYDANTIC_AI = "Pydantic AI"
AGENTS_SDK = "OpenAI Agents SDK"
PEERS = (PYDANTIC_AI, AGENTS_SDK)


def pydantic_ai_available() -> bool:
    """Whether Pydantic AI (``pydantic-ai-slim`` with its openai support) can be imported."""
    return openai_available() and importlib.util.find_spec("pydantic_ai") is not None


def agents_sdk_available() -> bool:
    """Whether the OpenAI Agents SDK (``openai-agents``) can be imported."""
    return openai_available() and importlib.util.find_spec("agents") is not None


def _peer_batch(
    label: str,
    settings: Settings,
    make: Callable[[Probe, Any], Any],
) -> Callable[[int], Batch]:
    """A batch runner for a peer: ``make(probe, client)`` gives ``(cycle, check_last)``.

    ``cycle()`` does one whole cycle and returns (paused correctly, finished
    correctly); ``check_last()`` checks the stored history of the last one.
    """

    async def batch(index: int) -> Batch:
        probe = Probe()
        client = _openai_client(probe)
        cycle, check_last = make(probe, client)
        for _ in range(settings.warmup):
            await cycle()
        cycles = settings.peer_cycles
        pauses = finished = 0
        with _Timed() as timed:
            for _ in range(cycles):
                paused, done = await cycle()
                pauses += paused
                finished += done
        check_last()
        await client.close()
        result = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            probe.model_calls - 2 * settings.warmup,
        )
        return _check_batch(label, result, probe, settings.warmup)

    return lambda index: anyio.run(batch, index)


def _pydantic_ai_case(settings: Settings) -> Case:
    """Pydantic AI deferred tools: pause with DeferredToolRequests, approve, run again."""
    label = "Pydantic AI"

    def make(probe: Probe, client: Any) -> Any:
        from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
        from pydantic_ai.messages import (
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel("bench", provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, output_type=[str, DeferredToolRequests])

        @agent.tool_plain(requires_approval=True)
        async def send_email(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            probe.tool_runs += 1
            return f"sent to {to}"

        paused_threads: dict[str, list[Any]] = {}
        ids = itertools.count()
        last: list[Any] = []

        async def cycle() -> tuple[bool, bool]:
            before = probe.tool_runs
            first = await agent.run(USER_TEXT)
            requests = first.output
            paused = (
                isinstance(requests, DeferredToolRequests)
                and [c.tool_name for c in requests.approvals] == ["send_email"]
                and not requests.calls
                and probe.tool_runs == before
            )
            thread_id = f"t{next(ids)}"
            paused_threads[thread_id] = first.all_messages()
            approvals: dict[str, bool] = {
                c.tool_call_id: True for c in getattr(requests, "approvals", [])
            }
            second = await agent.run(
                message_history=paused_threads.pop(thread_id),
                deferred_tool_results=DeferredToolResults(approvals=approvals),
            )
            last[:] = second.all_messages()
            return paused, second.output == REPLY and probe.tool_runs == before + 1

        def check_last() -> None:
            kinds = [
                (type(m).__name__, [type(p).__name__ for p in m.parts])
                for m in last
                if isinstance(m, ModelRequest | ModelResponse)
            ]
            expected = [
                ("ModelRequest", [UserPromptPart.__name__]),
                ("ModelResponse", [ToolCallPart.__name__]),
                ("ModelRequest", [ToolReturnPart.__name__]),
                ("ModelResponse", [TextPart.__name__]),
            ]
            if kinds != expected:
                _fail(f"{label}: final history is {kinds}")

        return cycle, check_last

    return Case(
        framework=PYDANTIC_AI,
        store="memory",
        variant="run -> DeferredToolRequests; run(message_history, DeferredToolResults)",
        main=True,
        run_batch=_peer_batch(label, settings, make),
    )


def _agents_sdk_case(settings: Settings) -> Case:
    """OpenAI Agents SDK approvals: interruptions, state.approve, Runner.run(agent, state)."""
    label = "OpenAI Agents SDK"

    def make(probe: Probe, client: Any) -> Any:
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            Runner,
            function_tool,
            set_tracing_disabled,
        )

        set_tracing_disabled(True)

        @function_tool(needs_approval=True)
        async def send_email(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            probe.tool_runs += 1
            return f"sent to {to}"

        agent: Any = Agent(
            name="bench",
            tools=[send_email],
            model=OpenAIChatCompletionsModel(model="bench", openai_client=client),
        )
        paused_threads: dict[str, Any] = {}
        ids = itertools.count()
        last: list[Any] = []

        async def cycle() -> tuple[bool, bool]:
            before = probe.tool_runs
            first = await Runner.run(agent, USER_TEXT)
            paused = [i.tool_name for i in first.interruptions] == [
                "send_email"
            ] and probe.tool_runs == before
            thread_id = f"t{next(ids)}"
            paused_threads[thread_id] = (first.to_state(), first.interruptions)
            state, interruptions = paused_threads.pop(thread_id)
            for item in interruptions:
                state.approve(item)
            second = await Runner.run(agent, state)
            last[:] = second.to_input_list()
            finished = (
                second.final_output == REPLY
                and not second.interruptions
                and probe.tool_runs == before + 1
            )
            return paused, finished

        def check_last() -> None:
            kinds = [(m.get("role"), m.get("type")) for m in last]
            expected = [
                ("user", None),
                (None, "function_call"),
                (None, "function_call_output"),
                ("assistant", "message"),
            ]
            if kinds != expected:
                _fail(f"{label}: final history is {kinds}")

        return cycle, check_last

    return Case(
        framework=AGENTS_SDK,
        store="memory",
        variant="Runner.run -> interruptions; state.approve; Runner.run(agent, state)",
        main=True,
        run_batch=_peer_batch(label, settings, make),
    )


def available_peers() -> list[str]:
    """The peers (names from :data:`PEERS`) installed here."""
    found = {PYDANTIC_AI: pydantic_ai_available(), AGENTS_SDK: agents_sdk_available()}
    return [name for name in PEERS if found[name]]


def peer_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each peer's median over toolguard + OpenAIChatModel's in memory, and over the bare loop."""
    ours = next(
        (r for r in rows if r["framework"] == "toolguard+openai" and r["store"] == "memory"),
        None,
    )
    bare = next((r for r in rows if r["framework"] == "bare openai loop"), None)
    if ours is None or bare is None:
        return []
    return [
        {
            "framework": row["framework"],
            "peer_us": row["median_us"],
            "toolguard_us": ours["median_us"],
            "bare_us": bare["median_us"],
            "ratio": round(row["median_us"] / ours["median_us"], 2),
            "ratio_of_min": round(row["min_us"] / ours["min_us"], 2),
            "ratio_of_cpu": round(row["cpu_median_us"] / ours["cpu_median_us"], 2),
            "over_bare": round(row["median_us"] / bare["median_us"], 2),
        }
        for row in rows
        if row["framework"] in PEERS
    ]


def paired_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the per-round ratios of two rows' batches (the verdict of a ratio).

    The batches of one round run one right after the other, so a slow spell
    of a shared machine hits both batches of a pair alike; the median of the
    pairs' ratios is far steadier than the ratio of two medians taken over
    the whole run (which is printed too).
    """
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def openai_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """toolguard + OpenAIChatModel over the bare openai loop, per toolguard store."""
    bare = next((r for r in rows if r["framework"] == "bare openai loop"), None)
    if bare is None:
        return []
    result = []
    for row in rows:
        if row["framework"] != "toolguard+openai":
            continue
        ratio = row["median_us"] / bare["median_us"]
        paired = paired_ratio(row["batches_us"], bare["batches_us"])
        target = OPENAI_TARGETS[row["store"]]
        result.append(
            {
                "store": row["store"],
                "toolguard_us": row["median_us"],
                "bare_us": bare["median_us"],
                "extra_us": round(row["median_us"] - bare["median_us"], 1),
                "ratio": round(ratio, 3),
                "ratio_of_min": round(row["min_us"] / bare["min_us"], 3),
                "paired_ratio": round(paired, 3),
                "target": target,
                "status": "PASS" if paired <= target else "MISS",
            }
        )
    return result


def framework_verdicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """toolguard's main rows (scripted model) against the µs-per-cycle targets."""
    result = []
    for row in rows:
        if row["framework"] != "toolguard" or not row["main"]:
            continue
        target = FRAMEWORK_TARGETS_US[row["store"]]
        result.append(
            {
                "store": row["store"],
                "median_us": row["median_us"],
                "min_us": row["min_us"],
                "target_us": target,
                "status": "PASS" if row["median_us"] <= target else "MISS",
            }
        )
    return result


# ----------------------------------------------------------------------------- LangChain


def langchain_available() -> bool:
    """Whether LangChain v1, LangGraph and the SQLite checkpointers can be imported."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("langchain", "langgraph", "langgraph.checkpoint.sqlite", "aiosqlite")
    )


def _langchain_agent(probe: Probe, checkpointer: Any) -> Any:
    """``create_agent`` + ``HumanInTheLoopMiddleware`` over the same script as ``BenchModel``."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    ids = itertools.count()

    def answer(messages: list[BaseMessage]) -> ChatResult:
        probe.model_calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage):
            message = AIMessage(content=f"Done: {last.content}")
        else:
            call = {
                "name": "send_email",
                "args": dict(EMAIL_ARGS),
                "id": f"call_{next(ids)}",
                "type": "tool_call",
            }
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    class BenchChatModel(BaseChatModel):
        """Proposes ``send_email`` to a user message, then answers the tool's result."""

        @property
        def _llm_type(self) -> str:
            return "bench-scripted"

        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
            return self  # the script ignores the tool schemas

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            return answer(messages)

        async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            return answer(messages)  # natively async, like a real provider's client

    def send_email(to: str, subject: str, body: str) -> str:
        probe.tool_runs += 1
        return f"sent to {to}"

    async def send_email_async(to: str, subject: str, body: str) -> str:
        probe.tool_runs += 1
        return f"sent to {to}"

    email_tool = StructuredTool.from_function(
        func=send_email, coroutine=send_email_async, name="send_email", description="Send an email."
    )
    return create_agent(
        BenchChatModel(),
        tools=[email_tool],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": True})],
        checkpointer=checkpointer,
    )


def _langchain_paused(result: dict[str, Any], probe: Probe, before: int) -> bool:
    """The first invoke stopped at an interrupt reviewing send_email, before the tool ran."""
    interrupts = result.get("__interrupt__")
    if not interrupts:
        return False
    return probe.tool_runs == before and [
        r["name"] for r in interrupts[0].value["action_requests"]
    ] == ["send_email"]


def _langchain_finished(result: dict[str, Any], probe: Probe, before: int) -> bool:
    """The resume ran the tool once and ended with the model's text."""
    last = result["messages"][-1]
    return (
        "__interrupt__" not in result
        and type(last).__name__ == "AIMessage"
        and last.content == REPLY
        and not last.tool_calls
        and probe.tool_runs == before + 1
    )


def _langchain_history(label: str, result: dict[str, Any]) -> None:
    kinds = [type(m).__name__ for m in result["messages"]]
    if kinds != ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]:
        _fail(f"{label}: final history is {kinds}")


def _configs(index: int, count: int) -> list[dict[str, Any]]:
    """Run configs with a new thread id per cycle."""
    return [{"configurable": {"thread_id": f"b{index}-c{i}"}} for i in range(count)]


_START = {"messages": [{"role": "user", "content": USER_TEXT}]}


def _langchain_sync_case(
    settings: Settings, store_kind: str, variant: str, saver: Callable[[str], Any]
) -> Case:
    """A row that calls ``agent.invoke``; ``saver(path)`` is a context manager."""
    from langgraph.types import Command

    resume: Any = Command(resume={"decisions": APPROVE})
    label = f"LangChain/{store_kind}/{variant}"

    def batch(index: int) -> Batch:
        probe = Probe()
        with (
            tempfile.TemporaryDirectory(prefix="bench_cycle_") as folder,
            saver(str(Path(folder) / "checkpoints.db")) as checkpointer,
        ):
            agent = _langchain_agent(probe, checkpointer)
            for config in _configs(-1 - index, settings.warmup):
                agent.invoke(_START, config)
                agent.invoke(resume, config)
            cycles = settings.langchain_cycles
            pauses = finished = 0
            result: dict[str, Any] = {}
            todo = _configs(index, cycles)
            with _Timed() as timed:
                for config in todo:
                    before = probe.tool_runs
                    result = agent.invoke(_START, config)
                    pauses += _langchain_paused(result, probe, before)
                    result = agent.invoke(resume, config)
                    finished += _langchain_finished(result, probe, before)
            _langchain_history(label, result)
        timed_model_calls = probe.model_calls - 2 * settings.warmup
        done = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            timed_model_calls,
        )
        return _check_batch(label, done, probe, settings.warmup)

    return Case("LangChain", store_kind, variant, main=True, run_batch=batch)


def _langchain_async_case(
    settings: Settings, store_kind: str, variant: str, saver: Callable[[str], Any]
) -> Case:
    """A row that awaits ``agent.ainvoke``; ``saver(path)`` is an async context manager."""
    from langgraph.types import Command

    resume: Any = Command(resume={"decisions": APPROVE})
    label = f"LangChain/{store_kind}/{variant}"

    async def batch(index: int) -> Batch:
        probe = Probe()
        with tempfile.TemporaryDirectory(prefix="bench_cycle_") as folder:
            async with saver(str(Path(folder) / "checkpoints.db")) as checkpointer:
                agent = _langchain_agent(probe, checkpointer)
                for config in _configs(-1 - index, settings.warmup):
                    await agent.ainvoke(_START, config)
                    await agent.ainvoke(resume, config)
                cycles = settings.langchain_cycles
                pauses = finished = 0
                result: dict[str, Any] = {}
                todo = _configs(index, cycles)
                with _Timed() as timed:
                    for config in todo:
                        before = probe.tool_runs
                        result = await agent.ainvoke(_START, config)
                        pauses += _langchain_paused(result, probe, before)
                        result = await agent.ainvoke(resume, config)
                        finished += _langchain_finished(result, probe, before)
                _langchain_history(label, result)
        timed_model_calls = probe.model_calls - 2 * settings.warmup
        done = Batch(
            timed.wall_ns / cycles,
            timed.cpu_ns / cycles,
            cycles,
            pauses,
            finished,
            timed_model_calls,
        )
        return _check_batch(label, done, probe, settings.warmup)

    return Case(
        "LangChain", store_kind, variant, main=True, run_batch=lambda i: anyio.run(batch, i)
    )


class _MemorySaver:
    """``InMemorySaver`` as a (sync and async) context manager, like the SQLite savers."""

    def __init__(self, _path: str) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        self.saver = InMemorySaver()

    def __enter__(self) -> Any:
        return self.saver

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> Any:
        return self.saver

    async def __aexit__(self, *exc: object) -> None:
        return None


class _SqliteNormalSaver:
    """``SqliteSaver`` with ``PRAGMA synchronous=NORMAL``, the setting toolguard uses."""

    def __init__(self, path: str) -> None:
        import sqlite3

        self.conn = sqlite3.connect(path, check_same_thread=False)

    def __enter__(self) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(self.conn)
        saver.setup()  # WAL, as SqliteSaver.from_conn_string sets it
        self.conn.execute("PRAGMA synchronous=NORMAL")
        return saver

    def __exit__(self, *exc: object) -> None:
        self.conn.close()


def _langchain_cases(settings: Settings) -> list[Case]:
    """The LangChain rows: sync and async calls, in memory and with SQLite."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    return [
        _langchain_sync_case(settings, "memory", "invoke, InMemorySaver", _MemorySaver),
        _langchain_async_case(settings, "memory", "ainvoke, InMemorySaver", _MemorySaver),
        _langchain_sync_case(
            settings, "sqlite", "invoke, SqliteSaver", SqliteSaver.from_conn_string
        ),
        _langchain_sync_case(
            settings, "sqlite", "invoke, SqliteSaver + synchronous=NORMAL", _SqliteNormalSaver
        ),
        _langchain_async_case(
            settings, "sqlite", "ainvoke, AsyncSqliteSaver", AsyncSqliteSaver.from_conn_string
        ),
    ]


# ----------------------------------------------------------------------------- running


def build_cases(
    settings: Settings,
    *,
    with_langchain: bool,
    with_openai: bool = False,
    peers: Sequence[str] = (),
) -> list[Case]:
    """Every row to measure, in report order (``peers``: names from :data:`PEERS`)."""
    cases = [
        _toolguard_case("memory", settings),
        _toolguard_case("memory", settings, sync_tool=True),
    ]
    if fast_sync_tools_available():
        cases.append(_toolguard_case("memory", settings, sync_tool=True, in_thread=False))
    cases += [
        _toolguard_case("sqlite", settings),
    ]
    if with_openai:
        cases += [
            _bare_openai_case(settings),
            _toolguard_openai_case("memory", settings),
            _toolguard_openai_case("sqlite", settings),
        ]
        if PYDANTIC_AI in peers:
            cases.append(_pydantic_ai_case(settings))
        if AGENTS_SDK in peers:
            cases.append(_agents_sdk_case(settings))
    if with_langchain:
        cases += _langchain_cases(settings)
    return cases


def measure(cases: list[Case], settings: Settings) -> None:
    """Run every case's batches, taking the cases in turn for each batch."""
    for index in range(settings.batches):
        for case in cases:
            case.batches.append(case.run_batch(index))


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each LangChain row's median over the median of toolguard's main row for its store."""
    main = {r["store"]: r for r in rows if r["framework"] == "toolguard" and r["main"]}
    result = []
    for row in rows:
        ours = main.get(row["store"])
        if row["framework"] != "LangChain" or ours is None:
            continue
        ratio = row["median_us"] / ours["median_us"]
        target = TARGETS[row["store"]]
        result.append(
            {
                "store": row["store"],
                "langchain_variant": row["variant"],
                "langchain_us": row["median_us"],
                "toolguard_us": ours["median_us"],
                "ratio": round(ratio, 2),
                "ratio_of_min": round(row["min_us"] / ours["min_us"], 2),
                "ratio_of_cpu": round(row["cpu_median_us"] / ours["cpu_median_us"], 2),
                "target": target,
                "status": "PASS" if ratio >= target else "MISS",
            }
        )
    return result


def verdicts(ratio_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per store, the target judged against the fastest LangChain variant (the worst ratio)."""
    result = []
    for store, target in TARGETS.items():
        candidates = [r for r in ratio_rows if r["store"] == store]
        if not candidates:
            continue
        worst = min(candidates, key=lambda r: r["ratio"])
        result.append(
            {
                "store": store,
                "target": target,
                "ratio": worst["ratio"],
                "against": worst["langchain_variant"],
                "status": worst["status"],
            }
        )
    return result


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Python, platform and package versions."""
    packages = (
        "toolguard-hitl",
        "pydantic",
        "anyio",
        "langchain",
        "langchain-core",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "aiosqlite",
        "openai",
        "pydantic-ai-slim",
        "openai-agents",
    )
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "sqlite": __import__("sqlite3").sqlite_version,
        "versions": {name: _version(name) for name in packages},
    }


def report(data: dict[str, Any]) -> str:
    """The human-readable table."""
    env = data["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v is not None)
    lines = [
        (
            "Full HITL cycle: message -> model proposes send_email -> pause -> approve"
            " -> tool runs -> model answers -> reply"
        ),
        (
            f"Python {env['python']} ({env['implementation']}), {env['platform']},"
            f" {env['cpus']} CPUs, load average {env['load_average']}, SQLite {env['sqlite']}"
        ),
        f"Versions: {versions}",
        f"Settings: {data['settings']}",
        "",
    ]
    header: tuple[str, ...] = (
        "framework",
        "store",
        "how it is called",
        "median µs",
        "min µs",
        "CPU µs",
        "cycles",
    )
    rows: list[tuple[str, ...]] = [
        (
            r["framework"],
            STORE_NAMES[r["store"]],
            r["variant"],
            f"{r['median_us']:,.0f}",
            f"{r['min_us']:,.0f}",
            f"{r['cpu_median_us']:,.0f}",
            str(r["cycles"]),
        )
        for r in data["rows"]
    ]
    lines += _table(header, rows, right=(3, 4, 5, 6))
    lines.append("")
    verified = [r for r in data["rows"] if r["verified"]]
    lines.append(
        f"Verified: {len(verified)}/{len(data['rows'])} rows; every timed cycle paused before"
        " the tool ran, ran the tool exactly once after approval, and returned the final reply."
    )
    lines.append("")
    lines.append("toolguard's own cycle (scripted model), against its targets:")
    lines += [
        f"  {STORE_NAMES[v['store']]}: median {v['median_us']:,.0f} µs (best {v['min_us']:,.0f})"
        f" (target <= {v['target_us']:,.0f} µs): {v['status']}"
        for v in data.get("framework_targets", [])
    ]
    lines.append("")
    if data.get("openai_ratios"):
        lines.append(
            "Through the openai client, on one mock transport: toolguard + OpenAIChatModel over"
            " the bare-client loop (the verdict: the median of the per-round ratios of"
            " adjacent batches):"
        )
        lines += [
            f"  {STORE_NAMES[r['store']]}: {r['paired_ratio']:.2f}x per round (medians"
            f" {r['toolguard_us']:,.0f} µs vs {r['bare_us']:,.0f} µs = {r['ratio']:.2f}x,"
            f" +{r['extra_us']:,.0f} µs; of best batches {r['ratio_of_min']:.2f}x)"
            f" (target <= {r['target']:.2f}x): {r['status']}"
            for r in data["openai_ratios"]
        ]
        lines.append("")
    if data.get("peer_ratios"):
        lines.append(
            "Peers on the same transport, over toolguard + OpenAIChatModel in memory (and over"
            " the bare loop):"
        )
        lines += [
            f"  {r['framework']}: {r['peer_us']:,.0f} µs vs {r['toolguard_us']:,.0f} µs"
            f" = {r['ratio']:.2f}x (of best batches {r['ratio_of_min']:.2f}x, of CPU"
            f" {r['ratio_of_cpu']:.2f}x; {r['over_bare']:.2f}x the bare loop)"
            for r in data["peer_ratios"]
        ]
        lines.append("")
    if data["ratios"]:
        header = (
            "store",
            "LangChain variant",
            "LangChain µs",
            "toolguard µs",
            "ratio",
            "of min",
            "of CPU",
            "target",
            "",
        )
        rows = [
            (
                STORE_NAMES[r["store"]],
                r["langchain_variant"],
                f"{r['langchain_us']:,.0f}",
                f"{r['toolguard_us']:,.0f}",
                f"{r['ratio']:.1f}x",
                f"{r['ratio_of_min']:.1f}x",
                f"{r['ratio_of_cpu']:.1f}x",
                f">= {r['target']:.0f}x",
                r["status"],
            )
            for r in data["ratios"]
        ]
        lines.append(
            "LangChain / toolguard: ratio of the median times per cycle (the verdict), of the"
            " best batches, and of the median CPU times:"
        )
        lines += _table(header, rows, right=(2, 3, 4, 5, 6))
        lines.append("")
        lines.append("Targets, judged against the fastest LangChain variant of each store:")
        lines += [
            f"  {STORE_NAMES[v['store']]}: {v['ratio']:.1f}x (target >= {v['target']:.0f}x,"
            f" against {v['against']}): {v['status']}"
            for v in data["targets"]
        ]
    else:
        lines.append(
            "LangChain not installed: no comparison (pip install -e '.[bench]' to add it)."
        )
    return "\n".join(lines)


def _table(
    header: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: tuple[int, ...]
) -> list[str]:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]


# ----------------------------------------------------------------------------- profiling


def profile(settings: Settings, top: int = 30) -> str:
    """cProfile of toolguard's cycles (memory and SQLite), by cumulative µs per cycle."""
    out: list[str] = []
    cycles = settings.toolguard_cycles
    for store_kind in ("memory", "sqlite"):

        async def run(store_kind: str = store_kind) -> float:
            probe = Probe()
            with tempfile.TemporaryDirectory(prefix="bench_cycle_") as folder:
                store: toolguard.Store = (
                    toolguard.SQLiteStore(Path(folder) / "toolguard.db")
                    if store_kind == "sqlite"
                    else toolguard.MemoryStore()
                )
                chat = toolguard.ReviewedChat(
                    BenchModel(probe), _toolguard_tools(probe, sync=False), store=store
                )
                for _ in range(settings.warmup):
                    await _toolguard_cycle(chat, probe)
                profiler = cProfile.Profile()
                start = time.perf_counter()
                profiler.enable()
                for _ in range(cycles):
                    await _toolguard_cycle(chat, probe)
                profiler.disable()
                elapsed = time.perf_counter() - start
                if isinstance(store, toolguard.SQLiteStore):
                    await store.aclose()
            stats = pstats.Stats(profiler)
            entries = sorted(
                stats.stats.items(),  # type: ignore[attr-defined]
                key=lambda item: item[1][3],
                reverse=True,
            )
            out.append(
                f"toolguard, {STORE_NAMES[store_kind]}: {cycles} cycles, "
                f"{elapsed / cycles * 1e6:,.0f} µs per cycle under the profiler"
                " (a coroutine counts one call per resumption)"
            )
            out.append(f"{'cum µs/cycle':>12}  {'own µs/cycle':>12}  {'calls/cycle':>11}  function")
            for (filename, lineno, name), (_cc, calls, own, cum, _callers) in entries[:top]:
                where = f"{Path(filename).name}:{lineno}" if lineno else filename
                out.append(
                    f"{cum / cycles * 1e6:12.1f}  {own / cycles * 1e6:12.1f}"
                    f"  {calls / cycles:11.1f}  {name} ({where})"
                )
            out.append("")
            return elapsed

        anyio.run(run)
    return "\n".join(out)


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Measure, verify, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few cycles (smoke test)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--profile", action="store_true", help="profile toolguard's cycles instead of comparing"
    )
    parser.add_argument(
        "--no-langchain", action="store_true", help="measure toolguard only, even if installed"
    )
    parser.add_argument(
        "--no-openai", action="store_true", help="leave out the rows through the openai client"
    )
    parser.add_argument(
        "--no-peers",
        action="store_true",
        help="leave out Pydantic AI and the OpenAI Agents SDK, even if installed",
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    if args.profile:
        print(profile(settings))
        return 0
    with_langchain = langchain_available() and not args.no_langchain
    with_openai = openai_available() and not args.no_openai
    peers = [] if args.no_peers or not with_openai else available_peers()
    cases = build_cases(
        settings, with_langchain=with_langchain, with_openai=with_openai, peers=peers
    )
    started = dt.datetime.now(dt.timezone.utc)
    measure(cases, settings)
    rows = [case.summary() for case in cases]
    ratio_rows = ratios(rows)
    data = {
        "benchmark": "bench_cycle",
        "date": started.isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/bench_cycle.py", *(argv or sys.argv[1:])]),
        "environment": environment(),
        "settings": asdict(settings),
        "langchain": with_langchain,
        "langchain_calling": (
            "sync agent.invoke (InMemorySaver, SqliteSaver) and async agent.ainvoke"
            " (InMemorySaver, AsyncSqliteSaver)"
            if with_langchain
            else None
        ),
        "rows": rows,
        "ratios": ratio_rows,
        "targets": verdicts(ratio_rows),
        "openai_ratios": openai_ratios(rows),
        "peers": peers,
        "peer_ratios": peer_ratios(rows),
        "framework_targets": framework_verdicts(rows),
        "verified": all(r["verified"] for r in rows),
    }
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else report(data))
    return 0 if data["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
