"""Tests for toolguard.http: the chat API through real HTTP clients, every SPEC error row."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import FastAPI, Header

from tests.helpers import (
    ALICE_MAIL,
    APPROVE,
    ASK_ALICE,
    BOB_MEETING_MAIL,
    LANGS,
    ONE_MAIL,
    TWO_MAILS,
    Log,
    calls,
    client_for,
    make_mail_chat,
    serve_in_thread,
)
from toolguard import (
    MemoryStore,
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    SQLiteStore,
)
from toolguard import http as toolguard_http
from toolguard._http import app as http_app
from toolguard.http import create_app, create_router

ALICE_JSON = '{"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}'
BOB_JSON = '{"to": "bob@example.com", "subject": "Meeting", "body": "The meeting is at 11."}'
HEX_ID = re.compile(r"[0-9a-f]{32}")
CONFIG = {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
DESCRIPTION = {
    "en": "Tool `send_email` is awaiting approval",
    "id": "Tool `send_email` menunggu persetujuan",
}
NO_PENDING = {
    "en": "There is no action awaiting approval in this conversation",
    "id": "Tidak ada aksi yang menunggu persetujuan di percakapan ini",
}
REVIEW_PENDING = {
    "en": "Some actions are still awaiting approval. Send their decisions first.",
    "id": "Masih ada aksi yang menunggu persetujuan. Kirim keputusannya dulu.",
}
COUNT_2_1 = {
    "en": "Expected 2 decisions (one per action), got 1",
    "id": "Butuh 2 keputusan (satu per aksi), diterima 1",
}
STALE = {
    "en": (
        "The review {review_id} is no longer current in this conversation."
        " Load the thread and decide on its current review."
    ),
    "id": (
        "Review {review_id} sudah tidak berlaku di percakapan ini."
        " Muat ulang percakapan dan putuskan review yang sekarang."
    ),
}
EXPIRED = {
    "en": (
        "The review {review_id} expired before a decision arrived. Its actions were not"
        " executed; send a new message to continue."
    ),
    "id": (
        "Review {review_id} kedaluwarsa sebelum ada keputusan. Aksinya tidak dijalankan;"
        " kirim pesan baru untuk melanjutkan."
    ),
}
REFUSED = {
    "en": "Reviewer {reviewer!r} may not review conversation {thread_id!r}",
    "id": "Peninjau {reviewer!r} tidak boleh meninjau percakapan {thread_id!r}",
}
THREAD_BUSY = {
    "en": (
        "Decisions are being applied in conversation {thread_id!r}. Try again shortly;"
        " if this goes on, the server's operator must recover this thread."
    ),
    "id": (
        "Keputusan sedang diterapkan di percakapan {thread_id!r}. Coba lagi sebentar lagi;"
        " jika terus begini, operator server harus memulihkan percakapan ini."
    ),
}
UNKNOWN_REVIEW = {
    "en": (
        "The review {review_id} is unknown in this conversation: it was never one of its"
        " reviews. Load the thread and decide on its current review."
    ),
    "id": (
        "Review {review_id} tidak dikenal di percakapan ini: tidak pernah menjadi salah satu"
        " review-nya. Muat ulang percakapan dan putuskan review yang sekarang."
    ),
}
EDIT_NEEDS_ACTION = {
    "en": "An 'edit' decision must include 'edited_action'",
    "id": "Keputusan 'edit' wajib menyertakan 'edited_action'",
}
# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def lang_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set TOOLGUARD_LANG from the test's ``lang`` parameter and return the language."""
    lang: str = request.node.callspec.params["lang"]
    if lang != "en":
        monkeypatch.setenv("TOOLGUARD_LANG", lang)
    return lang


def pending_body(thread_id: str, review_id: str, lang: str, *args: dict[str, Any]) -> Any:
    """The exact JSON of a chat/review answer that waits for send_email calls with ``args``."""
    return {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": {
            "action_requests": [
                {"name": "send_email", "args": a, "description": DESCRIPTION[lang]} for a in args
            ],
            "review_configs": [CONFIG for _ in args],
        },
        "review_id": review_id,
    }


def reply_body(thread_id: str, reply: str) -> Any:
    """The exact JSON of an answer with a final reply."""
    return {"thread_id": thread_id, "reply": reply, "pending_review": None, "review_id": None}


