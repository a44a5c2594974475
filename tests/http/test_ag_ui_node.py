"""POST /hitl/ag-ui driven by the official AG-UI client (``@ag-ui/client`` 1.0.0 in Node 22).

``tests/js/ag-ui-run.mjs`` runs the client's ``HttpAgent`` (which checks every event with
the protocol's own schemas and verifies their order) against the server of ``toolguard
serve``'s app factory on 127.0.0.1: a run that pauses, its resume built with the client's
``buildResumeArray`` (approve, edit, reject, cancelled), the same resume replayed, and a
run with two interrupts. Node starts once for the whole conversation; every event it
received is validated again here with ``ag-ui-protocol``'s models.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.helpers import ALICE_MAIL, BOB_MEETING_MAIL, make_mail_tools, serve_in_thread
from tests.node import JS, node
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._http.ag_ui import served_ag_ui_routes
from toolguard._http.app import protected_app

SCRIPT = JS / "ag-ui-run.mjs"
EVENT = TypeAdapter(Event)
SENT = "Email sent to alice@example.com"


def step(messages: Sequence[Any]) -> ModelResponse:
    """``two``: two mails at once; any other message: one mail; a tool result: text."""
    last = messages[-1]
    if last["role"] == "tool":
        return ModelResponse(text=f"Done: {last['content']}")
    count = sum(m["role"] == "user" for m in messages)
    if last["content"] == "two":
        return ModelResponse(
            tool_calls=[
                ToolCall(id="call_a", name="send_email", args=ALICE_MAIL),
                ToolCall(id="call_b", name="send_email", args=BOB_MEETING_MAIL),
            ]
        )
    return ModelResponse(
        text="On it.", tool_calls=[ToolCall(id=f"call_{count}", name="send_email", args=ALICE_MAIL)]
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ReviewedChat, list[Any]]]:
    log: list[Any] = []
    chat = ReviewedChat(ScriptedModel([step], repeat=True), make_mail_tools(log))
    app = protected_app(chat, allowed_hosts=None, routers=[served_ag_ui_routes(chat, None)])
    with serve_in_thread(app) as url:
        yield url, chat, log


def run(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's output for ``plan`` against the server at ``url``; every event it
    received validated with ``ag_ui.core.Event``."""
    done = subprocess.run(
        [node("@ag-ui/client"), str(SCRIPT), f"{url}/hitl/ag-ui", json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=JS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    for ran in result["steps"]:
        for event in ran["events"]:
            assert EVENT.validate_python(event).model_dump(mode="json", by_alias=True) == event
    return result


def kinds(ran: dict[str, Any]) -> list[str]:
    return [event["type"] for event in ran["events"]]


def approve() -> dict[str, Any]:
    return {"status": "resolved", "payload": {"approved": True}}


def test_the_official_client_pauses_resumes_and_a_replay_is_refused(
    served: tuple[str, ReviewedChat, list[Any]],
) -> None:
    url, _, log = served
    plan = [
        {"send": "Tell Alice"},
        {"answer": [approve()]},
        {"replay": 1},
        {"send": "Once more"},
        {
            "answer": [
                {
                    "status": "resolved",
                    "payload": {"approved": True, "editedArgs": BOB_MEETING_MAIL},
                }
            ]
        },
        {"send": "Again"},
        {"answer": [{"status": "resolved", "payload": {"approved": False, "reason": "not now"}}]},
        {"send": "And again"},
        {"answer": [{"status": "cancelled"}]},
    ]
    out = run(url, plan)
    assert log == [("send_email", ALICE_MAIL), ("send_email", BOB_MEETING_MAIL)]  # once each
    steps = out["steps"]
    assert [s["error"] for s in steps] == [None] * len(plan)

    paused = steps[0]
    thread_id = paused["state"]["toolguard"]["threadId"]
    assert paused["state"] == {"toolguard": {"threadId": thread_id}}
    assert kinds(paused) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    [interrupt] = paused["pendingInterrupts"]
    assert paused["events"][-1]["outcome"] == {"type": "interrupt", "interrupts": [interrupt]}
    review_id = interrupt["metadata"]["toolguard"]["reviewId"]
    assert interrupt["toolCallId"] == "call_1"
    assert interrupt["message"] == "Tool `send_email` is awaiting approval"
    assert interrupt["id"].startswith(f"{review_id}.")
    assert paused["newMessages"] == [
        {
            "id": f"{thread_id}.1",
            "role": "assistant",
            "content": "On it.",
            "toolCalls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_email", "arguments": json.dumps(ALICE_MAIL)},
                }
            ],
        }
    ]

    approved = steps[1]
    assert approved["pendingInterrupts"] == []
    assert approved["newMessages"] == [
        {"id": f"{thread_id}.2", "toolCallId": "call_1", "role": "tool", "content": SENT},
        {"id": f"{thread_id}.3", "role": "assistant", "content": f"Done: {SENT}"},
    ]
    assert approved["events"][-1] == {
        "type": "RUN_FINISHED",
        "threadId": approved["events"][0]["threadId"],
        "runId": approved["events"][0]["runId"],
    }

    replayed = steps[2]
    assert replayed["events"][1:] == [
        {
            "type": "RUN_ERROR",
            "message": (
                f"The review {review_id} is no longer current in this conversation. Load the"
                " thread and decide on its current review."
            ),
            "code": "StaleReviewError",
        }
    ]
    assert replayed["newMessages"] == []

    results = [s["newMessages"][0]["content"] for s in steps[4::2]]
    assert results == [
        "Email sent to bob@example.com",
        "Rejected by the reviewer, not executed: not now",
        "User rejected this action. It was not executed.",
    ]
    assert [s["state"] for s in steps] == [{"toolguard": {"threadId": thread_id}}] * len(plan)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "assistant"] * 4


def test_the_official_client_answers_two_interrupts_at_once_after_a_refusal(
    served: tuple[str, ReviewedChat, list[Any]],
) -> None:
    url, _, log = served
    log.clear()
    plan = [
        {"send": "two"},
        {"answer": [approve(), {"status": "resolved", "payload": {"approved": "yes"}}]},
        {"look": True},
        {"answer": [approve(), {"status": "resolved", "payload": {"approved": False}}]},
    ]
    out = run(url, plan)
    paused, refused, looked, answered = out["steps"]
    assert [i["toolCallId"] for i in paused["pendingInterrupts"]] == ["call_a", "call_b"]
    # A refused resume leaves the client holding the interrupts; a run with nothing new
    # (after dropping them) shows them again, unchanged.
    assert kinds(refused) == ["RUN_STARTED", "RUN_ERROR"]
    assert refused["pendingInterrupts"] == paused["pendingInterrupts"]
    assert kinds(looked) == ["RUN_STARTED", "RUN_FINISHED"]
    assert looked["pendingInterrupts"] == paused["pendingInterrupts"]
    assert [m.get("content") for m in answered["newMessages"][:2]] == [
        SENT,
        "User rejected this action. It was not executed.",
    ]
    assert log == [("send_email", ALICE_MAIL)]
