"""POST /hitl/ag-ui: a ReviewedChat as an AG-UI agent.

Every stream is read whole and compared event by event; every event is validated with the
``ag-ui-protocol`` package's own models (``ag_ui.core.Event``, no field left over) and the
run's order (``RUN_STARTED`` first, ``RUN_FINISHED`` or ``RUN_ERROR`` last). Refused runs
answer ``RUN_ERROR`` and leave the stored thread exactly as it was.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import httpx
import pytest
from ag_ui.core import Event
from pydantic import BaseModel, TypeAdapter

from tests.helpers import (
    ALICE_MAIL,
    BOB_MEETING_MAIL,
    make_mail_tools,
    serve_in_thread,
    too_large,
)
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall, requires_approval
from toolguard._http.ag_ui import MISSING, served_ag_ui_routes
from toolguard._http.ag_ui_run import (
    BAD_STATE,
    BAD_THREAD,
    FAILED,
    MALFORMED,
    NO_MESSAGE,
    NO_THREAD,
    NOT_CARRIED,
    TWICE,
    TWO_REVIEWS,
    UNANSWERED,
    UNKNOWN,
    UNKNOWN_THREAD,
)
from toolguard._http.app import protected_app
from toolguard.http import TokenAuth, new_token
from toolguard.integrations.ag_ui import create_app, create_router

URL = "/hitl/ag-ui"
EVENT = TypeAdapter(Event)
WAITING = "Tool `send_email` is awaiting approval"
SENT = "Email sent to alice@example.com"
MAIL_SCHEMA = {
    "additionalProperties": False,
    "properties": {
        "to": {"description": "the recipient's address.", "type": "string"},
        "subject": {"description": "the subject line.", "type": "string"},
        "body": {"description": "the text.", "type": "string"},
    },
    "required": ["to", "subject", "body"],
    "type": "object",
}


# ---------------------------------------------------------------------------- reading streams


def _no_extra(model: BaseModel) -> None:
    """No field the protocol does not name, at any depth."""
    assert not model.model_extra, (type(model).__name__, model.model_extra)
    for value in model.__dict__.values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, BaseModel):
                _no_extra(item)


def read_events(response: httpx.Response) -> list[dict[str, Any]]:
    """The events of an AG-UI stream, each validated with ``ag_ui.core.Event``."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    chunks = response.text.split("\n\n")
    assert chunks[-1] == ""
    events = []
    for chunk in chunks[:-1]:
        assert chunk.startswith("data: ")
        raw = json.loads(chunk.removeprefix("data: "))
        model = EVENT.validate_python(raw)
        _no_extra(model)
        assert model.model_dump(mode="json", by_alias=True) == raw
        events.append(raw)
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    assert all(e["type"] not in ("RUN_STARTED", "RUN_FINISHED") for e in events[1:-1])
    return events


# ---------------------------------------------------------------------------- the chat


def step(messages: Sequence[Any]) -> ModelResponse:
    """``two``: two mails at once; ``wire``: a transfer needing two approvals; any other
    message: a search (runs) and a mail (waits)."""
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
    if last["content"] == "wire":
        return ModelResponse(tool_calls=[ToolCall(id="call_w", name="wire", args={"amount": 5})])
    return ModelResponse(
        text="On it.",
        tool_calls=[
            ToolCall(id="call_s", name="search", args={"query": "alice"}),
            ToolCall(id="call_1", name="send_email", args=ALICE_MAIL),
        ],
    )


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def log() -> list[Any]:
    return []


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def chat(log: list[Any], clock: Clock) -> ReviewedChat:
    @requires_approval(approvals=2)
    def wire(amount: int) -> str:
        """Send money.

        Args:
            amount: how much.
        """
        log.append(("wire", {"amount": amount}))
        return f"sent {amount}"

    tools = [*make_mail_tools(log), wire]
    return ReviewedChat(ScriptedModel([step], repeat=True), tools, review_ttl=600, clock=clock)


def _who(who: str | None = None) -> str | None:
    return who


@pytest.fixture
async def client(chat: ReviewedChat) -> AsyncIterator[httpx.AsyncClient]:
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(create_router(chat, reviewer=_who, max_body_bytes=64 * 1024))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


