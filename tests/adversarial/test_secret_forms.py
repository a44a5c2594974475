"""No text toolguard writes quotes a secret, in any encoding.

Attack class: a redacted argument (``redact=[...]``) holds characters that
change its spelling once quoted: a quote or a backslash (escaped by JSON and
by ``repr``), a control character such as DEL (``\\x7f`` in ``repr``,
``\\u007f`` nowhere, raw in JSON), U+2028 (raw in JSON text written with
``ensure_ascii=False``, ``\\u2028`` otherwise and in ``repr``), a character
beyond the BMP (raw, ``\\ud83d\\udd11`` in ASCII JSON, ``\\U0001f511`` in
``ascii()``). A validator (pydantic, jsonschema), the tool's own exception or
a reviewer's note that quotes the value in one of those spellings must not
carry it to the model's tool message, the audit trail, the webhook bodies or
the thread over HTTP.
"""

# ruff: noqa: S106 - the secrets here are test values

from __future__ import annotations

import json
from typing import Annotated, Any

import httpx
import pytest
from pydantic import AfterValidator

import toolguard
from toolguard import (
    REDACTED,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    Webhook,
    requires_approval,
)
from toolguard._policy.redact import secret_texts
from toolguard.http import create_app

SECRETS = [
    "pa\"ss'word-1",
    "back\\slash\\path-2",
    "ctl\x7f\x01\x1b[31m-3",
    "line\u2028para\u2029-4",
    "key\U0001f511emoji-5",
    "all\"'\\\x7f\u2028\U0001f600-6",
    "ctl" + "".join(map(chr, range(32))) + "\x7f-7",  # NUL and every other C0 control
    'long"' + "\\".join(["abcdefgh"] * 600) + "\u2028-8",  # 5407 characters
]
SECRET_IDS = [
    "quotes",
    "backslashes",
    "controls",
    "separators",
    "beyond-bmp",
    "all",
    "c0-controls",
    "long",
]


def forms(secret: str) -> list[str]:
    """The spellings of ``secret`` a text may quote it in."""
    return [
        secret,
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1],
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
    ]


def quoted(text: str, secret: str) -> list[str]:
    """The spellings of ``secret`` found in ``text``."""
    return [form for form in forms(secret) if form in text]


def everywhere(secret: str) -> str:
    """A message quoting ``secret`` in every spelling."""
    return (
        f"raw {secret} / json {json.dumps(secret)} / json-utf8"
        f" {json.dumps(secret, ensure_ascii=False)} / repr {secret!r} / ascii {secret!a}"
    )


def test_the_forms_are_different_spellings() -> None:
    """Each test secret has at least two distinct spellings (the attack needs them)."""
    assert [len(set(forms(s))) for s in SECRETS] == [3, 2, 4, 2, 3, 5, 4, 4]


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
def test_secret_texts_lists_every_spelling(secret: str) -> None:
    """The texts scrubbed for a secret argument are all its spellings, and only those."""
    texts = secret_texts({"password": secret}, frozenset({"password"}))
    assert sorted(texts) == sorted(set(forms(secret)))
    nested = secret_texts({"auth": {"token": secret, "n": 12345}}, frozenset({"auth"}))
    assert set(forms(secret)) | {"12345"} <= set(nested)


def test_scrub_replaces_every_spelling() -> None:
    """``scrub`` with a secret's texts leaves none of its spellings in a message."""
    from toolguard._policy.redact import scrub

    for secret in SECRETS:
        text = scrub(everywhere(secret), secret_texts({"p": secret}, frozenset({"p"})))
        assert quoted(text, secret) == []
        assert text.count(REDACTED) == 5


# --- the tools ------------------------------------------------------------------------------------


def _strong(value: str) -> str:
    if "weak" in value:
        msg = f"too weak: {everywhere(value)}"
        raise ValueError(msg)
    return value


def make_tools(log: list[Any]) -> list[Any]:
    """A function tool and a JSON Schema tool, both with a redacted ``password``."""

    @requires_approval(redact=["password"])
    def login(user: str, password: Annotated[str, AfterValidator(_strong)]) -> str:
        """Log in."""
        log.append(("login", user, password))
        if user == "boom":
            raise RuntimeError(everywhere(password))
        return f"logged in as {user}; echo {everywhere(password)}"

    schema = {
        "type": "object",
        "properties": {
            "user": {"type": "string"},
            "password": {"type": "string", "minLength": 8},
            "note": {"type": "string"},
        },
        "required": ["user", "password"],
        "maxProperties": 2,
        "not": {"properties": {"user": {"const": "root"}}, "required": ["user"]},
    }
    vault = requires_approval(redact=["password"])(
        toolguard.Tool.from_schema(
            "vault_login",
            "Log in to the vault.",
            schema,
            lambda **args: log.append(("vault_login", args)) or "ok",
        )
    )
    return [login, vault]


