"""LangChain's human-in-the-loop format, both ways: payloads, allowed decisions and ``respond``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from toolguard import (
    ALLOWED_DECISIONS,
    ApprovalPolicy,
    ApprovalRequiredError,
    InvalidReviewDecisionError,
    ModelResponse,
    PendingReview,
    PendingTurn,
    RespondDecision,
    ReviewedChat,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    ToolResult,
    requires_approval,
    validate_decisions,
)
from toolguard.records import DECISION_TYPES
from toolguard.text import render_history, set_language

try:
    from langchain.agents.middleware import human_in_the_loop as hitl
except ImportError:  # the checks against LangChain's own types need the bench extra
    hitl = None

needs_langchain = pytest.mark.skipif(hitl is None, reason="needs langchain (the bench extra)")

EMAIL = {"to": "alice@example.com", "body": "At 10."}
ASK = {"question": "Which Alice?"}
APPROVE = {"type": "approve"}
EDIT = {"type": "edit", "edited_action": {"name": "send_email", "args": EMAIL}}
RESPOND = {"type": "respond", "message": "Alice Doe, from accounting."}
NOT_A_LIST = "allowed_decisions must be a list of decision types such as ['approve', 'reject']"


def not_allowed(kind: str, name: str, allowed: list[str], lang: str = "en") -> str:
    """The catalog text for a decision type an action does not allow."""
    if lang == "id":
        return f"Keputusan '{kind}' tidak diizinkan untuk aksi '{name}'. Yang diizinkan: {allowed}"
    return f"Decision '{kind}' is not allowed for action '{name}'. Allowed: {allowed}"


@pytest.fixture(autouse=True)
def _english() -> Any:
    """Every test starts and ends in English."""
    set_language(None)
    yield
    set_language(None)


def tools(log: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """ask_user (respond or reject), send_email (approve or reject), delete_file (default)."""

    @requires_approval(allowed_decisions=["respond", "reject"])
    def ask_user(question: str) -> str:
        """Ask the user a question."""
        log.append(("ask_user", {"question": question}))
        return "the tool answered"

    @requires_approval(allowed_decisions=["reject", "approve"])
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @requires_approval
    def delete_file(path: str) -> str:
        """Delete a file."""
        log.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    return [ask_user, send_email, delete_file]


async def pause_three(log: list[tuple[str, dict[str, Any]]]) -> tuple[Runner, PendingTurn]:
    """A runner paused on ask_user, send_email and delete_file, in that order."""
    runner = Runner(tools(log))
    step = await runner.run(
        [
            ToolCall(id="c1", name="ask_user", args=ASK),
            ToolCall(id="c2", name="send_email", args=EMAIL),
            ToolCall(id="c3", name="delete_file", args={"path": "a.txt"}),
        ]
    )
    assert step.pending is not None
    return runner, step.pending


# --------------------------------------------------------------------------- payloads


@needs_langchain
def test_langchain_hitl_request_validates_as_our_payload() -> None:
    """LangChain's own HITLRequest (no description, respond, args_schema) is a PendingReview."""
    request = hitl.HITLRequest(
        action_requests=[
            hitl.ActionRequest(name="ask_user", args=ASK),
            hitl.ActionRequest(name="send_email", args=EMAIL, description="Check the address"),
        ],
        review_configs=[
            hitl.ReviewConfig(action_name="ask_user", allowed_decisions=["respond", "reject"]),
            hitl.ReviewConfig(
                action_name="send_email",
                allowed_decisions=["approve", "edit", "reject", "respond"],
                args_schema={"type": "object"},
            ),
        ],
    )
    assert PendingReview.model_validate(request).model_dump() == {
        "action_requests": [
            {
                "name": "ask_user",
                "args": ASK,
                "description": "Tool `ask_user` is awaiting approval",
            },
            {"name": "send_email", "args": EMAIL, "description": "Check the address"},
        ],
        "review_configs": [
            {"action_name": "ask_user", "allowed_decisions": ["respond", "reject"]},
            {
                "action_name": "send_email",
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
            },
        ],
    }


def test_missing_description_follows_the_language() -> None:
    """A request without a description gets the fixed text in the language in force."""
    set_language("id")
    review = PendingReview.model_validate(
        {"action_requests": [{"name": "x", "args": {}}], "review_configs": []}
    )
    assert review.action_requests[0].description == "Tool `x` menunggu persetujuan"


@needs_langchain
async def test_our_payload_and_decisions_validate_as_langchain_types() -> None:
    """Our payload (with per-tool allowed decisions) and decisions are LangChain's types."""
    _, pending = await pause_three([])
    dumped = pending.pending_review.model_dump()
    assert TypeAdapter(hitl.HITLRequest).validate_python(dumped) == dumped
    assert dumped["review_configs"] == [
        {"action_name": "ask_user", "allowed_decisions": ["reject", "respond"]},
        {"action_name": "send_email", "allowed_decisions": ["approve", "reject"]},
        {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]},
    ]
    decision = RespondDecision(message="Alice Doe").model_dump()
    assert decision == {"type": "respond", "message": "Alice Doe"}
    assert TypeAdapter(hitl.RespondDecision).validate_python(decision) == decision


