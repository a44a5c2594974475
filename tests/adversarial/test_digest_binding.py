"""Digests bind the review: an approved call cannot be replayed into another review or thread.

Attack class: someone who can write the store copies an action — name,
arguments and its valid digest — from one review into another (of the same
thread or of another thread), or moves a whole paused turn between threads,
so that an approval given to what the reviewer saw runs another call. Each
action's digest covers its thread id and review id too, so the copy no longer
matches and the approval fails closed with ``TAMPERED``. Digests written by
toolguard 0.1.0 (name and arguments only) never match either: such a stored
review still loads, but approving it runs nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import odd_ids
from toolguard import (
    Message,
    ModelResponse,
    PendingTurn,
    ReviewedChat,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ThreadState,
    ToolCall,
    requires_approval,
)
from toolguard._core.records import call_digest
from toolguard._enforce.actions import TAMPERED
from toolguard._stores.memory import MemoryStore

ALICE = {"to": "alice@example.com", "body": "At 10."}
MALLORY = {"to": "mallory@example.com", "body": "Send me the payroll."}
APPROVE = {"type": "approve"}

AnyStore = MemoryStore | SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "digests.db") as sqlite_store:
            yield sqlite_store


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def proposes(args: dict[str, Any], call_id: str = "c1") -> ModelResponse:
    """A model turn proposing one send_email call."""
    return ModelResponse(tool_calls=[ToolCall(id=call_id, name="send_email", args=args)])


def make_chat(store: AnyStore, script: list[Any], log: list[Any], **options: Any) -> ReviewedChat:
    """A chat over one (classified) send_email tool that records what it sends."""

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(to)
        return f"Email sent to {to}"

    return ReviewedChat(ScriptedModel(script), [send_email], store=store, **options)


async def rewrite(store: AnyStore, thread_id: str, change: Any) -> None:
    """Change the stored thread behind toolguard's back (as a store writer could)."""
    state = await store.load(thread_id)
    assert state is not None
    await store.save(change(state), expected_version=state.version)


def with_action(state: ThreadState, source: Any) -> ThreadState:
    """The state whose pending action carries ``source``'s name, args and digest."""
    assert state.pending is not None
    forged = state.pending.actions[0].model_copy(
        update={"name": source.name, "args": source.args, "digest": source.digest}
    )
    pending = state.pending.model_copy(update={"actions": [forged]})
    return state.model_copy(update={"pending": pending})


async def assert_tampered(chat: ReviewedChat, thread_id: str, log: list[Any]) -> None:
    """Approving the thread's review runs nothing: the action fails with TAMPERED."""
    turn = await chat.submit_review([APPROVE], thread_id)
    assert log == []
    assert [(a.status, a.result and a.result.content) for a in turn.actions] == [
        ("failed", TAMPERED)
    ]
    assert turn.reply == f"Read: Refused, not executed: {TAMPERED}"


# --- replay into another review or thread ---------------------------------------------------------


async def test_an_action_copied_from_an_earlier_review_does_not_run(store: AnyStore) -> None:
    """Review A's (rejected) mallory call copied into review B of the same thread: TAMPERED."""
    log: list[Any] = []
    chat = make_chat(store, [proposes(MALLORY), proposes(ALICE, "c2"), echo], log)
    first = await chat.send_message("Mail someone")
    second = await chat.submit_review([{"type": "reject"}], first.thread_id)
    assert second.review_id is not None
    assert second.review_id != first.review_id
    old = (await chat.get_thread(first.thread_id)).actions[0]
    assert (old.name, old.args, old.status) == ("send_email", MALLORY, "rejected")

    await rewrite(store, first.thread_id, lambda state: with_action(state, old))

    await assert_tampered(chat, first.thread_id, log)


async def test_an_action_copied_from_another_thread_does_not_run(store: AnyStore) -> None:
    """Thread 1's pending mallory call copied into thread 2's review: TAMPERED."""
    log: list[Any] = []
    chat = make_chat(store, [proposes(MALLORY), proposes(ALICE), echo], log)
    one = await chat.send_message("Mail Mallory")
    two = await chat.send_message("Mail Alice")
    source = (await chat.get_thread(one.thread_id)).pending
    assert source is not None

    await rewrite(store, two.thread_id, lambda state: with_action(state, source.actions[0]))

    await assert_tampered(chat, two.thread_id, log)


async def test_a_whole_paused_turn_moved_to_another_thread_does_not_run(store: AnyStore) -> None:
    """Thread 1's paused turn, review id and all, stored as thread 2's: TAMPERED."""
    log: list[Any] = []
    chat = make_chat(store, [proposes(MALLORY), proposes(ALICE), echo], log)
    one = await chat.send_message("Mail Mallory")
    two = await chat.send_message("Mail Alice")
    moved = (await chat.get_thread(one.thread_id)).pending

    await rewrite(store, two.thread_id, lambda state: state.model_copy(update={"pending": moved}))

    await assert_tampered(chat, two.thread_id, log)


async def test_the_untouched_review_runs(store: AnyStore) -> None:
    """Without tampering, the same approvals run (with and without a signing key)."""
    for key in (None, b"server-secret"):
        log: list[Any] = []
        chat = make_chat(store, [proposes(ALICE), echo], log, signing_key=key)
        paused = await chat.send_message("Mail Alice")

        turn = await chat.submit_review([APPROVE], paused.thread_id)

        assert turn.reply == "Read: Email sent to alice@example.com"
        assert log == ["alice@example.com"]


# --- the runner in a hand-written loop ------------------------------------------------------------


def make_runner(log: list[Any], key: bytes | None = None) -> Runner:
    """A runner over a guarded send_email."""

    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(to)
        return "sent"

    return Runner([send_email], signing_key=key, sync_in_thread=False)


