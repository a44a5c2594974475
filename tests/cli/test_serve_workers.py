"""``toolguard serve --workers N``: several processes on one SQLite or PostgreSQL store.

The server runs as a subprocess (``python -m toolguard serve --workers 2``)
with a tools module whose guarded ``send_email`` appends one line per real
execution (its process id and recipient) to a file. With
``TOOLGUARD_SERVE_WORKER_HEADER=1`` every answer names the worker process
that gave it, so a test can pause a review through one worker and approve it
through the other (uvicorn hands each new connection to one of the workers:
new connections are opened until the other worker answers, at most
``MAX_TRIES``). The PostgreSQL case needs ``TOOLGUARD_POSTGRES_DSN`` and is
skipped without it. Loopback only; every wait is bounded.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import os
import subprocess
import sys
import time
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import free_port
from toolguard._cli.main import main
from toolguard._cli.serve import (
    OPTIONS_ENV,
    WORKER_HEADER,
    WORKER_HEADER_ENV,
    ServeError,
    app_from_env,
    open_store,
    shown_db,
)
from toolguard._stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
HAS_PSYCOPG = importlib.util.find_spec("psycopg") is not None
MAX_TRIES = 200
"""New connections opened, at most, to reach a given worker."""
STARTUP_S = 90.0
"""How long the workers may take to answer (the test machine is shared and often busy)."""

ASK = "email alice that the meeting moved to 11"
ALICE = {
    "to": "alice@example.com",
    "subject": "The meeting moved to 11",
    "body": "Hi Alice, the meeting moved to 11.",
}
SENT = "sent to alice@example.com"
REPLY = "send_email returned: sent to alice@example.com"
TOOLS_MODULE = '''
import os

import toolguard


@toolguard.requires_approval
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: the recipient's address.
        subject: the subject line.
        body: the text.
    """
    with open(os.environ["WORKERS_TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {to}\\n")
    return f"sent to {to}"


TOOLS = [send_email]
'''
ENV_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOOLGUARD_MODEL", OPTIONS_ENV)


@dataclass
class Server:
    """A running ``toolguard serve --workers 2`` and what it writes."""

    process: subprocess.Popen[bytes]
    base_url: str
    tool_log: Path
    stdout: Path
    stderr: Path

    def runs(self) -> list[str]:
        """The lines the tool wrote: one ``"<pid> <to>"`` per real execution."""
        if not self.tool_log.exists():
            return []
        return self.tool_log.read_text(encoding="utf-8").splitlines()


@contextlib.contextmanager
def running_server(tmp_path: Path, db: str) -> Iterator[Server]:
    """Start ``python -m toolguard serve --workers 2 --db DB --no-auth``; stop it with SIGTERM."""
    (tmp_path / "workertools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env[WORKER_HEADER_ENV] = "1"
    env["WORKERS_TOOL_LOG"] = str(tmp_path / "tool_runs.txt")
    server_args = ["serve", "--workers", "2", "--db", db, "--port", str(port), "--no-auth"]
    command = [sys.executable, "-m", "toolguard", *server_args, "--tools", "workertools:TOOLS"]
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=stdout, stderr=stderr)
    server = Server(process, f"http://127.0.0.1:{port}", tmp_path / "tool_runs.txt", out, err)
    try:
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def worker_pids(server: Server) -> set[str]:
    """Both workers' process ids, asking on new connections until both answered (bounded)."""
    deadline = time.monotonic() + STARTUP_S
    pids: set[str] = set()
    tries = 0
    while len(pids) < 2 and tries < MAX_TRIES and time.monotonic() < deadline:
        assert server.process.poll() is None, server.stderr.read_text()
        try:
            response = httpx.get(f"{server.base_url}/hitl/threads/nothing-here", timeout=5)
        except httpx.TransportError:
            time.sleep(0.1)
            continue
        tries += 1
        assert response.status_code == 404
        pids.add(response.headers[WORKER_HEADER])
    assert len(pids) == 2, f"only {pids} answered in {tries} connections"
    return pids


def client_of(server: Server, pid: str) -> tuple[httpx.Client, httpx.Response]:
    """A keep-alive client whose one connection is served by worker ``pid`` (bounded tries)."""
    for _ in range(MAX_TRIES):
        client = httpx.Client(base_url=server.base_url, timeout=30)
        response = client.get("/hitl/threads/nothing-here")
        if response.headers[WORKER_HEADER] == pid:
            return client, response
        client.close()
    pytest.fail(f"worker {pid} took none of {MAX_TRIES} new connections")


def _store_params() -> list[Any]:
    postgres = pytest.param(
        "postgres",
        marks=pytest.mark.skipif(
            not (DSN and HAS_PSYCOPG),
            reason="set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres prints one)",
        ),
    )
    return ["sqlite", postgres]


@pytest.fixture(params=_store_params())
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A two-worker server on a fresh SQLite file, or on the PostgreSQL database of the DSN."""
    db = str(tmp_path / "workers.sqlite3") if request.param == "sqlite" else DSN
    with running_server(tmp_path, db) as running:
        yield running


def pending_body(thread_id: str, review_id: str) -> dict[str, Any]:
    """The exact answer for send_email to Alice awaiting approval."""
    return {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": {
            "action_requests": [
                {
                    "name": "send_email",
                    "args": ALICE,
                    "description": "Tool `send_email` is awaiting approval",
                }
            ],
            "review_configs": [
                {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        },
        "review_id": review_id,
    }


def test_a_review_paused_by_one_worker_is_approved_by_the_other_and_runs_once(
    server: Server,
) -> None:
    """Pause through worker A, approve through worker B: the tool runs once, in B; replay fails."""
    first, second = sorted(worker_pids(server))
    a, _ = client_of(server, first)
    b, _ = client_of(server, second)
    with contextlib.closing(a), contextlib.closing(b):
        paused = a.post("/hitl/chat", json={"message": ASK})
        body = paused.json()
        thread_id, review_id = body["thread_id"], body["review_id"]
        runs_while_paused = server.runs()
        seen_by_b = b.get(f"/hitl/threads/{thread_id}")
        decision = {
            "thread_id": thread_id,
            "decisions": [{"type": "approve"}],
            "review_id": review_id,
        }
        done = b.post("/hitl/review", json=decision)
        replay = a.post("/hitl/review", json=decision)
        final = a.get(f"/hitl/threads/{thread_id}")
    assert (paused.status_code, paused.headers[WORKER_HEADER]) == (200, first)
    assert body == pending_body(thread_id, review_id)
    assert runs_while_paused == []
    assert (seen_by_b.status_code, seen_by_b.headers[WORKER_HEADER]) == (200, second)
    assert (seen_by_b.json()["status"], seen_by_b.json()["review_id"]) == (
        "awaiting_review",
        review_id,
    )
    assert (done.status_code, done.headers[WORKER_HEADER]) == (200, second)
    assert done.json() == {
        "thread_id": thread_id,
        "reply": REPLY,
        "pending_review": None,
        "review_id": None,
    }
    assert (replay.status_code, replay.headers[WORKER_HEADER], replay.json()) == (
        400,
        first,
        {
            "detail": f"The review {review_id} is no longer current in this conversation."
            " Load the thread and decide on its current review."
        },
    )
    assert server.runs() == [f"{second} alice@example.com"]
    state = final.json()
    assert (state["status"], [a["status"] for a in state["actions"]]) == ("idle", ["executed"])
    assert [m["role"] for m in state["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert state["messages"][2]["content"] == SENT
    assert state["messages"][3]["content"] == done.json()["reply"]


def test_two_workers_racing_to_approve_one_review_run_the_tool_once(server: Server) -> None:
    """The same approval sent to both workers at once: one applies it, the other is refused."""
    first, second = sorted(worker_pids(server))
    a, _ = client_of(server, first)
    b, _ = client_of(server, second)
    with contextlib.closing(a), contextlib.closing(b):
        body = a.post("/hitl/chat", json={"message": ASK}).json()
        decision = {
            "thread_id": body["thread_id"],
            "decisions": [{"type": "approve"}],
            "review_id": body["review_id"],
        }
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(pool.map(lambda c: c.post("/hitl/review", json=decision), [a, b]))
    by_status = sorted(answers, key=lambda r: r.status_code)
    winner, loser = by_status
    assert winner.status_code == 200
    assert winner.json() == {
        "thread_id": body["thread_id"],
        "reply": REPLY,
        "pending_review": None,
        "review_id": None,
    }
    assert loser.status_code in (400, 409)
    assert loser.json()["detail"] in (
        (
            f"The review {body['review_id']} is no longer current in this conversation."
            " Load the thread and decide on its current review."
        ),
        "There is no action awaiting approval in this conversation",
        "Another request is changing the thread at the same time.",
    )
    assert server.runs() == [f"{winner.headers[WORKER_HEADER]} alice@example.com"]


def test_startup_line_names_the_workers(tmp_path: Path) -> None:
    """The first line printed says how many workers serve the one database; SIGTERM exits 0."""
    db = str(tmp_path / "w.sqlite3")
    with running_server(tmp_path, db) as server:
        pids = worker_pids(server)
        line = server.stdout.read_text().splitlines()[0]
    port = server.base_url.rsplit(":", 1)[1]
    assert line == (
        f"toolguard serve: http://127.0.0.1:{port}/"
        f" | model: built-in scripted demo model (offline) | db: {db} | workers: 2"
    )
    assert str(server.process.pid) not in pids  # the parent supervises; the workers answer
    assert server.process.returncode == 0  # SIGTERM: the workers stop, then the parent


def test_workers_refuse_a_private_in_memory_database(tmp_path: Path) -> None:
    """`--workers 2 --db :memory:` exits 2: each process would have its own database."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolguard",
            "serve",
            "--workers",
            "2",
            "--db",
            ":memory:",
            "--no-auth",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        (
            "error: --workers 2 needs a database the workers share, but --db :memory: gives"
            " each process a private one: use a SQLite file or a postgresql:// URL\n"
        ),
    )


@pytest.mark.skipif(not HAS_PSYCOPG, reason="psycopg (the postgres extra) is not installed")
def test_workers_with_an_unreachable_database_exit_2_before_forking(tmp_path: Path) -> None:
    """The store is opened first: a refused connection is one error line, the password hidden."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    port = free_port()
    db = f"postgresql://app:hunter2@127.0.0.1:{port}/nothing"
    result = subprocess.run(
        [sys.executable, "-m", "toolguard", "serve", "--workers", "2", "--db", db, "--no-auth"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    shown = db.replace(":hunter2@", ":***@")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: --db {shown}: cannot open the database: connection failed: connection to"
        f' server at "127.0.0.1", port {port} failed: Connection refused Is the server running'
        " on that host and accepting TCP/IP connections?; check that PostgreSQL runs at that"
        " address and the URL is right\n"
    )


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_workers_must_be_a_positive_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--workers must be a positive integer: argparse exits 2 naming it."""
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--workers", value])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "toolguard serve: error: argument --workers: expected a positive number of"
        f" processes, got {value!r}"
    )


def test_cli_hands_workers_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --workers 3` passes workers=3; the default of 1 is not passed at all."""
    received: list[dict[str, Any]] = []
    fake = types.ModuleType("toolguard._cli.serve")
    fake.serve = lambda **options: received.append(options)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolguard._cli.serve", fake)
    assert main(["serve", "--workers", "3", "--db", "x.db"]) == 0
    assert main(["serve", "--workers", "1"]) == 0
    common: dict[str, Any] = {
        "tools": None,
        "model": None,
        "base_url": None,
        "host": "127.0.0.1",
        "port": 8000,
        "max_body_bytes": 1048576,
        "allow_origins": [],
        "allow_hosts": [],
    }
    assert received == [{**common, "db": "x.db", "workers": 3}, {**common, "db": None}]


def test_app_from_env_without_options_says_how_to_start_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker factory outside `serve --workers` fails with a clear ServeError."""
    expected = (
        "TOOLGUARD_SERVE_OPTIONS must hold the options of toolguard serve as a JSON object"
        " (toolguard serve --workers N sets it); run toolguard serve instead"
    )
    for value in (None, "not json", "[1, 2]"):
        if value is None:
            monkeypatch.delenv(OPTIONS_ENV, raising=False)
        else:
            monkeypatch.setenv(OPTIONS_ENV, value)
        with pytest.raises(ServeError) as caught:
            app_from_env()
        assert str(caught.value) == expected


async def test_app_from_env_builds_the_app_and_names_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The factory builds serve's app from the JSON options; the header is opt-in."""
    db = str(tmp_path / "f.sqlite3")
    options = (
        '{"db": "%s", "max_body_bytes": 100, "allowed_hosts": ["ok.test"]}' % db  # noqa: UP031
    )
    monkeypatch.setenv(OPTIONS_ENV, options)
    for header in ("0", "1"):
        monkeypatch.setenv(WORKER_HEADER_ENV, header)
        app = app_from_env()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ok.test") as client:
            found = await client.get("/hitl/threads/none")
            big = await client.post("/hitl/chat", json={"message": "x" * 200})
            other = await client.get("/hitl/threads/none", headers={"host": "evil.test"})
        assert isinstance(app.state.chat.store, SQLiteStore)
        assert app.state.chat.store.path == db
        assert (found.status_code, big.status_code, other.status_code) == (404, 413, 421)
        named = found.headers.get(WORKER_HEADER)
        assert named == (str(os.getpid()) if header == "1" else None)
        app.state.chat.store.close()


def test_shown_db_masks_a_postgres_password() -> None:
    """The startup line never prints a password from --db."""
    assert shown_db(None) == "toolguard.sqlite3"
    assert shown_db("a.db") == "a.db"
    assert shown_db("postgresql://app:s3cr:et@db.internal:5432/app") == (
        "postgresql://app:***@db.internal:5432/app"
    )
    assert shown_db("postgres://app@db/app") == "postgres://app@db/app"


@pytest.mark.skipif(not HAS_PSYCOPG, reason="psycopg (the postgres extra) is not installed")
def test_open_store_picks_postgres_for_a_postgresql_url() -> None:
    """`--db postgresql://...` is a PostgresStore (no connection yet); a path is SQLite."""
    from toolguard.postgres import PostgresStore

    store = open_store("postgresql://app@127.0.0.1:1/app")
    assert isinstance(store, PostgresStore)
    assert store.table == "toolguard_threads"
    sqlite = open_store(f"{uuid.uuid4().hex}.sqlite3")
    assert isinstance(sqlite, SQLiteStore)
    with pytest.raises(ServeError) as caught:
        open_store("postgresql://app@127.0.0.1/app?nosuchoption=1")
    assert str(caught.value).startswith(
        "--db postgresql://app@127.0.0.1/app?nosuchoption=1 is not a valid PostgreSQL"
        " connection string: "
    )
