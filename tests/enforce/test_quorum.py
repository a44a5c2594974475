"""A quorum of reviewers: ``requires_approval(approvals=N)`` (docs/policies.md)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolguard
from toolguard import (
    AlreadyResumedError,
    InvalidReviewDecisionError,
    ModelResponse,
    NoPendingReviewError,
    QuorumReviewerError,
    ReviewedChat,
    ReviewerNotAllowedError,
    ReviewExpiredError,
    Runner,
    ScriptedModel,
    StaleReviewError,
    ThreadState,
    ToolCall,
    Webhook,
)
from toolguard._core.errors import ConcurrentUpdateError
from toolguard._stores.memory import MemoryStore
from toolguard._stores.sqlite import SQLiteStore

APPROVE = {"type": "approve"}
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ARGS = {"amount": 500, "to": "bob"}
EDITED = {"amount": 50, "to": "bob"}

Log = list[tuple[str, dict[str, Any]]]


def make_tools(log: Log, approvals: int = 2) -> list[Any]:
    """transfer (a quorum of ``approvals``), send_email (one approval) and search (none)."""

    @toolguard.requires_approval(approvals=approvals)
    def transfer(amount: int, to: str) -> str:
        """Move money.

        Args:
            amount: how much.
            to: to whom.
        """
        log.append(("transfer", {"amount": amount, "to": to}))
        return f"moved {amount} to {to}"

    @toolguard.requires_approval
    def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: the recipient.
        """
        log.append(("send_email", {"to": to}))
        return f"sent to {to}"

    return [transfer, send_email]


class Clock:
    """A settable clock."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


TRANSFER = {"id": "c1", "name": "transfer", "args": ARGS}
EMAIL = {"id": "c2", "name": "send_email", "args": {"to": "carol"}}


def resume(runner: Runner, pending: Any, decisions: list[Any], reviewer: Any) -> toolguard.Step:
    """Runner.resume with a reviewer, without an event loop."""

    async def go() -> toolguard.Step:
        return await runner.resume(pending, decisions, thread_id="t", reviewer=reviewer)

    return anyio.run(go)


def config(given: list[str], required: int = 2) -> dict[str, Any]:
    """The review config of a transfer with this progress."""
    return {
        "action_name": "transfer",
        "allowed_decisions": ["approve", "edit", "reject"],
        "approvals": {"required": required, "given": len(given), "by": given},
    }


# --- the tool's option ---------------------------------------------------------------------------


def test_approvals_is_an_attribute_of_guarded_tools() -> None:
    """``approvals`` is 2 on the guarded function, its Tool and in a toolset; 1 by default."""
    log: Log = []
    transfer, send_email = make_tools(log)
    tools = toolguard.guard([transfer, send_email])
    assert (transfer.approvals, tools["transfer"].approvals) == (2, 2)
    assert (send_email.approvals, tools["send_email"].approvals) == (1, 1)


@pytest.mark.parametrize(
    ("value", "error", "text"),
    [
        (0, ValueError, "approvals must be at least 1, got 0"),
        (True, TypeError, "approvals must be an int of at least 1, got bool True"),
        (2.0, TypeError, "approvals must be an int of at least 1, got float 2.0"),
    ],
)
def test_approvals_must_be_a_positive_int(value: Any, error: type[Exception], text: str) -> None:
    """A bad ``approvals`` is refused when the decorator is configured."""
    with pytest.raises(error) as caught:
        toolguard.requires_approval(approvals=value)
    assert str(caught.value) == text


# --- the payload ---------------------------------------------------------------------------------


def test_payload_stays_exact_for_one_approval() -> None:
    """N = 1: the pending_review is the specification's, and the stored action has no new keys."""
    runner = Runner(make_tools([], approvals=1))
    step = runner.run_sync([TRANSFER], thread_id="t")
    assert step.pending_review is not None
    assert step.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "transfer",
                "args": ARGS,
                "description": "Tool `transfer` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "transfer", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    dumped = step.actions[0].model_dump()
    assert ("approvals_required" in dumped, "approved_by" in dumped) == (False, False)


