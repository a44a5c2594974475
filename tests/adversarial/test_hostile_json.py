"""Hostile JSON from the model or a tool cannot brick a thread or any store-wide operation.

Attack class: whatever shape a JSON parser accepts — nesting hundreds of levels deep, huge
strings, very many keys, NaN and ±Infinity, integers of thousands of digits, lone surrogates —
in a model's tool-call arguments (as text or already parsed), in an edit decision's arguments,
in a tool's name or call id, or in a tool's return value. 0.1.0 saved arguments nested ~200
deep and could then never load the thread again (every route of it answered 500, store-wide
exports failed), and raised after a tool ran when its result was nested ~300 deep.

The guarantees, on MemoryStore, SQLiteStore and PostgresStore (when TOOLGUARD_POSTGRES_DSN
is set): arguments beyond ``toolguard.Limits`` or holding non-standard numbers become an error
tool result naming the limit or the field, without asking anyone; a tool that ran is recorded
exactly once, its result in a bounded form when it is too deep, too large or not JSON; every
stored thread loads back; a damaged row raises the documented ``CorruptThreadError`` for that
thread only and is skipped by store-wide operations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import (
    LONE_SURROGATES,
    deep_json,
    deep_json_text,
    deep_list,
    deep_object,
    hostile_json,
    huge_string,
    odd_ids,
    odd_names,
    wide_object,
)
from toolguard import (
    CorruptThreadError,
    InvalidReviewDecisionError,
    Limits,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    SQLiteStore,
    Store,
    ThreadState,
    ToolCall,
    requires_approval,
)
from toolguard.records import parse_tool_call

DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
KIB = 1024
MARK = "Error, not executed: "
"""How an invalid-arguments or unknown-tool result reads to the model (ResultTemplates)."""
PREFIX = "Invalid arguments for tool `send`: "
TOO_DEEP = "nested more than 32 levels deep (Limits.max_args_depth)"
NOT_JSON_NUMBERS = "NaN and Infinity are not valid JSON numbers"
HOSTILE_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)


# --- stores -------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every test runs on each store (PostgreSQL only when a server is configured)."""
    if request.param == "memory":
        yield MemoryStore()
    elif request.param == "sqlite":
        async with SQLiteStore(tmp_path / "t.db") as sqlite_store:
            yield sqlite_store
    else:
        if not DSN:
            pytest.skip("set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres prints one)")
        import psycopg
        from psycopg import sql

        from toolguard.postgres import PostgresStore

        table = f"tg_hostile_{uuid.uuid4().hex[:16]}"
        async with PostgresStore(DSN, table=table) as pg_store:
            yield pg_store
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))


async def write_raw_row(store: Store, thread_id: str, text: str) -> None:
    """Put ``text`` into the store as thread ``thread_id``'s state, bypassing every check."""
    if isinstance(store, MemoryStore):
        store._threads[thread_id] = (1, text)
    elif isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "INSERT INTO toolguard_threads (thread_id, version, state, updated_at)"
                " VALUES (?, 1, ?, '2024-01-01T00:00:00+00:00')",
                (thread_id, text),
            )
    else:
        import psycopg
        from psycopg import sql

        table = store.table  # type: ignore[attr-defined]
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
            await conn.execute(
                sql.SQL(
                    "INSERT INTO {} (thread_id, version, state, updated_at)"
                    " VALUES (%s, 1, %s::json, now())"
                ).format(sql.Identifier(table)),
                (thread_id, text),
            )


# --- the agent ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Bench:
    """A chat with a guarded ``send`` and a free ``fetch``; records every run."""

    chat: ReviewedChat
    runs: list[tuple[str, Any]]


def bench(
    store: Store,
    calls: list[Any],
    *,
    returned: Any = None,
    limits: Limits | None = None,
) -> Bench:
    """The model proposes ``calls`` once, then answers ``done`` to any tool result."""
    runs: list[tuple[str, Any]] = []

    @requires_approval
    def send(x: Any = None) -> str:
        """Send something.

        Args:
            x: what to send.
        """
        runs.append(("send", x))
        return "sent"

    def fetch(x: Any = None) -> Any:
        """Fetch something.

        Args:
            x: what to fetch.
        """
        runs.append(("fetch", x))
        return returned

    def script(messages: Any) -> ModelResponse:
        if messages[-1]["role"] == "user":
            return ModelResponse(tool_calls=list(calls))
        return ModelResponse(text="done")

    chat = ReviewedChat(
        ScriptedModel([script], repeat=True),
        [send, fetch],
        store=store,
        sync_in_thread=False,
        limits=limits,
    )
    return Bench(chat=chat, runs=runs)


