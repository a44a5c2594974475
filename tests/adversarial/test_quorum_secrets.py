"""Secrets in quorum reviews: an edit is stored and shown redacted, and REDACTED keeps the secret.

Attack class: a tool needs two reviewers (``requires_approval(approvals=2)``)
and has a secret parameter (``redact=[...]``). A reviewer's edit restarts the
count with new arguments, or settles a one-approval action while a quorum
action of the same turn still waits. The edit's new secret must never be
written where people or logs look (the action's decision, the ``vote`` and
``decided`` audit events, the thread over HTTP, the webhook bodies), and a
``[redacted]`` left in place must run the original secret, never the text
``[redacted]``, exactly as a single reviewer's edit does.
"""

# ruff: noqa: S106 - the secrets here are test values

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import toolguard
from tests.helpers import secret_spellings
from toolguard import (
    REDACTED,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    Webhook,
)
from toolguard.http import create_app

OLD = "old-secret-1234"
NEW = "new-secret-5678"
APPROVE = {"type": "approve"}
Log = list[tuple[str, dict[str, Any]]]


def make_tools(log: Log) -> list[Any]:
    """rotate (two approvals, secret password) and login (one approval, secret password)."""

    @toolguard.requires_approval(approvals=2, redact=["password"])
    def rotate(user: str, password: str) -> str:
        """Set a user's password."""
        log.append(("rotate", {"user": user, "password": password}))
        return f"rotated for {user}"

    @toolguard.requires_approval(redact=["password"])
    def login(user: str, password: str) -> str:
        """Log in."""
        log.append(("login", {"user": user, "password": password}))
        return f"logged in as {user}"

    return [rotate, login]


def edit(name: str, **args: Any) -> dict[str, Any]:
    """An edit decision."""
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def paths_of(data: Any, needle: str, path: str = "") -> list[str]:
    """Every place in JSON-like ``data`` whose text contains ``needle``."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, needle, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths_of(value, needle, f"{path}[{index}]")
    elif isinstance(data, str) and needle in data:
        found.append(path)
    return found


ROTATE = {"id": "c1", "name": "rotate", "args": {"user": "ann", "password": OLD}}
LOGIN = {"id": "c2", "name": "login", "args": {"user": "ann", "password": OLD}}


# --- the runner -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("password", "ran"), [(NEW, NEW), (REDACTED, OLD)], ids=["new-secret", "kept"]
)
async def test_an_edit_restarting_a_quorum_runs_the_real_secret(password: str, ran: str) -> None:
    """Bob's edit restarts the count; Alice completes it: the new secret, or the kept one, runs."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = await runner.run([ROTATE], thread_id="t")
    assert first.pending is not None

    second = await runner.resume(
        first.pending,
        [edit("rotate", user="bob", password=password)],
        thread_id="t",
        reviewer="bob",
    )
    assert second.pending is not None
    assert second.pending_review is not None
    assert second.pending_review.action_requests[0].args == {"user": "bob", "password": REDACTED}
    shown_edit = {
        "type": "edit",
        "edited_action": {"name": "rotate", "args": {"user": "bob", "password": REDACTED}},
    }
    assert [
        (a.status, a.decision.model_dump() if a.decision else None) for a in second.actions
    ] == [
        ("edited", shown_edit),
        ("requested", None),
    ]
    assert NEW not in json.dumps([a.model_dump(mode="json") for a in second.actions])

    third = await runner.resume(second.pending, [APPROVE], thread_id="t", reviewer="alice")

    assert third.pending is None
    assert log == [("rotate", {"user": "bob", "password": ran})]
    assert [(r.status, r.content) for r in third.results] == [("success", "rotated for bob")]
    assert NEW not in json.dumps([a.model_dump(mode="json") for a in third.actions])


@pytest.mark.parametrize(
    ("password", "ran"), [(NEW, NEW), (REDACTED, OLD)], ids=["new-secret", "kept"]
)
async def test_an_edit_held_while_a_quorum_waits_runs_the_real_secret(
    password: str, ran: str
) -> None:
    """Alice edits the one-approval login and half-approves rotate; Bob's approval runs both."""
    log: Log = []
    runner = Runner(make_tools(log))
    first = await runner.run([ROTATE, LOGIN], thread_id="t")
    assert first.pending is not None

    second = await runner.resume(
        first.pending,
        [APPROVE, edit("login", user="bob", password=password)],
        thread_id="t",
        reviewer="alice",
    )
    assert second.pending is not None
    shown = json.dumps([a.model_dump(mode="json") for a in second.actions])
    assert NEW not in shown
    held = next(a for a in second.actions if a.name == "login")
    assert held.decision is not None
    assert held.decision.model_dump()["edited_action"]["args"] == {
        "user": "bob",
        "password": REDACTED,
    }

    third = await runner.resume(second.pending, [APPROVE], thread_id="t", reviewer="bob")

    assert third.pending is None
    assert sorted(log) == [
        ("login", {"user": "bob", "password": ran}),
        ("rotate", {"user": "ann", "password": OLD}),
    ]
    assert NEW not in json.dumps([a.model_dump(mode="json") for a in third.actions])


