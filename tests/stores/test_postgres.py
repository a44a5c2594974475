"""What only PostgresStore does, against a real server: its schema and migrations, table names,
connections (broken, cancelled, asyncio only) and saves in pipeline mode.

The store contract and the tests of several stores or processes on one table run for
PostgreSQL too, in tests/stores/test_contract.py. Needs ``TOOLGUARD_POSTGRES_DSN``
(``scripts/start-postgres`` starts a local server and prints one): without it every test here
is skipped, except in CI, which runs them. Each test works in a table of its own, dropped
afterwards.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime, timezone

import anyio
import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

from tests.helpers import (
    POSTGRES_DSN,
    admin_execute,
    fresh_postgres_table,
    full_state,
    postgres_dsn,
)
from toolguard import ConcurrentUpdateError, ThreadState
from toolguard._stores.postgres import _CHUNK
from toolguard._stores.protocol import Changes
from toolguard.postgres import SCHEMA_VERSION, PostgresStore, SchemaVersionError
from toolguard.records import AuditEvent

DSN = POSTGRES_DSN
TIMEOUT = 60


@pytest.fixture(autouse=True)
def _needs_postgres() -> None:
    """Every test here needs the server (skipped without one, failed in CI)."""
    postgres_dsn()


@pytest.fixture
async def table() -> AsyncIterator[str]:
    """A fresh table name, dropped after the test."""
    async with fresh_postgres_table() as name:
        yield name


@pytest.fixture
async def store(table: str) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on a fresh table."""
    async with PostgresStore(DSN, table=table) as pg_store:
        yield pg_store


# --- several stores on one table -----------------------------------------------------------------


async def test_stores_starting_together_create_the_table_once(table: str) -> None:
    """Eight stores opening a missing table at once all succeed; the table exists once."""
    stores = [PostgresStore(DSN, table=table) for _ in range(8)]
    results: list[list[str]] = []

    async def first_use(pg_store: PostgresStore) -> None:
        results.append(await pg_store.thread_ids())

    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                for pg_store in stores:
                    tg.start_soon(first_use, pg_store)
    finally:
        for pg_store in stores:
            await pg_store.aclose()
    assert results == [[]] * 8
    rows = await admin_execute("SELECT count(*) FROM pg_class WHERE relname = %s", (table,))
    assert rows == [(1,)]


# --- PostgreSQL only ------------------------------------------------------------------------------


async def test_schema_comment_and_rows(store: PostgresStore, table: str) -> None:
    """First use creates the table with its comment; rows hold version, JSON text and time."""
    stored = await store.save(ThreadState(thread_id="t"), expected_version=None)
    columns = await admin_execute(
        "SELECT column_name, data_type, is_nullable, is_identity FROM information_schema.columns"
        " WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    assert columns == [
        ("thread_id", "text", "NO", "NO"),
        ("version", "bigint", "NO", "NO"),
        ("state", "json", "NO", "NO"),
        ("updated_at", "timestamp with time zone", "NO", "NO"),
        ("seq", "bigint", "NO", "YES"),
        ("layout", "smallint", "NO", "NO"),
    ]
    ident = sql.Identifier(table)
    comment = await admin_execute("SELECT obj_description(%s::regclass, 'pg_class')", (table,))
    assert comment == [(f"toolguard schema version {SCHEMA_VERSION}",)]
    rows = await admin_execute(
        sql.SQL("SELECT thread_id, version, state::text, updated_at FROM {}").format(ident)
    )
    assert rows == [("t", 1, stored.model_dump_json(), stored.updated_at)]
    assert store.table == table


