"""A newcomer's first start of ``toolguard demo``, ``serve`` and ``mcp-proxy``: every mistake
is found before anything says it started, one ``error:`` line naming the option and the fix,
exit code 2, and nothing left behind in the folder; the start-up line names the real port and
the sign-in.

Each case runs the real command in a subprocess and compares its WHOLE stdout and stderr.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import command_env, free_port, run_toolguard, sign_in_link, wait_for_page

pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
NOT_HERE = "192.0.2.1"  # TEST-NET-1: an address of no machine here
NOT_A_DATABASE = "my notes\n" * 100


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port of 127.0.0.1 another program listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A text file, given by mistake as the database."""
    path = tmp_path / "notes.txt"
    path.write_text(NOT_A_DATABASE, encoding="utf-8")
    return path


def left_behind(folder: Path, *expected: Path) -> list[str]:
    """The files in ``folder`` besides ``expected`` (the ones the test made)."""
    return sorted(p.name for p in folder.iterdir() if p not in expected)


# ---------------------------------------------------------------------------- demo


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--db", "/nonexistent/x.db"],
            (
                "--db /nonexistent/x.db: the folder /nonexistent does not exist; create it or"
                " choose another path"
            ),
        ),
        (
            ["--db", "/proc/x.db"],
            (
                "--db /proc/x.db: cannot open the database: unable to open database file; check the"
                " path and its permissions, or choose another path"
            ),
        ),
        (
            ["--script", "answers.txt"],
            "--script answers.txt: cannot read the file: No such file or directory; check the path",
        ),
    ],
)
def test_demo_refuses_a_store_or_script_it_cannot_use_before_its_banner(
    argv: list[str], error: str, tmp_path: Path
) -> None:
    assert run_toolguard("demo", *argv, cwd=tmp_path) == (2, "", f"error: {error}\n")
    assert left_behind(tmp_path) == []


def test_demo_refuses_a_file_that_is_not_a_database_and_leaves_it_as_it_was(
    tmp_path: Path, notes: Path
) -> None:
    assert run_toolguard("demo", "--db", "notes.txt", cwd=tmp_path) == (
        2,
        "",
        (
            "error: --db notes.txt: it is not a SQLite database (file is not a database); give"
            " toolguard's database file or the path of a new one\n"
        ),
    )
    assert notes.read_text(encoding="utf-8") == NOT_A_DATABASE
    assert left_behind(tmp_path, notes) == []


def test_demo_with_a_new_database_that_quits_at_once_leaves_no_file(tmp_path: Path) -> None:
    """The check opens a new file and removes it again; the demo makes it at the first message."""
    code, out, err = run_toolguard("demo", "--db", "new.sqlite3", "--non-interactive", cwd=tmp_path)
    assert (code, err) == (0, "")
    assert out.splitlines()[2] == "Store: SQLite file new.sqlite3"
    assert out.endswith("Bye.\n")
    assert left_behind(tmp_path) == []


# ---------------------------------------------------------------------------- serve


def test_serve_on_a_taken_port_says_so_in_one_line_and_makes_no_database(
    tmp_path: Path, busy_port: int
) -> None:
    assert run_toolguard("serve", "--port", str(busy_port), cwd=tmp_path) == (
        2,
        "",
        (
            f"error: --port {busy_port}: cannot listen on 127.0.0.1:{busy_port}: the port is in"
            " use by another program; choose another --port\n"
        ),
    )
    assert left_behind(tmp_path) == []  # no toolguard.sqlite3


def test_serve_on_an_address_of_another_machine_blames_host(tmp_path: Path) -> None:
    assert run_toolguard("serve", "--host", NOT_HERE, "--no-auth", cwd=tmp_path) == (
        2,
        "",
        (
            f"error: --host {NOT_HERE}: cannot listen on {NOT_HERE}:8000: {NOT_HERE} is not an"
            " address of this machine; give one of its addresses, e.g. 127.0.0.1 (this machine"
            " only) or 0.0.0.0 (all of its addresses)\n"
        ),
    )
    assert left_behind(tmp_path) == []


def test_serve_refuses_a_file_that_is_not_a_database(tmp_path: Path, notes: Path) -> None:
    assert run_toolguard("serve", "--db", str(notes), "--port", "0", cwd=tmp_path) == (
        2,
        "",
        (
            f"error: --db {notes}: it is not a SQLite database (file is not a database); give"
            " toolguard's database file or the path of a new one\n"
        ),
    )
    assert notes.read_text(encoding="utf-8") == NOT_A_DATABASE
    assert left_behind(tmp_path, notes) == []


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
@pytest.mark.parametrize("port", ["99999", "-1", "eighty"])
def test_a_port_out_of_range_is_blamed_on_port(command: str, port: str, tmp_path: Path) -> None:
    assert run_toolguard(command, "--port", port, cwd=tmp_path) == (
        2,
        "",
        (
            f"toolguard {command}: error: argument --port: expected a port number from 1 to"
            f" 65535 (or 0 for any free port), got {port!r}\n"
        ),
    )
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["serve", "--prot", "8001"],
            (
                "toolguard serve: error: unknown option --prot (did you mean --port?); toolguard"
                " serve --help lists the options"
            ),
        ),
        (
            ["serve", "--no-auht", "--dbb=x.db"],
            (
                "toolguard serve: error: unknown options --no-auht (did you mean --no-auth?), --dbb"
                " (did you mean --db?); toolguard serve --help lists the options"
            ),
        ),
        (
            ["serve", "extra"],
            (
                "toolguard serve: error: unknown argument 'extra'; toolguard serve --help lists the"
                " options"
            ),
        ),
        (
            ["mcp-proxy", "--upstream-ulr", "http://127.0.0.1:9/mcp"],
            (
                "toolguard mcp-proxy: error: unknown option --upstream-ulr (did you mean"
                " --upstream-url?); toolguard mcp-proxy --help lists the options"
            ),
        ),
        (
            ["demo", "--non-interative"],
            (
                "toolguard demo: error: unknown option --non-interative (did you mean"
                " --non-interactive?); toolguard demo --help lists the options"
            ),
        ),
        (
            ["demo", "--colour"],
            (
                "toolguard demo: error: unknown option --colour; toolguard demo --help lists the"
                " options"
            ),
        ),
        (
            ["serv", "--port", "8001"],
            (
                "toolguard: error: unknown command 'serv' (did you mean serve?); the commands are"
                " demo, serve, mcp-proxy, tools, token, link, review, stats, replay"
            ),
        ),
    ],
)
def test_a_mistyped_option_or_command_names_the_close_match(
    argv: list[str], error: str, tmp_path: Path
) -> None:
    assert run_toolguard(*argv, cwd=tmp_path) == (2, "", f"{error}\n")
    assert left_behind(tmp_path) == []


