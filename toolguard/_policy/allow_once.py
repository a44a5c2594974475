"""One-shot permissions to run an exact guarded call outside the runner.

A grant is one object that knows its own state: it is used up by one call
(under a lock, so threads racing inside the block cannot both use it) and
closed when its ``with`` block exits, so copies of the context taken inside
the block (``contextvars.copy_context()``, task groups, ``run_in_executor``,
threads started with a copied context) hold a dead grant afterwards.
"""

from __future__ import annotations

import json
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from toolguard._core.catalog import message
from toolguard._core.errors import QuorumReviewerError, ReviewExpiredError
from toolguard._core.jsonable import dumps
from toolguard._core.records import ToolCall

Complete = Callable[[dict[str, Any]], dict[str, Any]]

_MISSING = object()


# ----------------------------------------------------------------------------- exact comparison


def _key(value: Any) -> Any:
    """A hashable stand-in for a dict key or set item that keeps its type (1, 1.0, True differ)."""
    cls = type(value)
    if cls is tuple:
        return (tuple, tuple(_key(v) for v in value))
    if cls is frozenset:
        return (frozenset, frozenset(_key(v) for v in value))
    if cls is float:
        if math.isnan(value):
            return (float, "nan")
        return (float, value, math.copysign(1.0, value))
    return (cls, value)


def _same(a: Any, b: Any) -> bool:
    cls = type(a)
    if cls is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):  # NaN: the same argument as another NaN
            return math.isnan(b)
        return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, str | bytes | int | type(None)):
        return bool(a == b)
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        keys = {_key(k): k for k in b}
        for k, v in a.items():
            other = keys.get(_key(k), _MISSING)
            if other is _MISSING or not _same(v, b[other]):
                return False
        return True
    if isinstance(a, list | tuple | deque):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, set | frozenset):
        return len(a) == len(b) and {_key(x) for x in a} == {_key(x) for x in b}
    return (a == b) is True


