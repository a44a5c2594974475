"""Deadlines are absolute: no approved action starts after its review's deadline.

Attack class: time passes between the deadline check and the moment a tool
starts — a slow (or deliberately stalling) ``authorize`` hook, a slow store
load or claim save, a queue of approved calls behind ``max_concurrency`` —
hoping an approval given on time runs its tool late. The chat checks the
deadline again right before the claim, and the runner checks it again when
each approved job starts; a late action ends ``expired``, the model is told,
and the audit trail says so. Time here is a fake clock moved inside the slow
parts, so nothing depends on real timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard import (
    Message,
    ModelResponse,
    ReviewedChat,
    ReviewExpiredError,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ThreadState,
    ToolCall,
    requires_approval,
)
from toolguard._stores.memory import MemoryStore
from toolguard.records import Action

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=timezone.utc)
TTL = 60
ALICE = {"to": "alice@example.com", "body": "At 10."}
BOB = {"to": "bob@example.com", "body": "At 11."}
APPROVE = {"type": "approve"}
EXPIRED_TEXT = "The review of this action expired before anyone decided. It was not executed."
LATE_TEXT = (
    "The review of this action expired before the approved call could start. It was not executed."
)

AnyStore = MemoryStore | SQLiteStore


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += timedelta(seconds=seconds)


class SlowStore:
    """A store whose load or claim save takes ``seconds`` of the fake clock."""

    def __init__(self, inner: AnyStore, clock: FakeClock) -> None:
        self.inner = inner
        self.clock = clock
        self.slow_load = 0.0
        self.slow_claim_before = 0.0
        self.slow_claim_after = 0.0

    async def load(self, thread_id: str) -> ThreadState | None:
        """Load, taking ``slow_load`` seconds."""
        state = await self.inner.load(thread_id)
        await anyio.lowlevel.checkpoint()  # other tasks run meanwhile
        self.clock.advance(self.slow_load)
        return state

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        """Save; the claim (status running) takes time before and after its write."""
        claim = state.status == "running"
        if claim:
            await anyio.lowlevel.checkpoint()
            self.clock.advance(self.slow_claim_before)
        stored = await self.inner.save(state, expected_version=expected_version)
        if claim:
            await anyio.lowlevel.checkpoint()
            self.clock.advance(self.slow_claim_after)
        return stored


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "deadlines.db") as sqlite_store:
            yield sqlite_store


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def make_chat(
    store: Any, log: list[dict[str, Any]], clock: FakeClock, *calls: ToolCall, **options: Any
) -> ReviewedChat:
    """A chat whose model proposes ``calls`` once, then echoes; review_ttl is TTL seconds.

    The tool logs its arguments and the (fake) time it started.
    """

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append({"to": to, "body": body, "at": clock()})
        return f"Email sent to {to}"

    model = ScriptedModel([ModelResponse(tool_calls=list(calls)), echo])
    return ReviewedChat(model, [send_email], store=store, clock=clock, review_ttl=TTL, **options)


def email(call_id: str, args: dict[str, Any]) -> ToolCall:
    """A send_email call."""
    return ToolCall(id=call_id, name="send_email", args=args)


def kinds(state: ThreadState) -> list[tuple[str, str | None]]:
    """The audit trail as (kind, actor) pairs."""
    return [(e.kind, e.actor) for e in state.audit]


# --- the authorize hook takes too long ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_slow_authorize_hook_cannot_start_a_late_action(store: AnyStore, kind: str) -> None:
    """The hook returns True after the deadline: ReviewExpiredError, nothing ran, model told."""
    log: list[dict[str, Any]] = []
    clock = FakeClock()

    def slow(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        clock.advance(TTL)  # the hook took a whole minute
        return True

    async def slow_async(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        return slow(reviewer, thread, actions)

    hook = slow if kind == "sync" else slow_async
    chat = make_chat(store, log, clock, email("c1", ALICE), authorize=hook)
    paused = await chat.send_message("Mail Alice")
    clock.advance(TTL - 1)  # one second left when the reviewer clicks

    with pytest.raises(ReviewExpiredError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    assert caught.value.review_id == paused.review_id
    assert log == []
    state = await chat.get_thread(paused.thread_id)
    assert (state.status, state.pending, state.decisions) == ("idle", None, None)
    assert [(a.status, a.finished_at) for a in state.actions] == [
        ("expired", T0 + timedelta(seconds=2 * TTL - 1))
    ]
    assert state.messages[-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"Review expired, not executed: {EXPIRED_TEXT}",
        "status": "error",
    }
    assert kinds(state) == [("requested", None), ("expired", None)]


async def test_validation_after_the_hook_does_not_open_a_gap(store: AnyStore) -> None:
    """A deadline passing exactly at the claim (clock == deadline) counts as passed."""
    log: list[dict[str, Any]] = []
    clock = FakeClock()

    def hook(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        clock.now = T0 + timedelta(seconds=TTL)  # exactly the deadline
        return True

    chat = make_chat(store, log, clock, email("c1", ALICE), authorize=hook)
    paused = await chat.send_message("Mail Alice")

    with pytest.raises(ReviewExpiredError):
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert log == []
    assert [a.status for a in (await chat.get_thread(paused.thread_id)).actions] == ["expired"]


# --- the store takes too long ---------------------------------------------------------------------


async def test_a_slow_load_cannot_start_a_late_action(store: AnyStore) -> None:
    """Loading the thread takes past the deadline: the review expires, nothing runs."""
    log: list[dict[str, Any]] = []
    clock = FakeClock()
    slow = SlowStore(store, clock)
    chat = make_chat(slow, log, clock, email("c1", ALICE))
    paused = await chat.send_message("Mail Alice")
    clock.advance(TTL - 1)
    slow.slow_load = 5

    with pytest.raises(ReviewExpiredError):
        await chat.submit_review([APPROVE], paused.thread_id)

    assert log == []
    state = await store.load(paused.thread_id)
    assert state is not None
    assert [a.status for a in state.actions] == ["expired"]


async def test_a_slow_claim_save_cannot_start_a_late_action(store: AnyStore) -> None:
    """The claim is written after the deadline: the runner refuses to start the tool."""
    log: list[dict[str, Any]] = []
    clock = FakeClock()
    slow = SlowStore(store, clock)
    chat = make_chat(slow, log, clock, email("c1", ALICE))
    paused = await chat.send_message("Mail Alice")
    clock.advance(TTL - 1)
    slow.slow_claim_before = 0.5
    slow.slow_claim_after = 0.5  # the claim's write returns exactly at the deadline

    turn = await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    assert log == []
    assert turn.reply == f"Read: Review expired, not executed: {LATE_TEXT}"
    assert [(a.status, a.reviewer, a.result and a.result.content) for a in turn.actions] == [
        ("expired", "alice", LATE_TEXT)
    ]
    state = await store.load(paused.thread_id)
    assert state is not None
    assert (state.status, state.pending) == ("idle", None)
    assert [(a.status, a.decision and a.decision.type) for a in state.actions] == [
        ("expired", "approve")
    ]
    assert kinds(state) == [("requested", None), ("decided", "alice"), ("expired", "alice")]
    assert state.audit[-1].detail == LATE_TEXT
    assert state.messages[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"Review expired, not executed: {LATE_TEXT}",
        "status": "error",
    }


async def test_a_claim_in_time_runs(store: AnyStore) -> None:
    """The same slow store, but the claim ends a moment before the deadline: the tool runs."""
    log: list[dict[str, Any]] = []
    clock = FakeClock()
    slow = SlowStore(store, clock)
    chat = make_chat(slow, log, clock, email("c1", ALICE))
    paused = await chat.send_message("Mail Alice")
    clock.advance(TTL - 1)
    slow.slow_claim_before = 0.5
    slow.slow_claim_after = 0.499

    turn = await chat.submit_review([APPROVE], paused.thread_id)

    assert log == [{**ALICE, "at": T0 + timedelta(seconds=TTL - 0.001)}]
    assert turn.reply == "Read: Email sent to alice@example.com"


# --- the runner: the moment each job starts -------------------------------------------------------


async def test_a_job_queued_behind_a_slow_tool_does_not_start_late() -> None:
    """max_concurrency=1: the second approved call would start past its deadline: it never does."""
    clock = FakeClock()
    log: list[str] = []

    @requires_approval(ttl=TTL)
    def slow_report(name: str) -> str:
        """Write a report (takes two minutes)."""
        log.append(name)
        clock.advance(2 * TTL)
        return "written"

    runner = Runner([slow_report], clock=clock, max_concurrency=1, sync_in_thread=False)
    step = await runner.run(
        [
            ToolCall(id="c1", name="slow_report", args={"name": "a"}),
            ToolCall(id="c2", name="slow_report", args={"name": "b"}),
        ]
    )
    assert step.pending is not None

    done = await runner.resume(step.pending, [APPROVE, APPROVE])

    assert log == ["a"]
    assert [(r.call_id, r.status, r.content) for r in done.results] == [
        ("c1", "success", "written"),
        ("c2", "error", LATE_TEXT),
    ]
    assert [a.status for a in done.actions] == ["executed", "expired"]
    assert [a.finished_at for a in done.actions] == [T0 + timedelta(seconds=2 * TTL)] * 2


async def test_a_hand_written_loop_cannot_resume_an_overdue_turn() -> None:
    """Runner.resume of an overdue turn: approved and edited calls end expired, none runs."""
    clock = FakeClock()
    log: list[dict[str, Any]] = []

    @requires_approval(ttl=TTL)
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append({"to": to, "body": body})
        return "sent"

    runner = Runner([send_email], clock=clock, sync_in_thread=False)
    step = await runner.run([email("c1", ALICE), email("c2", BOB), email("c3", BOB)])
    assert step.pending is not None
    clock.advance(TTL)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": BOB}}

    done = await runner.resume(step.pending, [APPROVE, edit, {"type": "reject"}])

    assert log == []
    assert [(r.call_id, r.status, r.content) for r in done.results] == [
        ("c1", "error", LATE_TEXT),
        ("c2", "error", LATE_TEXT),
        ("c3", "error", "User rejected this action. It was not executed."),
    ]
    assert [a.status for a in done.actions] == ["expired", "expired", "rejected"]


async def test_no_deadline_means_no_check() -> None:
    """Without a ttl an approval runs however late it comes."""
    clock = FakeClock()
    log: list[str] = []

    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(to)
        return "sent"

    runner = Runner([send_email], clock=clock, sync_in_thread=False)
    step = await runner.run([email("c1", ALICE)])
    assert step.pending is not None
    clock.advance(10 * 365 * 24 * 3600)

    done = await runner.resume(step.pending, [APPROVE])

    assert log == ["alice@example.com"]
    assert [a.status for a in done.actions] == ["executed"]


@settings(max_examples=40, deadline=None)
@given(
    before=st.integers(0, 2 * TTL),
    in_hook=st.integers(0, 2 * TTL),
    in_claim=st.integers(0, 2 * TTL),
)
def test_whatever_the_delays_nothing_starts_after_the_deadline(
    before: int, in_hook: int, in_claim: int
) -> None:
    """For any split of the delay between reviewer, hook and claim: the tool runs iff in time."""

    async def go() -> tuple[list[dict[str, Any]], str]:
        clock = FakeClock()
        log: list[dict[str, Any]] = []

        def hook(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
            clock.advance(in_hook)
            return True

        slow = SlowStore(MemoryStore(), clock)
        chat = make_chat(slow, log, clock, email("c1", ALICE), authorize=hook)
        paused = await chat.send_message("Mail Alice")
        clock.advance(before)
        slow.slow_claim_after = in_claim
        with contextlib.suppress(ReviewExpiredError):
            await chat.submit_review([APPROVE], paused.thread_id)
        state = await chat.get_thread(paused.thread_id)
        return log, state.actions[0].status

    log, status = anyio.run(go)
    if before + in_hook + in_claim < TTL:
        assert log == [{**ALICE, "at": T0 + timedelta(seconds=before + in_hook + in_claim)}]
        assert status == "executed"
    else:
        assert log == []
        assert status == "expired"
