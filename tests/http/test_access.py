"""The access hook: who may read a thread, its audit trail, or post to it (Python and HTTP).

``ReviewedChat(access=...)`` is asked before :meth:`get_thread`
(``"read"``), :meth:`audit_trail` (``"audit"``) and :meth:`send_message` to
an existing thread (``"message"``). A refusal raises ``AccessDeniedError``
(403 over HTTP), is audited as ``refused`` and changes nothing else.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import FastAPI, Header

from toolguard import (
    AccessDeniedError,
    ConcurrentUpdateError,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ThreadState,
    ToolCall,
    ToolguardError,
)
from toolguard.http import create_app

MAIL = {"to": "alice@example.com", "body": "Hi"}


class Calls:
    """What the hook was asked, and how many model calls there were."""

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str, str]] = []
        self.model_calls = 0


def make_chat(calls: Calls, allowed: set[str | None], *, store: Any = None) -> ReviewedChat:
    """A chat whose access hook lets exactly ``allowed`` actors in; mail -> a guarded call."""

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    def react(messages: Any) -> ModelResponse:
        calls.model_calls += 1
        last = messages[-1]
        if last["role"] == "user" and "mail" in str(last["content"]):
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=MAIL)])
        return ModelResponse(text="Hello!")

    def access(actor: str | None, thread: ThreadState, operation: str) -> bool:
        calls.asked.append((actor, thread.thread_id, operation))
        return actor in allowed

    return ReviewedChat(
        ScriptedModel([react], repeat=True), [send_email], access=access, store=store
    )


def refused_event(state: ThreadState) -> dict[str, Any]:
    """The last audit event, without its id and time."""
    return state.audit[-1].model_dump(exclude={"id", "at"})


# --- the Python API -----------------------------------------------------------------------------


async def test_reads_and_messages_ask_the_hook_with_the_actor_and_operation() -> None:
    """get_thread, audit_trail and send_message (existing thread) ask; new threads do not."""
    calls = Calls()
    chat = make_chat(calls, {"alice"})
    turn = await chat.send_message("hi", actor="alice")
    tid = turn.thread_id
    assert calls.asked == []
    state = await chat.get_thread(tid, actor="alice")
    events = await chat.audit_trail(tid, actor="alice")
    again = await chat.send_message("hi again", tid, actor="alice")
    assert calls.asked == [
        ("alice", tid, "read"),
        ("alice", tid, "audit"),
        ("alice", tid, "message"),
    ]
    assert (state.thread_id, events, again.reply) == (tid, [], "Hello!")


async def test_reviews_recovery_and_exports_do_not_ask_the_hook() -> None:
    """Reviews go to authorize; export_audit, expire_overdue and recover are the operator's."""
    calls = Calls()
    chat = make_chat(calls, set())
    first = await chat.send_message("mail alice")
    second = await chat.send_message("mail alice")
    await chat.submit_review([{"type": "approve"}], first.thread_id)
    await chat.cancel_review(second.thread_id)
    exported = await chat.export_audit()
    assert await chat.expire_overdue(first.thread_id) is False
    assert await chat.recover(first.thread_id) is False
    assert await chat.running_threads() == []
    assert calls.asked == []
    assert exported.count("\n") == 5  # requested, decided, executed; requested, cancelled


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("read", lambda chat, tid: chat.get_thread(tid, actor="mallory")),
        ("audit", lambda chat, tid: chat.audit_trail(tid, actor="mallory")),
        ("message", lambda chat, tid: chat.send_message("mail bob", tid, actor="mallory")),
    ],
)
async def test_a_refusal_raises_is_audited_and_changes_nothing_else(
    operation: str, call: Any
) -> None:
    """AccessDeniedError with the exact text; one ``refused`` event; no model call, no change."""
    calls = Calls()
    chat = make_chat(calls, {"alice"})
    tid = (await chat.send_message("hi", actor="alice")).thread_id
    before = await chat.store.load(tid)
    assert before is not None
    model_calls = calls.model_calls
    with pytest.raises(AccessDeniedError) as caught:
        await call(chat, tid)
    after = await chat.store.load(tid)
    assert after is not None
    assert str(caught.value) == (
        f"Access denied: 'mallory' may not {operation!r} in conversation {tid!r}"
    )
    assert (caught.value.actor, caught.value.thread_id, caught.value.operation) == (
        "mallory",
        tid,
        operation,
    )
    assert isinstance(caught.value, ToolguardError)
    assert isinstance(caught.value, PermissionError)
    assert refused_event(after) == {
        "kind": "refused",
        "thread_id": tid,
        "review_id": None,
        "action_id": None,
        "tool": None,
        "args": None,
        "actor": "mallory",
        "decision": None,
        "detail": f"the access hook refused the operation {operation!r}",
        "digest": None,
    }
    unchanged = {"audit": before.audit, "version": before.version, "updated_at": before.updated_at}
    assert after.model_copy(update=unchanged) == before
    assert (after.version, calls.model_calls) == (before.version + 1, model_calls)


