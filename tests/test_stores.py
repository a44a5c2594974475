"""Tests for the thread stores: MemoryStore and SQLiteStore share one contract (compare-and-set)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolguard import (
    Action,
    ApproveDecision,
    EditDecision,
    EditedAction,
    PendingTurn,
    RejectDecision,
    ToolCall,
    ToolResult,
)
from toolguard._stores.memory import ConcurrentUpdateError, MemoryStore, Store, ThreadState
from toolguard._stores.sqlite import SchemaVersionError, SQLiteStore

AnyStore = MemoryStore | SQLiteStore

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """Each contract test runs against a MemoryStore and a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "t.db") as sqlite_store:
            yield sqlite_store


def user_message(text: str) -> dict[str, Any]:
    """An OpenAI-format user message."""
    return {"role": "user", "content": text}


def conflict_text(thread_id: str, expected: int | None, found: int | None) -> str:
    """The exact conflict text of both stores."""
    return (
        f"Thread {thread_id!r} was changed by someone else"
        f" (expected version {expected}, found {found})"
    )


def full_state(thread_id: str = "full") -> ThreadState:
    """A state with a paused turn, decisions and actions in every shape."""
    call_send = ToolCall(id="call_1", name="send_email", args={"to": "a@example.com", "n": [1, 2]})
    call_delete = ToolCall(id="call_2", name="delete_file", args={"path": "notes/x.txt"})
    call_bad = ToolCall(id="call_3", name="book_room", arguments_error="not JSON: {")
    call_read = ToolCall(id="call_4", name="read_file", args={})
    read_result = ToolResult(
        call_id="call_4", name="read_file", status="success", content="hello", value={"k": [1.5]}
    )
    bad_result = ToolResult(
        call_id="call_3", name="book_room", status="error", content="bad arguments"
    )
    send_action = Action(
        id="a1",
        call_id="call_1",
        name="send_email",
        args={"to": "a@example.com", "n": [1, 2]},
        description="Tool `send_email` menunggu persetujuan",
        status="approved",
        decision=ApproveDecision(),
        requested_at=T0,
        decided_at=T0,
    )
    delete_action = Action(
        id="a2",
        call_id="call_2",
        name="delete_file",
        args={"path": "notes/x.txt"},
        description="Tool `delete_file` menunggu persetujuan",
        status="rejected",
        decision=RejectDecision(message="no"),
        result=ToolResult(call_id="call_2", name="delete_file", status="error", content="no"),
        requested_at=T0,
        decided_at=T0,
        finished_at=T0,
    )
    old_action = Action(
        id="a0",
        call_id="call_0",
        name="move_file",
        args={"src": "a", "dst": "b"},
        description="Tool `move_file` menunggu persetujuan",
        status="executed",
        decision=EditDecision(
            edited_action=EditedAction(name="move_file", args={"src": "a", "dst": "c"})
        ),
        result=ToolResult(
            call_id="call_0", name="move_file", status="success", content="moved", value=None
        ),
        requested_at=T0,
        decided_at=T0,
        finished_at=T0,
    )
    return ThreadState(
        thread_id=thread_id,
        version=7,
        status="running",
        messages=[
            user_message("Mail Alice, delete x"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to": "a@example.com"}'},
                    }
                ],
            },
        ],
        pending=PendingTurn(
            review_id="r1",
            calls=[call_send, call_delete, call_bad, call_read],
            results=[bad_result, read_result],
            actions=[send_action, delete_action],
            replaced_calls=[call_delete],
        ),
        decisions=[
            ApproveDecision(),
            RejectDecision(message="no"),
            EditDecision(edited_action=EditedAction(name="x", args={"é": "ü", "n": None})),
            RejectDecision(),
        ],
        actions=[old_action, send_action, delete_action],
        created_at=T0,
        updated_at=T0,
    )


def expected(state: ThreadState, stored: ThreadState, version: int) -> ThreadState:
    """``state`` with the version and updated_at a save gives it."""
    return state.model_copy(update={"version": version, "updated_at": stored.updated_at})


# --- the contract, for both stores ------------------------------------------------------------


async def test_store_satisfies_the_protocol(store: AnyStore) -> None:
    """Both stores are instances of the runtime-checkable Store protocol."""
    assert isinstance(store, Store)