# --- the runner -----------------------------------------------------------------------------------


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
def test_a_schema_error_about_the_whole_object_never_quotes_the_secret(secret: str) -> None:
    """``maxProperties`` and ``not`` quote the whole argument object: shown with [redacted]."""
    pytest.importorskip("jsonschema")
    log: list[Any] = []
    runner = Runner(make_tools(log))
    step = runner.run_sync(
        [
            {
                "id": "c1",
                "name": "vault_login",
                "args": {"user": "ann", "password": secret, "note": "x"},
            },
            {"id": "c2", "name": "vault_login", "args": {"user": "root", "password": secret}},
        ]
    )
    assert [(r.outcome, r.content) for r in step.results] == [
        (
            "invalid_arguments",
            (
                "Invalid arguments for tool `vault_login`: '(arguments)':"
                " {'user': 'ann', 'password': '[redacted]', 'note': 'x'} has too many properties"
            ),
        ),
        (
            "invalid_arguments",
            (
                "Invalid arguments for tool `vault_login`: '(arguments)':"
                " {'user': 'root', 'password': '[redacted]'} should not be valid under"
                " {'properties': {'user': {'const': 'root'}}, 'required': ['user']}"
            ),
        ),
    ]
    assert log == []


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
def test_a_tool_or_validator_quoting_the_secret_is_scrubbed(secret: str) -> None:
    """The tool's exception, its result and a validator's message hide every spelling."""
    log: list[Any] = []
    runner = Runner(make_tools(log))
    step = runner.run_sync(
        [
            {"id": "c1", "name": "login", "args": {"user": "boom", "password": secret}},
            {"id": "c2", "name": "login", "args": {"user": "ann", "password": secret}},
            {"id": "c3", "name": "login", "args": {"user": "ann", "password": "weak-" + secret}},
        ]
    )
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [{"type": "approve"}, {"type": "approve"}])
    texts = [r.content for r in done.results] + [json.dumps(r.value) for r in done.results]
    assert [quoted(t, secret) for t in texts] == [[]] * len(texts)
    quoting = (
        'raw [redacted] / json "[redacted]" / json-utf8 "[redacted]"'
        " / repr '[redacted]' / ascii '[redacted]'"
    )
    assert [r.content for r in done.results] == [
        f"Tool `login` failed: RuntimeError: {quoting}",
        f"logged in as ann; echo {quoting}",
        (
            "Invalid arguments for tool `login`: 'password': invalid value"
            " (value_error; the message is hidden: the value is secret)"
        ),
    ]
    assert len(log) == 2


# --- the chat: tool messages, audit trail, webhook bodies, the thread over HTTP -------------------