def assistant_calls(*items: tuple[str, str]) -> Message:
    """The stored assistant message proposing send_email ``(call_id, arguments JSON)`` calls."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "send_email", "arguments": text}}
            for cid, text in items
        ],
    }


def tool_msg(call_id: str, content: str, status: str = "success") -> Message:
    """A stored tool result message."""
    return {"role": "tool", "tool_call_id": call_id, "content": content, "status": status}


def by_recipient(entry: tuple[str, dict[str, Any]]) -> str:
    """Sort key for logged runs: approved calls of one turn run concurrently, in any order."""
    return str(entry[1]["to"])


def action_views(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The actions of a thread answer without their random ids, timestamps and bookkeeping."""
    keys = ("call_id", "name", "args", "description", "status", "decision", "result")
    return [{k: a[k] for k in keys} for a in actions]


async def start_two_mails(client: httpx.AsyncClient, lang: str = "en") -> tuple[str, str]:
    """Chat until two send_email actions are pending; returns (thread_id, review_id)."""
    response = await client.post("/hitl/chat", json={"message": ASK_ALICE})
    assert response.status_code == 200
    body = response.json()
    assert body == pending_body(
        body["thread_id"], body["review_id"], lang, ALICE_MAIL, BOB_MEETING_MAIL
    )
    return body["thread_id"], body["review_id"]


# --- the happy path -----------------------------------------------------------------------------


async def test_chat_answers_the_whole_pending_review() -> None:
    """POST /hitl/chat with a guarded call answers the exact pending JSON."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL], log))) as client:
        response = await client.post("/hitl/chat", json={"message": ASK_ALICE})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert HEX_ID.fullmatch(body["thread_id"])
    assert HEX_ID.fullmatch(body["review_id"])
    assert body == {
        "thread_id": body["thread_id"],
        "reply": None,
        "pending_review": {
            "action_requests": [
                {
                    "name": "send_email",
                    "args": ALICE_MAIL,
                    "description": "Tool `send_email` is awaiting approval",
                }
            ],
            "review_configs": [
                {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        },
        "review_id": body["review_id"],
    }
    assert log == []


async def test_chat_without_guarded_calls_answers_the_reply() -> None:
    """A model that answers with text gives {reply, pending_review: null, review_id: null}."""
    async with client_for(create_app(make_mail_chat(["Hello!"], []))) as client:
        response = await client.post("/hitl/chat", json={"message": "Hi"})
    assert response.status_code == 200
    body = response.json()
    assert body == reply_body(body["thread_id"], "Hello!")


async def test_review_approve_runs_the_tool_and_answers_the_reply() -> None:
    """POST /hitl/review with an approve runs the tool once and answers the model's reply."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL, "Sent."], log))) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        response = await client.post(
            "/hitl/review",
            json={"thread_id": first["thread_id"], "decisions": [APPROVE]},
        )
    assert response.status_code == 200
    assert response.json() == reply_body(first["thread_id"], "Sent.")
    assert log == [("send_email", ALICE_MAIL)]


async def test_review_edit_and_reject_reach_the_tools_and_the_model() -> None:
    """An edit runs the edited args; a reject's reason reaches the model as an error result."""
    log: Log = []
    chat = make_mail_chat([TWO_MAILS, "One sent, one not."], log)
    edited = {"to": "carol@example.com", "subject": "Meeting", "body": "At 10."}
    decisions = [
        {"type": "edit", "edited_action": {"name": "send_email", "args": edited}},
        {"type": "reject", "message": "Bob already knows."},
    ]
    async with client_for(create_app(chat)) as client:
        thread_id, _ = await start_two_mails(client)
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": decisions}
        )
        thread = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert response.status_code == 200
    assert response.json() == reply_body(thread_id, "One sent, one not.")
    assert log == [("send_email", edited)]
    assert thread["messages"][-3:] == [
        tool_msg("call_1", "Email sent to carol@example.com"),
        tool_msg("call_2", "Rejected by the reviewer, not executed: Bob already knows.", "error"),
        {"role": "assistant", "content": "One sent, one not."},
    ]
    assert [a["status"] for a in thread["actions"]] == ["executed", "rejected"]


