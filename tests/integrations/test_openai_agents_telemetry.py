"""OpenTelemetry spans of Agents SDK runs guarded by toolguard.

The Agents SDK traces with its own processors, not OpenTelemetry; OpenInference's
processor turns its spans into OpenTelemetry ones (the SDK's own exporter is
replaced by it, so nothing leaves 127.0.0.1). The agent talks to the local
scripted server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents import trace as agents_trace
from openinference.instrumentation import TraceConfig
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.helpers import ours, span_named, tool_call_attributes
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls
from toolguard import Rules, Toolset, guard, requires_approval
from toolguard._core import telemetry
from toolguard.integrations import openai_agents as tg

SECRET = "hunter2-very-secret"  # noqa: S105 - a password that must never reach a span
SEARCH = ("c1", "search_contacts", {"query": "alice"})
SEND = ("c2", "send_email", {"to": "alice@example.com", "password": SECRET})


@pytest.fixture(autouse=True)
def _no_sdk_tracing() -> Iterator[None]:
    """The SDK's own exporter would call api.openai.com: off unless a test replaces it."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(True)


@pytest.fixture
def instrumented(spans: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    """The SDK's spans as OpenTelemetry spans through OpenInference (its exporter replaced)."""
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(
        tracer_provider=trace.get_tracer_provider(),
        config=TraceConfig(hide_inputs=True, hide_outputs=True),
    )
    set_tracing_disabled(False)
    yield spans
    set_tracing_disabled(True)
    instrumentor.uninstrument()


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as opened:
        yield opened


def make_tools(sent: list[str]) -> Toolset:
    def search_contacts(query: str) -> list[str]:
        """Find contacts by name."""
        return ["alice@example.com"]

    @requires_approval(redact=["password"])
    def send_email(to: str, password: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    def run_shell(command: str) -> str:
        """Run a shell command."""
        sent.append(command)
        return f"ran {command}"

    rules = Rules(allow=['run_shell(command="ls *")'], deny=['run_shell(command="rm *")'])
    return guard([search_contacts, send_email, run_shell], rules=rules)


def make_agent(client: openai.AsyncOpenAI, sent: list[str]) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model="scripted-model", openai_client=client)
    return Agent(name="assistant", model=model, tools=tg.function_tools(make_tools(sent)))


def parent(exporter: InMemorySpanExporter, span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None
    [found] = [s for s in exporter.get_finished_spans() if s.context.span_id == span.parent.span_id]
    return found


def assert_no_secret(spans: list[ReadableSpan]) -> None:
    texts = json.dumps([[dict(s.attributes or {}), list(s.events)] for s in spans], default=str)
    assert "hunter2" not in texts


async def test_spans_nest_under_the_sdks_own_tool_spans_and_name_the_reviewer(
    instrumented: InMemorySpanExporter,
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
) -> None:
    sent: list[str] = []
    server.add(reply_tool_calls([SEARCH, SEND]), reply_text("Done."))
    agent = make_agent(client, sent)
    first = await Runner.run(agent, "Mail Alice", context={})
    state = first.to_state()
    tg.apply_decisions(state, [{"type": "approve"}], reviewer="ana")
    # Resumed in the same process, the run would continue the paused run's SDK trace, whose
    # OpenInference root has ended; a trace of its own keeps the resume's spans recorded.
    with agents_trace("Resumed workflow"):
        done = await Runner.run(agent, state)
    assert (done.final_output, sent) == ("Done.", ["alice@example.com"])

    entry = done.context_wrapper.context[tg.TRACE_KEY]["c2"]
    assert set(entry) == {"review_id", "asked_at", "decided_at", "decision", "by"}
    assert (entry["decision"], entry["by"]) == ("approve", "ana")
    send = span_named(instrumented, "execute_tool send_email")
    review = span_named(instrumented, "toolguard.review")
    wait_ms = round((entry["decided_at"] - entry["asked_at"]) * 1000)
    assert [(s.name, dict(s.attributes or {})) for s in ours(instrumented)] == [
        (
            "execute_tool search_contacts",
            tool_call_attributes("search_contacts", "c1", outcome="executed"),
        ),
        (
            "toolguard.review",
            {
                "toolguard.review_id": entry["review_id"],
                "gen_ai.tool.name": "send_email",
                "toolguard.review.decision": "approve",
                "toolguard.decided_by": "ana",
                "toolguard.review.status": "approved",
            },
        ),
        (
            "execute_tool send_email",
            tool_call_attributes(
                "send_email",
                "c2",
                decided_by="ana",
                review_id=entry["review_id"],
                review__wait_ms=(send.attributes or {})["toolguard.review.wait_ms"],
                outcome="executed",
            ),
        ),
    ]
    assert abs((send.attributes or {})["toolguard.review.wait_ms"] - wait_ms) <= 1
    assert parent(instrumented, review) == send
    for span in ours(instrumented):
        if not span.name.startswith("execute_tool"):
            continue
        framework = parent(instrumented, span)  # OpenInference's span for the SDK's tool call
        assert framework.instrumentation_scope is not None
        assert framework.instrumentation_scope.name == "openinference.instrumentation.openai_agents"
        tool_name = (span.attributes or {})["gen_ai.tool.name"]
        assert (framework.name, (framework.attributes or {})["tool.name"]) == (tool_name, tool_name)
    # Neither toolguard nor (with its inputs and outputs hidden) OpenInference exports the secret.
    assert_no_secret(list(instrumented.get_finished_spans()))


async def test_a_rejection_is_recorded_when_decided_under_the_callers_span(
    spans: InMemorySpanExporter, server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    sent: list[str] = []
    server.add(reply_tool_calls([SEND]), reply_text("Not sent."))
    agent = make_agent(client, sent)
    first = await Runner.run(agent, "Mail Alice", context={})
    state = first.to_state()
    with trace.get_tracer("app").start_as_current_span("review screen") as screen:
        tg.apply_decisions(state, [{"type": "reject", "message": f"not {SECRET}"}], reviewer="bo")
    await Runner.run(agent, state)
    assert sent == []

    entry = state._context.context[tg.TRACE_KEY]["c2"]
    send = span_named(spans, "execute_tool send_email")
    review = span_named(spans, "toolguard.review")
    assert dict(send.attributes or {}) == tool_call_attributes(
        "send_email",
        "c2",
        decided_by="bo",
        review_id=entry["review_id"],
        review__wait_ms=(send.attributes or {})["toolguard.review.wait_ms"],
        outcome="rejected",
    )
    assert dict(review.attributes or {}) == {
        "toolguard.review_id": entry["review_id"],
        "gen_ai.tool.name": "send_email",
        "toolguard.review.decision": "reject",
        "toolguard.decided_by": "bo",
        "toolguard.review.status": "rejected",
    }
    assert parent(spans, review) == send
    assert parent(spans, send).context.span_id == screen.get_span_context().span_id
    assert len(ours(spans)) == 2
    assert_no_secret(ours(spans))


async def test_an_edit_and_rules_without_the_sdks_spans_nest_under_the_callers_span(
    spans: InMemorySpanExporter, server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    sent: list[str] = []
    server.add(
        reply_tool_calls(
            [
                ("r1", "run_shell", {"command": "rm -rf /srv"}),
                ("r2", "run_shell", {"command": "ls /srv"}),
                SEND,
            ]
        ),
        reply_text("Done."),
    )
    agent = make_agent(client, sent)
    app = trace.get_tracer("app")
    with app.start_as_current_span("first run") as first_run:
        first = await Runner.run(agent, "Clean up and mail Alice")
    state = first.to_state()
    edited = {"name": "send_email", "args": {"to": "bob@example.com", "password": "[redacted]"}}
    tg.apply_decisions(state, [{"type": "edit", "edited_action": edited}])
    with app.start_as_current_span("resume") as resume:
        await Runner.run(agent, state)
    assert sent == ["ls /srv", "bob@example.com"]

    runs = {
        str((s.attributes or {})["gen_ai.tool.call.id"]): s
        for s in ours(spans)
        if s.name != "toolguard.review"
    }
    entry = state._context.context[tg.TRACE_KEY]["c2"]
    assert {k: dict(s.attributes or {}) for k, s in runs.items()} == {
        "r1": tool_call_attributes("run_shell", "r1", decided_by="rule", outcome="denied"),
        "r2": tool_call_attributes("run_shell", "r2", decided_by="rule", outcome="executed"),
        "c2": tool_call_attributes(
            "send_email",
            "c2",
            review_id=entry["review_id"],
            review__wait_ms=(runs["c2"].attributes or {})["toolguard.review.wait_ms"],
            outcome="executed",
        ),
    }
    assert dict(span_named(spans, "toolguard.review").attributes or {}) == {
        "toolguard.review_id": entry["review_id"],
        "gen_ai.tool.name": "send_email",
        "toolguard.review.decision": "edit",
        "toolguard.review.status": "edited",
    }
    first_id = first_run.get_span_context().span_id
    assert [parent(spans, runs[k]).context.span_id for k in ("r1", "r2")] == [first_id, first_id]
    assert parent(spans, runs["c2"]).context.span_id == resume.get_span_context().span_id
    assert_no_secret(ours(spans))


async def test_without_a_tracer_provider_nothing_is_recorded_or_kept(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    exporter = InMemorySpanExporter()
    unused = TracerProvider()
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracer() is None
    sent: list[str] = []
    server.add(reply_tool_calls([SEND]), reply_text("Done."))
    agent = make_agent(client, sent)
    first = await Runner.run(agent, "Mail Alice", context={})
    state = first.to_state()
    tg.apply_decisions(state, [{"type": "approve"}], reviewer="ana")
    done = await Runner.run(agent, state)
    assert sent == ["alice@example.com"]
    assert done.context_wrapper.context == {}  # no review kept for spans nobody records
    assert exporter.get_finished_spans() == ()
    unused.shutdown()
