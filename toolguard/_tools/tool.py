"""Tools: functions described for a model, optionally guarded by a human approval.

:func:`tool` turns a function into a :class:`Tool` (name, description, JSON
schema built once from the signature and docstring). :func:`requires_approval`
guards a function or a tool: the guarded callable looks exactly the same to
any framework (name, docstring, signature, type hints, sync or async), but
calling it raises :class:`~toolguard.ApprovalRequiredError` instead of running
the body, unless a ``when=`` predicate says this call needs no approval or
:func:`~toolguard.allow_once` granted it.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, ParamSpec, TypeVar, overload

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from toolguard._core.checks import flag, kind, optional_text, positive_int
from toolguard._core.docstrings import parse_docstring
from toolguard._core.errors import (
    ActionRejectedError,
    ApprovalRequiredError,
    CallDeniedError,
    QuorumReviewerError,
)
from toolguard._core.jsonable import to_json_data
from toolguard._core.records import (
    ALLOWED_DECISIONS,
    DECISION_TYPES,
    REJECTED_BY_USER_MESSAGE,
    DecisionType,
    EditDecision,
    PendingReview,
    RejectDecision,
    ToolCall,
    new_id,
)
from toolguard._policy.allow_once import consume_grant, remember_call
from toolguard._policy.decisions import check_allowed
from toolguard._policy.redact import (
    check_redact,
    keep_redacted,
    redact_args,
    scrub,
    secret_names,
    secret_texts,
)
from toolguard._policy.rules import denied_text
from toolguard._policy.stand_in import get_stand_in
from toolguard._policy.when import PLAIN_TYPES, discard, has_non_finite, may_skip

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

ApprovalPredicate = Callable[[dict[str, Any]], bool]
"""Decides, from a call's arguments (by parameter name), whether it needs approval."""

_POLICY_ATTR = "__toolguard_approval__"


def _is_async_callable(obj: Any) -> bool:
    """True for coroutine functions, partials of them and objects whose ``__call__`` is one."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    return inspect.iscoroutinefunction(obj) or (
        callable(obj) and inspect.iscoroutinefunction(getattr(obj, "__call__", None))  # noqa: B004 - we want the method
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """How a guarded tool decides that a call needs a human.

    Attributes:
        when: predicate on the call's arguments (a dict by parameter name,
            defaults filled in); ``None`` means every call needs approval.
        description: text shown in the review payload instead of
            ``Tool `NAME` is awaiting approval``.
        ttl: seconds a review of this tool stays open (``None``: the chat's
            default, which by default is no deadline).
        allowed_decisions: the decisions a reviewer may take on this tool,
            a non-empty subset of ``approve``, ``edit``, ``reject`` and
            ``respond``, kept in that order (default ``ALLOWED_DECISIONS``).
            The review payload lists them and other decisions are refused.
        redact: names of parameters whose values are secret: shown as
            ``REDACTED`` to reviewers and in logs, passed for real to the
            tool (checked against the tool's parameters when it is built).
        approvals: how many distinct, named reviewers must approve a call
            before it runs (a quorum; default 1, see docs/policies.md).

    Raises:
        TypeError: ``allowed_decisions`` is not a list or tuple of texts.
        ValueError: it is empty or names an unknown decision type.
    """

    when: ApprovalPredicate | None = None
    description: str | None = None
    ttl: float | None = None
    allowed_decisions: tuple[DecisionType, ...] = ALLOWED_DECISIONS
    redact: tuple[str, ...] = ()
    approvals: int = 1

    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with these arguments must wait for a human.

        Fails closed: only ``when`` returning ``False`` itself, for arguments
        without a NaN or an infinite number anywhere, means no approval. An
        exception from ``when`` or any other return value means approval.
        """
        if self.when is None:
            return True
        return not may_skip(self.when, args)

    def __post_init__(self) -> None:
        """Refuse wrong types now, not at the first call (a bad policy would need approval)."""
        predicate: object = self.when
        if predicate is not None and (not callable(predicate) or _is_async_callable(predicate)):
            msg = f"when must be a function returning True or False, or None, got {kind(predicate)}"
            raise TypeError(msg)
        optional_text(self.description, "description")
        if self.ttl is not None:
            object.__setattr__(self, "ttl", ttl_seconds(self.ttl))
        checked = allowed_decisions_tuple(self.allowed_decisions)
        object.__setattr__(self, "allowed_decisions", checked)  # frozen: normalise once
        object.__setattr__(self, "redact", check_redact(self.redact))
        positive_int(self.approvals, "approvals")


def allowed_decisions_tuple(value: Iterable[str]) -> tuple[DecisionType, ...]:
    """Check ``allowed_decisions`` and return it in the canonical order, without repeats.

    Raises:
        TypeError: not a list, tuple or other collection of texts.
        ValueError: empty, or a value that is not a decision type.
    """
    given: object = value  # checked at run time for untyped callers
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        msg = (
            "allowed_decisions must be a list of decision types such as"
            f" ['approve', 'reject'], got {type(given).__name__}"
        )
        raise TypeError(msg)
    items = list(given)
    for item in items:
        if not isinstance(item, str):
            msg = f"allowed_decisions must hold texts, got {type(item).__name__}: {item!r}"
            raise TypeError(msg)
    unknown = [item for item in items if item not in DECISION_TYPES]
    if unknown:
        msg = (
            f"Unknown decision type {unknown[0]!r} in allowed_decisions."
            f" Choices: {list(DECISION_TYPES)}"
        )
        raise ValueError(msg)
    if not items:
        msg = f"allowed_decisions must allow at least one of {list(DECISION_TYPES)}"
        raise ValueError(msg)
    return tuple(kind for kind in DECISION_TYPES if kind in items)


def _reject_unwrappable(func: Any, decorator: str) -> None:
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


def _shown(signature: inspect.Signature) -> str:
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


def _check_signature_is_honest(func: Any, reported: inspect.Signature, decorator: str) -> bool:
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
        f"@{decorator} cannot guard {name}: it reports the signature {_shown(reported)}"
        f" but is called with {_shown(called)} (functools.wraps or"
        " __signature__ copied another function's), so a call could be judged as one call"
        " and run as another. Make __signature__ match the real parameters, or guard the"
        " inner function."
    )
    raise TypeError(msg)


