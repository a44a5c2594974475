"""HTTP load test of toolguard's chat API: many concurrent conversations over real TCP.

The app of :func:`toolguard.http.create_app` runs under uvicorn in its own
server **process** (one worker, on 127.0.0.1, on a port the operating system
picks), so the client and the server do not share a GIL. The client is
this process: C workers, each with its own ``httpx.AsyncClient`` (one
keep-alive connection), run C conversations at once, N in total, and every
conversation does:

1. ``POST /hitl/chat {"message": ...}`` -> the model proposes one guarded
   ``send_email`` call; the answer must be the pending review;
2. ``POST /hitl/review {"thread_id", "decisions": [{"type": "approve"}], "review_id"}``
   -> the tool runs, the model answers; the answer must be the reply, which
   quotes the tool's result for this very conversation;
3. ``GET /hitl/threads/{id}`` -> the thread must be ``idle`` with exactly one
   action, ``executed``, with the proposed arguments, and a history of
   user / assistant / tool / assistant.

The server's model is a small scripted one (a user message -> one
``send_email`` call whose ``body`` is the user's text; a tool result -> the
text ``Done. <result>``), so only toolguard, FastAPI, uvicorn and the store
are measured, not an LLM. The server counts the runs of ``send_email`` per
``body``; at the end the client fetches the counts (``GET /bench/stats``, a
route this script adds) and checks that every conversation's tool ran
**exactly once** and nothing else ran.

It runs with ``SQLiteStore`` (a file in a temporary folder) and, when a DSN
is given with ``--postgres`` or ``TOOLGUARD_POSTGRES_DSN``, with
``toolguard.postgres.PostgresStore`` (in a table of its own, dropped at the
end), one server process per store, and prints the stores side by side:
throughput (conversations/s, requests/s), the server's and the client's CPU
use, and p50/p90/p99 latency per endpoint. A reference row times ``3N``
requests to ``GET /bench/ping`` (another route of this script, no toolguard
code) on the SQLite server: the floor that uvicorn, FastAPI and httpx set.

With ``--workers N`` (N > 1) every store gets N server processes that
accept on the one listening socket (as uvicorn's own ``--workers`` does) and
share the one SQLite file or PostgreSQL table; the server CPU is then the
sum over the N processes (from ``/proc``), and the tool runs of all of them
are counted together (every process appends each run to one file).

Bounded: each store gets ``C`` untimed warm-up conversations plus ``N``
timed ones (3 requests each, plus a few requests to ``/bench/stats``; ``3N``
pings for the reference), the
whole run stops after ``--timeout`` seconds, and only 127.0.0.1 is used. The
exit status is 0 when every conversation was verified, 1 otherwise.

Run from the repository root::

    .venv/bin/python benchmarks/load_http.py                 # 32 at once, 400 per store
    .venv/bin/python benchmarks/load_http.py --quick --json  # smoke test (4 at once, 12)
    export TOOLGUARD_POSTGRES_DSN="$(bash scripts/start-postgres)"  # adds PostgreSQL
    .venv/bin/python benchmarks/load_http.py --concurrency 64 --conversations 1000
    .venv/bin/python benchmarks/load_http.py --no-postgres   # SQLite only
    .venv/bin/python benchmarks/load_http.py --workers 2     # 2 server processes per store
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import secrets
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx

import toolguard
from toolguard import ModelError, ModelResponse, ReviewedChat, SQLiteStore, ToolCall

if TYPE_CHECKING:
    from fastapi import FastAPI

DEFAULT_CONCURRENCY = 32
DEFAULT_CONVERSATIONS = 400
DEFAULT_TIMEOUT = 120.0
QUICK = {"concurrency": 4, "conversations": 12}
MAX_CONCURRENCY = 512
MAX_CONVERSATIONS = 100_000
MAX_WORKERS = 16
REQUEST_TIMEOUT = 30.0
"""Seconds one HTTP request may take (httpx's connect/read/write/pool timeouts)."""
STARTUP_TIMEOUT = 30.0
"""Seconds a server process may take to answer its first request."""
HOST = "127.0.0.1"

RECIPIENT = "alice@example.com"
SUBJECT = "Load test"
DESCRIPTION = "Tool `send_email` is awaiting approval"  # the server runs with TOOLGUARD_LANG=en
CONFIG = {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
ENDPOINTS = {
    "chat": "POST /hitl/chat",
    "review": "POST /hitl/review",
    "thread": "GET /hitl/threads/{id}",
    "conversation": "whole conversation (3 requests)",
}
STORE_LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
MAX_SHOWN_FAILURES = 20


# =========================================================================== the server process


def tool_result(body: str) -> str:
    """What the server's ``send_email`` returns for a message body."""
    return f"sent: {body}"


def reply_for(body: str) -> str:
    """The model's final text after ``send_email`` ran for a message body."""
    return f"Done. {tool_result(body)}"


class LoadModel:
    """A scripted model: a user message -> one ``send_email`` call; a tool result -> text."""

    def __init__(self) -> None:
        self._calls = 0

    async def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Answer the last message of the conversation."""
        last = messages[-1]
        if last["role"] == "user":
            self._calls += 1
            args = {"to": RECIPIENT, "subject": SUBJECT, "body": last["content"]}
            call = ToolCall(id=f"call_{self._calls}", name="send_email", args=args)
            return ModelResponse(tool_calls=[call])
        if last["role"] == "tool":
            return ModelResponse(text=f"Done. {last['content']}")
        msg = f"unexpected last message role {last['role']!r}"
        raise ModelError(msg)


def build_server_app(store: Any, runs_fd: int) -> FastAPI:
    """The chat API over ``store``, plus two routes of the benchmark's own.

    ``GET /bench/stats``: this process's id and CPU time; ``GET
    /bench/ping``: ``{"ok": true}``, the reference request that runs no
    toolguard code. Every run of ``send_email`` appends its ``body`` and a
    newline to the file open as ``runs_fd`` (``O_APPEND``: the lines of
    several processes do not mix).
    """
    from toolguard.http import create_app

    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email (counted, not sent).

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        os.write(runs_fd, (body + "\n").encode())
        return tool_result(body)

    chat = ReviewedChat(LoadModel(), [send_email], store=store)
    app = create_app(chat, page=False)

    @app.get("/bench/stats", include_in_schema=False)
    async def stats() -> dict[str, Any]:
        return {"pid": os.getpid(), "cpu_s": time.process_time()}

    @app.get("/bench/ping", include_in_schema=False)
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    return app


def serve(fd: int, store_kind: str, target: str, table: str | None, runs: str) -> None:
    """Serve the app on the listening socket ``fd`` until SIGTERM (a server process)."""
    import uvicorn

    sock = socket.socket(fileno=fd)
    runs_fd = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def main() -> None:
        if store_kind == "postgres":
            from toolguard.postgres import PostgresStore

            store: Any = PostgresStore(target, table=table or "toolguard_threads")
        else:
            store = SQLiteStore(target)
        async with store:
            config = uvicorn.Config(
                build_server_app(store, runs_fd),
                log_level="warning",
                access_log=False,
                lifespan="off",
            )
            await uvicorn.Server(config).serve(sockets=[sock])

    anyio.run(main)


# =========================================================================== the client


@dataclass
class Run:
    """What one store's run measured and checked."""

    store: str
    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in ENDPOINTS}
    )
    failures: list[str] = field(default_factory=list)
    verified: int = 0
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    tool_runs: int = 0
    tool_runs_ok: bool = False


