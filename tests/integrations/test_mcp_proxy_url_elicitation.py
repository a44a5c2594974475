"""URL-mode elicitation: the MCP client is asked to open the review on the approval page.

``toolguard mcp-proxy --ask-by-url`` over stdio, in front of
``tests/integrations/mcp_passthrough_upstream.py``, reviewers signing in with
``--tokens``. The client is the MCP Python SDK's ``Client`` (``mcp`` 2.3, whose
``ClientSession`` declares form and URL elicitation for an elicitation
callback). Its user "opens" the URL it is given with a signed-in HTTP client
and decides there; the call then answers, after
``notifications/elicitation/complete``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402
from toolguard._gateway.asking import URL_QUESTION  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_passthrough_upstream"]
LIMIT = 30  # seconds: the bound of every wait
TOKEN = "alice-token-5b1e0c"  # noqa: S105 - a test value


class User:
    """The client's user: answers each URL question with ``action`` and keeps what it saw."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.asked: list[Any] = []
        self.completed: list[str] = []

    async def ask(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action=self.action)  # type: ignore[arg-type]

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


@asynccontextmanager
async def gateway(tmp: Path, user: User) -> AsyncIterator[tuple[Client, str, Path]]:
    """A client of ``mcp-proxy --ask-by-url``; the approval page's URL; the runs' log."""
    tokens = tmp / "tokens"
    tokens.write_text(f"alice sha256:{hashlib.sha256(TOKEN.encode()).hexdigest()}\n")
    port = free_port()
    log = tmp / "runs.jsonl"
    argv = [
        *("-m", "toolguard", "mcp-proxy", "--db", str(tmp / "proxy.sqlite3")),
        *("--port", str(port), "--tokens", str(tokens), "--ask-by-url", "--", *UPSTREAM),
    ]
    params = StdioServerParameters(
        command=sys.executable,
        args=argv,
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(log)},
        cwd=str(ROOT),
    )
    async with Client(
        params, mode="legacy", elicitation_callback=user.ask, message_handler=user.message
    ) as client:
        yield client, f"http://127.0.0.1:{port}", log


def runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def asked(user: User) -> Any:
    with anyio.fail_after(LIMIT):
        while not user.asked:  # noqa: ASYNC110 - filled by the client's callback
            await anyio.sleep(0.02)
    return user.asked[0]


async def test_the_url_opens_the_review_a_refusal_cancels_it_deciding_there_completes_it(
    tmp_path: Path,
) -> None:
    user = User("decline")
    signed_in = {"Authorization": f"Bearer {TOKEN}"}
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with gateway(tmp_path, user) as (client, page, log):
            declined = await client.call_tool("deploy", {"tag": "n"})
            refused = user.asked.pop()
            user.action = "accept"
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await client.call_tool("deploy", {"tag": "u"}))

                tg.start_soon(call)
                question = await asked(user)
                async with httpx.AsyncClient(timeout=LIMIT, headers=signed_in) as http:
                    opened = await http.get(question.url)
                    thread_id = question.url.rpartition("?thread=")[2]
                    thread = (await http.get(f"{page}/hitl/threads/{thread_id}")).json()
                    [request] = thread["pending_review"]["action_requests"]
                    review_id = thread["review_id"]
                    decision = {
                        "thread_id": thread_id,
                        "review_id": review_id,
                        "decisions": [{"type": "approve"}],
                    }
                    assert runs(log) == []  # nothing ran before the decision
                    decided = await http.post(f"{page}/hitl/review", json=decision)
    # a user who would not open the page: the review is cancelled, nothing runs
    assert declined.is_error is True
    cancelled = (
        "The review of this action was cancelled: The user declined to approve the call to"
        " `deploy`. It was not executed."
    )
    assert [block.text for block in declined.content] == [cancelled]
    # the one who opens it: the URL is the review, decided there by a signed-in reviewer
    assert question == types.ElicitRequestURLParams(
        message=URL_QUESTION.format(name="deploy", review_id=review_id),
        url=f"{page}/?thread={thread_id}",
        elicitation_id=thread_id,
    )
    assert (opened.status_code, opened.headers["content-type"]) == (
        200,
        "text/html; charset=utf-8",
    )
    assert (request["name"], request["args"]) == ("deploy", {"tag": "u"})
    assert decided.status_code == 200
    assert user.completed == [refused.elicitation_id, thread_id]
    [result] = results
    text = json.dumps({"meta": {}, "tag": "u", "tool": "deploy"}, sort_keys=True)
    assert (result.is_error, [block.text for block in result.content]) == (False, [text])
    assert runs(log) == [{"tool": "deploy", "args": {"tag": "u"}}]  # once
