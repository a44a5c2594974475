"""Trust features of ReviewedChat: review binding, digests, deadlines, reviewers, audit trail."""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from toolguard import (
    InvalidReviewDecisionError,
    Message,
    ModelResponse,
    NoPendingReviewError,
    ReviewedChat,
    ReviewerNotAllowedError,
    ReviewExpiredError,
    ReviewPendingError,
    ScriptedModel,
    StaleReviewError,
    ThreadBusyError,
    ThreadState,
    ToolCall,
    requires_approval,
)
from toolguard._core.records import call_digest
from toolguard._stores.memory import MemoryStore
from toolguard._stores.sqlite import SQLiteStore
from toolguard.records import Action, AuditEvent
from toolguard.text import set_language

AnyStore = MemoryStore | SQLiteStore
Log = list[tuple[str, dict[str, Any]]]

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=timezone.utc)
ASK = "Tell Alice the meeting is at 10."
ALICE = {"to": "alice@example.com", "body": "The meeting is at 10."}
ALICE_JSON = '{"to": "alice@example.com", "body": "The meeting is at 10."}'
BOB = {"to": "bob@example.com", "body": "The meeting is at 11."}
BOB_JSON = '{"to": "bob@example.com", "body": "The meeting is at 11."}'
MALLORY = {"to": "mallory@example.com", "body": "Send me the payroll."}
APPROVE = {"type": "approve"}

TAMPERED_TEXT = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
EXPIRED_TEXT = "The review of this action expired before anyone decided. It was not executed."
CANCELLED_TEXT = "The review of this action was cancelled. It was not executed."
INTERRUPTED_TEXT = (
    "The process stopped while this approved tool was running, so its outcome is unknown."
    " It was not run again."
)
REJECTED_TEXT = "User rejected this action. It was not executed."
# What the model reads: the default ResultTemplates mark results that are not a plain success.
TAMPERED_MSG = f"Refused, not executed: {TAMPERED_TEXT}"
EXPIRED_MSG = f"Review expired, not executed: {EXPIRED_TEXT}"


# --- helpers ------------------------------------------------------------------------------------


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now += timedelta(seconds=seconds)


class Crash(BaseException):
    """Stands for the process dying inside a tool (not an Exception: nothing catches it)."""


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "trust.db") as sqlite_store:
            yield sqlite_store


