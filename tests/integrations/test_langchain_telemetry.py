"""OpenTelemetry spans of LangChain agents guarded by toolguard (tools alone, or the middleware)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.helpers import ours, span_named, tool_call_attributes
from toolguard import Rules, Toolset, guard, requires_approval
from toolguard._core import telemetry
from toolguard.integrations import langchain as tg

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
MODES = ["middleware", "tools"]
SECRET = "hunter2-very-secret"  # noqa: S105 - a password that must never reach a span


class FakeModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class Mail:
    """A mailbox: a safe search, a guarded send with a redacted password, a failing login."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        ran = self.ran

        def search_mail(query: str) -> list[str]:
            """Search the mailbox."""
            ran.append(f"search {query}")
            return [f"mail about {query}"]

        @requires_approval(redact=["password"])
        def send_email(to: str, password: str) -> str:
            """Send an email."""
            ran.append(f"send {to}")
            return f"sent to {to}"

        def login(user: str, password: str) -> str:
            """Log in."""
            msg = f"wrong password {password} for {user}"
            raise PermissionError(msg)

        def run_shell(command: str) -> str:
            """Run a shell command."""
            ran.append(f"shell {command}")
            return f"ran {command}"

        rules = Rules(
            allow=['run_shell(command="ls *")', "login"], deny=['run_shell(command="rm *")']
        )
        self.toolset: Toolset = guard([search_mail, send_email, login, run_shell], rules=rules)

    def agent(self, mode: str, saver: InMemorySaver, *turns: AIMessage) -> Any:
        chat_model = FakeModel(messages=iter([*turns, AIMessage(content="Done.")]))
        middleware = [tg.middleware(self.toolset)] if mode == "middleware" else []
        return create_agent(
            chat_model, tools=tg.tools(self.toolset), middleware=middleware, checkpointer=saver
        )


def turn(*items: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in items],
    )


SEARCH = ("c1", "search_mail", {"query": "invoice"})
SEND = ("c2", "send_email", {"to": "bob@example.org", "password": SECRET})


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None
    return span.parent.span_id


def waited_ms(review: ReadableSpan) -> float:
    assert review.start_time is not None
    assert review.end_time is not None
    return (review.end_time - review.start_time) / 1_000_000


def reviewed(
    exporter: InMemorySpanExporter,
    tool: str,
    call_id: str,
    *,
    decision: str,
    status: str,
    outcome: str,
    reviewer: str | None = None,
) -> tuple[ReadableSpan, ReadableSpan]:
    """The call's span and its review span, checked whole; the review nests under the call."""
    call = span_named(exporter, f"execute_tool {tool}")
    review = span_named(exporter, "toolguard.review")
    attributes = dict(call.attributes or {})
    review_id = attributes["toolguard.review_id"]
    assert isinstance(review_id, str)
    who = {} if reviewer is None else {"decided_by": reviewer}
    assert attributes == tool_call_attributes(
        tool,
        call_id,
        **who,
        review_id=review_id,
        review__wait_ms=attributes["toolguard.review.wait_ms"],
        outcome=outcome,
    )
    assert dict(review.attributes or {}) == {
        "toolguard.review_id": review_id,
        "gen_ai.tool.name": tool,
        "toolguard.review.decision": decision,
        **({} if reviewer is None else {"toolguard.decided_by": reviewer}),
        "toolguard.review.status": status,
    }
    assert parent_of(review) == call.context.span_id
    return call, review


def assert_no_secret(exporter: InMemorySpanExporter) -> None:
    exported = exporter.get_finished_spans()
    texts = json.dumps([[dict(s.attributes or {}), list(s.events)] for s in exported], default=str)
    assert "hunter2" not in texts
    assert all(s.status.description is None for s in exported)


def paused_then_resumed(
    mail: Mail, mode: str, answer: dict[str, Any], *items: tuple[str, str, dict[str, Any]]
) -> tuple[Any, int, int]:
    """Run a turn under an application span, then resume it (a new agent) under another."""
    saver = InMemorySaver()
    app = trace.get_tracer("app")
    with app.start_as_current_span("first run") as first:
        result = mail.agent(mode, saver, turn(*items)).invoke(
            {"messages": [HumanMessage("go")]}, CONFIG
        )
    assert "__interrupt__" in result
    with app.start_as_current_span("resume") as second:
        done = mail.agent(mode, saver).invoke(Command(resume=answer), CONFIG)
    return done, first.get_span_context().span_id, second.get_span_context().span_id


