"""The README's two commands: what scripts/demo installs and how scripts/test runs PostgreSQL."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _demo_extras() -> set[str]:
    text = (ROOT / "scripts" / "demo").read_text()
    found = re.search(r"-e '\.\[([a-z,-]+)\]'", text)
    assert found is not None, "scripts/demo installs the project with extras"
    return set(found.group(1).split(","))


def test_demo_venv_has_what_every_readme_command_needs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "toolguard serve" in readme
    # `toolguard serve` needs the http extra, the demo with a real model the openai extra,
    # and the README's PostgreSQL store the postgres extra.
    assert _demo_extras() >= {"openai", "http", "postgres"}


def test_test_script_uses_a_postgres_of_its_own_and_stops_it() -> None:
    text = (ROOT / "scripts" / "test").read_text()
    assert "TOOLGUARD_PG_DIR=${TOOLGUARD_PG_DIR:-/tmp/toolguard-pg-$CHECKOUT_KEY}" in text
    assert "trap 'bash scripts/start-postgres --stop" in text


def test_test_script_installs_nginx_as_root_and_goes_on_without_it() -> None:
    """Only when nginx is missing, as root, with apt-get; a failed install is one warning line
    (the tests behind nginx then skip, and fail in CI), never the end of the run."""
    lines = (ROOT / "scripts" / "test").read_text().splitlines()
    start = lines.index(
        'if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ] && [ "$(id -u)" = 0 ]'
        " && command -v apt-get >/dev/null; then"
    )
    assert lines[start + 1 : start + 6] == [
        '  echo "== installing Debian\'s nginx for the tests behind a proxy"',
        (
            "  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
            " nginx; } >/dev/null 2>&1; then"
        ),
        (
            '    echo "warning: nginx could not be installed; the tests behind nginx will be'
            ' skipped (in CI: fail)" >&2'
        ),
        "  fi",
        "fi",
    ]
    assert start < lines.index('echo "== pytest"')
    syntax = subprocess.run(
        [shutil.which("bash") or "bash", "-n", str(ROOT / "scripts" / "test")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (syntax.returncode, syntax.stderr) == (0, "")


@pytest.mark.skipif(
    not (Path("/usr/lib/postgresql").exists() and os.geteuid() == 0),
    reason="needs Debian's postgresql and root (as scripts/test provisions it)",
)
def test_start_postgres_status_is_false_for_a_checkout_without_a_server(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "TOOLGUARD_PG_DIR": str(tmp_path / "pg"), "TOOLGUARD_PG_PORT": str(port)}
    done = subprocess.run(
        [shutil.which("bash") or "bash", str(ROOT / "scripts" / "start-postgres"), "--status"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    unknown = subprocess.run(
        [shutil.which("bash") or "bash", str(ROOT / "scripts" / "start-postgres"), "--bogus"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unknown.returncode == 1
    assert unknown.stderr.strip().endswith(
        "unknown argument: --bogus (the options are --status and --stop)"
    )
