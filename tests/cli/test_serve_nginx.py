"""``toolguard serve --auth-header X-Forwarded-User`` behind Debian's nginx with basic auth.

One real ``toolguard serve`` process and one throwaway nginx (its own configuration, pid file,
temporary directories and error log in the module's temporary directory) for the whole module,
both on 127.0.0.1. nginx signs people in from an htpasswd file of salted hashes, sets
``X-Forwarded-User`` to the signed-in user (replacing any the client sent) and connects to
toolguard from 127.0.0.2, the only address ``--trusted-proxy`` names. scripts/test installs
nginx as root on Debian; without it these tests are skipped, and in CI they fail.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("uvicorn")

from tests.helpers import (
    WEBHOOK_SECRET,
    Receiver,
    command_env,
    free_port,
    running_receiver,
    wait_for_page,
)

PASSWORDS = {"alice": "correct horse battery", "bob": "staple-7"}
PROXY_ADDRESS = "127.0.0.2"
"""nginx connects to toolguard from this address (``proxy_bind``); toolguard trusts only it."""
ASK = "email alice that the meeting moved to 11"
ALICE_MAIL = {
    "to": "alice@example.com",
    "subject": "The meeting moved to 11",
    "body": "Hi Alice, the meeting moved to 11.",
}
CHALLENGE = {"www-authenticate": 'X-Forwarded-User realm="toolguard"'}
UNTRUSTED = {
    "detail": (
        "Sign-in required: the X-Forwarded-User header is believed only from the trusted proxies"
        " (trusted_proxies, or --trusted-proxy of toolguard serve or mcp-proxy); sign in through"
        " the proxy."
    )
}
NO_HEADER = {
    "detail": (
        "Sign-in required: the request has no X-Forwarded-User header naming the reviewer; sign"
        " in through the proxy."
    )
}
NO_NGINX = "nginx is not installed (scripts/test installs Debian's nginx when run as root)"
WAIT_SECONDS = 30


def nginx_binary() -> str:
    """The nginx program; skips the test without one, and fails it in CI, which runs them."""
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(path, os.X_OK)), None
    )
    if found is not None:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI runs the tests behind nginx: {NO_NGINX}")
    pytest.skip(NO_NGINX)


def htpasswd_line(user: str, password: str) -> str:
    """``user:{SSHA}...``: a salted SHA-1 that nginx's auth_basic_user_file reads."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()  # noqa: S324 - nginx's {SSHA}
    return f"{user}:{{SSHA}}{base64.b64encode(digest + salt).decode()}"


def nginx_conf(home: Path, port: int, upstream: int) -> str:
    return f"""
master_process off;
pid {home}/nginx.pid;
error_log {home}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {home}/client_body;
    proxy_temp_path {home}/proxy;
    fastcgi_temp_path {home}/fastcgi;
    uwsgi_temp_path {home}/uwsgi;
    scgi_temp_path {home}/scgi;
    server {{
        listen 127.0.0.1:{port};
        auth_basic "toolguard";
        auth_basic_user_file {home}/htpasswd;
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {PROXY_ADDRESS};
            proxy_set_header X-Forwarded-User $remote_user;
            proxy_set_header Authorization "";
        }}
    }}
}}
"""


def stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` (SIGTERM, then SIGKILL after 15 s) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_for_nginx(process: subprocess.Popen[bytes], url: str) -> bool:
    """Whether nginx answers ``url`` before it exits or ``WAIT_SECONDS`` pass."""
    deadline = time.monotonic() + WAIT_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        if _answers(url):
            return True
        time.sleep(0.05)
    return False


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.TransportError:
        return False
    return True


@dataclass
class Proxied:
    """The running pair: nginx's URL, toolguard's own URL, and the webhook receiver."""

    url: str
    direct: str
    receiver: Receiver

    def as_user(self, user: str, **options: Any) -> httpx.Client:
        """A client that signs in to nginx as ``user``."""
        return httpx.Client(base_url=self.url, auth=(user, PASSWORDS[user]), timeout=10, **options)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    """``toolguard serve --auth-header X-Forwarded-User`` behind nginx, both on loopback."""
    nginx = nginx_binary()
    home = tmp_path_factory.mktemp("nginx")
    (home / "htpasswd").write_text(
        "".join(f"{htpasswd_line(user, password)}\n" for user, password in PASSWORDS.items())
    )
    serve_port, nginx_port = free_port(), free_port()
    (home / "nginx.conf").write_text(nginx_conf(home, nginx_port, serve_port))
    with running_receiver() as receiver, (home / "serve.log").open("wb") as serve_log:
        serve = subprocess.Popen(
            [
                *(sys.executable, "-m", "toolguard", "serve", "--port", str(serve_port)),
                *("--db", str(home / "serve.sqlite3")),
                *("--auth-header", "X-Forwarded-User", "--trusted-proxy", f"{PROXY_ADDRESS}/32"),
                *("--notify-url", receiver.url, "--notify-secret", WEBHOOK_SECRET),
            ],
            cwd=home,
            env=command_env(),
            stdout=serve_log,
            stderr=subprocess.STDOUT,
        )
        try:
            proxy = subprocess.Popen(
                [
                    *(nginx, "-p", f"{home}/", "-c", str(home / "nginx.conf")),
                    *("-e", str(home / "error.log"), "-g", "daemon off;"),
                ],
                cwd=home,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                direct = f"http://127.0.0.1:{serve_port}"
                if wait_for_page(serve, f"{direct}/") is None:
                    pytest.fail(
                        f"toolguard serve did not start:\n{(home / 'serve.log').read_text()}"
                    )
                url = f"http://127.0.0.1:{nginx_port}"
                if not wait_for_nginx(proxy, url):
                    log = home / "error.log"
                    text = log.read_text() if log.is_file() else ""
                    pytest.fail(f"nginx did not start (exit {proxy.poll()}):\n{text}")
                yield Proxied(url=url, direct=direct, receiver=receiver)
            finally:
                stop(proxy)
        finally:
            stop(serve)


def test_nginx_asks_for_credentials_before_toolguard_answers(proxied: Proxied) -> None:
    anonymous = httpx.get(f"{proxied.url}/hitl/session", timeout=10)
    wrong = httpx.get(f"{proxied.url}/hitl/session", auth=("alice", "staple-7"), timeout=10)
    stranger = httpx.get(f"{proxied.url}/hitl/session", auth=("mallory", "x"), timeout=10)
    page = httpx.get(f"{proxied.url}/", timeout=10)
    for answer in (anonymous, wrong, stranger, page):
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == 'Basic realm="toolguard"'
        assert answer.headers["server"].startswith("nginx")
        assert "x-frame-options" not in answer.headers  # nginx's answer, not toolguard's


def test_the_user_nginx_signed_in_is_the_reviewer(proxied: Proxied) -> None:
    with proxied.as_user("alice") as alice, proxied.as_user("bob") as bob:
        assert alice.get("/hitl/session").json() == {"reviewer": "alice"}
        assert bob.get("/hitl/session").json() == {"reviewer": "bob"}
        page = alice.get("/")
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"  # toolguard's page through nginx


def test_a_client_cannot_name_itself_through_nginx(proxied: Proxied) -> None:
    forged = [("X-Forwarded-User", "mallory"), ("x-forwarded-user", "admin")]
    with proxied.as_user("alice") as alice:
        who = alice.get("/hitl/session", headers=forged)
    assert (who.status_code, who.json()) == (200, {"reviewer": "alice"})


def test_a_review_decided_through_nginx_is_audited_and_sent_as_alices(proxied: Proxied) -> None:
    with proxied.as_user("bob") as bob, proxied.as_user("alice") as alice:
        paused = bob.post("/hitl/chat", json={"message": ASK}).json()
        thread_id, review_id = paused["thread_id"], paused["review_id"]
        decided = alice.post(
            "/hitl/review",
            json={
                "thread_id": thread_id,
                "review_id": review_id,
                "decisions": [{"type": "approve"}],
            },
            headers={"X-Forwarded-User": "mallory"},
        )
        audit = alice.get(f"/hitl/threads/{thread_id}/audit")
        action_id = alice.get(f"/hitl/threads/{thread_id}").json()["actions"][0]["id"]
    assert decided.status_code == 200
    assert decided.json()["reply"] == 'Sent "The meeting moved to 11" to alice@example.com.'
    events = [json.loads(line) for line in audit.text.splitlines()]
    assert [(event["kind"], event["actor"]) for event in events] == [
        ("requested", None),
        ("decided", "alice"),
        ("executed", "alice"),
    ]
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline and not any(
        body["event"] == "review.decided" and body["thread_id"] == thread_id
        for body in proxied.receiver.accepted
    ):
        proxied.receiver.got.wait(0.1)
        proxied.receiver.got.clear()
    [sent] = [
        body
        for body in proxied.receiver.accepted
        if body["event"] == "review.decided" and body["thread_id"] == thread_id
    ]
    assert all(request["signed"] for request in proxied.receiver.received)
    assert sent == {
        "id": sent["id"],
        "event": "review.decided",
        "created_at": sent["created_at"],
        "thread_id": thread_id,
        "review_id": review_id,
        "reviewer": "alice",
        "decisions": [
            {
                "action_id": action_id,
                "type": "approve",
                "tool": "send_email",
                "args": ALICE_MAIL,
                "message": None,
            }
        ],
        "statuses": {action_id: "approved"},
    }


def test_toolguard_believes_the_header_only_from_nginx_address(proxied: Proxied) -> None:
    """Straight to toolguard's port: from 127.0.0.1 (not nginx's address) a forged header and a
    forwarded address naming nginx are refused; from nginx's address, no header is refused."""
    forged = {"X-Forwarded-User": "mallory", "X-Forwarded-For": PROXY_ADDRESS}
    with proxied.as_user("alice") as alice:
        before = alice.get("/hitl/reviews").json()
    other_peer = httpx.post(
        f"{proxied.direct}/hitl/chat", json={"message": ASK}, headers=forged, timeout=10
    )
    transport = httpx.HTTPTransport(local_address=PROXY_ADDRESS)
    with httpx.Client(base_url=proxied.direct, transport=transport, timeout=10) as as_proxy:
        unnamed = as_proxy.get("/hitl/session")
    assert (other_peer.status_code, other_peer.json()) == (401, UNTRUSTED)
    assert (unnamed.status_code, unnamed.json()) == (401, NO_HEADER)
    for answer in (other_peer, unnamed):
        assert answer.headers["www-authenticate"] == CHALLENGE["www-authenticate"]
    with proxied.as_user("alice") as alice:
        assert alice.get("/hitl/reviews").json() == before  # the refused chat started nothing
