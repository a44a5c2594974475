"""Redaction of secret arguments: redact=[...] and SecretStr parameters."""

# ruff: noqa: S105, S106 - the secrets here are test values

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import httpx
import pytest
from pydantic import AfterValidator, SecretStr

import toolguard
from toolguard import (
    REDACTED,
    ApprovalRequiredError,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    Webhook,
    allow_once,
    requires_approval,
    tool,
)
from toolguard._cli.terminal import render_card
from toolguard._core.records import call_digest
from toolguard._policy.redact import SECRET_GONE
from toolguard.http import create_app

SECRET = "hunter2-correct-horse"
"""The password every test passes; it must never appear where a person or a log looks."""


def _strong(value: str) -> str:
    if len(value) < 8:
        msg = f"the password {value!r} is too short"
        raise ValueError(msg)
    return value


class Tools:
    """Guarded tools recording what they were really called with."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

        @requires_approval(redact=["password"])
        def login(user: str, password: Annotated[str, AfterValidator(_strong)]) -> str:
            """Log in to the mail server."""
            self.seen.append(("login", (user, password)))
            if password.startswith("boom"):
                msg = f"the server refused the password {password}"
                raise RuntimeError(msg)
            return f"logged in as {user}"

        @requires_approval
        def connect(host: str, token: SecretStr, port: int = 443) -> str:
            """Connect with an API token."""
            self.seen.append(("connect", (host, token, port)))
            return f"connected to {host}"

        @requires_approval
        def send_note(body: str) -> str:
            """Send a note (no secret parameter)."""
            self.seen.append(("send_note", body))
            return "sent"

        self.login = login
        self.connect = connect
        self.send_note = send_note

    def all(self) -> list[Any]:
        return [self.login, self.connect, self.send_note]


def login_call(password: str = SECRET, call_id: str = "c1", user: str = "alice") -> dict[str, Any]:
    return {"id": call_id, "name": "login", "args": {"user": user, "password": password}}


def paths_of(data: Any, needle: str, path: str = "") -> list[str]:
    """Every place in JSON-like ``data`` whose text contains ``needle``."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, needle, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += paths_of(value, needle, f"{path}[{index}]")
    elif isinstance(data, str) and needle in data:
        found.append(path)
    return found


# ---------------------------------------------------------------------------- declaring


def test_a_redact_name_that_is_not_a_parameter_is_refused_when_decorating() -> None:
    def login(user: str, password: str) -> str:
        """Log in."""
        return user

    with pytest.raises(ValueError, match="redact names") as caught:
        requires_approval(redact=["pasword"])(login)
    assert str(caught.value) == (
        "redact names 'pasword', which is not a parameter of the tool 'login'."
        " Its parameters: ['user', 'password']"
    )
    with pytest.raises(ValueError, match="redact names") as caught:
        tool(redact=["secret"])(login)
    assert str(caught.value) == (
        "redact names 'secret', which is not a parameter of the tool 'login'."
        " Its parameters: ['user', 'password']"
    )


@pytest.mark.parametrize(
    ("redact", "error", "text"),
    [
        (
            "password",
            TypeError,
            "redact must be a list of parameter names such as ['password'], got str",
        ),
        ([1], TypeError, "redact must hold parameter names (texts), got int: 1"),
        (
            ["auth.password"],
            ValueError,
            (
                "redact takes top-level parameter names, got 'auth.password': to hide a value"
                " inside an object argument, redact the whole argument"
            ),
        ),
        (
            [""],
            ValueError,
            (
                "redact takes top-level parameter names, got '': to hide a value"
                " inside an object argument, redact the whole argument"
            ),
        ),
    ],
)
def test_malformed_redact_options_are_refused(redact: Any, error: type, text: str) -> None:
    with pytest.raises(error) as caught:
        requires_approval(redact=redact)
    assert str(caught.value) == text
    with pytest.raises(error) as caught:
        tool(redact=redact)
    assert str(caught.value) == text


def test_secretstr_parameters_and_named_ones_are_redacted() -> None:
    tools = Tools()
    assert tools.login.__toolguard_tool__.redacted == frozenset({"password"})  # type: ignore[attr-defined]
    assert tools.connect.__toolguard_tool__.redacted == frozenset({"token"})  # type: ignore[attr-defined]

    @tool(redact=["api_key"])
    def fetch(url: str, api_key: str, auth: SecretStr | None = None) -> str:
        """Fetch a page."""
        return url

    assert fetch.redacted == frozenset({"api_key", "auth"})
    guarded = requires_approval(fetch)
    assert guarded.redacted == frozenset({"api_key", "auth"})
    assert toolguard.guard([fetch])["fetch"].redacted == frozenset({"api_key", "auth"})


