"""The HTTP API: GET /hitl/tools, error texts that name routes, unknown versus stale review ids."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from tests.helpers import (
    APPROVE,
    ASK_ALICE,
    LANGS,
    ONE_MAIL,
    TWO_MAILS,
    Log,
    calls,
    client_for,
    make_mail_chat,
)
from toolguard import (
    MemoryStore,
    ReviewedChat,
    ScriptedModel,
    StaleReviewError,
    Tool,
    UnknownReviewError,
    UnknownThreadError,
)
from toolguard.http import create_app, create_router

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
UNKNOWN_THREAD_HTTP = {
    "en": "Unknown thread_id 'nope': start a conversation with POST {route}",
    "id": "thread_id 'nope' tidak dikenal: mulai percakapan dengan POST {route}",
}
THREAD_BUSY_HTTP = {
    "en": (
        "Decisions are being applied in conversation {thread_id!r}. Try again shortly;"
        " if this goes on, the server's operator must recover this thread."
    ),
    "id": (
        "Keputusan sedang diterapkan di percakapan {thread_id!r}. Coba lagi sebentar lagi;"
        " jika terus begini, operator server harus memulihkan percakapan ini."
    ),
}


@pytest.fixture
def lang_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Set TOOLGUARD_LANG from the test's ``lang`` parameter and return the language."""
    lang: str = request.node.callspec.params["lang"]
    if lang != "en":
        monkeypatch.setenv("TOOLGUARD_LANG", lang)
    return lang


SEND_EMAIL = {
    "name": "send_email",
    "description": "Send an email.",
    "parameters": {
        "additionalProperties": False,
        "properties": {
            "to": {"description": "the recipient's address.", "type": "string"},
            "subject": {"description": "the subject line.", "type": "string"},
            "body": {"description": "the text.", "type": "string"},
        },
        "required": ["to", "subject", "body"],
        "type": "object",
    },
    "approval": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'send' is an approval verb (messaging and publishing)",
    },
}
SEARCH = {
    "name": "search",
    "description": "Search the documents.",
    "parameters": {
        "additionalProperties": False,
        "properties": {"query": {"description": "words to look for.", "type": "string"}},
        "required": ["query"],
        "type": "object",
    },
    "approval": {
        "needs_approval": False,
        "rule": "read",
        "reason": "the word 'search' is a read verb",
    },
}


async def test_tools_route_lists_every_tool_with_its_schema() -> None:
    """GET /hitl/tools answers each tool's name, description, JSON Schema and why it asks."""
    async with client_for(create_app(make_mail_chat([], []))) as client:
        response = await client.get("/hitl/tools")
    assert response.status_code == 200
    assert response.json() == {"tools": [SEND_EMAIL, SEARCH]}


