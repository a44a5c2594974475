"""Tests for ``toolguard serve``: assembling the app (tools, model, store) and running it."""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests import openai_server
from tests.helpers import (
    MODEL_ENV_VARS,
    command_env,
    free_port,
    sign_in_link,
    signed_in_client,
    wait_for_page,
)
from tests.openai_server import ScriptedOpenAIServer, reply_text
from toolguard import ReviewedChat, SQLiteStore
from toolguard._cli.serve import DEFAULT_DB, ServeError, build_app, choose_model, load_tools, serve
from toolguard.demo import DemoModel
from toolguard.openai import OpenAIChatModel

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

ASK = "email alice that the meeting moved to 11"
ALICE = {
    "to": "alice@example.com",
    "subject": "The meeting moved to 11",
    "body": "Hi Alice, the meeting moved to 11.",
}
SENT = 'Sent "The meeting moved to 11" to alice@example.com.'
REVIEW_CONFIG = {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
ROOT = Path(__file__).resolve().parents[2]
TOOLS_MODULE = '''
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the address.
        body: the text.
    """
    return f"sent to {to}"


def search(query: str) -> list[str]:
    """Search.

    Args:
        query: words.
    """
    return [query]


TOOLS = [send_email, search]


class Registry:
    tools = {"mail": send_email}


NOT_TOOLS = 42
'''


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI variables: the defaults are the offline ones."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tools_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The current directory holds ``servetools.py``; sys.path and sys.modules are restored."""
    (tmp_path / "servetools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("servetools", None)


@contextlib.asynccontextmanager
async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client for ``app``; the chat's store is closed afterwards."""
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://serve.test") as client:
            yield client
    finally:
        app.state.chat.store.close()


def pending(thread_id: str, review_id: str) -> dict[str, Any]:
    """The exact answer for the demo's send_email to Alice awaiting approval."""
    return {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": {
            "action_requests": [
                {
                    "name": "send_email",
                    "args": ALICE,
                    "description": "Tool `send_email` is awaiting approval",
                }
            ],
            "review_configs": [REVIEW_CONFIG],
        },
        "review_id": review_id,
    }


# --- build_app ----------------------------------------------------------------------------------


async def test_build_app_with_defaults_runs_the_offline_demo(tmp_path: Path) -> None:
    """No settings: demo tools, demo model, SQLite; chat → pending → approve → reply."""
    db = tmp_path / "serve.sqlite3"
    app = build_app(db=str(db))
    chat: ReviewedChat = app.state.chat
    assert isinstance(chat.model, DemoModel)
    assert isinstance(chat.store, SQLiteStore)
    assert chat.store.path == str(db)
    async with client_for(app) as client:
        first = await client.post("/hitl/chat", json={"message": ASK})
        body = first.json()
        done = await client.post(
            "/hitl/review",
            json={
                "thread_id": body["thread_id"],
                "decisions": [{"type": "approve"}],
                "review_id": body["review_id"],
            },
        )
        page = await client.get("/")
    assert first.status_code == 200
    assert body == pending(body["thread_id"], body["review_id"])
    assert done.json() == {
        "thread_id": body["thread_id"],
        "reply": SENT,
        "pending_review": None,
        "review_id": None,
    }
    assert page.status_code == 200
    assert db.is_file()


async def test_threads_survive_a_restart_in_the_sqlite_file(tmp_path: Path) -> None:
    """A second app over the same --db file resumes the review the first one paused."""
    db = str(tmp_path / "serve.sqlite3")
    async with client_for(build_app(db=db)) as client:
        body = (await client.post("/hitl/chat", json={"message": ASK})).json()
    async with client_for(build_app(db=db)) as client:
        thread = (await client.get(f"/hitl/threads/{body['thread_id']}")).json()
        done = await client.post(
            "/hitl/review",
            json={"thread_id": body["thread_id"], "decisions": [{"type": "approve"}]},
        )
    assert (thread["status"], thread["review_id"]) == ("awaiting_review", body["review_id"])
    assert done.json()["reply"] == SENT


async def test_build_app_with_tools_from_module_attr(tools_dir: Path) -> None:
    """--tools MODULE:ATTR loads a registry from the current directory and classifies it."""
    app = build_app(tools="servetools:TOOLS", db=str(tools_dir / "t.sqlite3"))
    nested = build_app(tools="servetools:Registry.tools", db=str(tools_dir / "t.sqlite3"))
    try:
        assert app.state.chat.toolset.guarded == ["send_email"]
        assert sorted(app.state.chat.toolset) == ["search", "send_email"]
        assert sorted(nested.state.chat.toolset) == ["mail"]
        assert isinstance(app.state.chat.model, DemoModel)
        async with client_for(app) as client:
            response = await client.post("/hitl/chat", json={"message": "hello"})
        body = response.json()
        assert response.status_code == 200
        assert body["pending_review"] is None
        assert isinstance(body["reply"], str)
    finally:
        nested.state.chat.store.close()


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        pytest.param(
            "servetools",
            "--tools expects MODULE:ATTR (e.g. myapp.tools:registry), got 'servetools'",
            id="no-colon",
        ),
        pytest.param(
            ":TOOLS",
            "--tools expects MODULE:ATTR (e.g. myapp.tools:registry), got ':TOOLS'",
            id="no-module",
        ),
        pytest.param(
            "servetools:",
            "--tools expects MODULE:ATTR (e.g. myapp.tools:registry), got 'servetools:'",
            id="no-attr",
        ),
        pytest.param(
            "no_such_module_4711:TOOLS",
            "--tools no_such_module_4711:TOOLS: cannot import 'no_such_module_4711':"
            " No module named 'no_such_module_4711'",
            id="missing-module",
        ),
        pytest.param(
            "servetools:MISSING",
            "--tools servetools:MISSING: 'servetools' has no attribute 'MISSING'",
            id="missing-attr",
        ),
        pytest.param(
            "servetools:Registry.nope",
            "--tools servetools:Registry.nope: 'servetools' has no attribute 'Registry.nope'",
            id="missing-nested-attr",
        ),
        pytest.param(
            "servetools:NOT_TOOLS",
            "--tools servetools:NOT_TOOLS: guard() takes a list or a mapping of tools, got int",
            id="not-tools",
        ),
    ],
)
def test_bad_tools_spec_is_a_clear_error(tools_dir: Path, spec: str, text: str) -> None:
    """A --tools value that cannot be used raises ServeError with a text saying why."""
    with pytest.raises(ServeError) as caught:
        build_app(tools=spec, db=str(tools_dir / "t.sqlite3"))
    assert str(caught.value) == text