async def test_existing_table_is_reused(table: str) -> None:
    """A version-1 table (0.1.0's, with its comment) is migrated to 2; its row reads as it was."""
    state = full_state("t").model_copy(update={"version": 4})
    ident = sql.Identifier(table)
    await admin_execute(
        sql.SQL(
            "CREATE TABLE {} (thread_id TEXT PRIMARY KEY, version BIGINT NOT NULL,"
            " state JSON NOT NULL, updated_at TIMESTAMPTZ NOT NULL,"
            " seq BIGINT GENERATED ALWAYS AS IDENTITY);"
            " COMMENT ON TABLE {} IS 'toolguard schema version 1'"
        ).format(ident, ident)
    )
    await admin_execute(
        sql.SQL(
            "INSERT INTO {} (thread_id, version, state, updated_at) VALUES (%s, 4, %s, %s)"
        ).format(ident),
        ("t", state.model_dump_json(), state.updated_at),
    )
    async with PostgresStore(DSN, table=table) as pg_store:
        assert await pg_store.load("t") == state
        assert (await pg_store.save(state, expected_version=4)).version == 5
        assert await pg_store.thread_ids() == ["t"]
    comment = await admin_execute("SELECT obj_description(%s::regclass, 'pg_class')", (table,))
    assert comment == [("toolguard schema version 2",)]


async def test_newer_schema_is_refused(table: str) -> None:
    """A table marked with a newer schema version raises SchemaVersionError and is left alone."""
    ident = sql.Identifier(table)
    await admin_execute(
        sql.SQL(
            "CREATE TABLE {} (thread_id TEXT PRIMARY KEY, other TEXT);"
            " COMMENT ON TABLE {} IS 'toolguard schema version 3'"
        ).format(ident, ident)
    )
    async with PostgresStore(DSN, table=table) as pg_store:
        with pytest.raises(SchemaVersionError) as info:
            await pg_store.load("t")
        with pytest.raises(SchemaVersionError):
            await pg_store.save(ThreadState(thread_id="t"), expected_version=None)
    assert str(info.value) == (
        f"Table {table!r} has toolguard schema version 3, but this version of"
        " toolguard supports only version 2: upgrade toolguard to use it"
    )
    columns = await admin_execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
        " ORDER BY ordinal_position",
        (table,),
    )
    assert columns == [("thread_id",), ("other",)]


async def test_foreign_table_of_the_same_name_is_refused(table: str) -> None:
    """A table without toolguard's comment (another application's) is refused, not used."""
    ident = sql.Identifier(table)
    await admin_execute(sql.SQL("CREATE TABLE {} (thread_id TEXT PRIMARY KEY)").format(ident))
    async with PostgresStore(DSN, table=table) as pg_store:
        with pytest.raises(SchemaVersionError) as info:
            await pg_store.thread_ids()
    assert str(info.value) == (
        f"Table {table!r} exists but was not created by toolguard (its comment is None,"
        " not 'toolguard schema version 2'): choose another table"
    )


@pytest.mark.parametrize(
    "name",
    ["", "1threads", "threads; DROP TABLE x", "public.threads", 'th"reads', "thréads", "a-b"],
)
def test_table_name_must_be_a_plain_identifier(name: str) -> None:
    """A table name with anything but letters, digits and underscores raises ValueError."""
    text = f"table must be letters, digits and underscores, not starting with a digit: got {name!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(text)}$"):
        PostgresStore(DSN, table=name)


def test_table_name_length_is_limited() -> None:
    """A 64-character table name is refused; 63 characters are accepted."""
    assert PostgresStore(DSN, table="t" * 63).table == "t" * 63
    with pytest.raises(ValueError, match=r"^table must be at most 63 characters: got 64$"):
        PostgresStore(DSN, table="t" * 64)


def test_repr_hides_the_password() -> None:
    """The repr shows the connection parameters without the password, and the table."""
    pg_store = PostgresStore("postgresql://app:s3cret@db.internal:6543/appdb", table="threads")
    assert repr(pg_store) == (
        "PostgresStore('user=app dbname=appdb host=db.internal port=6543', table='threads')"
    )


