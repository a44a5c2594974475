"""A persistent store in a PostgreSQL table, safe to share between processes and machines.

:class:`PostgresStore` keeps each thread as one row of a table (by default
``toolguard_threads``) over psycopg 3's async API. Several API processes —
on one machine or many — can share the database: the guard against a
review being applied twice lives in the database, where every process sees
it, not in a per-process lock.

The compare-and-set: a whole-state save of a thread read at version ``N``
is one statement::

    UPDATE toolguard_threads SET version = N + 1, state = ..., updated_at = ...
        WHERE thread_id = ... AND version = N

PostgreSQL locks the row and re-checks the ``WHERE`` against the latest
committed version before it writes, so of several writers that expect
version ``N`` exactly one changes a row; the others see ``rowcount == 0``
and raise :class:`~toolguard.ConcurrentUpdateError`. A new thread is created
with ``INSERT ... ON CONFLICT (thread_id) DO NOTHING``: of several creators
exactly one inserts. Every statement runs in autocommit mode, so no
transaction is left open between calls.

The table::

    thread_id  TEXT PRIMARY KEY
    version    BIGINT NOT NULL
    state      JSON NOT NULL          -- the head, or the whole ThreadState (layout 1)
    updated_at TIMESTAMPTZ NOT NULL
    seq        BIGINT GENERATED ALWAYS AS IDENTITY   -- creation order
    layout     SMALLINT NOT NULL DEFAULT 1           -- 2: head here, lists in rows

plus ``<table>_messages``, ``<table>_actions`` and ``<table>_audit``
(``thread_id TEXT, seq BIGINT, body TEXT``, primary key ``(thread_id,
seq)``): one row per message, action and audit event of a ``layout = 2``
thread. ``ReviewedChat`` saves through :meth:`PostgresStore.save_changes`:
in one transaction, the head is written by the same compare-and-set
``UPDATE`` (``... AND layout = 2``), then only the new or changed rows, so
a save costs the same at turn 1 and turn 1,000 (a thread still stored
whole is locked with ``SELECT ... FOR UPDATE`` and split into rows once).
The save runs in psycopg's pipeline mode with ``BEGIN``/``COMMIT`` sent by
hand: ``BEGIN`` goes out with the compare-and-set, the rows (one multi-row
``INSERT`` per list) with ``COMMIT``, so it waits for the server twice
rather than once per statement — what counts when the database is across
a network. A failure rolls the transaction back before it is raised.

``state`` is ``JSON``, not ``JSONB``, on purpose: ``JSON`` keeps the text
exactly as written, so a thread comes back from PostgreSQL exactly as it
comes back from :class:`~toolguard.SQLiteStore` — tool arguments keep their
key order (which the reviewer sees and the model's history records), numbers
keep their spelling, and strings may hold ``"\\u0000"`` (which ``JSONB``
refuses). Queries can still use ``state->>'status'`` or cast with
``state::jsonb``.

The table is created on first use (under an advisory lock, so processes
starting together do not race) and marked with the comment ``toolguard
schema version 2``. A table of ``toolguard schema version
1`` is migrated on first use, under the same advisory lock and in one
transaction: the ``layout`` column and the three tables are added; its rows
stay whole until their next save. A table with a newer schema version, or one that exists
without that comment (another application's table of the same name), is
refused with :class:`~toolguard.SchemaVersionError` rather than misread or
overwritten. To create the table yourself (e.g. in a migration), use the
columns and tables above and add that comment.

psycopg's async API runs on asyncio: use this store from asyncio (anyio on
its asyncio backend is fine); trio is not supported. psycopg prepares the
statements it runs often: behind PgBouncer in transaction mode, use
PgBouncer 1.21 or newer. On Windows, psycopg
needs a selector event loop (``asyncio.WindowsSelectorEventLoopPolicy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus

from toolguard._core.checks import kind
from toolguard._core.records import utcnow
from toolguard._stores.postgres_schema import (
    CLAIMS_SUFFIX,
    LIST_SUFFIXES,
    MAX_IDENTIFIER,
    SCHEMA_VERSION,
    SECRETS_SUFFIX,
    create_claims,
    create_secrets,
    prepare,
    suffixed,
)
from toolguard._stores.protocol import (
    KEY_BYTES,
    Changes,
    ThreadState,
    check_key,
    conflict,
    handed_over,
    load_state,
    next_state,
)
from toolguard._stores.rows import SPLIT, assemble, head_json, item_rows, with_version

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

_TABLE_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_T = TypeVar("_T")
_Connection = psycopg.AsyncConnection[tuple[Any, ...]]


_CHUNK: Final = 1000
"""Rows per multi-row INSERT (PostgreSQL takes at most 65,535 parameters per statement)."""


def _chunks(rows: list[tuple[str, int, str]]) -> list[list[tuple[str, int, str]]]:
    return [rows[i : i + _CHUNK] for i in range(0, len(rows), _CHUNK)]


def _rows_sql(count: int) -> sql.Composable:
    """``(%s, %s, %s), ...`` for ``count`` rows."""
    return sql.SQL(", ".join(["(%s, %s, %s)"] * count))


def _numbered_sql(count: int) -> sql.Composable:
    """``(%s::bigint, %s::text), ...`` for ``count`` numbered bodies."""
    return sql.SQL(", ".join(["(%s::bigint, %s::text)"] * count))


_BEGIN: Final = sql.SQL("BEGIN")
_COMMIT: Final = sql.SQL("COMMIT")


async def _roll_back(conn: _Connection) -> None:
    """End a transaction a failed save left open (the connection is dropped if this fails)."""
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        await conn.execute(sql.SQL("ROLLBACK"))


def _require_asyncio() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        msg = "PostgresStore needs asyncio (psycopg's async API); trio is not supported"
        raise RuntimeError(msg) from None


class PostgresStore:
    """Keeps threads in one PostgreSQL table, shared safely by tasks, processes and machines.

    The table is created on first use. One connection is opened lazily and
    reused; an :class:`anyio.Lock` lets one operation use it at a time, and a
    connection that broke is replaced on the next call. Use a store from one
    event loop. Several stores (in one or many processes) may use the same
    table at once.

    A cancelled call lets its one statement finish before the cancellation
    takes effect, so a save is written whole or not at all and the
    connection stays usable. Statements are short; only a row lock held by
    somebody else (say, an open transaction in ``psql``) makes one wait. To
    bound that wait, set PostgreSQL's ``lock_timeout`` through the DSN, e.g.
    ``postgresql://app@db/app?options=-c%20lock_timeout%3D10s``.

    Needs the ``postgres`` extra (``pip install "toolguard-hitl[postgres]"``)
    and asyncio; trio is not supported.

    Example::

        from toolguard.postgres import PostgresStore

        async with PostgresStore("postgresql://app@db.internal/app") as store:
            chat = ReviewedChat(model, tools, store=store)

    Args:
        dsn: a libpq connection string, as a URL (``postgresql://user@host/db``)
            or ``key=value`` pairs. Passwords may also come from ``PGPASSWORD``
            or ``~/.pgpass``; ``connect_timeout`` is honoured.
        table: the table's name: letters, digits and underscores, not
            starting with a digit, at most 63 characters. It is quoted, so
            it is case-sensitive, and it lives in the first schema of the
            connection's ``search_path``.

    Raises:
        ValueError: ``table`` is not a plain identifier.
        psycopg.ProgrammingError: ``dsn`` is not a valid connection string.
    """

    def __init__(self, dsn: str, *, table: str = "toolguard_threads") -> None:
        name: object = table  # checked at run time for untyped callers
        if not isinstance(name, str) or not _TABLE_PATTERN.fullmatch(name):
            msg = (
                "table must be letters, digits and underscores, not starting with a digit:"
                f" got {table!r}"
            )
            raise ValueError(msg)
        if len(table) > MAX_IDENTIFIER:
            msg = f"table must be at most {MAX_IDENTIFIER} characters: got {len(table)}"
            raise ValueError(msg)
        conninfo: object = dsn  # checked at run time for untyped callers
        if not isinstance(conninfo, str):
            msg = f"dsn must be a PostgreSQL connection string (str), got {kind(conninfo)}"
            raise TypeError(msg)
        params = conninfo_to_dict(dsn)  # refuses a malformed DSN now rather than on first use
        params.pop("password", None)
        self._dsn = dsn
        self._shown = make_conninfo("", **params)
        self._table = table
        self._ident = sql.Identifier(table)
        self._claims_table = suffixed(table, CLAIMS_SUFFIX)
        self._claims_ident = sql.Identifier(self._claims_table)
        self._claims_ready = False
        self._secrets_ident = sql.Identifier(suffixed(table, SECRETS_SUFFIX))
        self._digest_key: bytes | None = None  # read once, never changes
        self._lists = [sql.Identifier(suffixed(table, suffix)) for suffix in LIST_SUFFIXES]
        messages_t, actions_t, audit_t = self._lists
        self._delete_lists = sql.SQL(
            "WITH m AS (DELETE FROM {} WHERE thread_id = %s),"
            " a AS (DELETE FROM {} WHERE thread_id = %s)"
            " DELETE FROM {} WHERE thread_id = %s"
        ).format(messages_t, actions_t, audit_t)
        self._conn: _Connection | None = None
        self._closed = False
        self._lock = anyio.Lock()

    @property
    def table(self) -> str:
        """The table's name."""
        return self._table

    # ------------------------------------------------------------------ the protocol

    async def load(self, thread_id: str) -> ThreadState | None:
        """The stored state, or ``None`` for an unknown thread.

        Args:
            thread_id: the conversation's id.

        Returns:
            The state as last saved, or ``None``.

        Raises:
            CorruptThreadError: the stored row cannot be read back as a thread.
        """
        # One statement, so one snapshot of the head and its lists.
        aggregate = "(SELECT string_agg(body, ',' ORDER BY seq) FROM {} WHERE thread_id = %s)"
        query = sql.SQL(
            "SELECT state::text, layout, version, "  # noqa: S608 - fixed names
            + ", ".join([aggregate] * 3)
            + " FROM {} WHERE thread_id = %s"
        ).format(*self._lists, self._ident)

        async def work(conn: _Connection) -> tuple[Any, ...] | None:
            cursor = await conn.execute(query, (thread_id,) * 4)
            return await cursor.fetchone()

        row = await self._run(work)
        if row is None:
            return None
        text = str(row[0])
        if row[1] == SPLIT:
            text = assemble(text, *([part] if part else [] for part in row[3:]))
        return with_version(load_state(thread_id, text), int(row[2]))

    async def load_version(self, thread_id: str) -> int | None:
        """The stored version of a thread (``None`` when unknown), without reading the thread."""

        async def work(conn: _Connection) -> int | None:
            return await self._version_of(conn, thread_id)

        return await self._run(work)

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        """:meth:`save` writing only what changed: the head of ``state`` and ``changes``.

        In one transaction: the head (``state`` without its messages, actions
        and audit events) written by an ``UPDATE`` that also compares the
        version (the compare-and-set), and the new messages (replacing
        those after ``changes.keep_messages``), new or changed actions (by
        position) and new audit events written to ``<table>_messages``,
        ``<table>_actions`` and ``<table>_audit``. A thread stored whole (by
        schema 1 or :meth:`save`) is written whole once, split into rows.

        Raises:
            ConcurrentUpdateError: the stored version differs, or the thread
                exists when creating; nothing was written.
        """
        stored = handed_over(state, expected_version)
        head = head_json(stored)
        thread_id = stored.thread_id
        messages_t, actions_t, audit_t = self._lists

        def rows(whole: Changes) -> tuple[list[tuple[str, int, str]], ...]:
            messages, actions, audit = item_rows(whole)
            return (
                [(thread_id, seq, body) for seq, body in messages],
                [(thread_id, seq, body) for seq, body in actions],
                [(thread_id, 0, body) for body in audit],
            )

        async def write(
            conn: _Connection, lists: tuple[list[tuple[str, int, str]], ...], keep: int | None
        ) -> None:
            messages, actions, audit = lists
            if keep is None:
                # Every list row of the thread, in one statement (one round trip, not three).
                await conn.execute(self._delete_lists, (thread_id, thread_id, thread_id))
            elif keep >= 0:
                await conn.execute(
                    sql.SQL("DELETE FROM {} WHERE thread_id = %s AND seq >= %s").format(messages_t),
                    (thread_id, keep),
                )
            # One multi-row INSERT per list (in chunks): in pipeline mode it goes out without
            # waiting, where executemany would wait for its own answers.
            for chunk in _chunks(messages):
                await conn.execute(
                    sql.SQL("INSERT INTO {} (thread_id, seq, body) VALUES {}").format(
                        messages_t, _rows_sql(len(chunk))
                    ),
                    [value for row in chunk for value in row],
                )
            for chunk in _chunks(actions):
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (thread_id, seq, body) VALUES {}"
                        " ON CONFLICT (thread_id, seq) DO UPDATE SET body = excluded.body"
                    ).format(actions_t, _rows_sql(len(chunk))),
                    [value for row in chunk for value in row],
                )
            for chunk in _chunks(audit):
                # Numbered after the thread's last event, in order.
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (thread_id, seq, body)"
                        " SELECT %s, coalesce((SELECT max(seq) FROM {} WHERE thread_id = %s), -1)"
                        " + v.k, v.body FROM (VALUES {}) AS v (k, body)"
                    ).format(audit_t, audit_t, _numbered_sql(len(chunk))),
                    [
                        thread_id,
                        thread_id,
                        *(value for k, row in enumerate(chunk, 1) for value in (k, row[2])),
                    ],
                )

        prepared = rows(changes if expected_version is not None else Changes.whole(stored))

        async def changes_written(conn: _Connection, pipeline: Any) -> None:
            if expected_version is None:
                cursor = await conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (thread_id, version, state, updated_at, layout)"
                        " VALUES (%s, %s, %s::json, %s, 2) ON CONFLICT (thread_id) DO NOTHING"
                    ).format(self._ident),
                    (thread_id, stored.version, head, stored.updated_at),
                )
                await pipeline.sync()
                if cursor.rowcount != 1:
                    found = await self._version_of(conn, thread_id)
                    raise conflict(thread_id, None, found)
                await write(conn, prepared, None)
                return
            # The compare-and-set in one statement: a concurrent save of the row waits for
            # ours (or ours for it) and then finds another version.
            cursor = await conn.execute(
                sql.SQL(
                    "UPDATE {} SET version = %s, state = %s::json, updated_at = %s"
                    " WHERE thread_id = %s AND version = %s AND layout = 2"
                ).format(self._ident),
                (stored.version, head, stored.updated_at, thread_id, expected_version),
            )
            await pipeline.sync()
            if cursor.rowcount == 1:
                keep = changes.keep_messages
                appended_only = changes.stored_messages == keep
                await write(conn, prepared, -1 if appended_only else keep)
                return
            cursor = await conn.execute(
                sql.SQL("SELECT version, layout FROM {} WHERE thread_id = %s FOR UPDATE").format(
                    self._ident
                ),
                (thread_id,),
            )
            await pipeline.sync()
            row = await cursor.fetchone()
            found = None if row is None else int(row[0])
            if row is None or found != expected_version:
                raise conflict(thread_id, expected_version, found)
            # Stored whole (layout 1): write this state whole, split into rows.
            await conn.execute(
                sql.SQL(
                    "UPDATE {} SET version = %s, state = %s::json, updated_at = %s, layout = 2"
                    " WHERE thread_id = %s"
                ).format(self._ident),
                (stored.version, head, stored.updated_at, thread_id),
            )
            await write(conn, rows(Changes.whole(stored)), None)

        async def work(conn: _Connection) -> None:
            # Pipeline mode, the transaction by hand: BEGIN goes out with the compare-and-set
            # and COMMIT with the rows, so a save waits for the server twice (the
            # compare-and-set's row count, then the pipeline's end), not once per statement.
            try:
                async with conn.pipeline() as pipeline:
                    await conn.execute(_BEGIN)
                    await changes_written(conn, pipeline)
                    await conn.execute(_COMMIT)
            except BaseException:
                await _roll_back(conn)
                raise

        await self._run(work)
        return stored

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        """Store ``state`` if the stored version is still ``expected_version`` (compare-and-set).

        Args:
            state: the new state; its ``version`` is ignored.
            expected_version: the version that was read, or ``None`` to create
                a thread that must not exist yet.

        Returns:
            The state as stored, with ``version = expected_version + 1`` (1 for
            a new thread) and ``updated_at`` set.

        Raises:
            ConcurrentUpdateError: the stored version differs, or the thread
                exists when creating; nothing was written.
        """
        stored = next_state(state, expected_version)
        text = stored.model_dump_json()
        thread_id = stored.thread_id
        if expected_version is None:
            query = sql.SQL(
                "INSERT INTO {} (thread_id, version, state, updated_at)"
                " VALUES (%s, %s, %s::json, %s) ON CONFLICT (thread_id) DO NOTHING"
            ).format(self._ident)
            params: tuple[Any, ...] = (thread_id, stored.version, text, stored.updated_at)
        else:
            query = sql.SQL(
                "UPDATE {} SET version = %s, state = %s::json, updated_at = %s, layout = 1"
                " WHERE thread_id = %s AND version = %s"
            ).format(self._ident)
            params = (stored.version, text, stored.updated_at, thread_id, expected_version)

        async def work(conn: _Connection) -> None:
            async with conn.transaction():
                cursor = await conn.execute(query, params)
                if cursor.rowcount != 1:
                    found = await self._version_of(conn, thread_id)
                    raise conflict(thread_id, expected_version, found)
                if expected_version is not None:  # the whole state is in the row now
                    await conn.execute(self._delete_lists, (thread_id, thread_id, thread_id))

        await self._run(work)
        return stored

    async def thread_ids(self) -> list[str]:
        """Every stored thread id, oldest thread first.

        Returns:
            The ids in creation order.
        """
        query = sql.SQL("SELECT thread_id FROM {} ORDER BY seq").format(self._ident)

        async def work(conn: _Connection) -> list[str]:
            cursor = await conn.execute(query)
            return [str(row[0]) for row in await cursor.fetchall()]

        return await self._run(work)

    async def claim(self, key: str) -> bool:
        """Claim ``key`` once, across every process and machine using the database.

        ``INSERT ... ON CONFLICT DO NOTHING`` into the table ``<table>_claims``
        (``key TEXT PRIMARY KEY, claimed_at TIMESTAMPTZ``; for a ``table`` of
        more than 56 characters, its first 56 characters plus ``_claims``),
        created on first use with ``IF NOT EXISTS`` under the same advisory
        lock as the threads table, so databases of older versions keep
        working. Of several callers exactly one gets ``True``.
        ``Runner(claims=store)`` claims each paused turn this way before
        resuming it.

        Args:
            key: what to claim (text).

        Returns:
            ``True`` for the first claim of ``key``, ``False`` for every later one.

        Raises:
            TypeError: ``key`` is not text.
        """
        check_key(key)
        text = key.encode("utf-8", "surrogatepass").decode("utf-8", "replace").replace("\0", "")
        query = sql.SQL(
            "INSERT INTO {} (key, claimed_at) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
        ).format(self._claims_ident)
        claimed_at = utcnow()

        async def work(conn: _Connection) -> bool:
            if not self._claims_ready:
                await create_claims(conn, self._table)
                self._claims_ready = True
            cursor = await conn.execute(query, (text, claimed_at))
            return cursor.rowcount == 1

        return await self._run(work)

    async def digest_key(self) -> bytes:
        """The secret of the digests of a chat on this table (without ``signing_key``).

        32 random bytes, made on first use and kept in the table
        ``<table>_secrets`` (``name TEXT PRIMARY KEY, value BYTEA``; for a
        ``table`` of more than 55 characters, its first 55 plus
        ``_secrets``), created with ``IF NOT EXISTS`` under the same advisory
        lock as the threads table. Made with ``INSERT ... ON CONFLICT DO
        NOTHING``, then read back: of several first uses at once, on any
        machines, one key wins and all get it. Whoever can read that table
        can read the key: grant access to it as to the threads, or pass
        ``signing_key`` to the chat.

        Returns:
            The key (read once, then kept by this store).
        """
        if self._digest_key is not None:
            return self._digest_key
        insert = sql.SQL(
            "INSERT INTO {} (name, value) VALUES ('digest_key', %s) ON CONFLICT (name) DO NOTHING"
        ).format(self._secrets_ident)
        select = sql.SQL("SELECT value FROM {} WHERE name = 'digest_key'").format(
            self._secrets_ident
        )
        fresh = os.urandom(KEY_BYTES)

        async def work(conn: _Connection) -> bytes:
            await create_secrets(conn, self._table)
            await conn.execute(insert, (fresh,))
            cursor = await conn.execute(select)
            row = await cursor.fetchone()
            assert row is not None  # noqa: S101 - inserted or kept just above
            return bytes(row[0])

        key = await self._run(work)
        self._digest_key = key
        return key

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Close the connection; the store cannot be used afterwards (closing twice is fine)."""
        self._closed = True
        async with self._lock:
            await self._drop()

    async def __aenter__(self) -> PostgresStore:
        """Return the store itself; the connection is opened on first use."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        await self.aclose()

    def __repr__(self) -> str:
        return f"PostgresStore({self._shown!r}, table={self._table!r})"

    # ------------------------------------------------------------------ internals

    async def _run(self, work: Callable[[_Connection], Awaitable[_T]]) -> _T:
        """Run ``work`` with the connection, one call at a time."""
        _require_asyncio()
        async with self._lock:
            conn = await self._connection()
            try:
                # Shielded: a cancelled caller lets its (short) statement finish, so the
                # connection stays usable and a save is either written whole or not at all.
                with anyio.CancelScope(shield=True):
                    result = await work(conn)
            except BaseException:
                # A failed statement leaves an autocommit connection idle and usable; a
                # broken one is replaced on the next call.
                if conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
                    await self._drop()
                raise
            return result

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _connection(self) -> _Connection:
        """The open connection, opening it (and creating the table) when needed."""
        if self._closed:
            msg = f"{self!r} is closed"
            raise RuntimeError(msg)
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = None
        conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        try:
            await prepare(conn, self._table)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    async def _version_of(self, conn: _Connection, thread_id: str) -> int | None:
        cursor = await conn.execute(
            sql.SQL("SELECT version FROM {} WHERE thread_id = %s").format(self._ident),
            (thread_id,),
        )
        row = await cursor.fetchone()
        return None if row is None else int(row[0])