# ---------------------------------------------------------------------------- direct calls


def test_the_approval_error_shows_the_placeholder_and_allow_once_runs_the_real_value() -> None:
    tools = Tools()
    with pytest.raises(ApprovalRequiredError) as caught:
        tools.login("alice", SECRET)
    exc = caught.value
    assert exc.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "login",
                "args": {"user": "alice", "password": REDACTED},
                "description": "Tool `login` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "login", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert exc.call.args == {"user": "alice", "password": "[redacted]"}
    for text in (str(exc), repr(exc), repr(exc.call), str(exc.call), repr(exc.pending_review)):
        assert SECRET not in text
    with allow_once(exc.call):
        assert tools.login("alice", SECRET) == "logged in as alice"
    assert tools.seen == [("login", ("alice", SECRET))]


def test_allow_once_of_a_redacted_call_does_not_cover_the_placeholder_value() -> None:
    tools = Tools()
    with pytest.raises(ApprovalRequiredError) as caught:
        tools.login("alice", SECRET)
    with allow_once(caught.value.call), pytest.raises(ApprovalRequiredError):
        tools.login("alice", REDACTED)
    assert tools.seen == []


# ---------------------------------------------------------------------------- the runner


def test_the_review_shows_the_placeholder_the_digest_covers_the_real_value() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync(
        [login_call(), {"id": "c2", "name": "connect", "args": {"host": "h", "token": "tok-1"}}],
        thread_id="t1",
    )
    assert step.pending is not None
    assert step.pending_review is not None
    assert [r.args for r in step.pending_review.action_requests] == [
        {"user": "alice", "password": REDACTED},
        {"host": "h", "token": REDACTED},
    ]
    first = step.pending.actions[0]
    assert first.args == {"user": "alice", "password": REDACTED}
    assert first.digest == call_digest(
        "login",
        {"user": "alice", "password": SECRET},
        None,
        thread_id="t1",
        review_id=step.pending.review_id,
    )
    # The paused turn's calls keep the real values: that is where they are stored.
    assert step.pending.calls[0].args == {"user": "alice", "password": SECRET}
    done = runner.resume_sync(step.pending, [{"type": "approve"}] * 2, thread_id="t1")
    assert [r.content for r in done.results] == ["logged in as alice", "connected to h"]
    # The two approved calls run concurrently: their order in ``seen`` is not fixed.
    assert len(tools.seen) == 2
    seen = dict(tools.seen)
    assert sorted(seen) == ["connect", "login"]
    assert seen["login"] == ("alice", SECRET)
    host, token, port = seen["connect"]
    assert (host, port) == ("h", 443)
    assert type(token) is SecretStr
    assert token.get_secret_value() == "tok-1"


def edit(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def test_an_edit_that_keeps_the_placeholder_keeps_the_original_value() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call()])
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [edit("login", user="bob", password=REDACTED)])
    assert done.results[0].content == "logged in as bob"
    assert tools.seen == [("login", ("bob", SECRET))]
    decision = done.actions[0].decision
    assert decision is not None
    assert decision.model_dump() == {
        "type": "edit",
        "edited_action": {"name": "login", "args": {"user": "bob", "password": REDACTED}},
    }
    # The turn's call (the history's record of what ran) has the real value.
    assert done.calls[0].args == {"user": "bob", "password": SECRET}


def test_an_edit_with_a_new_secret_runs_it_and_records_it_redacted() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call()])
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [edit("login", user="alice", password="new-pass-123")])
    assert tools.seen == [("login", ("alice", "new-pass-123"))]
    assert done.actions[0].decision is not None
    assert done.actions[0].decision.model_dump() == {
        "type": "edit",
        "edited_action": {"name": "login", "args": {"user": "alice", "password": REDACTED}},
    }