def make_tools(log: Log) -> list[Callable[..., Any]]:
    """send_email (classified), delete_file (ttl 30 s), remove_user (raises), search (free)."""

    def send_email(to: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            body: the text.
        """
        log.append(("send_email", {"to": to, "body": body}))
        return f"Email sent to {to}"

    @requires_approval(ttl=30)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: the file to delete.
        """
        log.append(("delete_file", {"path": path}))
        return f"Deleted {path}"

    def remove_user(name: str) -> str:
        """Remove a user account.

        Args:
            name: the account.
        """
        log.append(("remove_user", {"name": name}))
        msg = "directory offline"
        raise RuntimeError(msg)

    def send_crash_report(name: str) -> str:
        """Send a crash report (the process dies while it runs).

        Args:
            name: anything.
        """
        log.append(("send_crash_report", {"name": name}))
        raise Crash

    def search(query: str) -> list[str]:
        """Search the documents.

        Args:
            query: words to look for.
        """
        log.append(("search", {"query": query}))
        return [f"result for {query}"]

    return [send_email, delete_file, remove_user, send_crash_report, search]


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def proposes(*calls: ToolCall) -> ModelResponse:
    """A model turn proposing ``calls``."""
    return ModelResponse(tool_calls=list(calls))


def email(call_id: str, args: dict[str, Any]) -> ToolCall:
    """A send_email call."""
    return ToolCall(id=call_id, name="send_email", args=args)


def delete(call_id: str, path: str) -> ToolCall:
    """A delete_file call."""
    return ToolCall(id=call_id, name="delete_file", args={"path": path})


def make_chat(
    store: AnyStore,
    script: Sequence[Any],
    log: Log,
    clock: FakeClock,
    **options: Any,
) -> tuple[ReviewedChat, ScriptedModel]:
    """A chat over the logged tools, a scripted model and the fake clock."""
    model = ScriptedModel(script)
    chat = ReviewedChat(model, make_tools(log), store=store, clock=clock, **options)
    return chat, model


def tool_msg(call_id: str, content: str, status: str = "success") -> Message:
    """A tool message as the chat stores and sends it."""
    return {"role": "tool", "tool_call_id": call_id, "content": content, "status": status}


def email_turn(call_id: str, arguments: str) -> Message:
    """The assistant message proposing one send_email call."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "send_email", "arguments": arguments},
            }
        ],
    }


def events_view(events: Sequence[AuditEvent]) -> list[dict[str, Any]]:
    """Audit events as dicts without their random id and their time."""
    return [e.model_dump(exclude={"id", "at"}) for e in events]


def event(kind: str, thread_id: str, review_id: str | None, **fields: Any) -> dict[str, Any]:
    """One expected audit event (without id and time); unset fields are None."""
    base: dict[str, Any] = {
        "kind": kind,
        "thread_id": thread_id,
        "review_id": review_id,
        "action_id": None,
        "tool": None,
        "args": None,
        "actor": None,
        "decision": None,
        "detail": None,
        "digest": None,
    }
    base.update(fields)
    return base


def sha(
    name: str, args: dict[str, Any], thread_id: str | None, review_id: str | None, key: bytes
) -> str:
    """The digest computed independently of toolguard: name, args, thread and review ids.

    HMAC-SHA-256 with ``key``: a chat without ``signing_key`` keys its digests with its
    store's secret (``await store.digest_key()``).
    """
    text = json.dumps(
        {"name": name, "args": args, "thread_id": thread_id, "review_id": review_id},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


async def snapshot(store: AnyStore, thread_id: str) -> dict[str, Any]:
    """The stored thread as a dict."""
    state = await store.load(thread_id)
    assert state is not None
    return state.model_dump()


async def tamper(store: AnyStore, thread_id: str, name: str, args: dict[str, Any]) -> None:
    """Change the pending action's name and args behind toolguard's back."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            (text,) = conn.execute(
                "SELECT state FROM toolguard_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            data = json.loads(text)
            data["pending"]["actions"][0]["name"] = name
            data["pending"]["actions"][0]["args"] = args
            # A writer behind toolguard's back still bumps the version: ReviewedChat
            # re-reads a thread whose stored version changed since it last saw it.
            conn.execute(
                "UPDATE toolguard_threads SET state = ?, version = version + 1 WHERE thread_id = ?",
                (json.dumps(data), thread_id),
            )
        conn.close()
        return
    state = await store.load(thread_id)
    assert state is not None
    assert state.pending is not None
    action = state.pending.actions[0].model_copy(update={"name": name, "args": args})
    pending = state.pending.model_copy(update={"actions": [action, *state.pending.actions[1:]]})
    await store.save(state.model_copy(update={"pending": pending}), expected_version=state.version)


Authorize = Callable[[str | None, ThreadState, list[Action]], bool | Awaitable[bool]]


def authorizer(
    kind: str, rule: Callable[[str | None, list[Action]], bool], seen: list[Any]
) -> Authorize:
    """A sync or async authorize hook applying ``rule`` and recording what it received."""

    def record(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        seen.append((reviewer, thread.thread_id, thread.review_id, [a.name for a in actions]))
        return rule(reviewer, actions)

    if kind == "sync":
        return record

    async def hook(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        return record(reviewer, thread, actions)

    return hook


# --- binding: review ids ------------------------------------------------------------------------


async def test_decision_for_an_old_review_is_stale(store: AnyStore) -> None:
    """Decisions naming the previous review raise StaleReviewError and change nothing."""
    log: Log = []
    clock = FakeClock()
    script = [proposes(email("c1", ALICE)), proposes(email("c2", BOB)), echo]
    chat, _ = make_chat(store, script, log, clock)
    first = await chat.send_message(ASK)
    second = await chat.submit_review([APPROVE], first.thread_id, review_id=first.review_id)
    assert first.review_id is not None
    assert second.review_id is not None
    assert second.review_id != first.review_id
    before = await snapshot(store, first.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], first.thread_id, review_id=first.review_id)

    assert str(caught.value) == (
        f"The review {first.review_id} is no longer current in this conversation."
        " Load the thread and decide on its current review."
    )
    assert isinstance(caught.value, NoPendingReviewError)
    assert (caught.value.review_id, caught.value.current) == (first.review_id, second.review_id)
    assert await snapshot(store, first.thread_id) == before
    assert log == [("send_email", ALICE)]

    done = await chat.submit_review([APPROVE], first.thread_id, review_id=second.review_id)

    assert done.reply == "Read: Email sent to bob@example.com"
    assert log == [("send_email", ALICE), ("send_email", BOB)]


async def test_decision_with_review_id_on_an_idle_thread_is_stale(store: AnyStore) -> None:
    """A review id sent after the review ended raises StaleReviewError with no current review."""
    log: Log = []
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, FakeClock())
    paused = await chat.send_message(ASK)
    turn = await chat.submit_review([APPROVE], paused.thread_id)
    assert turn.reply == "Read: Email sent to alice@example.com"
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert (caught.value.review_id, caught.value.current) == (paused.review_id, None)
    assert await snapshot(store, paused.thread_id) == before
    assert log == [("send_email", ALICE)]


async def test_stale_review_text_in_indonesian(store: AnyStore) -> None:
    """The StaleReviewError text follows the Indonesian catalog."""
    script = [proposes(email("c1", ALICE)), proposes(email("c2", BOB))]
    chat, _ = make_chat(store, script, [], FakeClock())
    first = await chat.send_message(ASK)
    await chat.submit_review([APPROVE], first.thread_id, review_id=first.review_id)
    set_language("id")

    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], first.thread_id, review_id=first.review_id)

    assert str(caught.value) == (
        f"Review {first.review_id} sudah tidak berlaku di percakapan ini."
        " Muat ulang percakapan dan putuskan review yang sekarang."
    )


async def test_cancel_with_an_old_review_id_is_stale(store: AnyStore) -> None:
    """cancel_review naming another review raises StaleReviewError and cancels nothing."""
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], FakeClock())
    paused = await chat.send_message(ASK)
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.cancel_review(paused.thread_id, review_id="r-old", reason="not needed")

    assert (caught.value.review_id, caught.value.current) == ("r-old", paused.review_id)
    assert await snapshot(store, paused.thread_id) == before