@dataclass
class Reference:
    """The reference: ``GET /bench/ping``, which runs no toolguard code."""

    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    wall_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0


class ConversationError(Exception):
    """A conversation got an answer other than the expected one."""


def _expect(what: str, got: Any, expected: Any) -> None:
    if got != expected:
        msg = f"{what}: expected {expected!r}, got {got!r}"
        raise ConversationError(msg)


def _json(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        msg = f"{what}: HTTP {response.status_code}: {response.text[:300]}"
        raise ConversationError(msg)
    return response.json()


async def conversation(client: httpx.AsyncClient, message: str, run: Run | None) -> None:
    """One conversation: chat -> pending review -> approve -> reply -> thread check.

    Latencies are recorded in ``run`` (``None`` for warm-up conversations).

    Raises:
        ConversationError: an answer was not the expected one.
        httpx.HTTPError: a request failed.
    """
    args = {"to": RECIPIENT, "subject": SUBJECT, "body": message}
    start = time.perf_counter()
    answer = _json(await client.post("/hitl/chat", json={"message": message}), "chat")
    after_chat = time.perf_counter()
    thread_id, review_id = answer.get("thread_id"), answer.get("review_id")
    if not isinstance(thread_id, str) or not isinstance(review_id, str):
        msg = f"chat: no thread_id/review_id in {answer!r}"
        raise ConversationError(msg)
    _expect(
        "chat answer",
        answer,
        {
            "thread_id": thread_id,
            "reply": None,
            "pending_review": {
                "action_requests": [
                    {"name": "send_email", "args": args, "description": DESCRIPTION}
                ],
                "review_configs": [CONFIG],
            },
            "review_id": review_id,
        },
    )
    body = {"thread_id": thread_id, "decisions": [{"type": "approve"}], "review_id": review_id}
    answer = _json(await client.post("/hitl/review", json=body), "review")
    after_review = time.perf_counter()
    _expect(
        "review answer",
        answer,
        {
            "thread_id": thread_id,
            "reply": reply_for(message),
            "pending_review": None,
            "review_id": None,
        },
    )
    thread = _json(await client.get(f"/hitl/threads/{thread_id}"), "thread")
    end = time.perf_counter()
    actions = thread.get("actions") or [{}]
    _expect(
        "thread",
        (
            thread.get("status"),
            thread.get("pending_review"),
            [m.get("role") for m in thread.get("messages", [])],
            [(a.get("name"), a.get("args"), a.get("status"), a.get("decision")) for a in actions],
            [m.get("content") for m in thread.get("messages", [])][-2:],
        ),
        (
            "idle",
            None,
            ["user", "assistant", "tool", "assistant"],
            [("send_email", args, "executed", {"type": "approve"})],
            [tool_result(message), reply_for(message)],
        ),
    )
    if run is not None:
        run.latencies["chat"].append(after_chat - start)
        run.latencies["review"].append(after_review - after_chat)
        run.latencies["thread"].append(end - after_review)
        run.latencies["conversation"].append(end - start)


async def checked_conversation(
    client: httpx.AsyncClient, message: str, run: Run | None
) -> str | None:
    """Run one conversation; ``None`` when it went as expected, else what went wrong."""
    try:
        await conversation(client, message, run)
    except (ConversationError, httpx.HTTPError, ValueError) as exc:
        return f"{message}: {type(exc).__name__}: {exc}"
    return None


async def drive(
    clients: Sequence[httpx.AsyncClient], messages: Sequence[str], run: Run, *, timed: bool
) -> None:
    """Run the conversations of ``messages``, one worker (and one connection) per client."""
    pending: Iterator[str] = iter(messages)

    async def worker(client: httpx.AsyncClient) -> None:
        for message in pending:  # one shared iterator: each message is taken once
            failure = await checked_conversation(client, message, run if timed else None)
            if failure is None:
                run.verified += 1
            else:
                run.failures.append(failure)

    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(worker, client)


async def checked_ping(client: httpx.AsyncClient, reference: Reference) -> bool:
    """One ``GET /bench/ping``, its latency recorded; whether it answered ``{"ok": true}``."""
    start = time.perf_counter()
    try:
        response = await client.get("/bench/ping")
        ok = response.status_code == 200 and response.json() == {"ok": True}
    except (httpx.HTTPError, ValueError):
        return False
    reference.latencies.append(time.perf_counter() - start)
    return ok


async def ping(clients: Sequence[httpx.AsyncClient], requests: int, reference: Reference) -> None:
    """``requests`` times ``GET /bench/ping``, one worker per client (the reference)."""
    pending = iter(range(requests))

    async def worker(client: httpx.AsyncClient) -> None:
        for _ in pending:
            if not await checked_ping(client, reference):
                reference.failures += 1

    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(worker, client)


async def server_stats(client: httpx.AsyncClient) -> dict[str, Any]:
    """The id and CPU time of the server process that answers."""
    response = await client.get("/bench/stats")
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


async def wait_until_ready(
    client: httpx.AsyncClient, servers: Sequence[subprocess.Popen[bytes]]
) -> None:
    """Poll ``/bench/stats`` until a server answers (untimed)."""
    with anyio.fail_after(STARTUP_TIMEOUT):
        while True:
            for server in servers:
                if server.poll() is not None:
                    msg = f"a server process exited with status {server.returncode}"
                    raise RuntimeError(msg)
            try:
                await server_stats(client)
            except httpx.HTTPError:
                await anyio.sleep(0.05)
            else:
                return


def messages_for(store: str, count: int, first: int, nonce: str) -> list[str]:
    """Distinct user messages (and so email bodies), one per conversation."""
    return [f"Tell Alice about load test {nonce} {store} #{i}" for i in range(first, first + count)]


def _proc_cpu_s(pids: Sequence[int]) -> float:
    """The CPU seconds (user + system) of processes ``pids`` so far, from ``/proc``."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15
    return ticks / os.sysconf("SC_CLK_TCK")


async def cpu_s(client: httpx.AsyncClient, servers: Sequence[subprocess.Popen[bytes]]) -> float:
    """The servers' CPU seconds so far: the process's own figure for one, ``/proc`` for more."""
    if len(servers) == 1:
        value: float = (await server_stats(client))["cpu_s"]
        return value
    return _proc_cpu_s([server.pid for server in servers])


def read_runs(path: Path) -> Counter[str]:
    """The tool runs the servers wrote: how often ``send_email`` ran per body."""
    if not path.exists():
        return Counter()
    return Counter(path.read_text(encoding="utf-8").splitlines())


async def measure(
    base_url: str,
    *,
    servers: Sequence[subprocess.Popen[bytes]],
    runs_path: Path,
    store: str,
    concurrency: int,
    conversations: int,
    reference: Reference | None,
) -> Run:
    """Warm up, run the timed conversations, then check the server's tool-run counts.

    With ``reference``, ``3 * conversations`` pings are timed after the
    warm-up, before the conversations.
    """
    run = Run(store=store)
    nonce = secrets.token_hex(4)
    warmup = messages_for(store, min(concurrency, conversations), 0, nonce)
    timed = messages_for(store, conversations, len(warmup), nonce)
    timeout = httpx.Timeout(REQUEST_TIMEOUT)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with contextlib.AsyncExitStack() as stack:
        # One client (one keep-alive connection) per worker: one shared pool of C
        # connections costs httpx about 1.5x the CPU per request at C=32.
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=base_url, limits=limits, timeout=timeout, trust_env=False
                )
            )
            for _ in range(concurrency)
        ]
        await wait_until_ready(clients[0], servers)
        await drive(clients, warmup, run, timed=False)
        if reference is not None:
            before = await cpu_s(clients[0], servers)
            cpu_start, wall_start = time.process_time(), time.perf_counter()
            await ping(clients, 3 * conversations, reference)
            reference.wall_s = time.perf_counter() - wall_start
            reference.client_cpu_s = time.process_time() - cpu_start
            reference.server_cpu_s = await cpu_s(clients[0], servers) - before
        before = await cpu_s(clients[0], servers)
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        await drive(clients, timed, run, timed=True)
        run.wall_s = time.perf_counter() - wall_start
        run.client_cpu_s = time.process_time() - cpu_start
        after = await cpu_s(clients[0], servers)
    run.server_cpu_s = after - before
    runs = dict(read_runs(runs_path))
    run.tool_runs = sum(runs.values())
    expected = dict.fromkeys([*warmup, *timed], 1)
    run.tool_runs_ok = runs == expected
    if not run.tool_runs_ok:
        wrong = sorted(
            (body, runs.get(body, 0))
            for body in set(runs) | set(expected)
            if runs.get(body, 0) != expected.get(body, 0)
        )
        run.failures.append(
            f"tool runs: {len(wrong)} bodies did not run exactly once, e.g. {wrong[:5]!r}"
        )
    return run


# =========================================================================== one store, one server


def start_server(
    store: str, target: str, table: str | None, log: Any, *, runs: Path, workers: int = 1
) -> tuple[list[subprocess.Popen[bytes]], str]:
    """Start ``workers`` server processes on a free 127.0.0.1 port; return them and the URL.

    The listening socket is made here and handed to the children, so there is
    no race for the port and connections queue up until a server accepts
    them; with several workers, each accepts on that one socket.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        sock.listen(2048)
        port = sock.getsockname()[1]
        fd = sock.fileno()
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--serve-fd",
            str(fd),
            "--serve-store",
            store,
            "--serve-target",
            target,
            "--serve-runs",
            str(runs),
        ]
        if table is not None:
            command += ["--serve-table", table]
        env = {**os.environ, "TOOLGUARD_LANG": "en", "PYTHONUNBUFFERED": "1"}
        servers = [
            subprocess.Popen(
                command, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
            )
            for _ in range(workers)
        ]
    return servers, f"http://{HOST}:{port}"


