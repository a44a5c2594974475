"""No gateway secret reaches the upstream server or a page.

The upstream command gets the gateway's environment without the ``--token-env`` variable and
toolguard's own settings; the status line, ``GET /hitl/info`` (which the page shows) and the
sign-in link's runtime file name the upstream by its whole command line with every credential
hidden. One ``toolguard mcp-proxy --listen`` process in front of
``tests/integrations/mcp_roots_upstream.py`` started through ``env NAME=VALUE``, as the GitHub
server's documented invocation does; a real MCP client over streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

import anyio
import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("uvicorn")

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402
from toolguard._gateway.starting import upstream_environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30  # seconds: the bound of every wait
TOKEN = "listen-token-3b7e91d0c4"  # noqa: S105 - test values, none of them a real secret
GITHUB = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
JUDGE_KEY = "sk-test-judge-key-not-real"


def test_the_upstream_environment_leaves_out_the_gateways_secrets() -> None:
    gateway = {
        "PATH": "/usr/bin",
        "TG_TOKEN": TOKEN,  # --token-env TG_TOKEN
        "TOOLGUARD_LANG": "id",
        "TOOLGUARD_MODEL": "gpt-4.1-mini",
        "TOOLGUARD_RUNTIME_DIR": "/run/user/1000",
        "TOOLGUARD_MCP_TOKEN": "another-token",
        "TOOLGUARD_POSTGRES_DSN": "postgresql://app:pw@db/app",
        "toolguard_api_key": "k",
        "TOOLGUARD_MCP_LOG": "/var/log/upstream.jsonl",
        "GITHUB_PERSONAL_ACCESS_TOKEN": GITHUB,
        "OPENAI_API_KEY": JUDGE_KEY,
    }
    assert upstream_environment(gateway, "TG_TOKEN") == {
        "PATH": "/usr/bin",
        "TOOLGUARD_MCP_LOG": "/var/log/upstream.jsonl",
        "GITHUB_PERSONAL_ACCESS_TOKEN": GITHUB,
        "OPENAI_API_KEY": JUDGE_KEY,
    }
    assert upstream_environment({"A": "1"}) == {"A": "1"}


def _line(stream: IO[bytes] | None) -> str:
    assert stream is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout=LIMIT)
    return lines[0].decode() if lines else ""


async def test_the_upstream_gets_no_gateway_secret_and_every_page_hides_its_credentials(
    tmp_path: Path,
) -> None:
    port, listen_port = free_port(), free_port()
    mcp_url = f"http://127.0.0.1:{listen_port}/mcp"
    upstream = [
        "env",
        f"GITHUB_PERSONAL_ACCESS_TOKEN={GITHUB}",
        sys.executable,
        "-m",
        "tests.integrations.mcp_roots_upstream",
        "--api-key",
        "k-123",
    ]
    env = {
        **command_env(),
        "TG_TOKEN": TOKEN,
        "TOOLGUARD_LANG": "en",
        "TOOLGUARD_MCP_TOKEN": "kept-away",
        "OPENAI_API_KEY": JUDGE_KEY,
        "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl"),
    }
    argv = [
        "mcp-proxy", "--db", str(tmp_path / "p.sqlite3"), "--port", str(port), "--no-auth",
        "--listen", mcp_url, "--token-env", "TG_TOKEN", "--", *upstream,
    ]  # fmt: skip
    shown = (
        f"env 'GITHUB_PERSONAL_ACCESS_TOKEN=***' {sys.executable} -m"
        " tests.integrations.mcp_roots_upstream --api-key '***'"
    )
    with subprocess.Popen(  # noqa: ASYNC220 - started once, read by threads
        [sys.executable, "-m", "toolguard", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        try:
            _line(process.stderr)  # --no-auth's warning
            status = _line(process.stderr)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            with anyio.fail_after(LIMIT):
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=LIMIT) as http2,
                    Client(streamable_http_client(mcp_url, http_client=http2)) as client,
                    httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
                ):
                    names = [
                        "TG_TOKEN", "TOOLGUARD_LANG", "TOOLGUARD_MCP_TOKEN",
                        "GITHUB_PERSONAL_ACCESS_TOKEN", "OPENAI_API_KEY",
                    ]  # fmt: skip
                    seen = await client.call_tool("environment", {"names": names})
                    info = (await http.get("/hitl/info")).json()
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=LIMIT)
    assert status == (
        f"toolguard mcp-proxy: MCP {mcp_url} | approval page http://127.0.0.1:{port}/"
        f" | db: {tmp_path / 'p.sqlite3'} | ttl: 300s | upstream: {shown}\n"
    )
    assert json.loads(seen.content[0].text) == {  # type: ignore[union-attr]
        "TG_TOKEN": None,
        "TOOLGUARD_LANG": None,
        "TOOLGUARD_MCP_TOKEN": None,
        "GITHUB_PERSONAL_ACCESS_TOKEN": GITHUB,  # given to the upstream by its own command
        "OPENAI_API_KEY": JUDGE_KEY,  # passed on: documented
    }
    assert info["server"] == {
        "target": shown,
        "name": "toolguard-roots-upstream",
        "version": None,  # the test server gives an empty version
        "title": None,
    }
    assert GITHUB not in json.dumps(info)