def test_blocking_chat_binds_decisions_to_a_review() -> None:
    """The blocking facade passes review_id, reviewer and reason through."""
    log: Log = []
    script = [proposes(email("c1", ALICE)), echo, proposes(email("c2", BOB)), echo]
    chat, _ = make_chat(MemoryStore(), script, log, FakeClock())
    with chat.blocking() as session:
        paused = session.send_message(ASK)
        with pytest.raises(StaleReviewError):
            session.submit_review([APPROVE], paused.thread_id, review_id="r-old", reviewer="alice")
        done = session.submit_review(
            [APPROVE], paused.thread_id, review_id=paused.review_id, reviewer="alice"
        )
        second = session.send_message("And Bob?", paused.thread_id)
        cancelled = session.cancel_review(
            second.thread_id, review_id=second.review_id, reviewer="carol", reason="duplicate"
        )
        recovered = session.recover(paused.thread_id)

    assert done.reply == "Read: Email sent to alice@example.com"
    assert [(a.status, a.reviewer) for a in done.actions] == [("executed", "alice")]
    assert [(a.status, a.reviewer, a.result and a.result.content) for a in cancelled.actions] == [
        (
            "cancelled",
            "carol",
            "The review of this action was cancelled: duplicate. It was not executed.",
        )
    ]
    assert recovered is False
    assert log == [("send_email", ALICE)]


# --- binding: digests ---------------------------------------------------------------------------


async def test_action_keeps_the_digest_of_what_was_shown(store: AnyStore) -> None:
    """Action.digest is the HMAC-SHA-256 (the store's secret) of the proposed name, canonical
    JSON args and the ids."""
    args = {"to": "zoë@example.com", "body": "Café at 10"}
    chat, _ = make_chat(store, [proposes(email("c1", args))], [], FakeClock())
    paused = await chat.send_message(ASK)
    state = await chat.get_thread(paused.thread_id)
    assert state.pending is not None

    digests = [a.digest for a in state.pending.actions]

    tid, rid = paused.thread_id, paused.review_id
    assert rid is not None
    key = await chat.store.digest_key()  # type: ignore[attr-defined]  # the store's secret
    assert digests == [sha("send_email", args, tid, rid, key)]
    assert digests == [call_digest("send_email", args, key, thread_id=tid, review_id=rid)]
    assert [a.digest for a in paused.actions] == digests
    assert call_digest("send_email", {"body": "x", "to": "y"}) == call_digest(
        "send_email", {"to": "y", "body": "x"}
    )


@pytest.mark.parametrize(
    ("name", "args"),
    [("send_email", MALLORY), ("delete_file", {"path": "/etc/passwd"})],
    ids=["args", "name"],
)
async def test_approval_does_not_cover_a_tampered_action(
    store: AnyStore, name: str, args: dict[str, Any]
) -> None:
    """A stored action changed after review does not run: failed, the model reads TAMPERED."""
    log: Log = []
    clock = FakeClock()
    chat, model = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock)
    paused = await chat.send_message(ASK)
    await tamper(store, paused.thread_id, name, args)

    done = await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert log == []
    assert done.reply == f"Read: {TAMPERED_MSG}"
    assert model.calls[-1] == [
        {"role": "user", "content": ASK},
        email_turn("c1", ALICE_JSON),
        tool_msg("c1", TAMPERED_MSG, "error"),
    ]
    state = await chat.get_thread(paused.thread_id)
    assert [(a.status, a.result and a.result.content) for a in state.actions] == [
        ("failed", TAMPERED_TEXT)
    ]
    assert state.status == "idle"
    assert events_view(state.audit)[-1] == event(
        "failed",
        paused.thread_id,
        paused.review_id,
        action_id=state.actions[0].id,
        tool="send_email",
        detail=TAMPERED_TEXT,
    )


async def test_untampered_approval_runs(store: AnyStore) -> None:
    """The control case of the tamper test: the same approval runs the shown call."""
    log: Log = []
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, FakeClock())
    paused = await chat.send_message(ASK)

    done = await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert log == [("send_email", ALICE)]
    assert done.reply == "Read: Email sent to alice@example.com"


# --- deadlines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [90, 90.0, timedelta(seconds=90)], ids=["int", "float", "delta"])
async def test_chat_review_ttl_sets_expires_at(store: AnyStore, ttl: float | timedelta) -> None:
    """review_ttl puts expires_at = requested_at + ttl on every action."""
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], clock, review_ttl=ttl)

    paused = await chat.send_message(ASK)

    state = await chat.get_thread(paused.thread_id)
    assert state.pending is not None
    assert [(a.requested_at, a.expires_at) for a in state.pending.actions] == [
        (T0, T0 + timedelta(seconds=90))
    ]
    assert state.pending.expires_at == T0 + timedelta(seconds=90)


async def test_tool_ttl_wins_over_the_chat_ttl(store: AnyStore) -> None:
    """requires_approval(ttl=30) gives delete_file 30 s while send_email keeps the chat's 600 s."""
    clock = FakeClock()
    script = [proposes(email("c1", ALICE), delete("c2", "/srv/x"))]
    chat, _ = make_chat(store, script, [], clock, review_ttl=600)

    paused = await chat.send_message(ASK)

    assert [(a.name, a.expires_at) for a in paused.actions] == [
        ("send_email", T0 + timedelta(seconds=600)),
        ("delete_file", T0 + timedelta(seconds=30)),
    ]


async def test_tool_ttl_applies_without_a_chat_ttl(store: AnyStore) -> None:
    """A tool's ttl applies when the chat has none; other tools get no deadline."""
    clock = FakeClock()
    script = [proposes(email("c1", ALICE), delete("c2", "/srv/x"))]
    chat, _ = make_chat(store, script, [], clock)

    paused = await chat.send_message(ASK)

    assert [(a.name, a.expires_at) for a in paused.actions] == [
        ("send_email", None),
        ("delete_file", T0 + timedelta(seconds=30)),
    ]


