"""Malformed bodies get the router's documented 422, wherever it is mounted."""

from __future__ import annotations

import json

import httpx
from fastapi import FastAPI

import toolguard
from toolguard.http import create_router


def app_with_router() -> FastAPI:
    """A user's own FastAPI app with toolguard's router mounted (no toolguard handlers)."""
    chat = toolguard.ReviewedChat(toolguard.ScriptedModel(["Hello!"]), [])
    app = FastAPI()
    app.include_router(create_router(chat))
    return app


async def post(app: FastAPI, path: str, raw: bytes) -> httpx.Response:
    """POST raw bytes as JSON through the ASGI app."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(path, content=raw, headers={"content-type": "application/json"})


async def test_a_body_that_is_not_utf8_is_a_422_with_the_reason() -> None:
    """Bytes that are not UTF-8 answer 422 json_invalid, not FastAPI's generic 400."""
    response = await post(app_with_router(), "/hitl/chat", b'{"message": "\x80"}')
    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "type": "json_invalid",
                "loc": ["body"],
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": "the body is not valid UTF-8"},
            }
        ]
    }


async def test_a_lone_surrogate_echoed_in_a_422_renders_as_an_escape() -> None:
    """A 422 echoing a lone surrogate from the body renders (escaped) instead of failing."""
    response = await post(app_with_router(), "/hitl/chat", b'{"thread_id": "\\ud800"}')
    assert response.status_code == 422
    assert response.content.decode("ascii") == (
        '{"detail":[{"type":"missing","loc":["body","message"],"msg":"Field required",'
        '"input":{"thread_id":"\\ud800"}}]}'
    )


async def test_the_audit_trail_is_served_as_json_lines() -> None:
    """GET /hitl/threads/{id}/audit answers the thread's events as JSON lines; 404 if unknown."""
    send = toolguard.ToolCall(id="c1", name="send_email", args={"to": "a@example.com"})
    model = toolguard.ScriptedModel([toolguard.ModelResponse(tool_calls=[send]), "Sent."])

    def send_email(to: str) -> str:
        return f"sent to {to}"

    chat = toolguard.ReviewedChat(model, [send_email])
    app = FastAPI()
    app.include_router(create_router(chat))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        turn = (await client.post("/hitl/chat", json={"message": "mail a"})).json()
        await client.post(
            "/hitl/review",
            json={
                "thread_id": turn["thread_id"],
                "decisions": [{"type": "approve"}],
                "review_id": turn["review_id"],
            },
        )
        response = await client.get(f"/hitl/threads/{turn['thread_id']}/audit")
        missing = await client.get("/hitl/threads/nope/audit")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.text == await chat.export_audit([turn["thread_id"]])
    events = [json.loads(line) for line in response.text.splitlines()]
    assert [(e["kind"], e["tool"], e["decision"]) for e in events] == [
        ("requested", "send_email", None),
        ("decided", "send_email", "approve"),
        ("executed", "send_email", None),
    ]
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": "Unknown thread_id 'nope': start a conversation with POST /hitl/chat"
    }