async def test_fields_of_another_decision_type_are_ignored() -> None:
    """An approve carrying a malformed edited_action and a non-text message is a plain approve."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL, "Sent."], log))) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        decision = {"type": "approve", "edited_action": {"name": 5, "args": []}, "message": 7}
        response = await client.post(
            "/hitl/review", json={"thread_id": first["thread_id"], "decisions": [decision]}
        )
    assert response.status_code == 200
    assert response.json() == reply_body(first["thread_id"], "Sent.")
    assert log == [("send_email", ALICE_MAIL)]


async def test_a_second_guarded_turn_answers_a_new_pending_review() -> None:
    """After an approve, a model asking for another guarded call gets a new review with a new id."""
    log: Log = []
    script = [ONE_MAIL, calls(("call_2", "send_email", BOB_MEETING_MAIL)), "Both sent."]
    async with client_for(create_app(make_mail_chat(script, log))) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        second = await client.post(
            "/hitl/review", json={"thread_id": first["thread_id"], "decisions": [APPROVE]}
        )
        body = second.json()
        third = await client.post(
            "/hitl/review",
            json={
                "thread_id": first["thread_id"],
                "decisions": [APPROVE],
                "review_id": body["review_id"],
            },
        )
    assert second.status_code == 200
    assert body == pending_body(first["thread_id"], body["review_id"], "en", BOB_MEETING_MAIL)
    assert body["review_id"] != first["review_id"]
    assert third.json() == reply_body(first["thread_id"], "Both sent.")
    assert log == [("send_email", ALICE_MAIL), ("send_email", BOB_MEETING_MAIL)]


# --- GET /hitl/threads/{thread_id} --------------------------------------------------------------


async def test_get_thread_while_pending_and_after_the_review(tmp_path: Path) -> None:
    """GET /hitl/threads/{id}: history, pending review and action statuses, also after a restart."""
    log: Log = []
    db = tmp_path / "threads.sqlite3"
    async with SQLiteStore(db) as store:
        chat = make_mail_chat([ONE_MAIL], log, store=store)
        async with client_for(create_app(chat)) as client:
            first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
            pending = await client.get(f"/hitl/threads/{first['thread_id']}")
    thread_id, review_id = first["thread_id"], first["review_id"]
    assert pending.status_code == 200
    body = pending.json()
    assert set(body) == {
        "thread_id",
        "status",
        "messages",
        "pending_review",
        "review_id",
        "expires_at",
        "actions",
        "grants",
    }
    assert body["thread_id"] == thread_id
    assert body["status"] == "awaiting_review"
    assert body["messages"] == [
        {"role": "user", "content": ASK_ALICE},
        assistant_calls(("call_1", ALICE_JSON)),
    ]
    assert body["pending_review"] == first["pending_review"]
    assert body["review_id"] == review_id
    assert body["expires_at"] is None
    assert action_views(body["actions"]) == [
        {
            "call_id": "call_1",
            "name": "send_email",
            "args": ALICE_MAIL,
            "description": DESCRIPTION["en"],
            "status": "requested",
            "decision": None,
            "result": None,
        }
    ]
    assert body["actions"][0]["decided_at"] is None

    # A new process: a new chat over the same database file serves the same thread.
    async with SQLiteStore(db) as store:
        chat = make_mail_chat(["Sent."], log, store=store)
        async with client_for(create_app(chat)) as client:
            reloaded = await client.get(f"/hitl/threads/{thread_id}")
            review = await client.post(
                "/hitl/review", json={"thread_id": thread_id, "decisions": [APPROVE]}
            )
            after = (await client.get(f"/hitl/threads/{thread_id}")).json()
            stored = await chat.get_thread(thread_id)
    assert reloaded.json() == body
    assert review.json() == reply_body(thread_id, "Sent.")
    assert after["status"] == "idle"
    assert after["pending_review"] is None
    assert after["review_id"] is None
    assert after["messages"] == [
        {"role": "user", "content": ASK_ALICE},
        assistant_calls(("call_1", ALICE_JSON)),
        tool_msg("call_1", "Email sent to alice@example.com"),
        {"role": "assistant", "content": "Sent."},
    ]
    assert action_views(after["actions"]) == [
        {
            "call_id": "call_1",
            "name": "send_email",
            "args": ALICE_MAIL,
            "description": DESCRIPTION["en"],
            "status": "executed",
            "decision": {"type": "approve"},
            "result": {
                "call_id": "call_1",
                "name": "send_email",
                "status": "success",
                "content": "Email sent to alice@example.com",
                "value": "Email sent to alice@example.com",
            },
        }
    ]
    assert after["actions"] == [a.model_dump(mode="json") for a in stored.actions]
    assert after["actions"][0]["id"] == body["actions"][0]["id"]
    assert log == [("send_email", ALICE_MAIL)]


# --- the SPEC validation table: 400 rows --------------------------------------------------------


@LANGS
async def test_review_without_pending_action_is_400(lang: str, lang_env: str) -> None:
    """Row 'no pending action in that thread': 400 with the NoPendingReviewError text."""
    async with client_for(create_app(make_mail_chat(["Hello!"], []))) as client:
        thread_id = (await client.post("/hitl/chat", json={"message": "Hi"})).json()["thread_id"]
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [APPROVE]}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert response.status_code == 400
    assert response.json() == {"detail": NO_PENDING[lang]}
    assert after == before


BAD_400 = [
    pytest.param([APPROVE], COUNT_2_1, id="count-differs"),
    pytest.param([{"type": "edit"}, APPROVE], EDIT_NEEDS_ACTION, id="edit-without-edited_action"),
    pytest.param(
        [APPROVE, {"type": "edit", "edited_action": None}],
        EDIT_NEEDS_ACTION,
        id="edit-with-null-edited_action",
    ),
]


@LANGS
@pytest.mark.parametrize(("decisions", "detail"), BAD_400)
async def test_refused_decisions_are_400_and_change_nothing(
    lang: str, lang_env: str, decisions: list[Any], detail: dict[str, str]
) -> None:
    """Rows answered by validate_decisions: 400 with the exact text; then correct decisions work."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([TWO_MAILS, "Both sent."], log))) as client:
        thread_id, review_id = await start_two_mails(client, lang)
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": decisions}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
        retry = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE, APPROVE], "review_id": review_id},
        )
    assert response.status_code == 400
    assert response.json() == {"detail": detail[lang]}
    assert after == before
    assert after["status"] == "awaiting_review"
    assert retry.status_code == 200
    assert retry.json() == reply_body(thread_id, "Both sent.")
    assert sorted(log, key=by_recipient) == [
        ("send_email", ALICE_MAIL),
        ("send_email", BOB_MEETING_MAIL),
    ]