async def test_tools_route_keeps_a_schema_tools_schema_exactly() -> None:
    """A Tool.from_schema tool's richer schema is served as given (enum, format, nesting)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "level": {"type": "string", "enum": ["low", "high"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        },
        "required": ["level"],
    }
    tool = Tool.from_schema("set_level", "Set the level.", schema, lambda **_: "ok")
    chat = ReviewedChat(ScriptedModel([]), [tool])
    async with client_for(create_app(chat)) as client:
        response = await client.get("/hitl/tools")
    assert response.json() == {
        "tools": [
            {
                "name": "set_level",
                "description": "Set the level.",
                "parameters": schema,
                "approval": {
                    "needs_approval": True,
                    "rule": "verb",
                    "reason": "the word 'set' is an approval verb (data)",
                },
            }
        ]
    }


async def test_tools_route_gives_every_rule_of_the_classifier_its_reason() -> None:
    """GET /hitl/tools shows the read, unknown, destructive and unreadable reasons exactly."""
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    names = ["get_order_details", "frobnicate_widget", "search_and_replace", "get_d\u0435lete_file"]
    tools = [Tool.from_schema(name, "A tool.", schema, lambda **_: "ok") for name in names]
    async with client_for(create_app(ReviewedChat(ScriptedModel([]), tools))) as client:
        response = await client.get("/hitl/tools")
    approvals = {tool["name"]: tool["approval"] for tool in response.json()["tools"]}
    assert approvals == {
        "get_order_details": {
            "needs_approval": False,
            "rule": "read",
            "reason": (
                "the read verb 'get' leads the action: 'order' is read as a thing, not an action"
            ),
        },
        "frobnicate_widget": {
            "needs_approval": True,
            "rule": "unknown",
            "reason": "no known verb in ['frobnicate', 'widget']: unknown=\"ask\"",
        },
        "search_and_replace": {
            "needs_approval": True,
            "rule": "verb",
            "reason": (
                "the word 'replace' is a destructive verb: the read verb 'search' before it does "
                "not exempt it"
            ),
        },
        "get_d\u0435lete_file": {
            "needs_approval": True,
            "rule": "unreadable",
            "reason": (
                "the name holds U+0435 CYRILLIC SMALL LETTER IE, which is not printable ASCII: "
                "its words cannot be read, so it needs approval"
            ),
        },
    }


async def test_tools_route_lives_under_the_routers_prefix() -> None:
    """Mounted with another prefix, the tools are under it."""
    app = FastAPI()
    app.include_router(create_router(make_mail_chat([], []), prefix="/agent"))
    async with client_for(app) as client:
        response = await client.get("/agent/tools")
    assert response.json() == {"tools": [SEND_EMAIL, SEARCH]}


@LANGS
@pytest.mark.parametrize("prefix", ["/hitl", "/agent"])
async def test_unknown_thread_over_http_names_the_chat_route(
    lang: str, lang_env: str, prefix: str
) -> None:
    """Over HTTP the unknown-thread text names the chat route (with the router's prefix)."""
    app = FastAPI()
    app.include_router(create_router(make_mail_chat([], []), prefix=prefix))
    async with client_for(app) as client:
        response = await client.get(f"{prefix}/threads/nope")
    assert response.status_code == 404
    assert response.json() == {"detail": UNKNOWN_THREAD_HTTP[lang].format(route=f"{prefix}/chat")}


async def test_unknown_thread_in_python_still_names_send_message() -> None:
    """The Python error keeps its method name: only HTTP answers name routes."""
    with pytest.raises(UnknownThreadError) as caught:
        await make_mail_chat([], []).get_thread("nope")
    assert str(caught.value) == ("Unknown thread_id 'nope': start a conversation with send_message")


@LANGS
async def test_busy_thread_over_http_does_not_ask_for_recover(lang: str, lang_env: str) -> None:
    """A 409 for a busy thread tells the HTTP client what it can do (no Python method)."""
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
    assert response.json() == {"detail": THREAD_BUSY_HTTP[lang].format(thread_id=turn.thread_id)}


@LANGS
async def test_an_earlier_review_id_is_stale_and_a_made_up_one_unknown(
    lang: str, lang_env: str
) -> None:
    """A review id the thread had is 'no longer current'; one it never had is 'unknown'."""
    log: Log = []
    chat = make_mail_chat([TWO_MAILS, ONE_MAIL, calls()], log)
    async with client_for(create_app(chat)) as client:
        first = (await client.post("/hitl/chat", json={"message": ASK_ALICE})).json()
        thread_id = first["thread_id"]
        both = [APPROVE, APPROVE]
        second = (
            await client.post(
                "/hitl/review",
                json={"thread_id": thread_id, "decisions": both, "review_id": first["review_id"]},
            )
        ).json()
        before = (await client.get(f"/hitl/threads/{thread_id}")).json()
        stale = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE], "review_id": first["review_id"]},
        )
        unknown = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [APPROVE], "review_id": "r-never"},
        )
        cancel_unknown = await client.post(
            "/hitl/cancel", json={"thread_id": thread_id, "review_id": "r-never"}
        )
        after = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert second["review_id"] not in (None, first["review_id"])
    assert (stale.status_code, stale.json()) == (
        400,
        {"detail": STALE[lang].format(review_id=first["review_id"])},
    )
    unknown_body = {"detail": UNKNOWN_REVIEW[lang].format(review_id="r-never")}
    assert (unknown.status_code, unknown.json()) == (400, unknown_body)
    assert (cancel_unknown.status_code, cancel_unknown.json()) == (400, unknown_body)
    assert after == before
    assert len(log) == 2


async def test_unknown_review_error_is_a_stale_review_error() -> None:
    """Code catching StaleReviewError still catches a made-up id; it carries both ids."""
    chat = make_mail_chat([ONE_MAIL], [])
    paused = await chat.send_message(ASK_ALICE)
    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, review_id="r-never")
    assert type(caught.value) is UnknownReviewError
    assert (caught.value.review_id, caught.value.current) == ("r-never", paused.review_id)
    assert str(caught.value) == UNKNOWN_REVIEW["en"].format(review_id="r-never")


async def test_a_closed_review_id_after_the_thread_went_idle_is_stale() -> None:
    """After the review was answered and nothing is pending, its id is stale, not unknown."""
    chat = make_mail_chat([ONE_MAIL, "Sent."], [])
    paused = await chat.send_message(ASK_ALICE)
    assert paused.review_id is not None
    await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)
    with pytest.raises(StaleReviewError) as again:
        await chat.submit_review([APPROVE], paused.thread_id, review_id=paused.review_id)
    with pytest.raises(UnknownReviewError) as never:
        await chat.submit_review([APPROVE], paused.thread_id, review_id="r-never")
    assert type(again.value) is StaleReviewError
    assert str(again.value) == STALE["en"].format(review_id=paused.review_id)
    assert (never.value.review_id, never.value.current) == ("r-never", None)
