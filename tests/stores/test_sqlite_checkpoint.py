"""SQLiteStore checkpoints its WAL in a background thread, never inside a commit on the loop.

SQLite's automatic checkpoint copies the WAL back into the database file
(with an ``fsync``) inside whichever commit crosses a thousand pages: on
the event loop's thread, that is a stall of milliseconds. The store turns
it off on its own connection and starts a passive checkpoint in a
background thread after every ``_CHECKPOINT_EVERY`` write transactions.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import checkpoints_done
from toolguard._stores.protocol import ThreadState
from toolguard._stores.sqlite import _CHECKPOINT_EVERY, _WAL_PAGES, SQLiteStore
from toolguard.records import AuditEvent


def _wal_bytes(path: Path) -> int:
    return os.path.getsize(f"{path}-wal")


def _wal_frames(path: Path) -> int:
    """Frames (page images) the WAL file has room for: its size less its header, per frame."""
    with open(f"{path}-wal", "rb") as file:
        header = file.read(32)
    page_size = int.from_bytes(header[8:12], "big")
    return (_wal_bytes(path) - 32) // (24 + page_size)


def _wal_restarts(path: Path) -> int:
    """The WAL header's checkpoint sequence number: one more each time a writer restarts it."""
    with open(f"{path}-wal", "rb") as file:
        header = file.read(32)
    return int.from_bytes(header[12:16], "big")


def _db_pages(path: Path) -> int:
    """Pages in the database file itself (what checkpoints have copied there), WAL aside."""
    with path.open("rb") as file:
        header = file.read(100)
    if len(header) < 100:
        return 0
    page_size = int.from_bytes(header[16:18], "big")
    return path.stat().st_size // (65536 if page_size == 1 else page_size)


async def _write(store: SQLiteStore, count: int, *, prefix: str = "t") -> None:
    for i in range(count):
        state = ThreadState(
            thread_id=f"{prefix}{i}", messages=[{"role": "user", "content": "x" * 3000}]
        )
        await store.save(state, expected_version=None)


async def test_the_store_connection_does_not_checkpoint_inside_commits(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "t.db") as store:
        await _write(store, 1)
        assert store._conn is not None
        assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        # Another connection to the file keeps SQLite's default.
        with contextlib.closing(sqlite3.connect(tmp_path / "t.db")) as other:
            assert other.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)


async def test_a_background_thread_checkpoints_after_enough_writes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await _write(store, _CHECKPOINT_EVERY - 1)
        assert store._checkpointer is None
        pages_before = _db_pages(path)
        await _write(store, 1, prefix="last")
        thread = store._checkpointer
        assert thread is not None
        assert thread.name == "toolguard-sqlite-checkpoint"
        assert thread is not threading.current_thread()
        assert checkpoints_done(store, 10)
        assert thread.is_alive()  # it waits for the next request, its connection open
        assert store._wal_full is False  # nothing was written meanwhile: the WAL restarts
        # The checkpoint copied the WAL's pages into the database file: 64 threads of
        # about 3 KB each cannot fit in the few pages the file had before.
        assert pages_before < 10
        assert _db_pages(path) > pages_before + _CHECKPOINT_EVERY // 2
        assert store._writes == 0
        # Everything is still there, read back through the store.
        loaded = await store.load("last0")
        assert loaded is not None
        assert loaded.messages == [{"role": "user", "content": "x" * 3000}]
        assert len(await store.thread_ids()) == _CHECKPOINT_EVERY


async def test_one_thread_and_one_connection_serve_every_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Later checkpoints reuse the background thread and its connection."""
    opened: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(threading.current_thread().name)
        return real_connect(*args, **kwargs)

    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await _write(store, 1, prefix="first")  # opens the store's own connection
        monkeypatch.setattr(sqlite3, "connect", connect)
        await _write(store, _CHECKPOINT_EVERY - 1)
        assert checkpoints_done(store, 10)
        thread = store._checkpointer
        pages = _db_pages(path)
        await _write(store, 2 * _CHECKPOINT_EVERY, prefix="more")
        assert checkpoints_done(store, 10)
        assert store._checkpointer is thread
        assert opened == ["toolguard-sqlite-checkpoint"]
        assert _db_pages(path) > pages + _CHECKPOINT_EVERY // 2  # the later ones copied too
    assert thread is not None
    assert not thread.is_alive()  # closing the store ends it (and closes its connection)


async def test_an_idle_checkpoint_thread_ends_and_a_new_one_takes_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store nobody closes is not kept alive by its checkpoint thread for long."""
    import toolguard._stores.sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "_CHECKPOINT_IDLE", 0.05)
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await _write(store, _CHECKPOINT_EVERY)
        first = store._checkpointer
        assert first is not None
        first.join(timeout=10)
        assert not first.is_alive()
        assert store._checkpointer is None
        pages = _db_pages(path)
        await _write(store, _CHECKPOINT_EVERY, prefix="more")
        second = store._checkpointer
        assert second is not None
        assert second is not first
        assert checkpoints_done(store, 10)
        assert _db_pages(path) > pages  # the new thread checkpointed the later writes
        assert len(await store.thread_ids()) == 2 * _CHECKPOINT_EVERY


