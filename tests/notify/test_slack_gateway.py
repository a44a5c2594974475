"""``toolguard mcp-proxy --slack-channel ...``, run as a process behind a real MCP client: the
call waits, the review is posted to a fake Slack, a signed Approve runs it once upstream and
the message is updated; a forged Approve decides nothing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("slack_sdk")
pytest.importorskip("mcp")
fastmcp = pytest.importorskip("fastmcp")
httpx = pytest.importorskip("httpx")

from fastmcp.client.transports import StdioTransport  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402

from .slack_fake import (  # noqa: E402
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    FakeSlack,
    button,
    signed,
    slack,  # noqa: F401 - a fixture
)

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
LIMIT = 30


def gateway(tmp_path: Path, port: int, api_url: str) -> StdioTransport:
    (tmp_path / "rules.toml").write_text('[slack]\nU0ALICE = "alice"\n', encoding="utf-8")
    argv = ["-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "gateway.sqlite3")]
    argv += ["--port", str(port), "--rules", str(tmp_path / "rules.toml")]
    argv += ["--slack-channel", CHANNEL, "--slack-api-url", api_url, "--", *UPSTREAM]
    env = {
        **command_env(),
        "TOOLGUARD_MCP_LOG": str(tmp_path / "upstream.jsonl"),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }
    return StdioTransport(sys.executable, argv, env=env, cwd=str(ROOT), keep_alive=False)


async def message_about(slack: FakeSlack, tool: str) -> dict[str, Any]:  # noqa: F811
    while True:
        with slack.lock:
            found = [
                dict(m)
                for m in slack.messages.values()
                if m["text"] == f"Approval needed: {tool}" and "thread_ts" not in m
            ]
        if found:
            return found[-1]
        await anyio.sleep(0.02)


async def test_a_gateway_call_is_approved_from_slack_and_runs_once(
    tmp_path: Path,
    slack: FakeSlack,  # noqa: F811
) -> None:
    port = free_port()
    actions = f"http://127.0.0.1:{port}/hitl/slack/actions"
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        client = fastmcp.Client(gateway(tmp_path, port, slack.url))
        async with client, anyio.create_task_group() as tasks:

            async def call() -> None:
                results.append(await client.call_tool("delete_file", {"path": "notes.txt"}))

            tasks.start_soon(call)
            message = await message_about(slack, "delete_file")
            approve = button("U0ALICE", "toolguard_approve", message)
            async with httpx.AsyncClient(timeout=10) as http:
                body, headers = signed(approve, secret="wrong-secret")  # noqa: S106 - forged
                forged = await http.post(actions, content=body, headers=headers)
                assert not results
                body, headers = signed(approve)
                first = await http.post(actions, content=body, headers=headers)
                second = await http.post(actions, content=body, headers=headers)  # a replay
            while not results:  # noqa: ASYNC110 - the call's own task ends it
                await anyio.sleep(0.02)
            deadline = time.monotonic() + 10
            while not any(b["ts"] == message["ts"] for b in slack.of("chat.update")):
                assert time.monotonic() < deadline
                await anyio.sleep(0.05)
    assert (forged.status_code, first.status_code, second.status_code) == (401, 200, 200)
    assert results[0].is_error is False
    log = tmp_path / "upstream.jsonl"
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"tool": "delete_file", "args": {"path": "notes.txt"}}
    ]
    (update,) = [b for b in slack.of("chat.update") if b["ts"] == message["ts"]]
    assert update["text"].startswith("Decided: delete_file. Decided by alice at ")
    assert update["text"].endswith(": approved (delete_file).")
