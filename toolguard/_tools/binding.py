"""Binding a direct call's arguments to a function's parameters, fast and honestly.

A guarded function is judged by the signature it reports. :class:`Binder`
maps ``(*args, **kwargs)`` onto parameter names with a function compiled
from that very signature; :func:`check_signature_is_honest` refuses a
function whose reported signature binds calls differently from the one that
runs, so a call is never judged as one call and run as another.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from toolguard._policy.when import PLAIN_TYPES


def is_async_callable(obj: Any) -> bool:
    """True for coroutine functions, partials of them and objects whose ``__call__`` is one."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    return inspect.iscoroutinefunction(obj) or (
        callable(obj) and inspect.iscoroutinefunction(getattr(obj, "__call__", None))  # noqa: B004 - we want the method
    )


def reject_unwrappable(func: Any, decorator: str) -> None:
    if inspect.isclass(func):
        msg = (
            f"@{decorator} cannot wrap the class {func.__qualname__}: decorate a function or"
            " method that performs the action instead."
        )
        raise TypeError(msg)
    if not callable(func):
        msg = f"@{decorator} needs a function, got {type(func).__name__}."
        raise TypeError(msg)
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        msg = (
            f"@{decorator} cannot wrap the generator {getattr(func, '__qualname__', func)!r}:"
            " a tool must return its whole result. Collect the items into a list and return it."
        )
        raise TypeError(msg)


def _called_signature(func: Any) -> inspect.Signature | None:
    """The signature of what really runs, ignoring ``__wrapped__`` and ``__signature__``.

    ``None`` when it cannot be known (builtins, odd callables).
    """
    raw = func
    if isinstance(func, types.MethodType) and isinstance(func.__func__, types.FunctionType):
        raw = types.MethodType(_bare_function(func.__func__), func.__self__)
    elif isinstance(func, types.FunctionType):
        raw = _bare_function(func)
    try:
        return inspect.signature(raw, follow_wrapped=False)
    except (TypeError, ValueError):
        return None


def _bare_function(func: types.FunctionType) -> types.FunctionType:
    """A copy of ``func`` without ``__signature__``/``__wrapped__``: its code's own signature."""
    bare = types.FunctionType(
        func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
    )
    bare.__kwdefaults__ = func.__kwdefaults__
    return bare


def shown_signature(signature: inspect.Signature) -> str:
    """A signature as text for an error: names, kinds and defaults, no annotations."""
    params = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=params, return_annotation=signature.empty))