def test_serve_with_a_bad_tools_spec_prints_the_error_and_returns_2(
    tools_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """serve() with a bad --tools writes one error line and returns 2 without serving."""
    code = serve(tools="servetools:MISSING", model=None, base_url=None, db=None, port=1)
    assert code == 2
    assert capsys.readouterr() == (
        "",
        "error: --tools servetools:MISSING: 'servetools' has no attribute 'MISSING'\n",
    )
    assert not (tools_dir / DEFAULT_DB).exists()


def test_load_tools_returns_the_attribute(tools_dir: Path) -> None:
    """load_tools imports MODULE and follows a dotted ATTR."""
    assert load_tools("servetools:Registry.tools") == {"mail": sys.modules["servetools"].send_email}


# --- the model ----------------------------------------------------------------------------------


def test_no_model_settings_choose_the_demo_model() -> None:
    """Without --model, --base-url and OpenAI variables the offline demo model is used."""
    assert isinstance(choose_model(None, None), DemoModel)


def test_base_url_chooses_an_openai_compatible_model_without_a_key() -> None:
    """--base-url and --model give an OpenAIChatModel for that server (placeholder key)."""
    model = choose_model("qwen2.5:7b", "http://127.0.0.1:11434/v1")
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, str(model.client.base_url)) == ("qwen2.5:7b", "http://127.0.0.1:11434/v1/")
    assert model.client.api_key == "not-needed"


def test_openai_api_key_chooses_openai_with_the_default_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OPENAI_API_KEY alone selects OpenAI with TOOLGUARD_MODEL, else gpt-4o-mini."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    default = choose_model(None, None)
    monkeypatch.setenv("TOOLGUARD_MODEL", "gpt-4.1-mini")
    named = choose_model(None, None)
    assert isinstance(default, OpenAIChatModel)
    assert isinstance(named, OpenAIChatModel)
    assert (default.model, str(default.client.base_url)) == (
        "gpt-4o-mini",
        "https://api.openai.com/v1/",
    )
    assert (named.model, named.client.api_key) == ("gpt-4.1-mini", "sk-test")


