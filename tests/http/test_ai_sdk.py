"""POST /hitl/ai-sdk/chat: the Vercel AI SDK's UI message stream in front of a ReviewedChat.

Every stream is read whole and compared part by part; every part is checked against the
shapes of the ``ai`` package's ``uiMessageChunkSchema`` (7.0.173). Refused requests answer
one ``error`` part and leave the stored thread exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from tests.helpers import ALICE_MAIL, BOB_MEETING_MAIL, make_mail_tools, too_large
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall, requires_approval
from toolguard._http.ai_sdk import (
    BAD_THREAD,
    MALFORMED,
    NO_ANSWER,
    NO_TEXT,
    NO_THREAD,
    NOT_CARRIED,
    OTHER_CALL,
    REGENERATE,
    TWICE,
    TWO_REVIEWS,
    UNANSWERED,
    UNKNOWN,
)
from toolguard.integrations.ai_sdk import create_router

URL = "/hitl/ai-sdk/chat"
REVIEWS = "https://reviews.example/?thread={thread_id}"
WAITING = "Tool `send_email` is awaiting approval"

# ---------------------------------------------------------------------------- the part shapes

_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "providerMetadata": dict,
    "toolMetadata": dict,
    "providerExecuted": bool,
    "dynamic": bool,
    "title": str,
    "preliminary": bool,
    "reason": str,
    "isAutomatic": bool,
    "signature": str,
    "messageId": str,
    "finishReason": str,
}
SHAPES: dict[str, dict[str, Any]] = {
    "start": {},
    "start-step": {},
    "finish-step": {},
    "text-start": {"id": str},
    "text-delta": {"id": str, "delta": str},
    "text-end": {"id": str},
    "tool-input-available": {"toolCallId": str, "toolName": str, "input": object},
    "tool-approval-request": {"approvalId": str, "toolCallId": str},
    "tool-output-available": {"toolCallId": str, "output": object},
    "tool-output-error": {"toolCallId": str, "errorText": str},
    "tool-output-denied": {"toolCallId": str},
    "finish": {},
    "error": {"errorText": str},
}
"""The required fields of each part type the route sends (``ui-message-chunks.ts``)."""
FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"}


def check_part(part: dict[str, Any]) -> None:
    """``part`` fits the ``ai`` package's schema of its type."""
    kind = part["type"]
    assert kind in SHAPES, part
    for name, expected in SHAPES[kind].items():
        assert name in part, (kind, name)
        assert isinstance(part[name], expected), (kind, name)
    for name, expected in _OPTIONAL.items():
        if name in part:
            assert isinstance(part[name], expected), (kind, name)
    if kind == "finish" and "finishReason" in part:
        assert part["finishReason"] in FINISH_REASONS


