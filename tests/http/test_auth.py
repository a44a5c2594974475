"""Sign-in for the HTTP API: HeaderAuth (a trusted proxy names the user) and TokenAuth (bearer
tokens and the page's session cookie), through real HTTP requests (httpx's ASGI transport)."""

# ruff: noqa: S105 - test addresses and test tokens

from __future__ import annotations

import hashlib
import logging
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from toolguard import MemoryStore, ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._http.auth import SESSION_COOKIE, read_tokens
from toolguard.http import HeaderAuth, TokenAuth, create_app, create_router, new_token

MAIL = {"to": "alice@example.com", "body": "Hi"}
SECURITY = {"x-frame-options": "DENY", "cache-control": "no-store"}
TOKEN_401 = (
    "Sign-in required: send Authorization: Bearer TOKEN, or sign in with your token on the"
    " approval page."
)
BAD_BEARER = (
    "Sign-in failed: the bearer token is not valid; send Authorization: Bearer TOKEN with a"
    " reviewer's token."
)
ENDED = (
    "Sign-in required: the session has ended (expired, signed out, or the reviewer's token was"
    " replaced or removed); sign in again."
)
NO_HEADER = (
    "Sign-in required: the request has no X-Forwarded-User header naming the reviewer; sign in"
    " through the proxy."
)
UNTRUSTED = (
    "Sign-in required: the X-Forwarded-User header is believed only from the trusted proxies"
    " (trusted_proxies, or --trusted-proxy of toolguard serve or mcp-proxy); sign in through the"
    " proxy."
)


def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def mail_chat(store: MemoryStore | None = None) -> ReviewedChat:
    """Every message asks to send a mail (a guarded call), then answers 'Done.'."""

    def react(messages: Any) -> ModelResponse:
        if messages[-1]["role"] == "user":
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=MAIL)])
        return ModelResponse(text="Done.")

    return ReviewedChat(ScriptedModel([react], repeat=True), [send_email], store=store)