@needs_langchain
def test_langchain_decisions_pass_validate_decisions_unchanged() -> None:
    """LangChain's decision TypedDicts answer a LangChain payload through validate_decisions."""
    request = {
        "action_requests": [{"name": "ask_user", "args": ASK}, {"name": "send_email", "args": {}}],
        "review_configs": [
            {"action_name": "ask_user", "allowed_decisions": ["respond"]},
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
        ],
    }
    decisions = [
        hitl.RespondDecision(type="respond", message="Alice Doe"),
        hitl.EditDecision(type="edit", edited_action=hitl.Action(name="send_email", args=EMAIL)),
    ]
    assert [d.model_dump() for d in validate_decisions(request, decisions)] == [
        {"type": "respond", "message": "Alice Doe"},
        {"type": "edit", "edited_action": {"name": "send_email", "args": EMAIL}},
    ]


# --------------------------------------------------------------------------- allowed decisions


@pytest.mark.parametrize("lang", ["en", "id"])
@pytest.mark.parametrize(
    ("decisions", "kind", "name", "allowed"),
    [
        ([APPROVE, APPROVE, APPROVE], "approve", "ask_user", ["reject", "respond"]),
        ([RESPOND, EDIT, APPROVE], "edit", "send_email", ["approve", "reject"]),
        ([RESPOND, RESPOND, APPROVE], "respond", "send_email", ["approve", "reject"]),
        ([RESPOND, APPROVE, RESPOND], "respond", "delete_file", ["approve", "edit", "reject"]),
    ],
)
async def test_a_decision_the_action_does_not_allow_is_refused(
    lang: str, decisions: list[dict[str, Any]], kind: str, name: str, allowed: list[str]
) -> None:
    """validate_decisions refuses it with the catalog text, in English and Indonesian."""
    _, pending = await pause_three([])
    set_language(lang)
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(pending, decisions)
    assert str(caught.value) == not_allowed(kind, name, allowed, lang)


@pytest.mark.parametrize(
    ("decisions", "text"),
    [
        pytest.param([EDIT], "Expected 3 decisions (one per action), got 1", id="count-first"),
        pytest.param(
            [{"type": "postpone"}, EDIT, APPROVE],
            "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
            id="type-before-allowed",
        ),
        pytest.param(
            [RESPOND, {"type": "edit"}, APPROVE],
            not_allowed("edit", "send_email", ["approve", "reject"]),
            id="allowed-before-edited-action",
        ),
        pytest.param(
            [{"type": "respond"}, APPROVE, APPROVE],
            "A 'respond' decision must include 'message' (text), got None",
            id="respond-without-message",
        ),
        pytest.param(
            [{"type": "respond", "message": 7}, APPROVE, APPROVE],
            "A 'respond' decision must include 'message' (text), got int",
            id="respond-message-not-text",
        ),
        pytest.param(
            [RESPOND, APPROVE, {"type": "edit"}],
            "An 'edit' decision must include 'edited_action'",
            id="allowed-edit-still-needs-its-action",
        ),
    ],
)
async def test_checks_run_in_the_specification_order(
    decisions: list[dict[str, Any]], text: str
) -> None:
    """Count, then each decision in order: type, allowed, then its fields."""
    _, pending = await pause_three([])
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(pending, decisions)
    assert str(caught.value) == text


def test_respond_needs_message_in_indonesian() -> None:
    """The new respond text has an Indonesian catalog entry."""
    set_language("id")
    review = {
        "action_requests": [{"name": "x", "args": {}}],
        "review_configs": [{"action_name": "x", "allowed_decisions": ["respond"]}],
    }
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(review, [{"type": "respond"}])
    assert (
        str(caught.value) == "Keputusan 'respond' wajib menyertakan 'message' (teks), diterima None"
    )


def test_default_review_refuses_respond_and_keeps_spec_texts() -> None:
    """A payload without review configs allows ALLOWED_DECISIONS; unknown types keep SPEC's text."""
    review = {"action_requests": [{"name": "send_email", "args": {}, "description": ""}]}
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(review, [RESPOND])
    assert str(caught.value) == not_allowed("respond", "send_email", list(ALLOWED_DECISIONS))
    set_language("id")
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(review, [{"type": "postpone"}])
    assert str(caught.value) == (
        "Jenis keputusan 'postpone' tidak dikenal. Pilihan: ['approve', 'edit', 'reject']"
    )


