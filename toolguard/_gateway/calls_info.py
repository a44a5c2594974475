"""What the approval page shows about the gateway's calls: the upstream server and each client.

Each call the gateway holds for a review is one thread of its
:class:`~toolguard.ReviewedChat`, whose messages are the proxy's own (no person
wrote them). The page shows a call instead by what a reviewer needs to know:
which server it goes to (the upstream's command or URL and the name it gave in
its ``initialize`` answer) and which MCP client sent it (the ``clientInfo`` of
the client's ``initialize`` request). :class:`CallsInfo` keeps that, and
answers the gateway's fields of ``GET /hitl/info`` and of each item of ``GET
/hitl/reviews`` and ``GET /hitl/events``.

Every text here comes from another program (the upstream server, the MCP
client, the command line): each is cut to :data:`MAX_TEXT` characters, and
credentials in the upstream's command or URL are never shown (:func:`upstream_target`: the
values of ``NAME=VALUE`` pairs and of options named like secrets, ``Authorization``-like
headers, well-known token formats, and a URL's user, password and query).
"""

from __future__ import annotations

import collections
import re
import shlex
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from toolguard._stores.protocol import ThreadState

__all__ = [
    "HIDDEN",
    "MAX_CALLS",
    "MAX_TEXT",
    "CallsInfo",
    "implementation",
    "shown_command",
    "upstream_target",
]

MAX_TEXT: Final = 200
"""The most characters kept of a name, version, title or command line (the rest becomes ``…``)."""
MAX_CALLS: Final = 10_000
"""How many calls' clients are remembered (the oldest are forgotten first)."""
HIDDEN: Final = "***"
"""What the page shows instead of a credential in the upstream's command or URL."""

_SECRET_FLAG = re.compile(r"^--?[\w-]*(key|token|secret|password|passwd|auth|credential)", re.I)
_PAIR = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=", re.S)  # NAME=VALUE (env, docker -e, ...)
_HEADER = re.compile(
    r"^\s*((?:proxy-)?authorization|cookie|x-[\w-]*(?:key|token|secret|auth)[\w-]*)\s*:", re.I
)
_TOKEN = re.compile(
    r"(ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|sk-|xox[abprs]-|AKIA|AIza|eyJ)[\w.-]{8,}"
)  # the shapes of well-known tokens (GitHub, GitLab, OpenAI-like, Slack, AWS, Google, JWT)


def _text(value: object) -> str | None:
    """``value`` as a single line of at most :data:`MAX_TEXT` characters, or ``None``."""
    if not isinstance(value, str):
        return None
    line = " ".join(value.split())
    if not line:
        return None
    return line if len(line) <= MAX_TEXT else line[: MAX_TEXT - 1] + "…"


def implementation(value: Any) -> dict[str, str | None] | None:
    """An MCP ``Implementation`` (``serverInfo``, ``clientInfo``) as the page shows it.

    ``{"name", "version", "title"}`` (each text or ``None``), or ``None`` when it
    has no name.
    """
    name = _text(getattr(value, "name", None))
    if name is None:
        return None
    return {
        "name": name,
        "version": _text(getattr(value, "version", None)),
        "title": _text(getattr(value, "title", None)),
    }


def _clean_url(text: str) -> str:
    """A URL without its user, password, query or fragment (they may hold credentials)."""
    try:
        parts = urllib.parse.urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return HIDDEN
    if not parts.scheme or host is None:
        return text
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    if parts.username is not None or parts.password is not None:
        netloc = f"{HIDDEN}@{netloc}"
    shown = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return shown + (f"?{HIDDEN}" if parts.query else "")


def _clean_args(args: Sequence[str]) -> list[str]:
    """Arguments with credentials replaced: the value of a ``NAME=VALUE`` pair (``env
    GITHUB_TOKEN=X``, ``-e KEY=X``) and of an option named like a secret (``--api-key X``,
    ``--token=X``), the value of an ``Authorization``-like header, a word shaped like a
    well-known token (``ghp_...``, ``sk-...``), and URLs' users, passwords and queries."""
    shown: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            shown.append(HIDDEN)
            hide_next = False
        elif _SECRET_FLAG.match(arg):
            flag, equals, _ = arg.partition("=")
            shown.append(f"{flag}={HIDDEN}" if equals else flag)
            hide_next = not equals
        elif (pair := _PAIR.match(arg)) is not None:
            shown.append(f"{pair.group(1)}={HIDDEN}")
        elif (header := _HEADER.match(arg)) is not None:
            shown.append(f"{header.group(1)}: {HIDDEN}")
        elif "://" in arg:
            shown.append(_TOKEN.sub(HIDDEN, _clean_url(arg)))
        else:
            shown.append(_TOKEN.sub(HIDDEN, arg))
    return shown


def shown_command(command: str | None, args: Sequence[str] = (), url: str | None = None) -> str:
    """The upstream's command line (quoted as a shell would read it), or its URL, with every
    credential replaced by :data:`HIDDEN` (see :func:`_clean_args`); not cut."""
    if command is not None:
        return shlex.join(_clean_args([command, *args]))
    return _TOKEN.sub(HIDDEN, _clean_url(url or ""))


def upstream_target(command: str | None, args: Sequence[str] = (), url: str | None = None) -> str:
    """The upstream as the page and the status line name it: :func:`shown_command` on one line
    of at most :data:`MAX_TEXT` characters."""
    return _text(shown_command(command, args, url)) or ""


class CallsInfo:
    """The upstream server and the client of each call the gateway opened a review for.

    Args:
        upstream: the connected upstream (its ``server_info``, from its
            ``initialize`` answer, names the server when it has one).
        target: the upstream's command line or URL as :func:`upstream_target` shows it.
        limit: how many calls' clients to remember.
    """

    def __init__(self, upstream: Any = None, *, target: str = "", limit: int = MAX_CALLS) -> None:
        self.upstream = implementation(getattr(upstream, "server_info", None))
        self.target = target
        self.limit = limit
        self._clients: collections.OrderedDict[str, dict[str, str | None] | None] = (
            collections.OrderedDict()
        )

    @property
    def server(self) -> dict[str, Any]:
        """``{"target", "name", "version", "title"}``: the upstream (texts or ``None``)."""
        known = self.upstream or {}
        return {
            "target": self.target or None,
            "name": known.get("name"),
            "version": known.get("version"),
            "title": known.get("title"),
        }

    def opened(self, thread_id: str, ctx: Any) -> None:
        """Remember the client of the call whose review ``thread_id`` holds.

        ``ctx`` is the MCP request context: its session's ``client_params``
        carry the ``clientInfo`` of the client's ``initialize`` request (a
        client that sent none is remembered as unknown).
        """
        params = getattr(getattr(ctx, "session", None), "client_params", None)
        self._clients[thread_id] = implementation(getattr(params, "client_info", None))
        self._clients.move_to_end(thread_id)
        while len(self._clients) > self.limit:
            self._clients.popitem(last=False)

    def client(self, thread_id: str) -> dict[str, str | None] | None:
        """The client of that call, or ``None`` (unknown: it sent no ``clientInfo``, or the
        call was opened by an earlier gateway process)."""
        return self._clients.get(thread_id)

    def info(self) -> dict[str, Any]:
        """The gateway's fields of ``GET /hitl/info``: ``{"server": {...}}``."""
        return {"server": self.server}

    def review_fields(self, state: ThreadState) -> dict[str, Any]:
        """The gateway's fields of a pending review: ``{"call": {"server", "client"}}``."""
        return {"call": {"server": self.server, "client": self.client(state.thread_id)}}
