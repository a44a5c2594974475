"""The examples: short enough to read, and they run offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import offline_env
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``examples/NAME`` with ``stdin`` as its input."""
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )


def test_openai_loop_is_under_60_lines() -> None:
    """The plain OpenAI loop example stays under 60 lines."""
    lines = (EXAMPLES / "openai_loop.py").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 60


PROMPT = "[a]pprove, {json} to edit, or a reason to reject: "


def test_reviewed_chat_runs_offline_with_the_demo_model() -> None:
    """Without a key the ReviewedChat example uses the DemoModel: reject, re-proposal, approve."""
    stdin = "email alice that the meeting moved to 11\nsend it to bob instead\na\nquit\n"
    done = run_example("reviewed_chat.py", stdin, offline_env())
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "tool          approval  rule  reason",
        "------------  --------  ----  " + "-" * 62,
        "find_contact  no        read  the word 'find' is a read verb",
        (
            "send_email    required  verb  "
            "the word 'send' is an approval verb (messaging and publishing)"
        ),
        "you> -- Tool `send_email` is awaiting approval",
        "{",
        '  "to": "alice@example.com",',
        '  "subject": "The meeting moved to 11",',
        '  "body": "Hi Alice, the meeting moved to 11."',
        "}",
        f"{PROMPT}-- Tool `send_email` is awaiting approval",
        "{",
        '  "to": "bob@example.com",',
        '  "subject": "The meeting moved to 11",',
        '  "body": "Hi Bob, the meeting moved to 11."',
        "}",
        (
            f"{PROMPT}assistant: send_email returned:"
            " Sent 'The meeting moved to 11' to bob@example.com"
        ),
        "you> ",
    ]


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One tool call as the example sends it back in the history."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def test_openai_loop_runs_against_a_local_server() -> None:
    """With OPENAI_BASE_URL the loop talks to that server; reads run, sends wait for a decision."""
    mail_alice = {"to": "alice@example.com", "subject": "Meeting", "body": "We meet at 11."}
    mail_bob = {**mail_alice, "to": "bob@example.com"}
    script = [
        reply_tool_calls([("call_1", "find_contact", {"name": "Alice"})]),
        reply_tool_calls([("call_2", "send_email", mail_alice)]),
        reply_tool_calls([("call_3", "send_email", mail_bob)]),
        reply_text("Sent to Bob."),
    ]
    with ScriptedOpenAIServer(script) as server:
        env = offline_env(OPENAI_BASE_URL=server.base_url)
        done = run_example("openai_loop.py", "Mail Alice\nsend it to bob instead\na\n", env)
        requests = server.requests
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "you> send_email {",
        '  "to": "alice@example.com",',
        '  "subject": "Meeting",',
        '  "body": "We meet at 11."',
        "}",
        f"{PROMPT}send_email {{",
        '  "to": "bob@example.com",',
        '  "subject": "Meeting",',
        '  "body": "We meet at 11."',
        "}",
        f"{PROMPT}assistant: Sent to Bob.",
    ]
    assert [r["model"] for r in requests] == ["gpt-4o-mini"] * 4
    assert requests[-1]["messages"] == [
        {"role": "user", "content": "Mail Alice"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("call_1", "find_contact", {"name": "Alice"})],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "alice@example.com"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("call_2", "send_email", mail_alice)],
        },
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "Rejected by the reviewer, not executed: send it to bob instead",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("call_3", "send_email", mail_bob)],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "Sent 'Meeting' to bob@example.com"},
    ]