def tool_messages(state: ThreadState) -> list[dict[str, Any]]:
    """The thread's tool messages."""
    return [m for m in state.messages if m["role"] == "tool"]


async def assert_store_wide_ok(chat: ReviewedChat, thread_id: str) -> ThreadState:
    """The thread loads, and export_audit / running_threads work; returns the loaded thread."""
    state = await chat.get_thread(thread_id)
    assert ThreadState.model_validate_json(state.model_dump_json()) == state
    await chat.export_audit()
    await chat.export_audit([thread_id])
    assert thread_id not in await chat.running_threads()
    return state


async def refused_without_review(store: Store, call: Any, error: str) -> None:
    """``call`` to ``send`` ends as the error result ``error``: no review, nothing ran."""
    b = bench(store, [call])
    turn = await b.chat.send_message("go")
    assert (turn.reply, turn.pending_review, turn.actions) == ("done", None, [])
    state = await assert_store_wide_ok(b.chat, turn.thread_id)
    assert tool_messages(state) == [
        {"role": "tool", "tool_call_id": "c1", "content": MARK + error, "status": "error"}
    ]
    assert (state.status, state.actions, state.audit, b.runs) == ("idle", [], [], [])


def _cyclic() -> dict[str, Any]:
    """``{"x": [[...]]}`` where the list contains itself."""
    loop: list[Any] = []
    loop.append(loop)
    return {"x": loop}


# --- 1. arguments beyond the limits: an error result, nobody asked -------------------------------


async def test_args_nested_200_deep_no_longer_brick_the_thread(store: Store) -> None:
    """0.1.0's bug: 200-deep arguments were saved and the thread never loaded again."""
    call = ToolCall(id="c1", name="send", args={"x": deep_list(200)})
    await refused_without_review(store, call, f"{PREFIX}'x': {TOO_DEEP}")


async def test_refused_args_keep_a_bounded_preview_in_the_history(store: Store) -> None:
    """The assistant message records at most 1,000 characters of what the model sent."""
    text = json.dumps({"x": deep_list(500)})
    b = bench(store, [{"id": "c1", "function": {"name": "send", "arguments": text}}])
    turn = await b.chat.send_message("go")
    state = await b.chat.get_thread(turn.thread_id)
    assistant = next(m for m in state.messages if m["role"] == "assistant")
    assert assistant["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "send", "arguments": text[:1000] + "…"},
        }
    ]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        pytest.param(deep_json_text(5_000), TOO_DEEP, id="text-5000-deep-recursion-error"),
        pytest.param(deep_json_text(100), f"'k': {TOO_DEEP}", id="text-100-deep"),
        pytest.param({"a": deep_object(40)}, f"'a': {TOO_DEEP}", id="parsed-40-deep"),
        pytest.param(
            json.dumps({"x": "x" * 300_000}),
            "300,009 bytes of JSON, more than 262,144 (Limits.max_args_bytes)",
            id="text-huge-string",
        ),
        pytest.param(
            json.dumps({"x": "é" * 140_000}, ensure_ascii=False),
            "280,009 bytes of JSON, more than 262,144 (Limits.max_args_bytes)",
            id="text-utf8-bytes-count",
        ),
        pytest.param(
            {f"k{i}": i for i in range(30_000)},
            "427,781 bytes of JSON, more than 262,144 (Limits.max_args_bytes)",
            id="parsed-30000-keys",
        ),
        pytest.param('{"amount": NaN}', f"'amount': {NOT_JSON_NUMBERS}", id="text-nan"),
        pytest.param(
            '{"items": [{"price": 1}, {"price": -Infinity}]}',
            f"'items.1.price': {NOT_JSON_NUMBERS}",
            id="text-nested-infinity",
        ),
        pytest.param({"amount": math.nan}, f"'amount': {NOT_JSON_NUMBERS}", id="parsed-nan"),
        pytest.param({"a": [math.inf]}, f"'a.0': {NOT_JSON_NUMBERS}", id="parsed-inf"),
        pytest.param(
            {"n": 10**4001},
            "'n': integers of more than 4,000 digits are refused",
            id="parsed-huge-int",
        ),
        pytest.param(_cyclic(), f"'x': {TOO_DEEP}", id="parsed-cyclic"),
    ],
)
async def test_args_beyond_the_limits_are_refused_without_review(
    store: Store, arguments: Any, problem: str
) -> None:
    """Deep, large or non-standard arguments: an error result naming the limit or field."""
    call = {"id": "c1", "type": "function", "function": {"name": "send", "arguments": arguments}}
    await refused_without_review(store, call, PREFIX + problem)