async def test_a_full_wal_is_restarted_by_the_next_writes_and_stops_growing(
    tmp_path: Path,
) -> None:
    """A background checkpoint that finds _WAL_PAGES or more in the WAL marks it full; the next
    write checkpoints first and starts the WAL again from its beginning, so later writes reuse
    the file instead of growing it.

    A reader holding an old snapshot keeps every checkpoint from finishing while the WAL fills,
    so the WAL's size does not depend on how fast the background thread runs.
    """
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await _write(store, 1, prefix="first")
        with contextlib.closing(sqlite3.connect(path)) as reader:
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM toolguard_threads").fetchall() == [(1,)]
            await _write(store, 6 * _CHECKPOINT_EVERY)
            assert checkpoints_done(store, 10)
            reader.rollback()
        full_size = _wal_bytes(path)
        assert _wal_frames(path) >= _WAL_PAGES

        store._start_checkpoint()  # nothing holds the WAL now: it is copied whole, not restarted
        assert checkpoints_done(store, 10)
        assert store._wal_full is True
        assert _wal_bytes(path) == full_size
        restarts = _wal_restarts(path)

        assert store._conn is not None
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        await _write(store, 1, prefix="next")
        store._conn.set_trace_callback(None)
        assert statements[:2] == ["PRAGMA wal_checkpoint(PASSIVE)", "BEGIN IMMEDIATE"]
        assert store._wal_full is False
        assert _wal_restarts(path) == restarts + 1  # this write started the WAL again

        # A third of the pages the full WAL held: written from the WAL's start, whatever the
        # background checkpoints do meanwhile, so the file does not grow.
        await _write(store, 2 * _CHECKPOINT_EVERY, prefix="more")
        assert checkpoints_done(store, 10)
        assert _wal_bytes(path) == full_size
        assert (
            len(await store.thread_ids()) == 1 + 6 * _CHECKPOINT_EVERY + 1 + 2 * _CHECKPOINT_EVERY
        )


async def test_a_wal_left_full_is_checkpointed_by_the_next_write(tmp_path: Path) -> None:
    """After a background checkpoint that left the WAL full, the next write checkpoints too."""
    async with SQLiteStore(tmp_path / "t.db") as store:
        await _write(store, 1)
        assert store._conn is not None
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        store._wal_full = True
        await _write(store, 1, prefix="next")
        await _write(store, 1, prefix="after")
        store._conn.set_trace_callback(None)
        checkpoints = [s for s in statements if "wal_checkpoint" in s]
        assert checkpoints == ["PRAGMA wal_checkpoint(PASSIVE)"]
        assert statements[0] == checkpoints[0]  # before the write, which restarts the WAL
        assert statements[1] == "BEGIN IMMEDIATE"
        assert store._wal_full is False


