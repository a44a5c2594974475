"""The PostgreSQL store's tables, its schema version and the migration of older tables.

The threads table is created on first use (under an advisory lock, so
processes starting together do not race) and marked with the comment
``toolguard schema version 2``. A table of ``toolguard
schema version 1`` is migrated on first use, under the same advisory lock
and in one transaction: the ``layout`` column and the three list tables are
added; its rows stay whole until their next save. A table with a newer
schema version, or one that exists without that comment (another
application's table of the same name), is refused with
:class:`~toolguard.SchemaVersionError` rather than misread or overwritten.
"""

from __future__ import annotations

import re
from typing import Any, Final

import psycopg
from psycopg import sql

from toolguard._core.errors import SchemaVersionError

SCHEMA_VERSION: Final = 2
"""The schema version this version of toolguard writes and reads (kept in the table's comment)."""

MAX_IDENTIFIER: Final = 63  # PostgreSQL's NAMEDATALEN - 1
LIST_SUFFIXES: Final = ("_messages", "_actions", "_audit")
"""The list tables' names: the threads table's (cut to fit) plus these."""
CLAIMS_SUFFIX: Final = "_claims"
SECRETS_SUFFIX: Final = "_secrets"

_COMMENT_PREFIX: Final = "toolguard schema version "
_COMMENT_PATTERN: Final = re.compile(r"toolguard schema version (\d+)")
_LOCK_CLASS: Final = 0x7467  # first key of the advisory lock that guards table creation ("tg")

_CREATE_TABLE: Final = """
CREATE TABLE {table} (
    thread_id TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    state JSON NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    layout SMALLINT NOT NULL DEFAULT 1
)
"""

_ADD_LAYOUT: Final = "ALTER TABLE {table} ADD COLUMN layout SMALLINT NOT NULL DEFAULT 1"

_CREATE_LIST: Final = """
CREATE TABLE IF NOT EXISTS {table} (
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
)
"""

_CREATE_CLAIMS: Final = """
CREATE TABLE IF NOT EXISTS {table} (
    key TEXT PRIMARY KEY,
    claimed_at TIMESTAMPTZ NOT NULL
)
"""

_CREATE_SECRETS: Final = """
CREATE TABLE IF NOT EXISTS {table} (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
)
"""

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


def suffixed(table: str, suffix: str) -> str:
    """The name of a table that goes with ``table``: its name (cut to fit) plus ``suffix``."""
    return table[: MAX_IDENTIFIER - len(suffix)] + suffix


async def prepare(conn: Connection, table: str) -> None:
    """Create the tables, or migrate a schema 1 table, unless they are there already."""
    ident = sql.Identifier(table)
    if await schema_version(conn, table) == SCHEMA_VERSION:
        return
    # Stores starting together must not both create the table: they queue on a session
    # advisory lock, and each checks again in a transaction that starts after it holds
    # the lock (so it sees the table another one committed meanwhile). On failure the
    # caller closes the connection, which releases the lock.
    key = (_LOCK_CLASS, table)
    await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
    async with conn.transaction():
        version = await schema_version(conn, table)
        if version != SCHEMA_VERSION:
            if version is None:
                await conn.execute(sql.SQL(_CREATE_TABLE).format(table=ident))
            else:
                # Schema 1: its rows stay whole until their next save.
                await conn.execute(sql.SQL(_ADD_LAYOUT).format(table=ident))
            for suffix in LIST_SUFFIXES:
                list_table = sql.Identifier(suffixed(table, suffix))
                await conn.execute(sql.SQL(_CREATE_LIST).format(table=list_table))
            await conn.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    ident, sql.Literal(f"{_COMMENT_PREFIX}{SCHEMA_VERSION}")
                )
            )
    await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)


async def create_claims(conn: Connection, table: str) -> None:
    """Create the claims table of ``table`` if missing (under the table-creation advisory lock)."""
    key = (_LOCK_CLASS, table)
    claims = sql.Identifier(suffixed(table, CLAIMS_SUFFIX))
    await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
    try:
        await conn.execute(sql.SQL(_CREATE_CLAIMS).format(table=claims))
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)


async def create_secrets(conn: Connection, table: str) -> None:
    """Create the secrets table of ``table`` if missing (under the table-creation advisory lock)."""
    key = (_LOCK_CLASS, table)
    secrets = sql.Identifier(suffixed(table, SECRETS_SUFFIX))
    await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
    try:
        await conn.execute(sql.SQL(_CREATE_SECRETS).format(table=secrets))
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)


async def schema_version(conn: Connection, table: str) -> int | None:
    """The table's schema version, or ``None`` when there is no table.

    Raises:
        SchemaVersionError: the version is newer than this toolguard's, or
            the table was not made by toolguard.
    """
    cursor = await conn.execute(
        "SELECT t.oid IS NOT NULL, obj_description(t.oid::oid, 'pg_class')"
        " FROM (SELECT to_regclass(%s) AS oid) AS t",
        (sql.Identifier(table).as_string(conn),),
    )
    row = await cursor.fetchone()
    if row is None or not row[0]:
        return None
    comment = row[1]
    match = _COMMENT_PATTERN.fullmatch(comment) if isinstance(comment, str) else None
    if match is None:
        msg = (
            f"Table {table!r} exists but was not created by toolguard (its comment is"
            f" {comment!r}, not '{_COMMENT_PREFIX}{SCHEMA_VERSION}'): choose another table"
        )
        raise SchemaVersionError(msg)
    version = int(match.group(1))
    if version > SCHEMA_VERSION:
        msg = (
            f"Table {table!r} has toolguard schema version {version}, but this"
            f" version of toolguard supports only version {SCHEMA_VERSION}:"
            " upgrade toolguard to use it"
        )
        raise SchemaVersionError(msg)
    return version
