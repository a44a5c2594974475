"""The thread stores' one contract (compare-and-set): MemoryStore, SQLiteStore, PostgresStore.

Each contract test runs against every store; the tests of several stores (or processes) on one
database run against SQLite and PostgreSQL. PostgreSQL needs ``TOOLGUARD_POSTGRES_DSN``
(``scripts/start-postgres`` starts a local server and prints one): without it those cases are
skipped, except in CI, which runs them. What only SQLite does is tested at the end of this
file; what only PostgreSQL does, in tests/stores/test_postgres.py.
"""

from __future__ import annotations

import contextlib
import select
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import (
    T0,
    conflict_text,
    expected,
    fresh_postgres_table,
    full_state,
    postgres_dsn,
    user_message,
)
from toolguard import (
    ConcurrentUpdateError,
    MemoryStore,
    ModelResponse,
    NoPendingReviewError,
    PendingTurn,
    ReviewedChat,
    SchemaVersionError,
    ScriptedModel,
    SQLiteStore,
    Store,
    ThreadState,
    ToolCall,
)
from toolguard.postgres import PostgresStore

AnyStore = MemoryStore | SQLiteStore | PostgresStore
SharedStore = SQLiteStore | PostgresStore

TIMEOUT = 60
ALICE = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
NO_PENDING = "There is no action awaiting approval in this conversation"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A fresh store of each kind: in memory, a new SQLite file, a new PostgreSQL table."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "t.db") as sqlite_store:
            yield sqlite_store
    else:
        dsn = postgres_dsn()
        async with fresh_postgres_table() as table, PostgresStore(dsn, table=table) as pg_store:
            yield pg_store


@dataclass
class SharedDatabase:
    """One database that several stores open, as several processes would."""

    open: Callable[[], SharedStore]
    """A new store on the database (not yet connected)."""
    racer_args: list[str]
    """How the racer process (``_RACER``) opens a store on the database."""


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SharedDatabase]:
    """A fresh SQLite file or PostgreSQL table that any number of stores can open."""
    if request.param == "sqlite":
        path = tmp_path / "t.db"
        yield SharedDatabase(lambda: SQLiteStore(path), ["sqlite", str(path)])
    else:
        dsn = postgres_dsn()
        async with fresh_postgres_table() as table:
            yield SharedDatabase(lambda: PostgresStore(dsn, table=table), ["postgres", dsn, table])


# --- the contract, for every store ----------------------------------------------------------------


async def test_store_satisfies_the_protocol(store: AnyStore) -> None:
    """Every store is an instance of the runtime-checkable Store protocol."""
    assert isinstance(store, Store)


async def test_load_unknown_thread_is_none(store: AnyStore) -> None:
    """Loading a thread that was never saved gives None; there are no thread ids."""
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
    assert loaded.model_dump_json() == stored.model_dump_json()