def test_an_empty_allowed_list_allows_nothing() -> None:
    """An explicit empty allowed_decisions list refuses every decision (fails closed)."""
    review = {
        "action_requests": [{"name": "x", "args": {}}],
        "review_configs": [{"action_name": "x", "allowed_decisions": []}],
    }
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(review, [APPROVE])
    assert str(caught.value) == not_allowed("approve", "x", [])


async def test_lenient_resume_enforces_allowed_decisions_and_runs_nothing() -> None:
    """Runner.resume refuses a disallowed decision before anything runs; the turn stays paused."""
    log: list[tuple[str, dict[str, Any]]] = []
    runner, pending = await pause_three(log)
    before = pending.model_dump()
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await runner.resume(pending, [RESPOND, APPROVE, RESPOND])
    assert str(caught.value) == not_allowed("respond", "delete_file", list(ALLOWED_DECISIONS))
    assert (log, pending.model_dump()) == ([], before)


# --------------------------------------------------------------------------- respond


async def test_respond_is_the_result_and_the_tool_never_runs() -> None:
    """respond: success result with the message, outcome responded, action responded."""
    log: list[tuple[str, dict[str, Any]]] = []
    runner, pending = await pause_three(log)
    step = await runner.resume(pending, validate_decisions(pending, [RESPOND, APPROVE, APPROVE]))
    assert step.results[0] == ToolResult(
        call_id="c1",
        name="ask_user",
        status="success",
        content="Alice Doe, from accounting.",
        outcome="responded",
    )
    assert [a.status for a in step.actions] == ["responded", "executed", "executed"]
    # The two approved tools run concurrently: compare what ran, in either order.
    assert sorted(log, key=lambda ran: ran[0]) == [
        ("delete_file", {"path": "a.txt"}),
        ("send_email", EMAIL),
    ]
    assert step.tool_messages()[0] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Alice Doe, from accounting.",
    }


async def test_recover_keeps_a_respond_decision() -> None:
    """A crash while applying decisions: the respond answer stands, approved ones end unknown."""
    runner, pending = await pause_three([])
    step = runner.interrupted(pending, [RESPOND, APPROVE, {"type": "reject"}])
    assert [(a.status, a.result and a.result.outcome) for a in step.actions] == [
        ("responded", "responded"),
        ("failed", "interrupted"),
        ("rejected", "rejected"),
    ]


async def test_chat_respond_audit_and_model_message(tmp_path: Any) -> None:
    """In the chat: decided(respond) and responded events; the model reads the answer as is."""
    log: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ToolCall(id="c1", name="ask_user", args=ASK)]),
            lambda messages: ModelResponse(text=f"Got: {messages[-1]['content']}"),
        ]
    )
    chat = ReviewedChat(model, tools(log), store=SQLiteStore(tmp_path / "t.sqlite3"))
    turn = await chat.send_message("mail alice")
    assert turn.pending_review is not None
    assert turn.pending_review.review_configs[0].allowed_decisions == ["reject", "respond"]
    final = await chat.submit_review([RESPOND], turn.thread_id, reviewer="maria")
    assert final.reply == "Got: Alice Doe, from accounting."
    state = await chat.get_thread(turn.thread_id)
    assert state.messages[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Alice Doe, from accounting.",
        "status": "success",
    }
    assert [(e.kind, e.decision, e.actor, e.detail) for e in state.audit] == [
        ("requested", None, None, None),
        ("decided", "respond", "maria", "Alice Doe, from accounting."),
        ("responded", None, "maria", "Alice Doe, from accounting."),
    ]
    assert [a.status for a in state.actions] == ["responded"]
    assert log == []
    assert render_history(state.actions).splitlines()[-1] == (
        "The user answered in place of the tool: Alice Doe, from accounting."
    )


@contextlib.asynccontextmanager
async def client_for(chat: ReviewedChat) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client that talks HTTP to the chat's app in this event loop."""
    from toolguard.http import create_app

    transport = httpx.ASGITransport(app=create_app(chat))
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as client:
        yield client


async def test_http_respond_allowed_is_200_not_allowed_is_400_unknown_is_422() -> None:
    """Over HTTP: respond passes the body check; allowed is applied, not allowed is a 400."""
    pytest.importorskip("fastapi")
    log: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(id="c1", name="ask_user", args=ASK),
                    ToolCall(id="c2", name="delete_file", args={"path": "a.txt"}),
                ]
            ),
            "Done.",
        ]
    )
    async with client_for(ReviewedChat(model, tools(log))) as client:
        started = (await client.post("/hitl/chat", json={"message": "go"})).json()
        thread_id = started["thread_id"]
        unknown = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [{"type": "postpone"}, APPROVE]},
        )
        refused = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [RESPOND, RESPOND]}
        )
        done = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [RESPOND, APPROVE]}
        )
    assert unknown.status_code == 422
    assert (refused.status_code, refused.json()) == (
        400,
        {"detail": not_allowed("respond", "delete_file", list(ALLOWED_DECISIONS))},
    )
    assert (done.status_code, done.json()["reply"]) == (200, "Done.")
    assert log == [("delete_file", {"path": "a.txt"})]