def test_model_without_key_or_base_url_is_a_clear_error() -> None:
    """--model for OpenAI without OPENAI_API_KEY raises ServeError saying what to set."""
    with pytest.raises(ServeError) as caught:
        choose_model("gpt-4o-mini", None)
    assert str(caught.value) == (
        "--model needs an API key: set OPENAI_API_KEY, or give --base-url for a local"
        " OpenAI-compatible server"
    )


async def test_build_app_talks_to_an_openai_compatible_server(
    scripted_openai: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    """--model and --base-url: the chat's model calls go to that server over HTTP."""
    scripted_openai.add(reply_text("Hello from the server."))
    app = build_app(
        model=openai_server.MODEL, base_url=scripted_openai.base_url, db=str(tmp_path / "o.db")
    )
    async with client_for(app) as client:
        response = await client.post("/hitl/chat", json={"message": "Hi"})
    assert response.json() == {
        "thread_id": response.json()["thread_id"],
        "reply": "Hello from the server.",
        "pending_review": None,
        "review_id": None,
    }
    assert len(scripted_openai.requests) == 1
    assert scripted_openai.requests[0]["model"] == openai_server.MODEL


# --- the command --------------------------------------------------------------------------------


needs_cli = pytest.mark.skipif(
    importlib.util.find_spec("toolguard._cli.main") is None,
    reason="toolguard/_cli/main.py (the `toolguard serve` command) does not exist yet",
)


@needs_cli
def test_python_m_toolguard_serve_answers_the_page_and_the_api(tmp_path: Path) -> None:
    """`python -m toolguard serve --port P` serves / and, to the browser that opened its sign-in
    link, POST /hitl/chat, then stops on SIGTERM."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--port", str(port)],
            cwd=tmp_path,
            env=command_env(),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        page = wait_for_page(process, f"{base_url}/")
        assert page is not None, f"the server did not answer; stderr:\n{err.read_text()}"
        refused = httpx.post(f"{base_url}/hitl/chat", json={"message": ASK}, timeout=10)
        link = sign_in_link(out.read_text().splitlines()[1], "serve", f"{base_url}/")
        with signed_in_client(link) as client:
            chat = client.post(f"{base_url}/hitl/chat", json={"message": ASK})
    finally:
        process.terminate()
        try:
            code = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait(timeout=5)
    index = ROOT / "toolguard" / "static" / "index.html"
    assert page.status_code == 200
    assert page.content == index.read_bytes()
    # Without the cookie of the sign-in link, a program on this machine is refused.
    assert (refused.status_code, refused.json()) == (
        401,
        {
            "detail": "Sign-in required: open this server's sign-in link; toolguard link prints it"
            " in a terminal on this machine."
        },
    )
    body = chat.json()
    assert chat.status_code == 200
    assert body == pending(body["thread_id"], body["review_id"])
    # uvicorn shuts down gracefully, then raises SIGTERM again to end the process.
    assert code == -signal.SIGTERM
    assert f"INFO:     Finished server process [{process.pid}]" in err.read_text().splitlines()
    startup_line = out.read_text().splitlines()[0]  # uvicorn's access log follows on stdout
    assert startup_line == (
        f"toolguard serve: http://127.0.0.1:{port}/"
        f" | model: built-in scripted demo model (offline) | db: {DEFAULT_DB} | sign-in: link"
    )
    assert (tmp_path / DEFAULT_DB).is_file()


@needs_cli
def test_python_m_toolguard_serve_with_bad_tools_exits_2(tmp_path: Path) -> None:
    """`toolguard serve --tools nomodule` prints the error and exits 2 without serving."""
    result = subprocess.run(
        [sys.executable, "-m", "toolguard", "serve", "--tools", "nomodule"],
        cwd=tmp_path,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        "error: --tools expects MODULE:ATTR (e.g. myapp.tools:registry), got 'nomodule'\n",
    )
