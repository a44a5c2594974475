"""Start-up of ``toolguard serve`` and ``toolguard mcp-proxy``: checks before the first line,
one error line and exit code 2 for what cannot be used, Ctrl-C's 130, ``--help``'s defaults."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import (
    MODEL_ENV_VARS,
    command_env,
    free_port,
    run_toolguard,
    sign_in_link,
    wait_for_page,
)
from toolguard._cli.main import main
from toolguard._cli.serve import DEFAULT_DB, ServeError, check_store, serve

ROOT = Path(__file__).resolve().parents[2]
HAS_PSYCOPG = importlib.util.find_spec("psycopg") is not None
HAS_MCP = importlib.util.find_spec("mcp") is not None
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI variables: serve chooses the offline demo model."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def serve_here(db: str, **options: object) -> int:
    return serve(tools=None, model=None, base_url=None, db=db, port=free_port(), **options)  # type: ignore[arg-type]


# --- serve: the store ---------------------------------------------------------------------------


def test_serve_with_a_missing_folder_is_one_line_before_the_banner(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert serve_here("/nonexistent/dir/x.sqlite3") == 2
    assert capsys.readouterr() == (
        "",
        (
            "error: --db /nonexistent/dir/x.sqlite3: the folder /nonexistent/dir does not exist;"
            " create it or choose another path\n"
        ),
    )
    assert not Path("/nonexistent").exists()


def test_serve_with_a_folder_as_db_or_a_file_that_is_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert serve_here(str(tmp_path)) == 2
    assert capsys.readouterr() == (
        "",
        (
            f"error: --db {tmp_path}: {tmp_path} is a folder; give the path of a file in it, e.g."
            f" {tmp_path / 'toolguard.sqlite3'}\n"
        ),
    )
    text = tmp_path / "notes.txt"
    text.write_text("not a database, " * 100)
    assert serve_here(str(text)) == 2
    assert capsys.readouterr() == (
        "",
        (
            f"error: --db {text}: it is not a SQLite database (file is not a database); give"
            " toolguard's database file or the path of a new one\n"
        ),
    )
    assert text.read_text() == "not a database, " * 100  # left as it was


@pytest.mark.skipif(not HAS_PSYCOPG, reason="psycopg (the postgres extra) is not installed")
def test_serve_with_a_refused_postgresql_is_one_line_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    assert serve_here(f"postgresql://app:hunter2@127.0.0.1:{port}/nothing") == 2
    assert capsys.readouterr() == (
        "",
        (
            f"error: --db postgresql://app:***@127.0.0.1:{port}/nothing: cannot open the database:"
            f' connection failed: connection to server at "127.0.0.1", port {port} failed:'
            " Connection refused Is the server running on that host and accepting TCP/IP"
            " connections?; check that PostgreSQL runs at that address and the URL is right\n"
        ),
    )


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers (a database that hangs)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.skipif(not HAS_PSYCOPG, reason="psycopg (the postgres extra) is not installed")
def test_a_postgresql_that_never_answers_is_given_up_after_the_timeout() -> None:
    with silent_server() as port, pytest.raises(ServeError) as caught:
        check_store(f"postgresql://app:pw@127.0.0.1:{port}/x", timeout=0.3)
    assert str(caught.value) == (
        f"--db postgresql://app:***@127.0.0.1:{port}/x: cannot open the database: no answer"
        " within 0.3 seconds; check that PostgreSQL runs at that address and the URL is right"
    )


def test_check_store_creates_the_sqlite_file_and_leaves_it_closed(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite3"
    check_store(str(db))
    assert db.is_file()
    check_store(str(db))  # a second check finds the tables there


# --- serve: the tools module --------------------------------------------------------------------


def test_serve_with_a_tools_module_that_fails_on_import_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "brokentools.py").write_text(
        "TOOLS = []\nraise RuntimeError('no config\\nfound')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    code = serve(tools="brokentools:TOOLS", model=None, base_url=None, db=None, port=free_port())
    assert code == 2
    assert capsys.readouterr() == (
        "",
        (
            "error: --tools brokentools:TOOLS: importing 'brokentools' failed: RuntimeError: no"
            " config found; run python -c 'import brokentools' to see where\n"
        ),
    )
    assert not (tmp_path / DEFAULT_DB).exists()


# --- serve: the real command, Ctrl-C ------------------------------------------------------------


def test_toolguard_serve_with_a_missing_folder_exits_2_without_a_traceback(tmp_path: Path) -> None:
    done = run_toolguard("serve", "--db", "/nonexistent/dir/x.sqlite3", cwd=tmp_path)
    assert done == (
        2,
        "",
        (
            "error: --db /nonexistent/dir/x.sqlite3: the folder /nonexistent/dir does not exist;"
            " create it or choose another path\n"
        ),
    )


def stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    """Send ``sig`` and wait (bounded) for the process to end; its exit code."""
    process.send_signal(sig)
    try:
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
        raise


def test_ctrl_c_stops_toolguard_serve_cleanly_with_exit_code_130(tmp_path: Path) -> None:
    port = free_port()
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--port", str(port)],
            cwd=tmp_path,
            env=command_env(),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        page = wait_for_page(process, f"http://127.0.0.1:{port}/")
        assert page is not None, err.read_text()
    finally:
        code = stop(process, signal.SIGINT)
    assert code == 130
    lines = err.read_text().splitlines()
    assert lines[-4:] == [
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
        f"INFO:     Finished server process [{process.pid}]",
    ]
    assert "Traceback" not in err.read_text()


# --- mcp-proxy ----------------------------------------------------------------------------------


def proxy_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["mcp-proxy", "--port", str(free_port()), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_mcp_proxy_with_a_command_not_on_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "m.sqlite3")
    assert proxy_error(["--db", db, "--", "no-such-command", "--flag"], capsys) == (
        2,
        "",
        (
            "error: the upstream command no-such-command --flag: no-such-command is not found on"
            " PATH; install it or give its full path\n"
        ),
    )
    missing = tmp_path / "bin" / "server"
    assert proxy_error(["--db", db, "--", str(missing)], capsys) == (
        2,
        "",
        f"error: the upstream command {missing}: {missing} does not exist; check the path\n",
    )
    script = tmp_path / "server.py"
    script.write_text("print('hi')\n")
    assert proxy_error(["--db", db, "--", str(script)], capsys) == (
        2,
        "",
        (
            f"error: the upstream command {script}: {script} is not executable; make it executable"
            f" (chmod +x {script}) or run it through its interpreter\n"
        ),
    )
    assert not Path(db).exists()


def test_mcp_proxy_with_a_missing_folder_for_its_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert proxy_error(["--db", "/nonexistent/d/m.sqlite3", "--", sys.executable], capsys) == (
        2,
        "",
        (
            "error: --db /nonexistent/d/m.sqlite3: the folder /nonexistent/d does not exist;"
            " create it or choose another path\n"
        ),
    )


@pytest.mark.skipif(not HAS_MCP, reason="the mcp extra is not installed")
def test_mcp_proxy_with_an_upstream_that_exits_at_once(tmp_path: Path) -> None:
    """The upstream's own output reaches stderr, then one line of the gateway's; no traceback."""
    command = [sys.executable, "-c", "import sys; sys.exit('no config found')"]
    done = run_toolguard(
        "mcp-proxy",
        "--db",
        str(tmp_path / "m.sqlite3"),
        "--port",
        str(free_port()),
        "--",
        *command,
        cwd=tmp_path,
    )
    assert done == (
        2,
        "",
        (
            "no config found\n"
            f"error: the upstream command {shlex.join(command)} exited with code 1 before it"
            " listed its tools; its last error line: no config found; run it alone to see its"
            " error, and check that it is an MCP server speaking stdio\n"
        ),
    )


@pytest.mark.skipif(not HAS_MCP, reason="the mcp extra is not installed")
def test_mcp_proxy_with_an_unreachable_upstream_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    argv = ["--db", str(tmp_path / "m.sqlite3"), "--upstream-url", url]
    assert proxy_error(argv, capsys) == (
        2,
        "",
        (
            f"error: --upstream-url {url}: cannot list its tools (All connection"
            " attempts failed); check that an MCP server answers at that URL (streamable HTTP)\n"
        ),
    )


@pytest.mark.skipif(not HAS_MCP, reason="the mcp extra is not installed")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_mcp_proxy_cleanly(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    """Ctrl-C (130) or SIGTERM (143) stop the gateway while it waits on the client's stdin;
    the runtime file of its sign-in link is gone after."""
    port = free_port()
    db = tmp_path / "m.sqlite3"
    runtime = tmp_path / "runtime"
    env = {
        **command_env(),
        "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl"),
        "TOOLGUARD_RUNTIME_DIR": str(runtime),
    }
    argv = ["mcp-proxy", "--db", str(db), "--port", str(port), "--", *UPSTREAM]
    with subprocess.Popen(
        [sys.executable, "-m", "toolguard", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,  # open and silent: the gateway waits on it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        stderr = process.stderr
        assert stderr is not None
        first: list[bytes] = []
        reader = threading.Thread(
            target=lambda: first.extend([stderr.readline(), stderr.readline()]), daemon=True
        )
        reader.start()
        reader.join(timeout=30)
        try:
            assert first[0] == (
                f"toolguard mcp-proxy: approval page http://127.0.0.1:{port}/ | db: {db}"
                f" | ttl: 300s | upstream: {shlex.join(UPSTREAM)} | sign-in: link\n".encode()
            )
            page = f"http://127.0.0.1:{port}/"
            link = sign_in_link(first[1].decode(), "mcp-proxy", page)
            [kept] = runtime.iterdir()
            assert kept.name == f"mcp-proxy-{process.pid}.json"
            assert json.loads(kept.read_text(encoding="utf-8")) == {
                "command": "mcp-proxy",
                "pid": process.pid,
                "url": page,
                "about": f"upstream: {shlex.join(UPSTREAM)}",
                "link": link,
            }
        finally:
            exit_code = stop(process, sig)
        rest = stderr.read().decode()
    assert (exit_code, rest) == (code, "")
    assert list(runtime.iterdir()) == []
    with socket.socket() as probe:  # the approval page's port is free again
        probe.bind(("127.0.0.1", port))


# --- --help -------------------------------------------------------------------------------------


def help_lines(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The lines of ``toolguard COMMAND --help``, one per option (a wide terminal)."""
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as caught:
        main([command, "--help"])
    assert caught.value.code == 0
    return [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]


