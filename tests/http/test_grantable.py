"""Each pending review of ``GET /hitl/reviews`` says which of its actions an approve may grant
for (``grantable``), as the pipeline's own check answers: never on a tool that needs a quorum,
nor on a call an ``ask`` rule covers. The page offers its grant choices only there.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")

from tests.helpers import Log, calls, client_for, make_mail_tools
from toolguard import ReviewedChat, Rules, ScriptedModel, guard, requires_approval
from toolguard.http import create_app

TO_BOB = {"to": "bob@example.com", "subject": "Hi", "body": "Lunch?"}
TO_EVIL = {"to": "x@evil.example", "subject": "Hi", "body": "Data"}
ASK_EVIL = 'send_email(to="*@evil.example")'
GRANT_REFUSED = (
    "No grant for action 'send_email': the rule 'send_email(to=\"*@evil.example\")' asks for a"
    " review of every such call"
)


def three_calls_chat(log: Log) -> ReviewedChat:
    """One turn proposes a mail to Bob, a mail an ask rule covers and a quorum tool's call."""
    send_email, search, delete_file = make_mail_tools(log, with_delete_file=True)
    tools = guard(
        [send_email, search, requires_approval(approvals=2)(delete_file)],
        rules=Rules(ask=[ASK_EVIL]),
    )
    turn = calls(
        ("c1", "send_email", TO_BOB),
        ("c2", "send_email", TO_EVIL),
        ("c3", "delete_file", {"path": "notes.txt"}),
    )
    return ReviewedChat(ScriptedModel([turn]), tools)


async def test_each_review_says_where_an_approve_may_grant() -> None:
    log: Log = []
    async with client_for(create_app(three_calls_chat(log))) as client:
        turn = (await client.post("/hitl/chat", json={"message": "go"})).json()
        listed = (await client.get("/hitl/reviews")).json()["reviews"]
        granting = {"type": "approve", "grant": {"scope": "thread", "match": "tool"}}

        async def decide(decisions: list[dict[str, Any]]) -> Any:
            return await client.post(
                "/hitl/review",
                json={
                    "thread_id": turn["thread_id"],
                    "review_id": turn["review_id"],
                    "decisions": decisions,
                },
            )

        refused = await decide([{"type": "approve"}, granting, {"type": "approve"}])
        state = (await client.get(f"/hitl/threads/{turn['thread_id']}")).json()
    assert [(item["thread_id"], item["grantable"]) for item in listed] == [
        (turn["thread_id"], [True, False, False])
    ]
    names = [request["name"] for request in listed[0]["pending_review"]["action_requests"]]
    assert names == ["send_email", "send_email", "delete_file"]
    # The pipeline refuses that grant itself (400), and nothing changed.
    assert (refused.status_code, refused.json()) == (400, {"detail": GRANT_REFUSED})
    assert (state["status"], state["review_id"], log) == ("awaiting_review", turn["review_id"], [])
