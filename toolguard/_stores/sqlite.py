"""A persistent store in one SQLite file, safe to share between processes.

:class:`SQLiteStore` keeps each thread as one row of the table
``toolguard_threads`` (``thread_key``, ``thread_id``, ``version``,
``state``, ``updated_at``, ``layout``) plus one row per message, action
and audit event in ``toolguard_items`` (``thread_key``, ``kind`` 0/1/2,
``seq``, ``body`` as JSON text). With ``layout = 2``, ``state`` holds the
thread's head (the state without those three lists) and a save writes the
head and only the new or changed rows, all in one transaction; with
``layout = 1`` (a row written under schema 1 or by a whole-state
:meth:`SQLiteStore.save`), ``state`` holds the whole thread. The integer
``thread_key`` grows with each new thread, so the rows of the threads in
use sit together at the end of ``toolguard_items``: a save touches few
pages, which keeps the WAL and its checkpoints small. It uses only the
standard library's :mod:`sqlite3`.

Short statements run on the event loop's thread with a zero busy timeout
(a worker-thread hop costs more than they do); when another writer holds
the database's lock, the call runs again in a worker thread
(``anyio.to_thread.run_sync``), waiting up to ``timeout`` for the lock, so
the event loop never waits on another process.

Why per-process locks are not enough: an :class:`anyio.Lock` (or a
:class:`threading.Lock`) only orders the tasks of ONE process. A paused
run may be resumed by any worker of a web server, so two processes can
read the same thread at version 3, both apply the same approval and both
write version 4 — and the approved tool runs twice. The guard must live in
the database, where every process sees it.

The compare-and-set: a save of a thread read at version ``N`` is::

    BEGIN IMMEDIATE;
    UPDATE toolguard_threads SET version = N + 1, state = ?, updated_at = ?
        WHERE thread_id = ? AND version = N;
    -- exactly one row changed, or somebody else saved first
    COMMIT;

SQLite evaluates the ``WHERE`` and writes the row atomically, so of several
writers that expect version ``N`` exactly one changes a row; the others see
``rowcount == 0``, roll back and raise :class:`ConcurrentUpdateError`. A
new thread is created with a plain ``INSERT``: the ``UNIQUE`` ``thread_id``
makes the second creation fail. (:meth:`SQLiteStore.save_changes` reads the
thread's key and version first and updates by key, inside the same
``BEGIN IMMEDIATE`` transaction, so no writer can come in between.)
``BEGIN IMMEDIATE`` takes the database's write lock at the start of the
transaction, so concurrent writers queue up (for at most
``timeout`` seconds) instead of failing half-way with ``database is locked``.

Journal mode WAL lets readers go on while one writer writes, and
``synchronous=NORMAL`` is the usual, durable-enough companion of WAL (a
commit may be lost on power failure, never corrupted). SQLite's automatic
checkpoint (copying the WAL back into the database file, with an
``fsync``) would run inside a commit every thousand pages or so, stalling
the event loop for milliseconds: the store's connection turns it off and
runs a passive checkpoint in a background thread, on a connection of
that thread's own, after every 64 write transactions instead (other
connections to the file keep SQLite's default). Such a checkpoint never
blocks a writer, so the WAL can only start again from its beginning when
no write came while it ran; when it reports a thousand pages or more still
in the WAL, the store checkpoints once more on its own connection right
before its next write (quick: the pages are already copied; a failure is
only logged), which bounds the WAL as SQLite's default does. WAL needs a
local file system: do not put the database on a network share.

The tables, the schema version and the migration of older databases are
described in :mod:`toolguard._stores.sqlite_schema`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final, TypeVar

import anyio.to_thread

from toolguard._core.checks import kind, positive_seconds
from toolguard._core.errors import SchemaVersionError
from toolguard._core.records import utcnow
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
from toolguard._stores.rows import SPLIT, ItemRows, assemble, head_json, item_rows, with_version
from toolguard._stores.sqlite_schema import (
    ACTION,
    AUDIT,
    CREATE_CLAIMS,
    MESSAGE,
    SCHEMA_VERSION,
    make_digest_key,
    prepare,
    read_digest_key,
    rollback,
)

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "SchemaVersionError"]

_BUSY: Final = (5, 6)
"""SQLITE_BUSY and SQLITE_LOCKED (primary result codes)."""

_T = TypeVar("_T")

_CHECKPOINT_EVERY: Final = 64
"""Write transactions between two background WAL checkpoints (about 300 pages of toolguard's)."""

_CHECKPOINT_IDLE: Final = 30.0
"""Seconds the checkpoint thread waits for the next request before it ends."""

_WAL_PAGES: Final = 1000
"""Pages left in the WAL after a background checkpoint that make the next write checkpoint too."""

_log = logging.getLogger("toolguard")


class SQLiteStore:
    """Keeps threads in one SQLite database file, shared safely by threads and processes.

    The database and its table are created on first use. One connection is
    opened lazily and reused; a lock serialises its use by worker threads.
    Several stores (in one or many processes) may use the same file at once.

    Example::

        async with SQLiteStore("toolguard.db") as store:
            state = await store.load("thread-1")

    Args:
        path: the database file (created if missing). ``":memory:"`` gives a
            private in-memory database, handy in tests.
        timeout: how many seconds a statement waits for another connection's
            lock (another writer's, or the short one SQLite takes while it
            sets up or cleans up the WAL) before failing with
            :class:`sqlite3.OperationalError` ("database is locked").
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        where: object = path  # checked at run time for untyped callers
        if not isinstance(where, str | os.PathLike) or not isinstance(os.fspath(where), str):
            msg = (
                f"path must be a str or a pathlib.Path naming the database file, got {kind(where)}"
            )
            raise TypeError(msg)
        if not os.fspath(where):
            msg = "path must name the database file (or ':memory:'), got ''"
            raise ValueError(msg)
        self._path = os.fspath(path)
        self._timeout = positive_seconds(timeout, "timeout")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._writes = 0  # write transactions since the last background checkpoint
        # One background thread checkpoints, on a connection of its own, whenever asked.
        self._checkpointer: threading.Thread | None = None
        # Guards the checkpointer's state only; never held during a statement, so the loop
        # never waits on it.
        self._checkpoint_lock = threading.Condition(threading.Lock())
        self._checkpoint_wanted = False
        self._checkpoint_running = False
        self._wal_full = False  # a background checkpoint left _WAL_PAGES or more in the WAL
        self._digest_key: bytes | None = None  # read once, never changes

    @property
    def path(self) -> str:
        """The database file's path."""
        return self._path

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

        def work(conn: sqlite3.Connection) -> tuple[str, int] | None:
            conn.execute("BEGIN")  # one snapshot for the head and its lists
            try:
                row = conn.execute(
                    "SELECT state, layout, version, thread_key FROM toolguard_threads"
                    " WHERE thread_id = ?",
                    (thread_id,),
                ).fetchone()
                if row is None:
                    return None
                if row[1] != SPLIT:
                    return str(row[0]), int(row[2])
                lists: tuple[list[str], list[str], list[str]] = ([], [], [])
                for item_kind, body in conn.execute(
                    "SELECT kind, body FROM toolguard_items WHERE thread_key = ?"
                    " ORDER BY kind, seq",
                    (row[3],),
                ):
                    if item_kind in (MESSAGE, ACTION, AUDIT):
                        lists[item_kind].append(str(body))
                return assemble(str(row[0]), *lists), int(row[2])
            finally:
                rollback(conn)

        found = await self._run(work)
        if found is None:
            return None
        # The row's version column is what compare-and-set checks: it wins.
        return with_version(load_state(thread_id, found[0]), found[1])

    async def load_version(self, thread_id: str) -> int | None:
        """The stored version of a thread (``None`` when unknown), without reading the thread."""
        return await self._run(lambda conn: _version_of(conn, thread_id))

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        """:meth:`save` writing only what changed: the head of ``state`` and ``changes``.

        In one transaction: the compare-and-set on ``version`` and the head
        (``state`` without its messages, actions and audit events), the new
        messages (replacing those after ``changes.keep_messages``), the new or
        changed actions (by position) and the new audit events. A crash
        leaves the old version or the new one, never a mix. A thread stored
        whole (under schema 1 or by :meth:`save`) is written whole once,
        split into rows. A ``state`` handed over (see
        :class:`~toolguard._stores.protocol.ChangesStore`) is returned as it is.

        Raises:
            ConcurrentUpdateError: the stored version differs, or the thread
                exists when creating; nothing was written.
        """
        stored = handed_over(state, expected_version)
        head = head_json(stored)
        updated_at = stored.updated_at.isoformat()
        thread_id = stored.thread_id
        prepared = item_rows(changes if expected_version is not None else Changes.whole(stored))

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if expected_version is None:
                    try:
                        cursor = conn.execute(
                            "INSERT INTO toolguard_threads"
                            " (thread_id, version, state, updated_at, layout)"
                            " VALUES (?, ?, ?, ?, 2)",
                            (thread_id, stored.version, head, updated_at),
                        )
                    except sqlite3.IntegrityError:
                        raise conflict(thread_id, None, _version_of(conn, thread_id)) from None
                    _write_lists(conn, _inserted_key(cursor), prepared, 0, 0, fresh=True)
                else:
                    # Under BEGIN IMMEDIATE no other writer can come between this read and
                    # the update; the update checks the version again all the same.
                    found = conn.execute(_READ_FOR_UPDATE, (thread_id,)).fetchone()
                    if found is None or found[1] != expected_version:
                        raise conflict(
                            thread_id, expected_version, None if found is None else int(found[1])
                        )
                    key = int(found[0])
                    cursor = conn.execute(
                        "UPDATE toolguard_threads SET version = ?, state = ?, updated_at = ?,"
                        " layout = 2 WHERE thread_key = ? AND version = ?",
                        (stored.version, head, updated_at, key, expected_version),
                    )
                    if cursor.rowcount != 1:  # pragma: no cover - the write lock is held
                        raise conflict(thread_id, expected_version, _version_of(conn, thread_id))
                    if found[2] == SPLIT:
                        keep = changes.keep_messages
                        if changes.stored_messages == keep:
                            keep = -1  # nothing replaced: no messages to delete
                        _write_lists(conn, key, prepared, keep, int(found[3]), fresh=False)
                    else:
                        # Stored whole (layout 1): write this state whole, split into rows.
                        _write_lists(conn, key, item_rows(Changes.whole(stored)), 0, 0, fresh=True)
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise

        await self._run(work, write=True)
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
        updated_at = stored.updated_at.isoformat()
        thread_id = stored.thread_id

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if expected_version is None:
                    try:
                        conn.execute(
                            "INSERT INTO toolguard_threads (thread_id, version, state, updated_at)"
                            " VALUES (?, ?, ?, ?)",
                            (thread_id, stored.version, text, updated_at),
                        )
                    except sqlite3.IntegrityError:
                        raise conflict(thread_id, None, _version_of(conn, thread_id)) from None
                else:
                    cursor = conn.execute(
                        "UPDATE toolguard_threads SET version = ?, state = ?, updated_at = ?,"
                        " layout = 1 WHERE thread_id = ? AND version = ?",
                        (stored.version, text, updated_at, thread_id, expected_version),
                    )
                    if cursor.rowcount != 1:
                        found = _version_of(conn, thread_id)
                        raise conflict(thread_id, expected_version, found)
                    conn.execute(
                        "DELETE FROM toolguard_items WHERE thread_key ="
                        " (SELECT thread_key FROM toolguard_threads WHERE thread_id = ?)",
                        (thread_id,),
                    )
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise

        await self._run(work, write=True)
        return stored

    async def thread_ids(self) -> list[str]:
        """Every stored thread id, oldest thread first.

        Returns:
            The ids in creation order.
        """

        def work(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT thread_id FROM toolguard_threads ORDER BY thread_key")
            return [str(row[0]) for row in rows]

        return await self._run(work)

    async def claim(self, key: str) -> bool:
        """Claim ``key`` once, across every process using the file.

        ``INSERT OR IGNORE`` into the table ``toolguard_claims`` (created if
        missing, so databases of older versions keep working): of several
        callers, in any processes, exactly one inserts the row and gets
        ``True``. ``Runner(claims=store)`` claims each paused turn this way
        before resuming it.

        Args:
            key: what to claim (text).

        Returns:
            ``True`` for the first claim of ``key``, ``False`` for every later one.

        Raises:
            TypeError: ``key`` is not text.
        """
        check_key(key)
        claimed_at = utcnow().isoformat()

        def work(conn: sqlite3.Connection) -> bool:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(CREATE_CLAIMS)
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO toolguard_claims (key, claimed_at) VALUES (?, ?)",
                    (key.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), claimed_at),
                )
                conn.execute("COMMIT")
            except BaseException:
                rollback(conn)
                raise
            return cursor.rowcount == 1

        return await self._run(work, write=True)

    async def digest_key(self) -> bytes:
        """The secret of the digests of a chat on this file (without ``signing_key``).

        32 random bytes made on first use and kept in the table
        ``toolguard_secrets`` (inserted if absent under the write lock, then
        read back, so racing first uses agree): every process using the
        file, and every restart, gets the same key.
        Whoever can read the file can read the key: keep the file as private
        as the data in it, or pass ``signing_key`` to the chat.
        """
        if self._digest_key is None:
            key = await self._run(read_digest_key)
            if key is None:
                fresh = os.urandom(KEY_BYTES)
                key = await self._run(lambda conn: make_digest_key(conn, fresh), write=True)
            self._digest_key = key
        return self._digest_key

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards (closing twice is fine).

        Waits for a background checkpoint still running (see the module's notes).
        """
        with self._checkpoint_lock:
            self._closed = True
            self._checkpoint_lock.notify_all()
            checkpointer = self._checkpointer
        if checkpointer is not None:
            checkpointer.join()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def aclose(self) -> None:
        """Close the connection without blocking the event loop (see :meth:`close`)."""
        await anyio.to_thread.run_sync(self.close)

    async def __aenter__(self) -> SQLiteStore:
        """Return the store itself; the database is opened on first use."""
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
        return f"SQLiteStore({self._path!r})"

    # ------------------------------------------------------------------ internals

    async def _run(self, work: Callable[[sqlite3.Connection], _T], *, write: bool = False) -> _T:
        """Run ``work`` (see :meth:`_run_work`); around a write, see to the WAL's checkpoints.

        The store's own checkpoint comes BEFORE the write (which then starts
        the WAL again) and never fails it: once a write has committed, its
        caller hears of nothing but its outcome.
        """
        if write and self._wal_full:
            self._wal_full = False
            try:
                await self._run_work(_checkpoint_here)
            except sqlite3.Error as exc:  # the write goes on; a later checkpoint tries again
                _log.debug("toolguard: checkpoint of %r failed: %s", self._path, exc)
        done = await self._run_work(work)
        if write and self._path != ":memory:":
            self._writes += 1
            if self._writes >= _CHECKPOINT_EVERY:
                self._start_checkpoint()
        return done

    def _start_checkpoint(self) -> None:
        """Ask the background thread for a checkpoint (starting it the first time).

        Not while one is asked for or running: the next write asks again, so a
        checkpoint always starts right after a write, never while the store's
        own checkpoint before a write (see ``_wal_full``) lets the WAL restart.
        """
        with self._checkpoint_lock:
            if self._closed or self._checkpoint_wanted or self._checkpoint_running:
                return
            self._writes = 0
            self._checkpoint_wanted = True
            thread = self._checkpointer
            if thread is not None and thread.is_alive():
                self._checkpoint_lock.notify_all()
                return
            thread = threading.Thread(
                target=self._checkpoint_loop, name="toolguard-sqlite-checkpoint", daemon=True
            )
            thread.start()  # under the lock: close() never joins a thread not started yet
            self._checkpointer = thread

    def _checkpoint_loop(self) -> None:
        """The background thread: a passive checkpoint each time one is asked for, until close.

        Its connection stays open between checkpoints (opening one costs more
        than a checkpoint of a few pages); a failure closes it, and the next
        checkpoint opens it again. After ``_CHECKPOINT_IDLE`` seconds without
        a request the thread ends, closing its connection.
        """
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._checkpoint_lock:
                    idle_until = time.monotonic() + _CHECKPOINT_IDLE
                    while not (self._checkpoint_wanted or self._closed):
                        left = idle_until - time.monotonic()
                        if left <= 0:
                            # Idle: end, so a store nobody closes is not kept alive by this
                            # thread; the next request starts a new one.
                            self._checkpointer = None
                            return
                        self._checkpoint_lock.wait(left)
                    if self._closed:
                        return
                    self._checkpoint_wanted = False
                    self._checkpoint_running = True
                try:
                    conn = self._checkpoint(conn)
                finally:
                    with self._checkpoint_lock:
                        self._checkpoint_running = False
                        self._checkpoint_lock.notify_all()
        finally:
            if conn is not None:
                conn.close()

    def _checkpoint(self, conn: sqlite3.Connection | None) -> sqlite3.Connection | None:
        """A passive checkpoint on the thread's own connection: it never waits for a lock."""
        try:
            if conn is None:
                conn = sqlite3.connect(self._path, timeout=0, isolation_level=None)
            # fetchall: the statement runs to its end, so this connection holds no read
            # transaction (which would keep writers from starting the WAL again) until the next.
            rows = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # the next one will try again, on a new connection
            _log.debug("toolguard: background checkpoint of %r failed: %s", self._path, exc)
            if conn is not None:
                conn.close()
            return None
        if rows and int(rows[0][1]) >= _WAL_PAGES:
            self._wal_full = True  # writes kept coming meanwhile: the WAL never started again
        return conn

    async def _run_work(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` with the connection, one call at a time.

        Short statements run right here on the event loop's thread, with a
        zero busy timeout: a worker-thread hop costs more than they do. When
        the database is locked by another writer (or the connection is busy
        in another thread, or not opened yet), ``work`` runs again in a
        worker thread, waiting up to ``timeout`` for the lock. ``work`` rolls
        back what it began when it fails, so running it again is safe.
        """
        if self._conn is not None and self._lock.acquire(blocking=False):
            try:
                return work(self._connection())
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
            finally:
                self._lock.release()

        def call() -> _T:
            with self._lock:
                deadline = time.monotonic() + self._timeout
                conn = self._connection(deadline)
                conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
                try:
                    return _until(deadline, lambda: work(conn))
                finally:
                    if self._conn is conn:
                        conn.execute("PRAGMA busy_timeout = 0")

        return await anyio.to_thread.run_sync(call)

    def _connection(self, deadline: float | None = None) -> sqlite3.Connection:
        """The open connection, opening it (and creating the schema) on first use.

        Opening waits for other connections' locks until ``deadline`` (a
        ``time.monotonic()`` value; ``timeout`` seconds from now when not
        given), also where SQLite does not wait by itself.
        """
        if self._closed:
            msg = f"{self!r} is closed"
            raise RuntimeError(msg)
        if self._conn is None:
            if deadline is None:
                deadline = time.monotonic() + self._timeout
            self._conn = _until(deadline, self._open)
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """A new connection, prepared; closed again when preparing it fails."""
        conn = sqlite3.connect(
            self._path,
            timeout=self._timeout,
            isolation_level=None,  # autocommit; transactions are explicit
            check_same_thread=False,  # used from worker threads, under self._lock
        )
        try:
            self._prepare(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # see _run
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # in the background instead
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Set up a new connection: WAL, and the schema created or migrated when needed."""
        prepare(conn, self._path, self._timeout)


def _checkpoint_here(conn: sqlite3.Connection) -> None:
    """A passive checkpoint on the store's own connection (the next write restarts the WAL)."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _version_of(conn: sqlite3.Connection, thread_id: str) -> int | None:
    row = conn.execute(
        "SELECT version FROM toolguard_threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def _until(deadline: float, attempt: Callable[[], _T]) -> _T:
    """``attempt()``, tried again while SQLite says the database is locked, until ``deadline``.

    SQLite's busy timeout does not cover every lock: a connection that
    turns on WAL mode, or reads while another connection recovers the WAL
    or cleans it up as it closes, can be told "database is locked" at once
    (https://sqlite.org/wal.html#sometimes_queries_return_sqlite_busy_in_wal_mode).
    Those waits are short, so they are retried here, with growing pauses
    (1 ms to 50 ms). ``attempt`` must leave nothing begun when it fails.
    """
    pause = 0.001
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite said the database (or a table) is locked by another connection."""
    code: object = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF in _BUSY
    return str(exc).startswith(("database is locked", "database table is locked"))


def _inserted_key(cursor: sqlite3.Cursor) -> int:
    """The ``thread_key`` of the thread row ``cursor`` just inserted."""
    key = cursor.lastrowid
    if key is None:  # pragma: no cover - an INSERT into a rowid table always sets it
        msg = "SQLite did not report the new thread's key"
        raise sqlite3.DatabaseError(msg)
    return key


_READ_FOR_UPDATE: Final = (
    "SELECT thread_key, version, layout, (SELECT coalesce(max(seq) + 1, 0) FROM toolguard_items"
    " WHERE toolguard_items.thread_key = t.thread_key AND kind = 2)"
    " FROM toolguard_threads AS t WHERE thread_id = ?"
)
"""A thread's key, version and layout, and the ``seq`` its next audit event gets."""


def _write_lists(
    conn: sqlite3.Connection,
    key: int,
    rows: ItemRows,
    keep_messages: int,
    next_audit: int,
    *,
    fresh: bool,
) -> None:
    """Write a thread's new rows: messages after ``keep_messages``, actions, audit events.

    All of them with one statement; audit events are numbered from
    ``next_audit``. ``fresh``: delete every row of the thread first (when it
    has any); ``keep_messages`` -1: delete no messages (they are only appended).
    """
    messages, actions, audit = rows
    if fresh:
        if _has_list_rows(conn, key):  # only rows left behind by a thread removed by hand
            conn.execute("DELETE FROM toolguard_items WHERE thread_key = ?", (key,))
    elif keep_messages >= 0:
        conn.execute(
            "DELETE FROM toolguard_items WHERE thread_key = ? AND kind = 0 AND seq >= ?",
            (key, keep_messages),
        )
    values = [(key, MESSAGE, seq, body) for seq, body in messages]
    values.extend((key, ACTION, seq, body) for seq, body in actions)
    values.extend((key, AUDIT, seq, body) for seq, body in enumerate(audit, next_audit))
    if values:
        conn.executemany(
            "INSERT OR REPLACE INTO toolguard_items (thread_key, kind, seq, body)"
            " VALUES (?, ?, ?, ?)",
            values,
        )


def _has_list_rows(conn: sqlite3.Connection, key: int) -> bool:
    """Whether ``toolguard_items`` has rows of the thread ``key``."""
    row = conn.execute(
        "SELECT 1 FROM toolguard_items WHERE thread_key = ? LIMIT 1", (key,)
    ).fetchone()
    return row is not None
