"""Per-request HTTP overhead: toolguard's routes against minimal FastAPI routes, side by side.

One run measures, per request, the same pairs through two transports:

* **ASGI**: ``httpx.AsyncClient(transport=httpx.ASGITransport(app))`` in this
  process: the ASGI stack (Starlette, FastAPI, toolguard's middleware and
  route class) without sockets or a server;
* **TCP**: uvicorn (one worker, asyncio loop) in **another process** on
  127.0.0.1, a port the operating system picks; the client sends its
  requests one after the other on one keep-alive connection.

Rows (the server app dispatches by path prefix to two FastAPI apps):

* ``bare``: a plain ``FastAPI()`` with no middleware: ``GET /bare/ping``
  (``{"ok": true}``), ``POST /bare/chat`` (a pydantic body ``{"message"}``
  answered with a pydantic model of the same shape as toolguard's
  ``ChatResponse``) and ``GET /bare/threads/{id}`` (answers a ready-made dict
  equal to toolguard's answer for the thread below, so the bytes are the
  same);
* ``toolguard``: :func:`toolguard.http.create_app` over a ``ReviewedChat``
  with a scripted model and a ``MemoryStore`` (so no disk is measured), with
  a ``Host`` allow-list: ``GET /hitl/ping`` (a route of this script on that
  app: its middleware only), ``POST /hitl/chat`` (the model answers with
  text: one new thread saved per request) and ``GET /hitl/threads/{id}`` (a
  thread paused on one ``send_email`` review);
* ``direct``: the same chat called without HTTP (``await
  chat.send_message(text)``, ``(await chat.get_thread(id)).model_dump_json()``),
  in this process.

The report gives the median and best batch (µs per request) per row, and
per route the **overhead of toolguard's HTTP layer** (its security checks,
body parsing and validation, serialisation): toolguard's route minus the
bare route of the same shape minus the direct call. Over TCP the server's
CPU time per request (``time.process_time`` of the server process, read
through ``GET /bare/cpu`` around each batch) is reported too: on a busy
shared machine it moves less than wall time.

Every answer is checked (status and body) while it is timed; a wrong one
stops the benchmark. Loopback only; the server process is stopped at the end.

Run from the repository root::

    .venv/bin/python benchmarks/bench_http.py           # full run (about a minute)
    .venv/bin/python benchmarks/bench_http.py --quick   # smoke test
    .venv/bin/python benchmarks/bench_http.py --json    # machine-readable output
    .venv/bin/python benchmarks/bench_http.py --no-tcp  # ASGI only
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.metadata
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import anyio
import httpx
from pydantic import BaseModel

import toolguard

HOST = "127.0.0.1"
ASGI_HOST = "bench.test"
ALLOWED_HOSTS = [ASGI_HOST, HOST]
CHAT_TEXT = "hello there"
REPLY = "Hello! (scripted)"
PAUSE_TEXT = "mail alice"
EMAIL_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
STARTUP_TIMEOUT = 30.0
REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class Settings:
    """How long to measure."""

    batches: int
    """Batches per row (interleaved); the median is taken over them."""
    requests: int
    """Timed requests per batch."""
    warmup: int
    """Untimed requests at the start of every batch."""


FULL = Settings(batches=11, requests=200, warmup=10)
QUICK = Settings(batches=2, requests=5, warmup=1)


def _fail(what: str) -> NoReturn:
    msg = f"bench_http: a request did not get the expected answer: {what}"
    raise SystemExit(msg)


# =========================================================================== the apps


class ScriptedModel:
    """Answers ``CHAT_TEXT`` with text; proposes ``send_email`` for ``PAUSE_TEXT``."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any) -> toolguard.ModelResponse:
        """The ``toolguard.ChatModel`` protocol."""
        self.calls += 1
        last = messages[-1]
        if last["role"] == "user" and last["content"] == PAUSE_TEXT:
            call = toolguard.ToolCall(id=f"call_{self.calls}", name="send_email", args=EMAIL_ARGS)
            return toolguard.ModelResponse(tool_calls=[call])
        return toolguard.ModelResponse(text=REPLY)


def build_chat() -> toolguard.ReviewedChat:
    """The chat behind toolguard's routes: scripted model, one guarded tool, MemoryStore."""

    @toolguard.requires_approval
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        return f"sent to {to}"

    return toolguard.ReviewedChat(ScriptedModel(), [send_email], store=toolguard.MemoryStore())


class BareChatRequest(BaseModel):
    """The bare chat route's body."""

    message: str


class BareChatResponse(BaseModel):
    """The bare chat route's answer: the shape of toolguard's ``ChatResponse``."""

    thread_id: str
    reply: str | None
    pending_review: dict[str, Any] | None
    review_id: str | None