def _same_default(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def check_signature_is_honest(func: Any, reported: inspect.Signature, decorator: str) -> bool:
    """Refuse a function whose reported signature binds calls differently from the real one.

    The guard judges a call by the reported signature; when the callable that
    runs has a concrete signature (no ``*args``/``**kwargs``) with other
    names, order, kinds or defaults, a call could be judged as one thing and
    run as another. A ``*args, **kwargs`` wrapper (``functools.wraps``) is
    trusted to pass the call on.

    Returns:
        Whether the real signature is known to be the reported one.
    """
    called = _called_signature(func)
    if called is None:
        return False
    params = list(called.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return False
    shown = list(reported.parameters.values())
    if len(shown) == len(params) and all(
        a.name == b.name and a.kind is b.kind and _same_default(a.default, b.default)
        for a, b in zip(shown, params, strict=True)
    ):
        return True
    name = getattr(func, "__qualname__", None) or type(func).__name__
    msg = (
        f"@{decorator} cannot guard {name}: it reports the signature {shown_signature(reported)}"
        f" but is called with {shown_signature(called)} (functools.wraps or"
        " __signature__ copied another function's), so a call could be judged as one call"
        " and run as another. Make __signature__ match the real parameters, or guard the"
        " inner function."
    )
    raise TypeError(msg)


class Binder:
    """Maps ``(*args, **kwargs)`` onto parameter names quickly (no ``Signature.bind`` per call)."""

    __slots__ = ("_defaults", "_names", "_signature", "_simple", "full", "full_plain", "honest")

    def __init__(self, signature: inspect.Signature, func: Any = None) -> None:
        params = list(signature.parameters.values())
        self._signature = signature
        self.full = _compile_full_binder(params)
        self.full_plain = _compile_full_binder(params, plain_check=True)
        qualname = _qualname(func)
        if qualname is not None:
            for binder in (self.full, self.full_plain):
                if binder is not None:  # its TypeErrors then read like the function's own
                    binder.__qualname__ = qualname
        # The callable that runs binds exactly like the signature: a binding error is the
        # one the function itself would raise (set by Tool for guarded tools).
        self.honest = False
        self._simple = all(
            p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY) for p in params
        )
        self._names = tuple(
            p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)
        )
        self._defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def explicit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments the caller passed, by name (no defaults).

        Raises:
            TypeError: the arguments do not bind to the signature.
        """
        if self.full is not None:
            self.full(*args, **kwargs)  # checks the call binds, exactly as Python would
        if self._simple and len(args) <= len(self._names):
            bound = dict(zip(self._names, args, strict=False))
            if kwargs:
                bound.update(kwargs)
            return bound
        return dict(self._signature.bind(*args, **kwargs).arguments)

    def with_defaults(self, explicit: dict[str, Any]) -> dict[str, Any]:
        """``explicit`` completed with the defaults of the parameters not passed."""
        if not self._defaults:
            return explicit
        return {**self._defaults, **explicit}

    def unbindable(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TypeError:
        """The error for a guarded call whose arguments do not bind: it does not run."""
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as exc:
            reason = str(exc)
        else:  # pragma: no cover - explicit() raised, so bind() does too
            reason = "the arguments do not bind"
        shown = shown_signature(self._signature)
        return TypeError(
            f"The guarded tool `{name}` did not run: {reason} (the guard judges a call by the"
            f" signature the function reports, {name}{shown}). A decorator under"
            " @requires_approval that adds parameters must declare them in __signature__."
        )


def _qualname(func: Any) -> str | None:
    """The name Python's own binding errors would use for ``func``."""
    while isinstance(func, functools.partial):
        func = func.func
    qualname = getattr(func, "__qualname__", None)
    if isinstance(qualname, str):
        return qualname
    if func is not None and callable(func):
        call = getattr(type(func), "__call__", None)  # noqa: B004 - the method's name
        qualname = getattr(call, "__qualname__", None)
        return qualname if isinstance(qualname, str) else None
    return None


def _compile_full_binder(
    params: list[inspect.Parameter], *, plain_check: bool = False
) -> Callable[..., Any] | None:
    """Compile ``def bind(<the same parameters>): return {name: value, ...}``.

    Binding through a function with the very same parameters is what Python
    does fastest, and it fills in the defaults. ``None`` for signatures with
    ``*args``/``**kwargs`` (those take the general path). With
    ``plain_check`` it returns ``(bound, plain)``, ``plain`` telling whether
    every value is a str, int, bool or None (nothing that can be NaN inside).
    """
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    namespace: dict[str, Any] = {"__tg_plain": PLAIN_TYPES, "__tg_type": type}
    source: list[str] = []
    keyword_only_started = False
    for index, param in enumerate(params):
        if param.kind is param.KEYWORD_ONLY and not keyword_only_started:
            source.append("*")
            keyword_only_started = True
        text = param.name
        if param.default is not param.empty:
            namespace[f"__tg_default_{index}"] = param.default
            text += f"=__tg_default_{index}"
        source.append(text)
        if param.kind is param.POSITIONAL_ONLY and (
            index + 1 == len(params) or params[index + 1].kind is not param.POSITIONAL_ONLY
        ):
            source.append("/")
    body = "{" + ", ".join(f"{p.name!r}: {p.name}" for p in params) + "}"
    if plain_check:
        checks = " and ".join(f"__tg_type({p.name}) in __tg_plain" for p in params) or "True"
        body = f"{body}, ({checks})"
    code = f"def bind({', '.join(source)}):\n    return {body}\n"
    exec(code, namespace)  # noqa: S102 - compiled from a real signature's identifiers only
    binder: Callable[..., Any] = namespace["bind"]
    return binder


def caller_locals() -> dict[str, Any]:
    """The local names of our caller's caller: where a decorator was applied.

    They resolve classes defined inside a function that a tool's annotations name.
    """
    frame = sys._getframe(2)
    return dict(frame.f_locals)
