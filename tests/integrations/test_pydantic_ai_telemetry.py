"""Under an instrumented Pydantic AI run, toolguard's spans nest under the agent's own."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolguard
from tests.helpers import ours
from toolguard import requires_approval
from toolguard.integrations import pydantic_ai as tg


def make_tools(sent: list[str]) -> list[Any]:
    def search_contacts(query: str) -> list[str]:
        """Find contacts by name."""
        return ["alice@example.com"]

    @requires_approval
    def send_email(to: str, password: str = "") -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    return [search_contacts, send_email]


def scripted(*responses: ModelResponse) -> FunctionModel:
    queue = list(responses)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return queue.pop(0) if queue else ModelResponse(parts=[TextPart("Done.")])

    return FunctionModel(answer)


async def test_spans_nest_under_the_agents_tool_span_and_name_the_reviewer(
    spans: InMemorySpanExporter,
) -> None:
    sent: list[str] = []
    model = scripted(
        ModelResponse(
            parts=[
                ToolCallPart("search_contacts", {"query": "alice"}, tool_call_id="c1"),
                ToolCallPart("send_email", {"to": "alice@example.com", "password": "s3cr3t"}, "c2"),
            ]
        )
    )
    agent = Agent(
        model,
        toolsets=[tg.toolset(make_tools(sent))],
        output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
    )
    agent.instrument = True  # Pydantic AI's own spans, on the global tracer provider
    first = await agent.run("Mail Alice")
    assert isinstance(first.output, DeferredToolRequests)
    results = tg.deferred_results(first.output, [{"type": "approve"}], reviewer="ana")
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert (second.output, sent) == ("Done.", ["alice@example.com"])

    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    found = [
        (s.name, {k: v for k, v in (s.attributes or {}).items() if k != "toolguard.review_id"})
        for s in ours(spans)
    ]
    assert found == [
        (
            "execute_tool search_contacts",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_contacts",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": "c1",
                "toolguard.outcome": "executed",
            },
        ),
        (
            "toolguard.review",
            {
                "gen_ai.tool.name": "send_email",
                "toolguard.review.decision": "approve",
                "toolguard.decided_by": "ana",
                "toolguard.review.status": "approved",
            },
        ),
        (
            "execute_tool send_email",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "send_email",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": "c2",
                "toolguard.decided_by": "ana",
                "toolguard.review.wait_ms": found[2][1].get("toolguard.review.wait_ms", -1),
                "toolguard.outcome": "executed",
            },
        ),
    ]
    assert found[2][1]["toolguard.review.wait_ms"] >= 0
    for span in ours(spans):
        if span.name.startswith("execute_tool"):
            assert span.parent is not None
            parent = by_id[span.parent.span_id]
            # Pydantic AI's own span for the tool call (its scope is pydantic-ai's).
            assert parent.instrumentation_scope is not None
            assert parent.instrumentation_scope.name != "toolguard"
            assert (parent.attributes or {}).get("gen_ai.tool.call.id") == span.attributes[
                "gen_ai.tool.call.id"
            ]
    assert all("s3cr3t" not in str(dict(s.attributes or {})) for s in ours(spans))


async def test_a_call_an_allow_rule_lets_run_is_decided_by_the_rule(
    spans: InMemorySpanExporter,
) -> None:
    sent: list[str] = []
    model = scripted(
        ModelResponse(
            parts=[ToolCallPart("send_email", {"to": "team@example.com"}, tool_call_id="c9")]
        )
    )
    rules = toolguard.Rules(allow=['send_email(to="*@example.com")'])
    agent = Agent(model, toolsets=[tg.toolset(toolguard.guard(make_tools(sent), rules=rules))])
    result = await agent.run("Mail the team")

    assert (result.output, sent) == ("Done.", ["team@example.com"])
    assert [(s.name, dict(s.attributes or {})) for s in ours(spans)] == [
        (
            "execute_tool send_email",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "send_email",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": "c9",
                "toolguard.decided_by": "rule",
                "toolguard.outcome": "executed",
            },
        )
    ]