async def chat_views(chat: ReviewedChat, store: MemoryStore, thread_id: str) -> dict[str, str]:
    """Every text a person, a log or a receiver gets about the thread."""
    state = await store.load(thread_id)
    assert state is not None
    app = create_app(chat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as http:
        thread = (await http.get(f"/hitl/threads/{thread_id}")).text
        audit = (await http.get(f"/hitl/threads/{thread_id}/audit")).text
    bodies = [item.body for item in state.outbox]
    return {
        "tool messages": "\n".join(
            str(m["content"]) for m in state.messages if m.get("role") == "tool"
        ),
        "audit": await chat.export_audit([thread_id]),
        "webhooks": json.dumps(bodies, ensure_ascii=False) + json.dumps(bodies),
        "http thread": thread,
        "http audit": audit,
        "actions": json.dumps([a.model_dump(mode="json") for a in state.actions]),
    }


def make_chat(store: MemoryStore, log: list[Any], *calls: ToolCall) -> ReviewedChat:
    """A chat proposing ``calls`` once, then answering "done"; webhooks queued in the outbox."""
    model = ScriptedModel([ModelResponse(tool_calls=list(calls)), "done"])
    hook = Webhook("https://example.com/hook", secret="s")
    return ReviewedChat(model, make_tools(log), store=store, notify=hook)


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
async def test_the_chat_never_writes_a_secret_in_any_spelling(secret: str) -> None:
    """An edit keeping the secret breaks the schema; a tool raises; a note quotes it: all hidden."""
    pytest.importorskip("jsonschema")
    log: list[Any] = []
    store = MemoryStore()
    chat = make_chat(
        store,
        log,
        ToolCall(id="c1", name="vault_login", args={"user": "ann", "password": secret}),
        ToolCall(id="c2", name="login", args={"user": "boom", "password": secret}),
        ToolCall(id="c3", name="login", args={"user": "ann", "password": secret}),
        ToolCall(id="c4", name="vault_login", args={"user": "ann", "password": secret, "n": "1"}),
    )
    turn = await chat.send_message("Log in everywhere")
    assert turn.pending_review is not None
    decisions = [
        {
            "type": "edit",
            "edited_action": {
                "name": "vault_login",
                "args": {"user": "bob", "password": REDACTED, "note": "x"},
            },
        },
        {"type": "approve"},
        {"type": "reject", "message": f"Not with {everywhere(secret)}"},
    ]
    done = await chat.submit_review(
        decisions, turn.thread_id, review_id=turn.review_id, reviewer="rita"
    )

    assert done.reply == "done"
    assert [entry[1] for entry in log] == ["boom"]
    seen = await chat_views(chat, store, turn.thread_id)
    assert {name: quoted(text, secret) for name, text in seen.items()} == {n: [] for n in seen}
    state = await store.load(turn.thread_id)
    assert state is not None
    quoting = (
        'raw [redacted] / json "[redacted]" / json-utf8 "[redacted]"'
        " / repr '[redacted]' / ascii '[redacted]'"
    )
    assert [m["content"] for m in state.messages if m.get("role") == "tool"] == [
        (
            "Error, not executed: Invalid arguments for tool `vault_login`: '(arguments)':"
            " {'user': 'bob', 'password': '[redacted]', 'note': 'x'} has too many properties"
        ),
        f"Error, the tool failed: Tool `login` failed: RuntimeError: {quoting}",
        f"Rejected by the reviewer, not executed: Not with {quoting}",
        (
            "Error, not executed: Invalid arguments for tool `vault_login`: '(arguments)':"
            " {'user': 'ann', 'password': '[redacted]', 'n': '1'} has too many properties"
        ),
    ]


# --- a result cut to size, the keys of a secret object, a lone surrogate ------------------------


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
def test_a_result_cut_to_size_keeps_no_piece_of_the_secret(secret: str) -> None:
    """The cut at ``Limits.max_result_bytes`` falls inside the echoed secret: it is gone first."""

    @requires_approval(redact=["password"])
    def echo(password: str) -> Any:
        """Echo the password."""
        return "x" * 90 + password + "y" * 200

    @requires_approval(redact=["password"])
    def echo_json(password: str) -> Any:
        """Echo the password in an object."""
        return {"pad": "x" * 90, "echo": password, "more": "y" * 200}

    runner = Runner([echo, echo_json], limits=toolguard.Limits(max_result_bytes=120))
    step = runner.run_sync(
        [
            {"id": "c1", "name": "echo", "args": {"password": secret}},
            {"id": "c2", "name": "echo_json", "args": {"password": secret}},
        ]
    )
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [{"type": "approve"}, {"type": "approve"}])

    def cut(kept: str, size: int) -> str:
        return (
            f"{kept}\n[toolguard: the result is {size} bytes of text, more than 120"
            " (Limits.max_result_bytes); only the first 120 bytes are kept.]"
        )

    as_json = json.dumps({"pad": "x" * 90, "echo": REDACTED, "more": "y" * 200})
    assert [(r.status, r.content, r.value) for r in done.results] == [
        ("success", cut("x" * 90 + REDACTED + "y" * 20, 300), None),
        ("success", cut(as_json[:120], len(as_json)), None),
    ]
    pieces = {secret[:5], secret[-5:]} - {""}
    assert [p for r in done.results for p in pieces if p in r.content] == []


def test_the_keys_inside_a_secret_object_are_not_quoted() -> None:
    """A validation problem inside a redacted object names only the parameter, never a key."""
    pytest.importorskip("jsonschema")
    key = "sk-live-0123456789"

    @requires_approval(redact=["tokens"])
    def use(tokens: dict[str, int], user: str) -> str:
        """Use the tokens."""
        return "used"

    schema = {
        "type": "object",
        "properties": {
            "tokens": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "required": ["scope"],
            },
            "user": {"type": "string"},
        },
    }
    vault = requires_approval(redact=["tokens"])(
        toolguard.Tool.from_schema("vault", "Use the vault.", schema, lambda **_: "used")
    )
    runner = Runner([use, vault])
    bad = {"tokens": {key: "x", f"{key}-2": "y"}, "user": 7}
    step = runner.run_sync(
        [
            {"id": "c1", "name": "use", "args": bad},
            {"id": "c2", "name": "vault", "args": bad},
        ]
    )
    assert [r.content for r in step.results] == [
        (
            "Invalid arguments for tool `use`: 'tokens': invalid value (int_parsing; the message"
            " is hidden: the value is secret); 'user': Input should be a valid string"
        ),
        (
            "Invalid arguments for tool `vault`: 'tokens': invalid value (the message is"
            " hidden: the value is secret); 'user': 7 is not of type 'string'"
        ),
    ]


