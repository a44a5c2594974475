"""Malformed bodies get the router's documented 422, wherever it is mounted."""

from __future__ import annotations

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