def test_payload_shows_the_progress_of_a_quorum() -> None:
    """N = 2: the transfer's review config carries ``approvals``; the other action's does not."""
    runner = Runner(make_tools([]))
    step = runner.run_sync([TRANSFER, EMAIL], thread_id="t")
    assert step.pending_review is not None
    assert step.pending_review.model_dump()["review_configs"] == [
        config([]),
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]},
    ]
    assert step.actions[0].model_dump(include={"approvals_required", "approved_by"}) == {
        "approvals_required": 2
    }


def test_a_direct_call_shows_the_quorum_in_its_payload() -> None:
    """Calling the guarded function raises ApprovalRequiredError whose payload names the quorum."""
    transfer, send_email = make_tools([])
    with pytest.raises(toolguard.ApprovalRequiredError) as caught:
        transfer(500, "bob")
    assert caught.value.pending_review.model_dump()["review_configs"] == [config([])]
    with pytest.raises(toolguard.ApprovalRequiredError) as single:
        send_email("carol")
    assert single.value.pending_review.model_dump()["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
    ]


# --- the runner ----------------------------------------------------------------------------------


def test_runner_waits_for_two_distinct_reviewers() -> None:
    """Alice's approval runs nothing and keeps the review id; Bob's runs the call once."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    assert first.pending is not None
    second = resume(runner, first.pending, [APPROVE], "alice")
    assert second.pending is not None
    assert second.pending.review_id == first.pending.review_id
    assert second.pending_review is not None
    assert second.pending_review.model_dump()["review_configs"] == [config(["alice"])]
    assert (log, second.results) == ([], [])
    third = resume(runner, second.pending, [APPROVE], "bob")
    assert third.pending is None
    assert log == [("transfer", ARGS)]
    assert [(r.call_id, r.status, r.content) for r in third.results] == [
        ("c1", "success", "moved 500 to bob")
    ]
    action = third.actions[0]
    assert (action.status, action.reviewer, action.approved_by) == (
        "executed",
        "bob",
        ["alice", "bob"],
    )
    with pytest.raises(AlreadyResumedError):
        resume(runner, second.pending, [APPROVE], "carol")  # that turn is done
    assert log == [("transfer", ARGS)]


SAME_AS_ALICE = ["alice", "Alice", " alice ", "ALICE\u200b", "ali\u00adce", "\uff41lice"]


@pytest.mark.parametrize("again", SAME_AS_ALICE)
def test_the_same_reviewer_cannot_approve_twice(again: str) -> None:
    """Case, outer whitespace, zero-width and compatibility characters do not make a new id."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    assert first.pending is not None
    second = resume(runner, first.pending, [APPROVE], "alice")
    assert second.pending is not None
    with pytest.raises(QuorumReviewerError) as caught:
        resume(runner, second.pending, [APPROVE], again)
    assert str(caught.value) == (
        f"Reviewer {again!r} already approved action 'transfer' (1 of 2 approvals);"
        " another reviewer must approve it. Nothing was changed."
    )
    assert isinstance(caught.value, InvalidReviewDecisionError)
    assert (caught.value.reviewer, caught.value.action_name, caught.value.required) == (
        again,
        "transfer",
        2,
    )
    assert log == []


def test_an_int_id_and_its_text_are_one_reviewer() -> None:
    """reviewer=7 then reviewer="7" is the same reviewer (ids are compared as text)."""
    runner = Runner(make_tools([]))
    first = runner.run_sync([TRANSFER], thread_id="t")
    second = resume(runner, first.pending, [APPROVE], 7)
    assert second.pending is not None
    assert second.pending.actions[0].approved_by == ["7"]
    with pytest.raises(QuorumReviewerError):
        resume(runner, second.pending, [APPROVE], "7")


