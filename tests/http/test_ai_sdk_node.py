"""POST /hitl/ai-sdk/chat driven by the Vercel AI SDK itself (``ai`` 7.0.173 in Node 22).

``tests/js/ai_sdk_chat.mjs`` runs the ``ai`` package's chat client (the ``AbstractChat``
that ``useChat`` wraps) over its ``DefaultChatTransport``, which validates every part with
the package's own schema, against the server of ``toolguard serve``'s app factory on
127.0.0.1: a message, the approval (``addToolApprovalResponse``, sent by
``sendAutomaticallyWhen``), the same approval replayed, a second message and a denial.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from tests.helpers import ALICE_MAIL, make_mail_tools, serve_in_thread
from tests.node import JS, node
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._http.ai_sdk import served_ai_sdk_routes
from toolguard._http.app import protected_app

SCRIPT = JS / "ai_sdk_chat.mjs"


def step(messages: Sequence[Any]) -> ModelResponse:
    """Mails Alice for each user message; answers a tool result with text."""
    last = messages[-1]
    if last["role"] == "tool":
        return ModelResponse(text=f"Done: {last['content']}")
    count = sum(m["role"] == "user" for m in messages)
    return ModelResponse(
        text="On it.", tool_calls=[ToolCall(id=f"call_{count}", name="send_email", args=ALICE_MAIL)]
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, ReviewedChat, list[Any]]]:
    log: list[Any] = []
    chat = ReviewedChat(ScriptedModel([step], repeat=True), make_mail_tools(log))
    app = protected_app(chat, allowed_hosts=None, routers=[served_ai_sdk_routes(chat, None)])
    with serve_in_thread(app) as url:
        yield url, chat, log


def run(url: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    """The script's output for ``plan`` against the server at ``url``."""
    done = subprocess.run(
        [node("ai"), str(SCRIPT), f"{url}/hitl/ai-sdk/chat", json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=JS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def tool_part(call_id: str, state: str, approval: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "tool-send_email",
        "toolCallId": call_id,
        "state": state,
        "input": ALICE_MAIL,
        **more,
        "approval": approval,
    }


def test_use_chat_approves_denies_and_a_replay_is_refused(
    served: tuple[str, ReviewedChat, list[Any]],
) -> None:
    url, _, log = served
    plan: list[dict[str, Any]] = [
        {"send": "Tell Alice"},
        {"answer": {"approved": True}},
        {"replay": True},
        {"send": "Once more"},
        {"answer": {"approved": False, "reason": "not twice"}},
    ]
    out = run(url, plan)
    assert log == [("send_email", ALICE_MAIL)]  # the approved body ran once, the denied never
    [paused, approved, paused_again, denied] = out["steps"]
    assert [(s["status"], s["error"]) for s in out["steps"]] == [("ready", None)] * 4

    first = paused["messages"][1]
    thread_id = first["metadata"]["toolguard"]["threadId"]
    [one, two] = _actions(url, thread_id)
    descriptor = {
        "threadId": thread_id,
        "reviewId": first["metadata"]["toolguard"]["reviewId"],
        "toolName": "send_email",
        "allowedDecisions": ["approve", "edit", "reject"],
        "reviewUrl": f"{url}/?thread={thread_id}",
    }
    asked = {
        "id": f"{descriptor['reviewId']}.{one['id']}",
        "descriptor": descriptor,
        "requestReason": "Tool `send_email` is awaiting approval",
    }
    assert first["role"] == "assistant"
    assert first["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "On it.", "state": "done"},
        tool_part("call_1", "approval-requested", asked),
    ]

    after = approved["messages"][1]
    assert after["id"] == first["id"]  # the same assistant message goes on
    assert after["metadata"] == {"toolguard": {"threadId": thread_id, "reviewId": None}}
    assert after["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "On it.", "state": "done"},
        tool_part(
            "call_1",
            "output-available",
            {**asked, "approved": True},
            output="Email sent to alice@example.com",
        ),
        {"type": "step-start"},
        {"type": "text", "text": "Done: Email sent to alice@example.com", "state": "done"},
    ]

    assert out["replay"] == {
        "error": (
            f"The review {descriptor['reviewId']} is no longer current in this conversation."
            " Load the thread and decide on its current review."
        ),
        "messages": [],
    }

    second = paused_again["messages"][3]
    assert second["metadata"]["toolguard"]["threadId"] == thread_id
    assert second["parts"][2]["state"] == "approval-requested"
    last = denied["messages"][3]
    assert last["parts"][2] == tool_part(
        "call_2",
        "output-denied",
        {
            "id": f"{second['metadata']['toolguard']['reviewId']}.{two['id']}",
            "descriptor": {**descriptor, "reviewId": second["metadata"]["toolguard"]["reviewId"]},
            "requestReason": "Tool `send_email` is awaiting approval",
            "approved": False,
            "reason": "not twice",
        },
    )
    assert last["parts"][3:] == [
        {"type": "step-start"},
        {
            "type": "text",
            "text": "Done: Rejected by the reviewer, not executed: not twice",
            "state": "done",
        },
    ]
    assert [(a["status"], a["call_id"]) for a in _actions(url, thread_id)] == [
        ("executed", "call_1"),
        ("rejected", "call_2"),
    ]


def _actions(url: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's actions, read over the HTTP API of the same server."""
    response = httpx.get(f"{url}/hitl/threads/{thread_id}", timeout=10)
    actions: list[dict[str, Any]] = response.json()["actions"]
    return actions