async def test_args_inside_the_limits_still_go_to_review(store: Store) -> None:
    """32 levels (the limit) and 262,144 bytes are accepted, and the call waits for review."""
    deep = {"x": deep_list(31)}
    big = '{"x": "' + "x" * (256 * KIB - 9) + '"}'
    assert len(big) == 256 * KIB
    for arguments in (json.dumps(deep), big):
        b = bench(store, [{"id": "c1", "function": {"name": "send", "arguments": arguments}}])
        turn = await b.chat.send_message("go")
        assert turn.pending_review is not None
        assert turn.pending_review.action_requests[0].args == json.loads(arguments)
        done = await b.chat.submit_review([{"type": "approve"}], turn.thread_id)
        assert done.reply == "done"
        assert b.runs == [("send", json.loads(arguments)["x"])]
        await assert_store_wide_ok(b.chat, turn.thread_id)


async def test_own_limits_apply(store: Store) -> None:
    """Limits(max_args_depth=2, max_args_bytes=30): the runner enforces exactly those."""
    limits = Limits(max_args_depth=2, max_args_bytes=30)
    for args, expected in [
        ({"x": {"b": 1}}, None),
        ({"x": {"b": [1]}}, "'x': nested more than 2 levels deep (Limits.max_args_depth)"),
        ({"x": "y" * 23}, "31 bytes of JSON, more than 30 (Limits.max_args_bytes)"),
    ]:
        b = bench(store, [ToolCall(id="c1", name="send", args=args)], limits=limits)
        turn = await b.chat.send_message("go")
        state = await b.chat.get_thread(turn.thread_id)
        if expected is None:
            assert turn.pending_review is not None
        else:
            assert tool_messages(state)[0]["content"] == MARK + PREFIX + expected


def test_parse_tool_call_without_limits_enforces_the_widest() -> None:
    """parse_tool_call alone refuses only what no Limits allows (128 levels, 64 MiB)."""
    ok = parse_tool_call({"name": "t", "arguments": json.dumps({"x": deep_list(127)})})
    assert (ok.error, ok.args) == (None, {"x": deep_list(127)})
    refused = parse_tool_call({"id": "i", "name": "t", "arguments": {"x": deep_list(128)}})
    assert refused.error == (
        "Invalid arguments for tool `t`: 'x': nested more than 128 levels deep"
        " (Limits.max_args_depth)"
    )
    assert (refused.args, refused.id) == ({}, "i")


# --- edit decisions -----------------------------------------------------------------------------


async def paused(store: Store, limits: Limits | None = None) -> tuple[Bench, str]:
    """A thread paused on send(x="hi")."""
    b = bench(store, [ToolCall(id="c1", name="send", args={"x": "hi"})], limits=limits)
    turn = await b.chat.send_message("go")
    assert turn.pending_review is not None
    return b, turn.thread_id


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        pytest.param({"x": math.nan}, f"'x': {NOT_JSON_NUMBERS}", id="nan"),
        pytest.param({"x": [1, -math.inf]}, f"'x.1': {NOT_JSON_NUMBERS}", id="infinity"),
        pytest.param({"x": deep_list(40)}, f"'x': {TOO_DEEP}", id="40-deep"),
        pytest.param(
            {"x": "x" * 300_000},
            "300,008 bytes of JSON, more than 262,144 (Limits.max_args_bytes)",
            id="huge",
        ),
    ],
)
async def test_edit_beyond_the_limits_fails_the_action(
    store: Store, args: dict[str, Any], problem: str
) -> None:
    """An edit the runner's limits refuse: error result, action failed, nothing runs."""
    b, thread_id = await paused(store)
    edit = {"type": "edit", "edited_action": {"name": "send", "args": args}}
    turn = await b.chat.submit_review([edit], thread_id)
    assert turn.reply == "done"
    state = await assert_store_wide_ok(b.chat, thread_id)
    (action,) = state.actions
    assert action.status == "failed"
    assert action.result is not None
    assert (action.result.status, action.result.content) == ("error", PREFIX + problem)
    assert tool_messages(state)[0]["content"] == MARK + PREFIX + problem
    assert b.runs == []


