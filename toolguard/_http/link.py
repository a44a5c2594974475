"""The sign-in link of ``toolguard serve`` and ``toolguard mcp-proxy`` (:class:`LinkAuth`), and
the runtime files ``toolguard link`` reads.

Without ``--tokens``, ``--auth-header`` or ``--no-auth``, the commands' page and API answer only
a browser that opened the server's sign-in link, ``http://HOST:PORT/hitl/sign-in?code=CODE``:
the person at the machine, who sees the command's output or runs ``toolguard link``. Being on
this machine is not enough: every program an agent runs here reaches the port, but not the
code.

* A code is ``secrets.token_urlsafe(32)`` (256 bits). It signs in **one** browser: the first
  request that presents it gets the session cookie, and the server makes a new code at once
  (written to the runtime file, never printed again), so a link read later from a log, the
  terminal's scrollback or the browser's history signs nobody in.
* The server keeps only the current code's SHA-256 and compares a presented code's hash with
  :func:`hmac.compare_digest`.
* The session is :class:`~toolguard._http.auth.TokenAuth`'s signed cookie (``HttpOnly``,
  ``SameSite=Strict``), for one reviewer: :func:`local_reviewer`, the name of the user who runs
  the server. A restart (a new secret) signs every browser out.

The runtime file of a running server (``<command>-<pid>.json`` in :func:`runtime_dir`,
mode 0600 in a folder of mode 0700) holds its current link; the server removes it when it stops,
and ``toolguard link`` skips (and removes) the file of a server that is gone.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the routes' annotations.

import contextlib
import getpass
import hmac
import json
import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import RedirectResponse

from toolguard._http.auth import (
    _NAME,
    DEFAULT_SESSION_SECONDS,
    SESSION_COOKIE,
    TokenAuth,
    _Authenticator,
    _refuse,
    token_hash,
)

__all__ = [
    "RUNTIME_DIR_ENV",
    "LinkAuth",
    "RunningServer",
    "link_lines",
    "local_reviewer",
    "published",
    "running_servers",
    "runtime_dir",
]

RUNTIME_DIR_ENV: Final = "TOOLGUARD_RUNTIME_DIR"
"""The environment variable naming the folder of the runtime files (see :func:`runtime_dir`)."""

SIGN_IN_PATH: Final = "/sign-in"
"""The path of the sign-in link under the API's prefix: ``/hitl/sign-in?code=CODE``."""

CHALLENGE: Final = 'SignInLink realm="toolguard"'
"""The ``WWW-Authenticate`` of a 401: the page shows how to get a link."""

LOCAL_FALLBACK: Final = "local"
"""The reviewer when the user's name is not a reviewer name (letters, digits, ``. _ @ + -``)."""

_MAX_CODE: Final = 1024

NO_SESSION: Final = (
    "Sign-in required: open this server's sign-in link; toolguard link prints it in a terminal"
    " on this machine."
)
ENDED: Final = (
    "Sign-in required: the session has ended (expired, or the server restarted); open a new"
    " sign-in link: toolguard link prints it in a terminal on this machine."
)
USED: Final = (
    "Sign-in failed: this sign-in link was used already or is not this server's (a link signs"
    " in one browser); toolguard link prints a new one in a terminal on this machine. If you"
    " did not use it, someone else did: restart the server to sign every browser out."
)


def local_reviewer() -> str:
    """The reviewer of a sign-in link: the name of the user running the server.

    :func:`getpass.getuser` (``LOGNAME``, ``USER``, ..., else the account's name), or
    :data:`LOCAL_FALLBACK` when that is no reviewer name.
    """
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        name = ""
    return name if _NAME.match(name) else LOCAL_FALLBACK