def build_apps(chat: toolguard.ReviewedChat) -> tuple[Any, Any, Any]:
    """(the dispatching ASGI app, the bare FastAPI app, toolguard's app)."""
    from fastapi import FastAPI

    from toolguard.http import create_app

    bare = FastAPI()
    state: dict[str, Any] = {"thread": {}}

    @bare.get("/bare/ping")
    async def ping() -> dict[str, bool]:
        return {"ok": True}

    @bare.post("/bare/chat")
    async def bare_chat(request: BareChatRequest) -> BareChatResponse:
        return BareChatResponse(
            thread_id="0" * 32, reply=request.message, pending_review=None, review_id=None
        )

    @bare.get("/bare/threads/{thread_id}")
    async def bare_thread(thread_id: str) -> dict[str, Any]:
        thread: dict[str, Any] = state["thread"]
        return thread

    @bare.get("/bare/cpu")
    async def cpu() -> dict[str, float]:
        return {"cpu_s": time.process_time()}

    @bare.put("/bare/thread-answer")
    async def set_thread(answer: dict[str, Any]) -> dict[str, bool]:
        state["thread"] = answer
        return {"ok": True}

    ours = create_app(chat, page=False, allowed_hosts=ALLOWED_HOSTS)

    @ours.get("/hitl/ping", include_in_schema=False)
    async def our_ping() -> dict[str, bool]:
        return {"ok": True}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/bare/"):
            await bare(scope, receive, send)
        else:
            await ours(scope, receive, send)

    return app, bare, ours


def serve(fd: int) -> None:
    """The server process: serve the apps on the listening socket ``fd`` until SIGTERM."""
    import uvicorn

    sock = socket.socket(fileno=fd)
    app, _bare, _ours = build_apps(build_chat())
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


# =========================================================================== requests


@dataclass(frozen=True)
class Route:
    """One measured request and the answer it must get."""

    key: str
    method: str
    path: str
    body: Any
    check: Callable[[httpx.Response], bool]


def _ok_ping(response: httpx.Response) -> bool:
    return response.status_code == 200 and response.json() == {"ok": True}


def _ok_bare_chat(response: httpx.Response) -> bool:
    expected = {
        "thread_id": "0" * 32,
        "reply": CHAT_TEXT,
        "pending_review": None,
        "review_id": None,
    }
    return response.status_code == 200 and bool(response.json() == expected)


def _ok_chat(response: httpx.Response) -> bool:
    if response.status_code != 200:
        return False
    body = response.json()
    return isinstance(body, dict) and body == {
        "thread_id": body.get("thread_id"),
        "reply": REPLY,
        "pending_review": None,
        "review_id": None,
    }


def routes(thread_id: str, thread_answer: dict[str, Any]) -> list[Route]:
    """The HTTP rows, in report order."""

    def same_thread(response: httpx.Response) -> bool:
        return response.status_code == 200 and response.json() == thread_answer

    chat_body = {"message": CHAT_TEXT}
    return [
        Route("bare ping", "GET", "/bare/ping", None, _ok_ping),
        Route("toolguard ping", "GET", "/hitl/ping", None, _ok_ping),
        Route("bare chat", "POST", "/bare/chat", chat_body, _ok_bare_chat),
        Route("toolguard chat", "POST", "/hitl/chat", chat_body, _ok_chat),
        Route("bare thread", "GET", f"/bare/threads/{thread_id}", None, same_thread),
        Route("toolguard thread", "GET", f"/hitl/threads/{thread_id}", None, same_thread),
    ]


LABELS = {
    "bare ping": ("bare FastAPI", "GET /bare/ping -> {ok: true}"),
    "toolguard ping": ("toolguard", "GET /hitl/ping -> {ok: true} (create_app's middleware)"),
    "bare chat": ("bare FastAPI", "POST /bare/chat {message} -> pydantic model"),
    "toolguard chat": ("toolguard", "POST /hitl/chat {message} -> reply (MemoryStore)"),
    "bare thread": ("bare FastAPI", "GET /bare/threads/{id} -> the same JSON, ready-made"),
    "toolguard thread": ("toolguard", "GET /hitl/threads/{id}, a paused thread"),
    "direct chat": ("direct", "await chat.send_message(text), no HTTP"),
    "direct thread": ("direct", "(await chat.get_thread(id)).model_dump_json(), no HTTP"),
}


