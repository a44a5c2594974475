"""``--shadow``, ``--shadow-all`` and the candidate options of ``toolguard serve``, ``mcp-proxy``
and ``tools``: shadow mode end to end, said loudly on the startup line, the page and the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import MODEL_ENV_VARS, command_env, free_port, wait_for_page
from toolguard import ReviewedChat, Rules
from toolguard._cli.main import main
from toolguard._cli.mcp_proxy import add_parser
from toolguard._cli.serve import ServeError, build_app
from toolguard._cli.watch_options import build_watch, watch_settings

ASK = "email alice that the meeting moved to 11"
ALICE = {
    "to": "alice@example.com",
    "subject": "The meeting moved to 11",
    "body": "Hi Alice, the meeting moved to 11.",
}
SENT = 'Sent "The meeting moved to 11" to alice@example.com.'
BANNER = (
    "SHADOW MODE: nothing waits for a person; calls that would be asked run at once and are"
    " recorded"
)


@pytest.fixture(autouse=True)
def _no_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI variables: the defaults are the offline ones."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def test_toolguard_serve_shadow_runs_the_call_at_once_and_records_it(tmp_path: Path) -> None:
    """`toolguard serve --shadow`: the demo's send_email runs without a review, the audit trail
    has its ``shadow`` event, /hitl/info and the startup line say shadow mode is on."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "toolguard", "serve", "--port", str(port), "--no-auth"]
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [*command, "--shadow", "--db", "shadow.sqlite3"],
            cwd=tmp_path,
            env=command_env(),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        page = wait_for_page(process, f"{base}/")
        assert page is not None, f"the server did not answer; stderr:\n{err.read_text()}"
        with httpx.Client(base_url=base, timeout=10) as client:
            info = client.get("/hitl/info").json()
            turn = client.post("/hitl/chat", json={"message": ASK}).json()
            audit = client.get(f"/hitl/threads/{turn['thread_id']}/audit").text
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    assert info == {"mode": "chat", "shadow": True}
    assert turn == {
        "thread_id": turn["thread_id"],
        "reply": SENT,
        "pending_review": None,
        "review_id": None,
    }
    [event] = [json.loads(line) for line in audit.splitlines()]
    assert event == {
        "id": event["id"],
        "at": event["at"],
        "kind": "shadow",
        "thread_id": turn["thread_id"],
        "review_id": None,
        "action_id": None,
        "tool": "send_email",
        "args": ALICE,
        "actor": None,
        "decision": None,
        "detail": "the tool's policy asks for a review of this call",
        "digest": None,
        "would": "ask",
    }
    startup = out.read_text().splitlines()[0]
    assert startup == (
        f"toolguard serve: {base}/ | model: built-in scripted demo model (offline)"
        f" | db: shadow.sqlite3 | {BANNER}"
    )


async def test_build_app_takes_the_shadow_and_candidate_options(tmp_path: Path) -> None:
    rules = tmp_path / "candidate.toml"
    rules.write_text('[rules]\nallow = ["send_email"]\n', encoding="utf-8")
    app = build_app(db=":memory:", watch={"shadow": "all", "candidate_rules": str(rules)})
    chat: ReviewedChat = app.state.chat
    try:
        assert chat.runner.shadow == "all"
        assert chat.runner.candidate is not None
        assert chat.runner.candidate.rules == Rules(allow=["send_email"])
        assert chat.runner.candidate.judge is None
    finally:
        chat.store.close()


@pytest.mark.parametrize(
    ("watch", "error"),
    [
        (
            {"candidate_rules": "missing.toml"},
            "--candidate-rules missing.toml: cannot read the file: No such file or directory",
        ),
        (
            {"candidate_judge_model": "gpt-4o-mini"},
            (
                "--candidate-judge-model needs an API key: set OPENAI_API_KEY, or"
                " OPENAI_BASE_URL for a local OpenAI-compatible server"
            ),
        ),
    ],
)
def test_bad_candidate_options_are_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch: dict[str, Any], error: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ServeError, match=r"^--candidate") as info:
        build_app(db=":memory:", watch=watch)
    assert str(info.value) == error


def test_mcp_proxy_reads_the_same_options() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    add_parser(commands)
    args = parser.parse_args(["mcp-proxy", "--shadow-all", "--", "server"])
    assert watch_settings(args) == {"shadow": "all"}
    assert build_watch(**(watch_settings(args) or {})) == ("all", None)
    args = parser.parse_args(["mcp-proxy", "--", "server"])
    assert watch_settings(args) is None


def test_toolguard_tools_says_shadow_mode_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shadowtools.py").write_text(
        "def send_email(to: str) -> str:\n"
        '    """Send an email.\n\n    Args:\n        to: the address.\n    """\n'
        "    return to\n\n\n"
        "def search(query: str) -> str:\n"
        '    """Search.\n\n    Args:\n        query: words.\n    """\n'
        "    return query\n\n\nTOOLS = [send_email, search]\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        assert main(["tools", "shadowtools:TOOLS", "--shadow"]) == 0
    finally:
        sys.modules.pop("shadowtools", None)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"{BANNER}.",
        "Run at once in shadow mode instead of asking: send_email",
        "",
    ]