def run_input(
    text: str | None = "mail",
    *,
    state: Any = None,
    resume: list[dict[str, Any]] | None = None,
    run_id: str = "run-1",
) -> dict[str, Any]:
    """A ``RunAgentInput`` as ``HttpAgent`` sends it (thread ``ag-thread``)."""
    messages = [{"id": "u1", "role": "user", "content": text}] if text is not None else []
    body: dict[str, Any] = {
        "threadId": "ag-thread",
        "runId": run_id,
        "state": state if state is not None else {},
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


async def run(client: httpx.AsyncClient, body: dict[str, Any], **params: str) -> Any:
    return read_events(await client.post(URL, json=body, params=params))


def our_state(thread_id: str) -> dict[str, Any]:
    return {"toolguard": {"threadId": thread_id}}


async def paused(client: httpx.AsyncClient, text: str = "mail") -> tuple[str, list[dict[str, Any]]]:
    """A new thread paused on its calls: its id and the run's interrupts."""
    events = await run(client, run_input(text))
    thread_id = next(e for e in events if e["type"] == "STATE_SNAPSHOT")["snapshot"]["toolguard"]
    interrupts = events[-1]["outcome"]["interrupts"]
    return thread_id["threadId"], interrupts


def resolved(interrupt: dict[str, Any], **payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


async def stored(chat: ReviewedChat, thread_id: str) -> Any:
    state = await chat.store.load(thread_id)
    assert state is not None
    return state.model_dump(mode="json")


def started(run_id: str = "run-1") -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": "ag-thread", "runId": run_id}


def finished(run_id: str = "run-1", **more: Any) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": "ag-thread", "runId": run_id, **more}


def run_error(message: str, code: str = "INVALID_RUN", run_id: str = "run-1") -> list[Any]:
    return [started(run_id), {"type": "RUN_ERROR", "message": message, "code": code}]


def stale(review_id: str) -> str:
    return (
        f"The review {review_id} is no longer current in this conversation. Load the thread"
        " and decide on its current review."
    )


def unknown_review(review_id: str) -> str:
    return (
        f"The review {review_id} is unknown in this conversation: it was never one of its"
        " reviews. Load the thread and decide on its current review."
    )


def text_events(message_id: str, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def call_events(call_id: str, name: str, args: dict[str, Any], parent: str) -> list[Any]:
    return [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": name,
            "parentMessageId": parent,
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": json.dumps(args)},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def result_event(message_id: str, call_id: str, content: str) -> dict[str, Any]:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": call_id,
        "content": content,
        "role": "tool",
    }


def mail_schema() -> dict[str, Any]:
    edited = {
        **MAIL_SCHEMA,
        "description": "All the arguments to run instead (an edit), with approved: true.",
    }
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean", "description": "true runs the call, false rejects it."},
            "editedArgs": edited,
            "reason": {"type": "string", "description": "Why, for the model (a rejection)."},
        },
        "required": ["approved"],
        "additionalProperties": False,
    }


# ---------------------------------------------------------------------------- a run, paused


async def test_a_run_pauses_with_one_interrupt_per_call_awaiting_review(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any], clock: Clock
) -> None:
    log.clear()
    events = await run(client, run_input("mail", state={"page": 3}))
    thread_id = events[-2]["snapshot"]["toolguard"]["threadId"]
    state = await chat.get_thread(thread_id)
    assert state.pending is not None
    [action] = [a for a in state.pending.actions if a.status == "requested"]
    review_id = state.pending.review_id
    message = f"{thread_id}.1"
    deadline = (clock.now + timedelta(seconds=600)).isoformat().replace("+00:00", "Z")
    assert events == [
        started(),
        *text_events(message, "On it."),
        *call_events("call_s", "search", {"query": "alice"}, message),
        *call_events("call_1", "send_email", ALICE_MAIL, message),
        result_event(f"{thread_id}.call_s", "call_s", '["result for alice"]'),
        {"type": "STATE_SNAPSHOT", "snapshot": {"page": 3, "toolguard": {"threadId": thread_id}}},
        finished(
            outcome={
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": f"{review_id}.{action.id}",
                        "reason": "tool_call",
                        "message": WAITING,
                        "toolCallId": "call_1",
                        "responseSchema": mail_schema(),
                        "expiresAt": deadline,
                        "metadata": {
                            "toolguard": {
                                "threadId": thread_id,
                                "reviewId": review_id,
                                "toolName": "send_email",
                                "allowedDecisions": ["approve", "edit", "reject"],
                            }
                        },
                    }
                ],
            }
        ),
    ]
    assert log == [("search", {"query": "alice"})]  # the mail did not run unapproved


# ---------------------------------------------------------------------------- resuming