def same_arguments(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two argument dicts are exactly the same call.

    Types count: ``1``, ``1.0`` and ``True`` differ, a tuple is not a list,
    ``{1: x}`` is not ``{"1": x}``; NaN matches NaN. Other objects compare
    with ``==`` (which must return ``True`` itself). Anything that cannot be
    compared (too deep, a comparison that raises) is not the same.
    """
    try:
        return _same(dict(a), dict(b))
    except Exception:  # RecursionError, a raising __eq__ or __hash__: not the same call
        return False


# ----------------------------------------------------------------------------- origins of calls


class _Origin:
    """The guarded function and the Python arguments behind an ``ApprovalRequiredError.call``."""

    __slots__ = ("approvals", "args", "deadline", "func", "real", "ref", "reviewed", "ttl")

    def __init__(
        self,
        call: ToolCall,
        func: object,
        args: dict[str, Any],
        key: int,
        real: Any,
        *,
        ttl: float | None = None,
        approvals: int = 1,
    ) -> None:
        self.ref = weakref.ref(call, lambda _: _ORIGINS.pop(key, None))
        self.func = func
        self.args = args
        self.reviewed = dumps(call.args)
        self.real = real  # JSON snapshot of the real arguments (call.args may be redacted)
        self.ttl = ttl
        self.deadline = time.monotonic() + ttl if ttl is not None else None
        self.approvals = approvals


_ORIGINS: dict[int, _Origin] = {}


def remember_call(
    call: ToolCall,
    func: object,
    args: dict[str, Any],
    real: Mapping[str, Any] | None = None,
    *,
    ttl: float | None = None,
    approvals: int = 1,
) -> None:
    """Record which function (and Python arguments) the ``call`` of an approval error is for.

    ``real``: the JSON form of the real arguments when ``call.args`` shows
    redacted values (default: ``call.args``). ``ttl``: the tool's review
    deadline in seconds, from now; ``approvals``: its quorum.
    """
    key = id(call)
    snapshot = _snapshot(real if real is not None else call.args)
    _ORIGINS[key] = _Origin(call, func, dict(args), key, snapshot, ttl=ttl, approvals=approvals)


def _origin(call: ToolCall) -> _Origin | None:
    origin = _ORIGINS.get(id(call))
    if origin is None or origin.ref() is not call or dumps(call.args) != origin.reviewed:
        return None  # not ours, or its args were changed in place: go by what it says now
    return origin


# ----------------------------------------------------------------------------- grants


class _Grant:
    """Permission for one call; dead once used or once its block has exited."""

    __slots__ = (
        "_lock",
        "args",
        "call_id",
        "closed",
        "deadline",
        "func",
        "name",
        "reviewed",
        "ttl",
        "used",
    )

    def __init__(
        self,
        name: str,
        func: object,
        args: dict[str, Any],
        reviewed: Any,
        origin: _Origin | None = None,
    ) -> None:
        self.name = name
        self.func = func  # None: any guarded function of that name
        self.args = args
        self.reviewed = reviewed  # a JSON snapshot: what the person approved
        self.used = False
        self.closed = False
        # The deadline of the review this grant answers: past it, the call never starts.
        self.deadline = origin.deadline if origin is not None else None
        self.ttl = origin.ttl if origin is not None else None
        call = origin.ref() if origin is not None else None
        self.call_id = call.id if call is not None else name
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def consume(self, name: str, func: object, args: dict[str, Any], complete: Complete) -> bool:
        if name != self.name or (self.func is not None and self.func is not func):
            return False
        with self._lock:
            if self.used or self.closed:
                return False
            if not same_arguments(complete(self.args), args):
                return False
            if dumps(complete(self.reviewed)) != dumps(args):
                return False  # the arguments were changed in place since they were approved
            self.used = True
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _expired(self.call_id, name, self.ttl)
        return True


_active: ContextVar[tuple[_Grant, ...]] = ContextVar("toolguard_grants", default=())


def consume_grant(name: str, func: object, args: dict[str, Any], complete: Complete) -> bool:
    """Use up a grant for exactly this call, if one is active; return whether one was.

    ``complete`` fills in the tool's defaults, so a grant for ``f(5)`` covers
    ``f(5, "savings")`` when ``"savings"`` is the default, and the other way round.
    """
    grants = _active.get()
    if not grants:
        return False
    completed = complete(args)
    return any(g.consume(name, func, completed, complete) for g in reversed(grants))


class _GrantScope:
    """The context manager :func:`allow_once` returns; usable for one ``with`` block."""

    __slots__ = ("_grant", "_token")

    def __init__(self, grant: _Grant) -> None:
        self._grant = grant
        self._token: Token[tuple[_Grant, ...]] | None = None

    def __enter__(self) -> None:
        if self._token is not None or self._grant.closed:
            msg = "an allow_once() grant is good for one with block: call allow_once() again"
            raise RuntimeError(msg)
        self._token = _active.set((*_active.get(), self._grant))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._grant.close()  # first: copies of the context taken in the block see it dead
        if self._token is not None:
            _active.reset(self._token)


def _check_args(args: object) -> dict[str, Any]:
    if args is None:
        return {}
    if not isinstance(args, Mapping):
        msg = (
            "allow_once(name, args): args must be a mapping of parameter names to values,"
            f" got {type(args).__name__}"
        )
        raise TypeError(msg)
    bad = next((k for k in args if not isinstance(k, str)), _MISSING)
    if bad is not _MISSING:
        msg = f"allow_once(name, args): args must be keyed by parameter name (str), got {bad!r}"
        raise TypeError(msg)
    return dict(args)


def allow_once(
    call: ToolCall | str | Callable[..., Any], args: Mapping[str, Any] | None = None, /
) -> AbstractContextManager[None]:
    """Let exactly one call of a guarded tool, with exactly these arguments, run.

    Use it when your own loop caught :class:`~toolguard.ApprovalRequiredError`,
    a person approved the call, and you now call the tool again::

        try:
            send_email(to="alice@example.com", subject="Hi", body="...")
        except toolguard.ApprovalRequiredError as exc:
            if ask_a_human(exc.pending_review):
                with toolguard.allow_once(exc.call):
                    send_email(**exc.call.args)

    The grant covers one call, inside the ``with`` block, of exactly that
    function with exactly the same arguments (omitted arguments count with
    their defaults). ``exc.call`` remembers which guarded function raised it
    and the Python values it was called with, so another function of the
    same name is not covered, and a call with the original values (a date, a
    tuple) matches. Arguments compare exactly, types included: ``1``,
    ``1.0`` and ``True`` differ, a tuple is not a list, ``{1: ...}`` is not
    ``{"1": ...}``. A second call, or other arguments, raise
    ``ApprovalRequiredError`` again. The grant dies when the block exits,
    also for threads and tasks started inside it with a copy of the context.

    Args:
        call: the ``ToolCall`` from ``ApprovalRequiredError.call``; or a tool
            name, which matches any guarded function or tool of that name (and
            a ``ToolCall`` not from an error of this process, e.g. unpickled,
            matches like its name does); or the guarded function or
            :class:`~toolguard.Tool` itself.
        args: the arguments by parameter name, with a name or a function
            (``None``: no arguments). Not allowed with a ``ToolCall``.

    Returns:
        A context manager for one ``with`` block.

    Raises:
        TypeError: for any other ``call`` or ``args``.
    """
    if isinstance(call, ToolCall):
        if args is not None:
            msg = "allow_once(call) takes the arguments from the ToolCall: do not pass args too"
            raise TypeError(msg)
        origin = _origin(call)
        if origin is not None:
            if origin.approvals > 1:  # one person's grant can never make a quorum
                raise QuorumReviewerError(None, call.name, origin.approvals, [])
            if origin.deadline is not None and time.monotonic() >= origin.deadline:
                raise _expired(call.id, call.name, origin.ttl)
        expected = origin.args if origin is not None else dict(call.args)
        func = origin.func if origin is not None else None
        reviewed = origin.real if origin is not None else _snapshot(call.args)
        return _GrantScope(_Grant(call.name, func, expected, reviewed, origin))
    checked = _check_args(args)
    if isinstance(call, str):
        if not call:
            msg = "allow_once(name, args): name must be a tool's name, got ''"
            raise ValueError(msg)
        return _GrantScope(_Grant(call, None, checked, _snapshot(checked)))
    guarded = _guarded_tool(call)
    if guarded is None:
        msg = (
            "allow_once() takes the ToolCall from ApprovalRequiredError.call, a tool name, or a"
            f" function guarded with @requires_approval; got {_describe(call)}"
        )
        raise TypeError(msg)
    name, func = guarded
    return _GrantScope(_Grant(name, func, checked, _snapshot(checked)))


def _expired(call_id: str, name: str, ttl: float | None) -> ReviewExpiredError:
    """The error for an approval of a direct call that came after the tool's deadline."""
    text = message("approval_expired", name=name, ttl=f"{ttl:g}")
    return ReviewExpiredError(call_id, text=text)


def _snapshot(args: Mapping[str, Any]) -> Any:
    """A JSON copy of the arguments, untouched by later changes to the originals."""
    return json.loads(dumps(dict(args)))


def _guarded_tool(obj: object) -> tuple[str, object] | None:
    """``(name, function)`` of a guarded function or Tool, else ``None``."""
    built = getattr(obj, "__toolguard_tool__", None)
    tool = built if built is not None else obj
    approval = getattr(tool, "approval", _MISSING)
    name, func = getattr(tool, "name", None), getattr(tool, "func", None)
    if approval is _MISSING or approval is None or not isinstance(name, str) or func is None:
        return None
    return name, func


def _describe(obj: object) -> str:
    if callable(obj):
        return f"{getattr(obj, '__qualname__', type(obj).__name__)}, which is not guarded"
    return type(obj).__name__