def test_serve_help_shows_the_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = help_lines("serve", capsys, monkeypatch)
    expected = [
        "--tools MODULE:ATTR the tool registry (default: the demo tools)",
        "--model NAME the model name (default: TOOLGUARD_MODEL, else gpt-4o-mini)",
        "--base-url URL an OpenAI-compatible server's URL (default: OPENAI_BASE_URL, else OpenAI)",
        (
            "--db PATH keep conversations in this SQLite file, or in PostgreSQL at a postgresql://"
            " URL (default: toolguard.sqlite3)"
        ),
        "--host HOST the address to listen on (default: 127.0.0.1)",
        "--port PORT the port to listen on; 0: any free port (default: 8000)",
        "--workers N run N server processes on the one --db (default: 1)",
    ]
    assert [line for line in lines if line in expected] == expected


def test_mcp_proxy_help_shows_the_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = help_lines("mcp-proxy", capsys, monkeypatch)
    expected = [
        (
            "--db PATH the SQLite file of the reviews, or a postgresql:// URL that several gateway"
            " processes share (default: toolguard-mcp.sqlite3)"
        ),
        "--host HOST the approval page's address (default: 127.0.0.1)",
        "--port PORT the approval page's port; 0: any free port (default: 8765)",
        "--ttl SECONDS seconds a call waits for a decision (default: 300)",
    ]
    assert [line for line in lines if line in expected] == expected