class LinkAuth(_Authenticator):
    """The person at the machine signs in by opening the server's one-time sign-in link.

    ``GET /hitl/sign-in?code=CODE`` with the current code sets the session cookie and
    redirects to the page (``303``, ``Location: /``); the code is then spent and a new one
    made (:attr:`on_link` is told the new link). A wrong or spent code is a 401 with
    :data:`USED`, unless the browser is signed in already (then it is simply redirected).
    Every other route under the prefix needs the cookie (401 otherwise); ``GET
    /hitl/session`` says who is signed in.

    Args:
        reviewer: the name of every session (see :func:`local_reviewer`).
        session_seconds: how long a session lasts (default 12 hours).
    """

    challenge = CHALLENGE

    def __init__(self, reviewer: str, *, session_seconds: int = DEFAULT_SESSION_SECONDS) -> None:
        # The cookies are TokenAuth's, for one reviewer whose "token" nobody knows.
        unknown = "sha256:" + token_hash(secrets.token_urlsafe(32))
        self._sessions = TokenAuth({reviewer: unknown}, session_seconds=session_seconds)
        self.reviewer = reviewer
        self.base_url: str | None = None
        self.on_link: Callable[[str], None] | None = None
        self._code_hash: str | None = None  # no code yet: nobody can sign in
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LinkAuth({self.reviewer!r})"

    # ---------------------------------------------------------------- codes

    def new_link(self) -> str:
        """A new code (the previous one stops working), as the link of :attr:`base_url`.

        :attr:`on_link` is told the link first. Raises ``RuntimeError`` without ``base_url``.
        """
        if self.base_url is None:
            msg = "LinkAuth.base_url is not set: the link needs the page's address"
            raise RuntimeError(msg)
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._code_hash = token_hash(code)
        link = f"{self.base_url.rstrip('/')}/hitl{SIGN_IN_PATH}?code={code}"
        if self.on_link is not None:
            self.on_link(link)
        return link

    def use_code(self, presented: str) -> bool:
        """Whether ``presented`` is the current code; if so it is spent and a new one made."""
        if not presented or len(presented) > _MAX_CODE:
            return False
        digest = token_hash(presented)
        with self._lock:
            current = self._code_hash
            if current is None or not hmac.compare_digest(digest, current):
                return False
            self._code_hash = None
        self.new_link()
        return True

    # ---------------------------------------------------------------- requests

    def identify(self, request: Request) -> str:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            raise _refuse(NO_SESSION, self.challenge)
        name = self._sessions.session_reviewer(cookie)
        if name is None:
            raise _refuse(ENDED, self.challenge)
        return name

    def add_session_routes(self, router: APIRouter) -> None:
        super().add_session_routes(router)

        @router.get(
            SIGN_IN_PATH,
            status_code=status.HTTP_303_SEE_OTHER,
            response_class=RedirectResponse,
            responses={401: {"description": "The code is not this server's current one."}},
        )
        async def sign_in_with_link(request: Request) -> Response:
            """Open the sign-in link: the session cookie, and a redirect to the page."""
            codes = request.query_params.getlist("code")
            signed_in = self._signed_in(request)
            if len(codes) == 1 and self.use_code(codes[0]):
                answer = RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER)
                value = self._sessions.session_cookie(self.reviewer)
                self._sessions._set_cookie(answer, request, value, self._sessions.session_seconds)
                return answer
            if signed_in:  # e.g. the link opened again in the browser it signed in
                return RedirectResponse("/", status_code=status.HTTP_303_SEE_OTHER)
            raise _refuse(USED, self.challenge)

    def _signed_in(self, request: Request) -> bool:
        cookie = request.cookies.get(SESSION_COOKIE)
        return bool(cookie) and self._sessions.session_reviewer(cookie or "") is not None


# ---------------------------------------------------------------------------- runtime files


def runtime_dir() -> Path:
    """The folder of this user's runtime files.

    ``TOOLGUARD_RUNTIME_DIR`` when set; else ``$XDG_RUNTIME_DIR/toolguard``; else
    ``%LOCALAPPDATA%\\toolguard\\runtime`` on Windows and ``~/.local/state/toolguard/runtime``
    elsewhere.
    """
    given = os.environ.get(RUNTIME_DIR_ENV)
    if given:
        return Path(given)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "toolguard"
    local = os.environ.get("LOCALAPPDATA")
    if os.name == "nt" and local:
        return Path(local) / "toolguard" / "runtime"
    return Path.home() / ".local" / "state" / "toolguard" / "runtime"


