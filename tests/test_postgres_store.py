"""Tests for PostgresStore against a real server: the store contract, cross-process races, schema.

Needs ``TOOLGUARD_POSTGRES_DSN`` (``scripts/start-postgres`` starts a local server and prints
one); without it every test here is skipped. Each test works in a table of its own, dropped
afterwards.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timezone
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

from tests.test_stores import conflict_text, expected, full_state, user_message
from toolguard import (
    AuditEvent,
    ModelResponse,
    NoPendingReviewError,
    PendingTurn,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
)
from toolguard._stores.memory import Changes, ConcurrentUpdateError, Store, ThreadState
from toolguard._stores.postgres import _CHUNK
from toolguard.postgres import SCHEMA_VERSION, PostgresStore, SchemaVersionError

DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")

pytestmark = pytest.mark.skipif(
    not DSN, reason="set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres prints one)"
)

TIMEOUT = 60
ALICE = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
NO_PENDING = "There is no action awaiting approval in this conversation"


# --- helpers ------------------------------------------------------------------------------------


async def admin_execute(query: str | sql.Composed, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on a separate autocommit connection; its rows (if any)."""
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description is not None else []


@pytest.fixture
async def table() -> AsyncIterator[str]:
    """A fresh table name, dropped after the test."""
    name = f"tg_test_{uuid.uuid4().hex[:16]}"
    yield name
    await admin_execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
async def store(table: str) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on a fresh table."""
    async with PostgresStore(DSN, table=table) as pg_store:
        yield pg_store


# --- the contract (as for MemoryStore and SQLiteStore) -------------------------------------------


async def test_store_satisfies_the_protocol(store: PostgresStore) -> None:
    """PostgresStore is an instance of the runtime-checkable Store protocol."""
    assert isinstance(store, Store)


async def test_load_unknown_thread_is_none(store: PostgresStore) -> None:
    """Loading a thread that was never saved gives None; there are no thread ids."""
    assert await store.load("nope") is None
    assert await store.thread_ids() == []


async def test_create_then_update_round_trip(store: PostgresStore) -> None:
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


async def test_full_state_round_trips_exactly(store: PostgresStore) -> None:
    """A state with a PendingTurn, decisions of every type and Actions comes back equal."""
    state = full_state()
    stored = await store.save(state, expected_version=None)
    loaded = await store.load("full")
    assert loaded == stored == expected(state, stored, 1)
    assert loaded is not None
    assert loaded.pending is not None
    assert loaded.review_id == "r1"
    assert [type(d).__name__ for d in loaded.decisions or []] == [
        "ApproveDecision",
        "RejectDecision",
        "EditDecision",
        "RejectDecision",
    ]
    assert loaded.model_dump_json() == stored.model_dump_json()


async def test_state_text_is_kept_exactly(store: PostgresStore) -> None:
    """Key order of tool args, float spelling and NUL characters survive (JSON, not JSONB)."""
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


async def test_create_twice_conflicts(store: PostgresStore) -> None:
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


async def test_stale_expected_version_conflicts(store: PostgresStore) -> None:
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


async def test_update_of_missing_thread_conflicts(store: PostgresStore) -> None:
    """Expecting a version of an unknown thread reports 'found None' and creates nothing."""
    with pytest.raises(ConcurrentUpdateError) as info:
        await store.save(ThreadState(thread_id="ghost"), expected_version=3)
    assert str(info.value) == conflict_text("ghost", 3, None)
    assert await store.load("ghost") is None
    assert await store.thread_ids() == []


async def test_thread_ids_in_creation_order(store: PostgresStore) -> None:
    """thread_ids lists every thread once, oldest first, whatever was updated since."""
    for thread_id in ["b", "a", "c"]:
        await store.save(ThreadState(thread_id=thread_id), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    with pytest.raises(ConcurrentUpdateError):
        await store.save(ThreadState(thread_id="a"), expected_version=None)
    await store.save(ThreadState(thread_id="d"), expected_version=None)
    assert await store.thread_ids() == ["b", "a", "c", "d"]


async def test_threads_are_independent(store: PostgresStore) -> None:
    """Saving one thread does not change another thread's version."""
    a = await store.save(ThreadState(thread_id="a"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=None)
    await store.save(ThreadState(thread_id="b"), expected_version=1)
    assert await store.load("a") == a
    loaded_b = await store.load("b")
    assert loaded_b is not None
    assert loaded_b.version == 2


async def race(
    stores: list[PostgresStore], thread_id: str, expected_version: int | None, n: int
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


async def test_concurrent_saves_exactly_one_wins(store: PostgresStore) -> None:
    """Of 20 tasks saving with the same expected version, one wins and its state is stored."""
    await store.save(ThreadState(thread_id="t"), expected_version=None)
    outcomes = await race([store], "t", 1, 20)
    winners = [o for o in outcomes if o.startswith("WIN")]
    assert len(winners) == 1
    assert sorted(outcomes) == ["LOST " + conflict_text("t", 1, 2)] * 19 + winners
    loaded = await store.load("t")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [user_message(f"task {winners[0][4:]}")])


# --- several stores (connections) on one table ---------------------------------------------------


async def test_two_stores_on_one_table_act_like_two_processes(table: str) -> None:
    """Two stores on one table see each other's saves and conflict on stale versions."""
    async with PostgresStore(DSN, table=table) as a, PostgresStore(DSN, table=table) as b:
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


async def test_concurrent_saves_and_creates_across_four_stores(table: str) -> None:
    """Twenty tasks over four connections: one create wins, then one update wins."""
    stores = [PostgresStore(DSN, table=table) for _ in range(4)]
    try:
        created = await race(stores, "t", None, 20)
        create_winners = [o for o in created if o.startswith("WIN")]
        assert sorted(created) == ["LOST " + conflict_text("t", None, 1)] * 19 + create_winners

        updated = await race(stores, "t", 1, 20)
        winners = [o for o in updated if o.startswith("WIN")]
        assert sorted(updated) == ["LOST " + conflict_text("t", 1, 2)] * 19 + winners
        loaded = await stores[3].load("t")
        assert loaded is not None
        assert (loaded.version, loaded.messages) == (2, [user_message(f"task {winners[0][4:]}")])
    finally:
        for pg_store in stores:
            await pg_store.aclose()


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


_RACER = textwrap.dedent(
    """
    import sys

    import anyio

    from toolguard._stores.memory import ConcurrentUpdateError
    from toolguard.postgres import PostgresStore


    async def main() -> None:
        dsn, table, name = sys.argv[1], sys.argv[2], sys.argv[3]
        async with PostgresStore(dsn, table=table) as store:
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


async def test_cross_process_race_has_one_winner(store: PostgresStore, table: str) -> None:
    """Four processes, each with its own PostgresStore, read version 1 and save: one wins."""
    await store.save(ThreadState(thread_id="race"), expected_version=None)

    def run_racers() -> list[str]:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, DSN, table, f"p{i}"],
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
    loaded = await store.load("race")
    assert loaded is not None
    assert (loaded.version, loaded.messages) == (2, [user_message(winners[0][4:])])


# --- the chat use case over PostgreSQL -----------------------------------------------------------


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


async def test_double_submit_runs_the_tool_once(store: PostgresStore) -> None:
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


async def test_racing_submissions_through_two_stores_run_the_tool_once(table: str) -> None:
    """Two chats with two PostgresStore instances race submit_review: one wins, one run."""
    log: list[dict[str, Any]] = []
    async with (
        PostgresStore(DSN, table=table) as store_a,
        PostgresStore(DSN, table=table) as store_b,
    ):
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