async def test_approve_runs_the_call_once_and_a_replay_is_refused(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    log.clear()
    thread_id, [interrupt] = await paused(client)
    resume = [resolved(interrupt, approved=True)]
    events = await run(client, run_input(None, state=our_state(thread_id), resume=resume))
    assert events == [
        started(),
        result_event(f"{thread_id}.3", "call_1", SENT),
        *text_events(f"{thread_id}.4", f"Done: {SENT}"),
        finished(),
    ]
    assert log == [("search", {"query": "alice"}), ("send_email", ALICE_MAIL)]

    before = await stored(chat, thread_id)
    review_id = interrupt["metadata"]["toolguard"]["reviewId"]
    again = await run(client, run_input(None, state=our_state(thread_id), resume=resume))
    assert again == run_error(stale(review_id), "StaleReviewError")
    assert await stored(chat, thread_id) == before
    assert log == [("search", {"query": "alice"}), ("send_email", ALICE_MAIL)]  # once


INVALID_EDIT = (
    "Error, not executed: Invalid arguments for tool `send_email`: 'to': Input should be a"
    " valid string; 'subject': Field required; 'body': Field required"
)
RESUMED: dict[str, tuple[Any, str, list[Any], str]] = {
    "edit": (
        {"approved": True, "editedArgs": BOB_MEETING_MAIL},
        "Email sent to bob@example.com",
        [("send_email", BOB_MEETING_MAIL)],
        "executed",
    ),
    "reject": (
        {"approved": False, "reason": "not now"},
        "Rejected by the reviewer, not executed: not now",
        [],
        "rejected",
    ),
    "cancelled": ("cancelled", "User rejected this action. It was not executed.", [], "rejected"),
    "edit-against-the-schema": (
        {"approved": True, "editedArgs": {"to": 7}},
        INVALID_EDIT,
        [],
        "failed",
    ),
}
"""A resume's payload, the result the model reads, the bodies run, the action's status."""


@pytest.mark.parametrize("case", sorted(RESUMED))
async def test_edit_reject_and_cancelled(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any], case: str
) -> None:
    entry, content, ran, status = RESUMED[case]
    log.clear()
    thread_id, [interrupt] = await paused(client)
    if entry == "cancelled":
        resume = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    else:
        resume = [resolved(interrupt, **entry)]
    events = await run(client, run_input(None, state=our_state(thread_id), resume=resume))
    assert events == [
        started(),
        result_event(f"{thread_id}.3", "call_1", content),
        *text_events(f"{thread_id}.4", f"Done: {content}"),
        finished(),
    ]
    assert log == [("search", {"query": "alice"}), *ran]
    [action] = (await chat.get_thread(thread_id)).actions
    assert action.status == status


async def test_a_quorum_keeps_the_interrupt_until_two_people_approved(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    log.clear()
    thread_id, [interrupt] = await paused(client, "wire")
    assert interrupt["metadata"]["toolguard"]["approvals"] == {
        "required": 2,
        "given": 0,
        "by": [],
    }
    resume = [resolved(interrupt, approved=True)]
    body = run_input(None, state=our_state(thread_id), resume=resume)
    first = await run(client, body, who="ann")
    [again] = first[-1]["outcome"]["interrupts"]
    assert again == {
        **interrupt,
        "metadata": {
            "toolguard": {
                **interrupt["metadata"]["toolguard"],
                "approvals": {"required": 2, "given": 1, "by": ["ann"]},
            }
        },
    }
    assert first == [started(), finished(outcome={"type": "interrupt", "interrupts": [again]})]
    assert log == []
    twice = await run(client, body, who="ann")
    assert twice == run_error(
        "Reviewer 'ann' already approved action 'wire' (1 of 2 approvals); another reviewer"
        " must approve it. Nothing was changed.",
        "QuorumReviewerError",
    )
    second = await run(client, body, who="bob")
    assert second[1] == result_event(f"{thread_id}.2", "call_w", "sent 5")
    assert log == [("wire", {"amount": 5})]


async def test_an_expired_review_is_refused(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any], clock: Clock
) -> None:
    log.clear()
    thread_id, [interrupt] = await paused(client)
    clock.now += timedelta(seconds=601)
    resume = [resolved(interrupt, approved=True)]
    events = await run(client, run_input(None, state=our_state(thread_id), resume=resume))
    review_id = interrupt["metadata"]["toolguard"]["reviewId"]
    assert events == run_error(
        f"The review {review_id} expired before a decision arrived. Its actions were not"
        " executed; send a new message to continue.",
        "ReviewExpiredError",
    )
    assert log == [("search", {"query": "alice"})]
    assert [a.status for a in (await chat.get_thread(thread_id)).actions] == ["expired"]


