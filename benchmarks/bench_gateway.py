"""The MCP gateway's cost: the hop of a call that needs no review, and a ``--listen`` load run.

**The hop.** One process holds two MCP clients over stdio: one to a minimal
upstream server directly, one to ``toolguard mcp-proxy`` in front of the
same server (a process of its own, started the same way). Their calls of a
read-only tool alternate (direct, gateway, direct...), so both see the same
machine; the figures are the medians over ``--calls`` calls each, and their
ratio.

**The load run.** ``toolguard mcp-proxy --listen`` (streamable HTTP) in front of the
same server: ``--clients`` clients each make ``--reads`` read calls while
``--held`` calls of a tool that needs approval wait; once all of them wait,
they are approved together on the approval page (``POST /hitl/review``, all
at once). It prints the read calls' p50 and p99, how many calls failed, and
how many times the upstream ran each held call (each must run exactly once).

Run from the repository root::

    .venv/bin/python benchmarks/bench_gateway.py
    .venv/bin/python benchmarks/bench_gateway.py --calls 20 --clients 2 --reads 5 --held 3

Nothing is asserted: it prints figures (recorded in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent

UPSTREAM = '''\
"""A minimal MCP server over stdio: a read-only clock, and a write that needs approval."""
import json, os, sys
from datetime import datetime, timezone

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    {"name": "get_time", "description": "The current time.",
     "inputSchema": {"type": "object", "properties": {"zone": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "write_note", "description": "Write a note.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
]
LOG = os.environ.get("BENCH_GATEWAY_LOG")


async def list_tools(ctx, params):
    return types.ListToolsResult.model_validate({"tools": TOOLS})


async def call_tool(ctx, params):
    args = params.arguments or {}
    if params.name == "write_note" and LOG:
        with open(LOG, "a", encoding="utf-8") as file:
            file.write(json.dumps(args) + "\\n")
    text = datetime.now(timezone.utc).isoformat() if params.name == "get_time" else "written"
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def main():
    server = Server("bench-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _gateway_command(upstream: Path, db: Path, port: int, listen: str | None = None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "toolguard",
        "mcp-proxy",
        "--no-auth",
        "--port",
        str(port),
        "--db",
        str(db),
        "--ttl",
        "600",
    ]
    if listen is not None:
        command += ["--listen", listen]
    return [*command, "--", sys.executable, str(upstream)]


@asynccontextmanager
async def _stdio_client(command: Sequence[str], env: dict[str, str]) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=ROOT)
    async with Client(params, mode="legacy") as client:
        yield client


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


RELAY = '''\
"""The floor of any process in the middle: pass each line on, rewriting tools/call ids."""
import asyncio, json, sys


async def main():
    loop = asyncio.get_running_loop()
    upstream = await asyncio.create_subprocess_exec(
        *sys.argv[1:], stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout.buffer
    )
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    ids, count = {}, 0

    async def answers():
        while line := await upstream.stdout.readline():
            message = json.loads(line)
            if isinstance(message.get("id"), str) and message["id"] in ids:
                message["id"] = ids.pop(message["id"])
                line = (json.dumps(message) + "\\n").encode()
            out.write(line)

    task = asyncio.create_task(answers())
    while line := await reader.readline():
        message = json.loads(line)
        if message.get("method") == "tools/call":
            count += 1
            ids[f"relay-{count}"], message["id"] = message["id"], f"relay-{count}"
            line = (json.dumps(message) + "\\n").encode()
        upstream.stdin.write(line)
    upstream.stdin.close()
    await upstream.wait()
    task.cancel()


asyncio.run(main())
'''


async def hop(calls: int, work: Path, *, floor: bool = False) -> dict[str, Any]:
    """Median latency of a read call directly and through the gateway (and, with ``floor``,
    through a bare relay), alternated."""
    upstream = work / "upstream.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    port = _free_port()
    paths = {
        "direct": [sys.executable, str(upstream)],
        "gateway": _gateway_command(upstream, work / "hop.sqlite3", port),
    }
    if floor:
        (work / "relay.py").write_text(RELAY, encoding="utf-8")
        paths["relay"] = [sys.executable, str(work / "relay.py"), sys.executable, str(upstream)]
    times: dict[str, list[float]] = {name: [] for name in paths}
    with anyio.fail_after(120 + calls):
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(_stdio_client(command, env))
                for name, command in paths.items()
            }
            for client in clients.values():  # warm up every path
                for _ in range(10):
                    await client.call_tool("get_time", {"zone": "UTC"})
            for _ in range(calls):
                for name, client in clients.items():
                    started = time.perf_counter()
                    result = await client.call_tool("get_time", {"zone": "UTC"})
                    times[name].append(time.perf_counter() - started)
                    if result.is_error:
                        msg = f"a read call failed: {result}"
                        raise RuntimeError(msg)
    medians = {name: statistics.median(values) for name, values in times.items()}
    figures: dict[str, Any] = {
        "calls": calls,
        "direct_median_ms": _ms(medians["direct"]),
        "gateway_median_ms": _ms(medians["gateway"]),
        "ratio": round(medians["gateway"] / medians["direct"], 3),
    }
    if floor:
        figures["relay_median_ms"] = _ms(medians["relay"])
        figures["relay_ratio"] = round(medians["relay"] / medians["direct"], 3)
    return figures


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


async def _wait_for_page(page: str, process: subprocess.Popen[bytes]) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            if process.poll() is not None:
                msg = "the gateway stopped during start-up"
                raise RuntimeError(msg)
            try:
                if (await http.get(f"{page}hitl/reviews")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.05)
    msg = "the gateway's page did not answer"
    raise RuntimeError(msg)


class _Load:
    """One load run's clients and what they saw."""

    def __init__(self, listen: str, page: str, reads: int, held: int) -> None:
        self.listen, self.page, self.reads, self.held = listen, page, reads, held
        self.read_times: list[float] = []
        self.errors: list[str] = []
        self.answered: list[bool] = []

    async def reader(self) -> None:
        from mcp import Client

        async with Client(self.listen) as client:
            for _ in range(self.reads):
                started = time.perf_counter()
                try:
                    result = await client.call_tool("get_time", {"zone": "UTC"})
                except Exception as exc:  # counted, never hidden
                    self.errors.append(repr(exc))
                    continue
                self.read_times.append(time.perf_counter() - started)
                if result.is_error:
                    self.errors.append("read call answered isError")

    async def writer(self, index: int) -> None:
        from mcp import Client

        try:
            async with Client(self.listen, read_timeout_seconds=600) as client:
                result = await client.call_tool("write_note", {"text": f"note {index}"})
        except Exception as exc:  # counted, never hidden
            self.errors.append(repr(exc))
            return
        self.answered.append(not result.is_error)
        if result.is_error:
            self.errors.append("held call answered isError")

    async def approve_all(self) -> None:
        """Once every held call waits, approve them all at once on the page."""
        async with httpx.AsyncClient(timeout=60) as http:
            while True:
                waiting = (await http.get(f"{self.page}hitl/reviews")).json().get("reviews", [])
                if len(waiting) >= self.held:
                    break
                await anyio.sleep(0.05)

            async def approve(item: dict[str, Any]) -> None:
                answer = await http.post(
                    f"{self.page}hitl/review",
                    json={
                        "thread_id": item["thread_id"],
                        "review_id": item["review_id"],
                        "decisions": [{"type": "approve"}],
                    },
                )
                if answer.status_code != 200:
                    self.errors.append(f"approve answered {answer.status_code}")

            async with anyio.create_task_group() as together:
                for item in waiting:
                    together.start_soon(approve, item)

    async def run(self, clients: int) -> float:
        """Every client at once; the seconds it took."""
        started = time.perf_counter()
        with anyio.fail_after(600):
            async with anyio.create_task_group() as tasks:
                for index in range(self.held):
                    tasks.start_soon(self.writer, index)
                if self.held:
                    tasks.start_soon(self.approve_all)
                for _ in range(clients):
                    tasks.start_soon(self.reader)
        return time.perf_counter() - started