async def test_edit_too_deep_to_store_is_refused_and_changes_nothing(store: Store) -> None:
    """An edit nested deeper than any store can keep: InvalidReviewDecisionError, still pending."""
    b, thread_id = await paused(store)
    before = (await b.chat.get_thread(thread_id)).model_dump_json()
    for depth in (300, 5_000):
        edit = {"type": "edit", "edited_action": {"name": "send", "args": {"x": deep_list(depth)}}}
        with pytest.raises(InvalidReviewDecisionError) as raised:
            await b.chat.submit_review([edit], thread_id)
        assert str(raised.value) == (
            "'edited_action' 'args' cannot be stored: nested more than 128 levels deep,"
            " or holding a value that cannot be converted to JSON"
        )
    assert (await b.chat.get_thread(thread_id)).model_dump_json() == before
    assert b.runs == []
    done = await b.chat.submit_review([{"type": "approve"}], thread_id)
    assert (done.reply, b.runs) == ("done", [("send", "hi")])


# --- tool results beyond the limits: recorded, bounded, never raised ------------------------------


class NoRepr:
    """A value whose repr raises."""

    def __repr__(self) -> str:
        msg = "no repr for you"
        raise RuntimeError(msg)


MIB = 1024 * KIB
SIZE_NOTE = (
    "\n[toolguard: the result is {size:,} bytes of text, more than {limit:,}"
    " (Limits.max_result_bytes); only the first {kept:,} bytes are kept.]"
)
DEPTH_NOTE = (
    "\n[toolguard: the result is nested more than 64 levels deep (Limits.max_result_depth);"
    " it is kept as text only.]"
)


@pytest.mark.parametrize(
    ("returned", "content", "value"),
    [
        pytest.param(
            deep_list(300),
            "[toolguard: the tool's result (type list) cannot be converted to JSON"
            " (ValueError: Maximum serialization depth exceeded); it is not kept.]",
            None,
            id="300-deep",
        ),
        pytest.param(
            deep_object(100),
            json.dumps(deep_object(100)) + DEPTH_NOTE,
            None,
            id="100-deep",
        ),
        pytest.param(
            {"x": deep_list(63)}, json.dumps({"x": deep_list(63)}), {"x": deep_list(63)}, id="64"
        ),
        pytest.param(
            "x" * (2 * MIB),
            "x" * MIB + SIZE_NOTE.format(size=2 * MIB, limit=MIB, kept=MIB),
            None,
            id="huge-string",
        ),
        pytest.param(
            {f"k{i}": i for i in range(100_000)},
            json.dumps({f"k{i}": i for i in range(100_000)}).encode()[:MIB].decode()
            + SIZE_NOTE.format(size=1_677_780, limit=MIB, kept=MIB),
            None,
            id="100000-keys",
        ),
        pytest.param(
            _cyclic(),
            "[toolguard: the tool's result (type dict) cannot be converted to JSON"
            " (ValueError: Circular reference detected (id repeated)); it is not kept.]",
            None,
            id="cyclic",
        ),
        pytest.param(
            NoRepr(),
            "[toolguard: the tool's result (type NoRepr) cannot be converted to JSON"
            " (RuntimeError: no repr for you); it is not kept.]",
            None,
            id="repr-raises",
        ),
        pytest.param(
            {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "n": 10**4001},
            '{"a": null, "b": [null, null, 1.5], "n": null}',
            {"a": None, "b": [None, None, 1.5], "n": None},
            id="nan-infinity-huge-int",
        ),
        pytest.param(
            {"k\ud800": "v\udfff"},
            '{"k\ufffd": "v\ufffd"}',
            {"k\ufffd": "v\ufffd"},
            id="surrogates",
        ),
    ],
)
async def test_hostile_results_are_recorded_once_in_a_bounded_form(
    store: Store, returned: Any, content: str, value: Any
) -> None:
    """The tool ran: success, recorded exactly once, bounded text and ``value``."""
    b = bench(store, [ToolCall(id="c1", name="fetch", args={"x": 1})], returned=returned)
    turn = await b.chat.send_message("go")
    assert turn.reply == "done"
    assert b.runs == [("fetch", 1)]
    state = await assert_store_wide_ok(b.chat, turn.thread_id)
    assert tool_messages(state) == [
        {"role": "tool", "tool_call_id": "c1", "content": content, "status": "success"}
    ]


