"""A Slack Web API of our own on 127.0.0.1, and Slack's signed interactivity requests.

:class:`FakeSlack` answers ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral`` and
``views.open`` (``POST /api/<method>``, JSON bodies, ``Authorization: Bearer``) with the
shapes Slack documents, records every call, and can be taken down (HTTP 503) and back up.
:func:`signed` builds the form body and the headers Slack sends to an interactivity URL.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import pytest

BOT_TOKEN = "xoxb-test-bot-token-123"  # noqa: S105 - a test value
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # noqa: S105 - a test value
CHANNEL = "C0TOOLGUARD"
TEAM = {"id": "T0TEAM", "domain": "example"}


@dataclass
class Call:
    """One Web API call the fake took."""

    method: str
    body: dict[str, Any]
    authorization: str | None


@dataclass
class FakeSlack:
    """The fake's state: its calls, its messages, whether it is down."""

    url: str = ""
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    down: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def of(self, method: str) -> list[dict[str, Any]]:
        """The bodies of the calls of ``method``, in order."""
        with self.lock:
            return [c.body for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The bodies of ``method`` once there are ``count`` of them (polls; fails after
        ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.of(method)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        pytest.fail(f"the fake Slack got {len(self.of(method))} {method}, not {count}")

    def answer(self, method: str, body: dict[str, Any], auth: str | None) -> tuple[int, Any]:
        with self.lock:
            if self.down:
                return 503, {"ok": False, "error": "service_unavailable"}
            self.calls.append(Call(method, body, auth))
            if auth != f"Bearer {BOT_TOKEN}":
                return 200, {"ok": False, "error": "invalid_auth"}
            self.counter += 1
            ts = f"1700000000.{self.counter:06d}"
            if method == "chat.postMessage":
                if body.get("channel") != CHANNEL:
                    return 200, {"ok": False, "error": "channel_not_found"}
                message = {
                    "type": "message",
                    "subtype": "bot_message",
                    "text": body.get("text", ""),
                    "ts": ts,
                    "bot_id": "B0BOT",
                    "blocks": body.get("blocks", []),
                }
                if "thread_ts" in body:
                    message["thread_ts"] = body["thread_ts"]
                self.messages[ts] = message
                return 200, {"ok": True, "channel": CHANNEL, "ts": ts, "message": message}
            if method == "chat.update":
                message = self.messages.get(str(body.get("ts")))
                if message is None:
                    return 200, {"ok": False, "error": "message_not_found"}
                message.update(text=body.get("text", ""), blocks=body.get("blocks", []))
                return 200, {
                    "ok": True,
                    "channel": body["channel"],
                    "ts": body["ts"],
                    "text": body.get("text", ""),
                    "message": message,
                }
            if method == "chat.postEphemeral":
                return 200, {"ok": True, "message_ts": ts}
            if method == "views.open":
                if not body.get("trigger_id"):
                    return 200, {"ok": False, "error": "invalid_trigger_id"}
                view = {"id": "V0VIEW", "team_id": TEAM["id"], **body["view"]}
                return 200, {"ok": True, "view": view}
            return 200, {"ok": False, "error": "unknown_method"}


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    """A fake Slack Web API on a free loopback port (``slack.url`` ends in ``/api/``)."""
    with running_slack() as fake:
        yield fake


@contextlib.contextmanager
def running_slack() -> Iterator[FakeSlack]:
    """A :class:`FakeSlack` on a free loopback port while the block runs."""
    fake = FakeSlack()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size)
            method = self.path.rsplit("/", 1)[-1]
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"raw": raw.decode("utf-8", "replace")}
            status, answer = fake.answer(method, body, self.headers.get("Authorization"))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def signed(
    payload: dict[str, Any], *, secret: str = SIGNING_SECRET, at: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The form body and headers Slack sends for ``payload`` (signed with ``secret``)."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(time.time()) if at is None else at)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    return body, {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


def button(user: str, action_id: str, message: dict[str, Any]) -> dict[str, Any]:
    """The ``block_actions`` payload of a click on ``action_id`` in the posted ``message``."""
    value = next(
        element["value"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
        if element["action_id"] == action_id
    )
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": TEAM["id"]},
        "api_app_id": "A0APP",
        "token": "verification-token-unused",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": CHANNEL,
            "is_ephemeral": False,
        },
        "trigger_id": f"trigger-{user}-{action_id}",
        "team": TEAM,
        "channel": {"id": CHANNEL, "name": "approvals"},
        "message": message,
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "action_id": action_id,
                "block_id": "toolguard_decide",
                "type": "button",
                "value": value,
                "action_ts": "1700000001.000001",
            }
        ],
    }


def submission(user: str, view: dict[str, Any], reason: str) -> dict[str, Any]:
    """The ``view_submission`` payload of the reject modal ``view`` with ``reason``."""
    return {
        "type": "view_submission",
        "team": TEAM,
        "user": {"id": user, "username": user.lower(), "team_id": TEAM["id"]},
        "api_app_id": "A0APP",
        "trigger_id": f"trigger-{user}-submit",
        "view": {
            **view,
            "id": "V0VIEW",
            "state": {
                "values": {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
            },
        },
    }
