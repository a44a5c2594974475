"""Stores write what changed; ReviewedChat caches threads; schema 1 databases migrate."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolguard
from tests.helpers import make_mailing_chat
from toolguard import (
    ConcurrentUpdateError,
    CorruptThreadError,
    MemoryStore,
    ReviewedChat,
    SQLiteStore,
    ThreadState,
)
from toolguard._stores import sqlite as _sqlite
from toolguard._stores import sqlite_schema as _sqlite_schema
from toolguard._stores.protocol import Changes, saves_changes
from toolguard._stores.rows import head_json, item_json

APPROVE = [{"type": "approve"}]
APP_KEY = b"the app's signing key, the same before and after"
"""The ``signing_key`` of the app whose paused reviews the migration tests carry over: a review
stays decidable across a migration when its digests' key is the same (a store's own key is made
anew in a database that has none)."""

# The 0.1.0 schema, exactly as toolguard 0.1.0 created it (git show 9ae5113:toolguard/_sqlite.py).
SCHEMA_1 = """
CREATE TABLE IF NOT EXISTS toolguard_threads (
    thread_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL
)
"""


async def cycle(chat: ReviewedChat, thread_id: str | None) -> str:
    paused = await chat.send_message("Mail Alice", thread_id)
    done = await chat.submit_review(APPROVE, paused.thread_id, review_id=paused.review_id)
    assert done.reply == "Done: sent to alice@example.com"
    return paused.thread_id


def roles(state: ThreadState) -> list[str]:
    return [m["role"] for m in state.messages]


class RecordingStore(SQLiteStore):
    """A SQLiteStore (in memory) that records what each incremental save wrote."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.written: list[tuple[int | None, int, list[str], list[int], list[str]]] = []

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        self.written.append(
            (
                expected_version,
                changes.keep_messages,
                [m["role"] for m in changes.messages],
                [position for position, _ in changes.actions],
                [e.kind for e in changes.audit],
            )
        )
        return await super().save_changes(state, changes, expected_version=expected_version)


async def test_a_cycle_writes_only_what_changed() -> None:
    """Each save names the messages, actions and audit events it adds; nothing is rewritten."""
    store = RecordingStore()
    runs: list[str] = []
    chat = make_mailing_chat(store, runs)
    thread_id = await cycle(chat, None)
    await cycle(chat, thread_id)
    assert store.written == [
        (None, 0, ["user", "assistant"], [0], ["requested"]),  # pause: a new thread
        (1, 2, [], [0], ["decided"]),  # the claim
        (2, 2, ["tool"], [0], ["executed"]),  # the run: an unedited paused message stays
        (3, 3, ["assistant"], [], []),  # the reply
        (4, 4, ["user", "assistant"], [1], ["requested"]),
        (5, 6, [], [1], ["decided"]),
        (6, 6, ["tool"], [1], ["executed"]),
        (7, 7, ["assistant"], [], []),
    ]
    state = await store.load(thread_id)
    assert state is not None
    assert roles(state) == ["user", "assistant", "tool", "assistant"] * 2
    assert [(a.status, a.call_id) for a in state.actions] == [
        ("executed", "c1"),
        ("executed", "c3"),
    ]
    assert [e.kind for e in state.audit] == ["requested", "decided", "executed"] * 2
    assert (state.version, runs) == (8, ["alice@example.com"] * 2)