async def test_no_ttl_means_no_deadline(store: AnyStore) -> None:
    """Without any ttl a review stays open: a year later it is still approved and runs."""
    log: Log = []
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock)
    paused = await chat.send_message(ASK)
    clock.advance(365 * 24 * 3600)

    assert await chat.expire_overdue(paused.thread_id) is False
    done = await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert done.reply == "Read: Email sent to alice@example.com"
    assert log == [("send_email", ALICE)]


async def test_nothing_expires_before_the_deadline(store: AnyStore) -> None:
    """One microsecond before the deadline the review is open and the approval runs."""
    log: Log = []
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock, review_ttl=60)
    paused = await chat.send_message(ASK)
    clock.now = T0 + timedelta(seconds=60) - timedelta(microseconds=1)

    assert await chat.expire_overdue(paused.thread_id) is False
    done = await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert done.reply == "Read: Email sent to alice@example.com"
    assert log == [("send_email", ALICE)]
    assert [a.status for a in done.actions] == ["executed"]


async def test_submit_after_the_deadline_expires_the_review(store: AnyStore) -> None:
    """At the deadline submit_review raises ReviewExpiredError; nothing runs; the model is told."""
    log: Log = []
    clock = FakeClock()
    chat, model = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock, review_ttl=60)
    paused = await chat.send_message(ASK)
    clock.advance(60)

    with pytest.raises(ReviewExpiredError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert str(caught.value) == (
        f"The review {paused.review_id} expired before a decision arrived. Its actions were"
        " not executed; send a new message to continue."
    )
    assert isinstance(caught.value, NoPendingReviewError)
    assert caught.value.review_id == paused.review_id
    assert log == []
    state = await chat.get_thread(paused.thread_id)
    assert (state.status, state.pending, state.decisions) == ("idle", None, None)
    assert [(a.status, a.finished_at) for a in state.actions] == [
        ("expired", T0 + timedelta(seconds=60))
    ]
    assert state.messages == [
        {"role": "user", "content": ASK},
        email_turn("c1", ALICE_JSON),
        tool_msg("c1", EXPIRED_MSG, "error"),
    ]
    action_id = state.actions[0].id
    key = await chat.store.digest_key()  # type: ignore[attr-defined]  # the store's secret
    assert events_view(state.audit) == [
        event(
            "requested",
            paused.thread_id,
            paused.review_id,
            action_id=action_id,
            tool="send_email",
            args=ALICE,
            detail="expires at 2025-01-01T09:01:00+00:00",
            digest=sha("send_email", ALICE, paused.thread_id, paused.review_id, key),
        ),
        event(
            "expired",
            paused.thread_id,
            paused.review_id,
            action_id=action_id,
            tool="send_email",
            detail=EXPIRED_TEXT,
        ),
    ]
    with pytest.raises(StaleReviewError):
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)
    assert log == []

    turn = await chat.send_message("Did it go out?", paused.thread_id)

    assert turn.reply == "Read: Did it go out?"
    assert model.calls[-1] == [
        {"role": "user", "content": ASK},
        email_turn("c1", ALICE_JSON),
        tool_msg("c1", EXPIRED_MSG, "error"),
        {"role": "user", "content": "Did it go out?"},
    ]
    assert log == []


async def test_review_expired_text_in_indonesian(store: AnyStore) -> None:
    """The ReviewExpiredError text follows the Indonesian catalog."""
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], clock, review_ttl=5)
    paused = await chat.send_message(ASK)
    clock.advance(5)
    set_language("id")

    with pytest.raises(ReviewExpiredError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id)

    assert str(caught.value) == (
        f"Review {paused.review_id} kedaluwarsa sebelum ada keputusan. Aksinya tidak"
        " dijalankan; kirim pesan baru untuk melanjutkan."
    )


async def test_send_message_after_the_deadline_goes_on(store: AnyStore) -> None:
    """A new message past the deadline expires the review and the model reads why."""
    log: Log = []
    clock = FakeClock()
    chat, model = make_chat(
        store, [proposes(delete("c1", "/srv/x")), echo], log, clock, review_ttl=600
    )
    paused = await chat.send_message("Delete /srv/x")
    with pytest.raises(ReviewPendingError):
        await chat.send_message("Anything?", paused.thread_id)
    clock.advance(30)

    turn = await chat.send_message("Anything?", paused.thread_id)

    assert turn.reply == "Read: Anything?"
    assert model.calls[-1][-2:] == [
        tool_msg("c1", EXPIRED_MSG, "error"),
        {"role": "user", "content": "Anything?"},
    ]
    state = await chat.get_thread(paused.thread_id)
    assert [a.status for a in state.actions] == ["expired"]
    assert [e.kind for e in state.audit] == ["requested", "expired"]
    assert log == []


async def test_expire_overdue_closes_the_review(store: AnyStore) -> None:
    """expire_overdue returns False before the deadline, True once at it, then False."""
    log: Log = []
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], log, clock, review_ttl=60)
    paused = await chat.send_message(ASK)
    clock.advance(59)
    assert await chat.expire_overdue(paused.thread_id) is False
    clock.advance(1)

    assert await chat.expire_overdue(paused.thread_id) is True
    assert await chat.expire_overdue(paused.thread_id) is False

    state = await chat.get_thread(paused.thread_id)
    assert (state.status, state.pending) == ("idle", None)
    assert [(a.status, a.result and a.result.content) for a in state.actions] == [
        ("expired", EXPIRED_TEXT)
    ]
    assert state.messages[-1] == tool_msg("c1", EXPIRED_MSG, "error")
    with pytest.raises(NoPendingReviewError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id)
    assert type(caught.value) is NoPendingReviewError
    assert log == []


