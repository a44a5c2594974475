"""Deny rules hold at resume: rules added while a review waits stop the approved call.

Attack class: a call is proposed and put up for review; meanwhile the
operator adds a ``deny`` rule (the server restarts with ``--rules``, i.e. a
new ``Runner`` / ``ReviewedChat`` over the same store with new rules). A
reviewer who approves (or edits) the waiting call must not be able to run
what the rules of the running process now refuse: the call ends ``denied``
(result outcome ``denied``, the rule's text), it is audited, and nothing runs.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolguard
from toolguard import MemoryStore, ModelResponse, ReviewedChat, Rules, Runner, ScriptedModel

MAIL = {"to": "bob@example.com", "body": "The meeting is at 10."}
APPROVE = {"type": "approve"}
DENIED_TEXT = (
    "The call to `send_email` is denied by the rule `deny send_email`. It was not executed."
)
DENIED_MESSAGE = f"Denied by a rule, not executed: {DENIED_TEXT}"

Log = list[tuple[str, dict[str, Any]]]


def make_tools(log: Log) -> list[Any]:
    """send_email (one approval) and transfer (two), both logging their real calls."""

    @toolguard.requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @toolguard.requires_approval(approvals=2)
    def transfer(amount: int, to: str) -> str:
        """Move money."""
        log.append(("transfer", {"amount": amount, "to": to}))
        return f"moved {amount} to {to}"

    return [send_email, transfer]


def edit(name: str, **args: Any) -> dict[str, Any]:
    """An edit decision."""
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def runner_with(log: Log, rules: Rules | None) -> Runner:
    """A runner over the logged tools with ``rules`` (a restarted process)."""
    return Runner(toolguard.guard(make_tools(log), rules=rules))


def outcomes(step: toolguard.Step) -> list[tuple[str, Any, Any, Any]]:
    """(action status, result status, outcome, content) per action."""
    return [
        (
            a.status,
            a.result.status if a.result else None,
            a.result.outcome if a.result else None,
            a.result.content if a.result else None,
        )
        for a in step.actions
    ]


# --- the runner -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decision",
    [APPROVE, edit("send_email", to="carol@example.com", body="Moved to 11.")],
    ids=["approve", "edit"],
)
async def test_an_approval_after_a_new_deny_rule_runs_nothing(decision: dict[str, Any]) -> None:
    """Reviewed under no rules, resumed under ``deny send_email``: denied, nothing runs."""
    log: Log = []
    before = runner_with(log, None)
    step = await before.run([{"id": "c1", "name": "send_email", "args": MAIL}], thread_id="t")
    assert step.pending is not None

    after = runner_with(log, Rules(deny=["send_email"]))
    done = await after.resume(step.pending, [decision], thread_id="t")

    assert log == []
    assert done.pending is None
    assert outcomes(done) == [("failed", "error", "denied", DENIED_TEXT)]
    assert [(r.call_id, r.status, r.outcome, r.content) for r in done.results] == [
        ("c1", "error", "denied", DENIED_TEXT)
    ]


async def test_a_deny_rule_on_the_arguments_is_asked_with_the_real_call() -> None:
    """A rule matching only the proposed arguments stops the approve, not the edit away."""
    log: Log = []
    rules = Rules(deny=['send_email(to="*@example.com")'])
    before = runner_with(log, None)
    calls = [
        {"id": "c1", "name": "send_email", "args": MAIL},
        {"id": "c2", "name": "send_email", "args": MAIL},
    ]
    step = await before.run(calls, thread_id="t")
    assert step.pending is not None

    after = runner_with(log, rules)
    done = await after.resume(
        step.pending,
        [APPROVE, edit("send_email", to="carol@example.org", body="Hi")],
        thread_id="t",
    )

    text = (
        "The call to `send_email` is denied by the rule"
        ' `deny send_email(to="*@example.com")`. It was not executed.'
    )
    assert outcomes(done) == [
        ("failed", "error", "denied", text),
        ("executed", "success", None, "sent to carol@example.org"),
    ]
    assert log == [("send_email", {"to": "carol@example.org", "body": "Hi"})]


async def test_an_edit_into_a_denied_call_is_denied_under_the_same_rules() -> None:
    """The rules of the process that paused: an edit matching a deny rule never runs."""
    log: Log = []
    runner = runner_with(log, Rules(deny=['send_email(to="*@evil.example")']))
    step = await runner.run([{"id": "c1", "name": "send_email", "args": MAIL}], thread_id="t")
    assert step.pending is not None

    done = await runner.resume(
        step.pending, [edit("send_email", to="eve@evil.example", body="x")], thread_id="t"
    )

    assert log == []
    assert outcomes(done) == [
        (
            "failed",
            "error",
            "denied",
            (
                "The call to `send_email` is denied by the rule"
                ' `deny send_email(to="*@evil.example")`. It was not executed.'
            ),
        )
    ]


async def test_a_quorum_completed_after_a_new_deny_rule_runs_nothing() -> None:
    """Alice approves under no rules; Bob completes the quorum under ``deny transfer``."""
    log: Log = []
    before = runner_with(log, None)
    step = await before.run(
        [{"id": "c1", "name": "transfer", "args": {"amount": 5, "to": "bob"}}], thread_id="t"
    )
    assert step.pending is not None
    half = await before.resume(step.pending, [APPROVE], thread_id="t", reviewer="alice")
    assert half.pending is not None

    after = runner_with(log, Rules(deny=["transfer"]))
    done = await after.resume(half.pending, [APPROVE], thread_id="t", reviewer="bob")

    assert log == []
    assert outcomes(done) == [
        (
            "failed",
            "error",
            "denied",
            "The call to `transfer` is denied by the rule `deny transfer`. It was not executed.",
        )
    ]


# --- the chat over one store, restarted with new rules ------------------------------------------


def make_chat(store: MemoryStore, log: Log, rules: Rules | None) -> ReviewedChat:
    """A chat whose model proposes one email, then answers with what it read."""
    proposal = ModelResponse(tool_calls=[toolguard.ToolCall(id="c1", name="send_email", args=MAIL)])

    def answer(messages: Any) -> ModelResponse:
        return ModelResponse(text=f"Read: {messages[-1]['content']}")

    model = ScriptedModel([proposal, answer])
    return ReviewedChat(model, toolguard.guard(make_tools(log), rules=rules), store=store)


@pytest.mark.parametrize(
    ("decision", "args"),
    [
        (APPROVE, MAIL),
        (
            edit("send_email", to="carol@example.com", body="Moved."),
            {"to": "carol@example.com", "body": "Moved."},
        ),
    ],
    ids=["approve", "edit"],
)
async def test_a_restarted_chat_with_a_deny_rule_denies_the_waiting_call(
    decision: dict[str, Any], args: dict[str, Any]
) -> None:
    """The model reads the denial, the audit trail ends with ``denied``, nothing ran."""
    store = MemoryStore()
    log: Log = []
    paused = await make_chat(store, log, None).send_message("Mail Bob")
    assert paused.review_id is not None

    restarted = make_chat(store, log, Rules(deny=["send_email"]))
    restarted.model = ScriptedModel(
        [lambda messages: ModelResponse(text=f"Read: {messages[-1]['content']}")]
    )
    turn = await restarted.submit_review(
        [decision], paused.thread_id, review_id=paused.review_id, reviewer="rita"
    )

    assert log == []
    assert turn.reply == f"Read: {DENIED_MESSAGE}"
    state = await restarted.get_thread(paused.thread_id)
    assert state.status == "idle"
    assert [(a.status, a.result.outcome if a.result else None) for a in state.actions] == [
        ("failed", "denied")
    ]
    assert [(e.kind, e.actor, e.tool, e.args, e.detail) for e in state.audit] == [
        ("requested", None, "send_email", MAIL, None),
        ("decided", "rita", "send_email", args, None),
        ("denied", "rita", "send_email", None, DENIED_TEXT),
    ]
    assert state.audit[-1].action_id == state.actions[0].id
