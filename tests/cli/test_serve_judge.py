"""The judge options of ``toolguard serve`` and ``toolguard mcp-proxy``.

``--judge-model``, ``--judge-auto-approve`` and ``--judge-scope`` build a
:class:`toolguard.Judge` on an :class:`~toolguard.openai.OpenAIChatModel` with
the environment's OpenAI settings; end to end, the judge model is the
scripted OpenAI-compatible server on 127.0.0.1 and the app is driven over
its HTTP API in process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests import openai_server
from tests.helpers import MODEL_ENV_VARS
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls
from toolguard import Judge
from toolguard._cli import mcp_proxy
from toolguard._cli.judge import build_judge, describe_judge
from toolguard._cli.main import _parser
from toolguard._cli.main import main as cli_main
from toolguard._cli.serve import build_app
from toolguard._enforce.judge import call_key
from toolguard.openai import OpenAIChatModel

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

ASK = "email alice that the meeting moved to 11"
ALICE = {
    "to": "alice@example.com",
    "subject": "The meeting moved to 11",
    "body": "Hi Alice, the meeting moved to 11.",
}
SENT = {"id": "sent-1", "status": "sent", "to": "alice@example.com", "subject": ALICE["subject"]}
ALLOW = {
    "risk": "low",
    "user_authorized": True,
    "outcome": "allow",
    "rationale": "The user asked to email Alice about the meeting.",
}
JUDGE = "judge-model"
CHAT = "chat-model"


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI variables unless a test sets them."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@contextlib.asynccontextmanager
async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client for ``app``; the chat's store and model clients are closed afterwards."""
    transport = httpx.ASGITransport(app=app)
    chat = app.state.chat
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://serve.test") as client:
            yield client
    finally:
        chat.store.close()
        for model in (chat.model, getattr(chat.runner.judge, "model", None)):
            if isinstance(model, OpenAIChatModel):
                await model.client.close()


def judge_of(app: FastAPI) -> Judge:
    judge = app.state.chat.runner.judge
    assert isinstance(judge, Judge)
    return judge


def audit_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


# --- building the judge from the options --------------------------------------------------------


def test_serve_builds_the_judge_from_the_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--judge-model on OPENAI_BASE_URL (placeholder key), --judge-auto-approve, --judge-scope."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    app = build_app(
        db=str(tmp_path / "j.db"),
        judge_model="qwen2.5:7b",
        judge_auto_approve=True,
        judge_scope="all",
    )
    app.state.chat.store.close()
    judge = judge_of(app)
    assert isinstance(judge.model, OpenAIChatModel)
    assert (judge.model.model, str(judge.model.client.base_url), judge.model.client.api_key) == (
        "qwen2.5:7b",
        "http://127.0.0.1:9/v1/",
        "not-needed",
    )
    assert (judge.auto_approve, judge.scope, judge.timeout, judge.max_auto_approvals) == (
        True,
        "all",
        30.0,
        20,
    )


def test_the_judge_defaults_are_the_apis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--judge-model alone: OpenAI with OPENAI_API_KEY; informing only, scope guarded."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    app = build_app(db=str(tmp_path / "j.db"), judge_model="gpt-4.1-mini")
    app.state.chat.store.close()
    judge = judge_of(app)
    assert isinstance(judge.model, OpenAIChatModel)
    assert (judge.model.model, str(judge.model.client.base_url), judge.model.client.api_key) == (
        "gpt-4.1-mini",
        "https://api.openai.com/v1/",
        "sk-test",
    )
    assert (judge.auto_approve, judge.scope) == (False, "guarded")
    assert describe_judge(judge) == "gpt-4.1-mini (informs, scope guarded)"


def test_no_judge_without_judge_model(tmp_path: Path) -> None:
    app = build_app(db=str(tmp_path / "j.db"))
    app.state.chat.store.close()
    assert app.state.chat.runner.judge is None


def test_mcp_proxy_builds_the_judge_from_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's parser takes the same options and builds the same judge."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    args = _parser().parse_args(
        ["mcp-proxy", "--judge-model", "m1", "--judge-auto-approve", "--", "python", "x.py"]
    )
    judge = mcp_proxy.judge_of(args)
    assert judge is not None
    assert describe_judge(judge) == "m1 (auto-approves, scope guarded)"
    plain = _parser().parse_args(["mcp-proxy", "--", "python", "x.py"])
    assert mcp_proxy.judge_of(plain) is None


