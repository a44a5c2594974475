"""One-shot permissions to run an exact guarded call outside the runner."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from toolguard._json import dumps
from toolguard._models import ToolCall


class _Grants:
    __slots__ = ("_counts", "_lock")

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._counts[key] += 1

    def consume(self, key: tuple[str, str]) -> bool:
        with self._lock:
            if self._counts[key] > 0:
                self._counts[key] -= 1
                return True
            return False


_active: ContextVar[tuple[_Grants, ...]] = ContextVar("toolguard_grants", default=())


def grant_key(name: str, args: Mapping[str, Any]) -> tuple[str, str]:
    """The identity of a call for a grant: its name and canonical JSON arguments."""
    return (name, dumps(dict(args)))


def consume_grant(name: str, args: Mapping[str, Any]) -> bool:
    """Use up a grant for exactly this call, if one is active; return whether one was."""
    scopes = _active.get()
    if not scopes:
        return False
    key = grant_key(name, args)
    return any(scope.consume(key) for scope in reversed(scopes))


@contextmanager
def allow_once(call: ToolCall | str, args: Mapping[str, Any] | None = None, /) -> Iterator[None]:
    """Let exactly one call of a guarded tool, with exactly these arguments, run.

    Use it when your own loop caught :class:`~toolguard.ApprovalRequiredError`,
    a person approved the call, and you now call the tool again::

        try:
            send_email(to="alice@example.com", subject="Hi", body="...")
        except toolguard.ApprovalRequiredError as exc:
            if ask_a_human(exc.pending_review):
                with toolguard.allow_once(exc.call):
                    send_email(**exc.call.args)

    The grant covers one call with the same tool name and the same arguments
    (compared as canonical JSON); a second call, or a call with other
    arguments, raises ``ApprovalRequiredError`` again. Unused grants end with
    the ``with`` block. Grants follow the context, so a sync tool run in a
    worker thread by anyio inside the block sees them.

    Args:
        call: the ``ToolCall`` from ``ApprovalRequiredError.call``, or a tool name.
        args: the arguments, when ``call`` is a name.
    """
    if isinstance(call, ToolCall):
        key = grant_key(call.name, call.args)
    else:
        key = grant_key(call, args or {})
    scope = _Grants()
    scope.add(key)
    token = _active.set((*_active.get(), scope))
    try:
        yield
    finally:
        _active.reset(token)