async def test_a_restarted_quorum_of_a_redacted_tool_binds_the_real_arguments() -> None:
    """Another redacted quorum action of the turn is re-bound to the new review and still runs."""
    log: Log = []
    runner = Runner(make_tools(log))
    other = {"id": "c3", "name": "rotate", "args": {"user": "cy", "password": "cy-secret-999"}}
    first = await runner.run([ROTATE, other], thread_id="t")
    assert first.pending is not None

    second = await runner.resume(
        first.pending,
        [edit("rotate", user="ann", password=NEW), APPROVE],
        thread_id="t",
        reviewer="alice",
    )
    assert second.pending is not None
    third = await runner.resume(second.pending, [APPROVE, APPROVE], thread_id="t", reviewer="bob")

    assert [(r.call_id, r.status, r.outcome) for r in third.results] == [
        ("c1", "success", None),
        ("c3", "success", None),
    ]
    assert sorted(log, key=lambda entry: entry[1]["user"]) == [
        ("rotate", {"user": "ann", "password": NEW}),
        ("rotate", {"user": "cy", "password": "cy-secret-999"}),
    ]


# --- the chat, its audit trail, its webhook and the thread over HTTP ----------------------------


def make_chat(store: MemoryStore, log: Log, *calls: dict[str, Any], **options: Any) -> ReviewedChat:
    """A chat proposing ``calls`` once, then answering "done"."""
    proposal = ModelResponse(tool_calls=[ToolCall(**c) for c in calls])
    hook = Webhook("https://example.com/hook", secret="s")
    return ReviewedChat(
        ScriptedModel([proposal, "done"]), make_tools(log), store=store, notify=hook, **options
    )


async def views(chat: ReviewedChat, store: MemoryStore, thread_id: str) -> dict[str, str]:
    """What people and logs see: the thread over HTTP, the audit export, the webhook bodies."""
    app = create_app(chat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as http:
        thread = (await http.get(f"/hitl/threads/{thread_id}")).text
        audit = (await http.get(f"/hitl/threads/{thread_id}/audit")).text
    state = await store.load(thread_id)
    assert state is not None
    hooks = "".join(
        json.dumps(item.body, ensure_ascii=False, separators=(",", ":")) for item in state.outbox
    )
    return {
        "thread": thread,
        "audit": audit,
        "export": await chat.export_audit([thread_id]),
        "webhooks": hooks,
        "actions": json.dumps([a.model_dump(mode="json") for a in state.actions]),
    }


def leaks(seen: dict[str, str], secret: str) -> list[str]:
    """The views that show ``secret``."""
    return [name for name, text in seen.items() if secret in text]


@pytest.mark.parametrize("store_secrets", [True, False])
async def test_a_quorum_edit_never_shows_its_new_secret(store_secrets: bool) -> None:
    """Bob's edit with a new secret: vote, decided, webhook, HTTP and actions show [redacted]."""
    log: Log = []
    store = MemoryStore()
    chat = make_chat(store, log, ROTATE, store_secrets=store_secrets)
    turn = await chat.send_message("Rotate Ann's password")
    edited = await chat.submit_review(
        [edit("rotate", user="ann", password=NEW)],
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="bob",
    )
    assert edited.pending_review is not None

    assert leaks(await views(chat, store, turn.thread_id), NEW) == []
    state = await store.load(turn.thread_id)
    assert state is not None
    dumped = state.model_dump(mode="json")
    # The paused turn keeps the real value to run it (only in memory with store_secrets=False).
    assert paths_of(dumped, NEW) == (
        ["pending.calls[0].args.password", "pending.replaced_calls[0].args.password"]
        if store_secrets
        else []
    )
    [vote] = [e for e in state.audit if e.kind == "vote"]
    assert (vote.actor, vote.args, vote.detail) == (
        "bob",
        {"user": "ann", "password": REDACTED},
        "1 of 2 approvals",
    )

    done = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=edited.review_id, reviewer="alice"
    )

    assert done.reply == "done"
    assert log == [("rotate", {"user": "ann", "password": NEW})]
    assert leaks(await views(chat, store, turn.thread_id), NEW) == []
    final = await store.load(turn.thread_id)
    assert final is not None
    assert paths_of(final.model_dump(mode="json"), NEW) == (
        ["messages[1].tool_calls[0].function.arguments"] if store_secrets else []
    )
    assert [(e.kind, e.actor, e.args) for e in final.audit if e.kind in ("vote", "decided")] == [
        ("vote", "bob", {"user": "ann", "password": REDACTED}),
        ("vote", "alice", {"user": "ann", "password": REDACTED}),
        ("decided", "alice", {"user": "ann", "password": REDACTED}),
    ]