async def load(clients: int, reads: int, held: int, work: Path) -> dict[str, Any]:
    """A --listen gateway under ``clients`` x ``reads`` read calls and ``held`` held calls."""
    upstream = work / "upstream.py"
    log = work / "held.jsonl"
    port, mcp_port = _free_port(), _free_port()
    listen = f"http://127.0.0.1:{mcp_port}/mcp"
    command = _gateway_command(upstream, work / "load.sqlite3", port, listen)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_GATEWAY_LOG": str(log)}
    page = f"http://127.0.0.1:{port}/"
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before the measured part
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    run = _Load(listen, page, reads, held)
    try:
        await _wait_for_page(page, process)
        elapsed = await run.run(clients)
    finally:
        process.terminate()
        process.wait(30)
    lines = log.read_text().splitlines() if log.exists() else []
    ran = [json.loads(line)["text"] for line in lines]
    times = run.read_times
    return {
        "clients": clients,
        "reads_per_client": reads,
        "read_calls": len(times),
        "read_p50_ms": _ms(_percentile(times, 0.5)) if times else None,
        "read_p99_ms": _ms(_percentile(times, 0.99)) if times else None,
        "held_calls": held,
        "held_answered": sum(run.answered),
        "held_runs_upstream": len(ran),
        "every_held_call_once": sorted(ran) == sorted(f"note {i}" for i in range(held)),
        "errors": len(run.errors),
        "first_error": run.errors[0] if run.errors else None,
        "seconds": round(elapsed, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="alternated calls per path")
    parser.add_argument("--clients", type=int, default=20, help="--listen clients")
    parser.add_argument("--reads", type=int, default=100, help="read calls per client")
    parser.add_argument("--held", type=int, default=50, help="held calls approved together")
    parser.add_argument("--skip-load", action="store_true", help="measure the hop only")
    parser.add_argument(
        "--floor", action="store_true", help="also time a bare relay in the middle (the floor)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as folder:
        work = Path(folder)
        (work / "upstream.py").write_text(UPSTREAM, encoding="utf-8")
        figures = {"hop": anyio.run(functools.partial(hop, args.calls, work, floor=args.floor))}
        print(json.dumps({"hop": figures["hop"]}), flush=True)
        if not args.skip_load:
            figures["load"] = anyio.run(load, args.clients, args.reads, args.held, work)
            print(json.dumps({"load": figures["load"]}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