# --- the SPEC validation table: 422 rows --------------------------------------------------------


def at(*path: str | int) -> list[str | int]:
    """The ``loc`` of an error inside the review body."""
    return ["body", *path]


BAD_422 = [
    pytest.param([], [("too_short", at("decisions"))], id="decisions-empty"),
    pytest.param(
        [{"type": "postpone"}, APPROVE],
        [("literal_error", at("decisions", 0, "type"))],
        id="type-unknown",
    ),
    pytest.param(
        [APPROVE, {"message": "no type"}],
        [("missing", at("decisions", 1, "type"))],
        id="type-missing",
    ),
    pytest.param(
        [None, APPROVE],
        [("model_attributes_type", at("decisions", 0))],
        id="decision-null",
    ),
    pytest.param(
        [APPROVE, "approve"],
        [("model_attributes_type", at("decisions", 1))],
        id="decision-text",
    ),
    pytest.param(
        [{"type": "edit", "edited_action": {"name": 5, "args": ALICE_MAIL}}, APPROVE],
        [("string_type", at("decisions", 0, "edited_action", "name"))],
        id="edited_action-name-not-text",
    ),
    pytest.param(
        [{"type": "edit", "edited_action": {"args": ALICE_MAIL}}, APPROVE],
        [("missing", at("decisions", 0, "edited_action", "name"))],
        id="edited_action-name-missing",
    ),
    pytest.param(
        [APPROVE, {"type": "edit", "edited_action": {"name": "send_email", "args": ["x"]}}],
        [("dict_type", at("decisions", 1, "edited_action", "args"))],
        id="edited_action-args-not-object",
    ),
    pytest.param(
        [APPROVE, {"type": "edit", "edited_action": {"name": "send_email"}}],
        [("missing", at("decisions", 1, "edited_action", "args"))],
        id="edited_action-args-missing",
    ),
    pytest.param(
        [{"type": "edit", "edited_action": "send_email"}, APPROVE],
        [("model_attributes_type", at("decisions", 0, "edited_action"))],
        id="edited_action-not-object",
    ),
    pytest.param(
        [APPROVE, {"type": "reject", "message": 7}],
        [("string_type", at("decisions", 1, "message"))],
        id="reject-message-not-text",
    ),
    pytest.param({"0": APPROVE}, [("list_type", at("decisions"))], id="decisions-not-list"),
]


