"""Sign-in options of ``toolguard serve`` and ``toolguard mcp-proxy``, and ``toolguard token``."""

# ruff: noqa: S104 - test addresses and test tokens

from __future__ import annotations

import hashlib
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.helpers import command_env, run_toolguard
from toolguard import ReviewedChat
from toolguard._cli.main import main
from toolguard._cli.serve import ServeError, build_app
from toolguard._gateway.proxy import CallModel
from toolguard._gateway.routes import build_app as gateway_app
from toolguard._http.auth import with_proxy_headers
from toolguard.http import HeaderAuth, TokenAuth, new_token

LOOPBACK_RULE = (
    "error: --host {host} listens beyond this machine, so reviewers must sign in: give"
    " --auth-header NAME (an authenticating proxy) or --tokens FILE (or --no-auth to listen"
    " without sign-in on purpose)\n"
)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_toolguard_token_prints_the_token_and_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["token", "alice"], capsys)
    assert (code, err) == (0, "")
    found = re.fullmatch(
        r"token for alice \(shown only this once; give it to alice\): (\S{43})\n"
        r"line for the --tokens file: alice sha256:([0-9a-f]{64})\n",
        out,
    )
    assert found is not None, out
    assert hashlib.sha256(found.group(1).encode()).hexdigest() == found.group(2)
    code, out, err = run(["token", "al ice"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "error: 'al ice' is not a reviewer name: 1 to 128 characters: letters, digits and"
        " . _ @ + -, starting with a letter or digit\n"
    )


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--host", "0.0.0.0"], LOOPBACK_RULE.format(host="0.0.0.0")),
        (["--host", "192.168.1.5"], LOOPBACK_RULE.format(host="192.168.1.5")),
        (
            ["--auth-header", "X-User", "--tokens", "t"],
            "error: give --auth-header or --tokens, not both\n",
        ),
        (
            ["--no-auth", "--tokens", "t"],
            "error: --no-auth turns sign-in off: give it without --auth-header and --tokens\n",
        ),
        (
            ["--trusted-proxy", "10.0.0.0/8"],
            (
                "error: --trusted-proxy says whose --auth-header to believe: give"
                " --auth-header NAME too\n"
            ),
        ),
        (
            ["--auth-header", "X-User", "--trusted-proxy", "10.0.0.1/8"],
            (
                "error: --trusted-proxy '10.0.0.1/8' is not an IP network; write ADDRESS/BITS with"
                " the host bits zero, e.g. '10.0.0.0/8', '192.168.1.7/32' or '::1/128'\n"
            ),
        ),
        (
            ["--auth-header", "X-User"],
            (
                "error: --auth-header X-User needs --trusted-proxy CIDR, the address of the proxy"
                " that sets the header: every program connecting from a trusted address can name"
                " any reviewer\n"
            ),
        ),
        (
            ["--auth-header", "Cookie", "--trusted-proxy", "127.0.0.1/32"],
            (
                "error: --auth-header 'Cookie' carries secrets, not a name; use the header your"
                " proxy sets to the signed-in user, e.g. 'X-Forwarded-User'\n"
            ),
        ),
        (
            ["--tokens", "/nonexistent/tokens"],
            (
                "error: --tokens /nonexistent/tokens: cannot read the file: No such file or"
                " directory\n"
            ),
        ),
    ],
)
def test_bad_sign_in_options_are_one_line_and_exit_2(  # noqa: PLR0917 - fixtures
    command: str,
    options: list[str],
    error: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # a serve that got this far would create its database here
    tail = ["--", "true"] if command == "mcp-proxy" else ["--db", ":memory:"]
    code, out, err = run([command, *options, *tail], capsys)
    assert (code, out, err) == (2, "", error)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
def test_a_bad_tokens_line_is_named(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "tokens"
    path.write_text("# team\nalice s3cret-token\n", encoding="utf-8")
    tail = ["--", "true"] if command == "mcp-proxy" else ["--db", ":memory:"]
    code, out, err = run([command, "--tokens", str(path), *tail], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"error: --tokens {path}, line 2: the second field must be sha256: and 64 hex digits"
        " (the hash of the token, never the token itself); make a line with toolguard token"
        " NAME\n"
    )
    assert "s3cret" not in err


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
def test_a_reviewers_table_needs_sign_in(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[reviewers]\n"*" = ["admin"]\n', encoding="utf-8")
    tail = ["--", "true"] if command == "mcp-proxy" else ["--db", ":memory:"]
    for sign_in in ([], ["--no-auth"]):  # the sign-in link's reviewer is on no list, nobody is
        code, out, err = run([command, "--rules", str(rules), *sign_in, *tail], capsys)
        assert (code, out) == (2, "")
        assert err == (
            f"error: --rules {rules} has a [reviewers] table, which needs reviewers who sign in"
            " by name: give --auth-header NAME or --tokens FILE\n"
        )


def test_serve_builds_token_sign_in_and_the_reviewers_hook(tmp_path: Path) -> None:
    _token, line = new_token("alice")
    tokens = tmp_path / "tokens"
    tokens.write_text(line + "\n", encoding="utf-8")
    rules = tmp_path / "rules.toml"
    rules.write_text('[reviewers]\n"*" = ["alice"]\n', encoding="utf-8")
    secret = "ab" * 32
    app = build_app(db=":memory:", tokens=str(tokens), rules=str(rules), session_secret=secret)
    other = build_app(db=":memory:", tokens=str(tokens), session_secret=secret)
    assert isinstance(app.state.auth, TokenAuth)
    cookie = app.state.auth.session_cookie("alice")
    # The workers of one serve share the secret: a cookie of one is good in another.
    assert other.state.auth.session_reviewer(cookie) == "alice"
    chat: ReviewedChat = app.state.chat
    assert chat.authorize is not None
    assert chat.authorize.table == {"*": ["alice"]}  # type: ignore[attr-defined]
    with pytest.raises(ServeError) as caught:
        build_app(db=":memory:", auth_header="X-User", trusted_proxies=["nope"])
    assert str(caught.value).startswith("--trusted-proxy 'nope' is not an IP network")
    with pytest.raises(ServeError) as caught:  # no default: every program there could name anyone
        build_app(db=":memory:", auth_header="X-User")
    assert str(caught.value).startswith("--auth-header X-User needs --trusted-proxy CIDR")


async def test_serve_believes_the_header_from_its_proxy_behind_forwarded_headers() -> None:
    """uvicorn's proxy headers rewrite the client address; the peer is still the proxy."""
    app = build_app(db=":memory:", auth_header="X-Forwarded-User", trusted_proxies=["127.0.0.1/32"])
    assert isinstance(app.state.auth, HeaderAuth)
    served: Any = with_proxy_headers(app)
    forwarded = {"X-Forwarded-User": "maria", "X-Forwarded-For": "203.0.113.9"}
    for peer, status in (("127.0.0.1", 200), ("203.0.113.9", 401)):
        transport = httpx.ASGITransport(app=served, client=(peer, 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            answer = await http.get("/hitl/session", headers=forwarded)
        assert answer.status_code == status
    app.state.chat.store.close()


async def test_the_gateway_app_requires_sign_in_for_its_audit_route(tmp_path: Path) -> None:
    token, line = new_token("alice")
    path = tmp_path / "tokens"
    path.write_text(line, encoding="utf-8")
    app = gateway_app(ReviewedChat(CallModel(), []), auth=TokenAuth.from_file(path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        refused = await http.get("/hitl/audit")
        reviews = await http.get("/hitl/reviews")
        allowed = await http.get("/hitl/audit", headers={"Authorization": f"Bearer {token}"})
        page = await http.get("/")
    assert refused.status_code == 401
    assert refused.json() == {
        "detail": "Sign-in required: send Authorization: Bearer TOKEN, or sign in with your"
        " token on the approval page."
    }
    assert refused.headers["www-authenticate"] == 'Bearer realm="toolguard"'
    assert reviews.status_code == 401
    assert (allowed.status_code, allowed.text) == (200, "")
    assert page.status_code == 200


def test_no_auth_prints_a_warning_at_every_start(tmp_path: Path) -> None:
    """The warning comes first on stderr; a port that is taken is refused before it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run_toolguard(
            "serve", "--no-auth", "--port", str(port), "--db", ":memory:", cwd=tmp_path
        )
    assert refused == (
        2,
        "",
        (
            f"error: --port {port}: cannot listen on 127.0.0.1:{port}: the port is in use by"
            " another program; choose another --port\n"
        ),
    )
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--no-auth", "--port", "0"],
            cwd=tmp_path,
            env=command_env(),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        while not out.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        first = out.read_text().splitlines()[0]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
    url = first.split(" | ")[0].removeprefix("toolguard serve: ")
    assert err.read_text().splitlines()[0] == (
        f"warning: --no-auth: nobody signs in; anyone who can reach {url} can approve every"
        " tool call and read every conversation"
    )
    assert url != "http://127.0.0.1:0/"