def test_a_placeholder_moved_to_another_parameter_or_tool_is_taken_literally() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call(call_id="c1"), login_call(call_id="c2")])
    assert step.pending is not None
    done = runner.resume_sync(
        step.pending,
        [
            # A reviewer trying to read the secret: copy it into a visible parameter...
            edit("login", user=REDACTED, password="other-pass-1"),
            # ... or into another tool's argument.
            edit("send_note", body=REDACTED),
        ],
    )
    assert tools.seen == [("login", (REDACTED, "other-pass-1"))]
    assert [(r.call_id, r.content) for r in done.results] == [("c1", "logged in as [redacted]")]
    # The edit to another guarded tool is reviewed again, with the literal placeholder.
    assert done.pending_review is not None
    assert done.pending_review.action_requests[0].args == {"body": REDACTED}
    again = runner.resume_sync(done.pending, [{"type": "approve"}])  # type: ignore[arg-type]
    assert again.results[1].content == "sent"
    assert tools.seen[1] == ("send_note", REDACTED)


def test_the_model_sending_the_placeholder_itself_gets_it_literally() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call(password=REDACTED + "!")])
    assert step.pending is not None
    runner.resume_sync(step.pending, [edit("login", user="alice", password=REDACTED)])
    assert tools.seen == [("login", ("alice", "[redacted]!"))]

    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call(password="[redacted]")])
    assert step.pending is not None
    runner.resume_sync(step.pending, [{"type": "approve"}])
    assert tools.seen == [("login", ("alice", "[redacted]"))]


def test_refusal_texts_never_quote_the_secret() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync(
        [
            login_call(password="abc", call_id="c1"),
            login_call(password="boom-" + SECRET, call_id="c2"),
        ]
    )
    assert step.results[0].content == (
        "Invalid arguments for tool `login`: 'password': invalid value"
        " (value_error; the message is hidden: the value is secret)"
    )
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [{"type": "approve"}])
    assert done.results[1].content == (
        "Tool `login` failed: RuntimeError: the server refused the password [redacted]"
    )
    assert tools.seen == [("login", ("alice", "boom-" + SECRET))]
    # An edit whose new secret does not validate: the text hides it too.
    step = runner.run_sync([login_call()])
    assert step.pending is not None
    done = runner.resume_sync(step.pending, [edit("login", user="alice", password="xyz")])
    assert done.results[0].content == (
        "Invalid arguments for tool `login`: 'password': invalid value"
        " (value_error; the message is hidden: the value is secret)"
    )


def test_a_redacted_tool_with_arguments_that_are_not_an_object_hides_the_text() -> None:
    runner = Runner(Tools().all())
    step = runner.run_sync(
        [{"id": "c1", "type": "function", "function": {"name": "login", "arguments": SECRET}}]
    )
    assert step.results[0].content == (
        "Invalid arguments for tool `login`: expected a JSON object, got [redacted]"
    )


def test_a_rewritten_stored_call_or_shown_args_never_runs() -> None:
    tools = Tools()
    runner = Runner(tools.all())
    step = runner.run_sync([login_call()])
    assert step.pending is not None
    pending = step.pending
    forged_call = pending.calls[0].model_copy(
        update={"args": {"user": "alice", "password": "x" * 9}}
    )
    forged = pending.model_copy(update={"calls": [forged_call]})
    done = runner.resume_sync(forged, [{"type": "approve"}])
    assert (done.results[0].outcome, done.results[0].content) == (
        "tampered",
        (
            "This call does not match the one the reviewer approved (its name or arguments"
            " changed after review). It was not executed."
        ),
    )
    step = runner.run_sync([login_call()])
    assert step.pending is not None
    shown = step.pending.actions[0].model_copy(
        update={"args": {"user": "bob", "password": REDACTED}}
    )
    forged = step.pending.model_copy(update={"actions": [shown]})
    assert runner.resume_sync(forged, [{"type": "approve"}]).results[0].outcome == "tampered"
    assert tools.seen == []