async def test_a_failing_checkpoint_before_a_write_never_fails_the_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's own checkpoint only logs its failure; the write itself lands."""
    import toolguard._stores.sqlite as sqlite_module

    def broken(conn: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    async with SQLiteStore(tmp_path / "t.db") as store:
        await _write(store, 1)
        store._wal_full = True
        monkeypatch.setattr(sqlite_module, "_checkpoint_here", broken)
        with caplog.at_level(logging.DEBUG, logger="toolguard"):
            await _write(store, 1, prefix="next")
        assert [r.getMessage() for r in caplog.records] == [
            f"toolguard: checkpoint of {str(tmp_path / 't.db')!r} failed: disk I/O error"
        ]
        assert (await store.load("next0")) is not None
        assert store._wal_full is False


async def test_close_waits_for_a_running_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await _write(store, _CHECKPOINT_EVERY)
    thread = store._checkpointer
    assert thread is not None
    store.close()
    assert not thread.is_alive()
    assert store._conn is None
    # Closed: no checkpoint is started any more, and the data is all in the file.
    store._start_checkpoint()
    assert store._checkpointer is thread
    async with SQLiteStore(path) as again:
        assert len(await again.thread_ids()) == _CHECKPOINT_EVERY


async def test_a_failing_checkpoint_is_logged_and_harmless(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint that cannot open the file only logs (debug); the next one tries again."""
    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        await _write(store, 1)
        missing = str(tmp_path / "missing-dir" / "t.db")
        store._path = missing  # the background thread cannot open this
        with caplog.at_level(logging.DEBUG, logger="toolguard"):
            store._start_checkpoint()
            assert store._checkpointer is not None
            assert checkpoints_done(store, 10)
        store._path = str(path)
        assert [(r.name, r.levelno) for r in caplog.records] == [("toolguard", logging.DEBUG)]
        assert caplog.records[0].getMessage() == (
            f"toolguard: background checkpoint of {missing!r} failed: unable to open database file"
        )
        assert store._wal_full is False
        assert (await store.load("t0")) is not None
        await _write(store, 1, prefix="after")
        assert (await store.load("after0")) is not None


# ----------------------------------------------------------------------------- creating a thread


async def test_creating_a_thread_checks_for_leftover_rows_in_one_statement(tmp_path: Path) -> None:
    """A new thread's save: the insert, one look for leftover list rows, the rows, commit."""
    from toolguard._stores.protocol import Changes

    async with SQLiteStore(tmp_path / "t.db") as store:
        await _write(store, 1)  # opens the connection and creates the schema
        assert store._conn is not None
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        state = ThreadState(thread_id="new", messages=[{"role": "user", "content": "hi"}])
        await store.save_changes(state, Changes.whole(state), expected_version=None)
        store._conn.set_trace_callback(None)
        assert [s.split(" ")[0] for s in statements] == [
            "BEGIN",
            "INSERT",
            "SELECT",
            "INSERT",
            "COMMIT",
        ]
        assert statements[2] == "SELECT 1 FROM toolguard_items WHERE thread_key = 2 LIMIT 1"


async def test_a_save_writes_its_rows_with_one_statement(tmp_path: Path) -> None:
    """An update: read key/version/next audit seq, update the head, ONE insert of all rows."""
    from toolguard._core.audit import requested_event
    from toolguard._core.records import Action
    from toolguard._stores.protocol import Changes

    path = tmp_path / "t.db"

    def action(status: str) -> Action:
        return Action(
            id="a1", call_id="c1", name="send", args={}, description="d", status=status, digest="x"
        )

    def event(kind: str) -> AuditEvent:
        return requested_event("t", "r", action("requested")).model_copy(update={"kind": kind})

    async with SQLiteStore(path) as store:
        first = ThreadState(
            thread_id="t",
            messages=[{"role": "user", "content": "hi"}],
            actions=[action("requested")],
            audit=[event("requested")],
        )
        saved = await store.save_changes(first, Changes.whole(first), expected_version=None)
        assert store._conn is not None
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        added = [{"role": "assistant", "content": "ok"}]
        update = saved.model_copy(
            update={
                "messages": [*saved.messages, *added],
                "actions": [action("executed")],
                "audit": [*saved.audit, event("decided"), event("executed")],
            }
        )
        changes = Changes(1, added, [(0, update.actions[0])], update.audit[1:], 1)
        await store.save_changes(update, changes, expected_version=1)
        store._conn.set_trace_callback(None)
        assert [s.split(" ")[0] for s in statements] == [
            "BEGIN",
            "SELECT",
            "UPDATE",
            "INSERT",
            "INSERT",
            "INSERT",
            "INSERT",
            "COMMIT",
        ]  # the trace shows each row of the one executemany
        assert len({s.split(" VALUES")[0] for s in statements[3:7]}) == 1
        with contextlib.closing(sqlite3.connect(path)) as conn:
            rows = conn.execute("SELECT kind, seq FROM toolguard_items ORDER BY 1, 2").fetchall()
        assert rows == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1), (2, 2)]
        loaded = await store.load("t")
        assert loaded is not None
        assert (loaded.messages, loaded.actions, loaded.audit) == (
            update.messages,
            update.actions,
            update.audit,
        )


async def test_rows_left_by_a_thread_removed_by_hand_are_not_inherited(tmp_path: Path) -> None:
    """A thread row deleted by hand leaves its rows; a new thread given its key drops them."""
    from toolguard._stores.protocol import Changes

    path = tmp_path / "t.db"
    async with SQLiteStore(path) as store:
        first = ThreadState(thread_id="t", messages=[{"role": "user", "content": "old"}] * 3)
        await store.save_changes(first, Changes.whole(first), expected_version=None)
        with contextlib.closing(sqlite3.connect(path)) as conn:
            conn.execute("DELETE FROM toolguard_threads WHERE thread_id = 't'")
            conn.commit()
        assert await store.load("t") is None
        again = ThreadState(thread_id="t", messages=[{"role": "user", "content": "new"}])
        await store.save_changes(again, Changes.whole(again), expected_version=None)
        loaded = await store.load("t")
        assert loaded is not None
        assert loaded.messages == [{"role": "user", "content": "new"}]
        with contextlib.closing(sqlite3.connect(path)) as conn:
            rows = conn.execute("SELECT * FROM toolguard_items").fetchall()
            keys = conn.execute("SELECT thread_key, thread_id FROM toolguard_threads").fetchall()
        # SQLite gave the new thread the free key 1 again: the old rows were dropped, not inherited.
        assert keys == [(1, "t")]
        assert rows == [(1, 0, 0, '{"role":"user","content":"new"}')]


async def test_starting_a_checkpoint_never_waits_for_the_connection(tmp_path: Path) -> None:
    """The loop starts checkpoints even while a worker thread holds the connection's lock."""
    async with SQLiteStore(tmp_path / "t.db") as store:
        await _write(store, 1)
        store._lock.acquire()  # a long statement in a worker thread, waiting for a writer
        try:
            starter = threading.Thread(target=store._start_checkpoint)
            starter.start()
            starter.join(timeout=5)
            assert not starter.is_alive()
            assert store._checkpointer is not None
            assert checkpoints_done(store, 10)
        finally:
            store._lock.release()