@pytest.mark.parametrize("anonymous", [None, "", "   ", "\u200b"])
def test_an_anonymous_reviewer_cannot_approve_or_edit(anonymous: str | None) -> None:
    """None, or an id that is empty once cleaned, cannot count toward a quorum."""
    runner = Runner(make_tools([]))
    first = runner.run_sync([TRANSFER], thread_id="t")
    text = (
        "Action 'transfer' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    edit = {"type": "edit", "edited_action": {"name": "transfer", "args": EDITED}}
    for decision in (APPROVE, edit):
        with pytest.raises(QuorumReviewerError) as caught:
            resume(runner, first.pending, [decision], anonymous)
        assert str(caught.value) == text


def test_an_anonymous_reject_ends_the_review() -> None:
    """Rejecting never runs anything, so it needs no name: one reject ends the review."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    step = resume(runner, first.pending, [{"type": "reject", "message": "no"}], None)
    assert step.pending is None
    assert [(r.status, r.outcome, r.content) for r in step.results] == [("error", "rejected", "no")]


def test_approve_then_reject_ends_the_review() -> None:
    """Alice approves, Bob rejects: nothing runs, the model reads Bob's reason."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    second = resume(runner, first.pending, [APPROVE], "alice")
    third = resume(runner, second.pending, [{"type": "reject", "message": "too much"}], "bob")
    assert third.pending is None
    assert log == []
    assert [(r.status, r.outcome, r.content) for r in third.results] == [
        ("error", "rejected", "too much")
    ]
    assert (third.actions[0].status, third.actions[0].reviewer) == ("rejected", "bob")


def test_an_edit_restarts_the_count_under_a_new_review() -> None:
    """Bob's edit after Alice's approval: 1 (Bob) of 2 for the new arguments, a new review id."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    second = resume(runner, first.pending, [APPROVE], "alice")
    edit = {"type": "edit", "edited_action": {"name": "transfer", "args": EDITED}}
    third = resume(runner, second.pending, [edit], "bob")
    assert third.pending is not None
    assert second.pending is not None
    assert third.pending.review_id != second.pending.review_id
    assert third.pending_review is not None
    assert third.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "transfer",
                "args": EDITED,
                "description": "Tool `transfer` is awaiting approval",
            }
        ],
        "review_configs": [config(["bob"])],
    }
    assert [c.args for c in third.calls] == [EDITED]
    assert [(a.status, a.args) for a in third.actions] == [
        ("edited", ARGS),
        ("requested", EDITED),
    ]
    with pytest.raises(QuorumReviewerError):
        resume(runner, third.pending, [APPROVE], "Bob")  # the editor already counts
    fourth = resume(runner, third.pending, [APPROVE], "alice")
    assert fourth.pending is None
    assert log == [("transfer", EDITED)]
    assert fourth.calls == [ToolCall(id="c1", name="transfer", args=EDITED)]


def test_a_multi_action_review_resumes_when_every_action_is_settled() -> None:
    """Alice settles the email and half the transfer; both wait; Bob's approval runs both."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER, EMAIL], thread_id="t")
    second = resume(runner, first.pending, [APPROVE, APPROVE], "alice")
    assert second.pending_review is not None
    assert second.pending_review.model_dump()["review_configs"] == [config(["alice"])]
    assert log == []
    with pytest.raises(InvalidReviewDecisionError):
        toolguard.validate_decisions(second.pending, [APPROVE, APPROVE])  # one action waits
    third = resume(runner, second.pending, [APPROVE], "bob")
    assert third.pending is None
    assert sorted(log) == [("send_email", {"to": "carol"}), ("transfer", ARGS)]
    assert [(r.call_id, r.content) for r in third.results] == [
        ("c1", "moved 500 to bob"),
        ("c2", "sent to carol"),
    ]
    assert [(a.name, a.status, a.reviewer) for a in third.actions] == [
        ("transfer", "executed", "bob"),
        ("send_email", "executed", "alice"),
    ]


def test_a_multi_action_review_with_a_reject_and_a_quorum() -> None:
    """The email rejected by Alice stays unrun; the transfer runs after Bob; order is kept."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([EMAIL, TRANSFER], thread_id="t")
    second = resume(runner, first.pending, [{"type": "reject"}, APPROVE], "alice")
    third = resume(runner, second.pending, [APPROVE], "bob")
    assert log == [("transfer", ARGS)]
    assert [(r.call_id, r.outcome, r.content) for r in third.results] == [
        ("c2", "rejected", "User rejected this action. It was not executed."),
        ("c1", None, "moved 500 to bob"),
    ]


def test_the_testing_stand_in_decides_a_quorum_at_once() -> None:
    """toolguard.testing.auto_approve: nobody is asked, so the quorum does not apply."""
    from toolguard.testing import auto_approve

    log: Log = []
    runner = Runner(make_tools(log))
    with auto_approve() as review:
        step = runner.run_sync([TRANSFER], thread_id="t")
    assert (step.pending, log, [c.name for c in review.calls]) == (
        None,
        [("transfer", ARGS)],
        ["transfer"],
    )


@pytest.mark.parametrize("digest", ["keep", ""])
def test_a_tampered_action_stays_tampered_across_an_edit_restart(digest: str) -> None:
    """An edit restarting one action re-binds the others only when their digest held."""
    log: Log = []
    runner = Runner(make_tools(log))
    other = {"id": "c3", "name": "transfer", "args": {"amount": 1, "to": "eve"}}
    first = runner.run_sync([TRANSFER, other], thread_id="t")
    assert first.pending is not None
    forged = first.pending.actions[1].model_copy(update={"args": {"amount": 10_000, "to": "eve"}})
    if digest == "":
        forged = forged.model_copy(update={"digest": ""})
    pending = first.pending.model_copy(update={"actions": [first.pending.actions[0], forged]})
    edit = {"type": "edit", "edited_action": {"name": "transfer", "args": EDITED}}
    second = resume(runner, pending, [edit, APPROVE], "alice")
    assert second.pending is not None
    third = resume(runner, second.pending, [APPROVE, APPROVE], "bob")
    assert third.pending is None
    assert log == [("transfer", EDITED)]
    assert [(r.call_id, r.outcome) for r in third.results] == [("c1", None), ("c3", "tampered")]


def test_a_rewritten_store_cannot_lower_the_quorum() -> None:
    """A stored action claiming one approval is enough still needs the tool's two."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = runner.run_sync([TRANSFER], thread_id="t")
    assert first.pending is not None
    lowered = first.pending.model_copy(
        update={"actions": [first.pending.actions[0].model_copy(update={"approvals_required": 1})]}
    )
    second = resume(runner, lowered, [APPROVE], "alice")
    assert second.pending is not None
    assert log == []


def test_close_gives_every_settled_action_a_result() -> None:
    """Cancelling mid-quorum: the approved email is cancelled, the rejected one stays rejected."""
    runner = Runner(make_tools([]))
    mail2 = {"id": "c3", "name": "send_email", "args": {"to": "dan"}}
    first = runner.run_sync([EMAIL, TRANSFER, mail2], thread_id="t")
    second = resume(runner, first.pending, [APPROVE, APPROVE, {"type": "reject"}], "alice")
    assert second.pending is not None
    step = runner.close(second.pending, "cancelled")
    assert [(r.call_id, r.outcome) for r in step.results] == [
        ("c2", "cancelled"),
        ("c1", "cancelled"),
        ("c3", "rejected"),
    ]
    assert sorted((a.name, a.args.get("to"), a.status) for a in step.actions) == [
        ("send_email", "carol", "cancelled"),
        ("send_email", "dan", "rejected"),
        ("transfer", "bob", "cancelled"),
    ]


# --- the chat ------------------------------------------------------------------------------------


DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
POSTGRES = pytest.param(
    "postgres",
    marks=pytest.mark.skipif(not DSN, reason="set TOOLGUARD_POSTGRES_DSN for PostgresStore"),
)


@pytest.fixture(params=["memory", "sqlite", POSTGRES])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A MemoryStore, a fresh SQLiteStore file, or a PostgresStore on a fresh table."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "chat.db") as sqlite_store:
            yield sqlite_store
    else:
        import psycopg
        from psycopg import sql

        from toolguard.postgres import PostgresStore

        table = f"tg_quorum_{uuid.uuid4().hex[:16]}"
        try:
            async with PostgresStore(DSN, table=table) as pg_store:
                yield pg_store
        finally:
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def script(*calls: dict[str, Any]) -> ScriptedModel:
    """A model proposing ``calls``, then answering "done"."""
    turn = ModelResponse(tool_calls=[ToolCall(**c) for c in calls])
    return ScriptedModel([turn, ModelResponse(text="done")])


def make_chat(store: Any, log: Log, *calls: dict[str, Any], **options: Any) -> ReviewedChat:
    """A chat over the logged tools whose model proposes ``calls``."""
    return ReviewedChat(script(*calls), make_tools(log), store=store, **options)


def kinds(state: ThreadState) -> list[tuple[Any, ...]]:
    """The audit trail as (kind, actor, decision, detail) rows."""
    return [(e.kind, e.actor, e.decision, e.detail) for e in state.audit]


async def test_chat_quorum_flow_and_audit(store: Any) -> None:
    """Alice: pending with 1 of 2; Bob: the transfer runs once; votes then decided events."""
    log: Log = []
    chat = make_chat(store, log, TRANSFER)
    turn = await chat.send_message("pay bob")
    assert turn.pending_review is not None
    assert turn.pending_review.model_dump()["review_configs"] == [config([])]
    second = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="alice"
    )
    assert (second.reply, second.review_id, log) == (None, turn.review_id, [])
    assert second.pending_review is not None
    assert second.pending_review.model_dump()["review_configs"] == [config(["alice"])]
    state = await chat.get_thread(turn.thread_id)
    assert (state.status, state.review_id) == ("awaiting_review", turn.review_id)
    third = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert (third.reply, log) == ("done", [("transfer", ARGS)])
    state = await chat.get_thread(turn.thread_id)
    assert kinds(state) == [
        ("requested", None, None, None),
        ("vote", "alice", "approve", "1 of 2 approvals"),
        ("vote", "bob", "approve", "2 of 2 approvals"),
        ("decided", "bob", "approve", None),
        ("executed", "bob", None, "moved 500 to bob"),
    ]
    vote = state.audit[1]
    assert (vote.review_id, vote.action_id, vote.tool, vote.args) == (
        turn.review_id,
        state.actions[0].id,
        "transfer",
        ARGS,
    )
    assert state.actions[0].approved_by == ["alice", "bob"]


