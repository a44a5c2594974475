"""ReviewedChat hands the shipped stores the next state (one copy per save).

A MemoryStore keeps the head of a thread the chat saved last as the state
itself, and turns it into JSON only when it is read or leaves a window of
recent threads: a head replaced by the next save is never serialized.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_mailing_chat
from toolguard import (
    ConcurrentUpdateError,
    MemoryStore,
    ReviewedChat,
    SQLiteStore,
    ThreadState,
)
from toolguard._stores import memory as _store
from toolguard._stores.memory import Changes, head_json, takes_prepared


def make_chat(store: Any) -> ReviewedChat:
    """A chat whose model proposes send_email to every user message (see test_incremental_store)."""
    return make_mailing_chat(store, [])


async def paused_then_done(chat: ReviewedChat, thread_id: str | None = None) -> str:
    paused = await chat.send_message("Mail Alice", thread_id)
    done = await chat.submit_review(
        [{"type": "approve"}], paused.thread_id, review_id=paused.review_id
    )
    assert done.reply == "Done: sent to alice@example.com"
    return paused.thread_id


class PlainSubclass(MemoryStore):
    """Adds nothing: saved like a MemoryStore."""


class OwnSaveChanges(MemoryStore):
    """Overrides save_changes: every save must go through it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int | None] = []

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        self.seen.append(expected_version)
        return await super().save_changes(state, changes, expected_version=expected_version)


class OwnSave(MemoryStore):
    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        return await super().save(state, expected_version=expected_version)


class OwnLoad(MemoryStore):
    async def load(self, thread_id: str) -> ThreadState | None:
        return await super().load(thread_id)


class IncrementalOfItsOwn:
    """A custom incremental store: save_changes and load_version, no private method."""

    async def load(self, thread_id: str) -> ThreadState | None:
        return None

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        return state

    async def load_version(self, thread_id: str) -> int | None:
        return None

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        return state


def test_only_the_shipped_stores_and_their_plain_subclasses_take_prepared_states(
    tmp_path: Path,
) -> None:
    sqlite = SQLiteStore(tmp_path / "t.db")
    try:
        found = {
            type(store).__name__: takes_prepared(store)
            for store in (
                MemoryStore(),
                sqlite,
                PlainSubclass(),
                OwnSaveChanges(),
                OwnSave(),
                OwnLoad(),
                IncrementalOfItsOwn(),
            )
        }
    finally:
        sqlite.close()
    assert found == {
        "MemoryStore": True,
        "SQLiteStore": True,
        "PlainSubclass": True,
        "OwnSaveChanges": False,
        "OwnSave": False,
        "OwnLoad": False,
        "IncrementalOfItsOwn": False,
    }


async def test_a_subclass_overriding_save_changes_sees_every_save() -> None:
    store = OwnSaveChanges()
    chat = make_chat(store)
    thread_id = await paused_then_done(chat)
    await paused_then_done(chat, thread_id)
    assert store.seen == [None, 1, 2, 3, 4, 5, 6, 7]
    assert store._live == {}  # saved through the public path: every head is JSON at once


async def test_the_chats_last_head_stays_a_state_until_the_thread_is_read() -> None:
    store = MemoryStore()
    chat = make_chat(store)
    thread_id = await paused_then_done(chat)
    version, head = store._threads[thread_id]
    cached = chat._threads.states[thread_id]
    assert head is cached  # the saved state itself, shared with the chat's read-only cache
    assert (version, list(store._live)) == (4, [thread_id])

    loaded = await store.load(thread_id)

    assert loaded == cached
    assert loaded is not cached
    assert store._threads[thread_id] == (4, head_json(cached).encode())
    assert store._live == {}
    # The next save of the thread keeps working on top of the JSON head.
    await paused_then_done(chat, thread_id)
    final = await store.load(thread_id)
    assert final is not None
    assert (final.version, [m["role"] for m in final.messages]) == (
        8,
        ["user", "assistant", "tool", "assistant"] * 2,
    )


