"""Once-only for hand-written loops: a paused turn replayed to the runner never runs twice.

Attack class: a stored ``PendingTurn`` is resumed again — a retried request, a
double click, a copy of the JSON, two workers racing on the same queue item —
hoping the approved tools run a second time. ``Runner.resume`` remembers the
turns this process resumed or closed (any runner, bounded), and with
``Runner(claims=store)`` claims the turn in a shared store first, so two real
processes racing on the same serialized turn run its tool once (SQLite and
PostgreSQL).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings

from tests.adversarial.strategies import odd_ids
from toolguard import (
    AlreadyResumedError,
    InvalidReviewDecisionError,
    MemoryStore,
    PendingTurn,
    Runner,
    SQLiteStore,
    ToolCall,
    requires_approval,
)
from toolguard._enforce.once import REMEMBERED_TURNS, FinishedTurns
from toolguard.hooks import Claims
from toolguard.text import set_language

TIMEOUT = 60  # seconds: the bound of every wait
DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
ARGS = {"to": "alice@example.com", "body": "hi"}
APPROVE = [{"type": "approve"}]


def already(review_id: str) -> str:
    """AlreadyResumedError's text."""
    return (
        f"The paused turn {review_id} was already resumed or closed; its tools are not run again."
    )


def make_runner(log: list[dict[str, Any]], **options: Any) -> Runner:
    """A runner over one guarded tool that records its calls."""

    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append({"to": to, "body": body})
        return "sent"

    return Runner([send_email], sync_in_thread=False, **options)


async def pause(runner: Runner) -> PendingTurn:
    """Pause one send_email call."""
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ARGS)])
    assert step.pending is not None
    return step.pending


# --- in one process ------------------------------------------------------------------------------


async def test_a_second_resume_raises_and_runs_nothing() -> None:
    """The same runner, another runner, a JSON copy: only the first resume runs the tool."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log)
    pending = await pause(runner)
    copy = PendingTurn.model_validate_json(pending.model_dump_json())

    done = await runner.resume(pending, APPROVE)

    assert [(r.status, r.content) for r in done.results] == [("success", "sent")]
    for again, turn in [(runner, pending), (make_runner(log), pending), (make_runner(log), copy)]:
        with pytest.raises(AlreadyResumedError) as caught:
            await again.resume(turn, APPROVE)
        assert str(caught.value) == already(pending.review_id)
        assert caught.value.review_id == pending.review_id
        assert isinstance(caught.value, RuntimeError)
    assert log == [ARGS]


def test_resume_sync_is_once_only_too() -> None:
    """resume_sync of a turn resumed before raises as well."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log)
    pending = paused_sync(runner)
    done = runner.resume_sync(pending, APPROVE, thread_id="t1")

    assert [(r.status, r.content) for r in done.results] == [("success", "sent")]
    with pytest.raises(AlreadyResumedError):
        runner.resume_sync(pending, [{"type": "reject"}], thread_id="t1")
    assert log == [ARGS]


def paused_sync(runner: Runner) -> PendingTurn:
    """Pause one send_email call without an event loop."""
    step = runner.run_sync([ToolCall(id="c1", name="send_email", args=ARGS)], thread_id="t1")
    assert step.pending is not None
    return step.pending


async def test_already_resumed_text_in_indonesian() -> None:
    """The error text follows the Indonesian catalog."""
    runner = make_runner([])
    pending = await pause(runner)
    await runner.resume(pending, [{"type": "reject"}])
    set_language("id")

    with pytest.raises(AlreadyResumedError) as caught:
        await runner.resume(pending, APPROVE)

    assert str(caught.value) == (
        f"Giliran yang dijeda {pending.review_id} sudah dilanjutkan atau ditutup; tool-nya tidak"
        " dijalankan lagi."
    )


async def test_close_and_resume_exclude_each_other() -> None:
    """A closed turn cannot be resumed, a resumed one cannot be closed; nothing runs twice."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log)
    closed = await pause(runner)
    resumed = await pause(runner)

    step = runner.close(closed, "expired")
    await runner.resume(resumed, APPROVE)

    assert [a.status for a in step.actions] == ["expired"]
    with pytest.raises(AlreadyResumedError):
        await runner.resume(closed, APPROVE)
    with pytest.raises(AlreadyResumedError):
        runner.close(closed, "cancelled")
    with pytest.raises(AlreadyResumedError):
        runner.close(resumed, "expired")
    assert log == [ARGS]


async def test_interrupted_finishes_a_resumed_turn_once() -> None:
    """interrupted() ends a turn this process resumed (outcome unknown), but only once."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log)
    pending = await pause(runner)
    await runner.resume(pending, APPROVE)

    step = runner.interrupted(pending, APPROVE)

    assert [a.status for a in step.actions] == ["failed"]
    with pytest.raises(AlreadyResumedError):
        runner.interrupted(pending, APPROVE)
    with pytest.raises(AlreadyResumedError):
        await runner.resume(pending, APPROVE)
    assert log == [ARGS]


