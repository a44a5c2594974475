"""OpenTelemetry: a span per call that reaches an outcome, a span per review, no secret in them."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolguard import (
    Judge,
    ModelResponse,
    ReviewedChat,
    Rules,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    guard,
    requires_approval,
)
from toolguard._core import telemetry

START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
SECRET = "hunter2-very-secret"  # noqa: S105 - a password that must never reach a span


class Clock:
    """A fake clock: ``now`` moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def tools(log: list[str]) -> list[Any]:
    @requires_approval
    def send_email(to: str) -> str:
        """Send an email."""
        log.append(f"send_email {to}")
        return f"sent to {to}"

    @requires_approval(redact=["password"])
    def login(user: str, password: str) -> str:
        """Log in."""
        msg = f"wrong password {password} for {user}"
        raise PermissionError(msg)

    def read_page(url: str) -> str:
        """Read a web page."""
        log.append(f"read {url}")
        tracer = trace.get_tracer("the tool")
        with tracer.start_as_current_span("fetch"):
            return "page text"

    return [send_email, login, read_page]


def email(call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "name": "send_email", "args": {"to": "bob@example.org"}}


def shown(exporter: InMemorySpanExporter) -> list[tuple[str, dict[str, Any]]]:
    """Each finished span's name and attributes, in the order they ended."""
    return [(s.name, dict(s.attributes or {})) for s in exporter.get_finished_spans()]


DESCRIPTIONS = {"send_email": "Send an email.", "login": "Log in.", "read_page": "Read a web page."}
"""The tools' descriptions (their docstrings), as ``gen_ai.tool.description``."""


def call_attributes(name: str, call_id: str = "c1", **more: Any) -> dict[str, Any]:
    """An ``execute_tool`` span's attributes: a refusal's outcome is also its ``error.type``."""
    toolguard = {f"toolguard.{k.replace('__', '.')}": v for k, v in more.items()}
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        **toolguard,
    }
    if name in DESCRIPTIONS:
        attributes["gen_ai.tool.description"] = DESCRIPTIONS[name]
    if more.get("outcome") not in {None, "executed", "failed"}:
        attributes["error.type"] = more["outcome"]
    return attributes