@LANGS
@pytest.mark.parametrize(("decisions", "errors"), BAD_422)
async def test_malformed_review_bodies_are_422_and_change_nothing(
    lang: str, lang_env: str, decisions: Any, errors: list[tuple[str, list[str | int]]]
) -> None:
    """Body-shape rows (ReviewRequest): 422 whose error loc names the field; nothing changes."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([TWO_MAILS, "Both sent."], log))) as client:
        thread_id, _ = await start_two_mails(client, lang)
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": decisions}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
        retry = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [APPROVE, APPROVE]}
        )
    assert response.status_code == 422
    assert [(e["type"], e["loc"]) for e in response.json()["detail"]] == errors
    assert after == before
    assert retry.json() == reply_body(thread_id, "Both sent.")
    assert sorted(log, key=by_recipient) == [
        ("send_email", ALICE_MAIL),
        ("send_email", BOB_MEETING_MAIL),
    ]


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        pytest.param({"decisions": [APPROVE]}, [("missing", ["body", "thread_id"])], id="review"),
        pytest.param({"thread_id": "t"}, [("missing", ["body", "decisions"])], id="decisions"),
    ],
)
async def test_review_body_without_a_required_field_is_422(
    body: dict[str, Any], errors: list[tuple[str, list[str]]]
) -> None:
    """A review body without thread_id or decisions is 422 at that field."""
    async with client_for(create_app(make_mail_chat([], []))) as client:
        response = await client.post("/hitl/review", json=body)
    assert response.status_code == 422
    assert [(e["type"], e["loc"]) for e in response.json()["detail"]] == errors


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        pytest.param({"message": ""}, [("string_too_short", ["body", "message"])], id="empty"),
        pytest.param({}, [("missing", ["body", "message"])], id="missing"),
        pytest.param({"message": 5}, [("string_type", ["body", "message"])], id="not-text"),
    ],
)
async def test_chat_body_without_a_message_is_422(
    body: dict[str, Any], errors: list[tuple[str, list[str]]]
) -> None:
    """A chat body whose message is missing, empty or not text is 422 at ``message``."""
    async with client_for(create_app(make_mail_chat([], []))) as client:
        response = await client.post("/hitl/chat", json=body)
    assert response.status_code == 422
    assert [(e["type"], e["loc"]) for e in response.json()["detail"]] == errors


# --- other errors -------------------------------------------------------------------------------


@LANGS
async def test_chat_while_a_review_is_pending_is_400(lang: str, lang_env: str) -> None:
    """A new message while actions wait is 400 with the ReviewPendingError text; nothing changes."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL, "Sent."], log))) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        thread_id = first["thread_id"]
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        response = await client.post(
            "/hitl/chat", json={"message": "And Bob?", "thread_id": thread_id}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
        retry = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [APPROVE]}
        )
    assert response.status_code == 400
    assert response.json() == {"detail": REVIEW_PENDING[lang]}
    assert after == before
    assert retry.json() == reply_body(thread_id, "Sent.")