def test_schema_tools_hide_secrets_that_jsonschema_quotes() -> None:
    pytest.importorskip("jsonschema")
    ran: list[dict[str, Any]] = []
    base = toolguard.Tool.from_schema(
        "vault_login",
        "Log in to the vault.",
        {
            "type": "object",
            "properties": {
                "user": {"type": "string"},
                "password": {"type": "string", "minLength": 30},
            },
            "required": ["user", "password"],
        },
        lambda **args: ran.append(args) or "ok",
    )
    guarded = requires_approval(redact=["password"])(base)
    assert guarded.redacted == frozenset({"password"})
    runner = Runner([guarded])
    step = runner.run_sync(
        [{"id": "c1", "name": "vault_login", "args": {"user": SECRET, "password": SECRET}}]
    )
    # The password's own problem is hidden; the secret quoted elsewhere is scrubbed.
    assert step.results[0].content == (
        "Invalid arguments for tool `vault_login`: 'password': invalid value"
        " (the message is hidden: the value is secret)"
    )
    with pytest.raises(ValueError, match="redact names") as caught:
        requires_approval(redact=["pin"])(base)
    assert str(caught.value) == (
        "redact names 'pin', which is not a parameter of the tool 'vault_login'."
        " Its parameters: ['user', 'password']"
    )
    assert ran == []


# ---------------------------------------------------------------------------- the chat and HTTP


def login_turn(password: str = SECRET) -> ModelResponse:
    return ModelResponse(
        tool_calls=[
            ToolCall(id="call_1", name="login", args={"user": "alice", "password": password})
        ]
    )


def make_chat(store: MemoryStore, tools: Tools, **options: Any) -> ReviewedChat:
    model = ScriptedModel([login_turn(), "Done."])
    return ReviewedChat(model, tools.all(), store=store, **options)


async def stored_dump(store: MemoryStore, thread_id: str) -> dict[str, Any]:
    state = await store.load(thread_id)
    assert state is not None
    dumped: dict[str, Any] = state.model_dump(mode="json")
    return dumped


@pytest.fixture
def no_secret_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    assert [r for r in caplog.records if SECRET in r.getMessage()] == []


async def test_the_store_holds_the_real_value_only_in_the_paused_turn_and_history(
    no_secret_in_logs: None,
) -> None:
    store = MemoryStore()
    tools = Tools()
    chat = make_chat(store, tools, notify=Webhook("https://example.com/hook", secret="s"))
    turn = await chat.send_message("Log me in")
    assert turn.pending_review is not None
    assert turn.pending_review.action_requests[0].args == {"user": "alice", "password": REDACTED}
    assert paths_of(await stored_dump(store, turn.thread_id), SECRET) == [
        "messages[1].tool_calls[0].function.arguments",
        "pending.calls[0].args.password",
    ]
    done = await chat.submit_review(
        [edit("login", user="alice", password=REDACTED)],
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="rita",
    )
    assert done.reply == "Done."
    assert tools.seen == [("login", ("alice", SECRET))]
    # Once the call ran, only the history's record of the call has it.
    assert paths_of(await stored_dump(store, turn.thread_id), SECRET) == [
        "messages[1].tool_calls[0].function.arguments",
    ]
    exported = await chat.export_audit([turn.thread_id])
    assert SECRET not in exported
    assert [
        (e["kind"], e.get("args"))
        for e in map(json.loads, exported.splitlines())
        if e["kind"] in ("requested", "decided")
    ] == [
        ("requested", {"user": "alice", "password": REDACTED}),
        ("decided", {"user": "alice", "password": REDACTED}),
    ]


async def test_store_secrets_false_keeps_the_real_value_out_of_the_store() -> None:
    store = MemoryStore()
    tools = Tools()
    chat = make_chat(store, tools, store_secrets=False)
    turn = await chat.send_message("Log me in")
    assert paths_of(await stored_dump(store, turn.thread_id), SECRET) == []
    assert len(chat._vault or ()) == 1
    await chat.submit_review([{"type": "approve"}], turn.thread_id, review_id=turn.review_id)
    assert tools.seen == [("login", ("alice", SECRET))]
    assert paths_of(await stored_dump(store, turn.thread_id), SECRET) == []
    assert len(chat._vault or ()) == 0
    state = await store.load(turn.thread_id)
    assert state is not None
    assert state.messages[1]["tool_calls"][0]["function"]["arguments"] == (
        '{"user": "alice", "password": "[redacted]"}'
    )