async def test_earliest_deadline_closes_the_whole_review(store: AnyStore) -> None:
    """A review ends at its earliest action deadline: both actions expire at 30 s."""
    log: Log = []
    clock = FakeClock()
    script = [proposes(email("c1", ALICE), delete("c2", "/srv/x"))]
    chat, _ = make_chat(store, script, log, clock, review_ttl=600)
    paused = await chat.send_message(ASK)
    clock.advance(30)

    with pytest.raises(ReviewExpiredError):
        await chat.submit_review([APPROVE, APPROVE], paused.thread_id)

    state = await chat.get_thread(paused.thread_id)
    assert [(a.name, a.status) for a in state.actions] == [
        ("send_email", "expired"),
        ("delete_file", "expired"),
    ]
    assert log == []


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("the customer withdrew the request", None),
        (None, CANCELLED_TEXT),
        ("", CANCELLED_TEXT),
    ],
    ids=["reason", "no-reason", "empty-reason"],
)
async def test_cancel_review(store: AnyStore, reason: str | None, text: str | None) -> None:
    """cancel_review ends the review as cancelled, the model reads why, the thread goes on."""
    expected_text = text or (
        f"The review of this action was cancelled: {reason}. It was not executed."
    )
    log: Log = []
    clock = FakeClock()
    chat, model = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock)
    paused = await chat.send_message(ASK)
    clock.advance(3)

    turn = await chat.cancel_review(
        paused.thread_id, review_id=paused.review_id, reviewer="carol", reason=reason
    )

    assert (turn.thread_id, turn.reply, turn.pending_review, turn.review_id) == (
        paused.thread_id,
        None,
        None,
        paused.review_id,
    )
    assert [(a.status, a.reviewer, a.result and a.result.content) for a in turn.actions] == [
        ("cancelled", "carol", expected_text)
    ]
    state = await chat.get_thread(paused.thread_id)
    assert (state.status, state.pending) == ("idle", None)
    assert events_view(state.audit)[1:] == [
        event(
            "cancelled",
            paused.thread_id,
            paused.review_id,
            action_id=state.actions[0].id,
            tool="send_email",
            actor="carol",
            detail=expected_text,
        )
    ]
    with pytest.raises(NoPendingReviewError):
        await chat.submit_review([APPROVE], paused.thread_id)

    again = await chat.send_message("Never mind.", paused.thread_id)

    assert again.reply == "Read: Never mind."
    assert model.calls[-1][-2:] == [
        tool_msg("c1", f"Review cancelled, not executed: {expected_text}", "error"),
        {"role": "user", "content": "Never mind."},
    ]
    assert log == []


async def test_an_approval_of_a_cancelled_review_says_it_was_cancelled(store: AnyStore) -> None:
    """A late decision naming a cancelled review is refused with its own text; nothing changes."""
    log: Log = []
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), "ok"], log, FakeClock())
    paused = await chat.send_message(ASK)
    assert paused.review_id is not None
    await chat.cancel_review(paused.thread_id, reviewer="carol", reason="the client gave up")
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)

    assert type(caught.value) is StaleReviewError
    assert (caught.value.review_id, caught.value.current, caught.value.cancelled) == (
        paused.review_id,
        None,
        True,
    )
    assert str(caught.value) == (
        f"The review {paused.review_id} was cancelled: its actions were not executed and can no"
        " longer be approved."
    )
    copy = pickle.loads(pickle.dumps(caught.value))  # noqa: S301 - our own error, round-tripped
    assert (type(copy), str(copy), copy.cancelled) == (StaleReviewError, str(caught.value), True)
    assert await snapshot(store, paused.thread_id) == before
    assert log == []


async def test_rejected_expired_and_cancelled_are_distinct(store: AnyStore) -> None:
    """The three non-running outcomes have distinct statuses, audit kinds and model texts."""
    log: Log = []
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock, review_ttl=60)
    outcomes = []
    for how in ("reject", "expire", "cancel"):
        chat.model = ScriptedModel([proposes(email("c1", ALICE)), echo])
        paused = await chat.send_message(ASK)
        if how == "reject":
            await chat.submit_review([{"type": "reject"}], paused.thread_id)
        elif how == "expire":
            clock.advance(60)
            assert await chat.expire_overdue(paused.thread_id) is True
        else:
            await chat.cancel_review(paused.thread_id)
        state = await chat.get_thread(paused.thread_id)
        action = state.actions[0]
        assert action.result is not None
        outcomes.append((action.status, state.audit[-1].kind, action.result.content))

    assert outcomes == [
        ("rejected", "rejected", REJECTED_TEXT),
        ("expired", "expired", EXPIRED_TEXT),
        ("cancelled", "cancelled", CANCELLED_TEXT),
    ]
    assert log == []