@dataclass
class Row:
    """One row's batches (µs per request) and, over TCP, the server's CPU µs per request."""

    transport: str
    key: str
    batches_us: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The row as JSON data."""
        framework, what = LABELS[self.key]
        return {
            "transport": self.transport,
            "row": self.key,
            "framework": framework,
            "what": what,
            "median_us": round(statistics.median(self.batches_us), 1),
            "min_us": round(min(self.batches_us), 1),
            "batches_us": [round(b, 1) for b in self.batches_us],
            "server_cpu_median_us": (
                round(statistics.median(self.server_cpu_us), 1) if self.server_cpu_us else None
            ),
        }


class _GcOff:
    """The garbage collector off while a batch is timed (as in ``timeit``)."""

    def __enter__(self) -> None:
        gc.collect()
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


async def _request(client: httpx.AsyncClient, route: Route) -> httpx.Response:
    if route.body is None:
        return await client.request(route.method, route.path)
    return await client.request(route.method, route.path, json=route.body)


async def time_route(client: httpx.AsyncClient, route: Route, settings: Settings) -> float:
    """One batch of ``route``: µs per request; every answer checked."""
    for _ in range(settings.warmup):
        response = await _request(client, route)
        if not route.check(response):
            _fail(f"{route.method} {route.path}: {response.status_code} {response.text[:300]}")
    bad = 0
    with _GcOff():
        start = time.perf_counter_ns()
        for _ in range(settings.requests):
            bad += not route.check(await _request(client, route))
        elapsed = time.perf_counter_ns() - start
    if bad:
        _fail(f"{route.method} {route.path}: {bad} of {settings.requests} answers were wrong")
    return elapsed / settings.requests / 1_000


async def time_direct(call: Callable[[], Awaitable[bool]], what: str, settings: Settings) -> float:
    """One batch of a direct (no HTTP) call: µs per call; every result checked."""
    bad = 0
    for _ in range(settings.warmup):
        bad += not await call()
    with _GcOff():
        start = time.perf_counter_ns()
        for _ in range(settings.requests):
            bad += not await call()
        elapsed = time.perf_counter_ns() - start
    if bad:
        _fail(f"{what}: {bad} wrong results")
    return elapsed / settings.requests / 1_000


async def paused_thread(client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    """Pause one thread on a send_email review through the API; its id and GET answer."""
    response = await client.post("/hitl/chat", json={"message": PAUSE_TEXT})
    body = response.json()
    if response.status_code != 200 or body.get("pending_review") is None:
        _fail(f"POST /hitl/chat (pause): {response.status_code} {response.text[:300]}")
    thread_id: str = body["thread_id"]
    answer = await client.get(f"/hitl/threads/{thread_id}")
    if answer.status_code != 200 or answer.json()["status"] != "awaiting_review":
        _fail(f"GET /hitl/threads/{thread_id}: {answer.status_code} {answer.text[:300]}")
    data: dict[str, Any] = answer.json()
    put = await client.put("/bare/thread-answer", json=data)
    if not _ok_ping(put):
        _fail(f"PUT /bare/thread-answer: {put.status_code}")
    return thread_id, data


async def measure_asgi(settings: Settings) -> list[Row]:
    """The ASGI rows and the direct rows, batches interleaved."""
    chat = build_chat()
    app, _bare, _ours = build_apps(chat)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=f"http://{ASGI_HOST}") as client:
        thread_id, thread_answer = await paused_thread(client)
        todo = routes(thread_id, thread_answer)

        async def direct_chat() -> bool:
            turn = await chat.send_message(CHAT_TEXT)
            return turn.reply == REPLY and turn.pending_review is None

        async def direct_thread() -> bool:
            state = await chat.get_thread(thread_id)
            text = state.model_dump_json()
            return state.status == thread_answer["status"] and len(text) > len(thread_id)

        rows = {route.key: Row("ASGI", route.key) for route in todo}
        direct = {"direct chat": direct_chat, "direct thread": direct_thread}
        rows.update({key: Row("in process", key) for key in direct})
        for _ in range(settings.batches):
            for route in todo:
                rows[route.key].batches_us.append(await time_route(client, route, settings))
            for key, call in direct.items():
                rows[key].batches_us.append(await time_direct(call, key, settings))
    return list(rows.values())


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """The server process on a free port of 127.0.0.1 (the socket is made here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        fd = sock.fileno()
        command = [sys.executable, str(Path(__file__).resolve()), "--serve-fd", str(fd)]
        env = {**os.environ, "TOOLGUARD_LANG": "en"}
        server = subprocess.Popen(
            command,
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
    return server, f"http://{HOST}:{port}"


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


async def server_cpu(client: httpx.AsyncClient) -> float:
    """The server process's CPU seconds so far."""
    response = await client.get("/bare/cpu")
    value: float = response.json()["cpu_s"]
    return value


async def measure_tcp(settings: Settings) -> list[Row]:
    """The TCP rows: one keep-alive connection to the server process, batches interleaved."""
    server, base_url = start_server()
    try:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(
            base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT, trust_env=False
        ) as client:
            with anyio.fail_after(STARTUP_TIMEOUT):
                while True:
                    if server.poll() is not None:
                        err = server.stderr.read() if server.stderr else b""
                        _fail(f"the server process exited: {err.decode(errors='replace')}")
                    try:
                        await server_cpu(client)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.05)
            thread_id, thread_answer = await paused_thread(client)
            todo = routes(thread_id, thread_answer)
            rows = {route.key: Row("TCP", route.key) for route in todo}
            for _ in range(settings.batches):
                for route in todo:
                    before = await server_cpu(client)
                    rows[route.key].batches_us.append(await time_route(client, route, settings))
                    spent = await server_cpu(client) - before
                    # The two /bare/cpu requests and the warm-up are in the CPU window too;
                    # spread over the batch they add about 2/requests of a ping each.
                    total = settings.requests + settings.warmup
                    rows[route.key].server_cpu_us.append(spent / total * 1e6)
    finally:
        stop_server(server)
    return list(rows.values())


# =========================================================================== report


def overheads(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per transport and route: toolguard's median minus the bare route's (minus direct)."""
    by = {(r["transport"], r["row"]): r for r in rows}
    direct = {
        "chat": by.get(("in process", "direct chat")),
        "thread": by.get(("in process", "direct thread")),
    }
    result = []
    for transport in ("ASGI", "TCP"):
        for route in ("ping", "chat", "thread"):
            ours = by.get((transport, f"toolguard {route}"))
            bare = by.get((transport, f"bare {route}"))
            if ours is None or bare is None:
                continue
            inner = direct.get(route)
            inner_us = inner["median_us"] if inner is not None else 0.0
            entry: dict[str, Any] = {
                "transport": transport,
                "route": route,
                "toolguard_us": ours["median_us"],
                "bare_us": bare["median_us"],
                "direct_us": inner_us,
                "overhead_us": round(ours["median_us"] - bare["median_us"] - inner_us, 1),
                "overhead_of_best_us": round(
                    ours["min_us"] - bare["min_us"] - (inner["min_us"] if inner else 0.0), 1
                ),
            }
            if ours["server_cpu_median_us"] is not None:
                entry["server_cpu_overhead_us"] = round(
                    ours["server_cpu_median_us"] - bare["server_cpu_median_us"] - inner_us, 1
                )
            result.append(entry)
    return result


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """Python, machine and package versions, and the load average."""
    packages = ("toolguard-hitl", "fastapi", "starlette", "uvicorn", "h11", "httpx", "pydantic")
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {name: _version(name) for name in packages},
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def report(data: dict[str, Any]) -> str:
    """The human-readable tables."""
    env = data["environment"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v is not None)
    lines = [
        "Per-request HTTP overhead: toolguard's routes against minimal FastAPI routes",
        (
            f"{data['date']} | Python {env['python']}, {env['platform']}, {env['cpus']} CPUs,"
            f" load average {env['load_average']}"
        ),
        f"Versions: {versions}",
        f"Settings: {data['settings']}",
        "",
    ]
    lines += _table(
        ("transport", "framework", "request", "median µs", "best µs", "server CPU µs"),
        [
            (
                r["transport"],
                r["framework"],
                r["what"],
                _us(r["median_us"]),
                _us(r["min_us"]),
                _us(r["server_cpu_median_us"]),
            )
            for r in data["rows"]
        ],
        left=3,
    )
    lines += [
        "",
        (
            "toolguard's HTTP layer per request = toolguard route - bare route - direct call"
            " (medians; 'of best' from the best batches; over TCP also from server CPU):"
        ),
    ]
    lines += _table(
        ("transport", "route", "toolguard", "bare", "direct", "overhead µs", "of best", "of CPU"),
        [
            (
                o["transport"],
                o["route"],
                _us(o["toolguard_us"]),
                _us(o["bare_us"]),
                _us(o["direct_us"]),
                _us(o["overhead_us"]),
                _us(o["overhead_of_best_us"]),
                _us(o.get("server_cpu_overhead_us")),
            )
            for o in data["overheads"]
        ],
        left=2,
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, check, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few requests (smoke test)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    parser.add_argument("--no-tcp", action="store_true", help="ASGI and direct rows only")
    parser.add_argument("--serve-fd", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_fd is not None:
        serve(args.serve_fd)
        return 0
    settings = QUICK if args.quick else FULL
    started = dt.datetime.now(dt.timezone.utc)
    rows = anyio.run(measure_asgi, settings)
    if not args.no_tcp:
        rows += anyio.run(measure_tcp, settings)
    summaries = [r.summary() for r in rows]
    data = {
        "benchmark": "bench_http",
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join(["python", "benchmarks/bench_http.py", *(argv or sys.argv[1:])]),
        "environment": environment(),
        "settings": asdict(settings),
        "rows": summaries,
        "overheads": overheads(summaries),
        "verified": True,  # a wrong answer stops the run before this
    }
    print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
