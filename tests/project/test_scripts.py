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