@pytest.mark.parametrize("key", [None, b"server-secret"])
async def test_resuming_under_another_thread_id_does_not_run(key: bytes | None) -> None:
    """A turn run for thread t1 resumed as thread t2 (or as no thread): TAMPERED."""
    for resume_as in ["t2", ""]:
        log: list[Any] = []
        runner = make_runner(log, key)
        step = await runner.run([ToolCall(id="c1", name="send_email", args=ALICE)], thread_id="t1")
        assert step.pending is not None

        done = await runner.resume(step.pending, [APPROVE], thread_id=resume_as)

        assert log == []
        assert [(r.status, r.content) for r in done.results] == [("error", TAMPERED)]


@pytest.mark.parametrize("key", [None, b"server-secret"])
async def test_a_turn_relabelled_with_another_review_id_does_not_run(key: bytes | None) -> None:
    """The same turn given another review id (to dodge once-only checks): TAMPERED."""
    log: list[Any] = []
    runner = make_runner(log, key)
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ALICE)], thread_id="t1")
    assert step.pending is not None
    relabelled = step.pending.model_copy(update={"review_id": uuid.uuid4().hex})

    done = await runner.resume(relabelled, [APPROVE], thread_id="t1")

    assert log == []
    assert [(r.status, r.content) for r in done.results] == [("error", TAMPERED)]


async def test_a_re_review_after_an_edit_is_bound_to_its_own_review() -> None:
    """An edit switching tools pauses again; the new action is digested with the new review id."""
    log: list[Any] = []

    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(("email", to))
        return "sent"

    @requires_approval
    def send_sms(to: str, body: str) -> str:
        """Send a text message."""
        log.append(("sms", to))
        return "texted"

    runner = Runner([send_email, send_sms], sync_in_thread=False)
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ALICE)], thread_id="t1")
    assert step.pending is not None
    edit = {"type": "edit", "edited_action": {"name": "send_sms", "args": ALICE}}
    again = await runner.resume(step.pending, [edit], thread_id="t1")
    assert again.pending is not None
    new = again.pending

    assert new.review_id != step.pending.review_id
    assert [a.digest for a in new.actions] == [
        call_digest("send_sms", ALICE, thread_id="t1", review_id=new.review_id)
    ]
    done = await runner.resume(new, [APPROVE], thread_id="t1")
    assert log == [("sms", "alice@example.com")]
    assert [r.content for r in done.results] == ["texted"]


# --- threads stored by toolguard 0.1.0 ------------------------------------------------------------


def old_digest(name: str, args: dict[str, Any]) -> str:
    """The digest toolguard 0.1.0 stored: SHA-256 of the name and arguments only."""
    text = json.dumps(
        {"name": name, "args": args}, ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()


async def test_a_review_stored_by_0_1_0_loads_but_its_approval_runs_nothing(
    tmp_path: Path,
) -> None:
    """An old-format digest is refused as tampered (documented); the thread loads and goes on."""
    db = tmp_path / "old.db"
    log: list[Any] = []
    async with SQLiteStore(db) as sqlite_store:
        chat = make_chat(sqlite_store, [proposes(ALICE), echo, echo], log)
        paused = await chat.send_message("Mail Alice")
        stored = await sqlite_store.load(paused.thread_id)
    assert stored is not None
    with sqlite3.connect(db) as conn:
        # The thread as 0.1.0 stored it: the whole state in one row (layout 1).
        data = json.loads(stored.model_dump_json())
        for action in [*data["pending"]["actions"], *data["actions"]]:
            action["digest"] = old_digest("send_email", ALICE)
        conn.execute(
            "UPDATE toolguard_threads SET state = ?, layout = 1 WHERE thread_id = ?",
            (json.dumps(data), paused.thread_id),
        )
    conn.close()

    async with SQLiteStore(db) as sqlite_store:
        chat = make_chat(sqlite_store, [echo, echo], log)
        state = await chat.get_thread(paused.thread_id)
        assert (state.status, [a.digest for a in state.actions]) == (
            "awaiting_review",
            [old_digest("send_email", ALICE)],
        )
        await assert_tampered(chat, paused.thread_id, log)
        after = await chat.send_message("And now?", paused.thread_id)
    assert after.reply == "Read: And now?"


# --- the digest function --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.tuples(odd_ids, odd_ids), min_size=2, max_size=2, unique=True),
    key=st.one_of(st.none(), st.binary(min_size=1, max_size=32)),
)
def test_different_ids_give_different_digests(
    ids: list[tuple[str, str]], key: bytes | None
) -> None:
    """Any two (thread id, review id) pairs — empty, huge, surrogates — give different digests."""
    (t1, r1), (t2, r2) = ids
    one = call_digest("send_email", ALICE, key, thread_id=t1, review_id=r1)
    two = call_digest("send_email", ALICE, key, thread_id=t2, review_id=r2)
    assert one != two
    assert one == call_digest("send_email", ALICE, key, thread_id=t1, review_id=r1)
    assert len(one) == 64


def test_a_pending_turn_keeps_its_review_id_through_json() -> None:
    """The review id the digests cover survives a JSON round trip of the paused turn."""
    runner = make_runner([])
    step = runner.run_sync([ToolCall(id="c1", name="send_email", args=ALICE)], thread_id="t9")
    assert step.pending is not None
    restored = PendingTurn.model_validate_json(step.pending.model_dump_json())
    assert restored.review_id == step.pending.review_id
    assert [a.digest for a in restored.actions] == [
        call_digest("send_email", ALICE, thread_id="t9", review_id=restored.review_id)
    ]