@pytest.mark.parametrize("store_secrets", [True, False])
@pytest.mark.parametrize(
    ("password", "ran"), [(NEW, NEW), (REDACTED, OLD)], ids=["new-secret", "kept"]
)
async def test_a_held_edit_in_a_quorum_chat_runs_its_secret_and_never_shows_it(
    store_secrets: bool, password: str, ran: str
) -> None:
    """Alice edits login (one approval) and half-approves rotate; Bob's approval runs both."""
    log: Log = []
    store = MemoryStore()
    chat = make_chat(store, log, ROTATE, LOGIN, store_secrets=store_secrets)
    turn = await chat.send_message("Rotate and log in")
    await chat.submit_review(
        [APPROVE, edit("login", user="ann", password=password)],
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="alice",
    )
    assert leaks(await views(chat, store, turn.thread_id), NEW) == []
    held = await store.load(turn.thread_id)
    assert held is not None
    # store_secrets=False: neither the original secret nor the edit's is stored.
    assert paths_of(held.model_dump(mode="json"), OLD if store_secrets else "secret-") == (
        [
            "messages[1].tool_calls[0].function.arguments",
            "messages[1].tool_calls[1].function.arguments",
            "pending.calls[0].args.password",
            "pending.calls[1].args.password",
        ]
        if store_secrets
        else []
    )

    done = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )

    assert done.reply == "done"
    assert sorted(log) == [
        ("login", {"user": "ann", "password": ran}),
        ("rotate", {"user": "ann", "password": OLD}),
    ]
    assert leaks(await views(chat, store, turn.thread_id), NEW) == []
    state = await store.load(turn.thread_id)
    assert state is not None
    assert [(e.kind, e.tool, e.actor, e.args) for e in state.audit if e.kind == "decided"] == [
        ("decided", "rotate", "bob", {"user": "ann", "password": REDACTED}),
        ("decided", "login", "alice", {"user": "ann", "password": REDACTED}),
    ]


# --- hostile secrets in a SQLite chat -------------------------------------------------------------

HOSTILE = [
    "old\"'\\\x00\x1f\x7f\u2028\u2029\U0001f511-1",
    'long"' + "\\".join(["abcdefgh"] * 300) + "\U0001f511",
]


@pytest.mark.parametrize("old", HOSTILE, ids=["controls", "long"])
@pytest.mark.parametrize(("edited", "ran"), [("new", "new"), ("kept", "old")])
async def test_a_quorum_edit_of_a_hostile_secret_in_sqlite_is_written_nowhere(
    old: str, edited: str, ran: str, tmp_path: Any
) -> None:
    """Bob edits with a new hostile secret (or keeps REDACTED), Alice completes the quorum:
    the real value runs; no spelling of either secret is in a row of the database file
    (store_secrets=False), the vote and decided events, the thread over HTTP or the webhooks."""
    import sqlite3

    from toolguard import SQLiteStore

    new = old[::-1] + "-new"
    log: Log = []
    path = tmp_path / "threads.sqlite3"
    store = SQLiteStore(str(path))
    call = {"id": "c1", "name": "rotate", "args": {"user": "ann", "password": old}}
    proposal = ModelResponse(tool_calls=[ToolCall(**call)])
    hook = Webhook("https://example.com/hook", secret="s")
    chat = ReviewedChat(
        ScriptedModel([proposal, "done"]),
        make_tools(log),
        store=store,
        notify=hook,
        store_secrets=False,
    )
    try:
        turn = await chat.send_message("Rotate Ann's password")
        password = new if edited == "new" else REDACTED
        first = await chat.submit_review(
            [edit("rotate", user="ann", password=password)],
            turn.thread_id,
            review_id=turn.review_id,
            reviewer="bob",
        )
        seen = [json.dumps(await views(chat, store, turn.thread_id))]
        done = await chat.submit_review(
            [APPROVE], turn.thread_id, review_id=first.review_id, reviewer="alice"
        )
        seen.append(json.dumps(await views(chat, store, turn.thread_id)))
        state = await store.load(turn.thread_id)
        assert state is not None
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        seen += [repr(row) for table in tables for row in db.execute(f"SELECT * FROM {table}")]  # noqa: S608

    assert done.reply == "done"
    assert log == [("rotate", {"user": "ann", "password": new if ran == "new" else old})]
    assert [(e.kind, e.actor, e.args) for e in state.audit if e.kind in ("vote", "decided")] == [
        ("vote", "bob", {"user": "ann", "password": REDACTED}),
        ("vote", "alice", {"user": "ann", "password": REDACTED}),
        ("decided", "alice", {"user": "ann", "password": REDACTED}),
    ]
    hidden = secret_spellings(old) | secret_spellings(new)
    assert [text for text in seen if any(form in text for form in hidden)] == []
