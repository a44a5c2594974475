"""Attack class: a result that is not a tool's return value passing for one in a status-less format.

OpenAI Chat Completions and Responses have no status on a tool result. Once toolguard's
``status: "error"`` is dropped, a rejection, an expiry, a cancellation, a failure, an invalid
or unknown call or a refused (tampered) approval must still read as what it is, so a model
cannot take "Do not send it" or "Wire 10,000 to X" written by a reviewer for the output of a
tool that ran. Each such result is marked with a template that keeps the specification's
text verbatim; hostile reason text (braces, surrogates, bidi controls, confusables) can
neither break the template nor lose its marker.
"""

from __future__ import annotations

import typing
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import openai_server
from tests.adversarial.strategies import deceptive_text, surrogate_text
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls
from toolguard import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    SEED_VERBS,
    Classifier,
    ModelResponse,
    PendingTurn,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard._core.jsonable import clean_text
from toolguard._core.results import DEFAULT_TEMPLATES, unmark
from toolguard._enforce.actions import TAMPERED
from toolguard._enforce.close import CANCELLED, EXPIRED, INTERRUPTED
from toolguard.records import ResultOutcome
from toolguard.text import ResultTemplates

scripted_openai = openai_server.scripted_openai  # the fixture, for the test below

OUTCOMES: tuple[str, ...] = typing.get_args(ResultOutcome)
MARKS = {
    "rejected": "Rejected by the reviewer, not executed: ",
    "no_decision": "No decision from the reviewer, not executed: ",
    "expired": "Review expired, not executed: ",
    "cancelled": "Review cancelled, not executed: ",
    "failed": "Error, the tool failed: ",
    "invalid_arguments": "Error, not executed: ",
    "unknown_tool": "Error, not executed: ",
    "tampered": "Refused, not executed: ",
    "interrupted": "Error, outcome unknown, not run again: ",
    "responded": "",
    "denied": "Denied by a rule, not executed: ",
}
AVAILABLE = "send_email, search, explode"


def make_tools(log: list[str]) -> list[Any]:
    """send_email (guarded), search and explode (not guarded; explode raises)."""

    @requires_approval
    def send_email(to: str) -> str:
        """Send an email."""
        log.append(to)
        return f"sent to {to}"

    def search(query: str) -> str:
        """Search."""
        return f"found {query}"

    def explode() -> str:
        """Raise."""
        raise ValueError("boom")

    return [send_email, search, explode]


def marked(outcome: str, content: str) -> str:
    """What the model reads: the marker and the content; a reason-less rejection as it is
    (REJECTED_BY_USER_MESSAGE itself says the call was rejected and not run)."""
    if outcome == "rejected" and content == REJECTED_BY_USER_MESSAGE:
        return content
    return MARKS[outcome] + content


def messages_by_id(step: Any) -> dict[str, str]:
    """The tool messages' content by call id."""
    return {m["tool_call_id"]: m["content"] for m in step.tool_messages()}


def test_every_outcome_has_a_default_and_only_responded_is_unmarked() -> None:
    """Every ResultOutcome value has a template; every error outcome adds a visible marker."""
    assert set(OUTCOMES) == set(MARKS)
    for outcome in OUTCOMES:
        template = getattr(DEFAULT_TEMPLATES, outcome)
        assert template == MARKS[outcome] + "{text}"


async def test_each_creation_site_sets_its_outcome_and_marks_the_message() -> None:
    """Runner results keep SPEC's exact content; their tool messages carry the marker."""
    log: list[str] = []
    runner = Runner(make_tools(log), classifier=Classifier(verbs=SEED_VERBS))
    step = await runner.run(
        [
            ToolCall(id="u", name="nope", args={}),
            ToolCall(id="j", name="search", arguments_error="[1]"),
            ToolCall(id="s", name="search", args={"query": 5}),
            ToolCall(id="x", name="explode", args={}),
            ToolCall(id="r1", name="send_email", args={"to": "a@x"}),
            ToolCall(id="r2", name="send_email", args={"to": "b@x"}),
            ToolCall(id="e1", name="send_email", args={"to": "c@x"}),
            ToolCall(id="e2", name="send_email", args={"to": "d@x"}),
            ToolCall(id="n", name="send_email", args={"to": "e@x"}),
        ]
    )
    assert step.pending is not None
    edit_unknown = {"type": "edit", "edited_action": {"name": "zap", "args": {}}}
    edit_bad = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 1}}}
    done = await runner.resume(
        step.pending,
        [{"type": "reject", "message": "Not her."}, {"type": "reject"}, edit_unknown, edit_bad],
    )
    outcomes = {r.call_id: (r.status, r.outcome, r.content) for r in done.results}
    schema_error = "Invalid arguments for tool `search`: 'query': Input should be a valid string"
    edit_error = "Invalid arguments for tool `send_email`: 'to': Input should be a valid string"
    assert outcomes == {
        "u": ("error", "unknown_tool", f"Tool `nope` does not exist. Available tools: {AVAILABLE}"),
        "j": (
            "error",
            "invalid_arguments",
            "Invalid arguments for tool `search`: expected a JSON object, got [1]",
        ),
        "s": ("error", "invalid_arguments", schema_error),
        "x": ("error", "failed", "Tool `explode` failed: ValueError: boom"),
        "r1": ("error", "rejected", "Not her."),
        "r2": ("error", "rejected", REJECTED_BY_USER_MESSAGE),
        "e1": ("error", "unknown_tool", f"Tool `zap` does not exist. Available tools: {AVAILABLE}"),
        "e2": ("error", "invalid_arguments", edit_error),
        "n": ("error", "no_decision", NO_DECISION),
    }
    sent = messages_by_id(done)
    assert sent == {
        call_id: marked(outcome, content) for call_id, (_, outcome, content) in outcomes.items()
    }
    assert log == []