def test_serve_on_port_0_names_the_port_it_listens_on(tmp_path: Path) -> None:
    """The start-up line, the sign-in link and the page all use the port the system picked."""
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--port", "0", "--db", ":memory:"],
            cwd=tmp_path,
            env=command_env(),
            stdout=stdout,
            stderr=stderr,
        )
    try:
        lines = _first_lines(out, process, 2)
        found = re.fullmatch(r"toolguard serve: http://127\.0\.0\.1:(\d+)/ \| .*", lines[0])
        assert found is not None, lines
        port = int(found.group(1))
        page = f"http://127.0.0.1:{port}/"
        assert port != 0
        assert lines[0] == (
            f"toolguard serve: {page} | model: built-in scripted demo model (offline)"
            " | db: :memory: | sign-in: link"
        )
        sign_in_link(lines[1], "serve", page)
        answer = wait_for_page(process, page)
        assert answer is not None
        assert answer.status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 130


def _first_lines(path: Path, process: subprocess.Popen[bytes], count: int) -> list[str]:
    """The first ``count`` lines a process writes to the file at ``path`` (within 30 s)."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        lines = path.read_text().splitlines()
        if len(lines) >= count:
            return lines[:count]
        time.sleep(0.05)
    return path.read_text().splitlines()


# ---------------------------------------------------------------------------- mcp-proxy


def test_mcp_proxy_on_an_address_of_another_machine_blames_host(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    argv = ["--db", str(db), "--host", NOT_HERE, "--no-auth", "--", *UPSTREAM]
    assert run_toolguard("mcp-proxy", *argv, cwd=ROOT) == (
        2,
        "",
        (
            f"error: --host {NOT_HERE}: the approval page cannot listen on {NOT_HERE}:8765:"
            f" {NOT_HERE} is not an address of this machine; give one of its addresses, e.g."
            " 127.0.0.1 (this machine only)\n"
        ),
    )
    assert left_behind(tmp_path) == []


def test_mcp_proxy_whose_upstream_fails_leaves_no_database(tmp_path: Path) -> None:
    """The database is checked (made and removed again) before the upstream starts."""
    db = tmp_path / "m.sqlite3"
    command = [sys.executable, "-c", "raise SystemExit(3)"]
    code, out, err = run_toolguard(
        "mcp-proxy", "--db", str(db), "--port", str(free_port()), "--", *command, cwd=ROOT
    )
    assert (code, out) == (2, "")
    assert err.startswith(f"error: the upstream command {command[0]} -c ")
    assert left_behind(tmp_path) == []


@pytest.mark.parametrize(
    ("sign_in", "shown"),
    [(["--tokens", "TOKENS"], " | sign-in: tokens"), ([], " | sign-in: link")],
    ids=["tokens", "link"],
)
def test_mcp_proxy_names_the_real_port_and_its_sign_in(
    sign_in: list[str], shown: str, tmp_path: Path
) -> None:
    """As serve's, the status line ends with the sign-in; ``--port 0`` shows the port picked."""
    pytest.importorskip("mcp")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice sha256:{'0' * 64}\n", encoding="utf-8")
    sign_in = [str(tokens) if word == "TOKENS" else word for word in sign_in]
    db = tmp_path / "m.sqlite3"
    argv = ["mcp-proxy", "--db", str(db), "--port", "0", *sign_in, "--", *UPSTREAM]
    with subprocess.Popen(
        [sys.executable, "-m", "toolguard", *argv],
        cwd=ROOT,
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl")},
        stdin=subprocess.PIPE,  # open and silent: the gateway waits on it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        stderr = process.stderr
        assert stderr is not None
        first: list[str] = []
        reader = threading.Thread(
            target=lambda: first.append(stderr.readline().decode()), daemon=True
        )
        reader.start()
        reader.join(timeout=30)
        try:
            found = re.match(
                r"toolguard mcp-proxy: approval page http://127\.0\.0\.1:(\d+)/ ", first[0]
            )
            assert found is not None, first
            port = int(found.group(1))
            assert port != 0
            start, upstream = first[0].split(" | upstream: ")
            assert start == (
                f"toolguard mcp-proxy: approval page http://127.0.0.1:{port}/ | db: {db}"
                " | ttl: 300s"
            )
            assert upstream.startswith(sys.executable)
            assert upstream.endswith(f"{shown}\n")
            assert "sign-in" not in upstream.removesuffix(f"{shown}\n")
            page = wait_for_page(process, f"http://127.0.0.1:{port}/")  # type: ignore[arg-type]
            assert page is not None
            assert page.status_code == 200
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=20) == 143