async def test_a_refusal_on_a_paused_thread_names_its_review() -> None:
    """The refused event carries the pending review's id; the review stays pending."""
    chat = make_chat(Calls(), set())
    turn = await chat.send_message("mail alice")
    with pytest.raises(AccessDeniedError):
        await chat.get_thread(turn.thread_id, actor="mallory")
    state = await chat.store.load(turn.thread_id)
    assert state is not None
    assert (state.status, state.audit[-1].kind, state.audit[-1].review_id) == (
        "awaiting_review",
        "refused",
        turn.review_id,
    )
    done = await chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert done.reply == "Hello!"


async def test_an_async_hook_and_none_as_actor() -> None:
    """The hook may be async; an anonymous caller is the actor ``None``."""
    asked: list[tuple[str | None, str]] = []

    async def access(actor: str | None, thread: ThreadState, operation: str) -> bool:
        asked.append((actor, operation))
        return actor is not None

    chat = ReviewedChat(ScriptedModel(["Hello!"], repeat=True), [], access=access)
    tid = (await chat.send_message("hi")).thread_id
    with pytest.raises(AccessDeniedError) as caught:
        await chat.get_thread(tid)
    assert str(caught.value) == f"Access denied: None may not 'read' in conversation {tid!r}"
    assert (await chat.get_thread(tid, actor="bob")).thread_id == tid
    assert asked == [(None, "read"), ("bob", "read")]


async def test_repeated_refusals_cannot_grow_the_thread_without_bound() -> None:
    """The same refusal again is not recorded twice in a row; at most 20 refusals in a row."""
    chat = make_chat(Calls(), {"alice"})
    tid = (await chat.send_message("hi")).thread_id
    for _ in range(5):
        with pytest.raises(AccessDeniedError):
            await chat.get_thread(tid, actor="mallory")
    state = await chat.store.load(tid)
    assert state is not None
    assert [e.kind for e in state.audit] == ["refused"]
    for i in range(50):
        with pytest.raises(AccessDeniedError):
            await chat.audit_trail(tid, actor=f"intruder{i}")
    state = await chat.store.load(tid)
    assert state is not None
    assert len(state.audit) == 20
    assert [e.actor for e in state.audit] == ["mallory"] + [f"intruder{i}" for i in range(19)]


class ConflictingStore(MemoryStore):
    """A store where another writer always got there first."""

    def __init__(self) -> None:
        super().__init__()
        self.conflict = False

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        if self.conflict:
            raise ConcurrentUpdateError(state.thread_id)
        return await super().save(state, expected_version=expected_version)


async def test_a_concurrent_save_wins_over_the_refusal_record() -> None:
    """If the thread changed meanwhile, the refusal is not recorded; it is still refused."""
    store = ConflictingStore()
    chat = make_chat(Calls(), {"alice"}, store=store)
    tid = (await chat.send_message("hi")).thread_id
    before = await store.load(tid)
    store.conflict = True
    with pytest.raises(AccessDeniedError):
        await chat.get_thread(tid, actor="mallory")
    assert await store.load(tid) == before