def by_name(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000


# --------------------------------------------------------------------------- calls without review


async def test_a_call_that_needs_no_approval_has_one_span_and_no_decider(
    spans: InMemorySpanExporter,
) -> None:
    log: list[str] = []
    step = await Runner(tools(log)).run(
        [{"id": "c7", "name": "read_page", "args": {"url": "https://example.org"}}]
    )
    assert [r.content for r in step.results] == ["page text"]
    assert shown(spans) == [
        ("fetch", {}),
        ("execute_tool read_page", call_attributes("read_page", "c7", outcome="executed")),
    ]
    fetch, call = spans.get_finished_spans()
    assert fetch.parent is not None
    assert fetch.parent.span_id == call.context.span_id  # the tool's own span nests under ours
    assert call.instrumentation_scope is not None
    assert call.instrumentation_scope.name == "toolguard"


async def test_our_span_nests_under_the_applications_current_span(
    spans: InMemorySpanExporter,
) -> None:
    with trace.get_tracer("app").start_as_current_span("agent run") as parent:
        await Runner(tools([])).run(
            [{"id": "c1", "name": "read_page", "args": {"url": "https://example.org"}}]
        )
    call = by_name(spans, "execute_tool read_page")
    assert call.parent is not None
    assert call.parent.span_id == parent.get_span_context().span_id


async def test_a_tool_that_raises_is_failed_with_its_error_type_and_no_message(
    spans: InMemorySpanExporter,
) -> None:
    runner = Runner(guard(tools([]), rules=Rules(allow=["login"])))
    step = await runner.run(
        [{"id": "c1", "name": "login", "args": {"user": "ana", "password": SECRET}}]
    )
    assert step.results[0].outcome == "failed"
    assert shown(spans) == [
        (
            "execute_tool login",
            {
                **call_attributes("login", outcome="failed", decided_by="rule"),
                "error.type": "PermissionError",
            },
        )
    ]
    [span] = spans.get_finished_spans()
    assert (span.status.status_code, span.status.description, span.events) == (
        StatusCode.ERROR,
        None,
        (),
    )
    # The model reads the scrubbed message; the span holds only the exception's class.
    assert step.results[0].content == (
        "Tool `login` failed: PermissionError: wrong password [redacted] for ana"
    )
    assert SECRET not in json.dumps(dict(span.attributes or {}))


async def test_a_deny_rule_is_the_decider_and_nothing_runs(spans: InMemorySpanExporter) -> None:
    log: list[str] = []
    runner = Runner(guard(tools(log), rules=Rules(deny=["send_*"])))
    step = await runner.run([email()])
    assert (step.results[0].outcome, log) == ("denied", [])
    assert shown(spans) == [
        (
            "execute_tool send_email",
            call_attributes("send_email", outcome="denied", decided_by="rule"),
        )
    ]


async def test_an_unknown_tool_fails_with_its_kind_and_no_decider(
    spans: InMemorySpanExporter,
) -> None:
    await Runner(tools([])).run([{"id": "c1", "name": "drop_db", "args": {}}])
    assert shown(spans) == [
        (
            "execute_tool drop_db",
            {**call_attributes("drop_db", outcome="failed"), "error.type": "unknown_tool"},
        )
    ]


async def test_an_allow_rule_is_the_decider(spans: InMemorySpanExporter) -> None:
    runner = Runner(guard(tools([]), rules=Rules(allow=["send_email"])))
    await runner.run([email()])
    assert shown(spans) == [
        (
            "execute_tool send_email",
            call_attributes("send_email", outcome="executed", decided_by="rule"),
        )
    ]


async def test_a_standing_grant_is_the_decider(spans: InMemorySpanExporter) -> None:
    async def grants(calls: list[ToolCall]) -> set[str]:
        return {c.id for c in calls}

    log: list[str] = []
    step = await Runner(tools(log)).run([email()], grants=grants)
    assert (step.paused, log) == (False, ["send_email bob@example.org"])
    assert shown(spans) == [
        (
            "execute_tool send_email",
            call_attributes("send_email", outcome="executed", decided_by="grant"),
        )
    ]


async def test_a_judges_auto_approval_is_the_decider(spans: InMemorySpanExporter) -> None:
    verdict = json.dumps(
        {"risk": "low", "user_authorized": True, "outcome": "allow", "rationale": "Asked for."}
    )
    judge = Judge(ScriptedModel([verdict]), auto_approve=True)
    asked = [{"role": "user", "content": "Email bob@example.org that I am late."}]
    step = await Runner(tools([]), judge=judge).run([email()], thread_id="t1", conversation=asked)
    assert step.paused is False
    assert shown(spans) == [
        (
            "execute_tool send_email",
            call_attributes("send_email", outcome="executed", decided_by="judge"),
        )
    ]


# --------------------------------------------------------------------------- reviewed calls


async def test_an_approved_call_names_its_reviewer_and_the_wait(
    spans: InMemorySpanExporter,
) -> None:
    clock = Clock()
    runner = Runner(tools([]), clock=clock)
    paused = await runner.run([email()], thread_id="t1")
    assert paused.pending is not None
    assert spans.get_finished_spans() == ()  # waiting is no outcome yet
    clock.now = START + timedelta(seconds=90, milliseconds=250)
    await runner.resume(paused.pending, [{"type": "approve"}], thread_id="t1", reviewer="alice")
    review_id = paused.pending.review_id
    assert shown(spans) == [
        (
            "toolguard.review",
            {
                "toolguard.review_id": review_id,
                "gen_ai.tool.name": "send_email",
                "toolguard.review.decision": "approve",
                "toolguard.decided_by": "alice",
                "toolguard.review.status": "approved",
            },
        ),
        (
            "execute_tool send_email",
            call_attributes(
                "send_email",
                outcome="executed",
                decided_by="alice",
                review_id=review_id,
                review__wait_ms=90250,
            ),
        ),
    ]
    review = by_name(spans, "toolguard.review")
    call = by_name(spans, "execute_tool send_email")
    assert (review.start_time, review.end_time) == (ns(START), ns(START) + 90_250_000_000)
    assert review.parent is not None
    assert review.parent.span_id == call.context.span_id


async def test_a_rejection_runs_nothing_and_names_the_reviewer(
    spans: InMemorySpanExporter,
) -> None:
    clock = Clock()
    log: list[str] = []
    runner = Runner(tools(log), clock=clock)
    paused = await runner.run([email()])
    assert paused.pending is not None
    clock.now = START + timedelta(seconds=2)
    await runner.resume(paused.pending, [{"type": "reject", "message": "no"}], reviewer=7)
    review_id = paused.pending.review_id
    assert log == []
    assert shown(spans) == [
        (
            "toolguard.review",
            {
                "toolguard.review_id": review_id,
                "gen_ai.tool.name": "send_email",
                "toolguard.review.decision": "reject",
                "toolguard.decided_by": "7",
                "toolguard.review.status": "rejected",
            },
        ),
        (
            "execute_tool send_email",
            call_attributes(
                "send_email",
                outcome="rejected",
                decided_by="7",
                review_id=review_id,
                review__wait_ms=2000,
            ),
        ),
    ]


async def test_a_deny_rule_added_during_the_review_decides_the_approved_call(
    spans: InMemorySpanExporter,
) -> None:
    log: list[str] = []
    clock = Clock()
    paused = await Runner(tools(log), clock=clock).run([email()])
    assert paused.pending is not None
    later = Runner(guard(tools(log), rules=Rules(deny=["send_email"])), clock=clock)
    await later.resume(paused.pending, [{"type": "approve"}], reviewer="alice")
    assert log == []
    review_id = paused.pending.review_id
    assert [(name, attrs.get("toolguard.decided_by")) for name, attrs in shown(spans)] == [
        ("toolguard.review", "alice"),
        ("execute_tool send_email", "rule"),
    ]
    assert shown(spans)[1][1] == call_attributes(
        "send_email", outcome="denied", decided_by="rule", review_id=review_id, review__wait_ms=0
    )


@pytest.mark.parametrize("outcome", ["expired", "cancelled"])
async def test_a_closed_review_has_no_decider(spans: InMemorySpanExporter, outcome: Any) -> None:
    clock = Clock()
    runner = Runner(tools([]), clock=clock)
    paused = await runner.run([email()])
    assert paused.pending is not None
    clock.now = START + timedelta(minutes=10)
    runner.close(paused.pending, outcome)
    review_id = paused.pending.review_id
    assert shown(spans) == [
        (
            "toolguard.review",
            {
                "toolguard.review_id": review_id,
                "gen_ai.tool.name": "send_email",
                "toolguard.review.status": outcome,
            },
        ),
        (
            "execute_tool send_email",
            call_attributes(
                "send_email", outcome=outcome, review_id=review_id, review__wait_ms=600_000
            ),
        ),
    ]


async def test_reviewed_chat_records_who_approved_and_who_cancelled(
    spans: InMemorySpanExporter,
) -> None:
    def turn(call_id: str) -> ModelResponse:
        return ModelResponse(
            tool_calls=[ToolCall(id=call_id, name="send_email", args={"to": "bob@example.org"})]
        )

    clock = Clock()
    model = ScriptedModel([turn("c1"), "Sent.", turn("c2"), "Not sent."])
    chat = ReviewedChat(model, tools([]), store=SQLiteStore(":memory:"), clock=clock)
    first = await chat.send_message("mail bob")
    clock.now = START + timedelta(seconds=5)
    await chat.submit_review(
        [{"type": "approve"}], first.thread_id, review_id=first.review_id, reviewer="ana"
    )
    second = await chat.send_message("mail bob again", first.thread_id)
    clock.now = START + timedelta(seconds=8)
    await chat.cancel_review(first.thread_id, reviewer="ben", reason="changed my mind")
    assert [(name, attrs) for name, attrs in shown(spans) if name.startswith("execute")] == [
        (
            "execute_tool send_email",
            call_attributes(
                "send_email",
                outcome="executed",
                decided_by="ana",
                review_id=first.review_id,
                review__wait_ms=5000,
            ),
        ),
        (
            "execute_tool send_email",
            call_attributes(
                "send_email",
                "c2",
                outcome="cancelled",
                decided_by="ben",
                review_id=second.review_id,
                review__wait_ms=3000,
            ),
        ),
    ]


# ------------------------------------------------------------------ refusals; the caller's trace


def status(span: ReadableSpan) -> tuple[StatusCode, str | None, Any]:
    return (
        span.status.status_code,
        span.status.description,
        (span.attributes or {}).get("error.type"),
    )


async def test_each_call_that_did_not_run_is_an_error_of_its_kind(
    spans: InMemorySpanExporter,
) -> None:
    log: list[str] = []
    runner = Runner(guard(tools(log), rules=Rules(deny=["login"])))
    decisions = {"c1": {"type": "approve"}, "c2": {"type": "reject"}}
    for call_id, decision in decisions.items():
        paused = await runner.run([email(call_id)])
        assert paused.pending is not None
        await runner.resume(paused.pending, [decision], reviewer="ana")
    for outcome in ("expired", "cancelled"):
        paused = await runner.run([email(f"c-{outcome}")])
        assert paused.pending is not None
        runner.close(paused.pending, outcome)  # type: ignore[arg-type]
    await runner.run([{"id": "c4", "name": "login", "args": {"user": "a", "password": "b"}}])
    await runner.run([{"id": "c5", "name": "read_page", "args": {"url": "https://a.example"}}])
    calls = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [((s.attributes or {})["toolguard.outcome"], status(s)) for s in calls] == [
        ("executed", (StatusCode.UNSET, None, None)),
        ("rejected", (StatusCode.ERROR, None, "rejected")),
        ("expired", (StatusCode.ERROR, None, "expired")),
        ("cancelled", (StatusCode.ERROR, None, "cancelled")),
        ("denied", (StatusCode.ERROR, None, "denied")),
        ("executed", (StatusCode.UNSET, None, None)),
    ]
    assert log == ["send_email bob@example.org", "read https://a.example"]


async def test_a_reviewed_call_joins_its_callers_trace_and_links_the_reviewers_request(
    spans: InMemorySpanExporter,
) -> None:
    app = trace.get_tracer("app")
    runner = Runner(tools([]))
    with app.start_as_current_span("agent run") as agent:
        paused = await runner.run([email()])
    assert paused.pending is not None
    [action] = paused.pending.actions
    caller = agent.get_span_context()
    flags = int(caller.trace_flags)
    assert action.trace_parent == f"00-{caller.trace_id:032x}-{caller.span_id:016x}-{flags:02x}"
    # The reviewer decides in a request of another trace (a web request, another process).
    with app.start_as_current_span("POST /hitl/review", context=Context()) as request:
        await runner.resume(paused.pending, [{"type": "approve"}], reviewer="ana")
    call = by_name(spans, "execute_tool send_email")
    review = by_name(spans, "toolguard.review")
    assert call.context.trace_id == caller.trace_id != request.get_span_context().trace_id
    assert call.parent is not None
    assert (call.parent.span_id, call.parent.is_remote) == (caller.span_id, True)
    assert [link.context for link in call.links] == [request.get_span_context()]
    assert review.parent is not None
    assert review.parent.span_id == call.context.span_id


async def test_a_call_decided_in_its_callers_trace_is_a_child_of_the_current_span(
    spans: InMemorySpanExporter,
) -> None:
    app = trace.get_tracer("app")
    runner = Runner(tools([]))
    with app.start_as_current_span("agent run"):
        paused = await runner.run([email()])
        assert paused.pending is not None
        with app.start_as_current_span("ask the user") as asking:
            await runner.resume(paused.pending, [{"type": "reject"}], reviewer="ana")
    call = by_name(spans, "execute_tool send_email")
    assert call.parent is not None
    assert call.parent.span_id == asking.get_span_context().span_id
    assert call.links == ()
    assert status(call) == (StatusCode.ERROR, None, "rejected")


async def test_without_a_span_at_the_call_nothing_is_kept_and_the_call_nests_as_usual(
    spans: InMemorySpanExporter,
) -> None:
    runner = Runner(tools([]))
    paused = await runner.run([email()])
    assert paused.pending is not None
    assert paused.pending.actions[0].trace_parent is None
    assert "trace_parent" not in paused.pending.actions[0].model_dump(mode="json")
    with trace.get_tracer("app").start_as_current_span("review") as request:
        await runner.resume(paused.pending, [{"type": "approve"}], reviewer="ana")
    call = by_name(spans, "execute_tool send_email")
    assert call.parent is not None
    assert call.parent.span_id == request.get_span_context().span_id
    assert call.links == ()


@pytest.mark.parametrize(
    "stored",
    [
        "00-zz0000000000000000000000000000-0000000000000001-01",  # not hex
        "00-00000000000000000000000000000000-0000000000000001-01",  # an invalid trace id
        "01-00000000000000000000000000000001-0000000000000001-01",  # another version
        "00-00000000000000000000000000000001-0000000000000001-01-extra",
    ],
)
async def test_a_damaged_stored_caller_is_ignored(spans: InMemorySpanExporter, stored: str) -> None:
    runner = Runner(tools([]))
    paused = await runner.run([email()])
    assert paused.pending is not None
    action = paused.pending.actions[0].model_copy(update={"trace_parent": stored})
    pending = paused.pending.model_copy(update={"actions": [action]})
    with trace.get_tracer("app").start_as_current_span("review") as request:
        await runner.resume(pending, [{"type": "approve"}], reviewer="ana")
    call = by_name(spans, "execute_tool send_email")
    assert call.parent is not None
    assert call.parent.span_id == request.get_span_context().span_id
    assert call.links == ()


async def test_a_chat_keeps_the_caller_in_its_store_for_the_reviewer_of_another_process(
    spans: InMemorySpanExporter, tmp_path: Any
) -> None:
    def turn() -> ModelResponse:
        return ModelResponse(
            tool_calls=[ToolCall(id="c1", name="send_email", args={"to": "bob@example.org"})]
        )

    app = trace.get_tracer("app")
    db = str(tmp_path / "chat.sqlite3")
    asking = ReviewedChat(ScriptedModel([turn()]), tools([]), store=SQLiteStore(db))
    with app.start_as_current_span("POST /hitl/chat") as message:
        first = await asking.send_message("mail bob")
    deciding = ReviewedChat(ScriptedModel(["Sent."]), tools([]), store=SQLiteStore(db))
    with app.start_as_current_span("POST /hitl/review", context=Context()) as request:
        await deciding.submit_review(
            [{"type": "approve"}], first.thread_id, review_id=first.review_id, reviewer="ana"
        )
    call = by_name(spans, "execute_tool send_email")
    assert call.context.trace_id == message.get_span_context().trace_id
    assert call.parent is not None
    assert call.parent.span_id == message.get_span_context().span_id
    assert [link.context for link in call.links] == [request.get_span_context()]


def test_a_function_marked_as_run_by_a_server_gives_its_tools_the_extension_type() -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    telemetry.mark_type(lookup, telemetry.EXTENSION)
    tool = guard([lookup]).get("lookup")
    assert tool is not None
    assert telemetry._tool_facts(tool) == {
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.description": "Look a city up.",
    }
    assert telemetry._tool_facts(None) == {"gen_ai.tool.type": "function"}


# --------------------------------------------------------------------------- secrets; no tracing


async def test_no_secret_reaches_any_attribute(spans: InMemorySpanExporter) -> None:
    runner = Runner(tools([]))
    call = {"id": "c1", "name": "login", "args": {"user": "ana", "password": SECRET}}
    paused = await runner.run([call])
    assert paused.pending is not None
    await runner.resume(paused.pending, [{"type": "approve"}], reviewer="alice")
    again = await runner.run([{**call, "id": "c2"}])
    assert again.pending is not None
    await runner.resume(again.pending, [{"type": "reject", "message": f"not {SECRET}"}])
    exported = spans.get_finished_spans()
    assert [s.name for s in exported] == [
        "toolguard.review",
        "execute_tool login",
        "toolguard.review",
        "execute_tool login",
    ]
    texts = json.dumps([[dict(s.attributes or {}), list(s.events)] for s in exported], default=str)
    assert "hunter2" not in texts
    assert [s.status.description for s in exported] == [None, None, None, None]


def test_without_a_tracer_provider_nothing_is_traced() -> None:
    assert trace.get_tracer_provider().__class__.__name__ == "ProxyTracerProvider"
    assert telemetry.tracer() is None


def test_toolguard_never_imports_opentelemetry_and_runs_without_it() -> None:
    """In a fresh process: a whole approval with OpenTelemetry unimportable, and none loaded."""
    code = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(name + " is blocked")
sys.meta_path.insert(0, Block())
import toolguard
from toolguard import Runner, requires_approval

@requires_approval
def send_email(to: str) -> str:
    return "sent"

runner = Runner([send_email])
paused = runner.run_sync([{"id": "c1", "name": "send_email", "args": {"to": "a"}}])
done = runner.resume_sync(paused.pending, [{"type": "approve"}], reviewer="alice")
print(done.results[0].content, sorted(m for m in sys.modules if "opentelemetry" in m))
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "sent []\n", "")
