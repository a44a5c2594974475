"""The approval page shows an approved call running, then its result (a real headless Chromium).

``toolguard mcp-proxy`` (a process, ``--no-auth``) in front of
``tests/integrations/mcp_roots_upstream.py``; a real MCP client over stdio, in a thread of
its own, calls ``slow_write`` (2 seconds); the reviewer approves it on the page with the
keyboard: the decision answers at once, the card reads ``running`` while the tool runs, then
``executed`` with its result.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

pytest.importorskip("mcp")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402

from tests.helpers import (  # noqa: E402
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    browser,
    command_env,
    free_port,
    tab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = ["browser", "tab"]  # fixtures, used by name

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=TIMEOUT_MS)

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 60


class Calling:
    """A real MCP client over stdio in a thread of its own, making one call through the gateway."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        self.params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3"),
                "--port", str(port), "--no-auth",
                "--", sys.executable, "-m", "tests.integrations.mcp_roots_upstream",
            ],
            env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl")},
            cwd=str(ROOT),
        )  # fmt: skip
        self.result: list[Any] = []
        self.seen = threading.Event()  # the page showed the result: the client may close
        self.thread = threading.Thread(target=anyio.run, args=(self._call,), daemon=True)

    async def _call(self) -> None:
        with anyio.fail_after(LIMIT):
            async with Client(self.params, mode="legacy") as client:
                self.result.append(await client.call_tool("slow_write", {"seconds": 2}))
                await anyio.to_thread.run_sync(self.seen.wait, LIMIT)  # the gateway stays


@pytest.fixture
def calling(tmp_path: Path) -> Iterator[tuple[Calling, str]]:
    port = free_port()
    running = Calling(tmp_path, port)
    running.thread.start()
    try:
        yield running, f"http://127.0.0.1:{port}/"
    finally:
        running.seen.set()
        running.thread.join(timeout=LIMIT)


def test_the_page_shows_the_approved_call_running_then_its_result(
    tab: Page,
    calling: tuple[Calling, str],
) -> None:
    client, url = calling
    for _ in range(100):  # the gateway starts (with its upstream) in the client's thread
        try:
            tab.goto(url)
            break
        except sync_api.Error:
            tab.wait_for_timeout(200)
    item = tab.get_by_test_id("queue-item")
    expect(item).to_have_count(1)
    item.focus()
    tab.keyboard.press("Enter")
    card = tab.get_by_test_id("approval-card")
    expect(card).to_have_count(1)
    card.focus()
    tab.keyboard.press("a")  # approve
    status = tab.get_by_test_id("call-status")
    expect(status).to_have_text("running")
    expect(status).to_have_text("executed")
    expect(tab.get_by_test_id("mcp-text")).to_have_text("written")
    client.seen.set()
    client.thread.join(timeout=LIMIT)
    assert [block.text for block in client.result[0].content] == ["written"]