def stop_server(servers: Sequence[subprocess.Popen[bytes]]) -> None:
    """Stop the server processes (SIGTERM, then SIGKILL after 10 s)."""
    for server in servers:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
    for server in servers:
        _wait_or_kill(server)


def _wait_or_kill(server: subprocess.Popen[bytes]) -> None:
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


def drop_table(dsn: str, table: str) -> None:
    """Drop the benchmark's PostgreSQL table."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def postgres_version(dsn: str) -> str | None:
    """The PostgreSQL server's version, or ``None`` when it cannot be asked."""
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except Exception:  # only for the report
        return None
    return None if row is None else str(row[0])


def run_store(
    store: str,
    *,
    dsn: str | None,
    concurrency: int,
    conversations: int,
    deadline: float,
    reference: Reference | None = None,
    workers: int = 1,
) -> Run:
    """``workers`` server processes with ``store``: measure them, then stop them and clean up."""
    with tempfile.TemporaryDirectory(prefix="toolguard-load-") as folder:
        table = None
        if store == "postgres":
            assert dsn is not None
            target = dsn
            table = f"toolguard_load_{os.getpid()}_{secrets.token_hex(4)}"
        else:
            target = str(Path(folder) / "threads.sqlite3")
        log_path = Path(folder) / "server.log"
        with log_path.open("wb") as log:
            runs_path = Path(folder) / "tool_runs.txt"
            servers, base_url = start_server(
                store, target, table, log, runs=runs_path, workers=workers
            )
            try:

                async def main() -> Run:
                    with anyio.fail_after(max(deadline - time.monotonic(), 0.001)):
                        return await measure(
                            base_url,
                            servers=servers,
                            runs_path=runs_path,
                            store=store,
                            concurrency=concurrency,
                            conversations=conversations,
                            reference=reference,
                        )

                return anyio.run(main)
            except BaseException:
                print(f"server log ({STORE_LABELS[store]}):", file=sys.stderr)
                print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
                raise
            finally:
                stop_server(servers)
                if table is not None and dsn is not None:
                    drop_table(dsn, table)


