"""One-shot permissions to run an exact guarded call outside the runner."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from toolguard._json import dumps
from toolguard._models import ToolCall

Complete = Callable[[dict[str, Any]], dict[str, Any]]


class _Grants:
    __slots__ = ("_entries", "_lock")

    def __init__(self, name: str, args: Mapping[str, Any]) -> None:
        self._entries: list[tuple[str, dict[str, Any]]] = [(name, dict(args))]
        self._lock = threading.Lock()

    def consume(self, name: str, target: str, complete: Complete) -> bool:
        with self._lock:
            for index, (granted_name, granted_args) in enumerate(self._entries):
                if granted_name == name and dumps(complete(granted_args)) == target:
                    del self._entries[index]
                    return True
            return False


_active: ContextVar[tuple[_Grants, ...]] = ContextVar("toolguard_grants", default=())


def consume_grant(name: str, args: dict[str, Any], complete: Complete) -> bool:
    """Use up a grant for exactly this call, if one is active; return whether one was.

    ``complete`` fills in the tool's defaults, so a grant for ``f(5)`` covers
    ``f(5, "savings")`` when ``"savings"`` is the default, and the other way round.
    """
    scopes = _active.get()
    if not scopes:
        return False
    target = dumps(complete(args))
    return any(scope.consume(name, target, complete) for scope in reversed(scopes))


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
    (compared as canonical JSON, omitted arguments with their defaults); a
    second call, or a call with other arguments, raises
    ``ApprovalRequiredError`` again. Unused grants end with
    the ``with`` block. Grants follow the context, so a sync tool run in a
    worker thread by anyio inside the block sees them.

    Args:
        call: the ``ToolCall`` from ``ApprovalRequiredError.call``, or a tool name.
        args: the arguments, when ``call`` is a name.
    """
    if isinstance(call, ToolCall):
        scope = _Grants(call.name, call.args)
    else:
        scope = _Grants(call, args or {})
    token = _active.set((*_active.get(), scope))
    try:
        yield
    finally:
        _active.reset(token)
