"""`toolguard demo` with OPENAI_BASE_URL set talks to that OpenAI-compatible server."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import offline_env
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls

MAIL = {"to": "bob@example.com", "subject": "Lunch", "body": "Lunch is at 1."}


def test_demo_uses_the_configured_model_and_waits_for_approval() -> None:
    """The demo sends the tools to the server, shows the card, and runs the call once approved."""
    script = [reply_tool_calls([("call_1", "send_email", MAIL)]), reply_text("Mail sent to Bob.")]
    with ScriptedOpenAIServer(script) as server:
        env = offline_env(OPENAI_BASE_URL=server.base_url, TOOLGUARD_MODEL="local-model")
        done = subprocess.run(
            [sys.executable, "-m", "toolguard", "demo", "--non-interactive"],
            input="mail bob that lunch is at 1\na\nquit\n",
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            timeout=60,
            check=False,
        )
        requests = server.requests
    assert (done.returncode, done.stderr) == (0, "")
    out = done.stdout
    assert "local-model" in out.splitlines()[1]
    card = (
        "== Approval 1/1: send_email ==\n"
        "Tool `send_email` is awaiting approval\n"
        "Why it asks: the word 'send' is an approval verb (messaging and publishing)\n"
        "Arguments:\n"
        "{\n"
        '  "to": "bob@example.com",\n'
        '  "subject": "Lunch",\n'
        '  "body": "Lunch is at 1."\n'
        "}\n"
    )
    assert card in out
    assert "assistant: Mail sent to Bob." in out
    assert [r["model"] for r in requests] == ["local-model", "local-model"]
    assert sorted(t["function"]["name"] for t in requests[0]["tools"]) == [
        "add_task",
        "complete_task",
        "create_event",
        "delete_event",
        "list_events",
        "list_tasks",
        "read_email",
        "search_mail",
        "send_email",
    ]
    tool_message = requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == "call_1"
    assert '"status": "sent"' in tool_message["content"]
