"""Standing grants over HTTP: a grant on POST /hitl/review, the thread's grants, DELETE a grant."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from tests.helpers import client_for

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
httpx = pytest.importorskip("httpx", reason="httpx is not installed")

from fastapi import Header  # noqa: E402 - after the skips above

from toolguard import (  # noqa: E402
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ThreadState,
    ToolCall,
)
from toolguard.http import create_app  # noqa: E402

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
ALICE = {"to": "alice@example.com", "subject": "Hi", "body": "."}
BOB = {"to": "bob@example.com", "subject": "Hi", "body": "."}


def make_chat(log: list[str], **options: Any) -> ReviewedChat:
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        log.append(to)
        return f"sent to {to}"

    script = [
        ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE)]),
        "Sent.",
        ModelResponse(tool_calls=[ToolCall(id="c2", name="send_email", args=BOB)]),
        "Sent to Bob.",
        ModelResponse(tool_calls=[ToolCall(id="c3", name="send_email", args=BOB)]),
    ]
    return ReviewedChat(
        ScriptedModel(script), [send_email], store=MemoryStore(), clock=lambda: T0, **options
    )


async def reviewer_header(x_reviewer: str | None = Header(default=None)) -> str | None:
    return x_reviewer


GRANT = {"scope": "thread", "match": "tool", "ttl": 3600}


async def granted(client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    first = (await client.post("/hitl/chat", json={"message": "Mail Alice"})).json()
    decided = await client.post(
        "/hitl/review",
        json={
            "thread_id": first["thread_id"],
            "review_id": first["review_id"],
            "decisions": [{"type": "approve", "grant": GRANT}],
        },
        headers={"X-Reviewer": "ana"},
    )
    assert decided.status_code == 200
    assert decided.json()["reply"] == "Sent."
    thread = (await client.get(f"/hitl/threads/{first['thread_id']}")).json()
    return first["thread_id"], thread["grants"][0]


async def test_a_grant_over_http_is_listed_used_and_revoked() -> None:
    log: list[str] = []
    chat = make_chat(log)
    async with client_for(create_app(chat, reviewer=reviewer_header)) as client:
        thread_id, grant = await granted(client)
        assert grant == {
            "id": grant["id"],
            "tool": "send_email",
            "match": "tool",
            "args": None,
            "uses": None,
            "uses_left": None,
            "ttl": 3600.0,
            "granted_by": "ana",
            "granted_at": "2026-12-01T09:00:00Z",
            "expires_at": "2026-12-01T10:00:00Z",
            "review_id": grant["review_id"],
            "action_id": grant["action_id"],
            "ended": None,
            "ended_at": None,
            "ended_by": None,
            "digest": grant["digest"],
            "status": "active",
        }
        second = (
            await client.post("/hitl/chat", json={"message": "Mail Bob", "thread_id": thread_id})
        ).json()
        assert second["reply"] == "Sent to Bob."
        path = f"/hitl/threads/{thread_id}/grants/{grant['id']}"
        revoked = await client.delete(path, headers={"X-Reviewer": "ana"})
        assert revoked.status_code == 200
        assert revoked.json() == {
            **grant,
            "ended": "revoked",
            "ended_at": "2026-12-01T09:00:00Z",
            "ended_by": "ana",
            "status": "revoked",
        }
        third = (
            await client.post("/hitl/chat", json={"message": "Again", "thread_id": thread_id})
        ).json()
        assert third["pending_review"] is not None
        twice = await client.delete(path)
        unknown = await client.delete(f"/hitl/threads/{thread_id}/grants/nope")
        no_thread = await client.delete(f"/hitl/threads/nope/grants/{grant['id']}")
    assert log == ["alice@example.com", "bob@example.com"]
    assert (twice.status_code, twice.json()) == (
        404,
        {
            "detail": f"The grant {grant['id']!r} in conversation {thread_id!r} is no longer"
            " active (revoked)"
        },
    )
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"detail": f"Unknown grant 'nope' in conversation {thread_id!r}"},
    )
    assert (no_thread.status_code, no_thread.json()) == (
        404,
        {"detail": "Unknown thread_id 'nope': start a conversation with POST /hitl/chat"},
    )


async def test_a_malformed_grant_over_http_is_a_400_and_changes_nothing() -> None:
    log: list[str] = []
    chat = make_chat(log)
    async with client_for(create_app(chat)) as client:
        first = (await client.post("/hitl/chat", json={"message": "Mail Alice"})).json()
        before = (await client.get(f"/hitl/threads/{first['thread_id']}")).json()
        bad = await client.post(
            "/hitl/review",
            json={
                "thread_id": first["thread_id"],
                "decisions": [{"type": "approve", "grant": {"scope": "thread", "match": "all"}}],
            },
        )
        on_reject = await client.post(
            "/hitl/review",
            json={
                "thread_id": first["thread_id"],
                "decisions": [{"type": "reject", "grant": GRANT}],
            },
        )
        not_an_object = await client.post(
            "/hitl/review",
            json={"thread_id": first["thread_id"], "decisions": [{"type": "approve", "grant": 1}]},
        )
        after = (await client.get(f"/hitl/threads/{first['thread_id']}")).json()
    assert (bad.status_code, bad.json()) == (
        400,
        {"detail": "The 'match' of a grant must be 'tool' or 'args', got 'all'"},
    )
    assert (on_reject.status_code, on_reject.json()) == (
        400,
        {"detail": "Only an 'approve' decision can carry a 'grant', not 'reject'"},
    )
    assert not_an_object.status_code == 422
    assert after == before
    assert log == []


async def test_revoking_over_http_has_the_checks_of_the_other_writes() -> None:
    log: list[str] = []

    def authorize(reviewer: str | None, thread: ThreadState, actions: list[Any]) -> bool:
        return reviewer == "ana"

    chat = make_chat(log, authorize=authorize)
    app = create_app(chat, reviewer=reviewer_header, allowed_hosts=["toolguard.test"])
    async with client_for(app) as client:
        thread_id, grant = await granted(client)
        path = f"/hitl/threads/{thread_id}/grants/{grant['id']}"
        cross_site = await client.delete(
            path, headers={"Origin": "https://evil.example", "X-Reviewer": "ana"}
        )
        wrong_host = await client.delete(
            path, headers={"Host": "evil.example", "X-Reviewer": "ana"}
        )
        refused = await client.delete(path, headers={"X-Reviewer": "mallory"})
        thread = (await client.get(f"/hitl/threads/{thread_id}")).json()
    assert cross_site.status_code == 403
    assert wrong_host.status_code == 421
    assert (refused.status_code, refused.json()) == (
        403,
        {"detail": f"Reviewer 'mallory' may not review conversation {thread_id!r}"},
    )
    assert thread["grants"] == [grant]