async def test_load_unknown_thread_is_none(store: AnyStore) -> None:
    """Loading a thread that was never saved gives None."""
    assert await store.load("nope") is None
    assert await store.thread_ids() == []


async def test_create_then_update_round_trip(store: AnyStore) -> None:
    """Create gives version 1, each update +1; load returns exactly what save returned."""
    state = ThreadState(thread_id="t", version=42, messages=[user_message("hi")])
    created = await store.save(state, expected_version=None)
    assert created == expected(state, created, 1)
    assert created.updated_at.tzinfo is not None
    assert await store.load("t") == created

    second = created.model_copy(update={"messages": [*created.messages, user_message("again")]})
    updated = await store.save(second, expected_version=1)
    assert updated == expected(second, updated, 2)
    assert await store.load("t") == updated

    third = await store.save(updated, expected_version=2)
    assert third.version == 3
    assert await store.load("t") == third


async def test_full_state_round_trips_exactly(store: AnyStore) -> None:
    """A state with a PendingTurn, decisions of every type and Actions comes back equal."""
    state = full_state()
    stored = await store.save(state, expected_version=None)
    loaded = await store.load("full")
    assert loaded == stored == expected(state, stored, 1)
    assert loaded is not None
    assert loaded.pending is not None
    assert loaded.review_id == "r1"
    assert loaded.pending.pending_review.model_dump() == {
        "action_requests": [],
        "review_configs": [],
    }
    assert [type(d).__name__ for d in loaded.decisions or []] == [
        "ApproveDecision",
        "RejectDecision",
        "EditDecision",
        "RejectDecision",
    ]
    assert loaded.model_dump(mode="json") == stored.model_dump(mode="json")


async def test_create_twice_conflicts(store: AnyStore) -> None:
    """Creating an existing thread raises the exact conflict text and changes nothing."""
    first = await store.save(
        ThreadState(thread_id="t", messages=[user_message("1")]), expected_version=None
    )
    with pytest.raises(ConcurrentUpdateError) as info:
        await store.save(
            ThreadState(thread_id="t", messages=[user_message("2")]), expected_version=None
        )
    assert str(info.value) == conflict_text("t", None, 1)
    assert await store.load("t") == first


async def test_stale_expected_version_conflicts(store: AnyStore) -> None:
    """A save naming an old version raises the exact text and leaves the stored state as it was."""
    await store.save(ThreadState(thread_id="t"), expected_version=None)
    current = await store.save(
        ThreadState(thread_id="t", messages=[user_message("v2")]), expected_version=1
    )
    with pytest.raises(ConcurrentUpdateError) as info:
        await store.save(
            ThreadState(thread_id="t", messages=[user_message("stale")]), expected_version=1
        )
    assert str(info.value) == conflict_text("t", 1, 2)
    with pytest.raises(ConcurrentUpdateError) as ahead:
        await store.save(ThreadState(thread_id="t"), expected_version=5)
    assert str(ahead.value) == conflict_text("t", 5, 2)
    assert await store.load("t") == current


async def test_update_of_missing_thread_conflicts(store: AnyStore) -> None:
    """Expecting a version of an unknown thread reports 'found None' and creates nothing."""
    with pytest.raises(ConcurrentUpdateError) as info:
        await store.save(ThreadState(thread_id="ghost"), expected_version=3)
    assert str(info.value) == conflict_text("ghost", 3, None)
    assert await store.load("ghost") is None
    assert await store.thread_ids() == []