async def test_chat_refusals_change_nothing(store: Any) -> None:
    """The same reviewer again, an anonymous one, one the hook refuses: the progress stays."""
    log: Log = []
    chat = make_chat(store, log, TRANSFER, authorize=lambda who, thread, actions: who != "mallory")
    turn = await chat.send_message("pay bob")
    await chat.submit_review([APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="alice")
    before = await chat.get_thread(turn.thread_id)
    with pytest.raises(QuorumReviewerError):
        await chat.submit_review([APPROVE], turn.thread_id, reviewer=" Alice")
    with pytest.raises(QuorumReviewerError):
        await chat.submit_review([APPROVE], turn.thread_id, reviewer=None)
    assert await chat.get_thread(turn.thread_id) == before
    with pytest.raises(ReviewerNotAllowedError):
        await chat.submit_review([APPROVE], turn.thread_id, reviewer="mallory")
    after = await chat.get_thread(turn.thread_id)
    assert after.pending == before.pending
    assert [e.kind for e in after.audit[len(before.audit) :]] == ["refused"]
    assert log == []


async def test_chat_edit_makes_the_old_review_id_stale(store: Any) -> None:
    """After Bob's edit, a decision bound to the old review id is refused; Alice approves anew."""
    log: Log = []
    chat = make_chat(store, log, TRANSFER)
    turn = await chat.send_message("pay bob")
    old = turn.review_id
    await chat.submit_review([APPROVE], turn.thread_id, review_id=old, reviewer="alice")
    edit = {"type": "edit", "edited_action": {"name": "transfer", "args": EDITED}}
    edited = await chat.submit_review([edit], turn.thread_id, review_id=old, reviewer="bob")
    assert edited.review_id != old
    assert edited.pending_review is not None
    assert edited.pending_review.model_dump()["review_configs"] == [config(["bob"])]
    with pytest.raises(StaleReviewError):
        await chat.submit_review([APPROVE], turn.thread_id, review_id=old, reviewer="alice")
    done = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=edited.review_id, reviewer="alice"
    )
    assert (done.reply, log) == ("done", [("transfer", EDITED)])
    state = await chat.get_thread(turn.thread_id)
    assert state.messages[-3]["tool_calls"][0]["function"]["arguments"] == (
        '{"amount": 50, "to": "bob"}'
    )
    assert [(e.kind, e.actor, e.detail) for e in state.audit if e.kind != "decided"] == [
        ("requested", None, None),
        ("vote", "alice", "1 of 2 approvals"),
        ("vote", "bob", "1 of 2 approvals"),
        ("requested", None, None),
        ("vote", "alice", "2 of 2 approvals"),
        ("executed", "alice", "moved 50 to bob"),
    ]


