"""Shadow mode: what would wait for a person runs at once, recorded as a ``shadow`` audit event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import (
    ALICE_MAIL,
    ASK_ALICE,
    WEBHOOK_SECRET,
    Receiver,
    calls,
    fresh_postgres_table,
    make_mail_tools,
    postgres_dsn,
    receiver,
)
from toolguard import (
    Candidate,
    Judge,
    MemoryStore,
    ReviewedChat,
    Rules,
    Runner,
    ScriptedModel,
    SQLiteStore,
    Webhook,
    guard,
)

__all__ = ["receiver"]  # a fixture, used by name

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
ASKS = "the tool's policy asks for a review of this call"
SENT = "Email sent to alice@example.com"
ALLOW = {
    "risk": "low",
    "user_authorized": True,
    "outcome": "allow",
    "rationale": "The user asked to write to Alice.",
}
Log = list[tuple[str, dict[str, Any]]]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A fresh store of each kind."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "t.db") as sqlite_store:
            yield sqlite_store
    else:
        from toolguard.postgres import PostgresStore

        dsn = postgres_dsn()
        async with fresh_postgres_table() as table, PostgresStore(dsn, table=table) as pg_store:
            yield pg_store


def chat_of(log: Log, *script: Any, **options: Any) -> ReviewedChat:
    tools = guard(make_mail_tools(log), rules=options.pop("rules", None))
    return ReviewedChat(ScriptedModel(list(script)), tools, clock=lambda: START, **options)


def audit(events: Any) -> list[dict[str, Any]]:
    """The events as dicts without their random ids."""
    return [{k: v for k, v in e.model_dump(mode="json").items() if k != "id"} for e in events]


def shadow_event(thread_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "at": "2026-01-02T03:04:05Z",
        "kind": "shadow",
        "thread_id": thread_id,
        "review_id": None,
        "action_id": None,
        "tool": "send_email",
        "args": ALICE_MAIL,
        "actor": None,
        "decision": None,
        "detail": ASKS,
        "digest": None,
        "would": "ask",
        **fields,
    }


async def test_a_guarded_call_runs_at_once_and_is_recorded_would_ask(store: Any) -> None:
    log: Log = []
    chat = chat_of(log, calls(("c1", "send_email", ALICE_MAIL)), "Sent.", store=store, shadow=True)
    turn = await chat.send_message(ASK_ALICE)
    assert (turn.pending_review, turn.reply) == (None, "Sent.")
    assert log == [("send_email", ALICE_MAIL)]
    assert audit(await chat.audit_trail(turn.thread_id)) == [shadow_event(turn.thread_id)]
    state = await chat.get_thread(turn.thread_id)
    assert state.messages[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": SENT,
        "status": "success",
    }


async def test_a_deny_rule_still_denies_unless_shadow_is_all() -> None:
    rules = Rules(deny=["send_email"])
    script = (calls(("c1", "send_email", ALICE_MAIL)), "Done.")
    log: Log = []
    chat = chat_of(log, *script, rules=rules, shadow=True)
    turn = await chat.send_message(ASK_ALICE)
    assert log == []
    denied = (
        "The call to `send_email` is denied by the rule `deny send_email`. It was not executed."
    )
    assert [(e.kind, e.detail) for e in await chat.audit_trail(turn.thread_id)] == [
        ("denied", denied)
    ]
    chat = chat_of(log, *script, rules=rules, shadow="all")
    turn = await chat.send_message(ASK_ALICE)
    assert log == [("send_email", ALICE_MAIL)]
    assert audit(await chat.audit_trail(turn.thread_id)) == [
        shadow_event(turn.thread_id, would="deny", detail="matched the deny rule 'send_email'")
    ]


async def test_the_judges_verdict_is_recorded_with_the_shadow_event() -> None:
    log: Log = []
    judge = Judge(ScriptedModel([json.dumps({**ALLOW, "outcome": "ask", "risk": "medium"})]))
    chat = chat_of(log, calls(("c1", "send_email", ALICE_MAIL)), "Sent.", shadow=True, judge=judge)
    turn = await chat.send_message(ASK_ALICE)
    assert log == [("send_email", ALICE_MAIL)]
    judged, shadowed = audit(await chat.audit_trail(turn.thread_id))
    verdict = {
        "call_id": "c1",
        "tool": "send_email",
        **ALLOW,
        "outcome": "ask",
        "risk": "medium",
        "model": "ScriptedModel",
        "latency_ms": shadowed["judgement"]["latency_ms"],
        "decided": True,
        "auto_approved": False,
    }
    assert judged["kind"] == "judged"
    assert shadowed == shadow_event(turn.thread_id, judgement=verdict)


async def test_a_shadow_event_is_posted_as_review_shadow(receiver: Receiver) -> None:
    log: Log = []
    notify = Webhook(receiver.url, secret=WEBHOOK_SECRET)
    script = (calls(("c1", "send_email", ALICE_MAIL)), "Sent.")
    chat = chat_of(log, *script, shadow=True, notify=notify)
    turn = await chat.send_message(ASK_ALICE)
    assert await chat.deliver_notifications() == 1
    [body] = receiver.accepted
    assert body == {
        "id": body["id"],
        "event": "review.shadow",
        "created_at": "2026-01-02T03:04:05+00:00",
        "thread_id": turn.thread_id,
        "tool": "send_email",
        "args": ALICE_MAIL,
        "would": "ask",
        "reason": ASKS,
        "judgement": None,
    }


async def test_a_runner_lists_what_it_ran_in_shadow_mode() -> None:
    log: Log = []
    runner = Runner(make_mail_tools(log), shadow=True)
    step = await runner.run([{"id": "c1", "name": "send_email", "args": ALICE_MAIL}])
    assert step.pending is None
    assert [r.model_dump() for r in step.shadowed] == [
        {
            "call_id": "c1",
            "tool": "send_email",
            "would": "ask",
            "reason": ASKS,
            "rule": None,
            "judgement": None,
        }
    ]
    assert [r.content for r in step.results] == [SENT]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("yes", "shadow must be True, False or 'all', got str 'yes'"),
        (1, "shadow must be True, False or 'all', got int 1"),
    ],
)
def test_shadow_takes_true_false_or_all(value: Any, error: str) -> None:
    with pytest.raises(ValueError, match=r"^shadow") as info:
        Runner([], shadow=value)
    assert str(info.value) == error


# --------------------------------------------------------------------------- candidate


class FailingModel:
    """A judge model whose every call fails."""

    model = "failing-model"

    async def complete(self, messages: Any, tools: Any) -> Any:
        msg = "the model is down"
        raise RuntimeError(msg)


def candidate_event(thread_id: str, **verdict: Any) -> dict[str, Any]:
    shown = {
        "call_id": "c1",
        "tool": "send_email",
        "rule": None,
        "judgement": None,
        "error": None,
        **verdict,
    }
    return {
        "at": "2026-01-02T03:04:05Z",
        "kind": "candidate",
        "thread_id": thread_id,
        "review_id": None,
        "action_id": None,
        "tool": "send_email",
        "args": ALICE_MAIL,
        "actor": None,
        "decision": None,
        "detail": shown["reason"],
        "digest": None,
        "candidate": shown,
    }


async def test_candidate_rules_are_recorded_and_change_nothing(store: Any) -> None:
    log: Log = []
    candidate = Candidate(rules=Rules(allow=["send_email"]))
    script = (calls(("c1", "send_email", ALICE_MAIL)), "Sent.")
    chat = chat_of(log, *script, store=store, candidate=candidate)
    turn = await chat.send_message(ASK_ALICE)
    assert turn.pending_review is not None  # the enforced policy still asks
    assert log == []
    events = audit(await chat.audit_trail(turn.thread_id))
    assert [e["kind"] for e in events] == ["candidate", "requested"]
    assert events[0] == candidate_event(
        turn.thread_id,
        outcome="run",
        reason="matched the allow rule 'send_email'",
        rule="send_email",
    )


async def test_a_candidate_judge_that_fails_is_recorded_and_blocks_nothing() -> None:
    log: Log = []
    candidate = Candidate(judge=Judge(FailingModel(), auto_approve=True))
    chat = chat_of(
        log,
        calls(("c1", "send_email", ALICE_MAIL)),
        "Sent.",
        candidate=candidate,
        rules=Rules(allow=["send_email"]),
    )
    turn = await chat.send_message(ASK_ALICE)
    assert (turn.pending_review, turn.reply) == (None, "Sent.")  # enforced: the allow rule
    assert log == [("send_email", ALICE_MAIL)]
    [event] = audit(await chat.audit_trail(turn.thread_id))
    # The candidate's own rules are the enforced ones (it has none): the allow rule runs it,
    # and its judge is asked about calls that would ask only.
    assert event == candidate_event(
        turn.thread_id,
        outcome="run",
        reason="matched the allow rule 'send_email'",
        rule="send_email",
    )
    candidate = Candidate(judge=Judge(FailingModel(), scope="all"))
    chat = chat_of(
        log,
        calls(("c1", "send_email", ALICE_MAIL)),
        "Sent.",
        candidate=candidate,
        rules=Rules(allow=["send_email"]),
    )
    turn = await chat.send_message(ASK_ALICE)
    assert turn.reply == "Sent."
    [event] = audit(await chat.audit_trail(turn.thread_id))
    judgement = event["candidate"]["judgement"]
    assert judgement == {
        "call_id": "c1",
        "tool": "send_email",
        "risk": None,
        "user_authorized": None,
        "outcome": "ask",
        "rationale": "the model failed (RuntimeError)",
        "model": "failing-model",
        "latency_ms": judgement["latency_ms"],
        "decided": False,
        "auto_approved": False,
    }
    assert event == candidate_event(
        turn.thread_id,
        outcome="ask",
        reason="its judge would ask a person",
        rule="send_email",
        judgement=judgement,
        error="its judge could not decide: the model failed (RuntimeError)",
    )


async def test_a_candidate_judge_that_would_approve_is_recorded_and_a_person_still_decides() -> (
    None
):
    log: Log = []
    candidate = Candidate(judge=Judge(ScriptedModel([json.dumps(ALLOW)]), auto_approve=True))
    chat = chat_of(log, calls(("c1", "send_email", ALICE_MAIL)), "Sent.", candidate=candidate)
    turn = await chat.send_message(ASK_ALICE)
    assert turn.pending_review is not None
    assert log == []
    event = audit(await chat.audit_trail(turn.thread_id))[0]
    judgement = event["candidate"]["judgement"]
    assert (judgement["outcome"], judgement["auto_approved"]) == ("allow", False)
    assert event == candidate_event(
        turn.thread_id,
        outcome="run",
        reason="its judge would approve the call",
        judgement=judgement,
    )


def test_a_candidate_needs_rules_or_a_judge() -> None:
    with pytest.raises(ValueError, match=r"^A Candidate") as info:
        Candidate()
    assert str(info.value) == "A Candidate needs rules=, judge= or both"
    with pytest.raises(TypeError, match=r"^candidate") as error:
        Runner([], candidate="rules.toml")  # type: ignore[arg-type]
    assert str(error.value) == (
        "candidate must be a toolguard.Candidate or None, got str 'rules.toml'"
    )


async def test_a_shadowed_calls_span_says_shadow_and_what_it_would_have_done(spans: Any) -> None:
    log: Log = []
    runner = Runner(guard(make_mail_tools(log), rules=Rules(deny=["search"])), shadow="all")
    await runner.run(
        [
            {"id": "c1", "name": "send_email", "args": ALICE_MAIL},
            {"id": "c2", "name": "search", "args": {"query": "x"}},
        ]
    )
    attributes = {
        s.attributes["gen_ai.tool.call.id"]: {
            k: v for k, v in s.attributes.items() if k.startswith("toolguard.")
        }
        for s in spans.get_finished_spans()
    }
    assert attributes == {
        "c1": {
            "toolguard.decided_by": "shadow",
            "toolguard.shadow.would": "ask",
            "toolguard.outcome": "executed",
        },
        "c2": {
            "toolguard.decided_by": "shadow",
            "toolguard.shadow.would": "deny",
            "toolguard.outcome": "executed",
        },
    }


async def test_a_call_a_judge_of_every_call_would_ask_about_runs_and_says_so() -> None:
    log: Log = []
    verdict = {**ALLOW, "outcome": "ask", "risk": "high"}
    judge = Judge(ScriptedModel([json.dumps(verdict)]), scope="all")
    runner = Runner(make_mail_tools(log), judge=judge, shadow=True)
    step = await runner.run([{"id": "c1", "name": "search", "args": {"query": "x"}}])
    assert log == [("search", {"query": "x"})]
    [record] = step.shadowed
    assert (record.would, record.reason, record.rule) == (
        "ask",
        "the judge asks a person about this call",
        None,
    )
    assert record.judgement is not None
    assert record.judgement.outcome == "ask"