def help_of(command: str, option: str) -> str | None:
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices[command]
    return next(a.help for a in sub._actions if option in a.option_strings)


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
def test_help_texts_name_the_defaults(command: str) -> None:
    assert help_of(command, "--judge-model") == (
        "let model NAME give a second opinion on each call that needs approval: its risk"
        " and rationale join the review (OpenAI-compatible, at OPENAI_BASE_URL with"
        " OPENAI_API_KEY; default: no judge)"
    )
    assert help_of(command, "--judge-auto-approve") == (
        "let the judge run a call without a person when it finds it low-risk and asked for"
        " by the user (default: off, the verdict only informs the reviewer)"
    )
    assert help_of(command, "--judge-scope") == (
        "guarded: judge the calls that need approval; all: every call, and the judge's"
        " 'ask' sends a call that would run at once to a person (default: guarded)"
    )


# --- bad values: one line, exit 2, nothing started ------------------------------------------------

BAD = [
    (
        ["--judge-model", "m", "--judge-scope", "everything"],
        {"OPENAI_API_KEY": "sk-test"},
        "error: --judge-scope must be guarded or all, got 'everything'\n",
    ),
    (["--judge-auto-approve"], {}, "error: --judge-auto-approve needs --judge-model NAME\n"),
    (["--judge-scope", "all"], {}, "error: --judge-scope needs --judge-model NAME\n"),
    (
        ["--judge-model", " "],
        {"OPENAI_API_KEY": "sk-test"},
        "error: --judge-model needs a model name, got ' '\n",
    ),
    (
        ["--judge-model", "m"],
        {},
        (
            "error: --judge-model needs an API key: set OPENAI_API_KEY, or OPENAI_BASE_URL for a"
            " local OpenAI-compatible server\n"
        ),
    ),
]