# --- reviewers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_refused_reviewer_changes_nothing_but_the_audit(store: AnyStore, kind: str) -> None:
    """A refused reviewer gets ReviewerNotAllowedError; the review stays for an allowed one."""
    log: Log = []
    seen: list[Any] = []
    clock = FakeClock()
    hook = authorizer(kind, lambda reviewer, _: reviewer == "alice", seen)
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock, authorize=hook)
    paused = await chat.send_message(ASK)
    before = await snapshot(store, paused.thread_id)
    clock.advance(2)

    with pytest.raises(ReviewerNotAllowedError) as caught:
        await chat.submit_review(
            [APPROVE], paused.thread_id, review_id=paused.review_id, reviewer="mallory"
        )

    assert str(caught.value) == (
        f"Reviewer 'mallory' may not review conversation '{paused.thread_id}'"
    )
    assert isinstance(caught.value, PermissionError)
    assert (caught.value.reviewer, caught.value.thread_id) == ("mallory", paused.thread_id)
    assert log == []
    after = await snapshot(store, paused.thread_id)
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {"audit", "version", "updated_at"}
    state = await chat.get_thread(paused.thread_id)
    assert (state.status, state.review_id) == ("awaiting_review", paused.review_id)
    assert events_view(state.audit[1:]) == [
        event(
            "refused",
            paused.thread_id,
            paused.review_id,
            actor="mallory",
            detail="the authorization hook refused this reviewer",
        )
    ]
    assert state.audit[1].at == T0 + timedelta(seconds=2)

    done = await chat.submit_review(
        [APPROVE], paused.thread_id, review_id=paused.review_id, reviewer="alice"
    )

    assert done.reply == "Read: Email sent to alice@example.com"
    assert log == [("send_email", ALICE)]
    assert seen == [
        ("mallory", paused.thread_id, paused.review_id, ["send_email"]),
        ("alice", paused.thread_id, paused.review_id, ["send_email"]),
    ]
    state = await chat.get_thread(paused.thread_id)
    assert [(a.status, a.reviewer) for a in state.actions] == [("executed", "alice")]
    decided = [e for e in state.audit if e.kind == "decided"]
    assert [(e.actor, e.decision) for e in decided] == [("alice", "approve")]


async def test_reviewer_refused_text_in_indonesian(store: AnyStore) -> None:
    """The ReviewerNotAllowedError text follows the Indonesian catalog, also for no reviewer."""
    hook = authorizer("sync", lambda reviewer, _: False, [])
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], FakeClock(), authorize=hook)
    paused = await chat.send_message(ASK)
    set_language("id")

    with pytest.raises(ReviewerNotAllowedError) as named:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="mallory")
    with pytest.raises(ReviewerNotAllowedError) as anonymous:
        await chat.submit_review([APPROVE], paused.thread_id)

    assert str(named.value) == (
        f"Peninjau 'mallory' tidak boleh meninjau percakapan '{paused.thread_id}'"
    )
    assert str(anonymous.value) == (
        f"Peninjau None tidak boleh meninjau percakapan '{paused.thread_id}'"
    )


async def test_refused_reviewer_cannot_cancel(store: AnyStore) -> None:
    """cancel_review asks the hook too: a refused reviewer cancels nothing."""
    seen: list[Any] = []
    hook = authorizer("async", lambda reviewer, _: reviewer == "alice", seen)
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], FakeClock(), authorize=hook)
    paused = await chat.send_message(ASK)

    with pytest.raises(ReviewerNotAllowedError):
        await chat.cancel_review(paused.thread_id, reviewer="mallory", reason="spam")

    state = await chat.get_thread(paused.thread_id)
    assert (state.status, [a.status for a in state.actions]) == ("awaiting_review", ["requested"])
    assert [e.kind for e in state.audit] == ["requested", "refused"]
    turn = await chat.cancel_review(paused.thread_id, reviewer="alice", reason="spam")
    assert [(a.status, a.reviewer) for a in turn.actions] == [("cancelled", "alice")]
    assert seen == [
        ("mallory", paused.thread_id, paused.review_id, ["send_email"]),
        ("alice", paused.thread_id, paused.review_id, ["send_email"]),
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_only_admin_may_approve_delete_file(store: AnyStore, kind: str) -> None:
    """A per-tool policy: anyone decides on send_email, only admin on delete_file."""

    def rule(reviewer: str | None, actions: list[Action]) -> bool:
        return reviewer == "admin" or all(a.name != "delete_file" for a in actions)

    log: Log = []
    hook = authorizer(kind, rule, [])
    script = [proposes(email("c1", ALICE)), proposes(delete("c2", "/srv/old.log")), echo]
    chat, _ = make_chat(store, script, log, FakeClock(), authorize=hook)
    paused = await chat.send_message(ASK)

    second = await chat.submit_review([APPROVE], paused.thread_id, reviewer="bob")
    with pytest.raises(ReviewerNotAllowedError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="bob")

    assert str(caught.value) == f"Reviewer 'bob' may not review conversation '{paused.thread_id}'"
    assert log == [("send_email", ALICE)]
    done = await chat.submit_review(
        [APPROVE], paused.thread_id, review_id=second.review_id, reviewer="admin"
    )
    assert done.reply == "Read: Deleted /srv/old.log"
    assert log == [("send_email", ALICE), ("delete_file", {"path": "/srv/old.log"})]
    state = await chat.get_thread(paused.thread_id)
    assert [(a.name, a.status, a.reviewer) for a in state.actions] == [
        ("send_email", "executed", "bob"),
        ("delete_file", "executed", "admin"),
    ]
    assert [(e.kind, e.tool, e.actor) for e in state.audit if e.kind != "requested"] == [
        ("decided", "send_email", "bob"),
        ("executed", "send_email", "bob"),
        ("refused", None, "bob"),
        ("decided", "delete_file", "admin"),
        ("executed", "delete_file", "admin"),
    ]


async def test_authorization_comes_before_validation(store: AnyStore) -> None:
    """A refused reviewer is refused even with malformed decisions; an allowed one gets 400s."""
    hook = authorizer("sync", lambda reviewer, _: reviewer == "alice", [])
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], FakeClock(), authorize=hook)
    paused = await chat.send_message(ASK)

    with pytest.raises(ReviewerNotAllowedError):
        await chat.submit_review([{"type": "postpone"}], paused.thread_id, reviewer="mallory")
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await chat.submit_review([{"type": "postpone"}], paused.thread_id, reviewer="alice")

    assert str(caught.value) == (
        "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']"
    )