async def test_a_refusal_while_decisions_are_applied_is_not_recorded() -> None:
    """Recording would bump the version under the run applying decisions; it is refused only."""
    chat = make_chat(Calls(), {"alice"})
    turn = await chat.send_message("mail alice")
    state = await chat.store.load(turn.thread_id)
    assert state is not None
    running = await chat.store.save(
        state.model_copy(update={"status": "running"}), expected_version=state.version
    )
    with pytest.raises(AccessDeniedError):
        await chat.get_thread(turn.thread_id, actor="mallory")
    assert await chat.store.load(turn.thread_id) == running


@pytest.mark.parametrize("actor", [b"alice", ["alice"], 1.5, True])
async def test_an_actor_that_is_not_an_id_is_a_type_error(actor: Any) -> None:
    """actor must be text, an int, a UUID or None, with or without a hook."""
    chat = ReviewedChat(ScriptedModel(["Hello!"], repeat=True), [])
    tid = (await chat.send_message("hi")).thread_id
    with pytest.raises(TypeError) as caught:
        await chat.get_thread(tid, actor=actor)
    assert str(caught.value) == (
        f"actor must be text, an int, a UUID or None, got {type(actor).__name__}"
    )


async def test_int_and_uuid_actors_are_asked_as_text() -> None:
    """Like reviewer ids: an int or a UUID reaches the hook as its text."""
    seen: list[Any] = []

    def access(actor: Any, thread: ThreadState, operation: str) -> bool:
        seen.append(actor)
        return True

    chat = ReviewedChat(ScriptedModel(["Hello!"], repeat=True), [], access=access)
    tid = (await chat.send_message("hi")).thread_id
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    await chat.get_thread(tid, actor=7)  # type: ignore[arg-type]
    await chat.get_thread(tid, actor=key)  # type: ignore[arg-type]
    assert seen == ["7", "12345678-1234-5678-1234-567812345678"]


@pytest.mark.parametrize("verdict", [None, 1, "no", []])
async def test_a_hook_answering_a_non_bool_fails_closed(verdict: Any) -> None:
    """Anything but True or False is a TypeError: nothing is read, changed or recorded."""
    chat = ReviewedChat(
        ScriptedModel(["Hello!"], repeat=True), [], access=lambda actor, thread, op: verdict
    )
    tid = (await chat.send_message("hi")).thread_id
    before = await chat.store.load(tid)
    with pytest.raises(TypeError) as caught:
        await chat.get_thread(tid, actor="alice")
    assert str(caught.value) == (
        f"the access hook must return True or False, got {type(verdict).__name__}"
    )
    assert await chat.store.load(tid) == before


