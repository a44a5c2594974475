"""Tools: functions described for a model, optionally guarded by a human approval.

:func:`tool` turns a function into a :class:`Tool` (name, description, JSON
schema built once from the signature and docstring, see
:mod:`~toolguard._tools.arguments`). A guarded tool (see
:func:`~toolguard.requires_approval`) checks each direct call: the toolset's
rules first, then the ``when=`` predicate, then a grant from
:func:`~toolguard.allow_once` or the stand-in reviewer; otherwise the call
raises :class:`~toolguard.ApprovalRequiredError` instead of running.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, ParamSpec, TypeVar, overload

import anyio.to_thread
from pydantic import ValidationError

from toolguard._core.checks import flag, kind, optional_text
from toolguard._core.docstrings import parse_docstring
from toolguard._core.errors import (
    ActionRejectedError,
    ApprovalRequiredError,
    CallDeniedError,
    QuorumReviewerError,
)
from toolguard._core.jsonable import to_json_data
from toolguard._core.records import (
    REJECTED_BY_USER_MESSAGE,
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
    secret_names,
    secret_texts,
)
from toolguard._policy.rules import denied_text, rule_for
from toolguard._policy.stand_in import get_stand_in
from toolguard._policy.when import may_skip
from toolguard._tools.approval import ApprovalPolicy
from toolguard._tools.arguments import (
    ToolArgumentsError,
    build_args_model,
    describe_validation_error,
    strip_titles,
)
from toolguard._tools.binding import (
    Binder,
    caller_locals,
    check_signature_is_honest,
    is_async_callable,
    reject_unwrappable,
)

P = ParamSpec("P")
R = TypeVar("R")


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

    _schema_tool: ClassVar[
        Callable[[str, str, Mapping[str, Any], Callable[..., Any]], Tool[..., Any]]
    ]
    """What :meth:`from_schema` builds: ``SchemaTool``, set by the ``toolguard._tools`` package
    (``SchemaTool`` subclasses ``Tool``, so this module does not import it)."""

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
        reject_unwrappable(func, "tool")
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
        self.is_async: bool = is_async_callable(func)
        self.approval: ApprovalPolicy | None = approval
        doc = parse_docstring(inspect.getdoc(func))
        self.description: str = description if description is not None else doc.description
        signature = inspect.signature(func)
        self._binder = Binder(signature, func)
        if approval is not None:
            self._binder.honest = check_signature_is_honest(func, signature, "requires_approval")
        self._args_model, self._field_names = build_args_model(
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
        self.parameters: dict[str, Any] = strip_titles(
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
        return cls._schema_tool(name, description, parameters, func)

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
        rule = rule_for(self._rules, self.name, to_json_data(explicit))
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
            text = describe_validation_error(self.name, exc, self.redacted, secrets)
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
        return build(f, caller_locals())

    if func is not None:
        return build(func, caller_locals())
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