@LANGS
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("POST", "/hitl/chat", {"message": "Hi", "thread_id": "nope"}, id="chat"),
        pytest.param(
            "POST", "/hitl/review", {"thread_id": "nope", "decisions": [APPROVE]}, id="review"
        ),
        pytest.param("GET", "/hitl/threads/nope", None, id="thread"),
    ],
)
async def test_unknown_thread_is_404(
    lang: str, lang_env: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    """Chat, review and thread requests naming an unknown thread answer 404 with the error text."""
    async with client_for(create_app(make_mail_chat(["Hello!"], []))) as client:
        response = await client.request(method, path, json=body)
    assert response.status_code == 404
    assert response.json() == {
        "detail": {
            "en": "Unknown thread_id 'nope': start a conversation with POST /hitl/chat",
            "id": "thread_id 'nope' tidak dikenal: mulai percakapan dengan POST /hitl/chat",
        }[lang]
    }


async def test_model_error_is_502_and_keeps_the_thread() -> None:
    """A ModelError answers 502 with its text; the thread keeps its last saved state."""
    async with client_for(create_app(make_mail_chat(["Hello!"], []))) as client:
        thread_id = (await client.post("/hitl/chat", json={"message": "Hi"})).json()["thread_id"]
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        response = await client.post(
            "/hitl/chat", json={"message": "Again", "thread_id": thread_id}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert response.status_code == 502
    assert response.json() == {"detail": "ScriptedModel ran out of script after 1 responses"}
    assert after == before


async def test_model_error_after_approved_tools_is_502() -> None:
    """A ModelError after the approved tool ran is 502; the tool ran once and its result is kept."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL], log))) as client:
        thread_id = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()[
            "thread_id"
        ]
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": [APPROVE]}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert response.status_code == 502
    assert response.json() == {"detail": "ScriptedModel ran out of script after 1 responses"}
    assert log == [("send_email", ALICE_MAIL)]
    assert after["messages"][-1] == tool_msg("call_1", "Email sent to alice@example.com")
    assert [a["status"] for a in after["actions"]] == ["executed"]


async def test_step_limit_is_500_with_the_error_text() -> None:
    """A model that keeps calling tools past max_steps answers 500 with the StepLimitError text."""
    script = [calls(("call_1", "search", {"query": "x"}))]
    chat = make_mail_chat(script, [], max_steps=1)
    async with client_for(create_app(chat)) as client:
        response = await client.post("/hitl/chat", json={"message": "Look it up"})
    assert response.status_code == 500
    assert response.json() == {
        "detail": "The model called tools for 1 steps without answering;"
        " the thread is saved and can go on with a new message."
    }


class GatedModel:
    """Answers ``text`` once ``parties`` calls are waiting at the same time."""

    def __init__(self, parties: int, text: str) -> None:
        self.parties = parties
        self.text = text
        self.waiting = 0
        self.all_in = anyio.Event()

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Wait for the other calls, then answer."""
        self.waiting += 1
        if self.waiting >= self.parties:
            self.all_in.set()
        await self.all_in.wait()
        return ModelResponse(text=self.text)


async def test_two_messages_racing_on_one_thread_give_one_409() -> None:
    """Two simultaneous messages on one thread: one is saved, the other answers 409."""
    store = MemoryStore()
    first = await ReviewedChat(ScriptedModel(["Hello!"]), [], store=store).send_message("Hi")
    chat = ReviewedChat(GatedModel(parties=2, text="Noted."), [], store=store)
    responses: list[httpx.Response] = []
    async with client_for(create_app(chat)) as client:

        async def send(text: str) -> None:
            payload = {"message": text, "thread_id": first.thread_id}
            responses.append(await client.post("/hitl/chat", json=payload))

        with anyio.fail_after(10):  # a bound against a hang, not a timing check
            async with anyio.create_task_group() as group:
                group.start_soon(send, "first")
                group.start_soon(send, "second")
        thread = (await client.get(f"/hitl/threads/{first.thread_id}")).json()
    assert sorted(r.status_code for r in responses) == [200, 409]
    conflict = next(r for r in responses if r.status_code == 409)
    assert conflict.json() == {
        "detail": f"Thread {first.thread_id!r} was changed by someone else"
        " (expected version 1, found 2)"
    }
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "user", "assistant"]


@LANGS
async def test_message_while_decisions_are_applied_is_409(lang: str, lang_env: str) -> None:
    """A message while decisions are being applied: 409 with ThreadBusyError's text."""
    store = MemoryStore()
    chat = make_mail_chat([ONE_MAIL], [], store=store)
    turn = await chat.send_message(ASK_ALICE)
    state = await chat.get_thread(turn.thread_id)
    await store.save(state.model_copy(update={"status": "running"}), expected_version=state.version)
    async with client_for(create_app(chat)) as client:
        response = await client.post(
            "/hitl/chat", json={"message": "And Bob?", "thread_id": turn.thread_id}
        )
    assert response.status_code == 409
    assert response.json() == {"detail": THREAD_BUSY[lang].format(thread_id=turn.thread_id)}


# --- review_id, mounting, the page --------------------------------------------------------------


@LANGS
async def test_review_for_an_older_review_id_is_400_and_changes_nothing(
    lang: str, lang_env: str
) -> None:
    """A review_id the thread never had: 400 with UnknownReviewError's text."""
    log: Log = []
    async with client_for(create_app(make_mail_chat([ONE_MAIL, "Sent."], log))) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        thread_id = first["thread_id"]
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        stale = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE], "review_id": "old-review"},
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
        current = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE], "review_id": first["review_id"]},
        )
    assert stale.status_code == 400
    assert stale.json() == {"detail": UNKNOWN_REVIEW[lang].format(review_id="old-review")}
    assert after == before
    assert current.json() == reply_body(thread_id, "Sent.")
    assert log == [("send_email", ALICE_MAIL)]


class Clock:
    """A settable clock for review deadlines."""

    def __init__(self) -> None:
        self.now = datetime(2025, 6, 2, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        """The current fake time."""
        return self.now


@LANGS
async def test_review_after_the_deadline_is_400_and_expires_the_actions(
    lang: str, lang_env: str
) -> None:
    """A review past review_ttl: 400 with ReviewExpiredError's text; the action expires unrun."""
    log: Log = []
    clock = Clock()
    chat = make_mail_chat([ONE_MAIL, "Okay, I did not send it."], log, review_ttl=60, clock=clock)
    async with client_for(create_app(chat)) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        thread_id = first["thread_id"]
        pending = (await client.get(f"/hitl/threads/{thread_id}")).json()
        clock.now += timedelta(seconds=61)
        late = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE], "review_id": first["review_id"]},
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert pending["expires_at"] == "2025-06-02T09:01:00Z"
    assert late.status_code == 400
    assert late.json() == {"detail": EXPIRED[lang].format(review_id=first["review_id"])}
    assert (after["status"], after["pending_review"], after["expires_at"]) == ("idle", None, None)
    assert [a["status"] for a in after["actions"]] == ["expired"]
    assert log == []