# --------------------------------------------------------------------------- the decorator option


def test_allowed_decisions_are_normalised_and_shown_in_a_direct_call_payload() -> None:
    """Order follows DECISION_TYPES, repeats drop; a direct call's payload lists them."""

    @requires_approval(allowed_decisions=("respond", "approve", "respond"))
    def send_email(to: str) -> str:
        return to

    with pytest.raises(ApprovalRequiredError) as caught:
        send_email("a@b.c")
    assert caught.value.pending_review.model_dump()["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "respond"]}
    ]
    assert DECISION_TYPES == ("approve", "edit", "reject", "respond")
    assert ApprovalPolicy().allowed_decisions == ALLOWED_DECISIONS


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (
            "approve",
            TypeError,
            f"{NOT_A_LIST}, got str",
        ),
        (
            None,
            TypeError,
            f"{NOT_A_LIST}, got NoneType",
        ),
        ([1], TypeError, "allowed_decisions must hold texts, got int: 1"),
        (
            [],
            ValueError,
            "allowed_decisions must allow at least one of ['approve', 'edit', 'reject', 'respond']",
        ),
        (
            ["approve", "postpone"],
            ValueError,
            (
                "Unknown decision type 'postpone' in allowed_decisions."
                " Choices: ['approve', 'edit', 'reject', 'respond']"
            ),
        ),
    ],
)
def test_bad_allowed_decisions_are_refused_at_decoration(
    value: Any, error: type[Exception], text: str
) -> None:
    """requires_approval and ApprovalPolicy both refuse them with a text naming the fix."""
    with pytest.raises(error) as caught:
        requires_approval(allowed_decisions=value)
    assert str(caught.value) == text
    with pytest.raises(error) as caught:
        ApprovalPolicy(allowed_decisions=value)
    assert str(caught.value) == text


async def test_allowed_decisions_survive_storage_and_defaults_dump_as_before() -> None:
    """A paused turn keeps per-tool allowed decisions through JSON; defaults are not dumped."""
    _, pending = await pause_three([])
    again = PendingTurn.model_validate_json(pending.model_dump_json())
    assert [a.allowed_decisions for a in again.actions] == [
        ["reject", "respond"],
        ["approve", "reject"],
        ["approve", "edit", "reject"],
    ]
    assert ["allowed_decisions" in a.model_dump() for a in again.actions] == [True, True, False]


async def test_chat_recover_ends_a_responded_action_responded() -> None:
    """A crash after claiming a respond decision: recover() ends it responded, audited so."""
    log: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="ask_user", args=ASK)])]
    )
    chat = ReviewedChat(model, tools(log))
    turn = await chat.send_message("ask")
    state = await chat.get_thread(turn.thread_id)
    # What a claim saves just before the process dies.
    await chat.store.save(
        state.model_copy(update={"status": "running", "decisions": [RespondDecision(**RESPOND)]}),
        expected_version=state.version,
    )
    assert await chat.recover(turn.thread_id) is True
    state = await chat.get_thread(turn.thread_id)
    assert [(a.status, a.result and a.result.content) for a in state.actions] == [
        ("responded", "Alice Doe, from accounting.")
    ]
    assert [e.kind for e in state.audit] == ["requested", "responded"]
    assert state.messages[-1]["content"] == "Alice Doe, from accounting."
    assert log == []


@needs_langchain
@pytest.mark.parametrize(
    "decision",
    [
        APPROVE,
        EDIT,
        {"type": "reject"},
        {"type": "reject", "message": "No."},
        RESPOND,
    ],
)
def test_every_decision_model_dumps_as_a_langchain_decision(decision: dict[str, Any]) -> None:
    """Parsed decisions dump to exactly LangChain's Decision dicts (no null message)."""
    review = {
        "action_requests": [{"name": "send_email", "args": {}}],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": list(DECISION_TYPES)}
        ],
    }
    dumped = validate_decisions(review, [decision])[0].model_dump()
    assert dumped == decision
    assert TypeAdapter(hitl.Decision).validate_python(dumped) == decision


@needs_langchain
def test_langchain_per_call_interrupt_value_is_a_one_action_review() -> None:
    """LangChain's per_call ToolApprovalRequest validates as a one-action PendingReview."""
    value = hitl.ToolApprovalRequest(
        type="tool_approval",
        tool_call_id="call_1",
        name="send_email",
        args=EMAIL,
        description="Check the address",
    )
    assert PendingReview.model_validate(value).model_dump() == {
        "action_requests": [
            {"name": "send_email", "args": EMAIL, "description": "Check the address"}
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