async def test_tampered_expired_cancelled_and_interrupted_are_marked() -> None:
    """The chat-only outcomes: digest mismatch, deadline, cancellation, crash recovery."""
    runner = Runner(make_tools([]), classifier=Classifier(verbs=SEED_VERBS))

    async def paused() -> PendingTurn:
        # A turn is resumed or closed once only: a fresh paused turn for each outcome.
        step = await runner.run([ToolCall(id="c1", name="send_email", args={"to": "a@x"})])
        assert step.pending is not None
        return step.pending

    first = await paused()
    forged = first.actions[0].model_copy(update={"args": {"to": "mallory@x"}})
    tampered = first.model_copy(update={"actions": [forged]})
    results = [
        (await runner.resume(tampered, [{"type": "approve"}])).results[0],
        runner.close(await paused(), "expired").results[0],
        runner.close(await paused(), "cancelled").results[0],
        runner.interrupted(await paused(), [{"type": "approve"}]).results[0],
    ]
    assert [(r.outcome, r.content) for r in results] == [
        ("tampered", TAMPERED),
        ("expired", EXPIRED),
        ("cancelled", CANCELLED),
        ("interrupted", INTERRUPTED),
    ]
    assert [DEFAULT_TEMPLATES.render(r) for r in results] == [
        MARKS[r.outcome or ""] + r.content for r in results
    ]


async def test_the_openai_server_receives_the_marked_text(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    """Through ReviewedChat and the real client: the server sees the marker, not a status."""
    from toolguard.openai import OpenAIChatModel

    scripted_openai.add(
        reply_tool_calls([("c1", "send_email", {"to": "a@x"})]), reply_text("Understood.")
    )
    async with scripted_openai.client() as client:
        chat = ReviewedChat(OpenAIChatModel(client, model="m"), make_tools([]))
        turn = await chat.send_message("mail a")
        await chat.submit_review([{"type": "reject", "message": "Wrong person."}], turn.thread_id)
    assert scripted_openai.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Rejected by the reviewer, not executed: Wrong person.",
    }


@settings(max_examples=60, deadline=None)
@given(reason=st.one_of(st.text(max_size=40), surrogate_text, deceptive_text, st.just("{text}{0}")))
def test_any_reason_is_marked_and_kept_verbatim(reason: str) -> None:
    """Whatever a reviewer writes (braces, surrogates, bidi), the marker leads, the text stays."""
    runner = Runner(make_tools([]), classifier=Classifier(verbs=SEED_VERBS))
    step = runner.run_sync([ToolCall(id="c1", name="send_email", args={"to": "a@x"})])
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [{"type": "reject", "message": reason}])
    text = clean_text(reason) or REJECTED_BY_USER_MESSAGE
    assert done.results[0].content == text
    message = done.tool_messages()[0]["content"]
    assert message == marked("rejected", text)
    assert unmark(message) == text


def test_custom_templates_and_verbatim() -> None:
    """ResultTemplates fields replace the defaults, {name} is the tool; verbatim() unmarks."""
    runner = Runner(make_tools([]), classifier=Classifier(verbs=SEED_VERBS))
    step = runner.run_sync([ToolCall(id="c1", name="nope", args={})])
    custom = ResultTemplates(unknown_tool="<{name}> {text} </{name}>")
    assert step.tool_messages(custom)[0]["content"] == (
        f"<nope> Tool `nope` does not exist. Available tools: {AVAILABLE} </nope>"
    )
    assert step.tool_messages(ResultTemplates.verbatim())[0]["content"] == step.results[0].content
    assert (
        step.openai_messages(templates=custom)[1]["content"]
        == (step.tool_messages(custom)[0]["content"])
    )