async def test_a_paused_turn_whose_secret_is_gone_fails_closed() -> None:
    store = MemoryStore()
    tools = Tools()
    turn = await make_chat(store, tools, store_secrets=False).send_message("Log me in")
    restarted = make_chat(store, tools, store_secrets=False)  # a new process: an empty vault
    model = ScriptedModel(["I could not log you in."])
    restarted.model = model
    done = await restarted.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id
    )
    assert tools.seen == []
    assert [(a.status, a.result.outcome if a.result else None) for a in done.actions] == [
        ("failed", "failed")
    ]
    assert done.actions[0].result is not None
    assert done.actions[0].result.content == SECRET_GONE
    # An edit keeping the placeholder cannot run with the placeholder either.
    turn = await make_chat(store, tools, store_secrets=False).send_message("Log me in")
    restarted = make_chat(store, tools, store_secrets=False)
    restarted.model = ScriptedModel(["No."])
    done = await restarted.submit_review(
        [edit("login", user="bob", password=REDACTED)], turn.thread_id, review_id=turn.review_id
    )
    assert tools.seen == []
    assert done.actions[0].result is not None
    assert done.actions[0].result.content == SECRET_GONE


@pytest.fixture
async def client() -> AsyncIterator[tuple[httpx.AsyncClient, Tools]]:
    tools = Tools()
    app = create_app(make_chat(MemoryStore(), tools))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolguard.test") as c:
        yield c, tools


async def test_http_answers_never_carry_the_secret(
    client: tuple[httpx.AsyncClient, Tools],
) -> None:
    http, tools = client
    answer = await http.post("/hitl/chat", json={"message": "Log me in"})
    assert answer.status_code == 200
    body = answer.json()
    thread_id = body["thread_id"]
    assert body["pending_review"]["action_requests"][0]["args"] == {
        "user": "alice",
        "password": REDACTED,
    }
    texts = [answer.text]
    for path in ("/hitl/reviews", f"/hitl/threads/{thread_id}", f"/hitl/threads/{thread_id}/audit"):
        got = await http.get(path)
        assert got.status_code == 200
        texts.append(got.text)
    thread = (await http.get(f"/hitl/threads/{thread_id}")).json()
    assert thread["messages"][1]["tool_calls"][0]["function"]["arguments"] == (
        '{"user": "alice", "password": "[redacted]"}'
    )
    decided = await http.post(
        "/hitl/review",
        json={
            "thread_id": thread_id,
            "review_id": body["review_id"],
            "decisions": [{"type": "approve"}],
        },
    )
    assert decided.status_code == 200
    texts.append(decided.text)
    texts.append((await http.get(f"/hitl/threads/{thread_id}")).text)
    assert [SECRET in text for text in texts] == [False] * len(texts)
    assert tools.seen == [("login", ("alice", SECRET))]


def test_the_terminal_card_shows_the_placeholder() -> None:
    step = Runner(Tools().all()).run_sync([login_call()])
    assert step.pending_review is not None
    assert render_card(step.pending_review.action_requests[0]) == (
        "== Approval 1/1: login ==\n"
        "Tool `login` is awaiting approval\n"
        "Arguments:\n"
        "{\n"
        '  "user": "alice",\n'
        '  "password": "[redacted]"\n'
        "}"
    )


def test_a_result_echoing_a_secret_is_recorded_scrubbed() -> None:
    @requires_approval(redact=["password", "pin"])
    def echo(user: str, password: str, pin: str) -> dict[str, Any]:
        """Echo what it got."""
        return {"text": f"{user} used {password} and {pin}", password: [pin, password]}

    runner = Runner([echo])
    step = runner.run_sync(
        [{"id": "c1", "name": "echo", "args": {"user": "al", "password": SECRET, "pin": "123"}}]
    )
    assert step.pending is not None
    result = runner.resume_sync(step.pending, [{"type": "approve"}]).results[0]
    # Values shorter than 4 characters are not searched for (they would match anywhere).
    assert result.value == {
        "text": "al used [redacted] and 123",
        "[redacted]": ["123", "[redacted]"],
    }
    assert result.content == (
        '{"text": "al used [redacted] and 123", "[redacted]": ["123", "[redacted]"]}'
    )


async def test_a_denied_call_is_audited_with_the_placeholder() -> None:
    store = MemoryStore()
    tools = toolguard.guard(Tools().all(), rules=toolguard.Rules(deny=["login"]))
    chat = ReviewedChat(ScriptedModel([login_turn(), "Denied."]), tools, store=store)
    turn = await chat.send_message("Log me in")
    assert turn.reply == "Denied."
    [event] = await chat.audit_trail(turn.thread_id)
    assert (event.kind, event.tool, event.args) == (
        "denied",
        "login",
        {"user": "alice", "password": REDACTED},
    )