async def test_a_new_message_goes_on_in_the_same_thread(
    client: httpx.AsyncClient, chat: ReviewedChat
) -> None:
    thread_id, [interrupt] = await paused(client)
    state = our_state(thread_id)
    await run(client, run_input(None, state=state, resume=[resolved(interrupt, approved=False)]))
    events = await run(client, run_input("mail", state=state, run_id="run-2"))
    assert [e["type"] for e in events if e["type"] == "STATE_SNAPSHOT"] == []  # already named
    assert events[1] == text_events(f"{thread_id}.6", "On it.")[0]  # after the 5 before
    assert events[-1]["outcome"]["interrupts"][0]["metadata"]["toolguard"]["threadId"] == thread_id


async def test_a_run_with_no_new_message_shows_the_interrupts_still_waiting(
    client: httpx.AsyncClient, chat: ReviewedChat
) -> None:
    events = await run(client, run_input("mail"))
    thread_id = events[-2]["snapshot"]["toolguard"]["threadId"]
    before = await stored(chat, thread_id)
    again = await run(client, run_input(None, state=our_state(thread_id), run_id="run-2"))
    assert again == [started("run-2"), {**events[-1], "runId": "run-2"}]
    assert await stored(chat, thread_id) == before
    [interrupt] = again[-1]["outcome"]["interrupts"]
    resume = [resolved(interrupt, approved=False)]
    await run(client, run_input(None, state=our_state(thread_id), resume=resume))
    assert await run(client, run_input(None, state=our_state(thread_id))) == [
        started(),
        finished(),
    ]


# ---------------------------------------------------------------------------- refused runs


async def test_refused_resumes_change_nothing(
    client: httpx.AsyncClient, chat: ReviewedChat, log: list[Any]
) -> None:
    log.clear()
    thread_id, [one, two] = await paused(client, "two")
    other_id, [foreign] = await paused(client)
    review_id = one["metadata"]["toolguard"]["reviewId"]
    before = await stored(chat, thread_id)
    state = our_state(thread_id)
    fake = f"{review_id}.{'f' * 32}"
    grant = {"approved": True, "grant": {"scope": "thread", "match": "tool"}}
    cases: list[tuple[Any, str, str]] = [
        ([resolved(one, approved=True)], UNANSWERED.format(names="`send_email`"), "INVALID_RUN"),
        (
            [resolved(one, approved=True), {**resolved(two, approved=True), "interruptId": fake}],
            UNKNOWN.format(interrupt=repr(fake)),
            "INVALID_RUN",
        ),
        (
            [resolved(one, approved=True), resolved(one, approved=True)],
            TWICE.format(interrupt=repr(one["id"])),
            "INVALID_RUN",
        ),
        (
            [resolved(one, approved=True), resolved(foreign, approved=True)],
            TWO_REVIEWS,
            "INVALID_RUN",
        ),
        (
            [{"interruptId": "no-dot", "status": "resolved", "payload": {"approved": True}}],
            UNKNOWN.format(interrupt="'no-dot'"),
            "INVALID_RUN",
        ),
        (
            [{"interruptId": "r" * 5000 + ".a", "status": "resolved", "payload": None}],
            UNKNOWN.format(interrupt="'" + "r" * 99 + "\u2026"),
            "INVALID_RUN",
        ),
        (
            [resolved(one, approved="yes"), resolved(two, approved=True)],
            MALFORMED.format(interrupt=repr(one["id"])),
            "INVALID_RUN",
        ),
        (
            [resolved(one, approved=False, editedArgs=ALICE_MAIL), resolved(two, approved=True)],
            MALFORMED.format(interrupt=repr(one["id"])),
            "INVALID_RUN",
        ),
        (
            [{**resolved(one), "payload": [True]}, resolved(two, approved=True)],
            MALFORMED.format(interrupt=repr(one["id"])),
            "INVALID_RUN",
        ),
        (
            [{**resolved(one), "payload": grant}, resolved(two, approved=True)],
            NOT_CARRIED.format(interrupt=repr(one["id"]), fields="'grant'"),
            "INVALID_RUN",
        ),
        (
            [resolved(foreign, approved=True)],
            unknown_review(foreign["id"].split(".")[0]),
            "UnknownReviewError",
        ),
    ]
    for resume, message, code in cases:
        events = await run(client, run_input(None, state=state, resume=resume))
        assert events == run_error(message, code), resume
    # The interrupts of this thread sent with the state of another one (a wrong thread).
    resume = [resolved(one, approved=True), resolved(two, approved=True)]
    events = await run(client, run_input(None, state=our_state(other_id), resume=resume))
    assert events == run_error(unknown_review(review_id), "UnknownReviewError")
    assert await stored(chat, thread_id) == before
    assert log == [("search", {"query": "alice"})]  # the foreign thread's search only