async def test_refused_decisions_do_not_use_up_the_turn() -> None:
    """Malformed decisions raise and leave the turn resumable: nothing ran, nothing was claimed."""
    log: list[dict[str, Any]] = []
    store = MemoryStore()
    runner = make_runner(log, claims=store)
    pending = await pause(runner)

    with pytest.raises(InvalidReviewDecisionError):
        await runner.resume(pending, "approve")
    done = await runner.resume(pending, APPROVE)

    assert [r.status for r in done.results] == ["success"]
    assert log == [ARGS]
    assert await store.claim(f"resume:{pending.review_id}") is False


async def test_concurrent_resumes_in_one_process_run_once() -> None:
    """Ten tasks resuming the same turn at once: one runs the tool, nine get the error."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log, claims=MemoryStore())
    pending = await pause(runner)
    outcomes: list[str] = []

    async def one() -> None:
        try:
            await runner.resume(pending, APPROVE)
            outcomes.append("ran")
        except AlreadyResumedError:
            outcomes.append("already")

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(one)

    assert sorted(outcomes) == ["already"] * 9 + ["ran"]
    assert log == [ARGS]


def test_memory_of_finished_turns_is_bounded() -> None:
    """The process remembers the latest REMEMBERED_TURNS ids; older ones are forgotten."""
    assert REMEMBERED_TURNS == 10_000
    turns = FinishedTurns(3)
    for review_id in ["r1", "r2", "r3", "r4"]:
        turns.finish(review_id, "resumed")

    assert list(turns._ids) == ["r2", "r3", "r4"]
    with pytest.raises(AlreadyResumedError):
        turns.finish("r4", "closed")
    turns.finish("r1", "resumed")  # forgotten: only claims= protects turns this old
    assert list(turns._ids) == ["r2", "r3", "r4", "r1"][-3:]


# --- the claims API ------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def claims(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Claims]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "claims.db") as store:
            yield store


async def test_claim_is_true_once(claims: Claims) -> None:
    """claim(key) is True for the first caller only; keys are independent."""
    assert isinstance(claims, Claims)
    assert [await claims.claim("k1"), await claims.claim("k1"), await claims.claim("k2")] == [
        True,
        False,
        True,
    ]


@settings(max_examples=25, deadline=None)
@given(key=odd_ids)
def test_claim_takes_any_text(key: str) -> None:
    """Empty, huge, surrogate or deceptive keys are claimed once, in memory and in SQLite."""

    async def go() -> list[bool]:
        memory = MemoryStore()
        async with SQLiteStore(":memory:") as sqlite_store:
            return [
                await memory.claim(key),
                await memory.claim(key),
                await sqlite_store.claim(key),
                await sqlite_store.claim(key),
            ]

    assert anyio.run(go) == [True, False, True, False]


async def test_claim_key_must_be_text(claims: Claims) -> None:
    """A key that is not text is a TypeError naming the argument."""
    with pytest.raises(TypeError) as caught:
        await claims.claim(123)  # type: ignore[arg-type]
    assert str(caught.value) == "key must be text, got int"


def test_runner_claims_must_have_claim() -> None:
    """Runner(claims=...) without a claim method is refused when the runner is built."""
    with pytest.raises(TypeError) as caught:
        Runner([], claims=object())  # type: ignore[arg-type]
    assert str(caught.value) == (
        "claims must be a store with an async claim(key) method (MemoryStore, SQLiteStore,"
        " PostgresStore), got object"
    )


async def test_a_turn_claimed_elsewhere_does_not_run(claims: Claims) -> None:
    """When another process claimed the turn, resume raises and runs nothing."""
    log: list[dict[str, Any]] = []
    runner = make_runner(log, claims=claims)
    pending = await pause(runner)
    assert await claims.claim(f"resume:{pending.review_id}") is True  # "another process"

    with pytest.raises(AlreadyResumedError) as caught:
        await runner.resume(pending, APPROVE)

    assert str(caught.value) == already(pending.review_id)
    assert log == []


async def test_a_failing_claim_runs_nothing_and_can_be_retried() -> None:
    """A claims store that fails raises its error; nothing ran and the turn stays resumable."""
    log: list[dict[str, Any]] = []

    class Flaky:
        def __init__(self) -> None:
            self.calls = 0

        async def claim(self, key: str) -> bool:
            self.calls += 1
            if self.calls == 1:
                msg = "database unavailable"
                raise OSError(msg)
            return True

    runner = make_runner(log, claims=Flaky())
    pending = await pause(runner)

    with pytest.raises(OSError, match="database unavailable"):
        await runner.resume(pending, APPROVE)
    assert log == []
    done = await runner.resume(pending, APPROVE)

    assert [r.status for r in done.results] == ["success"]
    assert log == [ARGS]


async def test_sqlite_claims_table_is_added_to_an_old_database(tmp_path: Path) -> None:
    """A database written by toolguard 0.1.0 (threads table only) gets the claims table on use."""
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE toolguard_threads (thread_id TEXT PRIMARY KEY,"
            " version INTEGER NOT NULL, state TEXT NOT NULL, updated_at TEXT NOT NULL)"
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()

    async with SQLiteStore(db) as store:
        assert await store.thread_ids() == []
        assert [await store.claim("k"), await store.claim("k")] == [True, False]

    with sqlite3.connect(db) as conn:
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    assert tables == [
        "sqlite_autoindex_toolguard_claims_1",
        "sqlite_autoindex_toolguard_threads_1",
        "toolguard_claims",
        "toolguard_items",
        "toolguard_threads",
    ]
    assert version == 3  # migrated to schema 3 on open


# --- across processes ----------------------------------------------------------------------------

# argv: store kind, database (file or DSN), table, pending turn file, effects file, go file.
RACER = textwrap.dedent(
    '''
    import json
    import sys
    import time
    from pathlib import Path

    import anyio

    from toolguard import AlreadyResumedError, PendingTurn, Runner, SQLiteStore, requires_approval

    kind, db, table = sys.argv[1], sys.argv[2], sys.argv[3]
    turn_file, effects, go = Path(sys.argv[4]), Path(sys.argv[5]), Path(sys.argv[6])


    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        with effects.open("a", encoding="utf-8") as f:
            f.write("ran\\n")
        return "sent"


    def open_store():
        if kind == "sqlite":
            return SQLiteStore(db)
        from toolguard.postgres import PostgresStore

        return PostgresStore(db, table=table)


    async def main():
        pending = PendingTurn.model_validate_json(turn_file.read_text(encoding="utf-8"))
        async with open_store() as store:
            runner = Runner([send_email], claims=store)
            await store.claim("warm-up")  # open the connection before the race
            print("ready", flush=True)
            deadline = time.monotonic() + 60
            while not go.exists():
                assert time.monotonic() < deadline, "no go signal"
                await anyio.sleep(0.001)
            try:
                step = await runner.resume(pending, [{"type": "approve"}])
            except AlreadyResumedError as exc:
                print(json.dumps({"outcome": "already", "text": str(exc)}), flush=True)
            else:
                print(json.dumps({"outcome": step.results[0].content}), flush=True)


    anyio.run(main)
    '''
)


def first_line(proc: subprocess.Popen[str]) -> str:
    """The first line the process prints (bounded wait)."""
    box: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    assert box, "the process printed nothing in time"
    return box[0]


def race(tmp_path: Path, kind: str, db: str, table: str = "") -> tuple[list[Any], str, str]:
    """Two processes resume the same serialized turn at once; their outputs and the effects."""
    runner = make_runner([])
    pending = anyio.run(pause, runner)
    script, turn_file = tmp_path / "racer.py", tmp_path / "turn.json"
    effects, go = tmp_path / "effects.txt", tmp_path / "go"
    script.write_text(RACER, encoding="utf-8")
    turn_file.write_text(pending.model_dump_json(), encoding="utf-8")
    args = [kind, db, table, str(turn_file), str(effects), str(go)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    try:
        for proc in procs:
            assert first_line(proc) == "ready\n", proc.communicate(timeout=TIMEOUT)
        go.touch()
        outputs = [proc.communicate(timeout=TIMEOUT) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=TIMEOUT)
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    results = sorted((json.loads(out) for out, _ in outputs), key=lambda r: r["outcome"])
    return results, effects.read_text(encoding="utf-8"), pending.review_id


def test_two_processes_racing_on_sqlite_run_the_tool_once(tmp_path: Path) -> None:
    """Two processes resume one serialized turn with claims in one SQLite file: one runs it."""
    results, effects, review_id = race(tmp_path, "sqlite", str(tmp_path / "claims.db"))

    assert results == [{"outcome": "already", "text": already(review_id)}, {"outcome": "sent"}]
    assert effects == "ran\n"


@pytest.mark.skipif(not DSN, reason="set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres)")
def test_two_processes_racing_on_postgres_run_the_tool_once(tmp_path: Path) -> None:
    """Two processes resume one serialized turn with claims in PostgreSQL: one runs it."""
    import psycopg
    from psycopg import sql

    table = f"tg_once_{uuid.uuid4().hex[:16]}"
    try:
        results, effects, review_id = race(tmp_path, "postgres", DSN, table)
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            for name in (table, f"{table}_claims"):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))

    assert results == [{"outcome": "already", "text": already(review_id)}, {"outcome": "sent"}]
    assert effects == "ran\n"


@pytest.mark.skipif(not DSN, reason="set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres)")
async def test_postgres_claims_table(tmp_path: Path) -> None:
    """PostgresStore.claim is once only; a long table name gets a truncated claims table."""
    import psycopg
    from psycopg import sql

    from toolguard.postgres import PostgresStore

    table = f"tg_once_{uuid.uuid4().hex}{'x' * 23}"
    assert len(table) == 63
    claims_table = table[:56] + "_claims"
    try:
        async with PostgresStore(DSN, table=table) as store:
            assert isinstance(store, Claims)
            got = [await store.claim("k"), await store.claim("k"), await store.claim("\ud800\x00")]
        async with PostgresStore(DSN, table=table) as again:
            got.append(await again.claim("k"))
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (claims_table,)).fetchone()
            for name in (table, claims_table):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))

    assert got == [True, False, True, False]
    assert exists == (True,)