async def test_thread_ids_in_creation_order(store: AnyStore) -> None:
    """thread_ids lists every thread once, oldest first, whatever was updated since."""
    for thread_id in ["b", "a", "c"]:
        await store.save(ThreadState(thread_id=thread_id), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    assert await store.thread_ids() == ["b", "a", "c"]


async def test_threads_are_independent(store: AnyStore) -> None:
    """Saving one thread does not change another thread's version."""
    a = await store.save(ThreadState(thread_id="a"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    assert await store.load("a") == a
    loaded_b = await store.load("b")
    assert loaded_b is not None
    assert loaded_b.version == 2


async def race(stores: list[AnyStore], thread_id: str, expected_version: int, n: int) -> list[str]:
    """Run ``n`` concurrent saves expecting the same version; 'WIN i' or 'LOST <error>' per task."""
    outcomes: list[str] = []

    async def attempt(i: int) -> None:
        state = ThreadState(thread_id=thread_id, messages=[user_message(f"task {i}")])
        try:
            await stores[i % len(stores)].save(state, expected_version=expected_version)
        except ConcurrentUpdateError as exc:
            outcomes.append(f"LOST {exc}")
        else:
            outcomes.append(f"WIN {i}")

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(attempt, i)
    return outcomes


async def test_concurrent_saves_exactly_one_wins(store: AnyStore) -> None:
    """Of 20 tasks saving with the same expected version, one wins and its state is stored."""
    await store.save(ThreadState(thread_id="t"), expected_version=None)
    outcomes = await race([store], "t", 1, 20)
    winners = [o for o in outcomes if o.startswith("WIN")]
    assert len(winners) == 1
    assert sorted(outcomes) == ["LOST " + conflict_text("t", 1, 2)] * 19 + winners
    loaded = await store.load("t")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [user_message(f"task {winners[0][4:]}")])


# --- SQLite only -------------------------------------------------------------------------------


async def test_sqlite_data_survives_reopening(tmp_path: Path) -> None:
    """A state saved, closed and read by a new store on the same file is unchanged."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as first:
        stored = await first.save(full_state(), expected_version=None)
    async with SQLiteStore(str(path)) as second:
        assert await second.load("full") == stored
        again = await second.save(stored, expected_version=1)
        assert again.version == 2
    async with SQLiteStore(path) as third:
        assert await third.load("full") == again
        assert await third.thread_ids() == ["full"]


async def test_sqlite_two_stores_on_one_file_act_like_two_processes(tmp_path: Path) -> None:
    """Two SQLiteStore objects on one file see each other's saves and conflict on stale versions."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        created = await a.save(ThreadState(thread_id="t"), expected_version=None)
        read_by_b = await b.load("t")
        assert read_by_b == created
        with pytest.raises(ConcurrentUpdateError) as create_again:
            await b.save(ThreadState(thread_id="t"), expected_version=None)
        assert str(create_again.value) == conflict_text("t", None, 1)

        by_a = await a.save(
            created.model_copy(update={"status": "awaiting_review"}), expected_version=1
        )
        with pytest.raises(ConcurrentUpdateError) as stale:
            await b.save(created.model_copy(update={"status": "running"}), expected_version=1)
        assert str(stale.value) == conflict_text("t", 1, 2)
        assert await b.load("t") == by_a
        assert await a.load("t") == by_a


async def test_sqlite_concurrent_saves_across_two_stores(tmp_path: Path) -> None:
    """Twenty tasks split over two stores on one file: exactly one save wins."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as a, SQLiteStore(path) as b:
        await a.save(ThreadState(thread_id="t"), expected_version=None)
        outcomes = await race([a, b], "t", 1, 20)
        winners = [o for o in outcomes if o.startswith("WIN")]
        assert sorted(outcomes) == ["LOST " + conflict_text("t", 1, 2)] * 19 + winners
        loaded = await b.load("t")
        assert loaded is not None
        assert (loaded.version, loaded.messages) == (2, [user_message(f"task {winners[0][4:]}")])


_RACER = textwrap.dedent(
    """
    import sys

    import anyio

    from toolguard._stores.sqlite import SQLiteStore
    from toolguard._stores.memory import ConcurrentUpdateError


    async def main() -> None:
        path, name = sys.argv[1], sys.argv[2]
        async with SQLiteStore(path) as store:
            state = await store.load("race")
            print("READY", state.version, flush=True)
            sys.stdin.readline()  # wait until every racer has read version 1
            mine = state.model_copy(update={"messages": [{"role": "user", "content": name}]})
            try:
                await store.save(mine, expected_version=state.version)
            except ConcurrentUpdateError as exc:
                print("LOST", exc, flush=True)
            else:
                print("WIN", name, flush=True)


    anyio.run(main)
    """
)


async def test_sqlite_cross_process_race_has_one_winner(tmp_path: Path) -> None:
    """Four processes that all read version 1 and then save: exactly one wins, three lose."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await store.save(ThreadState(thread_id="race"), expected_version=None)

    def run_racers() -> list[str]:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, str(path), f"p{i}"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        try:
            ready = [p.stdout.readline() if p.stdout else "" for p in procs]
            assert ready == ["READY 1\n"] * 4, [p.communicate(timeout=60) for p in procs]
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            results = [p.communicate(timeout=60) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        codes_and_errors = [(p.returncode, err) for p, (_, err) in zip(procs, results, strict=True)]
        assert codes_and_errors == [(0, "")] * 4
        return [out.strip() for out, _ in results]

    lines = await anyio.to_thread.run_sync(run_racers)
    winners = [line for line in lines if line.startswith("WIN")]
    lost = "LOST " + conflict_text("race", 1, 2)
    assert len(winners) == 1
    assert sorted(lines) == [lost] * 3 + winners

    async with SQLiteStore(path) as store:
        loaded = await store.load("race")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [user_message(winners[0][4:])])


async def test_sqlite_schema_and_pragmas(tmp_path: Path) -> None:
    """First use creates the tables, user_version 3 and WAL; a whole save is one row (layout 1)."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        stored = await store.save(ThreadState(thread_id="t"), expected_version=None)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (3,)
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            columns = conn.execute("PRAGMA table_info(toolguard_threads)").fetchall()
            assert [(c[1], c[2], c[3], c[5]) for c in columns] == [
                ("thread_key", "INTEGER", 0, 1),
                ("thread_id", "TEXT", 1, 0),
                ("version", "INTEGER", 1, 0),
                ("state", "TEXT", 1, 0),
                ("updated_at", "TEXT", 1, 0),
                ("layout", "INTEGER", 1, 0),
            ]
            columns = conn.execute("PRAGMA table_info(toolguard_items)").fetchall()
            assert [(c[1], c[2], c[3], c[5]) for c in columns] == [
                ("thread_key", "INTEGER", 1, 1),
                ("kind", "INTEGER", 1, 2),
                ("seq", "INTEGER", 1, 3),
                ("body", "TEXT", 1, 0),
            ]
            unique = conn.execute("PRAGMA index_list(toolguard_threads)").fetchall()
            assert [(i[2], i[3]) for i in unique] == [(1, "u")]  # thread_id is UNIQUE
            tables = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            ).fetchall()
            assert tables == [("toolguard_items",), ("toolguard_threads",)]
            rows = conn.execute("SELECT * FROM toolguard_threads").fetchall()
    assert rows == [(1, "t", 1, stored.model_dump_json(), stored.updated_at.isoformat(), 1)]


async def test_sqlite_existing_table_is_reused(tmp_path: Path) -> None:
    """A version-1 database made by hand (table already there) is migrated; its row is read."""
    path = tmp_path / "t.db"
    state = ThreadState(thread_id="t", version=4, created_at=T0, updated_at=T0)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(
            "CREATE TABLE toolguard_threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
            " state TEXT NOT NULL, updated_at TEXT NOT NULL)"
        )
        conn.execute(
            "INSERT INTO toolguard_threads VALUES (?, ?, ?, ?)",
            ("t", 4, state.model_dump_json(), T0.isoformat()),
        )
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
    async with SQLiteStore(path) as store:
        assert await store.load("t") == state
        assert (await store.save(state, expected_version=4)).version == 5


async def test_sqlite_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database with a newer user_version raises SchemaVersionError and is left untouched."""
    path = tmp_path / "t.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA user_version = 4")
    async with SQLiteStore(path) as store:
        with pytest.raises(SchemaVersionError) as info:
            await store.load("t")
        with pytest.raises(SchemaVersionError):
            await store.thread_ids()
    assert str(info.value) == (
        f"Database {str(path)!r} has toolguard schema version 4, but this version of"
        " toolguard supports only version 3: upgrade toolguard to use it"
    )
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
        assert conn.execute("PRAGMA user_version").fetchone() == (4,)


async def test_sqlite_closed_store_refuses_use(tmp_path: Path) -> None:
    """After aclose (or close, twice) every call raises RuntimeError naming the store."""
    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.save(ThreadState(thread_id="t"), expected_version=None)
    await store.aclose()
    store.close()
    with pytest.raises(RuntimeError) as info:
        await store.load("t")
    assert str(info.value) == f"SQLiteStore({str(path)!r}) is closed"
    with pytest.raises(RuntimeError):
        await store.save(ThreadState(thread_id="u"), expected_version=None)
    assert store.path == str(path)


async def test_sqlite_in_memory_database() -> None:
    """':memory:' gives a private database that works like a file for one store."""
    async with SQLiteStore(":memory:") as store:
        stored = await store.save(full_state(), expected_version=None)
        assert await store.load("full") == stored
        assert await store.thread_ids() == ["full"]