async def test_state_text_is_kept_exactly(store: AnyStore) -> None:
    """Key order of tool args, float spelling and NUL characters survive (PostgreSQL: JSON,
    not JSONB)."""
    call = ToolCall(id="call_1", name="send_email", args=ALICE)
    state = ThreadState(
        thread_id="t",
        messages=[user_message("nul \x00 here"), {"role": "tool", "content": "x", "n": 1e20}],
        pending=PendingTurn(review_id="r1", calls=[call], actions=[]),
    )
    stored = await store.save(state, expected_version=None)
    loaded = await store.load("t")
    assert loaded is not None
    assert loaded.model_dump_json() == stored.model_dump_json()
    assert loaded.pending is not None
    assert list(loaded.pending.calls[0].args) == ["to", "subject", "body"]
    assert loaded.messages == [
        {"role": "user", "content": "nul \x00 here"},
        {"role": "tool", "content": "x", "n": 1e20},
    ]
    assert type(loaded.messages[1]["n"]) is float


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
    """thread_ids lists every thread once, oldest first, whatever was updated (or refused) since."""
    for thread_id in ["b", "a", "c"]:
        await store.save(ThreadState(thread_id=thread_id), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    with pytest.raises(ConcurrentUpdateError):
        await store.save(ThreadState(thread_id="a"), expected_version=None)
    await store.save(ThreadState(thread_id="d"), expected_version=None)
    assert await store.thread_ids() == ["b", "a", "c", "d"]


async def test_threads_are_independent(store: AnyStore) -> None:
    """Saving one thread does not change another thread's version."""
    a = await store.save(ThreadState(thread_id="a"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    assert await store.load("a") == a
    loaded_b = await store.load("b")
    assert loaded_b is not None
    assert loaded_b.version == 2


async def race(
    stores: list[AnyStore], thread_id: str, expected_version: int | None, n: int
) -> list[str]:
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

    with anyio.fail_after(TIMEOUT):
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


# --- the chat use case over every store -----------------------------------------------------------


def slow_send_email(log: list[dict[str, Any]]) -> Callable[..., Any]:
    """An async send_email that sleeps a little before it logs, to widen race windows."""

    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        await anyio.sleep(0.05)
        log.append({"to": to, "subject": subject, "body": body})
        return f"Email sent to {to}"

    return send_email


def propose_alice() -> ModelResponse:
    """A model turn proposing send_email to Alice."""
    return ModelResponse(tool_calls=[ToolCall(id="call_1", name="send_email", args=ALICE)])


async def test_double_submit_runs_the_tool_once(store: AnyStore) -> None:
    """Submitting the same approval twice: the second raises NoPendingReviewError, one run."""
    log: list[dict[str, Any]] = []
    chat = ReviewedChat(
        ScriptedModel([propose_alice(), "Sent."]), [slow_send_email(log)], store=store
    )
    paused = await chat.send_message("Tell Alice the meeting is at 10.")
    assert paused.pending_review is not None
    assert paused.pending_review.model_dump()["action_requests"][0]["args"] == ALICE
    assert list(paused.pending_review.action_requests[0].args) == ["to", "subject", "body"]

    first = await chat.submit_review([{"type": "approve"}], paused.thread_id)
    after_first = await chat.get_thread(paused.thread_id)
    with pytest.raises(NoPendingReviewError) as info:
        await chat.submit_review([{"type": "approve"}], paused.thread_id)

    assert first.reply == "Sent."
    assert str(info.value) == NO_PENDING
    assert log == [ALICE]
    assert await chat.get_thread(paused.thread_id) == after_first
    assert [a.status for a in after_first.actions] == ["executed"]


# --- several stores, and several processes, on one database (SQLite and PostgreSQL) --------------


async def test_data_survives_reopening(database: SharedDatabase) -> None:
    """A state saved, closed and read by a new store on the same database is unchanged."""
    async with database.open() as first:
        stored = await first.save(full_state(), expected_version=None)
    async with database.open() as second:
        assert await second.load("full") == stored
        again = await second.save(stored, expected_version=1)
        assert again.version == 2
    async with database.open() as third:
        assert await third.load("full") == again
        assert await third.thread_ids() == ["full"]


async def test_two_stores_on_one_database_act_like_two_processes(database: SharedDatabase) -> None:
    """Two stores on one database see each other's saves and conflict on stale versions."""
    async with database.open() as a, database.open() as b:
        created = await a.save(ThreadState(thread_id="t"), expected_version=None)
        assert await b.load("t") == created
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


async def test_concurrent_saves_and_creates_across_four_stores(database: SharedDatabase) -> None:
    """Twenty tasks over four stores on one database: one create wins, then one update wins."""
    async with contextlib.AsyncExitStack() as stack:
        stores: list[AnyStore] = [
            await stack.enter_async_context(database.open()) for _ in range(4)
        ]
        created = await race(stores, "t", None, 20)
        create_winners = [o for o in created if o.startswith("WIN")]
        assert sorted(created) == ["LOST " + conflict_text("t", None, 1)] * 19 + create_winners

        updated = await race(stores, "t", 1, 20)
        winners = [o for o in updated if o.startswith("WIN")]
        assert sorted(updated) == ["LOST " + conflict_text("t", 1, 2)] * 19 + winners
        loaded = await stores[3].load("t")
        assert loaded is not None
        assert (loaded.version, loaded.messages) == (2, [user_message(f"task {winners[0][4:]}")])


_RACER = textwrap.dedent(
    """
    import sys

    import anyio

    from toolguard import ConcurrentUpdateError, SQLiteStore


    def open_store(args):
        if args[0] == "sqlite":
            return SQLiteStore(args[1])
        from toolguard.postgres import PostgresStore

        return PostgresStore(args[1], table=args[2])


    async def main() -> None:
        name = sys.argv[1]
        async with open_store(sys.argv[2:]) as store:
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


def read_line(proc: subprocess.Popen[str], deadline: float) -> str:
    """One line of ``proc``'s stdout, waiting at most until ``deadline`` (time.monotonic)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    return proc.stdout.readline() if ready else "(no line in time)\n"


async def test_cross_process_race_has_one_winner(database: SharedDatabase) -> None:
    """Four processes, each with its own store, all read version 1 and then save: one wins."""
    async with database.open() as store:
        await store.save(ThreadState(thread_id="race"), expected_version=None)

    def run_racers() -> list[str]:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, f"p{i}", *database.racer_args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        try:
            deadline = time.monotonic() + TIMEOUT
            ready = [read_line(p, deadline) for p in procs]
            if ready != ["READY 1\n"] * 4:
                for p in procs:
                    p.kill()
                pytest.fail(f"racers not ready: {ready} {[p.communicate() for p in procs]}")
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            results = [p.communicate(timeout=TIMEOUT) for p in procs]
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
    assert len(winners) == 1
    assert sorted(lines) == ["LOST " + conflict_text("race", 1, 2)] * 3 + winners
    async with database.open() as store:
        loaded = await store.load("race")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [user_message(winners[0][4:])])


async def test_racing_submissions_through_two_stores_run_the_tool_once(
    database: SharedDatabase,
) -> None:
    """Two chats with two stores on one database race submit_review: one wins, one run."""
    log: list[dict[str, Any]] = []
    async with database.open() as store_a, database.open() as store_b:
        chat_a = ReviewedChat(
            ScriptedModel([propose_alice(), "Sent by A."]), [slow_send_email(log)], store=store_a
        )
        chat_b = ReviewedChat(ScriptedModel(["Sent by B."]), [slow_send_email(log)], store=store_b)
        paused = await chat_a.send_message("Tell Alice the meeting is at 10.")
        assert paused.pending_review is not None
        outcomes: list[str] = []

        async def submit(chat: ReviewedChat) -> None:
            try:
                turn = await chat.submit_review([{"type": "approve"}], paused.thread_id)
            except NoPendingReviewError as exc:
                outcomes.append(f"NoPendingReviewError: {exc}")
            else:
                outcomes.append(f"OK: {turn.reply}")

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(submit, [chat_a, chat_b][i % 2])

        outcomes.sort()
        assert outcomes[:5] == [f"NoPendingReviewError: {NO_PENDING}"] * 5
        assert outcomes[5] in ("OK: Sent by A.", "OK: Sent by B.")
        assert log == [ALICE]
        state_a = await store_a.load(paused.thread_id)
        assert state_a == await store_b.load(paused.thread_id)
        assert state_a is not None
        assert (state_a.status, [a.status for a in state_a.actions]) == ("idle", ["executed"])


# --- SQLite only ----------------------------------------------------------------------------------


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