async def test_results_are_cut_on_a_character_boundary() -> None:
    """max_result_bytes counts UTF-8 bytes and never splits a character."""
    runner = Runner([_echo], limits=Limits(max_result_bytes=10))
    for text, kept, size in [("é" * 7, "é" * 5, 14), ("€" * 4, "€" * 3, 12)]:
        step = await runner.run([ToolCall(id="c", name="_echo", args={"text": text})])
        (result,) = step.results
        kept_size = len(kept.encode())
        assert result.content == kept + SIZE_NOTE.format(size=size, limit=10, kept=kept_size)
        assert (result.status, result.value) == ("success", None)


def _echo(text: str) -> str:
    """Return the text.

    Args:
        text: anything.
    """
    return text


async def test_approved_tool_with_a_hostile_result_is_recorded(store: Store) -> None:
    """After approval too: the executed action keeps a bounded result."""
    b, thread_id = await paused(store, Limits(max_result_bytes=5))
    turn = await b.chat.submit_review([{"type": "approve"}], thread_id)
    assert turn.reply == "done"
    state = await assert_store_wide_ok(b.chat, thread_id)
    (action,) = state.actions
    assert action.status == "executed"
    assert action.result is not None
    assert action.result.content == "sent"
    assert b.runs == [("send", "hi")]


# --- 3. lone surrogates in tool names and call ids -----------------------------------------------


@pytest.mark.parametrize("bad", LONE_SURROGATES)
async def test_surrogates_in_call_id_and_name_are_cleaned(store: Store, bad: str) -> None:
    """A thread whose calls carry lone surrogates saves, loads and resumes."""
    calls = [
        ToolCall(id=f"c{bad}1", name="send", args={"x": f"a{bad}"}),
        {"id": f"c{bad}2", "function": {"name": f"fe{bad}tch", "arguments": "{}"}},
    ]
    b = bench(store, calls)
    turn = await b.chat.send_message("go")
    assert turn.pending_review is not None
    state = await b.chat.get_thread(turn.thread_id)
    assert [c.id for c in state.pending.calls] == ["c\ufffd1", "c\ufffd2"]  # type: ignore[union-attr]
    assert [c.name for c in state.pending.calls] == ["send", "fe\ufffdtch"]  # type: ignore[union-attr]
    assert state.pending.actions[0].args == {"x": "a\ufffd"}  # type: ignore[union-attr]
    done = await b.chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert done.reply == "done"
    state = await assert_store_wide_ok(b.chat, turn.thread_id)
    assert [(m["tool_call_id"], m["status"]) for m in tool_messages(state)] == [
        ("c\ufffd1", "success"),
        ("c\ufffd2", "error"),
    ]
    assert tool_messages(state)[1]["content"] == (
        MARK + "Tool `fe\ufffdtch` does not exist. Available tools: send, fetch"
    )
    assert b.runs == [("send", "a\ufffd")]


# --- damaged rows: a documented error for that thread, skipped by store-wide operations ----------


