"""The SQLite store's tables, its schema version and the migration of older databases.

The schema version is kept in ``PRAGMA user_version`` (currently 3). An
older database is migrated when a store first opens it, in one transaction
under the write lock (so processes opening it together migrate it once):
``toolguard_threads`` is rebuilt with ``thread_key`` (its old ``rowid``, so
the threads keep their order); the rows of schema 2's
``toolguard_messages``, ``toolguard_actions`` and ``toolguard_audit`` move
into ``toolguard_items``; the whole rows of schema 1 stay
whole until their next save. A database written by a newer toolguard is
refused with :class:`SchemaVersionError` rather than misread, so the file
should be dedicated to toolguard.

Two small tables are made on first use, whatever the schema version:
``toolguard_claims`` (``SQLiteStore.claim``) and ``toolguard_secrets`` (the
digest key, ``SQLiteStore.digest_key``).
"""

from __future__ import annotations

import sqlite3
from typing import Final

from toolguard._core.errors import SchemaVersionError

SCHEMA_VERSION: Final = 3
"""The ``PRAGMA user_version`` this version of toolguard writes and reads."""

CREATE_THREADS: Final = """
CREATE TABLE IF NOT EXISTS toolguard_threads (
    thread_key INTEGER PRIMARY KEY,
    thread_id TEXT NOT NULL UNIQUE,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    layout INTEGER NOT NULL DEFAULT 1
)
"""

CREATE_ITEMS: Final = """
CREATE TABLE IF NOT EXISTS toolguard_items (
    thread_key INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (thread_key, kind, seq)
) WITHOUT ROWID
"""
"""One row per message (``kind`` 0), action (1) and audit event (2) of a thread (``layout = 2``).

Keyed by the thread's integer ``thread_key``, which grows with each new
thread: the rows of the threads in use sit together at the end of the
table, so a save touches one or two pages of it instead of a page in each
of three tables (schema 2), and the WAL (and the checkpoints' ``fsync``)
carries about 40% fewer pages per approval cycle.
"""

MESSAGE, ACTION, AUDIT = 0, 1, 2
"""``toolguard_items.kind`` of a message, an action and an audit event."""

CREATE_CLAIMS: Final = """
CREATE TABLE IF NOT EXISTS toolguard_claims (
    key TEXT PRIMARY KEY,
    claimed_at TEXT NOT NULL
)
"""

CREATE_SECRETS: Final = """
CREATE TABLE IF NOT EXISTS toolguard_secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
)
"""
"""The store's secrets, made on first use: one row, ``digest_key`` (``SQLiteStore.digest_key``)."""

_OLD_LIST_TABLES: Final = ("toolguard_messages", "toolguard_actions", "toolguard_audit")
"""Schema 2's list tables (``thread_id``, ``seq``, ``body``), one per kind, in kind order."""


def prepare(conn: sqlite3.Connection, path: str, timeout: float) -> None:
    """Set up a new connection: WAL, and the schema created or migrated when needed."""
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    if schema_version(conn, path) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = schema_version(conn, path)  # again, now that we hold the write lock
        if version != SCHEMA_VERSION:
            if version in (1, 2) and has_table(conn, "toolguard_threads"):
                _migrate(conn, version)
            else:
                conn.execute(CREATE_THREADS)
                conn.execute(CREATE_ITEMS)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def read_digest_key(conn: sqlite3.Connection) -> bytes | None:
    """The digest key kept in ``toolguard_secrets``, or ``None`` when none was made yet."""
    if not has_table(conn, "toolguard_secrets"):
        return None
    row = conn.execute("SELECT value FROM toolguard_secrets WHERE name = 'digest_key'").fetchone()
    return None if row is None else bytes(row[0])


def make_digest_key(conn: sqlite3.Connection, fresh: bytes) -> bytes:
    """Keep ``fresh`` as the digest key unless one is kept already; the key kept.

    ``INSERT OR IGNORE`` under the write lock (``BEGIN IMMEDIATE``), then
    read back in the same transaction: of several first uses at once, in any
    processes, one key wins and every one of them gets it.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(CREATE_SECRETS)
        conn.execute(
            "INSERT OR IGNORE INTO toolguard_secrets (name, value) VALUES ('digest_key', ?)",
            (fresh,),
        )
        row = conn.execute(
            "SELECT value FROM toolguard_secrets WHERE name = 'digest_key'"
        ).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return bytes(row[0])


def schema_version(conn: sqlite3.Connection, path: str) -> int:
    """The database's ``user_version``; raises when it is newer than this toolguard's."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        msg = (
            f"Database {path!r} has toolguard schema version {version}, but this"
            f" version of toolguard supports only version {SCHEMA_VERSION}:"
            " upgrade toolguard to use it"
        )
        raise SchemaVersionError(msg)
    return version


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the database has the table ``name``."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Rewrite a schema 1 or 2 database as schema 3, inside the caller's transaction.

    ``toolguard_threads`` is rebuilt with the integer ``thread_key`` (its
    old ``rowid``, so the threads keep their order) and the lists of schema
    2 move into ``toolguard_items``. Schema 1 rows stay
    whole (``layout`` 1) until their next save.
    """
    old = f"toolguard_threads_schema{version}"
    conn.execute(f"ALTER TABLE toolguard_threads RENAME TO {old}")
    conn.execute(CREATE_THREADS)
    layout = "layout" if version == 2 else "1"
    columns = "thread_id, version, state, updated_at"
    copy = (
        f"INSERT INTO toolguard_threads (thread_key, {columns}, layout)"  # noqa: S608 - fixed names
        f" SELECT rowid, {columns}, {layout} FROM {old} ORDER BY rowid"
    )
    conn.execute(copy)
    conn.execute(CREATE_ITEMS)
    if version == 2:
        for item_kind, table in enumerate(_OLD_LIST_TABLES):
            if not has_table(conn, table):
                continue
            move = (
                "INSERT INTO toolguard_items (thread_key, kind, seq, body)"  # noqa: S608 - fixed names
                f" SELECT t.thread_key, {item_kind}, l.seq, l.body FROM {table} AS l"
                " JOIN toolguard_threads AS t ON t.thread_id = l.thread_id"
            )
            conn.execute(move)
            conn.execute(f"DROP TABLE {table}")
    conn.execute(f"DROP TABLE {old}")