async def test_runs_that_cannot_be_read_are_refused(
    client: httpx.AsyncClient, chat: ReviewedChat
) -> None:
    thread_id, [interrupt] = await paused(client)
    before = await stored(chat, thread_id)
    resume = [resolved(interrupt, approved=True)]
    picture = {"type": "image", "source": {"type": "url", "value": "https://x.example/a.png"}}
    image = {"id": "u", "role": "user", "content": [{"type": "text", "text": "see"}, picture]}
    assistant = {"id": "a1", "role": "assistant", "content": "hi"}
    cases: list[tuple[dict[str, Any], str, str]] = [
        (run_input(None, resume=resume), NO_THREAD, "INVALID_RUN"),
        (run_input("mail", state=[1, 2]), BAD_STATE, "INVALID_RUN"),
        (run_input("mail", state={"toolguard": {"threadId": 7}}), BAD_THREAD, "INVALID_RUN"),
        (
            run_input("mail", state={"toolguard": {"threadId": "x" * 129}}),
            BAD_THREAD,
            "INVALID_RUN",
        ),
        ({**run_input(None), "messages": [assistant]}, NO_MESSAGE, "INVALID_RUN"),
        (
            {**run_input(None), "messages": [image]},
            NO_MESSAGE,
            "INVALID_RUN",
        ),
        (run_input("", state=our_state(thread_id)), NO_MESSAGE, "INVALID_RUN"),
        (
            run_input("mail", state=our_state("nope")),
            UNKNOWN_THREAD.format(thread_id="'nope'"),
            "UnknownThreadError",
        ),
        (
            run_input("more", state=our_state(thread_id)),
            "Some actions are still awaiting approval. Send their decisions first.",
            "ReviewPendingError",
        ),
    ]
    for body, message, code in cases:
        assert await run(client, body) == run_error(message, code), body
    assert await stored(chat, thread_id) == before


def invalid(reason: str) -> dict[str, Any]:
    """The 422 of a body refused before it is parsed."""
    error = {"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error", "input": {}}
    return {"detail": [{**error, "ctx": {"error": reason}}]}


