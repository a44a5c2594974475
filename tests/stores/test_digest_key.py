"""Each store keeps one digest key: the secret of the digests of a chat given no signing_key.

Made at random on first use and kept with the threads (MemoryStore: in memory; SQLiteStore:
the table ``toolguard_secrets``; PostgresStore: ``<table>_secrets``), the same for every store
object on the same data, also when their first uses race. A store without ``digest_key`` (a
third-party one) still works, with a key of the process. A review paused by a toolguard that
made plain digests (no key) fails closed when approved after the upgrade.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from tests.helpers import fresh_postgres_table, make_mailing_chat, postgres_dsn
from toolguard import MemoryStore, SQLiteStore, ThreadState
from toolguard._core.records import call_digest
from toolguard._stores.protocol import PROCESS_KEY
from toolguard.postgres import PostgresStore

AnyStore = MemoryStore | SQLiteStore | PostgresStore
TIMEOUT = 60
TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A fresh store of each kind."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "t.db") as sqlite_store:
            yield sqlite_store
    else:
        dsn = postgres_dsn()
        async with fresh_postgres_table() as table, PostgresStore(dsn, table=table) as pg_store:
            yield pg_store


@pytest.fixture(params=["sqlite", "postgres"])
async def opener(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], SQLiteStore | PostgresStore]]:
    """Opens a new store on one database (as another process would)."""
    if request.param == "sqlite":
        path = tmp_path / "t.db"
        yield lambda: SQLiteStore(path)
    else:
        dsn = postgres_dsn()
        async with fresh_postgres_table() as table:
            yield lambda: PostgresStore(dsn, table=table)


async def test_a_store_keeps_one_random_key(store: AnyStore) -> None:
    key = await store.digest_key()
    assert (type(key), len(key)) == (bytes, 32)
    assert await store.digest_key() == key
    assert key != await MemoryStore().digest_key()  # another store's data: another key


async def test_stores_on_one_database_agree_on_the_key_even_when_they_race(
    opener: Callable[[], SQLiteStore | PostgresStore],
) -> None:
    stores = [opener() for _ in range(8)]
    keys: list[bytes] = []

    async def first_use(one: SQLiteStore | PostgresStore) -> None:
        keys.append(await one.digest_key())

    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as tasks:
                for one in stores:
                    tasks.start_soon(first_use, one)
    finally:
        for one in stores:
            await one.aclose()
    assert len(keys) == 8
    assert len(set(keys)) == 1
    async with opener() as later:  # a restart reads the same key
        assert await later.digest_key() == keys[0]


async def test_sqlite_keeps_the_key_in_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await store.thread_ids()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            before = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        key = await store.digest_key()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT name, value FROM toolguard_secrets").fetchall()
    assert ("toolguard_secrets",) not in before  # made on first use, not before
    assert rows == [("digest_key", key)]


async def test_a_chat_with_signing_key_never_makes_a_store_key(tmp_path: Path) -> None:
    """Its own key signs its digests; the store's is neither made nor used."""
    path = tmp_path / "t.db"
    runs: list[str] = []
    async with SQLiteStore(path) as store:
        chat = make_mailing_chat(store, runs)
        chat.runner.signing_key = b"the app's own signing key"
        paused = await chat.send_message("Mail Alice")
        state = await chat.get_thread(paused.thread_id)
    assert state.pending is not None
    assert [a.digest for a in state.pending.actions] == [
        call_digest(
            "send_email",
            {"to": "alice@example.com", "body": "Hi"},
            b"the app's own signing key",
            thread_id=paused.thread_id,
            review_id=paused.review_id or "",
        )
    ]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    assert ("toolguard_secrets",) not in tables


class PlainStore:
    """A third-party store: load, save and thread_ids only (no digest_key)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def load(self, thread_id: str) -> ThreadState | None:
        return await self.inner.load(thread_id)

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        return await self.inner.save(state, expected_version=expected_version)

    async def thread_ids(self) -> list[str]:
        return await self.inner.thread_ids()


async def test_a_store_without_a_key_of_its_own_gets_the_processs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs: list[str] = []
    store = PlainStore()
    chat = make_mailing_chat(store, runs)
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        paused = await chat.send_message("Mail Alice")
        again = make_mailing_chat(store, runs)  # another chat, same class: warned once
        done = await again.submit_review([{"type": "approve"}], paused.thread_id)
    assert (done.reply, runs) == ("Done: sent to alice@example.com", ["alice@example.com"])
    assert chat.runner.signing_key == PROCESS_KEY
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolguard"]
    assert warnings == [
        (
            "PlainStore keeps no digest key (no digest_key() method): the digests of this"
            " process use a key of its own, so reviews it leaves pending cannot be approved"
            " after a restart or by another process; pass signing_key= to keep them"
        )
    ]


class ShortKeyStore(PlainStore):
    """A store whose digest_key() gives too few bytes."""

    async def digest_key(self) -> bytes:
        return b"short"


async def test_a_store_key_too_short_is_refused_and_nothing_is_saved() -> None:
    store = ShortKeyStore()
    chat = make_mailing_chat(store, [])
    with pytest.raises(TypeError) as info:
        await chat.send_message("Mail Alice")
    assert str(info.value) == (
        "ShortKeyStore.digest_key() must return at least 16 random bytes, got 5 bytes"
    )
    assert await store.thread_ids() == []


async def test_a_review_paused_with_plain_digests_fails_closed_after_the_upgrade(
    tmp_path: Path,
) -> None:
    """As a toolguard that made unkeyed digests left it: approving runs nothing (TAMPERED)."""
    runs: list[str] = []
    memory = MemoryStore()
    paused = await make_mailing_chat(memory, runs).send_message("Mail Alice")
    state = await memory.load(paused.thread_id)
    assert state is not None
    assert state.pending is not None
    plain = [
        action.model_copy(
            update={
                "digest": call_digest(
                    action.name,
                    dict(state.pending.calls[0].args),
                    thread_id=state.thread_id,
                    review_id=state.pending.review_id,
                )
            }
        )
        for action in state.pending.actions
    ]
    old = state.model_copy(
        update={
            "pending": state.pending.model_copy(update={"actions": plain}),
            "actions": plain,
            "version": 0,
        }
    )
    async with SQLiteStore(tmp_path / "old.db") as store:
        await store.save(old, expected_version=None)
        chat = make_mailing_chat(store, runs)
        done = await chat.submit_review([{"type": "approve"}], paused.thread_id)
        after = await chat.get_thread(paused.thread_id)
    assert (done.reply, runs) == (f"Done: Refused, not executed: {TAMPERED}", [])
    assert [(a.status, a.result.content if a.result else None) for a in after.actions] == [
        ("failed", TAMPERED)
    ]