# --------------------------------------------------------------------------- reviews


@pytest.mark.parametrize("mode", MODES)
def test_an_approved_call_names_its_reviewer_and_the_wait_and_nests_under_the_run(
    spans: InMemorySpanExporter, mode: str
) -> None:
    mail = Mail()
    answer = {"decisions": [{"type": "approve"}], "reviewer": "ana"}
    _, first, second = paused_then_resumed(mail, mode, answer, SEARCH, SEND)
    assert mail.ran == ["search invoice", "send bob@example.org"]

    send, review = reviewed(
        spans,
        "send_email",
        "c2",
        decision="approve",
        status="approved",
        outcome="executed",
        reviewer="ana",
    )
    attributes = dict(send.attributes or {})
    assert str(attributes["toolguard.review_id"]).endswith(":c2")  # the paused task and the call
    # The wait is the review span's length: from the paused step to the resume.
    assert abs(attributes["toolguard.review.wait_ms"] - waited_ms(review)) <= 1
    assert review.start_time is not None
    assert send.start_time is not None
    assert review.start_time <= send.start_time
    assert parent_of(send) == second

    search = span_named(spans, "execute_tool search_mail")
    assert dict(search.attributes or {}) == tool_call_attributes(
        "search_mail", "c1", outcome="executed"
    )
    # The middleware holds the whole turn until the review; the tools alone run it at once.
    assert parent_of(search) == (second if mode == "middleware" else first)
    assert len(ours(spans)) == 3
    assert_no_secret(spans)


@pytest.mark.parametrize("mode", MODES)
def test_a_rejection_runs_nothing_and_names_the_reviewer(
    spans: InMemorySpanExporter, mode: str
) -> None:
    mail = Mail()
    answer = {
        "decisions": [{"type": "reject", "message": f"never with {SECRET}"}],
        "reviewer": "bo",
    }
    done, _, second = paused_then_resumed(mail, mode, answer, SEND)
    assert mail.ran == []
    [message] = [m for m in done["messages"] if isinstance(m, ToolMessage)]
    assert (message.content, message.status) == (f"never with {SECRET}", "error")

    send, _ = reviewed(
        spans,
        "send_email",
        "c2",
        decision="reject",
        status="rejected",
        outcome="rejected",
        reviewer="bo",
    )
    assert parent_of(send) == second
    assert send.status.status_code == StatusCode.ERROR  # a refused call: not executed
    assert [s.name for s in ours(spans)] == ["toolguard.review", "execute_tool send_email"]
    assert_no_secret(spans)


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_is_recorded_as_edited_and_an_unnamed_reviewer_is_absent(
    spans: InMemorySpanExporter, mode: str
) -> None:
    mail = Mail()
    edited = {"name": "send_email", "args": {"to": "carol@example.org", "password": "[redacted]"}}
    answer = {"decisions": [{"type": "edit", "edited_action": edited}]}
    paused_then_resumed(mail, mode, answer, SEND)
    assert mail.ran == ["send carol@example.org"]

    reviewed(spans, "send_email", "c2", decision="edit", status="edited", outcome="executed")
    assert_no_secret(spans)


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_a_deny_rule_refuses_is_decided_by_the_rule(
    spans: InMemorySpanExporter, mode: str
) -> None:
    mail = Mail()
    shell = ("s1", "run_shell", {"command": "cat /etc/hosts"})
    edited = {"name": "run_shell", "args": {"command": "rm -rf /"}}
    mail.toolset = guard(
        list(mail.toolset.values()),
        rules=Rules(ask=["run_shell"], deny=['run_shell(command="rm *")']),
    )
    answer = {"decisions": [{"type": "edit", "edited_action": edited}], "reviewer": "ana"}
    paused_then_resumed(mail, mode, answer, shell)
    assert mail.ran == []

    call = span_named(spans, "execute_tool run_shell")
    attributes = dict(call.attributes or {})
    assert attributes == tool_call_attributes(
        "run_shell",
        "s1",
        decided_by="rule",
        review_id=attributes["toolguard.review_id"],
        review__wait_ms=attributes["toolguard.review.wait_ms"],
        outcome="denied",
    )
    review = span_named(spans, "toolguard.review")
    assert (review.attributes or {})["toolguard.decided_by"] == "ana"
    assert parent_of(review) == call.context.span_id