def client(app: Any, peer: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


def tokens_file(tmp_path: Path, *names: str) -> tuple[Path, dict[str, str]]:
    tokens, lines = {}, ["# reviewers", ""]
    for name in names:
        token, line = new_token(name)
        tokens[name] = token
        lines.append(line)
    path = tmp_path / "tokens"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, tokens


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# ---------------------------------------------------------------- HeaderAuth


async def test_header_auth_from_a_trusted_peer_names_the_reviewer() -> None:
    store = MemoryStore()
    app = create_app(mail_chat(store), auth=HeaderAuth("X-Forwarded-User"))
    async with client(app) as http:
        who = await http.get("/hitl/session", headers={"X-Forwarded-User": "maria"})
        assert (who.status_code, who.json()) == (200, {"reviewer": "maria"})
        paused = (
            await http.post(
                "/hitl/chat", json={"message": "mail"}, headers={"X-Forwarded-User": "maria"}
            )
        ).json()
        decided = await http.post(
            "/hitl/review",
            json={
                "thread_id": paused["thread_id"],
                "review_id": paused["review_id"],
                "decisions": [{"type": "approve"}],
            },
            headers={"X-Forwarded-User": "maria"},
        )
    assert (decided.status_code, decided.json()["reply"]) == (200, "Done.")
    thread = await store.load(paused["thread_id"])
    assert thread is not None
    assert [(e.kind, e.actor) for e in thread.audit] == [
        ("requested", None),
        ("decided", "maria"),
        ("executed", "maria"),
    ]


async def test_header_auth_refuses_a_missing_header_and_an_untrusted_peer() -> None:
    store = MemoryStore()
    app = create_app(mail_chat(store), auth=HeaderAuth("X-Forwarded-User"))
    async with client(app) as local, client(app, peer="10.1.2.3") as remote:
        missing = await local.post("/hitl/chat", json={"message": "mail"})
        spoofed = await remote.post(
            "/hitl/chat", json={"message": "mail"}, headers={"X-Forwarded-User": "admin"}
        )
        twice = await local.get(
            "/hitl/tools", headers=[("X-Forwarded-User", "a"), ("X-Forwarded-User", "b")]
        )
        empty = await local.get("/hitl/tools", headers={"X-Forwarded-User": "  "})
        page = await remote.get("/")
    for answer, detail in ((missing, NO_HEADER), (spoofed, UNTRUSTED), (twice, NO_HEADER)):
        assert answer.status_code == 401
        assert answer.json() == {"detail": detail}
        assert answer.headers["www-authenticate"] == 'X-Forwarded-User realm="toolguard"'
        assert {k: answer.headers[k] for k in SECURITY} == SECURITY
    assert (empty.status_code, empty.json()) == (401, {"detail": NO_HEADER})
    assert page.status_code == 200
    assert await store.thread_ids() == []  # nothing started


async def test_header_auth_trusts_only_the_given_networks() -> None:
    auth = HeaderAuth("X-User", trusted_proxies=["10.0.0.0/8"])
    app = create_app(mail_chat(), auth=auth)
    async with client(app, peer="10.9.8.7") as proxy, client(app) as local:
        ok = await proxy.get("/hitl/session", headers={"X-User": "ana"})
        loopback = await local.get("/hitl/session", headers={"X-User": "ana"})
    assert (ok.status_code, ok.json()) == (200, {"reviewer": "ana"})
    assert loopback.status_code == 401
    assert auth.trusted("::ffff:10.1.1.1")
    assert not auth.trusted("11.0.0.1")
    assert not auth.trusted("not an address")
    assert not auth.trusted(None)


def test_header_auth_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        HeaderAuth("Authorization")
    assert str(caught.value) == (
        "header: 'Authorization' carries secrets, not a name; use the header your proxy sets to"
        " the signed-in user, e.g. 'X-Forwarded-User'"
    )
    with pytest.raises(ValueError, match=r".") as caught:
        HeaderAuth("X User")
    assert str(caught.value) == "header: 'X User' is not a header name, e.g. 'X-Forwarded-User'"
    with pytest.raises(ValueError, match=r".") as caught:
        HeaderAuth("X-User", trusted_proxies=["10.0.0.1/8"])
    assert str(caught.value) == (
        "trusted_proxies: '10.0.0.1/8' is not an IP network; write ADDRESS/BITS with the host"
        " bits zero, e.g. '10.0.0.0/8', '192.168.1.7/32' or '::1/128'"
    )
    with pytest.raises(TypeError, match=r"must"):
        HeaderAuth("X-User", trusted_proxies="10.0.0.0/8")


def test_auth_and_reviewer_together_are_refused() -> None:
    def who() -> str:
        return "x"

    with pytest.raises(ValueError, match=r".") as caught:
        create_app(mail_chat(), auth=HeaderAuth("X-User"), reviewer=who)
    assert str(caught.value) == (
        "give auth= or reviewer=, not both: with auth= the signed-in reviewer is the identity of"
        " every request"
    )
    with pytest.raises(TypeError, match=r"must"):
        create_router(mail_chat(), auth="X-User")  # type: ignore[arg-type]


# ---------------------------------------------------------------- tokens


def test_new_token_and_the_tokens_file() -> None:
    token, line = new_token("alice")
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert line == f"alice sha256:{hashlib.sha256(token.encode()).hexdigest()}"
    assert token not in line
    with pytest.raises(ValueError, match=r".") as caught:
        new_token("al ice")
    assert str(caught.value) == (
        "'al ice' is not a reviewer name: 1 to 128 characters: letters, digits and . _ @ + -,"
        " starting with a letter or digit"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "alice",
            (
                "f, line 1: expected NAME sha256:HEX (two fields), got 1 fields; make a line"
                " with toolguard token NAME"
            ),
        ),
        (
            "# c\nalice MySecretToken",
            (
                "f, line 2: the second field must be sha256: and 64 hex digits (the hash of the"
                " token, never the token itself); make a line with toolguard token NAME"
            ),
        ),
        (f"a sha256:{'0' * 64}\na sha256:{'1' * 64}", "f, line 2: the reviewer 'a' is named twice"),
        (f"a sha256:{'0' * 64}\nb sha256:{'0' * 64}", "f, line 2: 'b' has the same token as 'a'"),
        (
            f"-a sha256:{'0' * 64}",
            (
                "f, line 1: the name is not a reviewer name (1 to 128"
                " characters: letters, digits and . _ @ + -, starting with a letter or digit)"
            ),
        ),
    ],
)
def test_a_bad_tokens_line_is_named_and_never_echoed(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        read_tokens(text, "f")
    assert str(caught.value) == error


async def test_bearer_tokens_right_wrong_and_missing(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice", "bob")
    store = MemoryStore()
    app = create_app(mail_chat(store), auth=TokenAuth.from_file(path))
    async with client(app) as http:
        right = await http.get("/hitl/session", headers=bearer(tokens["bob"]))
        wrong = await http.post(
            "/hitl/chat", json={"message": "mail"}, headers=bearer(tokens["bob"] + "x")
        )
        basic = await http.get("/hitl/tools", headers={"Authorization": "Basic Ym9iOng="})
        missing = await http.get("/hitl/reviews")
    assert (right.status_code, right.json()) == (200, {"reviewer": "bob"})
    for answer in (wrong, basic):
        assert (answer.status_code, answer.json()) == (401, {"detail": BAD_BEARER})
        assert answer.headers["www-authenticate"] == (
            'Bearer realm="toolguard", error="invalid_token"'
        )
    assert (missing.status_code, missing.json()) == (401, {"detail": TOKEN_401})
    assert missing.headers["www-authenticate"] == 'Bearer realm="toolguard"'
    assert await store.thread_ids() == []


async def test_session_sign_in_and_out_with_the_cookie(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    auth = TokenAuth.from_file(path)
    store = MemoryStore()
    app = create_app(mail_chat(store), auth=auth)
    async with client(app) as http:
        wrong = await http.post("/hitl/session", json={"token": "nope"})
        assert (wrong.status_code, wrong.json()) == (
            401,
            {"detail": "Sign-in failed: the token is not a reviewer's token."},
        )
        assert "set-cookie" not in wrong.headers
        before = int(time.time())
        signed = await http.post("/hitl/session", json={"token": tokens["alice"]})
        after = int(time.time())
        assert (signed.status_code, signed.json()) == (200, {"reviewer": "alice"})
        cookie = signed.headers["set-cookie"]
        found = re.fullmatch(
            r"toolguard_session=alice\.(\d+)\.([0-9a-f]{64}); Path=/; Max-Age=43200; HttpOnly;"
            r" SameSite=Strict",
            cookie,
        )
        assert found is not None, cookie
        assert before + 43200 <= int(found.group(1)) <= after + 43200
        assert tokens["alice"] not in cookie
        who = await http.get("/hitl/session")
        assert (who.status_code, who.json()) == (200, {"reviewer": "alice"})
        paused = (await http.post("/hitl/chat", json={"message": "mail"})).json()
        review = {
            "thread_id": paused["thread_id"],
            "review_id": paused["review_id"],
            "decisions": [{"type": "approve"}],
        }
        assert (await http.post("/hitl/review", json=review)).status_code == 200
        out = await http.delete("/hitl/session")
        assert (out.status_code, out.json()) == (200, {"reviewer": None})
        assert out.headers["set-cookie"] == (
            "toolguard_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"
        )
        gone = await http.get("/hitl/session")
        assert (gone.status_code, gone.json()) == (401, {"detail": TOKEN_401})
    thread = await store.load(paused["thread_id"])
    assert thread is not None
    assert [(e.kind, e.actor) for e in thread.audit][1:] == [
        ("decided", "alice"),
        ("executed", "alice"),
    ]


async def test_the_cookie_is_secure_over_https(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    app = create_app(mail_chat(), auth=TokenAuth.from_file(path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://reviews.example") as http:
        signed = await http.post("/hitl/session", json={"token": tokens["alice"]})
    assert signed.headers["set-cookie"].endswith("; HttpOnly; SameSite=Strict; Secure")


async def test_sign_in_is_refused_cross_site_and_not_as_a_form(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    app = create_app(mail_chat(), auth=TokenAuth.from_file(path))
    async with client(app) as http:
        cross = await http.post(
            "/hitl/session",
            json={"token": tokens["alice"]},
            headers={"Origin": "https://evil.example"},
        )
        form = await http.post(
            "/hitl/session",
            content=f"token={tokens['alice']}",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        http.cookies.set(SESSION_COOKIE, TokenAuth.from_file(path).session_cookie("alice"))
        out = await http.delete("/hitl/session", headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    assert "set-cookie" not in cross.headers
    assert form.status_code == 415
    assert "set-cookie" not in form.headers
    assert out.status_code == 403
    assert "set-cookie" not in out.headers


async def test_forged_expired_and_foreign_cookies_are_refused(tmp_path: Path) -> None:
    path, _ = tokens_file(tmp_path, "alice", "bob")
    secret = b"k" * 32
    auth = TokenAuth.from_file(path, secret=secret)
    app = create_app(mail_chat(), auth=auth)
    good = auth.session_cookie("alice")
    _name, expiry, mac = good.rsplit(".", 2)
    forged = [
        f"bob.{expiry}.{mac}",  # another name under alice's MAC
        f"alice.{int(expiry) + 9999}.{mac}",  # a later expiry
        f"alice.{expiry}.{'0' * 64}",
        "alice",
        auth.session_cookie("alice", now=time.time() - 43201),  # expired
        TokenAuth.from_file(path, secret=b"x" * 32).session_cookie("alice"),  # another secret
    ]
    async with client(app) as http:
        for value in forged:
            http.cookies.set(SESSION_COOKIE, value)
            answer = await http.get("/hitl/session")
            assert (answer.status_code, answer.json()) == (401, {"detail": ENDED}), value
        http.cookies.set(SESSION_COOKIE, good)
        assert (await http.get("/hitl/session")).json() == {"reviewer": "alice"}
    # The processes of one server share the secret: another one accepts the cookie.
    assert TokenAuth.from_file(path, secret=secret).session_reviewer(good) == "alice"


async def test_removing_a_tokens_line_ends_the_sessions_and_the_token(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice", "bob")
    app = create_app(mail_chat(), auth=TokenAuth.from_file(path))
    async with client(app) as http:
        await http.post("/hitl/session", json={"token": tokens["alice"]})
        assert (await http.get("/hitl/session")).json() == {"reviewer": "alice"}
        kept = [line for line in path.read_text().splitlines() if not line.startswith("alice")]
        path.write_text("\n".join(kept) + "\n# alice left\n", encoding="utf-8")
        session = await http.get("/hitl/session")
        as_bearer = await http.get("/hitl/session", headers=bearer(tokens["alice"]))
        bob = await http.get("/hitl/session", headers=bearer(tokens["bob"]))
    assert (session.status_code, session.json()) == (401, {"detail": ENDED})
    assert as_bearer.status_code == 401
    assert bob.json() == {"reviewer": "bob"}


async def test_a_broken_tokens_file_signs_everyone_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    app = create_app(mail_chat(), auth=TokenAuth.from_file(path))
    async with client(app) as http:
        path.write_text(f"alice {tokens['alice']}\n", encoding="utf-8")  # the token, not a hash
        with caplog.at_level(logging.ERROR, logger="toolguard.http"):
            answer = await http.get("/hitl/session", headers=bearer(tokens["alice"]))
    assert answer.status_code == 401
    assert [r.getMessage() for r in caplog.records] == [
        (
            "toolguard.http: nobody can sign in until the tokens file is fixed:"
            f" {path}, line 1: the second field must be sha256: and 64 hex digits (the hash of"
            " the token, never the token itself); make a line with toolguard token NAME"
        )
    ]


async def test_tokens_and_cookies_are_never_logged_or_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    store = MemoryStore()
    app = create_app(mail_chat(store), auth=TokenAuth.from_file(path))
    caplog.set_level(logging.DEBUG)
    async with client(app) as http:
        await http.post("/hitl/session", json={"token": tokens["alice"] + "wrong"})
        signed = await http.post("/hitl/session", json={"token": tokens["alice"]})
        cookie = signed.headers["set-cookie"].split(";")[0].partition("=")[2]
        paused = (await http.post("/hitl/chat", json={"message": "mail"})).json()
        await http.post(
            "/hitl/review",
            json={
                "thread_id": paused["thread_id"],
                "review_id": paused["review_id"],
                "decisions": [{"type": "approve"}],
            },
            headers=bearer(tokens["alice"]),
        )
        audit = (await http.get(f"/hitl/threads/{paused['thread_id']}/audit")).text
    thread = await store.load(paused["thread_id"])
    stored = thread.model_dump_json() if thread is not None else ""
    logged = "\n".join(record.getMessage() for record in caplog.records)
    mac = cookie.rsplit(".", 1)[1]
    for text in (stored, logged, audit, repr(TokenAuth.from_file(path))):
        assert tokens["alice"] not in text
        assert mac not in text
    assert '"actor":"alice"' in audit.replace(" ", "")


async def test_every_chat_route_requires_sign_in_but_the_page_does_not(tmp_path: Path) -> None:
    path, _ = tokens_file(tmp_path, "alice")
    app = create_app(mail_chat(), auth=TokenAuth.from_file(path))
    thread = "0" * 32
    async with client(app) as http:
        answers = [
            await http.post("/hitl/chat", json={"message": "hi"}),
            await http.post("/hitl/review", json={"thread_id": thread, "decisions": []}),
            await http.post("/hitl/cancel", json={"thread_id": thread}),
            await http.get(f"/hitl/threads/{thread}"),
            await http.get(f"/hitl/threads/{thread}/audit"),
            await http.delete(f"/hitl/threads/{thread}/grants/{thread}"),
            await http.get("/hitl/tools"),
            await http.get("/hitl/reviews"),
            await http.get("/hitl/events"),
            await http.get("/hitl/session"),
        ]
        page = await http.get("/")
        script = await http.get("/static/app.js")
    assert [a.status_code for a in answers] == [401] * len(answers)
    assert page.status_code == 200
    assert script.status_code == 200


async def test_a_mounted_router_with_tokens(tmp_path: Path) -> None:
    path, tokens = tokens_file(tmp_path, "alice")
    app = FastAPI()
    app.include_router(create_router(mail_chat(), prefix="/agent", auth=TokenAuth.from_file(path)))
    async with client(app) as http:
        refused = await http.get("/agent/tools")
        signed = await http.post("/agent/session", json={"token": tokens["alice"]})
        tools = await http.get("/agent/tools")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="toolguard"'
    assert signed.json() == {"reviewer": "alice"}
    assert [t["name"] for t in tools.json()["tools"]] == ["send_email"]


def test_token_auth_refuses_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        TokenAuth({}, secret=b"short")
    assert str(caught.value) == "secret must be at least 32 bytes, e.g. secrets.token_bytes(32)"
    empty = tmp_path / "empty"
    empty.write_text("# nobody yet\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r".") as caught:
        TokenAuth.from_file(empty)
    assert (
        str(caught.value) == f"{empty} names no reviewer: add a line made by toolguard token NAME"
    )
    with pytest.raises(ValueError, match=r".") as caught:
        TokenAuth({"bob": "sha256:00"})
    assert str(caught.value) == (
        "reviewers, line 1: the second field must be sha256: and 64 hex digits (the hash of the"
        " token, never the token itself); make a line with toolguard token NAME"
    )


def test_tokens_and_session_macs_are_compared_in_constant_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every stored hash is compared with hmac.compare_digest, with no early exit on a match."""
    import hmac as hmac_module

    real = hmac_module.compare_digest
    compared: list[tuple[Any, Any]] = []

    def watched(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    tokens = {name: new_token(name) for name in ("alice", "bob", "carol")}
    auth = TokenAuth({name: line.split(" ", 1)[1] for name, (_, line) in tokens.items()})
    monkeypatch.setattr(hmac_module, "compare_digest", watched)
    assert auth.reviewer_of(tokens["alice"][0]) == "alice"
    assert len(compared) == 3  # alice matched first, bob and carol were compared too
    assert auth.reviewer_of("not a token") is None
    assert len(compared) == 6
    compared.clear()
    cookie = auth.session_cookie("bob")
    assert auth.session_reviewer(cookie) == "bob"
    assert auth.session_reviewer(cookie[:-1] + ("0" if cookie[-1] != "0" else "1")) is None
    assert len(compared) == 2