async def test_a_damaged_row_breaks_only_its_own_thread(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """get_thread raises CorruptThreadError; export_audit and running_threads skip the row."""
    b, good = await paused(store)
    running = await store.save(
        ThreadState(thread_id="running", status="running"), expected_version=None
    )
    await write_raw_row(store, "bad", '{"thread_id": 5}')
    with pytest.raises(CorruptThreadError) as raised:
        await b.chat.get_thread("bad")
    error = raised.value
    assert error.thread_id == "bad"
    assert error.reason == "thread_id: Input should be a valid string"
    assert str(error) == (
        f"Thread 'bad' is stored but cannot be read back ({error.reason})."
        " Its stored row was left unchanged: repair or remove it in the store."
    )
    with pytest.raises(CorruptThreadError):
        await b.chat.send_message("hello", "bad")
    with pytest.raises(CorruptThreadError):
        await b.chat.export_audit(["bad"])
    with caplog.at_level(logging.WARNING, logger="toolguard"):
        exported = await b.chat.export_audit()
        assert await b.chat.running_threads() == [running.thread_id]
    expected = await b.chat.export_audit([good, "running"])
    assert exported == expected != ""
    assert [r.getMessage() for r in caplog.records] == [
        f"export_audit skipped thread 'bad': {error.reason}",
        f"running_threads skipped thread 'bad': {error.reason}",
    ]


async def test_rows_0_1_0_could_not_load_are_read_again(store: Store) -> None:
    """A state 0.1.0 saved with 200-deep arguments (pydantic-core refuses it) loads back."""
    state = ThreadState(thread_id="old", messages=[{"role": "user", "content": deep_list(200)}])
    with pytest.raises(ValueError, match="recursion limit exceeded"):
        ThreadState.model_validate_json(state.model_dump_json())
    await store.save(state, expected_version=None)
    loaded = await store.load("old")
    assert loaded is not None
    assert loaded.messages == state.messages
    assert loaded.version == 1


def test_corrupt_thread_error_pickles() -> None:
    """Like every toolguard error, it survives a trip to another process."""
    import pickle

    error = pickle.loads(pickle.dumps(CorruptThreadError("t", "bad JSON")))  # noqa: S301
    assert (type(error), error.thread_id, error.reason) == (CorruptThreadError, "t", "bad JSON")
    assert isinstance(error, ValueError)


async def test_http_answers_500_with_the_text_for_a_damaged_thread() -> None:
    """GET /hitl/threads/{id} of a damaged row: 500 with the error's text, not a crash."""
    pytest.importorskip("fastapi")
    import httpx

    from toolguard.http import create_app

    store = MemoryStore()
    await write_raw_row(store, "bad", "not JSON")
    app = create_app(bench(store, []).chat, page=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
        for path in ("/hitl/threads/bad", "/hitl/threads/bad/audit"):
            response = await client.get(path)
            assert response.status_code == 500
            detail = response.json()["detail"]
            assert detail.startswith("Thread 'bad' is stored but cannot be read back (")


# --- Limits: a checked, frozen value ------------------------------------------------------------


def test_limits_defaults() -> None:
    """The documented defaults."""
    assert dataclasses.asdict(Limits()) == {
        "max_args_depth": 32,
        "max_args_bytes": 262_144,
        "max_result_depth": 64,
        "max_result_bytes": 1_048_576,
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_args_depth = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"max_args_depth": "3"}, TypeError, "Limits.max_args_depth must be an int, got str"),
        ({"max_result_bytes": True}, TypeError, "Limits.max_result_bytes must be an int, got bool"),
        ({"max_args_bytes": 1.5}, TypeError, "Limits.max_args_bytes must be an int, got float"),
        (
            {"max_args_depth": 0},
            ValueError,
            (
                "Limits.max_args_depth must be between 1 and 128 (stores cannot load back JSON"
                " nested deeper), got 0"
            ),
        ),
        (
            {"max_result_depth": 129},
            ValueError,
            (
                "Limits.max_result_depth must be between 1 and 128 (stores cannot load back JSON"
                " nested deeper), got 129"
            ),
        ),
        (
            {"max_result_bytes": 64 * MIB + 1},
            ValueError,
            (
                "Limits.max_result_bytes must be between 1 and 67,108,864 (a thread keeps several"
                " copies of it in one JSON document), got 67,108,865"
            ),
        ),
    ],
)
def test_limits_are_checked(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    """Wrong types and values name the limit and the allowed range."""
    with pytest.raises(error) as raised:
        Limits(**kwargs)
    assert str(raised.value) == text


@pytest.mark.parametrize(
    "build", [lambda x: Runner([], limits=x), lambda x: bench(MemoryStore(), [], limits=x)]
)
def test_runner_and_chat_check_limits(build: Callable[[Any], Any]) -> None:
    """Runner(limits=...) and ReviewedChat(limits=...) take a Limits or None, nothing else."""
    with pytest.raises(TypeError) as raised:
        build({"max_args_depth": 3})
    assert str(raised.value) == "limits must be a toolguard.Limits, got dict"
    assert Runner([], limits=None).limits == Limits()
    assert ReviewedChat(ScriptedModel([]), [], limits=Limits(max_args_depth=3)).runner.limits == (
        Limits(max_args_depth=3)
    )


# --- properties: any hostile args, any hostile result, on every store ----------------------------

ANY_HOSTILE = st.one_of(hostile_json, deep_json, wide_object, huge_string)


def _depth_and_numbers(value: Any) -> tuple[int, bool]:
    """Nesting depth, and whether a NaN / infinity / huge int occurs (the test's own oracle)."""
    deepest, bad = 0, False
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            stack.extend(
                (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
            )
        elif isinstance(item, float):
            bad = bad or not math.isfinite(item)
        elif isinstance(item, int):
            bad = bad or abs(item) >= 10**4000
    return deepest, bad


def _clean(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _expected(value: Any) -> Any:
    """Plain JSON as toolguard keeps it: no lone surrogates; NaN, ±inf, huge ints → None."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {_clean(k): _expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expected(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int) and abs(value) >= 10**4000:
        return None
    return value


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


ARGS_PROBLEMS = (TOO_DEEP, NOT_JSON_NUMBERS, "(Limits.max_args_bytes)", "digits are refused")


@HOSTILE_SETTINGS
@given(x=ANY_HOSTILE, as_text=st.booleans())
async def test_any_hostile_args_are_refused_or_reviewed(
    store: Store, x: Any, as_text: bool
) -> None:
    """Refused (an error result, nobody asked) exactly when beyond the limits, else reviewed.

    Once approved, the tool runs exactly once with the cleaned arguments; the thread always
    loads, and the store-wide operations work.
    """
    args = {"x": x}
    depth, bad = _depth_and_numbers(args)
    arguments: Any = args
    if as_text and depth < 900:
        arguments = json.dumps(args, ensure_ascii=False)
        size = _size(arguments)
    else:
        size = (
            _size(json.dumps(args, ensure_ascii=False, separators=(",", ":"))) if depth < 900 else 0
        )
    refused = depth > 32 or bad or size > 256 * KIB
    b = bench(store, [{"id": "c1", "function": {"name": "send", "arguments": arguments}}])
    turn = await b.chat.send_message("go")
    assert (turn.pending_review is None) == refused
    if refused:
        state = await assert_store_wide_ok(b.chat, turn.thread_id)
        (message,) = tool_messages(state)
        assert message["content"].startswith(MARK + PREFIX)
        assert message["content"].endswith(ARGS_PROBLEMS)
        assert (message["status"], state.actions, b.runs) == ("error", [], [])
    else:
        expected = _expected(x)
        assert turn.pending_review is not None
        assert turn.pending_review.action_requests[0].args == {"x": expected}
        done = await b.chat.submit_review([{"type": "approve"}], turn.thread_id)
        assert done.reply == "done"
        assert b.runs == [("send", expected)]
        state = await assert_store_wide_ok(b.chat, turn.thread_id)
        (action,) = state.actions
        assert (action.status, action.args) == ("executed", {"x": expected})
        assert [m["content"] for m in tool_messages(state)] == ["sent"]


@HOSTILE_SETTINGS
@given(returned=ANY_HOSTILE)
async def test_any_hostile_result_is_recorded_exactly_once(store: Store, returned: Any) -> None:
    """A tool returning anything: one success result, exact or bounded; the thread loads."""
    b = bench(store, [ToolCall(id="c1", name="fetch", args={})], returned=returned)
    turn = await b.chat.send_message("go")
    assert turn.reply == "done"
    assert b.runs == [("fetch", None)]
    state = await assert_store_wide_ok(b.chat, turn.thread_id)
    (message,) = tool_messages(state)
    assert message["status"] == "success"
    content = message["content"]
    depth, _ = _depth_and_numbers(returned)
    if depth > 64:
        assert content.endswith((DEPTH_NOTE, "it is not kept.]", "bytes are kept.]"))
        return
    expected = _expected(returned)
    text = expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)
    if _size(text) <= MIB:
        assert content == text
    else:
        kept = text.encode()[:MIB].decode("utf-8", "ignore")
        note = SIZE_NOTE.format(size=_size(text), limit=MIB, kept=_size(kept))
        assert content == kept + note


# --- the runner alone ---------------------------------------------------------------------------


async def test_runner_records_the_refused_call_in_step_calls() -> None:
    """step.calls holds the bounded call: no arguments, the error, a preview of what was sent."""

    text = deep_json_text(3_000)
    sdk_call = SimpleNamespace(id="c\ud800", function=SimpleNamespace(name="_echo", arguments=text))
    step = await Runner([_echo]).run([sdk_call])
    (call,) = step.calls
    assert call == ToolCall(
        id="c\ufffd",
        name="_echo",
        args={},
        arguments_error=text[:1000] + "…",
        error="Invalid arguments for tool `_echo`: " + TOO_DEEP,
    )
    (result,) = step.results
    assert (result.call_id, result.status, result.content) == ("c\ufffd", "error", call.error)


async def test_runner_resume_fails_a_nan_edit_without_running() -> None:
    """The lenient path too: an edit with NaN ends failed, the tool never runs."""
    runs: list[str] = []

    @requires_approval
    def pay(amount: float) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        runs.append("pay")
        return "paid"

    runner = Runner([pay])
    step = await runner.run([ToolCall(id="c", name="pay", args={"amount": 5})])
    assert step.pending is not None
    edit = {"type": "edit", "edited_action": {"name": "pay", "args": {"amount": math.nan}}}
    done = await runner.resume(step.pending, [edit])
    (action,) = done.actions
    assert action.status == "failed"
    assert done.results[0].content == (
        f"Invalid arguments for tool `pay`: 'amount': {NOT_JSON_NUMBERS}"
    )
    assert runs == []


@HOSTILE_SETTINGS
@given(
    calls=st.lists(
        st.tuples(odd_ids, st.one_of(odd_names, st.sampled_from(["send", "fetch"])), hostile_json),
        min_size=1,
        max_size=4,
    ),
    as_text=st.booleans(),
)
async def test_any_hostile_names_ids_and_args_keep_the_thread_loadable(
    store: Store, calls: list[tuple[str, str, Any]], as_text: bool
) -> None:
    """Odd names and ids (empty, huge, surrogates, deceptive, repeated) with hostile arguments.

    Every call gets exactly one tool message; approving whatever is pending runs each guarded
    call at most once; the thread loads and the store-wide operations work throughout.
    """
    raw: list[Any] = []
    for call_id, name, x in calls:
        arguments: Any = {"x": x}
        if as_text:
            with contextlib.suppress(RecursionError):
                arguments = json.dumps(arguments, ensure_ascii=False)
        raw.append({"id": call_id, "function": {"name": name, "arguments": arguments}})
    b = bench(store, raw)
    turn = await b.chat.send_message("go")
    if turn.pending_review is not None:
        count = len(turn.pending_review.action_requests)
        turn = await b.chat.submit_review([{"type": "approve"}] * count, turn.thread_id)
    assert turn.reply == "done"
    state = await assert_store_wide_ok(b.chat, turn.thread_id)
    assistant = next(m for m in state.messages if m["role"] == "assistant")
    ids = [c["id"] for c in assistant["tool_calls"]]
    assert [m["tool_call_id"] for m in tool_messages(state)] == ids
    assert len(set(ids)) == len(ids) == len(calls)
    assert all(not any(0xD800 <= ord(ch) <= 0xDFFF for ch in i) for i in ids)
    executed = [a for a in state.actions if a.status == "executed"]
    assert len([r for r in b.runs if r[0] == "send"]) == len(executed)


async def test_small_size_limits_count_the_text_as_sent() -> None:
    """Limits(max_args_bytes=16): 17 bytes of arguments text are refused, 16 are not."""
    runner = Runner([_echo], limits=Limits(max_args_bytes=16))
    texts = ['{"text": "abcde"}', '{"text":"abcde"}']
    step = await runner.run(
        [
            {"id": f"c{i}", "function": {"name": "_echo", "arguments": t}}
            for i, t in enumerate(texts)
        ]
    )
    assert [(r.status, r.content) for r in step.results] == [
        (
            "error",
            (
                "Invalid arguments for tool `_echo`: 17 bytes of JSON, more than 16"
                " (Limits.max_args_bytes)"
            ),
        ),
        ("success", "abcde"),
    ]