# --------------------------------------------------------------------------- no review


@pytest.mark.parametrize("mode", MODES)
def test_rules_and_failures_without_review(spans: InMemorySpanExporter, mode: str) -> None:
    """A deny rule and an allow rule decide; a tool that raises fails with its error type only."""
    mail = Mail()
    saver = InMemorySaver()
    calls = turn(
        ("r1", "run_shell", {"command": "rm -rf /tmp/x"}),
        ("r2", "run_shell", {"command": "ls /tmp"}),
        ("l1", "login", {"user": "ana", "password": SECRET}),
    )
    with trace.get_tracer("app").start_as_current_span("agent run") as run:
        mail.agent(mode, saver, calls).invoke({"messages": [HumanMessage("go")]}, CONFIG)
    assert mail.ran == ["shell ls /tmp"]
    found = sorted(
        (str(s.attributes["gen_ai.tool.call.id"]), dict(s.attributes))
        for s in ours(spans)
        if s.attributes is not None
    )
    assert found == [
        (
            "l1",
            {
                **tool_call_attributes("login", "l1", decided_by="rule", outcome="failed"),
                "error.type": "PermissionError",
            },
        ),
        ("r1", tool_call_attributes("run_shell", "r1", decided_by="rule", outcome="denied")),
        ("r2", tool_call_attributes("run_shell", "r2", decided_by="rule", outcome="executed")),
    ]
    login = span_named(spans, "execute_tool login")
    assert login.status.status_code == StatusCode.ERROR
    assert all(parent_of(s) == run.get_span_context().span_id for s in ours(spans))
    assert_no_secret(spans)


def test_a_tool_invoked_with_a_tool_call_outside_a_graph_keeps_its_id(
    spans: InMemorySpanExporter,
) -> None:
    """LangChain's ToolCall gives the span its id; plain arguments give a span without one."""
    mail = Mail()
    search = next(t for t in tg.tools(mail.toolset) if t.name == "search_mail")
    message = search.invoke(
        {"id": "x1", "name": "search_mail", "args": {"query": "q"}, "type": "tool_call"}
    )
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "x1"
    assert search.invoke({"query": "plain"}) == '["mail about plain"]'
    assert [dict(s.attributes or {}) for s in ours(spans)] == [
        tool_call_attributes("search_mail", "x1", outcome="executed"),
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_mail",
            "gen_ai.tool.type": "function",
            "toolguard.outcome": "executed",
        },
    ]


async def test_the_async_path_records_the_same_spans(spans: InMemorySpanExporter) -> None:
    mail = Mail()
    saver = InMemorySaver()
    agent = mail.agent("middleware", saver, turn(SEND))
    await agent.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
    answer = {"decisions": [{"type": "approve"}], "reviewer": "ana"}
    await mail.agent("middleware", saver).ainvoke(Command(resume=answer), CONFIG)
    assert mail.ran == ["send bob@example.org"]
    assert [s.name for s in ours(spans)] == ["toolguard.review", "execute_tool send_email"]
    send = span_named(spans, "execute_tool send_email")
    assert (send.attributes or {})["toolguard.decided_by"] == "ana"
    assert (send.attributes or {})["gen_ai.tool.call.id"] == "c2"


# --------------------------------------------------------------------------- not tracing


@pytest.mark.parametrize("mode", MODES)
def test_without_a_tracer_provider_nothing_is_recorded(mode: str) -> None:
    """A provider the application did not set as the global one receives nothing."""
    exporter = InMemorySpanExporter()
    unused = TracerProvider()
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracer() is None
    mail = Mail()
    answer = {"decisions": [{"type": "approve"}], "reviewer": "ana"}
    done, _, _ = paused_then_resumed(mail, mode, answer, SEARCH, SEND)
    assert mail.ran == ["search invoice", "send bob@example.org"]
    assert sorted(
        (m.tool_call_id, m.content) for m in done["messages"] if isinstance(m, ToolMessage)
    ) == [("c1", '["mail about invoice"]'), ("c2", "sent to bob@example.org")]
    assert exporter.get_finished_spans() == ()
    unused.shutdown()