async def test_heads_leaving_the_window_become_json_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_store, "_LIVE_HEADS", 2)
    store = MemoryStore()
    chat = make_chat(store)
    first = await paused_then_done(chat)
    second = await paused_then_done(chat)
    third = await paused_then_done(chat)
    assert list(store._live) == [second, third]
    assert store._threads[first] == (4, head_json(chat._threads.states[first]).encode())
    assert store._threads[second][1] is chat._threads.states[second]
    # A save of a thread in the window moves it to the end; the oldest leaves.
    await chat.send_message("Mail Alice", second)
    fourth = await paused_then_done(chat)
    assert list(store._live) == [second, fourth]
    assert isinstance(store._threads[third][1], bytes)


async def test_a_window_of_kept_heads_stores_exactly_the_json_of_eager_saves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every prepared save replayed into a store that serializes at once: the same JSON."""
    monkeypatch.setattr(_store, "_LIVE_HEADS", 3)
    lazy, eager = MemoryStore(), MemoryStore()
    prepared = lazy._save_prepared

    async def both(
        stored: ThreadState, changes: Changes, expected_version: int | None
    ) -> ThreadState:
        eager._write(stored, changes, expected_version)  # owned=False: JSON now
        return await prepared(stored, changes, expected_version)

    monkeypatch.setattr(lazy, "_save_prepared", both)
    chat = make_chat(lazy)
    threads = [await paused_then_done(chat) for _ in range(4)]
    await paused_then_done(chat, threads[0])
    paused = await chat.send_message("Mail Alice", threads[1])
    await chat.submit_review(
        [
            {
                "type": "edit",
                "edited_action": {"name": "send_email", "args": {"to": "bob@x.org", "body": "Yo"}},
            }
        ],
        threads[1],
        review_id=paused.review_id,
    )
    paused = await chat.send_message("Mail Alice", threads[2])
    await chat.submit_review([{"type": "reject", "message": "no"}], threads[2])
    await chat.send_message("Mail Alice", threads[3])  # left paused

    assert sorted(eager._threads) == sorted(lazy._threads) == sorted(threads)
    for thread_id in threads:
        from_lazy, from_eager = await lazy.load(thread_id), await eager.load(thread_id)
        assert from_lazy is not None
        assert from_eager is not None
        assert from_lazy.model_dump_json() == from_eager.model_dump_json()
        assert lazy._threads[thread_id] == eager._threads[thread_id]
    assert lazy._live == {}


async def test_a_refused_prepared_save_changes_nothing() -> None:
    store = MemoryStore()
    chat = make_chat(store)
    thread_id = await paused_then_done(chat)
    before = dict(store._threads), dict(store._live)
    cached = chat._threads.states[thread_id]
    stale = _store.prepared_state(cached, {"status": "running"}, 3)  # stored version is 4

    with pytest.raises(ConcurrentUpdateError) as caught:
        await store._save_prepared(stale, Changes(4, [], [], [], 4), 3)

    assert str(caught.value) == (
        f"Thread {thread_id!r} was changed by someone else (expected version 3, found 4)"
    )
    assert (dict(store._threads), dict(store._live)) == before
    assert store._threads[thread_id][1] is cached


async def test_what_the_public_save_paths_were_given_and_returned_can_be_changed_freely() -> None:
    store = MemoryStore()
    state = ThreadState(thread_id="t1", messages=[{"role": "user", "content": "hi"}])
    saved = await store.save_changes(state, Changes.whole(state), expected_version=None)
    saved.status = "running"
    saved.messages.append({"role": "assistant", "content": "added"})
    state.messages[0]["content"] = "changed"

    first = await store.load("t1")

    again = await store.save(saved, expected_version=1)
    again.status = "idle"
    again.messages.clear()

    second = await store.load("t1")

    assert first is not None
    assert second is not None
    assert (first.version, first.status, first.messages) == (
        1,
        "idle",
        [{"role": "user", "content": "hi"}],
    )
    assert (second.version, second.status, second.messages) == (
        2,
        "running",
        [{"role": "user", "content": "changed"}, {"role": "assistant", "content": "added"}],
    )
    assert store._live == {}


def unsettled_counts_hold(store: MemoryStore) -> None:
    """Each thread's count of items kept as saved is exact; only window threads have any."""
    for thread_id, lists in store._lists.items():
        kept = sum(
            type(item) is not bytes for items in (lists.messages, lists.actions) for item in items
        )
        kept += sum(type(item) is not bytes for item in lists.audit)
        assert lists.unsettled == kept
        if thread_id not in store._live:
            assert kept == 0