class WholeStateStore:
    """A custom store written to the 0.1.0 protocol: whole-state load and save only."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}
        self.saves = 0

    async def load(self, thread_id: str) -> ThreadState | None:
        text = self.rows.get(thread_id)
        return None if text is None else ThreadState.model_validate_json(text)

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        text = self.rows.get(state.thread_id)
        found = None if text is None else ThreadState.model_validate_json(text).version
        if found != expected_version:
            raise ConcurrentUpdateError("changed")
        stored = state.model_copy(update={"version": (expected_version or 0) + 1})
        self.rows[state.thread_id] = stored.model_dump_json()
        self.saves += 1
        return stored


async def test_an_edit_rewrites_only_the_paused_assistant_message() -> None:
    """An edit replaces the paused assistant message in place (keep 1) and appends the result."""
    store = RecordingStore()
    runs: list[str] = []
    chat = make_mailing_chat(store, runs)
    paused = await chat.send_message("Mail Alice")
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "bob@example.com", "body": "Hi"}},
    }
    done = await chat.submit_review([edit], paused.thread_id, review_id=paused.review_id)
    assert (done.reply, runs) == ("Done: sent to bob@example.com", ["bob@example.com"])
    assert store.written == [
        (None, 0, ["user", "assistant"], [0], ["requested"]),
        (1, 2, [], [0], ["decided"]),
        (2, 1, ["assistant", "tool"], [0], ["executed"]),  # the paused message, as edited
        (3, 3, ["assistant"], [], []),
    ]
    state = await chat.get_thread(paused.thread_id)
    assert [c["function"]["arguments"] for c in state.messages[1]["tool_calls"]] == [
        '{"to": "bob@example.com", "body": "Hi"}'
    ]


async def test_a_custom_store_of_the_0_1_0_protocol_keeps_working() -> None:
    """Without save_changes, ReviewedChat saves and loads whole states."""
    store = WholeStateStore()
    runs: list[str] = []
    chat = make_mailing_chat(store, runs)
    thread_id = await cycle(chat, None)
    await cycle(chat, thread_id)
    state = await store.load(thread_id)
    assert state is not None
    assert (state.version, store.saves, runs) == (8, 8, ["alice@example.com"] * 2)
    assert roles(state) == ["user", "assistant", "tool", "assistant"] * 2
    assert await chat.get_thread(thread_id) == state


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_thread_changed_by_another_chat_is_read_again(tmp_path: Path, kind: str) -> None:
    """Chat A caches the thread; chat B (another process's store) goes on; A sees B's turn."""
    path = tmp_path / "t.db"
    memory = MemoryStore()
    store_a: Any = memory if kind == "memory" else SQLiteStore(path)
    store_b: Any = memory if kind == "memory" else SQLiteStore(path)
    runs: list[str] = []
    chat_a, chat_b = make_mailing_chat(store_a, runs), make_mailing_chat(store_b, runs)
    thread_id = await cycle(chat_a, None)
    await cycle(chat_b, thread_id)  # A's cached state is now two turns behind
    paused = await chat_a.send_message("Mail Alice", thread_id)
    state = await chat_a.get_thread(thread_id)
    assert roles(state) == ["user", "assistant", "tool", "assistant"] * 2 + ["user", "assistant"]
    assert (state.version, state.review_id) == (9, paused.review_id)
    # And the other way round: B approves what A paused, exactly once.
    await chat_b.submit_review(APPROVE, thread_id, review_id=paused.review_id)
    with pytest.raises(toolguard.NoPendingReviewError):
        await chat_a.submit_review(APPROVE, thread_id, review_id=paused.review_id)
    assert runs == ["alice@example.com"] * 3
    for store in {id(store_a): store_a, id(store_b): store_b}.values():
        if isinstance(store, SQLiteStore):
            await store.aclose()


async def test_mutating_a_returned_thread_changes_nothing() -> None:
    """get_thread hands out a copy: changing it changes neither the cache nor the store."""
    store = MemoryStore()
    runs: list[str] = []
    chat = make_mailing_chat(store, runs)
    thread_id = await cycle(chat, None)
    mine = await chat.get_thread(thread_id)
    mine.messages.clear()
    mine.audit.clear()
    mine.status = "running"
    trail = await chat.audit_trail(thread_id)
    trail.clear()
    await cycle(chat, thread_id)
    state = await store.load(thread_id)
    assert state is not None
    assert roles(state) == ["user", "assistant", "tool", "assistant"] * 2
    assert [e.kind for e in state.audit] == ["requested", "decided", "executed"] * 2
    assert state.status == "idle"


async def test_memory_store_reads_back_copies() -> None:
    """A state read back from a MemoryStore is a copy, as if read from a database."""
    store = MemoryStore()
    state = ThreadState(thread_id="t", messages=[{"role": "user", "content": "hi"}])
    stored = await store.save(state, expected_version=None)
    loaded = await store.load("t")
    assert loaded == stored
    assert loaded is not None
    loaded.messages[0]["content"] = "changed"
    loaded.messages.append({"role": "user", "content": "more"})
    assert await store.load("t") == stored


async def paused_in_memory(runs: list[str]) -> tuple[toolguard.ChatTurn, ThreadState]:
    """A thread paused for review in a MemoryStore: the turn and the stored state."""
    memory = MemoryStore()
    chat = make_mailing_chat(memory, runs)
    chat.runner.signing_key = APP_KEY
    paused = await chat.send_message("Mail Alice")
    state = await memory.load(paused.thread_id)
    assert state is not None
    return paused, state


def write_schema_1(path: Path, states: dict[str, str]) -> None:
    """A database exactly as toolguard 0.1.0 wrote it: one JSON row per thread, user_version 1."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(SCHEMA_1)
        conn.execute("PRAGMA user_version = 1")
        for thread_id, text in states.items():
            conn.execute(
                "INSERT INTO toolguard_threads (thread_id, version, state, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (thread_id, 3, text, "2026-01-01T00:00:00+00:00"),
            )
        conn.execute("COMMIT")


def tables_and_version(path: Path) -> tuple[list[str], int, list[tuple[str, int, int]]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = [
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")
        ]
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        rows = conn.execute(
            "SELECT thread_id, version, layout FROM toolguard_threads ORDER BY 1"
        ).fetchall()
    return tables, version, rows


async def test_a_0_1_0_database_is_migrated_on_open(tmp_path: Path) -> None:
    """Schema 1 -> 3 on open: rows stay whole until saved, then are split; a corrupt row stays."""
    path = tmp_path / "old.db"
    # A thread paused by 0.1.0, made here with a MemoryStore and stored whole (version 3).
    runs: list[str] = []
    paused, old = await paused_in_memory(runs)
    old = old.model_copy(update={"version": 3})
    broken = '{"thread_id": "broken", "status": '
    write_schema_1(path, {paused.thread_id: old.model_dump_json(), "broken": broken})

    async with SQLiteStore(path) as store:
        assert await store.load(paused.thread_id) == old
        assert tables_and_version(path) == (
            ["toolguard_items", "toolguard_threads"],
            3,
            sorted([("broken", 3, 1), (paused.thread_id, 3, 1)]),
        )
        chat = make_mailing_chat(store, runs)
        chat.runner.signing_key = APP_KEY
        done = await chat.submit_review(APPROVE, paused.thread_id, review_id=paused.review_id)
        assert (done.reply, runs) == ("Done: sent to alice@example.com", ["alice@example.com"])
        state = await store.load(paused.thread_id)
        assert state is not None
        assert roles(state) == ["user", "assistant", "tool", "assistant"]
        assert [e.kind for e in state.audit] == ["requested", "decided", "executed"]
        assert state.version == 6
        with pytest.raises(CorruptThreadError) as info:
            await store.load("broken")
    assert info.value.reason == "Invalid JSON: EOF while parsing a value at line 1 column 34"
    assert tables_and_version(path)[2] == sorted([("broken", 3, 1), (paused.thread_id, 6, 2)])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute(
            "SELECT state FROM toolguard_threads WHERE thread_id = 'broken'"
        ).fetchone() == (broken,)
        counts = conn.execute(
            "SELECT kind, count(*) FROM toolguard_items JOIN toolguard_threads USING (thread_key)"
            " WHERE thread_id = ? GROUP BY kind ORDER BY kind",
            (paused.thread_id,),
        ).fetchall()
    assert counts == [(0, 4), (1, 1), (2, 3)]
    async with SQLiteStore(path) as store:  # read back by a new store, from the rows
        assert await store.load(paused.thread_id) == state


@pytest.mark.parametrize("schema", [1, 2])
def test_two_processes_opening_an_old_database_at_once_migrate_it_once(
    tmp_path: Path, schema: int
) -> None:
    """Stores opening together queue on the write lock; the second sees schema 3 and goes on."""
    path = tmp_path / "old.db"
    state = ThreadState(thread_id="t", version=3)
    if schema == 1:
        write_schema_1(path, {"t": state.model_dump_json()})
    else:
        write_schema_2(path, state.model_copy(update={"thread_id": "s"}), state)
    barrier = threading.Barrier(4)
    results: list[Any] = []

    def open_and_load() -> None:
        async def main() -> Any:
            async with SQLiteStore(path) as store:
                barrier.wait()
                state = await store.load("t")
                return None if state is None else state.version

        try:
            results.append(anyio.run(main))
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=open_and_load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [3, 3, 3, 3]
    rows = [("t", 3, 1)] if schema == 1 else [("s", 3, 2), ("t", 3, 1)]
    assert tables_and_version(path) == (["toolguard_items", "toolguard_threads"], 3, rows)


SCHEMA_2 = (
    (
        "CREATE TABLE toolguard_threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
        " state TEXT NOT NULL, updated_at TEXT NOT NULL, layout INTEGER NOT NULL DEFAULT 1)"
    ),
    *(
        f"CREATE TABLE {table} (thread_id TEXT NOT NULL, seq INTEGER NOT NULL,"
        " body TEXT NOT NULL, PRIMARY KEY (thread_id, seq)) WITHOUT ROWID"
        for table in ("toolguard_messages", "toolguard_actions", "toolguard_audit")
    ),
)
"""The tables of schema 2 (toolguard 0.2 before the one list table), exactly as it made them."""


def write_schema_2(path: Path, split: ThreadState, whole: ThreadState) -> None:
    """A schema 2 database: ``split`` as head + list rows, ``whole`` as one row, and orphan rows.

    The orphans are list rows of a thread whose row was deleted by hand.
    """
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        for create in SCHEMA_2:
            conn.execute(create)
        conn.execute("PRAGMA user_version = 2")
        insert = "INSERT INTO toolguard_threads VALUES (?, ?, ?, ?, ?)"
        stamp = "2026-01-01T00:00:00+00:00"
        conn.execute(insert, (whole.thread_id, whole.version, whole.model_dump_json(), stamp, 1))
        conn.execute(insert, (split.thread_id, split.version, head_json(split), stamp, 2))
        lists = (split.messages, split.actions, split.audit)
        for table, items in zip(("messages", "actions", "audit"), lists, strict=True):
            for seq, item in enumerate(items):
                conn.execute(
                    f"INSERT INTO toolguard_{table} VALUES (?, ?, ?)",  # noqa: S608 - fixed names
                    (split.thread_id, seq, item_json(item)),
                )
            conn.execute(
                f"INSERT INTO toolguard_{table} VALUES ('gone', 0, '{{}}')"  # noqa: S608
            )
        conn.execute("COMMIT")


async def test_a_schema_2_database_is_migrated_on_open(tmp_path: Path) -> None:
    """Schema 2 -> 3: the lists move into one table, keys keep the threads' order, orphans go."""
    path = tmp_path / "v2.db"
    runs: list[str] = []
    memory = MemoryStore()
    chat = make_mailing_chat(memory, runs)
    chat.runner.signing_key = APP_KEY
    paused = await chat.send_message("Mail Alice")
    finished = await cycle(chat, None)
    split = await memory.load(paused.thread_id)
    whole = await memory.load(finished)
    assert split is not None
    assert whole is not None
    write_schema_2(path, split, whole)

    async with SQLiteStore(path) as store:
        assert await store.thread_ids() == [finished, paused.thread_id]  # creation order kept
        assert await store.load(paused.thread_id) == split
        assert await store.load(finished) == whole
        assert tables_and_version(path) == (
            ["toolguard_items", "toolguard_threads"],
            3,
            sorted([(finished, whole.version, 1), (paused.thread_id, split.version, 2)]),
        )
        with contextlib.closing(sqlite3.connect(path)) as conn:
            keys = conn.execute(
                "SELECT thread_key, thread_id FROM toolguard_threads ORDER BY 1"
            ).fetchall()
            kinds = conn.execute(
                "SELECT thread_key, kind, count(*) FROM toolguard_items GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()
        assert keys == [(1, finished), (2, paused.thread_id)]
        assert kinds == [(2, 0, 2), (2, 1, 1), (2, 2, 1)]  # the orphans ('gone') were dropped
        # Both threads go on: the split one is approved, the whole one gets a new turn.
        sqlite_chat = make_mailing_chat(store, runs)
        sqlite_chat.runner.signing_key = APP_KEY
        done = await sqlite_chat.submit_review(
            APPROVE, paused.thread_id, review_id=paused.review_id
        )
        assert done.reply == "Done: sent to alice@example.com"
        await cycle(sqlite_chat, finished)
        approved = await store.load(paused.thread_id)
        again = await store.load(finished)
    assert approved is not None
    assert again is not None
    assert roles(approved) == ["user", "assistant", "tool", "assistant"]
    assert roles(again) == ["user", "assistant", "tool", "assistant"] * 2
    assert runs == ["alice@example.com"] * 3
    async with SQLiteStore(path) as store:  # a new store reads the same rows back
        assert await store.load(paused.thread_id) == approved
        assert await store.load(finished) == again
        assert tables_and_version(path)[1] == 3


async def test_a_migration_that_fails_half_way_leaves_schema_2_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside the migration rolls it all back; the next open migrates it whole."""
    path = tmp_path / "v2.db"
    paused, split = await paused_in_memory([])
    write_schema_2(path, split, ThreadState(thread_id="whole", version=2))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    real = _sqlite_schema.has_table

    def crash(conn: sqlite3.Connection, name: str) -> bool:
        if name == "toolguard_audit":  # the threads table is rebuilt, two lists moved
            raise OSError("power cut")
        return real(conn, name)

    monkeypatch.setattr(_sqlite_schema, "has_table", crash)
    async with SQLiteStore(path) as store:
        with pytest.raises(OSError, match="power cut"):
            await store.load(paused.thread_id)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        after = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()
    assert (after, version) == (before, (2,))
    monkeypatch.setattr(_sqlite_schema, "has_table", real)
    async with SQLiteStore(path) as store:
        assert await store.load(paused.thread_id) == split
        assert await store.thread_ids() == ["whole", paused.thread_id]
    assert tables_and_version(path)[:2] == (["toolguard_items", "toolguard_threads"], 3)


async def test_a_failed_save_leaves_the_thread_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the messages were written and before the rest: one transaction, no mix."""
    path = tmp_path / "t.db"
    runs: list[str] = []
    async with SQLiteStore(path) as store:
        chat = make_mailing_chat(store, runs)
        thread_id = await cycle(chat, None)
        before = await store.load(thread_id)
        real = _sqlite._write_lists

        def crash(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> None:
            real(conn, *args, **kwargs)  # the messages, actions and events are written...
            raise OSError("power cut")  # ...and the transaction never commits

        monkeypatch.setattr(_sqlite, "_write_lists", crash)
        with pytest.raises(OSError, match="power cut"):
            await chat.send_message("Mail Alice", thread_id)
        monkeypatch.setattr(_sqlite, "_write_lists", real)
        assert await store.load(thread_id) == before
        await cycle(chat, thread_id)  # the chat goes on from the stored state
        state = await store.load(thread_id)
    assert state is not None
    assert roles(state) == ["user", "assistant", "tool", "assistant"] * 2
    assert (state.version, runs) == (8, ["alice@example.com"] * 2)


async def test_a_corrupt_message_row_gives_corrupt_thread_error(tmp_path: Path) -> None:
    """A damaged row of a split thread raises CorruptThreadError; the rows are left as they are."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        thread_id = await cycle(make_mailing_chat(store, []), None)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute(
                "UPDATE toolguard_items SET body = '{\"role\": ' WHERE kind = 0 AND seq = 1"
            )
            conn.commit()
        with pytest.raises(CorruptThreadError) as info:
            await store.load(thread_id)
    assert info.value.reason == "Invalid JSON: expected value at line 1 column 62"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute(
            "SELECT body FROM toolguard_items WHERE kind = 0 AND seq = 1"
        ).fetchone() == ('{"role": ',)


async def test_sqlite_runs_short_statements_on_the_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once open, loads and saves make no worker-thread hop while nobody else holds the lock."""
    hops: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__name__", "?"))
        return await real(func, *args, **kwargs)

    async with SQLiteStore(tmp_path / "t.db") as store:
        await store.thread_ids()  # opens the database (in a worker thread)
        monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
        await cycle(make_mailing_chat(store, []), None)
        assert hops == []
        monkeypatch.setattr(anyio.to_thread, "run_sync", real)


async def test_sqlite_waits_in_a_worker_thread_while_another_writer_holds_the_lock(
    tmp_path: Path,
) -> None:
    """Locked by another connection: the save waits (the loop keeps running) and then succeeds."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path, timeout=10) as store:
        created = await store.save(ThreadState(thread_id="t"), expected_version=None)
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # the write lock, held by "another process"
        ticks = 0
        released_after = 0

        def release() -> None:
            time.sleep(0.3)
            other.execute("COMMIT")

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.sleep(0.01)

        threading.Thread(target=release).start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            saved = await store.save(created, expected_version=1)
            released_after = ticks
            tg.cancel_scope.cancel()
        other.close()
        assert (saved.version, (await store.load("t")) == saved) == (2, True)
    assert released_after >= 5  # the loop ran while the save waited for the lock (~30 ticks)


def test_a_store_gets_changes_when_it_has_save_changes() -> None:
    """The check is the attribute: the shipped SQL stores and their subclasses have it."""

    class CheckedSaves(MemoryStore):
        async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
            return await super().save(state, expected_version=expected_version)

    class CheckedLoads(SQLiteStore):
        async def load(self, thread_id: str) -> ThreadState | None:
            return await super().load(thread_id)

    class WholeSQLite(SQLiteStore):
        save_changes = None  # type: ignore[assignment]  # given whole states

    stores = [
        MemoryStore(),
        CheckedSaves(),
        CheckedLoads(":memory:"),
        WholeSQLite(":memory:"),
        RecordingStore(),
        WholeStateStore(),
        SQLiteStore(":memory:"),
    ]
    assert [saves_changes(s) for s in stores] == [False, False, True, False, True, False, True]


async def test_a_store_without_save_changes_is_saved_through_its_own_save() -> None:
    """save_changes = None on a SQLiteStore subclass: every save of a cycle goes through save."""
    seen: list[int | None] = []

    class WholeSQLite(SQLiteStore):
        save_changes = None  # type: ignore[assignment]

        async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
            seen.append(expected_version)
            return await super().save(state, expected_version=expected_version)

    store = WholeSQLite(":memory:")
    chat = make_mailing_chat(store, [])
    thread_id = await cycle(chat, None)
    assert seen == [None, 1, 2, 3]
    state = await store.load(thread_id)
    assert state is not None
    assert (state.version, roles(state)) == (4, ["user", "assistant", "tool", "assistant"])
    await store.aclose()


@pytest.mark.skipif(
    not os.environ.get("TOOLGUARD_POSTGRES_DSN"), reason="set TOOLGUARD_POSTGRES_DSN"
)
async def test_a_0_1_0_postgres_table_is_migrated_on_first_use() -> None:
    """A table as 0.1.0 made it (comment 'schema version 1', whole rows) is migrated and used."""
    import psycopg
    from psycopg import sql

    from toolguard.postgres import PostgresStore

    dsn = os.environ["TOOLGUARD_POSTGRES_DSN"]
    table = f"tg_migrate_{uuid.uuid4().hex[:12]}"
    runs: list[str] = []
    paused, old = await paused_in_memory(runs)
    old = old.model_copy(update={"version": 3})
    ident = sql.Identifier(table)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        # The 0.1.0 table and comment (git show 9ae5113:toolguard/_postgres.py).
        await conn.execute(
            sql.SQL(
                "CREATE TABLE {} (thread_id TEXT PRIMARY KEY, version BIGINT NOT NULL,"
                " state JSON NOT NULL, updated_at TIMESTAMPTZ NOT NULL,"
                " seq BIGINT GENERATED ALWAYS AS IDENTITY)"
            ).format(ident)
        )
        await conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS 'toolguard schema version 1'").format(ident)
        )
        await conn.execute(
            sql.SQL(
                "INSERT INTO {} (thread_id, version, state, updated_at) VALUES (%s, 3, %s, %s)"
            ).format(ident),
            (paused.thread_id, old.model_dump_json(), old.updated_at),
        )
    try:
        async with PostgresStore(dsn, table=table) as store:
            assert await store.load(paused.thread_id) == old
            chat = make_mailing_chat(store, runs)
            chat.runner.signing_key = APP_KEY
            done = await chat.submit_review(APPROVE, paused.thread_id, review_id=paused.review_id)
            assert (done.reply, runs) == ("Done: sent to alice@example.com", ["alice@example.com"])
            state = await store.load(paused.thread_id)
        assert state is not None
        assert (roles(state), state.version) == (["user", "assistant", "tool", "assistant"], 6)
        async with PostgresStore(dsn, table=table) as store:
            assert await store.load(paused.thread_id) == state
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            cursor = await conn.execute(
                "SELECT obj_description(%s::regclass, 'pg_class')", (table,)
            )
            assert await cursor.fetchall() == [("toolguard schema version 2",)]
            counts = []
            for suffix in ("_messages", "_actions", "_audit"):
                cursor = await conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table + suffix))
                )
                counts.append((await cursor.fetchone() or (None,))[0])
            assert counts == [4, 1, 3]
    finally:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            for name in (table, *(table + s for s in ("_messages", "_actions", "_audit"))):
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


async def test_the_stored_message_count_is_not_part_of_equality() -> None:
    """A state the chat saved (it remembers its stored message count) equals the one read back."""
    store = SQLiteStore(":memory:")
    chat = make_mailing_chat(store, [])
    thread_id = await cycle(chat, None)
    saved = chat._threads.states[thread_id]
    assert saved == await store.load(thread_id)
    assert saved != (await store.load(thread_id) or saved).model_copy(update={"status": "running"})


async def test_spending_a_standing_grant_writes_only_what_changed() -> None:
    """The uses and the ``granted`` event of a grant are an incremental save, not a rewrite.

    Every save of the turn is in ``written`` (versions 4, 5, 6 -> 7): none went the whole-state way.
    """
    store = RecordingStore()
    runs: list[str] = []
    chat = make_mailing_chat(store, runs)
    paused = await chat.send_message("Mail Alice")
    grant = {"type": "approve", "grant": {"scope": "thread", "match": "tool", "uses": 2}}
    await chat.submit_review([grant], paused.thread_id, review_id=paused.review_id)
    store.written.clear()
    done = await chat.send_message("Mail Alice again", paused.thread_id)
    assert (done.reply, runs) == ("Done: sent to alice@example.com", ["alice@example.com"] * 2)
    assert (await chat.get_thread(paused.thread_id)).version == 7
    assert store.written == [
        (4, 4, [], [], ["granted"]),  # the use, before the call runs
        (5, 4, ["user", "assistant", "tool"], [], []),
        (6, 7, ["assistant"], [], []),
    ]


# ----------------------------------------------------------------------------- states handed over


def handed(state: ThreadState, expected: int | None) -> ThreadState:
    """``state`` as ReviewedChat hands it to a save: its version already the next one."""
    return state.model_copy(update={"version": (expected or 0) + 1})


async def test_a_memory_store_keeps_a_state_handed_over_and_reads_back_copies() -> None:
    """The chat's saved state is kept as it is (never serialized on save); reads are copies."""
    store = MemoryStore()
    chat = make_mailing_chat(store, [])
    thread_id = await cycle(chat, None)
    version, kept = store._threads[thread_id]
    assert isinstance(kept, ThreadState)
    assert (version, kept.version) == (4, 4)
    loaded = await store.load(thread_id)
    assert loaded == kept
    assert loaded is not kept
    assert loaded is not None
    assert loaded.messages is not kept.messages


async def test_a_refused_save_of_a_state_handed_over_changes_nothing(tmp_path: Path) -> None:
    """A stale save (stored version 4, expected 3) raises and leaves every store as it was."""
    memory = MemoryStore()
    chat = make_mailing_chat(memory, [])
    thread_id = await cycle(chat, None)
    before = dict(memory._threads)
    stored = await memory.load(thread_id)
    assert stored is not None
    stale = handed(stored.model_copy(update={"status": "running"}), 3)
    expected_error = (
        f"Thread {thread_id!r} was changed by someone else (expected version 3, found 4)"
    )
    with pytest.raises(ConcurrentUpdateError) as caught:
        await memory.save(stale, expected_version=3)
    assert str(caught.value) == expected_error
    assert memory._threads == before

    async with SQLiteStore(tmp_path / "t.db") as sqlite:
        await sqlite.save(stored.model_copy(update={"version": 0}), expected_version=None)
        for version in (1, 2, 3):
            await sqlite.save(stored, expected_version=version)
        kept = await sqlite.load(thread_id)
        assert kept is not None
        assert kept.version == 4
        with pytest.raises(ConcurrentUpdateError) as caught:
            await sqlite.save_changes(stale, Changes(4, [], [], [], 4), expected_version=3)
        assert str(caught.value) == expected_error
        assert await sqlite.load(thread_id) == kept


async def test_a_save_changes_returns_a_state_handed_over_as_it_is(tmp_path: Path) -> None:
    """Handed over (version already next): the same object back; otherwise a copy."""
    async with SQLiteStore(tmp_path / "t.db") as store:
        state = ThreadState(thread_id="t", messages=[{"role": "user", "content": "hi"}])
        given = handed(state, None)
        saved = await store.save_changes(given, Changes.whole(given), expected_version=None)
        assert saved is given
        again = await store.save_changes(saved, Changes(1, stored_messages=1), expected_version=1)
        assert again is not saved
        assert (again.version, saved.version) == (2, 1)
        assert await store.load("t") == again


async def test_what_the_public_save_paths_were_given_and_returned_can_be_changed_freely() -> None:
    """A MemoryStore's save writes JSON at once: later changes of either state change nothing."""
    store = MemoryStore()
    state = ThreadState(thread_id="t1", messages=[{"role": "user", "content": "hi"}])
    saved = await store.save(state, expected_version=None)
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


@pytest.mark.parametrize("handed_over", [False, True])
async def test_a_lone_surrogate_pydantic_cannot_write_is_stored_escaped(handed_over: bool) -> None:
    """A value past the cleaning that pydantic refuses to write never fails a MemoryStore."""
    store = MemoryStore()
    odd = ThreadState(thread_id="odd", messages=[{"role": "user", "content": "bad \ud800 text"}])
    saved = await store.save(handed(odd, None) if handed_over else odd, expected_version=None)
    assert saved.version == 1
    loaded = await store.load("odd")
    assert loaded is not None
    assert loaded.messages == [{"role": "user", "content": "bad \ud800 text"}]
    assert loaded == saved