def reviewer_header(x_reviewer: Annotated[str | None, Header()] = None) -> str | None:
    """The reviewer's identity from the X-Reviewer header (a stand-in for a login)."""
    return x_reviewer


@LANGS
async def test_reviewer_refused_by_authorize_is_403(lang: str, lang_env: str) -> None:
    """The reviewer dependency's identity reaches authorize; a refused reviewer gets 403."""
    log: Log = []
    seen: list[str | None] = []

    def authorize(reviewer: str | None, thread: Any, actions: Any) -> bool:
        seen.append(reviewer)
        return reviewer == "alice"

    chat = make_mail_chat([ONE_MAIL, "Sent."], log, authorize=authorize)
    app = create_app(chat, reviewer=reviewer_header)
    async with client_for(app) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        body = {"thread_id": first["thread_id"], "decisions": [APPROVE]}
        refused = await client.post("/hitl/review", json=body, headers={"X-Reviewer": "mallory"})
        allowed = await client.post("/hitl/review", json=body, headers={"X-Reviewer": "alice"})
        thread = (await client.get(f"/hitl/threads/{first['thread_id']}")).json()
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": REFUSED[lang].format(reviewer="mallory", thread_id=first["thread_id"])
    }
    assert allowed.json() == reply_body(first["thread_id"], "Sent.")
    assert seen == ["mallory", "alice"]
    assert [(a["status"], a["reviewer"]) for a in thread["actions"]] == [("executed", "alice")]
    assert log == [("send_email", ALICE_MAIL)]


async def test_cancel_closes_the_review_without_running_anything() -> None:
    """POST /hitl/cancel: nothing runs, the actions are cancelled and the thread takes messages."""
    log: Log = []
    chat = make_mail_chat([ONE_MAIL, "Fine, cancelled."], log)
    async with client_for(create_app(chat)) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        thread_id = first["thread_id"]
        cancelled = await client.post(
            "/hitl/cancel",
            json={"thread_id": thread_id, "review_id": first["review_id"], "reason": "Not now."},
        )
        thread = (await client.get(f"/hitl/threads/{thread_id}")).json()
        nothing = await client.post("/hitl/cancel", json={"thread_id": thread_id})
        missing = await client.post("/hitl/cancel", json={"thread_id": "nope"})
        message = await client.post(
            "/hitl/chat", json={"message": "Never mind.", "thread_id": thread_id}
        )
    assert cancelled.status_code == 200
    assert cancelled.json() == {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": None,
        "review_id": first["review_id"],
    }
    assert (thread["status"], thread["pending_review"]) == ("idle", None)
    assert [a["status"] for a in thread["actions"]] == ["cancelled"]
    assert (nothing.status_code, nothing.json()) == (400, {"detail": NO_PENDING["en"]})
    assert missing.status_code == 404
    assert message.json() == reply_body(thread_id, "Fine, cancelled.")
    assert log == []


async def test_router_mounts_into_an_existing_app_with_its_own_prefix() -> None:
    """create_router works in any FastAPI app: prefix applied, errors mapped without handlers."""
    log: Log = []
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(create_router(make_mail_chat([ONE_MAIL, "Sent."], log), prefix="/agent"))
    async with client_for(app) as client:
        first = (await client.post("/agent/chat", json={"message": ASK_ALICE})).json()
        refused = await client.post(
            "/agent/review", json={"thread_id": first["thread_id"], "decisions": [APPROVE] * 2}
        )
        missing = await client.get("/agent/threads/nope")
        done = await client.post(
            "/agent/review", json={"thread_id": first["thread_id"], "decisions": [APPROVE]}
        )
        health_response = await client.get("/health")
        old_path = await client.post("/hitl/chat", json={"message": ASK_ALICE})
    assert first == pending_body(first["thread_id"], first["review_id"], "en", ALICE_MAIL)
    assert (refused.status_code, refused.json()) == (
        400,
        {"detail": "Expected 1 decision (one per action), got 2"},
    )
    assert missing.status_code == 404
    assert done.json() == reply_body(first["thread_id"], "Sent.")
    assert health_response.json() == {"status": "ok"}
    assert old_path.status_code == 404


