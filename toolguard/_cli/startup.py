"""Start-up checks of ``toolguard serve`` and ``toolguard mcp-proxy``.

Both commands open what they will use (the store, the upstream command) before
they print their first line, so a mistake is one ``error: ...`` line naming the
thing and the fix, and exit code 2, instead of a server that answers every
request with a 500.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

import anyio

from toolguard._stores.protocol import Store

__all__ = [
    "STORE_CHECK_SECONDS",
    "one_line",
    "open_problem",
    "sqlite_path_problem",
    "upstream_command_problem",
]

STORE_CHECK_SECONDS = 10.0
"""How long the start-up check waits for the database to answer."""

_PRIVATE_PATHS = frozenset({":memory:", ""})


def one_line(exc: BaseException) -> str:
    """The text of ``exc`` on one line (a database's multi-line message joined by spaces)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def sqlite_path_problem(path: str) -> str | None:
    """Why no SQLite file can be kept at ``path``, with the fix; ``None`` when it can.

    ``:memory:`` is always fine. The problems found are a missing folder, a
    folder that is a file, and ``path`` itself being a folder.
    """
    if path in _PRIVATE_PATHS:
        return None
    target = Path(path)
    folder = target.parent
    if not folder.exists():
        return f"the folder {folder} does not exist; create it or choose another path"
    if not folder.is_dir():
        return f"{folder} is not a folder; choose another path"
    if target.is_dir():
        example = target / "toolguard.sqlite3"
        return f"{path} is a folder; give the path of a file in it, e.g. {example}"
    return None


async def _touch(store: Store, seconds: float) -> None:
    """Read one thread of ``store`` (opening it and creating its tables), then close it."""
    try:
        with anyio.fail_after(seconds):
            await store.load("toolguard-start-up-check")
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


def open_problem(store: Store, *, timeout: float = STORE_CHECK_SECONDS) -> str | None:
    """Open ``store`` once and close it; why it failed on one line, or ``None``.

    The store is closed afterwards either way (a PostgreSQL store cannot be
    used again): give this a store of its own. A store that does not answer
    within ``timeout`` seconds fails with ``no answer within N seconds``.
    """
    try:
        anyio.run(_touch, store, timeout)
    except TimeoutError:
        return f"no answer within {timeout:g} seconds"
    except Exception as exc:  # whatever the database driver raises, told on one line
        return one_line(exc)
    return None


def upstream_command_problem(command: str, args: Sequence[str]) -> str | None:
    """Why the upstream command cannot be started, with the fix; ``None`` when it can.

    A bare name is looked up on ``PATH``; a path must be an executable file.
    """
    shown = shlex.join([command, *args])
    if os.sep in command or (os.altsep is not None and os.altsep in command):
        if not Path(command).is_file():
            return f"the upstream command {shown}: {command} does not exist; check the path"
        if not os.access(command, os.X_OK):
            return (
                f"the upstream command {shown}: {command} is not executable;"
                f" make it executable (chmod +x {shlex.quote(command)}) or run it through its"
                " interpreter"
            )
        return None
    if shutil.which(command) is None:
        return (
            f"the upstream command {shown}: {command} is not found on PATH;"
            " install it or give its full path"
        )
    return None