def test_a_lone_surrogate_in_a_secret_is_mended_and_never_quoted() -> None:
    """JSON lets a model send a lone surrogate: the tool gets U+FFFD, no text quotes either."""
    sent = "lone\ud800pass\udfff-9"
    mended = "lone\ufffdpass\ufffd-9"
    log: list[Any] = []
    runner = Runner(make_tools(log))
    step = runner.run_sync(
        [
            {"id": "c1", "name": "login", "args": {"user": "boom", "password": sent}},
            {"id": "c2", "name": "login", "args": {"user": "ann", "password": sent}},
        ]
    )
    assert step.pending is not None
    assert step.pending.calls[0].args == {"user": "boom", "password": mended}
    done = runner.resume_sync(step.pending, [{"type": "approve"}, {"type": "approve"}])
    assert sorted(log) == [("login", "ann", mended), ("login", "boom", mended)]  # concurrent
    texts = [r.content for r in done.results] + [json.dumps(r.value) for r in done.results]
    assert [quoted(t, mended) + quoted(t, sent) for t in texts] == [[]] * len(texts)


# --- a SQLite chat served over HTTP: every text, the database's own rows, the logs --------------


@pytest.mark.parametrize("secret", SECRETS, ids=SECRET_IDS)
async def test_a_sqlite_chat_without_stored_secrets_writes_none_anywhere(
    secret: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``store_secrets=False``: no row of the database file, answer, event or log record quotes
    the secret; the edit's new secret runs and is not written either, not even where the
    reviewer's note on another call repeats it."""
    import sqlite3

    from toolguard import SQLiteStore
    from toolguard._http.live import pending_reviews, sse

    pytest.importorskip("jsonschema")
    caplog.set_level("DEBUG")
    new = secret[::-1] + "-new"
    log: list[Any] = []
    path = tmp_path / "threads.sqlite3"
    store = SQLiteStore(str(path))
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(id="c1", name="login", args={"user": "ann", "password": secret}),
                    ToolCall(id="c2", name="login", args={"user": "boom", "password": secret}),
                    ToolCall(id="c3", name="vault_login", args={"user": "a", "password": secret}),
                ]
            ),
            "done",
        ]
    )
    hook = Webhook("https://example.com/hook", secret="s")
    chat = ReviewedChat(model, make_tools(log), store=store, notify=hook, store_secrets=False)
    written: list[str] = []
    try:
        turn = await chat.send_message("Log in")
        assert turn.pending_review is not None
        written.append(turn.pending_review.model_dump_json())
        written.append(sse("reviews", {"reviews": await pending_reviews(chat)}).decode())
        decisions = [
            {
                "type": "edit",
                "edited_action": {"name": "login", "args": {"user": "bob", "password": new}},
            },
            {"type": "approve"},
            {"type": "reject", "message": f"Not with {everywhere(secret)} / {everywhere(new)}"},
        ]
        app = create_app(chat)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as http:
            body = {"thread_id": turn.thread_id, "review_id": turn.review_id}
            answer = await http.post("/hitl/review", json={**body, "decisions": decisions})
            written.append(answer.text)
            thread = f"/hitl/threads/{turn.thread_id}"
            for route in ("/hitl/reviews", thread, f"{thread}/audit"):
                written.append((await http.get(route)).text)  # noqa: PERF401 - awaits in turn
        state = await store.load(turn.thread_id)
        assert state is not None
        written.append(json.dumps([item.body for item in state.outbox]))
        written.append(json.dumps([item.body for item in state.outbox], ensure_ascii=False))
        written.append(await chat.export_audit([turn.thread_id]))
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = [repr(row) for table in tables for row in db.execute(f"SELECT * FROM {table}")]  # noqa: S608
    written += [" ".join(str(cell) for cell in row) for row in rows]
    written += [record.getMessage() for record in caplog.records]

    assert answer.status_code == 200
    assert answer.json()["reply"] == "done"
    assert sorted(entry[1:] for entry in log) == [("bob", new), ("boom", secret)]  # concurrent
    for text in (secret, new):
        deep = {json.dumps(form)[1:-1] for form in forms(text)}  # JSON inside a JSON string
        assert [t for t in written if quoted(t, text) or any(form in t for form in deep)] == []
