"""Standing grants: "approve, and stop asking for this in this conversation"."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest

import toolguard
from toolguard import (
    ApproveDecision,
    Classifier,
    ConcurrentUpdateError,
    InvalidReviewDecisionError,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    ReviewerNotAllowedError,
    Rules,
    ScriptedModel,
    StaleReviewError,
    ThreadState,
    ToolCall,
    UnknownGrantError,
    guard,
    validate_decisions,
)
from toolguard.records import AuditEvent, GrantTerms, StandingGrant
from toolguard.text import set_language

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ALICE = {"to": "alice@example.com", "subject": "Hi", "body": "."}
BOB = {"to": "bob@example.com", "subject": "Hi", "body": "."}
Log = list[tuple[str, dict[str, Any]]]


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def tools(log: Log, approvals: int = 1) -> Any:
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        log.append(("send_email", {"to": to}))
        return f"sent to {to}"

    if approvals > 1:
        send_email = toolguard.requires_approval(approvals=approvals)(send_email)

    def delete_file(path: str) -> str:
        """Delete a file."""
        log.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    def set_volume(level: Any) -> str:
        """Set the volume (guarded by name: `set` is not a verb, so listed explicitly)."""
        log.append(("set_volume", {"level": level}))
        return f"volume {level!r}"

    return [send_email, delete_file, set_volume]


def call(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(id=call_id, name=name, args=args)


def turn(*tool_calls: ToolCall) -> ModelResponse:
    return ModelResponse(tool_calls=list(tool_calls))


class _Model(ScriptedModel):
    """A ScriptedModel whose function steps may be async (to act while a turn runs)."""

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        answer: Any = await super().complete(messages, tools)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer  # type: ignore[no-any-return]


def make_chat(
    script: Sequence[Any],
    log: Log,
    clock: Clock,
    *,
    store: MemoryStore | None = None,
    rules: Rules | None = None,
    authorize: Any = None,
    signing_key: bytes | None = None,
    approvals: int = 1,
) -> ReviewedChat:
    toolset = guard(tools(log, approvals), Classifier(always=["set_volume"]), rules=rules)
    return ReviewedChat(
        _Model(script),
        toolset,
        store=store or MemoryStore(),
        clock=clock,
        authorize=authorize,
        signing_key=signing_key,
    )


def kinds(state: ThreadState) -> list[str]:
    return [e.kind for e in state.audit]


def grant_events(state: ThreadState) -> list[dict[str, Any]]:
    """The grant events of the audit trail, without their ids and times."""
    return [
        e.model_dump(exclude={"id", "at", "thread_id"})
        for e in state.audit
        if e.kind.startswith("grant")
    ]


GRANT_TOOL = {"type": "approve", "grant": {"scope": "thread", "match": "tool", "uses": 2}}


async def granted_thread(
    script_after: Sequence[Any],
    log: Log,
    clock: Clock,
    *,
    grant: dict[str, Any] | None = None,
    reviewer: str | None = "ana",
    **options: Any,
) -> tuple[ReviewedChat, str, StandingGrant]:
    """A thread where ana approved send_email(ALICE) with ``grant``; the model then follows."""
    script = [turn(call("c1", "send_email", ALICE)), "Sent.", *script_after]
    chat = make_chat(script, log, clock, **options)
    first = await chat.send_message("Mail Alice")
    decision = {"type": "approve", "grant": grant or GRANT_TOOL["grant"]}
    done = await chat.submit_review(
        [decision], first.thread_id, review_id=first.review_id, reviewer=reviewer
    )
    assert done.reply == "Sent."
    state = await chat.get_thread(first.thread_id)
    assert len(state.grants) == 1
    return chat, first.thread_id, state.grants[0]


# --------------------------------------------------------------------------- the decision


def test_an_approve_with_a_grant_is_still_a_langchain_approve() -> None:
    parsed = validate_decisions(
        {"action_requests": [{"name": "send_email", "args": ALICE, "description": "."}]},
        [{"type": "approve", "grant": {"scope": "thread", "match": "args", "ttl": 60}}],
    )
    assert parsed == [ApproveDecision(grant=GrantTerms(match="args", ttl=60.0))]
    assert parsed[0].model_dump() == {
        "type": "approve",
        "grant": {"scope": "thread", "match": "args", "uses": None, "ttl": 60.0},
    }
    assert ApproveDecision().model_dump() == {"type": "approve"}


PAYLOAD = {"action_requests": [{"name": "send_email", "args": ALICE, "description": "."}]}
BAD_GRANTS = [
    ("yes", "'grant' must be an object like {'scope': 'thread', 'match': 'tool'}, got str"),
    (
        {"scope": "thread", "match": "tool", "forever": True},
        "Unknown keys in 'grant': ['forever']. Allowed: ['scope', 'match', 'uses', 'ttl']",
    ),
    ({"match": "tool"}, "The 'scope' of a grant must be 'thread', got None"),
    (
        {"scope": "global", "match": "tool"},
        "The 'scope' of a grant must be 'thread', got 'global'",
    ),
    (
        {"scope": "thread", "match": "anything"},
        "The 'match' of a grant must be 'tool' or 'args', got 'anything'",
    ),
    (
        {"scope": "thread", "match": "tool", "uses": 0},
        "The 'uses' of a grant must be a whole number from 1 to 10000, got 0",
    ),
    (
        {"scope": "thread", "match": "tool", "uses": True},
        "The 'uses' of a grant must be a whole number from 1 to 10000, got True",
    ),
    (
        {"scope": "thread", "match": "tool", "uses": 2.0},
        "The 'uses' of a grant must be a whole number from 1 to 10000, got 2.0",
    ),
    (
        {"scope": "thread", "match": "tool", "uses": 10**30},
        (
            "The 'uses' of a grant must be a whole number from 1 to 10000,"
            " got 1000000000000000000000000000000"
        ),
    ),
    (
        {"scope": "thread", "match": "tool", "ttl": float("inf")},
        "The 'ttl' of a grant must be a number of seconds above 0 and at most 31622400, got inf",
    ),
    (
        {"scope": "thread", "match": "tool", "ttl": float("nan")},
        "The 'ttl' of a grant must be a number of seconds above 0 and at most 31622400, got nan",
    ),
    (
        {"scope": "thread", "match": "tool", "ttl": -1},
        "The 'ttl' of a grant must be a number of seconds above 0 and at most 31622400, got -1",
    ),
    (
        {"scope": "thread", "match": "tool", "ttl": False},
        (
            "The 'ttl' of a grant must be a number of seconds above 0 and at most 31622400,"
            " got False"
        ),
    ),
    (
        {"scope": "thread", "match": "tool", "ttl": "3600"},
        (
            "The 'ttl' of a grant must be a number of seconds above 0 and at most 31622400,"
            " got '3600'"
        ),
    ),
]


@pytest.mark.parametrize(("grant", "text"), BAD_GRANTS)
def test_a_malformed_grant_is_refused_with_a_clear_error(grant: Any, text: str) -> None:
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(PAYLOAD, [{"type": "approve", "grant": grant}])
    assert str(caught.value) == text


@pytest.mark.parametrize(
    "decision",
    [
        {"type": "reject", "message": "no", "grant": {"scope": "thread", "match": "tool"}},
        {
            "type": "edit",
            "edited_action": {"name": "send_email", "args": BOB},
            "grant": {"scope": "thread", "match": "tool"},
        },
    ],
)
def test_only_an_approve_can_carry_a_grant(decision: dict[str, Any]) -> None:
    with pytest.raises(InvalidReviewDecisionError) as caught:
        validate_decisions(PAYLOAD, [decision])
    assert str(caught.value) == (
        f"Only an 'approve' decision can carry a 'grant', not {decision['type']!r}"
    )


def test_the_grant_errors_have_an_indonesian_text() -> None:
    set_language("id")
    try:
        with pytest.raises(InvalidReviewDecisionError) as caught:
            validate_decisions(PAYLOAD, [{"type": "approve", "grant": {"match": "tool"}}])
    finally:
        set_language(None)
    assert str(caught.value) == "'scope' pada grant harus 'thread', diterima None"


async def test_a_refused_grant_changes_nothing() -> None:
    log: Log = []
    chat = make_chat([turn(call("c1", "send_email", ALICE))], log, Clock())
    first = await chat.send_message("Mail Alice")
    before = await chat.get_thread(first.thread_id)
    bad = {"type": "approve", "grant": {"scope": "thread", "match": "tool", "uses": -3}}
    with pytest.raises(InvalidReviewDecisionError):
        await chat.submit_review([bad], first.thread_id, review_id=first.review_id)
    assert await chat.get_thread(first.thread_id) == before
    assert log == []


# --------------------------------------------------------------------------- using a grant


async def test_a_grant_runs_later_calls_of_the_tool_until_its_uses_are_spent() -> None:
    log: Log = []
    clock = Clock()
    script = [
        turn(call("c2", "send_email", BOB)),
        "Sent to Bob.",
        turn(call("c3", "send_email", ALICE)),
        "Sent again.",
        turn(call("c4", "send_email", BOB)),
    ]
    chat, thread_id, grant = await granted_thread(script, log, clock)
    assert grant == StandingGrant(
        id=grant.id,
        tool="send_email",
        match="tool",
        args=None,
        uses=2,
        uses_left=2,
        ttl=None,
        granted_by="ana",
        granted_at=T0,
        expires_at=None,
        review_id=grant.review_id,
        action_id=grant.action_id,
        digest=grant.digest,
    )
    second = await chat.send_message("Mail Bob", thread_id)
    assert (second.reply, second.pending_review) == ("Sent to Bob.", None)
    third = await chat.send_message("Mail Alice again", thread_id)
    assert third.reply == "Sent again."
    fourth = await chat.send_message("Mail Bob again", thread_id)
    assert fourth.pending_review is not None  # used up: reviewed again
    assert log == [
        ("send_email", {"to": "alice@example.com"}),
        ("send_email", {"to": "bob@example.com"}),
        ("send_email", {"to": "alice@example.com"}),
    ]
    state = await chat.get_thread(thread_id)
    assert state.grants == [
        grant.model_copy(update={"uses_left": 0, "ended": "used_up", "ended_at": T0})
    ]
    assert grant_events(state) == [
        {
            "kind": "grant_created",
            "review_id": grant.review_id,
            "action_id": grant.action_id,
            "tool": "send_email",
            "args": None,
            "actor": "ana",
            "decision": None,
            "detail": f"grant {grant.id}: match tool, uses 2, ttl none",
            "digest": None,
        },
        {
            "kind": "granted",
            "review_id": grant.review_id,
            "action_id": None,
            "tool": "send_email",
            "args": BOB,
            "actor": "ana",
            "decision": None,
            "detail": f"grant {grant.id}; uses left: 1",
            "digest": None,
        },
        {
            "kind": "granted",
            "review_id": grant.review_id,
            "action_id": None,
            "tool": "send_email",
            "args": ALICE,
            "actor": "ana",
            "decision": None,
            "detail": f"grant {grant.id}; uses left: 0",
            "digest": None,
        },
        {
            "kind": "grant_ended",
            "review_id": grant.review_id,
            "action_id": None,
            "tool": "send_email",
            "args": None,
            "actor": "ana",
            "decision": None,
            "detail": f"grant {grant.id} used up",
            "digest": None,
        },
    ]
    # The granted calls' results are in the history like any other result.
    tool_messages = [m["content"] for m in state.messages if m["role"] == "tool"]
    assert tool_messages == [
        "sent to alice@example.com",
        "sent to bob@example.com",
        "sent to alice@example.com",
    ]


async def test_a_grant_never_crosses_threads() -> None:
    log: Log = []
    clock = Clock()
    chat, _, _ = await granted_thread([turn(call("c2", "send_email", BOB))], log, clock)
    other = await chat.send_message("Mail Bob")  # a new thread
    assert other.pending_review is not None
    assert (await chat.get_thread(other.thread_id)).grants == []


async def test_match_args_runs_only_exactly_the_same_arguments() -> None:
    log: Log = []
    clock = Clock()
    grant = {"scope": "thread", "match": "args"}
    replays = [
        {"level": 1.0},  # 1.0 is not 1
        {"level": True},  # True is not 1
        {"level": "1"},
        {"level": 2},
        {"level": [1]},
    ]
    script: list[Any] = [turn(call("c1", "set_volume", {"level": 1})), "Set."]
    for index, args in enumerate(replays):
        script.append(turn(call(f"r{index}", "set_volume", args)))
    chat = make_chat([*script, turn(call("ok", "set_volume", {"level": 1})), "Again."], log, clock)
    first = await chat.send_message("Volume 1")
    await chat.submit_review(
        [{"type": "approve", "grant": grant}], first.thread_id, review_id=first.review_id
    )
    thread_id = first.thread_id
    for args in replays:
        pending = await chat.send_message("Again", thread_id)
        assert pending.pending_review is not None, args
        assert pending.pending_review.action_requests[0].args == args
        await chat.cancel_review(thread_id, review_id=pending.review_id)
    same = await chat.send_message("Volume 1 again", thread_id)
    assert same.reply == "Again."
    assert log == [("set_volume", {"level": 1}), ("set_volume", {"level": 1})]
    state = await chat.get_thread(thread_id)
    assert [g.args for g in state.grants] == [{"level": 1}]
    assert kinds(state).count("granted") == 1


@pytest.mark.parametrize("name", ["send_emai\u0456l", "Send_Email", "send_email ", "send-email"])
async def test_a_confusable_tool_name_is_not_covered(name: str) -> None:
    log: Log = []
    chat, thread_id, grant = await granted_thread(
        [turn(call("c2", name, BOB)), "Could not."], log, Clock()
    )
    answer = await chat.send_message("Mail Bob", thread_id)
    assert answer.reply == "Could not."
    state = await chat.get_thread(thread_id)
    assert state.grants == [grant]  # nothing spent
    assert state.messages[-2]["content"] == (
        f"Error, not executed: Tool `{name}` does not exist."
        " Available tools: send_email, delete_file, set_volume"
    )
    assert log == [("send_email", {"to": "alice@example.com"})]


async def test_a_grant_covers_only_its_tool() -> None:
    log: Log = []
    chat, thread_id, grant = await granted_thread(
        [turn(call("c2", "delete_file", {"path": "/srv/x"}))], log, Clock()
    )
    answer = await chat.send_message("Delete it", thread_id)
    assert answer.pending_review is not None
    assert (await chat.get_thread(thread_id)).grants == [grant]


async def test_expiry_is_exactly_at_ttl() -> None:
    log: Log = []
    clock = Clock()
    grant_terms = {"scope": "thread", "match": "tool", "ttl": 60}
    script = [turn(call("c2", "send_email", BOB)), "In time.", turn(call("c3", "send_email", BOB))]
    chat, thread_id, grant = await granted_thread(script, log, clock, grant=grant_terms)
    assert grant.expires_at == T0 + timedelta(seconds=60)
    clock.now = T0 + timedelta(seconds=60) - timedelta(microseconds=1)
    assert (await chat.send_message("Mail Bob", thread_id)).reply == "In time."
    clock.now = T0 + timedelta(seconds=60)
    late = await chat.send_message("Mail Bob again", thread_id)
    assert late.pending_review is not None
    state = await chat.get_thread(thread_id)
    assert state.grants == [grant.model_copy(update={"ended": "expired", "ended_at": clock.now})]
    assert [e["kind"] for e in grant_events(state)] == [
        "grant_created",
        "granted",
        "grant_ended",
    ]
    assert grant_events(state)[-1]["detail"] == f"grant {grant.id} expired"


async def test_uses_run_out_in_the_middle_of_a_step_of_parallel_calls() -> None:
    log: Log = []
    parallel = turn(
        call("p1", "send_email", {**BOB, "subject": "1"}),
        call("p2", "send_email", {**BOB, "subject": "2"}),
        call("p3", "send_email", {**BOB, "subject": "3"}),
    )
    chat, thread_id, grant = await granted_thread([parallel], log, Clock())
    answer = await chat.send_message("Mail Bob three times", thread_id)
    assert answer.pending_review is not None
    assert [a.args["subject"] for a in answer.pending_review.action_requests] == ["3"]
    assert log == [("send_email", {"to": "alice@example.com"})] + 2 * [
        ("send_email", {"to": "bob@example.com"})
    ]
    state = await chat.get_thread(thread_id)
    assert state.grants[0].uses_left == 0
    assert [e.detail for e in state.audit if e.kind == "granted"] == [
        f"grant {grant.id}; uses left: 1",
        f"grant {grant.id}; uses left: 0",
    ]


# --------------------------------------------------------------------------- granting is a decision


async def test_a_reviewer_the_hook_refuses_makes_no_grant() -> None:
    log: Log = []

    def authorize(reviewer: str | None, thread: ThreadState, actions: list[Any]) -> bool:
        return reviewer == "ana"

    chat = make_chat([turn(call("c1", "send_email", ALICE))], log, Clock(), authorize=authorize)
    first = await chat.send_message("Mail Alice")
    with pytest.raises(ReviewerNotAllowedError):
        await chat.submit_review(
            [GRANT_TOOL], first.thread_id, review_id=first.review_id, reviewer="mallory"
        )
    state = await chat.get_thread(first.thread_id)
    assert (state.grants, state.status, log) == ([], "awaiting_review", [])
    assert kinds(state) == ["requested", "refused"]


async def test_a_grant_on_a_stale_review_id_is_refused() -> None:
    log: Log = []
    script = [turn(call("c1", "send_email", ALICE)), "Sent.", turn(call("c2", "send_email", BOB))]
    chat = make_chat(script, log, Clock())
    first = await chat.send_message("Mail Alice")
    await chat.submit_review([{"type": "approve"}], first.thread_id, review_id=first.review_id)
    second = await chat.send_message("Mail Bob", first.thread_id)
    assert second.pending_review is not None
    with pytest.raises(StaleReviewError):
        await chat.submit_review([GRANT_TOOL], first.thread_id, review_id=first.review_id)
    state = await chat.get_thread(first.thread_id)
    assert (state.grants, state.status) == ([], "awaiting_review")


async def test_a_tool_that_needs_a_quorum_gets_no_grant() -> None:
    log: Log = []
    chat = make_chat([turn(call("c1", "send_email", ALICE))], log, Clock(), approvals=2)
    first = await chat.send_message("Mail Alice")
    before = await chat.get_thread(first.thread_id)
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await chat.submit_review([GRANT_TOOL], first.thread_id, review_id=first.review_id)
    assert str(caught.value) == (
        "No grant for action 'send_email': the tool needs 2 approvals, and a grant would let"
        " later calls skip them"
    )
    assert await chat.get_thread(first.thread_id) == before


async def test_a_grant_made_before_a_quorum_was_required_covers_nothing() -> None:
    """The deployment later requires 2 approvals: the grant stored before covers nothing."""
    log: Log = []
    store = MemoryStore()
    clock = Clock()
    _, thread_id, grant = await granted_thread([], log, clock, store=store)
    chat = make_chat([turn(call("c2", "send_email", BOB))], log, clock, store=store, approvals=2)
    assert (await chat.send_message("Mail Bob", thread_id)).pending_review is not None
    assert (await chat.get_thread(thread_id)).grants == [grant]
    assert log == [("send_email", {"to": ALICE["to"]})]


# --------------------------------------------------------------------------- rules


async def test_a_deny_rule_wins_over_a_grant() -> None:
    log: Log = []
    rules = Rules(deny=['send_email(to="*@evil.example")'])
    script = [turn(call("c2", "send_email", {**BOB, "to": "eve@evil.example"})), "Denied."]
    chat, thread_id, grant = await granted_thread(script, log, Clock(), rules=rules)
    assert (await chat.send_message("Mail Eve", thread_id)).reply == "Denied."
    state = await chat.get_thread(thread_id)
    assert state.grants == [grant]
    assert kinds(state)[-1] == "denied"
    assert log == [("send_email", {"to": "alice@example.com"})]


async def test_an_ask_rule_call_is_reviewed_and_gets_no_grant() -> None:
    log: Log = []
    rules = Rules(ask=['send_email(to="*@board.example")'])
    script = [turn(call("c2", "send_email", {**BOB, "to": "chair@board.example"}))]
    chat, thread_id, grant = await granted_thread(script, log, Clock(), rules=rules)
    asked = await chat.send_message("Mail the chair", thread_id)
    assert asked.pending_review is not None
    assert (await chat.get_thread(thread_id)).grants == [grant]  # not spent
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await chat.submit_review([GRANT_TOOL], thread_id, review_id=asked.review_id)
    assert str(caught.value) == (
        "No grant for action 'send_email': the rule 'send_email(to=\"*@board.example\")'"
        " asks for a review of every such call"
    )


# --------------------------------------------------------------------------- revoking


async def test_a_revoked_grant_covers_nothing_and_cannot_be_revoked_twice() -> None:
    log: Log = []
    clock = Clock()
    chat, thread_id, grant = await granted_thread([turn(call("c2", "send_email", BOB))], log, clock)
    clock.now = T0 + timedelta(seconds=5)
    revoked = await chat.revoke_grant(thread_id, grant.id, reviewer="ana")
    assert revoked == grant.model_copy(
        update={"ended": "revoked", "ended_at": clock.now, "ended_by": "ana"}
    )
    state = await chat.get_thread(thread_id)
    assert state.grants == [revoked]
    assert grant_events(state)[-1] == {
        "kind": "grant_revoked",
        "review_id": grant.review_id,
        "action_id": None,
        "tool": "send_email",
        "args": None,
        "actor": "ana",
        "decision": None,
        "detail": f"grant {grant.id} revoked; uses left: 2",
        "digest": None,
    }
    assert (await chat.send_message("Mail Bob", thread_id)).pending_review is not None
    with pytest.raises(UnknownGrantError) as twice:
        await chat.revoke_grant(thread_id, grant.id)
    assert str(twice.value) == (
        f"The grant {grant.id!r} in conversation {thread_id!r} is no longer active (revoked)"
    )
    with pytest.raises(UnknownGrantError) as unknown:
        await chat.revoke_grant(thread_id, "no-such-grant")
    assert str(unknown.value) == f"Unknown grant 'no-such-grant' in conversation {thread_id!r}"
    assert unknown.value.status is None


async def test_revoking_is_a_decision_the_hook_may_refuse() -> None:
    log: Log = []
    seen: list[tuple[str | None, list[str]]] = []

    def authorize(reviewer: str | None, thread: ThreadState, actions: list[Any]) -> bool:
        seen.append((reviewer, [a.name for a in actions]))
        return reviewer == "ana"

    chat, thread_id, grant = await granted_thread([], log, Clock(), authorize=authorize)
    with pytest.raises(ReviewerNotAllowedError):
        await chat.revoke_grant(thread_id, grant.id, reviewer="mallory")
    state = await chat.get_thread(thread_id)
    assert state.grants == [grant]
    assert state.audit[-1].kind == "refused"
    assert state.audit[-1].detail == (
        f"the authorization hook refused this reviewer (revoking grant {grant.id})"
    )
    assert seen[-1] == ("mallory", ["send_email"])


async def test_revoke_grant_checks_its_arguments() -> None:
    chat = make_chat([], [], Clock())
    with pytest.raises(TypeError) as caught:
        await chat.revoke_grant("t", 5)  # type: ignore[arg-type]
    assert str(caught.value) == "grant_id must be text, got int"


def test_revoke_grant_without_an_event_loop() -> None:
    log: Log = []
    script = [turn(call("c1", "send_email", ALICE)), "Sent."]
    chat = make_chat(script, log, Clock())
    with chat.blocking() as session:
        first = session.send_message("Mail Alice")
        session.submit_review([GRANT_TOOL], first.thread_id, review_id=first.review_id)
        grant = session.get_thread(first.thread_id).grants[0]
        revoked = session.revoke_grant(first.thread_id, grant.id, reviewer="ana")
    assert (revoked.ended, revoked.ended_by) == ("revoked", "ana")


@pytest.mark.parametrize(
    "rewrite",
    [
        {"tool": "delete_file"},
        {"uses_left": 3},  # more than the 2 granted
        {"uses": None, "uses_left": None},
        {"expires_at": T0 + timedelta(days=30)},
        {"match": "args", "args": {"path": "/"}},
    ],
)
async def test_a_grant_rewritten_in_the_store_covers_nothing(rewrite: dict[str, Any]) -> None:
    log: Log = []
    store = MemoryStore()
    clock = Clock()
    script = [
        turn(call("c2", "send_email", BOB), call("c3", "delete_file", {"path": "/"})),
    ]
    chat, thread_id, grant = await granted_thread(
        script, log, clock, store=store, signing_key=b"k" * 32
    )
    state = await store.load(thread_id)
    assert state is not None
    forged = grant.model_copy(update=rewrite)
    await store.save(state.model_copy(update={"grants": [forged]}), expected_version=state.version)
    answer = await chat.send_message("Mail Bob and delete everything", thread_id)
    assert answer.pending_review is not None
    assert [a.name for a in answer.pending_review.action_requests] == [
        "send_email",
        "delete_file",
    ]
    assert (await chat.get_thread(thread_id)).grants == [forged]
    assert log == [("send_email", {"to": "alice@example.com"})]


# --------------------------------------------------------------------------- races


class _SlowStore(MemoryStore):
    """A MemoryStore whose loads wait for each other, so two turns read the same version."""

    load_version = None  # no version check: every turn loads, so both meet at the gate

    def __init__(self) -> None:
        super().__init__()
        self.gate: anyio.Event | None = None
        self.waiting = 0

    async def load(self, thread_id: str) -> ThreadState | None:
        state = await super().load(thread_id)
        if self.gate is not None:
            self.waiting += 1
            if self.waiting == 2:
                self.gate.set()
            await self.gate.wait()
        return state


async def test_two_racing_turns_never_spend_the_last_use_twice() -> None:
    log: Log = []
    store = _SlowStore()
    grant_terms = {"scope": "thread", "match": "tool", "uses": 1}
    script = [turn(call("c2", "send_email", BOB)), "Done.", turn(call("c3", "send_email", BOB))]
    chat, thread_id, _grant = await granted_thread(
        script, log, Clock(), grant=grant_terms, store=store
    )
    store.gate = anyio.Event()
    outcomes: list[str] = []

    async def one() -> None:
        try:
            answer = await chat.send_message("Mail Bob", thread_id)
        except ConcurrentUpdateError:
            outcomes.append("conflict")
        else:
            outcomes.append("reply" if answer.reply else "review")

    with anyio.fail_after(10):  # a turn that never loads would wait at the gate forever
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
    store.gate = None
    state = await chat.get_thread(thread_id)
    assert log.count(("send_email", {"to": "bob@example.com"})) == 1
    assert kinds(state).count("granted") == 1
    assert state.grants[0].uses_left == 0
    assert sorted(outcomes) in (["conflict", "reply"], ["conflict", "review"])


async def test_a_revocation_while_a_turn_runs_does_not_lose_the_turn() -> None:
    log: Log = []
    holder: dict[str, Any] = {}

    async def revoke_meanwhile(messages: list[Any]) -> ModelResponse:
        chat: ReviewedChat = holder["chat"]
        await chat.revoke_grant(holder["thread"], holder["grant"], reviewer="ana")
        return ModelResponse(text="Revoked meanwhile.")

    script = [turn(call("c2", "send_email", BOB)), revoke_meanwhile]
    chat, thread_id, grant = await granted_thread(script, log, Clock())
    holder.update(chat=chat, thread=thread_id, grant=grant.id)
    answer = await chat.send_message("Mail Bob", thread_id)
    assert answer.reply == "Revoked meanwhile."
    state = await chat.get_thread(thread_id)
    assert state.grants[0].ended == "revoked"
    assert state.messages[-1] == {"role": "assistant", "content": "Revoked meanwhile."}
    assert [e.kind for e in state.audit if e.kind.startswith("grant")] == [
        "grant_created",
        "granted",
        "grant_revoked",
    ]


def test_audit_events_of_grants_are_audit_events() -> None:
    event = AuditEvent(at=T0, kind="granted", thread_id="t", tool="send_email")
    assert event.kind == "granted"


# --------------------------------------------------------------------------- quorum reviews


async def test_a_grant_chosen_in_a_quorum_review_is_its_choosers() -> None:
    """Alice grants delete_file and half-approves the quorum mail; Bob completes it: Alice's grant.

    The grant, its ``grant_created`` event, the calls it later covers (``granted``) and the
    thread view over HTTP all name Alice, who chose it, not Bob, whose approval settled the
    review.
    """
    pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
    import httpx

    from toolguard.http import create_app

    log: Log = []
    clock = Clock()
    script = [
        turn(call("c1", "send_email", ALICE), call("c2", "delete_file", {"path": "notes/a.txt"})),
        "Done.",
        turn(call("c3", "delete_file", {"path": "notes/b.txt"})),
        "Deleted.",
    ]
    chat = make_chat(script, log, clock, approvals=2)
    first = await chat.send_message("Mail Alice and clean up")
    grant = {"type": "approve", "grant": {"scope": "thread", "match": "tool"}}
    half = await chat.submit_review(
        [{"type": "approve"}, grant], first.thread_id, review_id=first.review_id, reviewer="alice"
    )
    assert (half.reply, log) == (None, [])
    done = await chat.submit_review(
        [{"type": "approve"}], first.thread_id, review_id=first.review_id, reviewer="bob"
    )
    assert done.reply == "Done."
    later = await chat.send_message("Clean up again", first.thread_id)
    assert (later.reply, later.pending_review) == ("Deleted.", None)

    state = await chat.get_thread(first.thread_id)
    [made] = state.grants
    assert (made.granted_by, made.tool, made.action_id) == (
        "alice",
        "delete_file",
        state.actions[1].id,
    )
    assert [(e["kind"], e["actor"], e["args"]) for e in grant_events(state)] == [
        ("grant_created", "alice", None),
        ("granted", "alice", {"path": "notes/b.txt"}),
    ]
    assert [(a.name, a.status, a.reviewer) for a in state.actions] == [
        ("send_email", "executed", "bob"),
        ("delete_file", "executed", "alice"),
    ]
    app = create_app(chat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as http:
        thread = (await http.get(f"/hitl/threads/{first.thread_id}")).json()
    assert [(g["granted_by"], g["tool"], g["status"]) for g in thread["grants"]] == [
        ("alice", "delete_file", "active")
    ]