def _private_folder(folder: Path) -> None:
    """Create ``folder`` (mode 0700) if needed; refuse one another user owns or can write."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.name != "posix":
        return
    info = folder.stat()
    if info.st_uid != os.getuid():
        msg = f"{folder} belongs to another user"
        raise PermissionError(msg)
    if info.st_mode & 0o077:
        folder.chmod(0o700)


class RuntimeFile:
    """The runtime file of this server: ``<command>-<pid>.json``, mode 0600, rewritten whole."""

    def __init__(self, command: str, url: str, about: str) -> None:
        self.path = runtime_dir() / f"{command}-{os.getpid()}.json"
        self.fields: dict[str, Any] = {
            "command": command,
            "pid": os.getpid(),
            "url": url,
            "about": about,
        }

    def write(self, link: str) -> None:
        """Write the file with ``link`` (atomically: a reader sees the old or the new one).

        Raises:
            OSError: the folder or the file cannot be written.
        """
        _private_folder(self.path.parent)
        temporary = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        handle = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({**self.fields, "link": link}, out)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise

    def remove(self) -> None:
        """Remove the file (nothing when it is gone already)."""
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass(frozen=True, slots=True)
class RunningServer:
    """A running server of this user, as its runtime file describes it."""

    command: str
    pid: int
    url: str
    about: str
    link: str


def _alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # os.kill would end the process on Windows: believe the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read(path: Path) -> RunningServer | None:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        found = RunningServer(
            command=data["command"],
            pid=data["pid"],
            url=data["url"],
            about=data["about"],
            link=data["link"],
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None
    texts = (found.command, found.url, found.about, found.link)
    if not all(isinstance(text, str) for text in texts) or type(found.pid) is not int:
        return None
    return found


def running_servers() -> list[RunningServer]:
    """This user's running servers with a sign-in link, oldest process first.

    A file whose process is gone is removed; an unreadable one is skipped.
    """
    folder = runtime_dir()
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return []
    found: list[RunningServer] = []
    for path in paths:
        server = _read(path)
        if server is None:
            continue
        if not _alive(server.pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        found.append(server)
    return sorted(found, key=lambda server: server.pid)


def link_lines(command: str, link: str, problem: str | None) -> str:
    """The start-up lines of the sign-in link (and the warning when no runtime file was kept)."""
    lines = (
        f"toolguard {command}: sign in on the approval page with this link (it works once;"
        f" toolguard link prints a new one): {link}\n"
    )
    if problem is not None:
        lines += (
            f"warning: cannot keep the sign-in link in {problem}; toolguard link will not"
            " list this server\n"
        )
    return lines


@contextlib.contextmanager
def published(auth: LinkAuth, command: str, url: str, about: str) -> Any:
    """While inside: ``auth`` makes links for ``url``, kept in this server's runtime file.

    Yields ``(link, problem)``: the first link, and why the runtime file could not be written
    (``None`` when it was; ``toolguard link`` then does not know this server). The file is
    removed on the way out.
    """
    runtime = RuntimeFile(command, url, about)
    problems: list[str] = []

    def keep(link: str) -> None:
        try:
            runtime.write(link)
        except OSError as exc:
            problems.append(f"{runtime.path}: {exc.strerror or exc}")

    auth.base_url = url
    auth.on_link = keep
    try:
        with _removed_on_sigterm(runtime):
            link = auth.new_link()
            yield link, (problems[0] if problems else None)
    finally:
        auth.on_link = None
        runtime.remove()


@contextlib.contextmanager
def _removed_on_sigterm(runtime: RuntimeFile) -> Iterator[None]:
    """While inside: SIGTERM removes ``runtime`` first, then takes its previous course.

    uvicorn ends a server stopped by SIGTERM by raising the signal again after its
    graceful shutdown, with the handler it found (this one): the process then ends as
    killed by SIGTERM, and no ``finally`` after it runs. Only in the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(number: int, frame: Any) -> None:
        runtime.remove()
        if callable(previous):
            previous(number, frame)
            return
        signal.signal(number, previous if previous is not None else signal.SIG_DFL)
        signal.raise_signal(number)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