class SlowSaves(MemoryStore):
    """A MemoryStore whose saves yield first, so two submissions read the same version."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        await anyio.sleep(0.01)
        try:
            return await super().save(state, expected_version=expected_version)
        except ConcurrentUpdateError:
            self.conflicts += 1
            raise


async def test_racing_approvals_both_count_and_run_once() -> None:
    """Alice and Bob approve at once: neither approval is lost and the transfer runs once."""
    log: Log = []
    store = SlowSaves()
    chat = make_chat(store, log, TRANSFER)
    turn = await chat.send_message("pay bob")
    outcomes: dict[str, Any] = {}

    async def approve(who: str) -> None:
        outcomes[who] = await chat.submit_review(
            [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer=who
        )

    async with anyio.create_task_group() as group:
        group.start_soon(approve, "alice")
        group.start_soon(approve, "bob")
    assert log == [("transfer", ARGS)]
    assert sorted(str(o.reply) for o in outcomes.values()) == ["None", "done"]
    assert store.conflicts == 1  # they raced: the second redid its approval on top
    state = await chat.get_thread(turn.thread_id)
    assert sorted(state.actions[0].approved_by) == ["alice", "bob"]
    assert [e.detail for e in state.audit if e.kind == "vote"] == [
        "1 of 2 approvals",
        "2 of 2 approvals",
    ]


async def test_racing_final_approvals_run_once() -> None:
    """Alice approved; Bob and Carol both complete the quorum: one wins, one gets a clean error."""
    log: Log = []
    store = SlowSaves()
    chat = make_chat(store, log, TRANSFER)
    turn = await chat.send_message("pay bob")
    await chat.submit_review([APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="alice")
    errors: list[type[Exception]] = []

    async def approve(who: str) -> None:
        try:
            await chat.submit_review(
                [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer=who
            )
        except NoPendingReviewError as exc:
            errors.append(type(exc))

    async with anyio.create_task_group() as group:
        group.start_soon(approve, "bob")
        group.start_soon(approve, "carol")
    assert log == [("transfer", ARGS)]
    assert errors == [NoPendingReviewError]
    assert store.conflicts == 1


async def test_a_quorum_review_expires_as_usual(store: Any) -> None:
    """Past its deadline, the second approval gets ReviewExpiredError and nothing runs."""
    log: Log = []
    clock = Clock()
    chat = make_chat(store, log, TRANSFER, EMAIL, review_ttl=60, clock=clock)
    turn = await chat.send_message("pay bob")
    await chat.submit_review([APPROVE, APPROVE], turn.thread_id, reviewer="alice")
    clock.now = T0 + timedelta(seconds=61)
    with pytest.raises(ReviewExpiredError):
        await chat.submit_review([APPROVE], turn.thread_id, reviewer="bob")
    state = await chat.get_thread(turn.thread_id)
    assert log == []
    assert state.status == "idle"
    assert [(a.name, a.status) for a in state.actions] == [
        ("transfer", "expired"),
        ("send_email", "expired"),
    ]
    assert [m.get("content") for m in state.messages[-2:]] == [
        (
            "Review expired, not executed: The review of this action expired before anyone"
            " decided. It was not executed."
        ),
        (
            "Review expired, not executed: The review of this action expired before the"
            " approved call could start. It was not executed."
        ),
    ]


async def test_a_multi_action_chat_review(store: Any) -> None:
    """A decision list for two actions, then one for the transfer alone; decided events for both."""
    log: Log = []
    chat = make_chat(store, log, EMAIL, TRANSFER)
    turn = await chat.send_message("mail carol, pay bob")
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await chat.submit_review([APPROVE], turn.thread_id, reviewer="alice")
    assert str(caught.value) == "Expected 2 decisions (one per action), got 1"
    second = await chat.submit_review([APPROVE, APPROVE], turn.thread_id, reviewer="alice")
    assert second.pending_review is not None
    assert [r.name for r in second.pending_review.action_requests] == ["transfer"]
    assert log == []
    await chat.submit_review([APPROVE], turn.thread_id, reviewer="bob")
    assert sorted(log) == [("send_email", {"to": "carol"}), ("transfer", ARGS)]
    state = await chat.get_thread(turn.thread_id)
    assert [(e.kind, e.tool, e.actor, e.detail) for e in state.audit] == [
        ("requested", "send_email", None, None),
        ("requested", "transfer", None, None),
        ("vote", "send_email", "alice", None),
        ("vote", "transfer", "alice", "1 of 2 approvals"),
        ("vote", "transfer", "bob", "2 of 2 approvals"),
        ("decided", "send_email", "alice", None),
        ("decided", "transfer", "bob", None),
        ("executed", "send_email", "alice", "sent to carol"),
        ("executed", "transfer", "bob", "moved 500 to bob"),
    ]


async def test_webhooks_tell_the_decision_only_once_settled() -> None:
    """A partial approval sends no review.decided; the final one does, with every decision."""
    store = MemoryStore()
    hook = Webhook("https://example.com/hook", secret="s")  # noqa: S106 - a test secret
    chat = make_chat(store, [], TRANSFER, notify=hook)
    turn = await chat.send_message("pay bob")
    await chat.submit_review([APPROVE], turn.thread_id, reviewer="alice")
    state = await store.load(turn.thread_id)
    assert state is not None
    assert [i.body["event"] for i in state.outbox] == ["review.requested"]
    await chat.submit_review([APPROVE], turn.thread_id, reviewer="bob")
    state = await store.load(turn.thread_id)
    assert state is not None
    assert [i.body["event"] for i in state.outbox] == ["review.requested", "review.decided"]
    assert state.outbox[1].body["reviewer"] == "bob"


async def test_recover_after_a_crash_mid_quorum_runs_nothing_again(store: Any) -> None:
    """A process dying after the claim: recover ends the settled email and the transfer unrun."""
    log: Log = []
    chat = make_chat(store, log, EMAIL, TRANSFER)
    turn = await chat.send_message("mail carol, pay bob")
    await chat.submit_review([APPROVE, APPROVE], turn.thread_id, reviewer="alice")
    state = await chat.get_thread(turn.thread_id)
    assert state.pending is not None
    # What the claim saves, then the process dies before anything runs.
    await store.save(
        state.model_copy(update={"status": "running", "decisions": [toolguard.ApproveDecision()]}),
        expected_version=state.version,
    )
    assert await chat.recover(turn.thread_id) is True
    state = await chat.get_thread(turn.thread_id)
    assert log == []
    assert sorted(
        (a.name, a.status, a.result.outcome if a.result else None) for a in state.actions
    ) == [
        ("send_email", "failed", "interrupted"),
        ("transfer", "failed", "interrupted"),
    ]


# --- HTTP ----------------------------------------------------------------------------------------


async def test_http_partial_approval_and_refusals() -> None:
    """POST /hitl/review: 200 with the progress, 400 for the same reviewer or an anonymous one."""
    pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
    import httpx
    from fastapi import Header

    from toolguard.http import create_app

    def who(x_reviewer: str | None = Header(None)) -> str | None:
        return x_reviewer

    log: Log = []
    app = create_app(make_chat(MemoryStore(), log, TRANSFER), reviewer=who)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as client:
        first = (await client.post("/hitl/chat", json={"message": "pay bob"})).json()
        body = {
            "thread_id": first["thread_id"],
            "review_id": first["review_id"],
            "decisions": [APPROVE],
        }
        alice = await client.post("/hitl/review", json=body, headers={"X-Reviewer": "alice"})
        again = await client.post("/hitl/review", json=body, headers={"X-Reviewer": "ALICE"})
        nobody = await client.post("/hitl/review", json=body)
        bob = await client.post("/hitl/review", json=body, headers={"X-Reviewer": "bob"})
    assert alice.status_code == 200
    assert alice.json() == {
        "thread_id": first["thread_id"],
        "reply": None,
        "pending_review": {
            "action_requests": [
                {
                    "name": "transfer",
                    "args": ARGS,
                    "description": "Tool `transfer` is awaiting approval",
                }
            ],
            "review_configs": [config(["alice"])],
        },
        "review_id": first["review_id"],
    }
    assert (again.status_code, again.json()) == (
        400,
        {
            "detail": "Reviewer 'ALICE' already approved action 'transfer' (1 of 2 approvals);"
            " another reviewer must approve it. Nothing was changed."
        },
    )
    assert (nobody.status_code, nobody.json()) == (
        400,
        {
            "detail": "Action 'transfer' needs approvals from 2 distinct, named reviewers: an"
            " anonymous reviewer cannot approve or edit it. Nothing was changed."
        },
    )
    assert (bob.status_code, bob.json()["reply"]) == (200, "done")
    assert log == [("transfer", ARGS)]
