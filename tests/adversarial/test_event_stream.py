"""Event-stream injection: text a hostile model controls (tool arguments, line breaks, ``event:``
and ``data:`` lines, lone surrogates, bidi and zero-width characters) reaches ``GET /hitl/events``
inside a pending review; it must never split, end or forge a server-sent event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")

import httpx

from tests.helpers import Outbox, make_page_tools, serve_in_thread
from toolguard import Message, ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._http.live import sse
from toolguard.http import create_app

from .strategies import deceptive_text, plain_json, surrogate_text

FORGERY = 'x\n\nevent: reviews\ndata: {"reviews": []}\r\n\r\nid: 9\n:\u2028\u0085'
"""Line breaks of every kind SSE knows, then a whole forged event."""

framing_text = st.one_of(
    st.just(FORGERY),
    surrogate_text,
    deceptive_text,
    st.text(alphabet=st.sampled_from("\n\r:ae dtv\u2028\u0085"), max_size=30),
)


def frames(raw: bytes) -> list[bytes]:
    """The events of a stream (split at blank lines), the last partial one dropped."""
    return raw.split(b"\n\n")[:-1]


@settings(max_examples=200, deadline=None)
@given(st.one_of(plain_json, st.dictionaries(framing_text, framing_text, max_size=4)))
def test_one_event_whatever_the_data(value: Any) -> None:
    """Any JSON data is one event of exactly two ASCII lines whose data parses back."""
    frame = sse("reviews", value)
    assert frame.isascii()
    assert frame.endswith(b"\n\n")
    lines = frame[:-2].split(b"\n")
    assert len(lines) == 2
    assert b"\r" not in frame
    assert lines[0] == b"event: reviews"
    assert lines[1].startswith(b"data: ")
    assert json.loads(lines[1].removeprefix(b"data: ")) == value


def test_a_forged_event_in_tool_arguments_stays_inside_the_data() -> None:
    """A model that writes a whole event into an argument: the stream still carries one
    ``reviews`` event whose data holds the text unchanged."""

    def hostile(messages: Sequence[Message]) -> ModelResponse:
        if messages[-1]["role"] == "user":
            args = {"to": "bob@example.com", "subject": FORGERY, "body": "hi"}
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=args)])
        return ModelResponse(text="Done.")

    chat = ReviewedChat(ScriptedModel([hostile], repeat=True), make_page_tools(Outbox()))
    with (
        serve_in_thread(create_app(chat)) as url,
        httpx.Client(base_url=url, timeout=10.0) as client,
    ):
        client.post("/hitl/chat", json={"message": "mail"})
        with client.stream("GET", "/hitl/events") as stream:
            raw = b""
            for chunk in stream.iter_raw():
                raw += chunk
                if len(frames(raw)) >= 2:  # retry, then the list
                    break
    retry, listed = frames(raw)[:2]
    assert retry == b"retry: 1000"
    assert raw.isascii()
    name, data = listed.split(b"\n")
    assert name == b"event: reviews"
    reviews = json.loads(data.removeprefix(b"data: "))["reviews"]
    assert [r["pending_review"]["action_requests"][0]["args"]["subject"] for r in reviews] == [
        FORGERY
    ]