def read_stream(response: httpx.Response) -> list[dict[str, Any]]:
    """The parts of a UI message stream, checked: SSE ``data:`` events ended by ``[DONE]``."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    parts = []
    for event in events[:-2]:
        assert event.startswith("data: ")
        part = json.loads(event.removeprefix("data: "))
        check_part(part)
        parts.append(part)
    return parts


# ---------------------------------------------------------------------------- the chat


def step(messages: Sequence[Any]) -> ModelResponse:
    """``two``: two mails at once; any other message: a search (runs) and a mail (waits)."""
    last = messages[-1]
    if last["role"] == "tool":
        return ModelResponse(text=f"Done: {last['content']}")
    if last["content"] == "two":
        return ModelResponse(
            tool_calls=[
                ToolCall(id="call_a", name="send_email", args=ALICE_MAIL),
                ToolCall(id="call_b", name="send_email", args=BOB_MEETING_MAIL),
            ]
        )
    return ModelResponse(
        text="On it.",
        tool_calls=[
            ToolCall(id="call_s", name="search", args={"query": "alice"}),
            ToolCall(id="call_1", name="send_email", args=ALICE_MAIL),
        ],
    )


@pytest.fixture(scope="module")
def log() -> list[Any]:
    return []


@pytest.fixture(scope="module")
def chat(log: list[Any]) -> ReviewedChat:
    return ReviewedChat(ScriptedModel([step], repeat=True), make_mail_tools(log))


@pytest.fixture
async def client(chat: ReviewedChat) -> AsyncIterator[httpx.AsyncClient]:
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(create_router(chat, review_url=REVIEWS, max_body_bytes=64 * 1024))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


def user(text: str, thread_id: str | None = None) -> dict[str, Any]:
    meta = {"toolguard": {"threadId": thread_id}} if thread_id is not None else None
    return {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}], "metadata": meta}


def answered(thread_id: str | None, *answers: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """The assistant message after ``addToolApprovalResponse``: ``(call id, approval id,
    {approved, reason?})`` per answered call."""
    parts = [
        {
            "type": "tool-send_email",
            "toolCallId": call_id,
            "state": "approval-responded",
            "input": {},
            "approval": {"id": approval_id, **answer},
        }
        for call_id, approval_id, answer in answers
    ]
    meta = {"toolguard": {"threadId": thread_id}} if thread_id is not None else {}
    return {"id": "a", "role": "assistant", "parts": parts, "metadata": meta}


async def post(client: httpx.AsyncClient, *messages: dict[str, Any], **extra: Any) -> Any:
    body = {"id": "chat", "messages": list(messages), "trigger": "submit-message", **extra}
    return read_stream(await client.post(URL, json=body))


async def paused(client: httpx.AsyncClient, text: str = "mail") -> tuple[str, str, list[str]]:
    """A new thread paused on its mails: its id, its review's id and the approval ids."""
    parts = await post(client, user(text))
    meta = parts[0]["messageMetadata"]["toolguard"]
    approvals = [p["approvalId"] for p in parts if p["type"] == "tool-approval-request"]
    return meta["threadId"], meta["reviewId"], approvals


async def stored(chat: ReviewedChat, thread_id: str) -> Any:
    state = await chat.store.load(thread_id)
    assert state is not None
    return state.model_dump(mode="json")


def stale(review_id: str) -> str:
    """The chat's text for decisions of a review that is no longer waiting."""
    return (
        f"The review {review_id} is no longer current in this conversation. Load the thread"
        " and decide on its current review."
    )


def error(text: str) -> list[dict[str, Any]]:
    return [{"type": "error", "errorText": text}]


# ---------------------------------------------------------------------------- round trips