class GatedModel:
    """Answers "Hello!" first; the second answer waits until the test releases it."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = anyio.Event()
        self.release = anyio.Event()

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            return ModelResponse(text="Hello!")
        self.waiting.set()
        await self.release.wait()
        return ModelResponse(text="Done")


async def test_a_refusal_during_a_model_call_does_not_fail_that_turn() -> None:
    """A refusal recorded while send_message waits for the model: the turn still saves."""
    model = GatedModel()
    chat = ReviewedChat(model, [], access=lambda actor, thread, op: actor == "alice")
    tid = (await chat.send_message("hi")).thread_id
    replies: list[str | None] = []

    async def second_message() -> None:
        replies.append((await chat.send_message("again", tid, actor="alice")).reply)

    async with anyio.create_task_group() as tg:
        tg.start_soon(second_message)
        await model.waiting.wait()
        with pytest.raises(AccessDeniedError):
            await chat.get_thread(tid, actor="mallory")
        model.release.set()
    assert replies == ["Done"]
    state = await chat.store.load(tid)
    assert state is not None
    assert [m["content"] for m in state.messages] == ["hi", "Hello!", "again", "Done"]
    assert [(e.kind, e.actor) for e in state.audit] == [("refused", "mallory")]


def test_blocking_chat_passes_the_actor() -> None:
    """BlockingChat.get_thread, audit_trail and send_message take actor= too."""
    calls = Calls()
    chat = make_chat(calls, {"alice"})
    with chat.blocking() as session:
        tid = session.send_message("hi").thread_id
        session.send_message("hi", tid, actor="alice")
        assert session.get_thread(tid, actor="alice").thread_id == tid
        assert session.audit_trail(tid, actor="alice") == []
        with pytest.raises(AccessDeniedError):
            session.audit_trail(tid, actor="mallory")
    assert calls.asked == [
        ("alice", tid, "message"),
        ("alice", tid, "read"),
        ("alice", tid, "audit"),
        ("mallory", tid, "audit"),
    ]


def test_access_denied_pickles_and_speaks_indonesian(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error survives pickling with its payload; its text follows TOOLGUARD_LANG."""
    error = AccessDeniedError("bob", "t1", "audit")
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own object
    assert (type(copy), copy.args, copy.operation) == (AccessDeniedError, error.args, "audit")
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    assert str(AccessDeniedError("bob", "t1", "read")) == (
        "Akses ditolak: 'bob' tidak boleh 'read' di percakapan 't1'"
    )


# --- over HTTP ----------------------------------------------------------------------------------


def user_header(x_user: Annotated[str | None, Header()] = None) -> str | None:
    """The caller's id from the X-User header (a stand-in for a login)."""
    return x_user


@asynccontextmanager
async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def test_http_routes_pass_the_reviewer_as_actor_and_answer_403() -> None:
    """GET thread, GET audit, POST chat to a thread: the reviewer dependency is the actor."""
    calls = Calls()
    chat = make_chat(calls, {"alice"})
    app = create_app(chat, reviewer=user_header)
    alice, mallory = {"X-User": "alice"}, {"X-User": "mallory"}
    async with client_for(app) as client:
        started = await client.post("/hitl/chat", json={"message": "mail alice"}, headers=mallory)
        tid = started.json()["thread_id"]
        read = await client.get(f"/hitl/threads/{tid}", headers=alice)
        answers = [
            await client.get(f"/hitl/threads/{tid}", headers=mallory),
            await client.get(f"/hitl/threads/{tid}/audit", headers=mallory),
            await client.post(
                "/hitl/chat", json={"message": "hi", "thread_id": tid}, headers=mallory
            ),
            await client.get(f"/hitl/threads/{tid}"),
        ]
        audit = await client.get(f"/hitl/threads/{tid}/audit", headers=alice)
    assert (started.status_code, read.status_code, audit.status_code) == (200, 200, 200)
    assert [(a.status_code, a.json()) for a in answers] == [
        (403, {"detail": f"Access denied: 'mallory' may not 'read' in conversation {tid!r}"}),
        (403, {"detail": f"Access denied: 'mallory' may not 'audit' in conversation {tid!r}"}),
        (403, {"detail": f"Access denied: 'mallory' may not 'message' in conversation {tid!r}"}),
        (403, {"detail": f"Access denied: None may not 'read' in conversation {tid!r}"}),
    ]
    assert [line for line in audit.text.splitlines() if '"refused"' in line] != []
    state = await chat.get_thread(tid, actor="alice")
    assert [(e.kind, e.actor, e.detail) for e in state.audit if e.kind == "refused"] == [
        ("refused", "mallory", "the access hook refused the operation 'read'"),
        ("refused", "mallory", "the access hook refused the operation 'audit'"),
        ("refused", "mallory", "the access hook refused the operation 'message'"),
        ("refused", None, "the access hook refused the operation 'read'"),
    ]
    assert state.status == "awaiting_review"
    assert calls.model_calls == 1