# =========================================================================== report


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile ``p`` (0-100) of ``values``."""
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def latency_summary(values: Sequence[float]) -> dict[str, Any]:
    """Count, p50, p90, p99, max and mean of latencies, in milliseconds."""
    if not values:
        return {
            "count": 0,
            "p50_ms": None,
            "p90_ms": None,
            "p99_ms": None,
            "max_ms": None,
            "mean_ms": None,
        }
    ms = [v * 1000 for v in values]
    return {
        "count": len(ms),
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
    }


def row_for(run: Run, concurrency: int, conversations: int) -> dict[str, Any]:
    """The JSON row of one store's run."""
    warmup = min(concurrency, conversations)
    requests = 3 * conversations
    wall = run.wall_s or float("nan")
    verified = run.verified == conversations + warmup and run.tool_runs_ok and not run.failures
    return {
        "store": run.store,
        "concurrency": concurrency,
        "conversations": conversations,
        "warmup_conversations": warmup,
        "requests": requests,
        "wall_s": round(run.wall_s, 4),
        "conversations_per_s": round(conversations / wall, 2),
        "requests_per_s": round(requests / wall, 2),
        "server_cpu_s": round(run.server_cpu_s, 4),
        "server_cpu_per_request_ms": round(run.server_cpu_s / requests * 1000, 3),
        "server_cpu_share": round(run.server_cpu_s / wall, 3),
        "client_cpu_s": round(run.client_cpu_s, 4),
        "client_cpu_per_request_ms": round(run.client_cpu_s / requests * 1000, 3),
        "client_cpu_share": round(run.client_cpu_s / wall, 3),
        "latency": {name: latency_summary(run.latencies[name]) for name in ENDPOINTS},
        "verified_conversations": run.verified,
        "tool_runs": run.tool_runs,
        "tool_runs_exactly_once": run.tool_runs_ok,
        "failure_count": len(run.failures),
        "failures": run.failures[:MAX_SHOWN_FAILURES],
        "verified": verified,
    }