async def test_closed_store_refuses_use(table: str) -> None:
    """After aclose (twice is fine) every call raises RuntimeError naming the store."""
    pg_store = PostgresStore(DSN, table=table)
    await pg_store.save(ThreadState(thread_id="t"), expected_version=None)
    await pg_store.aclose()
    await pg_store.aclose()
    with pytest.raises(RuntimeError) as info:
        await pg_store.load("t")
    assert str(info.value) == f"{pg_store!r} is closed"
    with pytest.raises(RuntimeError):
        await pg_store.save(ThreadState(thread_id="u"), expected_version=None)
    with pytest.raises(RuntimeError):
        await pg_store.thread_ids()


async def test_broken_connection_is_replaced(store: PostgresStore) -> None:
    """When the server ends the store's connection, that call fails and the next one reconnects."""
    created = await store.save(ThreadState(thread_id="t"), expected_version=None)
    await store.thread_ids()  # the connection's last query names the table (a save ends in COMMIT)
    await admin_execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND query LIKE %s",
        (f"%{store.table}%",),
    )
    with pytest.raises(psycopg.OperationalError):
        await store.load("t")
    assert await store.load("t") == created
    assert (await store.save(created, expected_version=1)).version == 2


async def test_cancelled_save_finishes_its_statement(
    store: PostgresStore, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A save cancelled while it waits for a row lock is written whole; the connection lives on."""
    created = await store.save(ThreadState(thread_id="t"), expected_version=None)
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    )
    async with await psycopg.AsyncConnection.connect(DSN) as locker:
        await locker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE thread_id = 't' FOR UPDATE").format(
                sql.Identifier(table)
            )
        )
        scope = anyio.CancelScope()

        async def save_running() -> None:
            with scope:
                await store.save(
                    created.model_copy(update={"status": "running"}), expected_version=1
                )

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(save_running)
                for _ in range(TIMEOUT * 100):
                    if await admin_execute(waiting) == [(1,)]:
                        break
                    await anyio.sleep(0.01)
                scope.cancel()
                await locker.rollback()

    loaded = await store.load("t")
    assert loaded is not None
    assert (loaded.version, loaded.status) == (2, "running")
    assert (await store.save(loaded, expected_version=2)).version == 3
    assert caplog.records == []


async def test_needs_asyncio(store: PostgresStore) -> None:
    """Driven by anything but asyncio (e.g. trio), a call raises RuntimeError and does nothing."""
    coroutine = store.load("t")
    with pytest.raises(RuntimeError) as info:
        await anyio.to_thread.run_sync(coroutine.send, None)
    coroutine.close()
    assert str(info.value) == (
        "PostgresStore needs asyncio (psycopg's async API); trio is not supported"
    )


def test_import_toolguard_does_not_import_psycopg() -> None:
    """`import toolguard` leaves psycopg unimported; `import toolguard.postgres` imports it."""
    code = (
        "import sys, toolguard; before = 'psycopg' in sys.modules; "
        "import toolguard.postgres; print(before, 'psycopg' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=TIMEOUT
    )
    assert (result.stdout, result.stderr) == ("False True\n", "")


# --- save_changes in pipeline mode: two waits per save, the same guarantees ----------------------
# A save sends BEGIN with its compare-and-set, waits for the row count, then sends the rows with
# COMMIT and waits once more. A conflict or a failing row leaves nothing written and the
# connection idle and in use; long lists go in chunks.


def _message(i: int) -> dict[str, str]:
    return {"role": "user", "content": f"message {i}"}


def _event(i: int) -> AuditEvent:
    at = datetime(2026, 12, 1, tzinfo=timezone.utc)
    return AuditEvent(at=at, kind="requested", thread_id="t", detail=f"event {i}")


async def _create(store: PostgresStore, state: ThreadState) -> ThreadState:
    return await store.save_changes(state, Changes.whole(state), expected_version=None)


def _idle(store: PostgresStore) -> bool:
    conn = store._conn
    return conn is not None and conn.info.transaction_status == TransactionStatus.IDLE


async def test_a_stale_save_conflicts_and_keeps_the_connection(store: PostgresStore) -> None:
    first = await _create(store, ThreadState(thread_id="t", messages=[_message(0)]))
    conn = store._conn
    second = ThreadState(thread_id="t", messages=[_message(0), _message(1)])
    await store.save_changes(
        second, Changes(1, [_message(1)], stored_messages=1), expected_version=1
    )
    stale = ThreadState(thread_id="t", messages=[_message(0), _message(9)])
    with pytest.raises(ConcurrentUpdateError) as caught:
        await store.save_changes(
            stale, Changes(1, [_message(9)], stored_messages=1), expected_version=first.version
        )
    assert str(caught.value) == (
        "Thread 't' was changed by someone else (expected version 1, found 2)"
    )
    assert store._conn is conn
    assert _idle(store)
    loaded = await store.load("t")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [_message(0), _message(1)])


async def test_creating_a_thread_twice_conflicts_and_keeps_the_connection(
    store: PostgresStore,
) -> None:
    await _create(store, ThreadState(thread_id="t", messages=[_message(0)]))
    conn = store._conn
    with pytest.raises(ConcurrentUpdateError) as caught:
        await _create(store, ThreadState(thread_id="t", messages=[_message(5)]))
    assert str(caught.value) == (
        "Thread 't' was changed by someone else (expected version None, found 1)"
    )
    assert store._conn is conn
    assert _idle(store)
    loaded = await store.load("t")
    assert loaded is not None
    assert loaded.messages == [_message(0)]


async def test_a_failing_row_rolls_the_whole_save_back(store: PostgresStore, table: str) -> None:
    """A row that cannot be written fails the save: head and rows stay as they were."""
    await _create(store, ThreadState(thread_id="t", messages=[_message(0)]))
    # A stray row where the next message goes: its INSERT fails inside the pipeline.
    await admin_execute(
        sql.SQL("INSERT INTO {} (thread_id, seq, body) VALUES ('t', 1, '{{}}')").format(
            sql.Identifier(f"{table}_messages")
        )
    )
    new = ThreadState(thread_id="t", status="running", messages=[_message(0), _message(1)])
    with pytest.raises(psycopg.errors.UniqueViolation):
        await store.save_changes(
            new, Changes(1, [_message(1)], stored_messages=1), expected_version=1
        )
    assert _idle(store)
    rows = await admin_execute(
        sql.SQL("SELECT version, state->>'status' FROM {} WHERE thread_id = 't'").format(
            sql.Identifier(table)
        )
    )
    assert rows == [(1, "idle")]
    assert await store.load_version("t") == 1
    # The store goes on: the stray row removed, the same save lands.
    await admin_execute(
        sql.SQL("DELETE FROM {} WHERE thread_id = 't' AND seq = 1").format(
            sql.Identifier(f"{table}_messages")
        )
    )
    saved = await store.save_changes(
        new, Changes(1, [_message(1)], stored_messages=1), expected_version=1
    )
    assert saved.version == 2
    loaded = await store.load("t")
    assert loaded is not None
    assert (loaded.status, loaded.messages) == ("running", [_message(0), _message(1)])


async def test_long_lists_are_written_in_chunks_and_read_back_in_order(
    store: PostgresStore,
) -> None:
    count = 2 * _CHUNK + 7
    messages = [_message(i) for i in range(count)]
    audit = [_event(i) for i in range(_CHUNK + 3)]
    state = ThreadState(thread_id="t", messages=messages, audit=audit)
    created = await _create(store, state)
    loaded = await store.load("t")
    assert loaded == created
    # Later events are numbered after the last one, in order, across saves.
    more = [_event(i) for i in range(_CHUNK + 3, _CHUNK + 6)]
    grown = ThreadState(thread_id="t", messages=messages, audit=[*audit, *more])
    await store.save_changes(
        grown, Changes(count, audit=more, stored_messages=count), expected_version=1
    )
    loaded = await store.load("t")
    assert loaded is not None
    assert [e.detail for e in loaded.audit] == [f"event {i}" for i in range(_CHUNK + 6)]
    assert loaded.messages == messages