async def test_the_chat_dependency_can_be_overridden() -> None:
    """The routes get the chat through a dependency that app.dependency_overrides can replace."""
    app = FastAPI()
    router = create_router(make_mail_chat(["From the original."], []))
    app.include_router(router)
    replacement = make_mail_chat(["From the override."], [])
    dependency = router.routes[0].dependant.dependencies[0].call  # type: ignore[attr-defined]
    app.dependency_overrides[dependency] = lambda: replacement
    async with client_for(app) as client:
        response = await client.post("/hitl/chat", json={"message": "Hi"})
    assert response.json() == reply_body(response.json()["thread_id"], "From the override.")


async def test_openapi_lists_the_api_routes() -> None:
    """The OpenAPI document lists exactly the API routes (not the page)."""
    async with client_for(create_app(make_mail_chat([], []))) as client:
        document = (await client.get("/openapi.json")).json()
    assert sorted(document["paths"]) == [
        "/hitl/cancel",
        "/hitl/chat",
        "/hitl/events",
        "/hitl/info",
        "/hitl/review",
        "/hitl/reviews",
        "/hitl/session",
        "/hitl/stats",
        "/hitl/threads/{thread_id}",
        "/hitl/threads/{thread_id}/audit",
        "/hitl/threads/{thread_id}/grants/{grant_id}",
        "/hitl/tools",
    ]
    assert sorted(document["paths"]["/hitl/review"]["post"]["responses"]) == [
        "200",
        "400",
        "403",
        "404",
        "409",
        "413",
        "415",
        "422",
        "500",
        "502",
    ]


async def test_page_is_served_at_root_with_its_static_files() -> None:
    """create_app serves the package's index.html at / and the page's files under /static/."""
    folder = Path(toolguard_http.__file__).parent / "static"
    async with client_for(create_app(make_mail_chat([], []))) as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
        style = await client.get("/static/style.css")
        absent = await client.get("/static/no-such-file.js")
        escape = await client.get("/static/%2e%2e/http.py")
    assert (page.status_code, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert page.content == (folder / "index.html").read_bytes()
    assert (script.status_code, script.headers["content-type"]) == (
        200,
        "text/javascript; charset=utf-8",
    )
    assert script.content == (folder / "app.js").read_bytes()
    assert (style.status_code, style.headers["content-type"]) == (200, "text/css; charset=utf-8")
    assert style.content == (folder / "style.css").read_bytes()
    assert (absent.status_code, absent.json()) == (404, {"detail": "Not Found"})
    assert escape.request.url.path == "/static/../http.py"
    assert (escape.status_code, escape.json()) == (404, {"detail": "Not Found"})


async def test_page_false_and_missing_page_folder_give_404(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the page (page=False, or no static folder in the package) / answers 404."""
    async with client_for(create_app(make_mail_chat([], []), page=False)) as client:
        disabled = await client.get("/")
    monkeypatch.setattr(http_app, "_page_dir", lambda: None)
    async with client_for(create_app(make_mail_chat([], []))) as client:
        missing = await client.get("/")
        missing_asset = await client.get("/static/app.js")
    for response in (disabled, missing, missing_asset):
        assert (response.status_code, response.json()) == (404, {"detail": "Not Found"})


# --- over TCP -----------------------------------------------------------------------------------


def test_over_tcp_with_uvicorn(tmp_path: Path) -> None:
    """Over a real socket: chat → pending, reload the thread, approve → reply, all as JSON."""
    log: Log = []
    store = SQLiteStore(tmp_path / "tcp.sqlite3")
    chat = make_mail_chat([ONE_MAIL, "Sent."], log, store=store)
    try:
        with (
            serve_in_thread(create_app(chat)) as base_url,
            httpx.Client(base_url=base_url) as client,
        ):
            first = client.post("/hitl/chat", json={"message": ASK_ALICE})
            body = first.json()
            thread = client.get(f"/hitl/threads/{body['thread_id']}").json()
            refused = client.post(
                "/hitl/review", json={"thread_id": body["thread_id"], "decisions": []}
            )
            done = client.post(
                "/hitl/review", json={"thread_id": body["thread_id"], "decisions": [APPROVE]}
            )
            page = client.get("/")
    finally:
        store.close()
    assert first.status_code == 200
    assert body == pending_body(body["thread_id"], body["review_id"], "en", ALICE_MAIL)
    assert (thread["status"], thread["review_id"]) == ("awaiting_review", body["review_id"])
    assert refused.status_code == 422
    assert done.json() == reply_body(body["thread_id"], "Sent.")
    assert page.status_code == 200
    assert log == [("send_email", ALICE_MAIL)]
