"""A scripted OpenAI-compatible server for tests.

:class:`ScriptedOpenAIServer` listens on ``127.0.0.1`` (a free port) in a
background thread and answers ``POST /v1/chat/completions`` and
``POST /v1/responses`` (the Responses API) with the next reply of its
script, in order (one script for both routes). It records every request body, so a test can
assert exactly which messages and tools the real ``openai`` client sent::

    def test_answer(scripted_openai: ScriptedOpenAIServer) -> None:
        scripted_openai.add(reply_text("Hello"))
        client = scripted_openai.client()  # timeout=2, max_retries=0
        ...
        assert scripted_openai.requests[0]["messages"] == [...]

A reply is a :class:`Reply` (build one with :func:`reply_text`,
:func:`reply_tool_calls`, :func:`reply_error`, :func:`reply_delay` or
:func:`reply_json`; for the Responses API :func:`reply_response_text` and
:func:`reply_function_calls`) or a callable that takes the request body and returns a
:class:`Reply`, to react to what the conversation holds. When the script is
used up the server answers HTTP 500 with an OpenAI-style error saying so.
A delay ends at once when the server stops, so shutdown never waits.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

__all__ = [
    "Reply",
    "ScriptedOpenAIServer",
    "completion",
    "reply_delay",
    "reply_error",
    "reply_function_calls",
    "reply_json",
    "reply_response_text",
    "reply_text",
    "reply_tool_calls",
    "response",
    "scripted_openai",
]

CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
MODEL = "scripted-model"
OUT_OF_SCRIPT = "The scripted server has no reply left in its script"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted HTTP answer.

    Attributes:
        status: the HTTP status code.
        body: JSON data to send, or raw text (sent as is).
        delay: seconds to wait before answering (ends early when the server stops).
    """

    status: int = 200
    body: Any = None
    delay: float = 0.0


ScriptItem = Reply | Callable[[dict[str, Any]], Reply]


def completion(
    message: dict[str, Any],
    *,
    finish_reason: str = "stop",
    model: str = MODEL,
    completion_id: str = "chatcmpl-scripted",
) -> dict[str, Any]:
    """A complete Chat Completions response body with one choice holding ``message``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def reply_text(text: str | None, *, finish_reason: str = "stop") -> Reply:
    """A plain assistant answer (``text`` may be ``None``: no content at all)."""
    return Reply(
        body=completion({"role": "assistant", "content": text}, finish_reason=finish_reason)
    )


def reply_tool_calls(
    calls: Sequence[tuple[str | None, str, dict[str, Any] | str]],
    *,
    text: str | None = None,
    finish_reason: str = "tool_calls",
) -> Reply:
    """An assistant message with one or several (parallel) tool calls, in order.

    Args:
        calls: ``(call_id, tool_name, args)`` triples. ``args`` as a dict is
            sent as JSON text; a string is sent as is (e.g. broken JSON).
            A ``None`` id leaves the ``id`` out, as some local servers do.
        text: the message's ``content`` alongside the calls.
        finish_reason: the choice's finish reason.
    """
    tool_calls = []
    for call_id, name, args in calls:
        arguments = args if isinstance(args, str) else json.dumps(args)
        item: dict[str, Any] = {
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        if call_id is not None:
            item["id"] = call_id
        tool_calls.append(item)
    message = {"role": "assistant", "content": text, "tool_calls": tool_calls}
    return Reply(body=completion(message, finish_reason=finish_reason))


def response(output: list[dict[str, Any]], *, response_id: str = "resp_scripted") -> dict[str, Any]:
    """A complete Responses API response body with these ``output`` items."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "model": MODEL,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
    }


def _output_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_scripted",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reply_response_text(text: str) -> Reply:
    """A Responses API answer with one assistant message holding ``text``."""
    return Reply(body=response([_output_message(text)]))


def reply_function_calls(
    calls: Sequence[tuple[str, str, dict[str, Any] | str]], *, text: str | None = None
) -> Reply:
    """A Responses API answer with ``function_call`` items (parallel calls), in order.

    Args:
        calls: ``(call_id, tool_name, args)`` triples; ``args`` as a dict is
            sent as JSON text, a string as is (e.g. broken JSON).
        text: an assistant message before the calls.
    """
    output = [_output_message(text)] if text is not None else []
    for index, (call_id, name, args) in enumerate(calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{index}",
                "call_id": call_id,
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
                "status": "completed",
            }
        )
    return Reply(body=response(output))


def reply_error(
    status: int, message: str = "The server had an error", *, code: str | None = None
) -> Reply:
    """An HTTP error with an OpenAI-style body: ``{"error": {"message", "type", ...}}``."""
    error_type = _ERROR_TYPES.get(status, "server_error")
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return Reply(status=status, body=body)


def reply_delay(seconds: float, then: Reply | None = None) -> Reply:
    """Wait ``seconds`` before answering with ``then`` (a text answer "too late" by default)."""
    base = then if then is not None else reply_text("too late")
    return Reply(status=base.status, body=base.body, delay=seconds)


def reply_json(body: Any, status: int = 200) -> Reply:
    """Any JSON body (or raw text), e.g. a completion without choices."""
    return Reply(status=status, body=body)


class ScriptedOpenAIServer:
    """An OpenAI-compatible HTTP server that answers from a script.

    Args:
        script: the first replies, in order (more can be added with :meth:`add`).

    Attributes:
        requests: the JSON body of every request received, in order.
        paths: the path of every request received, in order.
    """

    def __init__(self, script: Iterable[ScriptItem] = ()) -> None:
        self._script: deque[ScriptItem] = deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ script

    def add(self, *replies: ScriptItem) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """How many scripted replies are still unused."""
        with self._lock:
            return len(self._script)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            item = self._script.popleft() if self._script else None
        if item is None:
            return reply_error(500, OUT_OF_SCRIPT)
        return item if isinstance(item, Reply) else item(body)

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the ``base_url`` for the client."""
        if self._httpd is None:
            msg = "the server is not running"
            raise RuntimeError(msg)
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def client(self, *, timeout: float = 2.0) -> openai.AsyncOpenAI:
        """A real ``openai.AsyncOpenAI`` client for this server (no retries); close it after use."""
        return openai.AsyncOpenAI(
            api_key="test-key", base_url=self.base_url, timeout=timeout, max_retries=0
        )

    def start(self) -> ScriptedOpenAIServer:
        """Start serving in a background thread."""
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end pending delays and close the socket."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _make_handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

        def _send(self, status: int, body: Any) -> None:
            raw = (body if isinstance(body, str) else json.dumps(body)).encode()
            content_type = "text/plain" if isinstance(body, str) else "application/json"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode()
            if self.path not in (CHAT_PATH, RESPONSES_PATH):
                self._send(
                    404, {"error": {"message": f"No route {self.path}", "type": "not_found"}}
                )
                return
            try:
                body = json.loads(text)
            except ValueError:
                body = {"unparsed_body": text}
            with server._lock:
                server.paths.append(self.path)
            reply = server._next_reply(body)
            if reply.delay and server._stopping.wait(reply.delay):
                self.close_connection = True
                return
            try:
                self._send(reply.status, reply.body)
            except OSError:  # the client gave up (timeout) and closed the connection
                self.close_connection = True

    return Handler


@pytest.fixture
def scripted_openai() -> Iterator[ScriptedOpenAIServer]:
    """A running :class:`ScriptedOpenAIServer` with an empty script, stopped after the test."""
    with ScriptedOpenAIServer() as server:
        yield server