def reference_row(reference: Reference) -> dict[str, Any]:
    """The JSON summary of the reference pings."""
    count = len(reference.latencies)
    wall = reference.wall_s or float("nan")
    return {
        "request": "GET /bench/ping",
        "requests": count,
        "wall_s": round(reference.wall_s, 4),
        "requests_per_s": round(count / wall, 2),
        "server_cpu_per_request_ms": round(reference.server_cpu_s / max(count, 1) * 1000, 3),
        "server_cpu_share": round(reference.server_cpu_s / wall, 3),
        "client_cpu_per_request_ms": round(reference.client_cpu_s / max(count, 1) * 1000, 3),
        "client_cpu_share": round(reference.client_cpu_s / wall, 3),
        "latency": latency_summary(reference.latencies),
        "failures": reference.failures,
    }


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def environment(dsn: str | None) -> dict[str, Any]:
    """Python, machine and package versions."""
    packages = (
        "toolguard-hitl",
        "fastapi",
        "starlette",
        "uvicorn",
        "h11",
        "httpx",
        "pydantic",
        "anyio",
        "psycopg",
    )
    return {
        "toolguard": toolguard.__version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "server": (
            "asyncio loop, "
            + ("httptools" if importlib.util.find_spec("httptools") else "h11")
            + " HTTP parser"
        ),
        "sqlite": sqlite3.sqlite_version,
        "postgresql": postgres_version(dsn) if dsn is not None else None,
        "versions": {name: _version(name) for name in packages},
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def text_report(data: dict[str, Any]) -> str:
    """The human-readable tables."""
    env, settings = data["environment"], data["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v is not None)
    pg = f", PostgreSQL {env['postgresql']}" if env["postgresql"] else ""
    lines = [
        (
            f"toolguard {env['toolguard']} | {env['implementation']} {env['python']} |"
            f" {env['platform']} | {env['cpus']} CPUs ({env['cpu_model']}),"
            f" load average {env['load_average']}"
        ),
        f"{data['date']} | SQLite {env['sqlite']}{pg} | {versions}",
        (
            f"server: uvicorn ({env['server']}), {settings.get('workers', 1)} worker"
            f" process{'es' if settings.get('workers', 1) > 1 else ''}, on {HOST};"
            " client: httpx.AsyncClient (one connection per conversation slot) in"
            f" another process | {settings['concurrency']} conversations at once,"
            f" {settings['conversations']} timed (+{settings['warmup_conversations']} warm-up)"
            " per store"
        ),
        (
            "conversation = POST /hitl/chat -> POST /hitl/review (approve, with review_id)"
            " -> GET /hitl/threads/{id}"
        ),
        "",
    ]
    rows = data["rows"]
    ref = data["reference"]
    if not rows:
        lines.append(f"no store finished: {data['error']}")
        return "\n".join(lines)
    table = [
        (
            STORE_LABELS[r["store"]],
            _fmt(r["conversations_per_s"]),
            _fmt(r["requests_per_s"]),
            _fmt(r["wall_s"], 2),
            f"{r['server_cpu_share']:.0%}",
            _fmt(r["server_cpu_per_request_ms"], 2),
            f"{r['client_cpu_share']:.0%}",
            _fmt(r["client_cpu_per_request_ms"], 2),
            (
                f"{r['verified_conversations']}/{r['conversations'] + r['warmup_conversations']}"
                + ("" if r["verified"] else " FAILED")
            ),
        )
        for r in rows
    ]
    if ref is not None:
        table.append(
            (
                "reference: GET /bench/ping",
                "-",
                _fmt(ref["requests_per_s"]),
                _fmt(ref["wall_s"], 2),
                f"{ref['server_cpu_share']:.0%}",
                _fmt(ref["server_cpu_per_request_ms"], 2),
                f"{ref['client_cpu_share']:.0%}",
                _fmt(ref["client_cpu_per_request_ms"], 2),
                "-" if ref["failures"] == 0 else f"{ref['failures']} FAILED",
            )
        )
    lines += _table(
        (
            "store",
            "conv/s",
            "req/s",
            "wall s",
            "server CPU",
            "ms/req",
            "client CPU",
            "ms/req",
            "verified",
        ),
        table,
    )
    lines.append("")
    header = ["latency, ms"]
    for r in rows:
        label = STORE_LABELS[r["store"]]
        header += [f"{label} p50", "p90", "p99"]
    table_rows = []
    for name, label in ENDPOINTS.items():
        cells = [label]
        for r in rows:
            summary = r["latency"][name]
            cells += [
                _fmt(summary["p50_ms"], 2),
                _fmt(summary["p90_ms"], 2),
                _fmt(summary["p99_ms"], 2),
            ]
        table_rows.append(cells)
    if ref is not None:
        summary = ref["latency"]
        cells = ["reference: GET /bench/ping"]
        cells += [_fmt(summary[key], 2) for key in ("p50_ms", "p90_ms", "p99_ms")]
        cells += ["-"] * (3 * (len(rows) - 1))
        table_rows.append(cells)
    lines += _table(header, table_rows)
    lines += [
        "",
        (
            "server CPU / client CPU: CPU time of the server process(es, summed) / of this"
            " process during the timed phase, as a share of one core and in ms per request."
        ),
    ]
    if ref is not None:
        lines.append(
            "reference: the same number of requests to a route that runs no toolguard code"
            " (the HTTP floor), sent to the SQLite server after its warm-up."
        )
    lines.append("")
    for r in rows:
        label = STORE_LABELS[r["store"]]
        if r["verified"]:
            lines.append(
                f"{label}: verified {r['verified_conversations']} conversations; the server ran"
                f" send_email {r['tool_runs']} times, exactly once per conversation."
            )
        else:
            lines.append(f"{label}: {r['failure_count']} FAILURES, e.g.:")
            lines += [f"  {f}" for f in r["failures"][:5]]
    return "\n".join(lines)


# =========================================================================== main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=f"conversations at once (default {DEFAULT_CONCURRENCY};"
        f" --quick: {QUICK['concurrency']})",
    )
    parser.add_argument(
        "--conversations",
        type=int,
        default=None,
        help=f"timed conversations per store (default {DEFAULT_CONVERSATIONS};"
        f" --quick: {QUICK['conversations']})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"stop the whole run after this many seconds (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        default=None,
        help="also run with PostgresStore (default: $TOOLGUARD_POSTGRES_DSN)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help=f"server processes per store, on one socket and one database (1 to {MAX_WORKERS})",
    )
    parser.add_argument(
        "--no-postgres",
        action="store_true",
        help="SQLite only, even when TOOLGUARD_POSTGRES_DSN is set",
    )
    # The server process (internal).
    parser.add_argument("--serve-fd", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-store", choices=("sqlite", "postgres"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-target", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-table", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-runs", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_fd is not None:
        return args
    quick = QUICK if args.quick else {}
    if args.concurrency is None:
        args.concurrency = quick.get("concurrency", DEFAULT_CONCURRENCY)
    if args.conversations is None:
        args.conversations = quick.get("conversations", DEFAULT_CONVERSATIONS)
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:
        parser.error(f"--concurrency must be between 1 and {MAX_CONCURRENCY}")
    if not 1 <= args.conversations <= MAX_CONVERSATIONS:
        parser.error(f"--conversations must be between 1 and {MAX_CONVERSATIONS}")
    if not 1 <= args.workers <= MAX_WORKERS:
        parser.error(f"--workers must be between 1 and {MAX_WORKERS}")
    if not 0 < args.timeout <= 3600:
        parser.error("--timeout must be more than 0 and at most 3600 seconds")
    if args.no_postgres:
        args.postgres = None
    elif args.postgres is None:
        args.postgres = os.environ.get("TOOLGUARD_POSTGRES_DSN") or None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the load test; 0 when every conversation was verified."""
    args = parse_args(argv)
    if args.serve_fd is not None:
        serve(args.serve_fd, args.serve_store, args.serve_target, args.serve_table, args.serve_runs)
        return 0
    stores = ["sqlite", *(["postgres"] if args.postgres else [])]
    deadline = time.monotonic() + args.timeout
    started = dt.datetime.now(dt.timezone.utc)
    rows = []
    reference = Reference()
    error = None
    for store in stores:
        try:
            run = run_store(
                store,
                dsn=args.postgres,
                concurrency=args.concurrency,
                conversations=args.conversations,
                deadline=deadline,
                reference=reference if store == "sqlite" else None,
                workers=args.workers,
            )
        except TimeoutError:
            error = f"the run passed its --timeout of {args.timeout:g} s during {store}"
            break
        rows.append(row_for(run, args.concurrency, args.conversations))
    shown = list(argv if argv is not None else sys.argv[1:])
    if args.postgres:
        shown = [a.replace(args.postgres, "DSN") for a in shown]
    data = {
        "benchmark": "load_http",
        "command": shlex.join(["python", "benchmarks/load_http.py", *shown]),
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "environment": environment(args.postgres),
        "settings": {
            "concurrency": args.concurrency,
            "conversations": args.conversations,
            "warmup_conversations": min(args.concurrency, args.conversations),
            "timeout_s": args.timeout,
            "quick": args.quick,
            "stores": stores,
            "workers": args.workers,
        },
        "rows": rows,
        # Measured on the SQLite server, which runs first: complete when that row is.
        "reference": reference_row(reference) if rows else None,
        "error": error,
        "verified": (
            error is None
            and reference.failures == 0
            and all(r["verified"] for r in rows)
            and [r["store"] for r in rows] == stores
        ),
    }
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(text_report(data))
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
    return 0 if data["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