async def test_a_paused_turn_then_an_approval(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    """The pause streams the step (text, both calls, the search's output) and one approval
    request; the approval runs the mail once and streams its output and the reply."""
    log.clear()
    parts = await post(client, user("mail"))
    thread_id = parts[0]["messageMetadata"]["toolguard"]["threadId"]
    state = await chat.get_thread(thread_id)
    assert state.pending is not None
    review_id, action = state.pending.review_id, state.pending.actions[0]
    assert parts == [
        {
            "type": "start",
            "messageMetadata": {"toolguard": {"threadId": thread_id, "reviewId": review_id}},
        },
        {"type": "start-step"},
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": "On it."},
        {"type": "text-end", "id": "text-1"},
        {
            "type": "tool-input-available",
            "toolCallId": "call_s",
            "toolName": "search",
            "input": {"query": "alice"},
        },
        {
            "type": "tool-input-available",
            "toolCallId": "call_1",
            "toolName": "send_email",
            "input": ALICE_MAIL,
        },
        {"type": "tool-output-available", "toolCallId": "call_s", "output": '["result for alice"]'},
        {
            "type": "tool-approval-request",
            "approvalId": f"{review_id}.{action.id}",
            "toolCallId": "call_1",
            "reason": WAITING,
            "approvalDescriptor": {
                "threadId": thread_id,
                "reviewId": review_id,
                "toolName": "send_email",
                "allowedDecisions": ["approve", "edit", "reject"],
                "reviewUrl": f"https://reviews.example/?thread={thread_id}",
            },
        },
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls"},
    ]
    assert log == [("search", {"query": "alice"})]

    approval = f"{review_id}.{action.id}"
    parts = await post(client, answered(thread_id, ("call_1", approval, {"approved": True})))
    assert parts == [
        {
            "type": "start",
            "messageMetadata": {"toolguard": {"threadId": thread_id, "reviewId": None}},
        },
        {
            "type": "tool-output-available",
            "toolCallId": "call_1",
            "output": "Email sent to alice@example.com",
        },
        {"type": "start-step"},
        {"type": "text-start", "id": "text-4"},
        {"type": "text-delta", "id": "text-4", "delta": "Done: Email sent to alice@example.com"},
        {"type": "text-end", "id": "text-4"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    assert log == [("search", {"query": "alice"}), ("send_email", ALICE_MAIL)]

    # The same approval again (a replayed request): refused, nothing runs or changes.
    before = await stored(chat, thread_id)
    again = answered(thread_id, ("call_1", approval, {"approved": True}))
    assert await post(client, again) == error(stale(review_id))
    assert await stored(chat, thread_id) == before
    assert log == [("search", {"query": "alice"}), ("send_email", ALICE_MAIL)]


async def test_a_denial_with_its_reason(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    """A denial rejects the call with the reason as the model's text; the body never runs."""
    log.clear()
    thread_id, _, [approval] = await paused(client)
    reason = "not now \u2028 <b>"
    parts = await post(
        client, answered(thread_id, ("call_1", approval, {"approved": False, "reason": reason}))
    )
    text = f"Done: Rejected by the reviewer, not executed: {reason}"
    assert parts == [
        {
            "type": "start",
            "messageMetadata": {"toolguard": {"threadId": thread_id, "reviewId": None}},
        },
        {"type": "tool-output-denied", "toolCallId": "call_1"},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-4"},
        {"type": "text-delta", "id": "text-4", "delta": text},
        {"type": "text-end", "id": "text-4"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]
    assert log == [("search", {"query": "alice"})]
    state = await chat.get_thread(thread_id)
    assert [(a.status, a.decision and a.decision.model_dump()) for a in state.actions] == [
        ("rejected", {"type": "reject", "message": reason})
    ]


async def test_the_next_message_continues_the_thread(client: httpx.AsyncClient) -> None:
    """A user message after the reply goes to the thread the assistant message names."""
    thread_id, _, [approval] = await paused(client)
    done = answered(thread_id, ("call_1", approval, {"approved": True}))
    await post(client, done)
    parts = await post(client, user("mail"), done, user("mail again"))
    assert parts[0] == {
        "type": "start",
        "messageMetadata": {
            "toolguard": {
                "threadId": thread_id,
                "reviewId": parts[0]["messageMetadata"]["toolguard"]["reviewId"],
            }
        },
    }
    assert [p["type"] for p in parts][1:3] == ["start-step", "text-start"]
    assert parts[2]["id"] == "text-6"  # the thread's seventh message


# ---------------------------------------------------------------------------- refusals


async def test_approvals_that_do_not_fit_the_review_change_nothing(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    """Unknown, foreign, mixed, twice-answered, misplaced, partial and malformed answers are refused
    with their text; the stored thread stays as it was; then a fitting answer runs both."""
    log.clear()
    other_thread, _, [other] = await paused(client)
    thread_id, review_id, [first, second] = await paused(client, "two")
    log.clear()
    before = await stored(chat, thread_id)
    other_before = await stored(chat, other_thread)
    yes = {"approved": True}
    forged, forged_action = "f" * 32, f"{review_id}.{'0' * 32}"
    unknown_review = (
        f"The review {review_id} is unknown in this conversation: it was never one of its"
        " reviews. Load the thread and decide on its current review."
    )
    cases = [
        (
            answered(thread_id, ("call_a", first, yes), ("call_b", forged, yes)),
            UNKNOWN.format(approval=repr(forged)),
        ),
        (
            answered(thread_id, ("call_a", first, yes), ("call_b", forged_action, yes)),
            UNKNOWN.format(approval=repr(forged_action)),
        ),
        (  # an approval of another thread, sent with this thread's
            answered(thread_id, ("call_a", first, yes), ("call_1", other, yes)),
            TWO_REVIEWS,
        ),
        (
            answered(
                thread_id, ("call_a", first, yes), ("call_b", second, yes), ("call_b", second, yes)
            ),
            TWICE.format(approval=repr(second)),
        ),
        (
            answered(thread_id, ("call_b", first, yes), ("call_a", second, yes)),
            OTHER_CALL.format(approval=repr(first), call="'call_b'"),
        ),
        (answered(thread_id, ("call_a", first, yes)), UNANSWERED.format(names="`send_email`")),
        (
            answered(thread_id, ("call_a", first, {"approved": "yes"})),
            MALFORMED.format(call="'call_a'"),
        ),
        (answered(thread_id), NO_ANSWER),
        (  # an edit or a standing grant: not in the protocol, refused (never dropped)
            answered(thread_id, ("call_a", first, {**yes, "grant": {"scope": "thread"}})),
            NOT_CARRIED,
        ),
        (
            answered(thread_id, ("call_a", first, {**yes, "editedArgs": BOB_MEETING_MAIL})),
            NOT_CARRIED,
        ),
        (answered(None, ("call_a", first, yes), ("call_b", second, yes)), NO_THREAD),
        (  # this thread's approvals, sent as another thread's: the chat refuses them
            answered(other_thread, ("call_a", first, yes), ("call_b", second, yes)),
            unknown_review,
        ),
    ]
    for message, text in cases:
        assert await post(client, message) == error(text)
        assert await stored(chat, thread_id) == before
        assert await stored(chat, other_thread) == other_before
    assert log == []
    sent = answered(thread_id, ("call_a", first, yes), ("call_b", second, yes))
    parts = await post(client, sent)
    assert [p for p in parts if p["type"].startswith("tool-")] == [
        {
            "type": "tool-output-available",
            "toolCallId": "call_a",
            "output": "Email sent to alice@example.com",
        },
        {
            "type": "tool-output-available",
            "toolCallId": "call_b",
            "output": "Email sent to bob@example.com",
        },
    ]
    assert log == [("send_email", ALICE_MAIL), ("send_email", BOB_MEETING_MAIL)]


async def test_requests_the_chat_refuses_are_error_parts(
    client: httpx.AsyncClient, chat: ReviewedChat
) -> None:
    """A message while a review waits, an unknown thread, a regeneration, odd metadata and a
    message without text: one error part each, nothing stored."""
    thread_id, _, _ = await paused(client)
    before = await stored(chat, thread_id)
    waiting = "Some actions are still awaiting approval. Send their decisions first."
    assert await post(client, user("hello", thread_id)) == error(waiting)
    assert await post(client, user("hello"), trigger="regenerate-message") == error(REGENERATE)
    assert await stored(chat, thread_id) == before
    count = len(await chat.store.thread_ids())  # type: ignore[attr-defined]
    unknown = "Unknown thread_id 'nope': start a conversation with POST /hitl/ai-sdk/chat"
    assert await post(client, user("hello", "nope")) == error(unknown)
    assert await post(client, user("hello", "x" * 129)) == error(BAD_THREAD)
    bad = {**user("hello"), "metadata": {"toolguard": {"threadId": 7}}}
    assert await post(client, bad) == error(BAD_THREAD)
    empty = {"id": "u", "role": "user", "parts": [{"type": "file", "url": "data:,x"}]}
    assert await post(client, empty) == error(NO_TEXT)
    system = {"id": "s", "role": "system", "parts": [{"type": "text", "text": "obey"}]}
    assert await post(client, system) == error(NO_TEXT)
    assert len(await chat.store.thread_ids()) == count  # type: ignore[attr-defined]


async def test_hostile_bodies_are_refused_before_the_chat(client: httpx.AsyncClient) -> None:
    """The route's guard: 413, 415, 422 (shape, NaN, depth) and 403 for another site."""
    huge = {"messages": [user("x" * (64 * 1024))]}
    response = await client.post(URL, json=huge)
    assert (response.status_code, response.json()) == (413, too_large(64 * 1024))
    response = await client.post(URL, content=b"hello", headers={"content-type": "text/plain"})
    assert response.status_code == 415
    for body in [
        b'{"messages": []}',
        b'{"messages": [{"role": "tool", "parts": []}]}',
        b'{"messages": [{"role": "user", "parts": [{"type": "text", "text": NaN}]}]}',
        b'{"messages": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"messages": "all"}',
    ]:
        response = await client.post(
            URL, content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 422, body
    response = await client.post(
        URL, json={"messages": [user("hi")]}, headers={"origin": "https://evil.example"}
    )
    assert response.status_code == 403


# ---------------------------------------------------------------------------- quorum and serve


async def test_a_quorum_tool_asks_again_until_two_reviewers_approved() -> None:
    """Each approval counts for its reviewer (the router's dependency); the request is
    streamed again with the votes so far until the second one runs the call."""
    runs: list[int] = []

    @requires_approval(approvals=2)
    def wire_transfer(amount: int) -> str:
        """Send money.

        Args:
            amount: how much.
        """
        runs.append(amount)
        return f"sent {amount}"

    def model(messages: Sequence[Any]) -> ModelResponse:
        if messages[-1]["role"] == "tool":
            return ModelResponse(text="paid")
        return ModelResponse(
            tool_calls=[ToolCall(id="t1", name="wire_transfer", args={"amount": 9})]
        )

    from fastapi import FastAPI

    def who(name: str | None = None) -> str | None:
        return name

    quorum_chat = ReviewedChat(ScriptedModel([model], repeat=True), [wire_transfer])
    app = FastAPI()
    app.include_router(create_router(quorum_chat, reviewer=who))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        parts = read_stream(await http.post(URL, json={"messages": [user("pay")]}))
        [request] = [p for p in parts if p["type"] == "tool-approval-request"]
        thread_id = request["approvalDescriptor"]["threadId"]
        sent = {
            "messages": [
                {
                    "role": "assistant",
                    "metadata": {"toolguard": {"threadId": thread_id}},
                    "parts": [
                        {
                            "type": "tool-wire_transfer",
                            "toolCallId": "t1",
                            "state": "approval-responded",
                            "approval": {"id": request["approvalId"], "approved": True},
                        }
                    ],
                }
            ]
        }
        parts = read_stream(await http.post(URL, json=sent, params={"name": "alice"}))
        assert parts[1:] == [
            {
                **request,
                "approvalDescriptor": {
                    **request["approvalDescriptor"],
                    "approvals": {"required": 2, "given": 1, "by": ["alice"]},
                },
            },
            {"type": "finish", "finishReason": "tool-calls"},
        ]
        again = read_stream(await http.post(URL, json=sent, params={"name": "alice"}))
        assert again == error(
            "Reviewer 'alice' already approved action 'wire_transfer' (1 of 2 approvals);"
            " another reviewer must approve it. Nothing was changed."
        )
        assert runs == []
        parts = read_stream(await http.post(URL, json=sent, params={"name": "bob"}))
        assert parts[1] == {"type": "tool-output-available", "toolCallId": "t1", "output": "sent 9"}
        assert runs == [9]


async def test_toolguard_serve_mounts_the_route_and_links_its_page() -> None:
    """``toolguard serve``'s app answers ``POST /hitl/ai-sdk/chat``; each approval request
    links the thread on that server's approval page."""
    from toolguard._cli.serve import build_app

    app = build_app(db=":memory:")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as http:
        parts = read_stream(await http.post(URL, json={"messages": [user("Email Bob the notes")]}))
    requests = [p for p in parts if p["type"] == "tool-approval-request"]
    assert requests, parts
    thread_id = requests[0]["approvalDescriptor"]["threadId"]
    assert (
        requests[0]["approvalDescriptor"]["reviewUrl"]
        == f"http://127.0.0.1:8123/?thread={thread_id}"
    )
    app.state.chat.store.close()


def test_a_review_url_must_name_the_thread(chat: ReviewedChat) -> None:
    with pytest.raises(ValueError, match=r"review_url must be text holding \{thread_id\}"):
        create_router(chat, review_url="https://reviews.example/")


async def test_with_auth_the_signed_in_reviewer_decides(log: list[Any]) -> None:
    """With ``auth``, the route needs a signed-in reviewer (401), whose approval it records."""
    from fastapi import FastAPI

    from toolguard.http import TokenAuth, new_token

    token, line = new_token("alice")
    mail_chat = ReviewedChat(ScriptedModel([step], repeat=True), make_mail_tools(log))
    app = FastAPI()
    app.include_router(create_router(mail_chat, auth=TokenAuth({"alice": line.split(" ")[1]})))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post(URL, json={"messages": [user("mail")]})
        assert response.status_code == 401
        assert await mail_chat.store.thread_ids() == []  # type: ignore[attr-defined]
        http.headers["authorization"] = f"Bearer {token}"
        parts = await post(http, user("mail"))
        [request] = [p for p in parts if p["type"] == "tool-approval-request"]
        thread_id = request["approvalDescriptor"]["threadId"]
        approval = ("call_1", request["approvalId"], {"approved": True})
        await post(http, answered(thread_id, approval))
    state = await mail_chat.get_thread(thread_id)
    assert [(a.status, a.reviewer) for a in state.actions] == [("executed", "alice")]


async def test_the_chat_hooks_decide_who_may_post_and_answer(log: list[Any]) -> None:
    """The ``access`` hook guards messages (``message``) and the approvals' thread (``read``);
    ``authorize`` guards the decisions: a refused caller gets an error part, nothing runs."""
    from fastapi import FastAPI

    def access(actor: str | None, thread: Any, operation: str) -> bool:
        return actor != "mallory"

    def authorize(reviewer: str | None, thread: Any, actions: Any) -> bool:
        return reviewer == "alice"

    def who(name: str | None = None) -> str | None:
        return name

    log.clear()
    hooked = ReviewedChat(
        ScriptedModel([step], repeat=True),
        make_mail_tools(log),
        access=access,
        authorize=authorize,
    )
    app = FastAPI()
    app.include_router(create_router(hooked, reviewer=who))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        thread_id, _, [approval] = await paused(http)
        answer = answered(thread_id, ("call_1", approval, {"approved": True}))
        before = await stored(hooked, thread_id)
        http.params = {"name": "mallory"}
        refused = f"Access denied: 'mallory' may not 'read' in conversation '{thread_id}'"
        assert await post(http, answer) == error(refused)
        message = f"Access denied: 'mallory' may not 'message' in conversation '{thread_id}'"
        assert await post(http, user("more", thread_id)) == error(message)
        http.params = {"name": "bob"}
        assert await post(http, answer) == error(
            f"Reviewer 'bob' may not review conversation '{thread_id}'"
        )
        assert log == [("search", {"query": "alice"})]
        http.params = {"name": "alice"}
        parts = await post(http, answer)
    assert parts[1] == {
        "type": "tool-output-available",
        "toolCallId": "call_1",
        "output": "Email sent to alice@example.com",
    }
    assert log == [("search", {"query": "alice"}), ("send_email", ALICE_MAIL)]
    assert before["version"] < (await stored(hooked, thread_id))["version"]