async def test_hostile_bodies_are_refused_before_the_run(client: httpx.AsyncClient) -> None:
    huge = run_input("x" * (64 * 1024))
    response = await client.post(URL, json=huge)
    assert (response.status_code, response.json()) == (413, too_large(64 * 1024))
    deep: Any = {}
    for _ in range(100):
        deep = {"a": deep}
    response = await client.post(URL, json=run_input("mail", state=deep))
    assert (response.status_code, response.json()) == (
        422,
        invalid("the JSON is nested more than 64 levels deep"),
    )
    response = await client.post(
        URL,
        content=b'{"threadId": "t", "threadId": "u"}',
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()) == (
        422,
        invalid("duplicate key 'threadId' in an object"),
    )
    response = await client.post(URL, json={"threadId": "t", "runId": "r"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "messages"]
    response = await client.post(
        URL, json=run_input("mail"), headers={"origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert response.json()["detail"].startswith("Cross-site request refused:")
    response = await client.post(URL, content=b"hello", headers={"content-type": "text/plain"})
    assert (response.status_code, response.json()) == (
        415,
        {"detail": "The request body must be JSON: send Content-Type: application/json (UTF-8)."},
    )


async def test_lone_surrogates_are_mended(client: httpx.AsyncClient) -> None:
    body = json.dumps(run_input("wire", state={"x": "\ud800"}) | {"threadId": "t\ud800"})
    response = await client.post(
        URL, content=body.encode(), headers={"content-type": "application/json"}
    )
    events = read_events(response)
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t\ufffd", "runId": "run-1"}
    assert events[-2]["snapshot"]["x"] == "\ufffd"
    assert events[-1]["threadId"] == "t\ufffd"


async def test_a_failing_turn_is_a_run_error(
    log: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_: Sequence[Any]) -> ModelResponse:
        raise ZeroDivisionError

    chat = ReviewedChat(ScriptedModel([broken]), make_mail_tools(log))
    app = create_app(chat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        events = read_events(await http.post("/", json=run_input("mail")))
    assert events == run_error(FAILED, "INTERNAL_ERROR")
    assert [r.getMessage() for r in caplog.records] == ["toolguard.http: an AG-UI run failed"]


class HeldModel:
    """Proposes a mail once ``release`` is set (from another thread)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    async def complete(self, messages: Sequence[Any], tools: Sequence[Any]) -> ModelResponse:
        self.asked.set()
        await anyio.to_thread.run_sync(self.release.wait, 10)
        return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE_MAIL)])


def test_a_client_that_goes_away_does_not_cut_the_turn_short(log: list[Any]) -> None:
    model = HeldModel()
    chat = ReviewedChat(model, make_mail_tools(log))
    with (
        serve_in_thread(create_app(chat)) as url,
        httpx.stream("POST", f"{url}/", json=run_input("mail"), timeout=10) as response,
    ):
        first = next(response.iter_lines())
        assert json.loads(first.removeprefix("data: "))["type"] == "RUN_STARTED"
        assert model.asked.wait(10)
        response.close()  # the client goes away while the model is asked
        model.release.set()
        deadline = time.monotonic() + 10
        states: list[Any] = []
        while not states and time.monotonic() < deadline:
            states = [s for s in stored_states(chat) if s.status == "awaiting_review"]
            time.sleep(0.02)
    [state] = states
    assert [a.call_id for a in state.actions] == ["c1"]  # the turn was saved, paused


def stored_states(chat: ReviewedChat) -> list[Any]:
    """The chat's stored threads, read from this (synchronous) thread."""
    store = chat.store

    async def read() -> list[Any]:
        ids = await store.thread_ids()  # type: ignore[attr-defined]
        return [await store.load(thread_id) for thread_id in ids]

    return anyio.run(read)


# ---------------------------------------------------------------------------- mounting


async def test_toolguard_serve_answers_ag_ui_runs() -> None:
    from toolguard._cli.serve import build_app

    app = build_app(db=":memory:")  # the demo chat toolguard serve runs without --tools
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            body = run_input("Mail Alice that the meeting moved to 10")
            events = read_events(await http.post(URL, json=body))
            [interrupt] = events[-1]["outcome"]["interrupts"]
            state = events[-2]["snapshot"]
            resume = [resolved(interrupt, approved=True)]
            done = read_events(
                await http.post(URL, json=run_input(None, state=state, resume=resume))
            )
    finally:
        app.state.chat.store.close()
    assert interrupt["metadata"]["toolguard"]["toolName"] == "send_email"
    thread_id = state["toolguard"]["threadId"]
    sent = {"id": "sent-1", "status": "sent", "to": "alice@example.com"}
    assert done == [
        started(),
        result_event(
            f"{thread_id}.3",
            "call_1",
            json.dumps({**sent, "subject": "The meeting moved to 10"}),
        ),
        *text_events(f"{thread_id}.4", 'Sent "The meeting moved to 10" to alice@example.com.'),
        finished(),
    ]


async def test_serves_app_mounts_the_route_behind_its_sign_in(chat: ReviewedChat) -> None:
    token, line = new_token("ann")
    auth = TokenAuth({"ann": line.split(" ")[1]})
    app = protected_app(
        chat, allowed_hosts=None, auth=auth, routers=[served_ag_ui_routes(chat, auth)]
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post(URL, json=run_input("wire"))
        assert response.status_code == 401
        signed = {"authorization": f"Bearer {token}"}
        events = read_events(await http.post(URL, json=run_input("wire"), headers=signed))
        assert events[-1]["outcome"]["type"] == "interrupt"


async def test_without_the_extra_serve_answers_501(
    chat: ReviewedChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ag_ui.core", None)  # as if ag-ui-protocol were missing
    app = protected_app(chat, allowed_hosts=None, routers=[served_ag_ui_routes(chat, None)])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post(URL, json=run_input("mail"))
    assert (response.status_code, response.json()) == (501, {"detail": MISSING})


async def test_the_asgi_app_mounts_into_starlette(chat: ReviewedChat) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = Starlette(routes=[Mount("/agent", app=create_app(chat))])
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        events = read_events(await http.post("/agent/", json=run_input("wire")))
    assert events[-1]["outcome"]["interrupts"][0]["metadata"]["toolguard"]["toolName"] == "wire"