# --- audit trail --------------------------------------------------------------------------------


async def test_audit_trail_of_an_edited_and_executed_action(store: AnyStore) -> None:
    """requested -> decided (alice, edit) -> executed, exactly; export_audit parses back."""
    log: Log = []
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, clock, review_ttl=300)
    paused = await chat.send_message(ASK)
    clock.advance(7)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": BOB}}

    done = await chat.submit_review(
        [edit], paused.thread_id, review_id=paused.review_id, reviewer="alice"
    )

    assert done.reply == "Read: Email sent to bob@example.com"
    assert log == [("send_email", BOB)]
    trail = await chat.audit_trail(paused.thread_id)
    tid, rid, aid = paused.thread_id, paused.review_id, paused.actions[0].id
    key = await chat.store.digest_key()  # type: ignore[attr-defined]  # the store's secret
    assert events_view(trail) == [
        event(
            "requested",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            args=ALICE,
            detail="expires at 2025-01-01T09:05:00+00:00",
            digest=sha("send_email", ALICE, tid, rid, key),
        ),
        event(
            "decided",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            args=BOB,
            actor="alice",
            decision="edit",
            digest=sha("send_email", ALICE, tid, rid, key),
        ),
        event(
            "executed",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            actor="alice",
            detail="Email sent to bob@example.com",
        ),
    ]
    times = [e.at for e in trail]
    assert times == sorted(times)
    assert times == [T0, T0 + timedelta(seconds=7), T0 + timedelta(seconds=7)]
    assert len({e.id for e in trail}) == 3
    state = await chat.get_thread(paused.thread_id)
    assert state.messages[1] == email_turn("c1", BOB_JSON)
    assert [(a.status, a.reviewer, a.decided_at) for a in state.actions] == [
        ("executed", "alice", T0 + timedelta(seconds=7))
    ]

    exported = await chat.export_audit()

    assert exported.endswith("\n")
    assert [AuditEvent.model_validate(json.loads(line)) for line in exported.splitlines()] == trail
    assert await chat.export_audit([paused.thread_id]) == exported


async def test_export_audit_covers_every_thread(store: AnyStore) -> None:
    """export_audit() without ids concatenates the trails of all stored threads, in order."""
    script = [proposes(email("c1", ALICE)), proposes(delete("c9", "/srv/y")), "ok"]
    chat, _ = make_chat(store, script, [], FakeClock())
    first = await chat.send_message(ASK)
    second = await chat.send_message("Delete /srv/y")
    await chat.submit_review([{"type": "reject"}], first.thread_id)

    lines = (await chat.export_audit()).splitlines()

    parsed = [AuditEvent.model_validate(json.loads(line)) for line in lines]
    expected = [
        *await chat.audit_trail(first.thread_id),
        *await chat.audit_trail(second.thread_id),
    ]
    assert parsed == expected
    assert [(e.thread_id, e.kind) for e in parsed] == [
        (first.thread_id, "requested"),
        (first.thread_id, "decided"),
        (first.thread_id, "rejected"),
        (second.thread_id, "requested"),
    ]
    assert [json.loads(line) == dict(sorted(json.loads(line).items())) for line in lines] == [
        True
    ] * 4


async def test_audit_trail_of_a_rejected_action(store: AnyStore) -> None:
    """A rejection with a reason: requested -> decided (reject) -> rejected."""
    log: Log = []
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), echo], log, FakeClock())
    paused = await chat.send_message(ASK)
    reject = {"type": "reject", "message": "Wrong recipient"}

    done = await chat.submit_review([reject], paused.thread_id, reviewer="bob")

    assert done.reply == "Read: Rejected by the reviewer, not executed: Wrong recipient"
    tid, rid, aid = paused.thread_id, paused.review_id, paused.actions[0].id
    key = await chat.store.digest_key()  # type: ignore[attr-defined]  # the store's secret
    assert events_view(await chat.audit_trail(tid)) == [
        event(
            "requested",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            args=ALICE,
            digest=sha("send_email", ALICE, tid, rid, key),
        ),
        event(
            "decided",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            actor="bob",
            decision="reject",
            detail="Wrong recipient",
            digest=sha("send_email", ALICE, tid, rid, key),
        ),
        event(
            "rejected",
            tid,
            rid,
            action_id=aid,
            tool="send_email",
            actor="bob",
            detail="Wrong recipient",
        ),
    ]
    assert log == []