class _Binder:
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
        shown = _shown(self._signature)
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


def _strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def ttl_seconds(ttl: float | timedelta | None, name: str = "ttl") -> float | None:
    """A time-to-live in seconds, checked to be a positive, finite number or timedelta."""
    if ttl is None:
        return None
    value: object = ttl  # checked at run time for untyped callers
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        msg = f"{name} must be a number of seconds, a timedelta or None, got {kind(value)}"
        raise TypeError(msg)
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not seconds > 0:
        msg = f"A review time-to-live must be positive, got {ttl!r}"
        raise ValueError(msg)
    if not math.isfinite(seconds):
        msg = f"{name} must be finite (None for no deadline), got {ttl!r}"
        raise ValueError(msg)
    return seconds


class ToolArgumentsError(ValueError):
    """Arguments that do not fit a tool's schema (internal: becomes an error tool result)."""


class Tool(Generic[P, R]):
    """A function described for a model: name, description and JSON schema.

    Build one with :func:`tool`. A ``Tool`` is called exactly like the
    function it wraps. When it is guarded (see :func:`requires_approval`),
    calling it raises :class:`~toolguard.ApprovalRequiredError` unless the
    call needs no approval or was granted with :func:`~toolguard.allow_once`.

    Attributes:
        name: the name the model sees.
        description: the docstring's prose (summary and any further
            paragraphs before the ``Args:`` section), or the override.
        parameters: JSON schema of the arguments, with per-parameter
            descriptions taken from the docstring (Google, NumPy or reST).
        func: the original function.
        is_async: whether ``func`` is a coroutine function.
        approval: the approval policy, or ``None`` for an unguarded tool.
        in_thread: whether the runner runs a sync ``func`` in a worker thread
            (the default). ``False`` (``tool(in_thread=False)`` /
            ``requires_approval(in_thread=False)``): it runs on the event
            loop's own thread, with no thread hop, and blocks the loop while
            it runs; only for quick functions. Async tools ignore it.
    """

    in_thread: bool = True

    __slots__ = (
        "__dict__",
        "_args_model",
        "_binder",
        "_field_names",
        "_positional_only",
        "approval",
        "description",
        "func",
        "is_async",
        "name",
        "parameters",
        "redact",
        "redacted",
    )

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        approval: ApprovalPolicy | None = None,
        redact: Iterable[str] = (),
        in_thread: bool = True,
        _localns: Mapping[str, Any] | None = None,
    ) -> None:
        _reject_unwrappable(func, "tool")
        optional_text(name, "name", empty=False)
        optional_text(description, "description")
        if not flag(in_thread, "in_thread"):
            self.in_thread = False
        policy: object = approval  # checked at run time for untyped callers
        if policy is not None and not isinstance(policy, ApprovalPolicy):
            msg = f"approval must be an ApprovalPolicy or None, got {kind(policy)}"
            raise TypeError(msg)
        self.func: Callable[P, R] = func
        self.name: str = name or str(getattr(func, "__name__", type(func).__name__))
        self.is_async: bool = _is_async_callable(func)
        self.approval: ApprovalPolicy | None = approval
        doc = parse_docstring(inspect.getdoc(func))
        self.description: str = description if description is not None else doc.description
        signature = inspect.signature(func)
        self._binder = _Binder(signature, func)
        if approval is not None:
            self._binder.honest = _check_signature_is_honest(func, signature, "requires_approval")
        self._args_model, self._field_names = _build_args_model(
            func, self.name, signature, doc.params, _localns
        )
        self.redact: tuple[str, ...] = check_redact(redact)
        self.redacted: frozenset[str] = secret_names(
            self.name,
            signature.parameters,
            {
                self._field_names[field]: info.annotation
                for field, info in self._args_model.model_fields.items()
            },
            (*self.redact, *(approval.redact if approval else ())),
        )
        self._positional_only = tuple(
            p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY
        )
        self.parameters: dict[str, Any] = _strip_titles(
            self._args_model.model_json_schema(by_alias=True)
        )
        functools.update_wrapper(self, func)
        if self.is_async and hasattr(inspect, "markcoroutinefunction"):
            # Python 3.12+: frameworks that ask inspect.iscoroutinefunction(tool) get True.
            inspect.markcoroutinefunction(self)

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        func: Callable[..., Any],
    ) -> Tool[..., Any]:
        """A tool whose parameters are a given JSON Schema, calling ``func(**args)``.

        For tools described by a schema rather than a Python signature (an MCP
        server's tools, an OpenAPI operation). The schema is kept exactly as
        given (enums, nested objects, descriptions, ``$ref`` / ``$defs``), and a
        model's arguments are validated against it with the ``jsonschema``
        package (``pip install "toolguard-hitl[schema]"``). :func:`guard`,
        :func:`requires_approval` and the runner take it like any other tool; a
        ``when=`` predicate gets the arguments dict.

        Args:
            name: the name the model sees (a non-empty string).
            description: what the model reads.
            parameters: a JSON Schema with ``"type": "object"``.
            func: sync or async callable taking the arguments as keyword arguments.

        Raises:
            TypeError: ``name``, ``description`` or ``parameters`` of the wrong
                type, or ``func`` not callable.
            ValueError: an empty name, a schema whose type is not ``object`` or
                that is not a valid JSON Schema.
            ImportError: ``jsonschema`` is not installed (with the install hint).
        """
        from toolguard._tools.schema_tool import from_schema  # noqa: PLC0415 - imports _tool

        return from_schema(name, description, parameters, func)

    def _derive(
        self,
        *,
        name: str,
        description: str,
        approval: ApprovalPolicy | None,
        in_thread: bool = True,
    ) -> Tool[P, R]:
        """A copy with another name, description or policy (same function and schema).

        It runs in a worker thread only when this tool and ``in_thread`` both say so.
        """
        return Tool(
            self.func,
            name=name,
            description=description,
            approval=approval,
            redact=self.redact,
            in_thread=self.in_thread and in_thread,
        )

    # ------------------------------------------------------------------ redaction

    def shown_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """``args`` as a person may see them: each redacted parameter's value is ``REDACTED``."""
        return redact_args(args, self.redacted)

    def secret_texts(self, args: Mapping[str, Any]) -> list[str]:
        """The redacted values of ``args`` as texts, to scrub from error messages."""
        return secret_texts(args, self.redacted)

    # ------------------------------------------------------------------ describing

    @property
    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI Chat Completions function tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @property
    def approvals(self) -> int:
        """How many distinct reviewers must approve a call (``requires_approval(approvals=N)``).

        1 for an unguarded tool and by default.
        """
        return self.approval.approvals if self.approval is not None else 1

    @property
    def guarded(self) -> bool:
        """Whether calls of this tool may need a human's approval."""
        return self.approval is not None

    def __repr__(self) -> str:
        guard = ", guarded" if self.approval else ""
        return f"<Tool {self.name!r}{guard}>"

    # ------------------------------------------------------------------ calling directly

    _rules: Any = None
    """The allow/ask/deny rules of the toolset this tool was taken from (``None``: none)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the tool like the function; a guarded tool checks for approval first.

        A tool taken from a toolset with rules (``guard(tools, rules=...)``)
        follows them first, as every other path does: a ``deny`` rule raises
        :class:`~toolguard.CallDeniedError`, an ``ask`` rule needs approval
        even for an unguarded tool, an ``allow`` rule runs the call.
        """
        if self._rules is not None:
            return self._call_ruled(args, kwargs)
        if self.approval is None:
            return self.func(*args, **kwargs)
        if self.is_async:
            return self._call_async(args, kwargs)  # type: ignore[return-value]  # R is the coroutine
        return self._call_guarded(args, kwargs)

    def _call_ruled(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        """A direct call under the toolset's rules: deny > ask > allow > the tool's policy."""
        explicit = self._explicit(args, kwargs)
        decided = self._rules.decide(self.name, to_json_data(explicit))
        rule = decided.rule
        if rule is None:
            if self.approval is None:
                return self.func(*args, **kwargs)
            if self.is_async:
                return self._call_async(args, kwargs)  # type: ignore[return-value]  # coroutine
            return self._call_guarded(args, kwargs)
        if rule.effect == "deny":
            text = denied_text(self.name, rule)
            raise CallDeniedError(text, tool_name=self.name, rule=str(rule))
        if rule.effect == "allow":
            return self.func(*args, **kwargs)
        if self.is_async:  # an ask rule: approval needed whatever the tool's own policy says
            return self._call_async(args, kwargs, ask=True)  # type: ignore[return-value]
        return self._call_needing_approval(args, kwargs)

    def _with_rules(self, rules: Any) -> Tool[P, R]:
        """This tool under a toolset's rules (``None``: none), as a copy."""
        if rules is self._rules:
            return self
        copied = copy.copy(self)
        copied._rules = rules
        return copied

    def _may_skip_approval(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """True when the ``when=`` predicate says this direct call needs no approval.

        Fails closed: arguments that do not bind, a predicate that raises or
        returns anything but ``False``, a NaN or infinity in the arguments.
        """
        when = self.approval.when if self.approval is not None else None
        if when is None:
            return False
        binder = self._binder
        try:
            full = binder.full
            bound = (
                full(*args, **kwargs)
                if full is not None
                else binder.with_defaults(binder.explicit(args, kwargs))
            )
        except TypeError:
            return False  # cannot judge it: the approval path raises a clear TypeError
        return may_skip(when, bound)

    def _call_guarded(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        if self._may_skip_approval(args, kwargs):
            return self.func(*args, **kwargs)
        return self._call_needing_approval(args, kwargs)

    def _call_needing_approval(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        """A direct call that needs approval: run it only with a grant or a stand-in's yes."""
        explicit = self._explicit(args, kwargs)
        edited = _check_direct_call(self, explicit)
        func: Callable[..., R] = self.func
        if edited is not None:
            positional, named = self._split(edited)
            return func(*positional, **named)
        return func(*args, **kwargs)

    async def _call_async(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, ask: bool = False
    ) -> Any:
        if not ask and self._may_skip_approval(args, kwargs):
            return await self.func(*args, **kwargs)  # type: ignore[misc]  # is_async
        explicit = self._explicit(args, kwargs)
        edited = _check_direct_call(self, explicit)
        func: Callable[..., Any] = self.func
        if edited is not None:
            positional, named = self._split(edited)
            return await func(*positional, **named)
        return await func(*args, **kwargs)

    def _explicit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """A direct call's arguments by name; TypeError (nothing runs) if they do not bind."""
        try:
            return self._binder.explicit(args, kwargs)
        except TypeError:
            if self._binder.honest:
                raise  # the very TypeError the function itself raises for this call
            raise self._binder.unbindable(self.name, args, kwargs) from None

    def _split(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Arguments by name as ``(positional-only values, keyword arguments)``."""
        named = dict(arguments)
        return [named.pop(n) for n in self._positional_only if n in named], named

    # ------------------------------------------------------------------ calling from a model

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate JSON arguments from a model against the schema.

        Returns:
            The arguments as Python values, by parameter name (defaults filled in).

        Raises:
            ToolArgumentsError: naming every offending field.
        """
        try:
            model = self._args_model.model_validate(dict(args))
        except ValidationError as exc:
            secrets = self.secret_texts(args) if self.redacted else ()
            text = _describe_validation_error(self.name, exc, self.redacted, secrets)
            raise ToolArgumentsError(text) from None
        return {name: getattr(model, field) for field, name in self._field_names.items()}

    def needs_approval(self, validated: Mapping[str, Any]) -> bool:
        """Whether a call with these (validated) arguments needs a human's approval."""
        return self.approval is not None and self.approval.needs_approval(validated)

    async def execute(self, validated: Mapping[str, Any], *, in_thread: bool = True) -> R:
        """Run the body with validated arguments, bypassing the approval check.

        Only the runner calls this, after a human approved the call (or the
        call needed no approval). Sync functions run in a worker thread unless
        ``in_thread`` or the tool's own :attr:`in_thread` is false.
        """
        args, kwargs = self._split(validated)
        if self.is_async:
            return await self.func(*args, **kwargs)  # type: ignore[no-any-return,misc]  # is_async
        if in_thread and self.in_thread:
            return await anyio.to_thread.run_sync(functools.partial(self.func, *args, **kwargs))
        func: Callable[..., R] = self.func
        return func(*args, **kwargs)

    def review_description(self) -> str | None:
        """The payload description override, if the policy has one."""
        return self.approval.description if self.approval else None


def _check_direct_call(tool: Tool[Any, Any], explicit: dict[str, Any]) -> dict[str, Any] | None:
    """Raise unless this direct call may run; return edited arguments when a stand-in edited it."""
    policy = tool.approval if tool.approval is not None else ApprovalPolicy()
    if consume_grant(tool.name, tool.func, explicit, tool._binder.with_defaults):
        if policy.approvals > 1:  # a grant is one person's yes: it never makes a quorum
            raise QuorumReviewerError(None, tool.name, policy.approvals, [])
        return None
    json_args = to_json_data(explicit)
    # What a person sees: secret values replaced (the error's call and payload, their reprs).
    shown_args = tool.shown_args(json_args)
    call = ToolCall(id=new_id(), name=tool.name, args=shown_args)
    # allow_once(exc.call) grants this function only, for the real arguments.
    remember_call(call, tool.func, explicit, json_args, ttl=policy.ttl, approvals=policy.approvals)
    stand_in = get_stand_in()
    if stand_in is not None:
        decision = stand_in(call)
        check_allowed(decision.type, (tool.name, policy.allowed_decisions))
        if isinstance(decision, RejectDecision):
            raise ActionRejectedError(
                decision.message or REJECTED_BY_USER_MESSAGE, tool_name=tool.name
            )
        if isinstance(decision, EditDecision):
            return keep_redacted(decision.edited_action.args, explicit, tool.redacted)[0]
        return None
    pending = PendingReview.for_actions(
        [(tool.name, shown_args, policy.description)],
        [policy.allowed_decisions],
        [policy.approvals],
    )
    raise ApprovalRequiredError(pending_review=pending, call=call)


def _describe_validation_error(
    name: str,
    exc: ValidationError,
    redacted: frozenset[str] = frozenset(),
    secrets: Iterable[str] = (),
) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        text = error["msg"]
        if error["loc"] and error["loc"][0] in redacted:
            # A validator's message may quote the value: only the error's kind is shown.
            text = f"invalid value ({error['type']}; the message is hidden: the value is secret)"
        problems.append(f"'{location}': {text}")
    return scrub(f"Invalid arguments for tool `{name}`: " + "; ".join(problems), secrets)


_ALLOWED_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def _resolve_hints(
    func: Callable[..., Any], signature: inspect.Signature, localns: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Type hints by parameter; one unresolvable annotation only loses its own type."""
    local = dict(localns or {})
    try:
        return typing.get_type_hints(func, localns=local, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        pass
    hints: dict[str, Any] = {}
    globalns = getattr(inspect.unwrap(func), "__globals__", {})
    for param in signature.parameters.values():
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                # What get_type_hints does for one string annotation, in the function's scope.
                annotation = eval(annotation, globalns, local)  # noqa: S307
            except Exception:
                annotation = Any
        hints[param.name] = Any if annotation is param.empty else annotation
    return hints


def _caller_locals() -> dict[str, Any]:
    """The local names of our caller's caller: where a decorator was applied.

    They resolve classes defined inside a function that a tool's annotations name.
    """
    frame = sys._getframe(2)
    return dict(frame.f_locals)


def _build_args_model(
    func: Callable[..., Any],
    name: str,
    signature: inspect.Signature,
    docs: Mapping[str, str],
    localns: Mapping[str, Any] | None = None,
) -> tuple[type[BaseModel], dict[str, str]]:
    hints = _resolve_hints(func, signature, localns)
    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    for index, param in enumerate(signature.parameters.values()):
        if param.kind not in _ALLOWED_KINDS:
            msg = (
                f"The tool {name!r} has the parameter {param}: a model can only pass named"
                " arguments. Replace *args/**kwargs with named parameters."
            )
            raise TypeError(msg)
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        description = docs.get(param.name)
        info = Field(default, alias=param.name, description=description)
        if typing.get_origin(annotation) is typing.Annotated:
            # An explicit Field(description=...) in Annotated wins over the docstring.
            for extra in typing.get_args(annotation)[1:]:
                if isinstance(extra, FieldInfo) and extra.description:
                    info = Field(default, alias=param.name)
        field = f"p{index}"
        fields[field] = (annotation, info)
        field_names[field] = param.name
    model: type[BaseModel] = create_model(
        f"{name}_args",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
        **fields,
    )
    return model, field_names


# ---------------------------------------------------------------------------- decorators


@overload
def tool(func: Callable[P, R], /) -> Tool[P, R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    redact: Iterable[str] = (),
    in_thread: bool = True,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    redact: Iterable[str] = (),
    in_thread: bool = True,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Describe a function as a tool for a model. Use bare or with options.

    ::

        @tool
        def search_mail(query: str, limit: int = 10) -> list[str]:
            \"\"\"Search the mailbox.

            Args:
                query: words to look for.
                limit: most results to return.
            \"\"\"

    The schema is built once, here. A function already guarded with
    :func:`requires_approval` keeps its guard.

    Args:
        func: the function (sync or async).
        name: the name the model sees; defaults to the function's name.
        description: what the model reads; defaults to the docstring's prose.
        redact: names of secret parameters, shown as ``REDACTED`` wherever a
            person or a log sees the call (parameters typed
            ``pydantic.SecretStr`` are secret without being named).
        in_thread: ``False`` runs a sync function on the event loop's thread
            when the runner calls it, with no worker-thread hop (about 0.1 ms
            saved per call). Such a tool blocks the event loop, and every
            other conversation the process serves, while it runs: use it only
            for quick functions that do no I/O. Default ``True``: sync tools
            run in a worker thread. Async tools ignore it.

    Raises:
        TypeError: ``in_thread`` is not ``True`` or ``False``.
        ValueError: ``redact`` names something that is not a parameter.
    """
    flag(in_thread, "in_thread")
    extra = check_redact(redact)

    def build(f: Callable[P, R], localns: dict[str, Any]) -> Tool[P, R]:
        if isinstance(f, Tool) or hasattr(f, "__toolguard_tool__"):
            built = as_tool(f, name=name, description=description, in_thread=in_thread)
            if not extra:
                return built
            return Tool(
                built.func,
                name=built.name,
                description=built.description,
                approval=built.approval,
                redact=(*built.redact, *extra),
                in_thread=built.in_thread,
            )
        return Tool(
            f,
            name=name,
            description=description,
            redact=extra,
            in_thread=in_thread,
            _localns=localns,
        )

    def decorate(f: Callable[P, R]) -> Tool[P, R]:
        return build(f, _caller_locals())

    if func is not None:
        return build(func, _caller_locals())
    return decorate


def as_tool(
    obj: Callable[P, R] | Tool[P, R],
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalPolicy | None = None,
    in_thread: bool = True,
) -> Tool[P, R]:
    """Return ``obj`` as a :class:`Tool`, keeping any approval policy it already has.

    ``in_thread=False`` marks it to run on the event loop's thread; a tool
    already so marked stays so.
    """
    if isinstance(obj, Tool):
        if name is None and description is None and approval is None and in_thread:
            return obj
        return obj._derive(
            name=name or obj.name,
            description=description if description is not None else obj.description,
            approval=approval or obj.approval,
            in_thread=in_thread,
        )
    built: Tool[P, R] | None = getattr(obj, "__toolguard_tool__", None)
    if built is not None:
        return as_tool(
            built, name=name, description=description, approval=approval, in_thread=in_thread
        )
    return Tool(obj, name=name, description=description, approval=approval, in_thread=in_thread)


@overload
def requires_approval(func: Tool[P, R], /) -> Tool[P, R]: ...
@overload
def requires_approval(func: F, /) -> F: ...
@overload
def requires_approval(
    *,
    when: ApprovalPredicate | None = None,
    description: str | None = None,
    ttl: float | timedelta | None = None,
    allowed_decisions: Iterable[DecisionType] = ALLOWED_DECISIONS,
    redact: Iterable[str] = (),
    approvals: int = 1,
    in_thread: bool = True,
) -> _Guard: ...
def requires_approval(
    func: Any = None,
    /,
    *,
    when: ApprovalPredicate | None = None,
    description: str | None = None,
    ttl: float | timedelta | None = None,
    allowed_decisions: Iterable[DecisionType] = ALLOWED_DECISIONS,
    redact: Iterable[str] = (),
    approvals: int = 1,
    in_thread: bool = True,
) -> Any:
    """Guard a function or tool: calling it needs a human's approval first.

    Use bare or with options::

        @requires_approval
        def delete_file(path: str) -> None: ...

        @requires_approval(when=lambda args: args["amount"] > 1000)
        def transfer(amount: float, to: str) -> str: ...

    The guarded function keeps its name, docstring, signature, type hints and
    sync/async nature, so any framework derives the same schema from it. Its
    body does not run: the call raises :class:`~toolguard.ApprovalRequiredError`
    carrying the review payload. It runs when ``when`` says this call needs no
    approval, inside :func:`~toolguard.allow_once` for exactly that call, or
    when the toolguard runner executes an approved call.

    Args:
        func: the function or :class:`Tool` (bare use).
        when: predicate on the call's arguments (a dict by parameter name,
            defaults included; validated values when the runner calls it).
            Return ``True`` when the call needs approval, ``False`` when it
            does not. It fails closed: the call needs approval when the
            predicate raises or returns anything but ``False``, when a NaN or
            an infinite number is anywhere in the arguments, and when the
            arguments do not bind to the signature (then the call raises
            ``TypeError`` and does not run).
        description: text for the review payload instead of
            ``Tool `NAME` is awaiting approval``.
        ttl: how long a review of this tool stays open (seconds or a
            ``timedelta``); past it the request is ``expired`` and never runs.
            Overrides the chat's ``review_ttl``.
        allowed_decisions: the decisions a reviewer may take, e.g.
            ``["approve", "reject"]`` (no edits) or ``["respond"]`` for an
            "ask the user" tool; a non-empty subset of ``approve``, ``edit``,
            ``reject`` and ``respond``. Default: ``ALLOWED_DECISIONS``.
        redact: names of secret parameters (top-level only), e.g.
            ``["password"]``: the review payload, the error, audit events,
            the page and error texts show ``REDACTED`` instead of the value,
            while the tool gets the real value. Parameters typed
            ``pydantic.SecretStr`` are redacted without being named.
        approvals: a quorum: how many distinct, named, authorized reviewers
            must approve a call before it runs (default 1). One reject ends
            the review; an edit restarts the count. See "A quorum of
            reviewers" in docs/policies.md.
        in_thread: ``False`` runs a sync function on the event loop's thread
            once the runner may run it (no worker-thread hop). It then blocks
            the event loop while it runs: only for quick functions. See
            :func:`tool`. Default ``True``.

    Raises:
        TypeError: for classes, generators and non-callables, at decoration
            time; for ``allowed_decisions`` that is not a list of texts; for
            ``redact`` that is not a list of texts; for ``in_thread`` that is
            not ``True`` or ``False``.
        ValueError: for a ``ttl`` that is not positive; for
            ``allowed_decisions`` that is empty or names an unknown type; for
            a ``redact`` name that is not a parameter of the function, or
            a dotted path; for ``approvals`` below 1 (``TypeError`` when not
            an int).
    """
    predicate: object = when  # checked at run time for untyped callers
    if predicate is not None and not callable(predicate):
        msg = f"when= must be a callable taking the arguments dict, got {type(predicate).__name__}"
        raise TypeError(msg)
    if predicate is not None and _is_async_callable(predicate):
        msg = (
            "when= must be a plain function returning True or False: an async predicate"
            " cannot be awaited by a sync call"
        )
        raise TypeError(msg)
    optional_text(description, "description")
    guard = _Guard(
        ApprovalPolicy(
            when=when,
            description=description,
            ttl=ttl_seconds(ttl),
            allowed_decisions=allowed_decisions_tuple(allowed_decisions),
            redact=check_redact(redact),
            approvals=approvals,
        ),
        in_thread=flag(in_thread, "in_thread"),
    )
    if func is not None:
        return guard.wrap(func, _caller_locals())
    return guard


class _Guard:
    """The configured form of :func:`requires_approval`."""

    __slots__ = ("in_thread", "policy")

    def __init__(self, policy: ApprovalPolicy, *, in_thread: bool = True) -> None:
        self.policy = policy
        self.in_thread = in_thread

    @overload
    def __call__(self, func: Tool[P, R], /) -> Tool[P, R]: ...
    @overload
    def __call__(self, func: F, /) -> F: ...
    def __call__(self, func: Any, /) -> Any:
        return self.wrap(func, _caller_locals())

    def wrap(self, func: Any, localns: dict[str, Any]) -> Any:
        """Guard ``func``; ``localns`` resolves annotations naming local classes."""
        if isinstance(func, Tool):
            return func._derive(
                name=func.name,
                description=func.description,
                approval=self.policy,
                in_thread=self.in_thread,
            )
        _reject_unwrappable(func, "requires_approval")
        built: Tool[Any, Any] | None = getattr(func, "__toolguard_tool__", None)
        target = built.func if built is not None else func
        in_thread = self.in_thread and (built is None or built.in_thread)
        # Build the tool now: it validates the signature once and gives a fast binder.
        guarded_tool: Tool[Any, Any] = Tool(
            target,
            approval=self.policy,
            redact=built.redact if built is not None else (),
            in_thread=in_thread,
            _localns=localns,
        )
        wrapper: Callable[..., Any]
        if guarded_tool.is_async:

            @functools.wraps(target)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await guarded_tool._call_async(args, kwargs)

            wrapper = async_wrapper
        else:
            full = guarded_tool._binder.full_plain
            when = self.policy.when
            if when is not None and full is not None:
                # The hot path of an allowed call, inlined: bind, check, ask, run. Every
                # doubt goes to the approval path, which raises and never runs the body.
                call_guarded = guarded_tool._call_needing_approval

                @functools.wraps(target)
                def wrapper(*args: Any, **kwargs: Any) -> Any:
                    try:
                        bound, plain = full(*args, **kwargs)
                    except TypeError:
                        return call_guarded(args, kwargs)  # raises: cannot be judged
                    if plain or not has_non_finite(bound.values()):
                        try:
                            verdict = when(bound)
                        except Exception:
                            verdict = True
                        if verdict is False:
                            return target(*args, **kwargs)
                        discard(verdict)
                    return call_guarded(args, kwargs)

            else:

                @functools.wraps(target)
                def wrapper(*args: Any, **kwargs: Any) -> Any:
                    return guarded_tool._call_guarded(args, kwargs)

        setattr(wrapper, _POLICY_ATTR, self.policy)
        wrapper.approvals = self.policy.approvals  # type: ignore[attr-defined]
        wrapper.__toolguard_tool__ = guarded_tool  # type: ignore[attr-defined]
        return wrapper
