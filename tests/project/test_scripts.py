"""The README's two commands: what scripts/demo installs and how scripts/test runs PostgreSQL."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _demo_extras() -> set[str]:
    text = (ROOT / "scripts" / "demo").read_text()
    found = re.search(r"^EXTRAS=([a-z,-]+)$", text, re.MULTILINE)
    assert found is not None, "scripts/demo installs the project with extras"
    assert '-e ".[$EXTRAS]"' in text
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


def test_test_script_installs_tmux_as_root_and_goes_on_without_it() -> None:
    """As nginx: only when tmux is missing, as root, with apt-get; a failed install is one
    warning line (the terminal tests then skip, and fail in CI)."""
    lines = (ROOT / "scripts" / "test").read_text().splitlines()
    start = lines.index(
        'if ! command -v tmux >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null;'
        " then"
    )
    assert lines[start + 1 : start + 6] == [
        '  echo "== installing Debian\'s tmux for the terminal tests"',
        (
            "  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq"
            " tmux; } >/dev/null 2>&1; then"
        ),
        (
            '    echo "warning: tmux could not be installed; the terminal tests will be skipped'
            ' (in CI: fail)" >&2'
        ),
        "  fi",
        "fi",
    ]
    assert start < lines.index('echo "== pytest"')


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


FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for the venv's python: records each call; pip "installs" (or fails with FAIL_PIP).
echo "python $*" >> "$CALLS"
if [ "$1" = -c ]; then exec "$REAL_PYTHON" "$@"; fi
if [ "$1 $2" = "-m pip" ]; then
  if [ -n "${FAIL_PIP:-}" ]; then echo "pip: no network" >&2; exit 1; fi
  printf '#!/usr/bin/env bash\\necho "toolguard $*" >> "$CALLS"\\n' > "$(dirname "$0")/toolguard"
  chmod +x "$(dirname "$0")/toolguard"
fi
"""
PIP_INSTALL = "python -m pip install --quiet --disable-pip-version-check -e .[openai,http,postgres]"


class DemoCheckout:
    """A copy of scripts/demo and pyproject.toml with a fake venv python that records its calls."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "scripts").mkdir()
        shutil.copy2(ROOT / "scripts" / "demo", root / "scripts" / "demo")
        shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
        python = root / ".venv" / "bin" / "python"
        python.parent.mkdir(parents=True)
        python.write_text(FAKE_PYTHON)
        python.chmod(0o755)
        self.calls = root / "calls.txt"
        self.stamp = root / ".venv" / "toolguard-demo.stamp"

    def run(self, *args: str, **env: str) -> tuple[int, list[str], str]:
        """Run scripts/demo ARGS; its exit code, the calls made (hashing left out), its stderr."""
        self.calls.write_text("")
        done = subprocess.run(
            [shutil.which("bash") or "bash", str(self.root / "scripts" / "demo"), *args],
            env={**os.environ, "CALLS": str(self.calls), "REAL_PYTHON": sys.executable, **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        calls = [c for c in self.calls.read_text().splitlines() if not c.startswith("python -c")]
        return done.returncode, calls, done.stderr

    def wanted_stamp(self) -> str:
        digest = hashlib.sha256((self.root / "pyproject.toml").read_bytes()).hexdigest()
        return f"{digest} openai,http,postgres\n"


def test_demo_installs_once_and_again_only_when_pyproject_changes(tmp_path: Path) -> None:
    """The first run installs and writes the stamp; a second run goes straight to the demo;
    a changed pyproject.toml or a damaged stamp installs again."""
    checkout = DemoCheckout(tmp_path)
    assert checkout.run("--help") == (0, [PIP_INSTALL, "toolguard demo --help"], "")
    assert checkout.stamp.read_text() == checkout.wanted_stamp()
    assert checkout.run("--help") == (0, ["toolguard demo --help"], "")
    assert checkout.run() == (0, ["toolguard demo"], "")

    with (tmp_path / "pyproject.toml").open("a") as pyproject:
        pyproject.write("\n# a new dependency\n")
    assert checkout.run() == (0, [PIP_INSTALL, "toolguard demo"], "")
    assert checkout.stamp.read_text() == checkout.wanted_stamp()
    assert checkout.run() == (0, ["toolguard demo"], "")

    checkout.stamp.write_text("0" * 64 + " openai\n")
    assert checkout.run() == (0, [PIP_INSTALL, "toolguard demo"], "")
    (tmp_path / ".venv" / "bin" / "toolguard").unlink()  # an installation removed by hand
    assert checkout.run() == (0, [PIP_INSTALL, "toolguard demo"], "")


def test_demo_writes_no_stamp_when_the_install_fails(tmp_path: Path) -> None:
    """A failed pip stops the script and leaves no stamp, so the next run installs again."""
    checkout = DemoCheckout(tmp_path)
    assert checkout.run(FAIL_PIP="1") == (1, [PIP_INSTALL], "pip: no network\n")
    assert not checkout.stamp.exists()
    assert checkout.run() == (0, [PIP_INSTALL, "toolguard demo"], "")
    assert checkout.run(FAIL_PIP="1") == (0, ["toolguard demo"], "")
