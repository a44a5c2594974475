"""``toolguard mcp-proxy`` that cannot start: one ``error:`` line with the fix, exit code 2.

Each case runs the real command (``python -m toolguard mcp-proxy``) in a
subprocess and compares its WHOLE stderr: the gateway's own part is one line,
never a traceback; an upstream's own error output, passed through as it came,
comes before it. The option mistakes found before anything starts run
in-process through :func:`toolguard._cli.main.main`.
"""

from __future__ import annotations

import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port, run_toolguard
from toolguard._cli.main import main

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
LISTED = "read_file, delete_file, archive_file, stats, fail_always, show_env"
SERVER_HINT = "run it alone to see its error, and check that it is an MCP server speaking stdio"


def proxy(tmp_path: Path, *argv: str, port: int | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``toolguard mcp-proxy --db ... --port ... ARGV``."""
    return run_toolguard(
        "mcp-proxy",
        "--db",
        str(tmp_path / "m.sqlite3"),
        "--port",
        str(port or free_port()),
        *argv,
        cwd=ROOT,
        env={"TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl")},
    )


def proxy_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["mcp-proxy", "--port", str(free_port()), *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port of 127.0.0.1 another program listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


# ---------------------------------------------------------------------------- the upstream


def test_a_command_not_on_path(tmp_path: Path) -> None:
    assert proxy(tmp_path, "--", "no-such-command", "--flag") == (
        2,
        "",
        (
            "error: the upstream command no-such-command --flag: no-such-command is not found on"
            " PATH; install it or give its full path\n"
        ),
    )


def test_an_upstream_that_exits_at_once_names_its_exit_code_and_last_error_line(
    tmp_path: Path,
) -> None:
    """Its stderr reaches ours as it came; the error line quotes the last line of it."""
    script = "import sys; print('reading config', file=sys.stderr); sys.exit('no config found')"
    command = [sys.executable, "-c", script]
    assert proxy(tmp_path, "--", *command) == (
        2,
        "",
        (
            "reading config\n"
            "no config found\n"
            f"error: the upstream command {shlex.join(command)} exited with code 1 before it listed"
            f" its tools; its last error line: no config found; {SERVER_HINT}\n"
        ),
    )


def test_an_upstream_that_exits_silently(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "raise SystemExit(3)"]
    assert proxy(tmp_path, "--", *command) == (
        2,
        "",
        (
            f"error: the upstream command {shlex.join(command)} exited with code 3 before it listed"
            f" its tools and wrote nothing on stderr; {SERVER_HINT}\n"
        ),
    )


def test_an_upstream_that_never_answers_is_given_up_after_the_start_timeout(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    assert proxy(tmp_path, "--start-timeout", "0.5", "--", *command) == (
        2,
        "",
        (
            f"error: the upstream command {shlex.join(command)} did not answer initialize and list"
            " its tools within 0.5 s; check that it is an MCP server speaking stdio, or give it"
            " longer with --start-timeout SECONDS\n"
        ),
    )


# ---------------------------------------------------------------------------- ports


def test_an_approval_page_port_in_use(tmp_path: Path, busy_port: int) -> None:
    assert proxy(tmp_path, "--", *UPSTREAM, port=busy_port) == (
        2,
        "",
        (
            f"error: --port {busy_port}: the approval page cannot listen on 127.0.0.1:{busy_port}:"
            " the port is in use by another program; choose another --port (or --host)\n"
        ),
    )
    assert not (tmp_path / "log.jsonl").exists()  # the upstream never ran a tool


def test_a_listen_port_in_use(tmp_path: Path, busy_port: int) -> None:
    url = f"http://127.0.0.1:{busy_port}/mcp"
    assert proxy(tmp_path, "--listen", url, "--", *UPSTREAM) == (
        2,
        "",
        (
            f"error: --listen {url}: cannot listen on 127.0.0.1:{busy_port}: the port is in use by"
            " another program; choose another port (or address)\n"
        ),
    )


# ---------------------------------------------------------------------------- the database


def test_a_file_that_is_not_a_sqlite_database(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("my notes\n" * 100, encoding="utf-8")
    assert run_toolguard("mcp-proxy", "--db", str(db), "--", *UPSTREAM, cwd=ROOT) == (
        2,
        "",
        (
            f"error: --db {db}: it is not a SQLite database (file is not a database); give"
            " toolguard's database file or the path of a new one\n"
        ),
    )
    assert db.read_text(encoding="utf-8") == "my notes\n" * 100  # left as it was


def test_a_database_nobody_can_create_or_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked before anything starts: in-process, as the command runs them."""
    db = Path("/proc/toolguard.sqlite3")  # nobody, not even root, creates files here
    assert proxy_main(["--db", str(db), "--", *UPSTREAM], capsys) == (
        2,
        "",
        (
            f"error: --db {db}: cannot open the database: unable to open database file; check the"
            " path and its permissions, or choose another path\n"
        ),
    )
    assert proxy_main(["--db", str(tmp_path), "--", *UPSTREAM], capsys) == (
        2,
        "",
        (
            f"error: --db {tmp_path}: {tmp_path} is a folder; give the path of a file in it, e.g."
            f" {tmp_path / 'toolguard.sqlite3'}\n"
        ),
    )


# ---------------------------------------------------------------------------- --ask and --allow


def test_ask_or_allow_naming_a_tool_the_upstream_does_not_list(tmp_path: Path) -> None:
    """The error names the option, the tool, the close matches and every listed tool (--allow:
    tests/integrations/test_mcp_proxy_overrides.py)."""
    assert proxy(tmp_path, "--ask", "show-env", "--", *UPSTREAM) == (
        2,
        "",
        (
            "error: --ask show-env: the upstream MCP server lists no tool of that name; did you"
            f" mean show_env? (it lists {LISTED})\n"
        ),
    )


# ---------------------------------------------------------------------------- option mistakes


@pytest.mark.parametrize(
    "case",
    [
        (
            ["--listen", "http://127.0.0.1:9/mcp", "--token-env", "TG_TEST_TOKEN"],
            {},
            (
                "--token-env TG_TEST_TOKEN: the environment variable TG_TEST_TOKEN is not set; set"
                " it to the token the MCP clients will send (e.g. the output of: python -c 'import"
                " secrets; print(secrets.token_urlsafe(32))')"
            ),
        ),
        (
            ["--listen", "http://127.0.0.1:9/mcp", "--token-env", "TG_TEST_TOKEN"],
            {"TG_TEST_TOKEN": ""},
            (
                "--token-env TG_TEST_TOKEN: the environment variable TG_TEST_TOKEN is empty; set it"
                " to the token the MCP clients will send (e.g. the output of: python -c 'import"
                " secrets; print(secrets.token_urlsafe(32))')"
            ),
        ),
        (
            ["--listen", "http://0.0.0.0:9/mcp"],
            {},
            (
                "--listen http://0.0.0.0:9/mcp: an address beyond loopback needs a bearer token:"
                " give --token-env NAME, the environment variable holding it"
            ),
        ),
        (
            ["--listen", "https://127.0.0.1:9/mcp"],
            {},
            (
                "--listen https://127.0.0.1:9/mcp: give http://HOST:PORT/PATH, e.g."
                " http://127.0.0.1:8766/mcp (plain HTTP: put a TLS proxy in front to serve HTTPS)"
            ),
        ),
        (
            ["--listen", "http://127.0.0.1/mcp"],
            {},
            (
                "--listen http://127.0.0.1/mcp: give http://HOST:PORT/PATH, e.g."
                " http://127.0.0.1:8766/mcp (plain HTTP: put a TLS proxy in front to serve HTTPS)"
            ),
        ),
        (
            ["--token-env", "TG_TEST_TOKEN"],
            {"TG_TEST_TOKEN": "s3cret"},
            "--token-env goes with --listen: it names the token of the MCP clients over HTTP",
        ),
        (
            ["--start-timeout", "0"],
            {},
            "--start-timeout must be a positive number of seconds, got 0",
        ),
    ],
)
def test_option_mistakes_are_one_line_before_anything_starts(
    case: tuple[list[str], dict[str, str], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv, environ, error = case
    monkeypatch.delenv("TG_TEST_TOKEN", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "m.sqlite3"
    assert proxy_main(["--db", str(db), *argv, "--", *UPSTREAM], capsys) == (
        2,
        "",
        f"error: {error}\n",
    )
    assert not db.exists()


def test_listen_on_the_approval_pages_own_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--port", "8799", "--listen", "http://127.0.0.1:8799/mcp", "--", *UPSTREAM]
    assert proxy_main(["--db", str(tmp_path / "m.sqlite3"), *argv], capsys) == (
        2,
        "",
        (
            "error: --listen http://127.0.0.1:8799/mcp and --port 8799 name the same address: give"
            " the MCP server and the approval page different ports\n"
        ),
    )


def test_the_help_shows_the_new_options_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit):
        main(["mcp-proxy", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # an option's help may start a line lower
    expected = [
        (
            "--start-timeout SECONDS seconds the upstream may take to start and list its tools"
            " (default: 30)"
        ),
        (
            "--ask TOOL a person decides every call to TOOL, whatever the server's annotations say"
            " (repeatable; default: none)"
        ),
        (
            "--allow TOOL calls to TOOL run without review, whatever the server's annotations say;"
            " a deny or ask rule of --rules, and --ask, still win (repeatable; default: none)"
        ),
        (
            "--listen URL serve MCP over streamable HTTP at URL (http://HOST:PORT/PATH) to many"
            " clients instead of on stdin/stdout (default: stdio)"
        ),
        (
            "--token-env NAME with --listen, clients must send Authorization: Bearer TOKEN, TOKEN"
            " being the value of the environment variable NAME; required beyond loopback (default:"
            " none)"
        ),
    ]
    assert [entry for entry in expected if entry in text] == expected
