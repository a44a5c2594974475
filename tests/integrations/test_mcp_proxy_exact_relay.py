"""An exact relay: the upstream's request made while it serves a call goes to the client whose
call it is, even when two clients make the same call (tool and arguments) at once and a
reviewer approves both on the page; each answer becomes its own call's result.

``toolguard mcp-proxy --listen`` on 127.0.0.1 in front of
``tests/integrations/mcp_roots_upstream.py``, whose ``summarise`` (it needs approval) asks its
client's model (``sampling/createMessage``, related to the call); two real MCP clients over
streamable HTTP, each model answering with its own name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, types  # noqa: E402

from .test_mcp_proxy_cancel_started import listed  # noqa: E402
from .test_mcp_proxy_roots import LIMIT, listening, over_http  # noqa: E402


class Model:
    """A client's model: it answers with its owner's name and keeps what it was asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.asked.extend(m.content.text for m in params.messages)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=self.name), model="m"
        )


async def test_two_clients_racing_the_same_call_each_get_their_own_answer(
    tmp_path: Path,
) -> None:
    ann, bob = Model("ann's model"), Model("bob's model")
    results: dict[str, list[str]] = {}
    with anyio.fail_after(LIMIT):
        async with (
            listening(tmp_path) as (url, page),
            over_http(url, sampling_callback=ann) as first,
            over_http(url, sampling_callback=bob) as second,
            httpx.AsyncClient(base_url=page, timeout=LIMIT) as http,
        ):

            async def call(who: str, client: Client) -> None:
                answer = await client.call_tool("summarise", {"text": "Summarise Q3."})
                results[who] = [block.text for block in answer.content]  # type: ignore[union-attr]

            async with anyio.create_task_group() as calls:
                calls.start_soon(call, "ann", first)
                calls.start_soon(call, "bob", second)
                for review in await listed(http, 2):  # the same call twice: approved together
                    body = {
                        "thread_id": review["thread_id"],
                        "review_id": review["review_id"],
                        "decisions": [{"type": "approve"}],
                    }
                    answered = await http.post("/hitl/review", json=body)
                    assert answered.status_code == 200
    assert results == {"ann": ["model said: ann's model"], "bob": ["model said: bob's model"]}
    assert (ann.asked, bob.asked) == (["Summarise Q3."], ["Summarise Q3."])