@pytest.mark.parametrize("case", BAD)
@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
def test_bad_judge_options_are_one_line_and_exit_2(
    command: str,
    case: tuple[list[str], dict[str, str], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing starts: no database is opened, no upstream is run."""
    options, env, error = case
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    upstream = ["--", sys.executable, "-c", "pass"] if command == "mcp-proxy" else []
    code = cli_main([command, *options, *upstream])
    assert (code, *capsys.readouterr()) == (2, "", error)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["serve"], ["mcp-proxy", "--", "upstream"]])
def test_judge_model_without_the_openai_extra_says_what_to_install(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # as if the package were not installed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code = cli_main([*command[:1], "--judge-model", "m", *command[1:]])
    assert (code, *capsys.readouterr()) == (
        2,
        "",
        (
            "error: --judge-model needs the 'openai' extra (import of openai halted; None in"
            " sys.modules): pip install 'toolguard-hitl[openai]'\n"
        ),
    )


# --- end to end: the judge is the scripted server -----------------------------------------------


def judge_app(server: ScriptedOpenAIServer, tmp_path: Path, **options: Any) -> FastAPI:
    """The demo chat with model CHAT and a judge JUDGE, both on the scripted server."""
    return build_app(
        model=CHAT,
        base_url=server.base_url,
        db=str(tmp_path / "j.db"),
        judge_model=JUDGE,
        **options,
    )


def judge_request(server: ScriptedOpenAIServer) -> dict[str, Any]:
    [request] = [r for r in server.requests if r["model"] == JUDGE]
    return request


async def test_the_verdict_informs_the_review(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --judge-auto-approve a guarded call waits for a person, with the verdict."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", ALICE)]),
        reply_text(json.dumps(ALLOW)),
        reply_text("Done: Alice knows."),
    )
    app = judge_app(scripted_openai, tmp_path)
    async with client_for(app) as client:
        turn = (await client.post("/hitl/chat", json={"message": ASK})).json()
        thread = (await client.get(f"/hitl/threads/{turn['thread_id']}")).json()
        approved = (
            await client.post(
                "/hitl/review",
                json={
                    "thread_id": turn["thread_id"],
                    "review_id": turn["review_id"],
                    "decisions": [{"type": "approve"}],
                },
            )
        ).json()
        audit = audit_lines((await client.get(f"/hitl/threads/{turn['thread_id']}/audit")).text)
    [action] = thread["actions"]
    judgement = action["judgement"]
    description = (
        "Tool `send_email` is awaiting approval | Judge (judge-model): low risk, the user"
        " asked for it. The user asked to email Alice about the meeting."
    )
    assert turn["pending_review"]["action_requests"] == [
        {"name": "send_email", "args": ALICE, "description": description}
    ]
    assert judgement == {
        "call_id": "call_1",
        "tool": "send_email",
        **ALLOW,
        "model": JUDGE,
        "latency_ms": judgement["latency_ms"],
        "decided": True,
        "auto_approved": False,
    }
    assert judgement["latency_ms"] > 0
    assert approved["reply"] == "Done: Alice knows."
    assert [(e["kind"], e["actor"], e["decision"]) for e in audit] == [
        ("judged", None, None),
        ("requested", None, None),
        ("decided", None, "approve"),
        ("executed", None, None),
    ]
    assert audit[0]["judgement"] == judgement
    assert (audit[0]["action_id"], audit[0]["detail"]) == (action["id"], ALLOW["rationale"])
    # The judge read the person's message and the call, as data, with no tools.
    request = judge_request(scripted_openai)
    assert "tools" not in request
    assert json.loads(request["messages"][1]["content"]) == {
        "user_messages": [ASK],
        "proposed_call": {
            "tool": "send_email",
            "description": "Send an email from the user's address.",
            "arguments": ALICE,
        },
    }


async def test_with_auto_approve_the_call_runs_without_a_person(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--judge-auto-approve: an allowed, low-risk, asked-for call runs; the judge is the actor."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", ALICE)]),
        reply_text(json.dumps(ALLOW)),
        reply_text("Done: Alice knows."),
    )
    app = judge_app(scripted_openai, tmp_path, judge_auto_approve=True)
    async with client_for(app) as client:
        turn = (await client.post("/hitl/chat", json={"message": ASK})).json()
        thread = (await client.get(f"/hitl/threads/{turn['thread_id']}")).json()
        audit = audit_lines((await client.get(f"/hitl/threads/{turn['thread_id']}/audit")).text)
        key = await app.state.chat.store.digest_key()  # the database's own digest key
    assert turn == {
        "thread_id": turn["thread_id"],
        "reply": "Done: Alice knows.",
        "pending_review": None,
        "review_id": None,
    }
    assert thread["actions"] == []  # nobody was asked
    tool_messages = [m for m in thread["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in tool_messages] == [
        ("call_1", SENT)
    ]
    [judged] = audit
    assert judged == {
        "id": judged["id"],
        "at": judged["at"],
        "kind": "judged",
        "thread_id": turn["thread_id"],
        "review_id": None,
        "action_id": None,
        "tool": "send_email",
        "args": ALICE,
        "actor": "judge",
        "decision": "approve",
        "detail": ALLOW["rationale"],
        "digest": call_key("send_email", ALICE, turn["thread_id"], key),
        "judgement": {
            "call_id": "call_1",
            "tool": "send_email",
            **ALLOW,
            "model": JUDGE,
            "latency_ms": judged["judgement"]["latency_ms"],
            "decided": True,
            "auto_approved": True,
        },
    }


async def test_a_judge_that_answers_nonsense_sends_the_call_to_a_person(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail closed: even with --judge-auto-approve, a reply that is no verdict runs nothing."""
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", ALICE)]),
        reply_text('Sure! {"outcome": "allow"} -- approve it, the user said so.'),
    )
    app = judge_app(scripted_openai, tmp_path, judge_auto_approve=True)
    async with client_for(app) as client:
        turn = (await client.post("/hitl/chat", json={"message": ASK})).json()
        thread = (await client.get(f"/hitl/threads/{turn['thread_id']}")).json()
    assert turn["pending_review"]["action_requests"] == [
        {
            "name": "send_email",
            "args": ALICE,
            "description": (
                "Tool `send_email` is awaiting approval | Judge (judge-model) could not decide:"
                " its reply was not one JSON object"
            ),
        }
    ]
    [action] = thread["actions"]
    assert (action["status"], action["judgement"]["decided"], action["judgement"]["risk"]) == (
        "requested",
        False,
        None,
    )
    assert [m["role"] for m in thread["messages"]] == ["system", "user", "assistant"]  # none ran


def test_build_judge_returns_none_without_a_model() -> None:
    assert build_judge(None) is None


async def test_stopping_the_app_closes_the_model_and_judge_clients(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The OpenAI clients serve built for --model and --judge-model end with the app."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    app = build_app(db=str(tmp_path / "j.db"), model="qwen2.5:7b", judge_model="qwen2.5:7b")
    chat = app.state.chat
    model, judge_model = chat.model, judge_of(app).model
    assert isinstance(model, OpenAIChatModel)
    assert isinstance(judge_model, OpenAIChatModel)
    try:
        async with app.router.lifespan_context(app):
            assert (model.client.is_closed(), judge_model.client.is_closed()) == (False, False)
        assert (model.client.is_closed(), judge_model.client.is_closed()) == (True, True)
    finally:
        chat.store.close()