async def test_audit_trail_of_an_approved_tool_that_raises(store: AnyStore) -> None:
    """An approved tool that raises ends with a failed event carrying the error text."""
    log: Log = []
    call = ToolCall(id="c1", name="remove_user", args={"name": "dave"})
    chat, _ = make_chat(store, [proposes(call), echo], log, FakeClock())
    paused = await chat.send_message("Remove dave")

    await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    tid, rid, aid = paused.thread_id, paused.review_id, paused.actions[0].id
    failure = "Tool `remove_user` failed: RuntimeError: directory offline"
    key = await chat.store.digest_key()  # type: ignore[attr-defined]  # the store's secret
    assert events_view(await chat.audit_trail(tid)) == [
        event(
            "requested",
            tid,
            rid,
            action_id=aid,
            tool="remove_user",
            args={"name": "dave"},
            digest=sha("remove_user", {"name": "dave"}, tid, rid, key),
        ),
        event(
            "decided",
            tid,
            rid,
            action_id=aid,
            tool="remove_user",
            args={"name": "dave"},
            actor="alice",
            decision="approve",
            digest=sha("remove_user", {"name": "dave"}, tid, rid, key),
        ),
        event("failed", tid, rid, action_id=aid, tool="remove_user", actor="alice", detail=failure),
    ]
    assert log == [("remove_user", {"name": "dave"})]


# --- recovery (in-process stand-in for a crash; real processes: test_crash_safety.py) -----------


async def crashed_thread(store: AnyStore, log: Log, clock: FakeClock) -> tuple[ReviewedChat, Any]:
    """A thread whose approved tool 'killed the process': left running."""
    call = ToolCall(id="c1", name="send_crash_report", args={"name": "x"})
    chat, _ = make_chat(store, [proposes(call), echo], log, clock)
    paused = await chat.send_message("Report it")
    clock.advance(4)
    with pytest.raises(Crash):
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")
    clock.advance(100)
    return chat, paused


async def test_recover_finishes_a_crashed_thread(store: AnyStore) -> None:
    """A running thread is busy until recover() ends its approved action failed, not rerun."""
    log: Log = []
    clock = FakeClock()
    chat, paused = await crashed_thread(store, log, clock)
    tid = paused.thread_id

    assert await chat.running_threads() == [tid]
    with pytest.raises(ThreadBusyError) as busy:
        await chat.send_message("Hello?", tid)
    assert str(busy.value) == (
        f"Decisions are being applied in conversation '{tid}'. Try again shortly;"
        " if the process applying them stopped, run recover() for this thread."
    )
    with pytest.raises(NoPendingReviewError):
        await chat.submit_review([APPROVE], tid)

    assert await chat.recover(tid) is True
    assert await chat.recover(tid) is False

    assert await chat.running_threads() == []
    state = await chat.get_thread(tid)
    assert [(a.status, a.result and a.result.content) for a in state.actions] == [
        ("failed", INTERRUPTED_TEXT)
    ]
    assert state.messages[-1] == tool_msg(
        "c1", f"Error, outcome unknown, not run again: {INTERRUPTED_TEXT}", "error"
    )
    assert [e.kind for e in state.audit] == ["requested", "decided", "interrupted"]
    assert log == [("send_crash_report", {"name": "x"})]
    chat.model = ScriptedModel([echo])
    turn = await chat.send_message("Hello?", tid)
    assert turn.reply == "Read: Hello?"
    assert log == [("send_crash_report", {"name": "x"})]


async def test_recover_keeps_who_decided_and_when(store: AnyStore) -> None:
    """After recover() the action still names its reviewer and decision time, as the audit does."""
    clock = FakeClock()
    chat, paused = await crashed_thread(store, [], clock)

    await chat.recover(paused.thread_id)

    state = await chat.get_thread(paused.thread_id)
    assert [(a.status, a.reviewer, a.decided_at) for a in state.actions] == [
        ("failed", "alice", T0 + timedelta(seconds=4))
    ]
    assert [(e.kind, e.actor) for e in state.audit] == [
        ("requested", None),
        ("decided", "alice"),
        ("interrupted", "alice"),
    ]


@pytest.mark.parametrize("ttl", [0, -5, timedelta(0)], ids=["zero", "negative", "zero-delta"])
def test_a_ttl_must_be_positive(ttl: float | timedelta) -> None:
    """review_ttl and requires_approval(ttl=...) refuse a deadline that is not in the future."""
    with pytest.raises(ValueError, match="must be positive") as chat:
        ReviewedChat(ScriptedModel([]), [], review_ttl=ttl)
    with pytest.raises(ValueError, match="must be positive") as tool:
        requires_approval(ttl=ttl)

    assert str(chat.value) == f"A review time-to-live must be positive, got {ttl!r}"
    assert str(tool.value) == str(chat.value)


async def test_cancel_after_the_deadline_is_an_expiry(store: AnyStore) -> None:
    """Past the deadline cancel_review raises ReviewExpiredError: the action ends expired."""
    clock = FakeClock()
    chat, _ = make_chat(store, [proposes(email("c1", ALICE))], [], clock, review_ttl=60)
    paused = await chat.send_message(ASK)
    clock.advance(61)

    with pytest.raises(ReviewExpiredError):
        await chat.cancel_review(paused.thread_id, reviewer="carol", reason="too late")

    state = await chat.get_thread(paused.thread_id)
    assert [(a.status, a.reviewer) for a in state.actions] == [("expired", None)]
    assert [e.kind for e in state.audit] == ["requested", "expired"]


async def test_cancel_with_a_review_id_on_an_idle_thread_is_stale(store: AnyStore) -> None:
    """cancel_review naming a review that already ended raises StaleReviewError."""
    chat, _ = make_chat(store, [proposes(email("c1", ALICE)), "ok"], [], FakeClock())
    paused = await chat.send_message(ASK)
    await chat.submit_review([{"type": "reject"}], paused.thread_id)
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.cancel_review(paused.thread_id, review_id=paused.review_id)

    assert (caught.value.review_id, caught.value.current) == (paused.review_id, None)
    assert await snapshot(store, paused.thread_id) == before
