"""Start-up checks of ``toolguard demo``, ``toolguard serve`` and ``toolguard mcp-proxy``.

The commands open what they will use (the address, the store, the upstream command) before
they print their first line, so a mistake is one ``error: ...`` line naming the
option and the fix, and exit code 2, instead of a traceback or a server that answers every
request with a 500.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import shutil
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from toolguard._stores.protocol import Store

__all__ = [
    "STORE_CHECK_SECONDS",
    "ListenError",
    "listening_socket",
    "one_line",
    "open_problem",
    "sqlite_path_problem",
    "sqlite_problem",
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


def sqlite_problem(
    path: str, *, keep: bool = True, timeout: float = STORE_CHECK_SECONDS
) -> str | None:
    """Why toolguard cannot keep its SQLite database at ``path`` (one line with the fix), or
    ``None`` when it can: :func:`sqlite_path_problem`, then the file opened once (its tables
    created). ``keep=False``: a file the check made is removed again (with its ``-wal``,
    ``-shm`` and ``-journal`` files), so a command that stops later leaves nothing behind.
    """
    from toolguard._stores.sqlite import SQLiteStore  # noqa: PLC0415 - only when a path is given

    problem = sqlite_path_problem(path)
    if problem is not None:
        return problem
    new = path not in _PRIVATE_PATHS and not os.path.lexists(path)
    problem = open_problem(SQLiteStore(path), timeout=timeout)
    if new and not keep:
        for made in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(made)
    if problem is None:
        return None
    if problem == "file is not a database":
        return (
            "it is not a SQLite database (file is not a database); give toolguard's database"
            " file or the path of a new one"
        )
    return (
        f"cannot open the database: {problem}; check the path and its permissions,"
        " or choose another path"
    )


@dataclass(frozen=True)
class ListenError(Exception):
    """Nothing can listen on an address: which option is at fault and why (one line)."""

    option: str
    """``"--host"`` (no such address here) or ``"--port"`` (taken, or not allowed)."""
    reason: str
    """Why, e.g. ``the port is in use by another program``."""

    def __str__(self) -> str:
        return self.reason


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (``SO_REUSEADDR``, inheritable, as uvicorn binds), for
    the server to listen on; ``port`` 0 binds a free port (``getsockname()`` names it).

    Raises:
        ListenError: the address is not this machine's, the port is taken, or it needs
            rights this process lacks.
    """
    if not 0 <= port <= 65535:
        too_big = ListenError("--port", "a port is a number from 1 to 65535 (0: any free port)")
        raise too_big
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise _listen_error(host, port, exc) from None
    sock.set_inheritable(True)
    return sock


def _listen_error(host: str, port: int, exc: OSError) -> ListenError:
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return ListenError("--host", f"{host} is not an address of this machine")
    if exc.errno == errno.EADDRINUSE:
        return ListenError("--port", "the port is in use by another program")
    if exc.errno == errno.EACCES:
        return ListenError(
            "--port", "permission denied (a port below 1024 needs administrator rights)"
        )
    return ListenError("--port", exc.strerror or str(exc))


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