async def test_items_wait_in_the_window_and_their_count_stays_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_store, "_LIVE_HEADS", 2)
    store = MemoryStore()
    prepared = store._save_prepared

    async def checked(
        stored: ThreadState, changes: Changes, expected_version: int | None
    ) -> ThreadState:
        saved = await prepared(stored, changes, expected_version)
        unsettled_counts_hold(store)
        return saved

    monkeypatch.setattr(store, "_save_prepared", checked)
    chat = make_chat(store)
    first = await paused_then_done(chat)
    lists = store._lists[first]
    # The pause's action was replaced by the claim's, then by the run's: one object left.
    assert [type(item).__name__ for item in lists.actions] == ["Action"]
    assert [type(item).__name__ for item in lists.messages] == ["dict"] * 4
    assert (lists.actions[0].status, lists.unsettled) == ("executed", 8)
    paused = await chat.send_message("Mail Alice", first)
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "b@x.org", "body": "Yo"}},
    }
    await chat.submit_review([edit], first, review_id=paused.review_id)  # rewrites a message
    second = await paused_then_done(chat)
    third = await paused_then_done(chat)  # the first thread leaves the window
    assert list(store._live) == [second, third]
    assert store._lists[first].unsettled == 0
    unsettled_counts_hold(store)


async def test_a_long_conversation_in_the_window_keeps_few_items_unsettled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_store, "_UNSETTLED_ITEMS", 10)
    store = MemoryStore()
    chat = make_chat(store)
    thread_id = await paused_then_done(chat)
    counts = [store._lists[thread_id].unsettled]
    for _ in range(4):
        await paused_then_done(chat, thread_id)
        counts.append(store._lists[thread_id].unsettled)
    unsettled_counts_hold(store)
    assert max(counts) <= 10
    assert list(store._live) == [thread_id]
    state = await store.load(thread_id)
    assert state is not None
    assert (state.version, len(state.messages), len(state.audit)) == (20, 20, 15)


async def test_a_public_save_of_a_window_thread_turns_its_items_into_json_first() -> None:
    store = MemoryStore()
    chat = make_chat(store)
    thread_id = await paused_then_done(chat)
    cached = chat._threads.states[thread_id]
    assert store._lists[thread_id].unsettled == 8

    saved = await store.save_changes(
        cached.model_copy(update={"status": "idle"}),
        Changes(4, [], [], [], 4),
        expected_version=4,
    )

    assert store._live == {}
    lists = store._lists[thread_id]
    assert lists.unsettled == 0
    assert all(
        type(item) is bytes
        for items in (lists.messages, lists.actions, lists.audit)
        for item in items
    )
    loaded = await store.load(thread_id)
    assert loaded == saved


async def test_settling_never_fails_another_threads_save(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept value pydantic cannot write (a lone surrogate past the cleaning) is escaped."""
    monkeypatch.setattr(_store, "_LIVE_HEADS", 1)
    store = MemoryStore()
    odd = ThreadState(thread_id="odd", messages=[{"role": "user", "content": "bad \ud800 text"}])
    stored = _store.prepared_state(odd, {"status": "idle"}, None)
    await store._save_prepared(stored, Changes.whole(stored), None)
    other = ThreadState(thread_id="other")
    stored_other = _store.prepared_state(other, {}, None)

    # The odd thread leaves the window inside the other thread's save: that save succeeds.
    saved = await store._save_prepared(stored_other, Changes.whole(stored_other), None)

    assert saved.version == 1
    assert list(store._live) == ["other"]
    assert store._lists["odd"].messages == [b'{"role":"user","content":"bad \\ud800 text"}']
    loaded = await store.load("odd")
    assert loaded is not None
    assert loaded.messages == [{"role": "user", "content": "bad \ud800 text"}]
