"""Two ``toolguard mcp-proxy`` processes on one throw-away PostgreSQL database.

Each gateway starts its own upstream server (logging what it runs to its own
file). A call waiting in gateway A, approved on gateway B's page, runs once,
in A, and its answer reaches A's client. The database is the tests'
PostgreSQL (``TOOLGUARD_POSTGRES_DSN``), in a schema of this test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("psycopg")

from mcp import Client, StdioServerParameters  # noqa: E402
from psycopg import sql  # noqa: E402

from tests.helpers import admin_execute, postgres_dsn  # noqa: E402

from .test_mcp_proxy import ROOT, UPSTREAM, free_port  # noqa: E402

LIMIT = 60


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    """The tests' PostgreSQL in a schema of its own (dropped afterwards)."""
    base = postgres_dsn()
    schema = f"tg_gateway_{uuid.uuid4().hex[:12]}"
    await admin_execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        await admin_execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def gateway_args(dsn: str, port: int) -> list[str]:
    return [
        "-m",
        "toolguard",
        "mcp-proxy",
        "--db",
        dsn,
        "--port",
        str(port),
        "--ttl",
        "60",
        "--no-auth",  # the test's own HTTP client decides on the page
        "--",
        *UPSTREAM,
    ]


def env(log: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "TOOLGUARD_MCP_LOG": str(log),
    }


def ran(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def gateway_b(dsn: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Gateway B: its page's address and its upstream's log (no MCP client: stdin stays open)."""
    port, log = free_port(), tmp_path / "b.jsonl"
    process = subprocess.Popen(
        [sys.executable, *gateway_args(dsn, port)],
        cwd=ROOT,
        env=env(log),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
        assert b"Traceback" not in errors


async def page_ready(page: str) -> None:
    async with httpx.AsyncClient(base_url=page) as http:
        while True:
            try:
                if (await http.get("/hitl/reviews")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.05)


async def test_a_call_waiting_in_a_approved_on_bs_page_runs_once_in_a(
    dsn: str, gateway_b: tuple[str, Path], tmp_path: Path
) -> None:
    page_b, log_b = gateway_b
    log_a = tmp_path / "a.jsonl"
    port_a = free_port()
    params = StdioServerParameters(
        command=sys.executable, args=gateway_args(dsn, port_a), env=env(log_a), cwd=str(ROOT)
    )
    with anyio.fail_after(LIMIT):
        await page_ready(page_b)
        async with Client(params, mode="legacy") as client:
            answers: list[Any] = []

            async def call() -> None:
                answers.append(await client.call_tool("delete_file", {"path": "notes.txt"}))

            async with (
                anyio.create_task_group() as tasks,
                httpx.AsyncClient(base_url=page_b, timeout=LIMIT) as http,
            ):
                tasks.start_soon(call)
                while True:  # B's page lists the call A holds
                    reviews = (await http.get("/hitl/reviews")).json()["reviews"]
                    if reviews:
                        break
                    await anyio.sleep(0.05)
                [review] = reviews
                assert review["pending_review"]["action_requests"][0]["name"] == "delete_file"
                decided = await http.post(
                    "/hitl/review",
                    json={
                        "thread_id": review["thread_id"],
                        "review_id": review["review_id"],
                        "decisions": [{"type": "approve"}],
                    },
                )
                assert decided.status_code == 200, decided.text
                assert decided.json()["thread_id"] == review["thread_id"]
                again = await http.post(
                    f"http://127.0.0.1:{port_a}/hitl/review",
                    json={
                        "thread_id": review["thread_id"],
                        "review_id": review["review_id"],
                        "decisions": [{"type": "approve"}],
                    },
                )
                assert again.status_code == 400
        [answer] = answers
        assert answer.is_error is False
        assert [ran(log_a), ran(log_b)] == [
            [{"tool": "delete_file", "args": {"path": "notes.txt"}}],
            [],
        ]