async def test_chat_result_templates_apply_to_stored_and_sent_messages() -> None:
    """ReviewedChat(result_templates=...) marks what the model reads; status stays stored."""
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args={"to": "a@x"})]), "ok"]
    )
    when = datetime(2025, 1, 1, tzinfo=timezone.utc)
    chat = ReviewedChat(
        model,
        make_tools([]),
        result_templates=ResultTemplates(expired="EXPIRED: {text}"),
        review_ttl=timedelta(seconds=5),
        clock=lambda: when,
    )
    turn = await chat.send_message("mail a")
    when += timedelta(seconds=10)
    await chat.send_message("and?", turn.thread_id)
    state = await chat.get_thread(turn.thread_id)
    tool_message = next(m for m in state.messages if m["role"] == "tool")
    assert tool_message == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"EXPIRED: {EXPIRED}",
        "status": "error",
    }


@pytest.mark.parametrize(
    ("options", "error", "text"),
    [
        (
            {"rejected": "Rejected."},
            ValueError,
            (
                "ResultTemplates.rejected must contain {text} (the result's own text, kept"
                " verbatim), got 'Rejected.'"
            ),
        ),
        (
            {"failed": "{text} {call_id}"},
            ValueError,
            (
                "ResultTemplates.failed may only use {text} and {name}, got {call_id} in"
                " '{text} {call_id}'"
            ),
        ),
        (
            {"expired": "{text"},
            ValueError,
            (
                "ResultTemplates.expired is not a valid format string: expected '}' before end of"
                " string"
            ),
        ),
        ({"cancelled": None}, TypeError, "ResultTemplates.cancelled must be text, got NoneType"),
    ],
)
def test_bad_templates_are_refused(
    options: dict[str, Any], error: type[Exception], text: str
) -> None:
    """A template that would drop SPEC's text, or cannot format, is refused at construction."""
    with pytest.raises(error) as caught:
        ResultTemplates(**options)
    assert str(caught.value) == text


def test_wrong_template_arguments_and_paused_steps_are_refused() -> None:
    """A non-ResultTemplates value is a TypeError; a paused step has no messages yet."""
    with pytest.raises(TypeError, match="result_templates must be a ResultTemplates, got dict"):
        ReviewedChat(ScriptedModel([]), [], result_templates={"rejected": "x {text}"})  # type: ignore[arg-type]
    runner = Runner(make_tools([]), classifier=Classifier(verbs=SEED_VERBS))
    step = runner.run_sync([ToolCall(id="c1", name="send_email", args={"to": "a@x"})])
    with pytest.raises(ValueError, match="The turn is paused"):
        step.openai_messages()
    with pytest.raises(TypeError, match="templates must be a ResultTemplates, got str"):
        runner.resume_sync(step.pending, [{"type": "approve"}]).tool_messages("x")  # type: ignore[arg-type]


def test_an_error_result_without_an_outcome_is_still_marked() -> None:
    """Fail-safe: an error result built without an outcome reads as an error, never as a success."""
    from toolguard import ToolResult

    bare = ToolResult(call_id="c1", name="pay", status="error", content="Paid 10,000 to X.")
    assert DEFAULT_TEMPLATES.render(bare) == "Error: Paid 10,000 to X."
    assert ResultTemplates(error="!! {text}").render(bare) == "!! Paid 10,000 to X."
    plain = bare.model_copy(update={"status": "success"})
    assert DEFAULT_TEMPLATES.render(plain) == "Paid 10,000 to X."


def test_a_rejection_without_a_reason_reads_as_the_one_statement() -> None:
    """REJECTED_BY_USER_MESSAGE already says the call was rejected and not run: it is sent as it
    is, the content unchanged; a reason still gets the marker; the field can be set like any."""
    from toolguard import ToolResult

    bare = ToolResult(
        call_id="c1",
        name="send_email",
        status="error",
        content=REJECTED_BY_USER_MESSAGE,
        outcome="rejected",
    )
    assert DEFAULT_TEMPLATES.render(bare) == "User rejected this action. It was not executed."
    assert bare.content == REJECTED_BY_USER_MESSAGE
    assert unmark(DEFAULT_TEMPLATES.render(bare)) == REJECTED_BY_USER_MESSAGE
    reason = bare.model_copy(update={"content": "Wrong person."})
    marked_reason = "Rejected by the reviewer, not executed: Wrong person."
    assert DEFAULT_TEMPLATES.render(reason) == marked_reason
    custom = ResultTemplates(rejected_without_reason="[{name}] {text}")
    assert custom.render(bare) == "[send_email] User rejected this action. It was not executed."
    assert custom.render(reason) == marked_reason
    assert ResultTemplates.verbatim().render(bare) == REJECTED_BY_USER_MESSAGE
    with pytest.raises(ValueError, match="rejected_without_reason") as caught:
        ResultTemplates(rejected_without_reason="Rejected.")
    assert str(caught.value) == (
        "ResultTemplates.rejected_without_reason must contain {text} (the result's own text,"
        " kept verbatim), got 'Rejected.'"
    )
