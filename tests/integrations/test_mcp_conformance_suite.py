"""The official MCP conformance suite's 32 server scenarios, through ``toolguard mcp-proxy``.

The suite (``@modelcontextprotocol/conformance`` in ``tests/js``, run by Node
22) is run against its own reference "everything" server
(``tests/js/everything-server``) directly, as the baseline: should a scenario
fail there, the suite itself failed and the test says so. Then against
``toolguard mcp-proxy --listen`` in front of that server (``--upstream-url``;
every tool allowed by a rules file, so only the protocol is measured): all 32
pass. The reference server speaks streamable HTTP only (it cannot run over
stdio), so no stdio upstream is measured here; the gateway's own tests with a
Python upstream cover stdio.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import command_env, free_port
from tests.node import JS, MODULES, node

ROOT = Path(__file__).resolve().parents[2]
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SERVER = JS / "everything-server" / "everything-server.ts"
SCENARIOS = 32
LIMIT = 60  # seconds: the bound of each wait and of each run of the suite


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` and everything it started (its own process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def _listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until something accepts connections on ``port`` (bounded)."""
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline and process.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"nothing listens on 127.0.0.1:{port} (exit code {process.poll()})")


def _first_line(stream: IO[bytes] | None) -> str:
    """The next line of ``stream``, read within :data:`LIMIT` seconds."""
    assert stream is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout=LIMIT)
    return lines[0].decode() if lines else ""


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    """The reference server's MCP URL, served by Node for the module."""
    binary = node("@modelcontextprotocol/conformance", "tsx")
    port = free_port()
    process = subprocess.Popen(
        [binary, str(MODULES / "tsx" / "dist" / "cli.mjs"), str(SERVER)],
        cwd=JS,
        env={**command_env(), "PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _listening(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def gateway(everything: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``toolguard mcp-proxy --listen`` in front of the reference server; its MCP URL."""
    tmp = tmp_path_factory.mktemp("conformance")
    rules = tmp / "allow.toml"
    rules.write_text('[rules]\nallow = ["*"]\n', encoding="utf-8")
    listen = f"http://127.0.0.1:{free_port()}/mcp"
    argv = [
        *("--db", str(tmp / "proxy.sqlite3"), "--port", str(free_port())),
        *("--listen", listen, "--no-auth", "--rules", str(rules), "--upstream-url", everything),
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "toolguard", "mcp-proxy", *argv],
        cwd=ROOT,
        env=command_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _first_line(process.stderr)  # --no-auth's warning
        status = _first_line(process.stderr)
        assert status.startswith(f"toolguard mcp-proxy: MCP {listen} | "), status
        yield listen
    finally:
        _stop(process)


def run_suite(url: str, out: Path) -> dict[str, list[str]]:
    """Run the suite's server scenarios against ``url``; each scenario's failed checks."""
    binary = node("@modelcontextprotocol/conformance")
    command = [binary, str(SUITE), "server", "--url", url, "--suite", "all", "-o", str(out)]
    subprocess.run(command, cwd=JS, capture_output=True, timeout=LIMIT, check=False)
    results: dict[str, list[str]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = checks.parent.name.removeprefix("server-").rsplit("-", 6)[0]
        failed = [
            f"{check['id']}: {check.get('errorMessage')}"
            for check in json.loads(checks.read_text(encoding="utf-8"))
            if check["status"] == "FAILURE"
        ]
        results[scenario] = failed
    return results


@pytest.fixture(scope="module")
def runs(
    everything: str, gateway: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, list[str]]]:
    """The suite run directly and through the gateway, both at once (each scenario's failures)."""
    out = tmp_path_factory.mktemp("suite")
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(run_suite, everything, out / "direct")
        through = pool.submit(run_suite, gateway, out / "gateway")
        return {"direct": direct.result(), "gateway": through.result()}


def test_the_suite_passes_against_its_reference_server(
    runs: dict[str, dict[str, list[str]]],
) -> None:
    results = runs["direct"]
    failed = {name: checks for name, checks in results.items() if checks}
    if len(results) != SCENARIOS or failed:
        pytest.fail(
            f"the conformance suite itself failed against its reference server"
            f" ({len(results)} scenarios run, failed: {failed})"
        )


def test_every_scenario_passes_through_the_gateway(runs: dict[str, dict[str, list[str]]]) -> None:
    results = runs["gateway"]
    assert {name: checks for name, checks in results.items() if checks} == {}
    assert len(results) == SCENARIOS
