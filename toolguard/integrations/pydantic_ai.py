"""toolguard for Pydantic AI: guarded tools pause as Pydantic AI's own deferred approvals.

Install the extra: ``pip install "toolguard-hitl[pydantic-ai]"``.

::

    from pydantic_ai import Agent, DeferredToolRequests
    from toolguard.integrations import pydantic_ai as tg

    agent = Agent(model, toolsets=[tg.toolset([send_email, search_contacts])],
                  output_type=[str, DeferredToolRequests])
    result = await agent.run("Mail Alice that the meeting moved to 10")
    if isinstance(result.output, DeferredToolRequests):
        review = tg.pending_review(result.output)        # the payload, for a person
        results = tg.deferred_results(result.output, decisions)
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=results)

Each call is decided as toolguard's runner decides it: the toolset's
allow/ask/deny rules first, then the tool's own policy (the classifier,
``@requires_approval``, ``when=`` on the actual arguments). A call a deny rule
matches gets the denial as a failed tool result, unasked and unrun. A call
that needs no approval runs at once. A call that needs approval raises
Pydantic AI's ``ApprovalRequired``, so the run ends with
``DeferredToolRequests``; a quorum (``requires_approval(approvals=N)``) keeps
it deferred until N distinct reviewers (``deferred_results(..., reviewer=)``)
approved. Redacted arguments show as ``REDACTED`` in :func:`pending_review`.
Arguments that break the schema get a failed tool
result (``ToolFailed``) without asking anyone, and so does a tool that
raises. Approve runs the call once, reject returns the reason (or
``REJECTED_BY_USER_MESSAGE``) to the model as a denial, edit runs the edited
arguments through ``ToolApproved(override_args=...)``; an edit must keep the
tool's name (Pydantic AI cannot switch an approved call to another tool).

A Pydantic AI ``MCPToolset`` is guarded the same way: ``tg.toolset(MCPToolset(...),
classifier=..., rules=..., policies={"tool": ApprovalPolicy(...)})`` classifies the
server's tools with their MCP annotations when the agent lists them and runs
each call through the ``MCPToolset`` (see :class:`GuardedMCPToolset`).

The toolset never runs a guarded body unless Pydantic AI marks the call
approved (``RunContext.tool_call_approved``): calling ``call_tool`` directly
raises ``ApprovalRequired`` instead. An approval is bound to the call it was
made for: toolguard's entry in the requests' metadata holds a review id and
a digest of the call (its tool, real arguments and the id of the run that
proposed it), which :func:`deferred_results` carries back; an approval applied
to another run's history, or built without :func:`deferred_results`, runs
nothing and the model reads why. It also holds when the call asked
(``asked_at``): a tool with ``requires_approval(ttl=...)`` refuses to start an
approved call past that deadline, with the runner's expiry text.
"""

from __future__ import annotations

import copy
import hmac
import json
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any
from uuid import UUID

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ApprovalRequired, ModelRetry, ToolFailed
    from pydantic_ai.messages import ModelResponse, ToolCallPart
    from pydantic_ai.tools import (
        DeferredToolRequests,
        DeferredToolResults,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
    )
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = (
        "toolguard.integrations.pydantic_ai needs Pydantic AI:"
        ' pip install "toolguard-hitl[pydantic-ai]"'
    )
    raise ImportError(msg) from exc

from toolguard import (
    ApprovalPolicy,
    Classifier,
    Rules,
)
from toolguard._enforce.pipeline import (
    NOT_APPROVED_HERE,
    REJECTED_BY_USER_MESSAGE,
    ApproveDecision,
    Claims,
    EditDecision,
    PendingReview,
    QuorumProgress,
    ReviewItem,
    SchemaTool,
    ShadowMode,
    Tool,
    ToolCall,
    Tools,
    Toolset,
    UnsupportedPolicyError,
    Verdict,
    add_vote,
    allowed_by,
    allowed_decisions,
    args_digest,
    as_tool,
    as_toolset,
    call_digest,
    call_span,
    check_claims,
    checked_decisions,
    claim_once,
    deadline_refusal,
    failure_text,
    finish,
    keep_redacted,
    new_id,
    now,
    propose,
    redact_args,
    refuse_shadow,
    review_payload,
    reviewed,
    reviewer_text,
    run_body,
    shown_result,
    stored_votes,
    to_json_data,
    trace_ended,
    trace_refusal,
    vote_count,
)

__all__ = ["GuardedMCPToolset", "GuardedToolset", "deferred_results", "pending_review", "toolset"]

FRAMEWORK = "Pydantic AI"
METADATA_KEY = "toolguard"
"""The key of toolguard's entry in ``DeferredToolRequests.metadata[tool_call_id]``."""

NO_REVIEW = (
    "This approved call carries no toolguard review, so it cannot be matched to the call the"
    " reviewer approved: build the results with deferred_results(). It was not executed."
)
"""What the model reads for a call approved without toolguard's entry in the results' metadata."""

_BINDING = ("review_id", "digest", "asked_at")
"""The entries of a paused call's metadata that its approval carries back."""

_ANY_ARGS = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)


class GuardedToolset(AbstractToolset[Any]):
    """A Pydantic AI toolset over a toolguard :class:`~toolguard.Toolset`.

    Build it with :func:`toolset`. Each tool keeps its name, description and
    JSON schema (parameter descriptions included). Every call is decided the
    way toolguard's runner decides it (the toolset's allow/ask/deny rules,
    then the tool's own policy); arguments are checked against the tool's
    schema, so a bad call becomes a failed tool result naming the offending
    field instead of a retry.

    Args:
        tools: the guarded registry.
        id: the toolset's id, unique among an agent's toolsets (needed for
            durable execution).
        claims: a store with ``claim(key)`` (``MemoryStore``, ``SQLiteStore``,
            ``PostgresStore``): an approved call is claimed there before it
            runs, so resuming the same paused run twice (two processes) runs
            it once.
    """

    def __init__(
        self, tools: Toolset, *, id: str | None = None, claims: Claims | None = None
    ) -> None:
        self.tools = tools
        self._id = id
        self.claims = check_claims(claims)

    @property
    def id(self) -> str | None:
        """The id given at construction (``None`` by default)."""
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """Every tool, described by toolguard's schema."""
        return {
            name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=name,
                    description=tool.description,
                    parameters_json_schema=tool.parameters,
                ),
                max_retries=0,
                args_validator=_ANY_ARGS,
            )
            for name, tool in self.tools.items()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run one call: at once, or pause it for approval, or refuse it.

        Raises:
            ApprovalRequired: the call needs a human and was not approved yet
                (or its quorum is not complete yet).
            ToolFailed: a deny rule refuses the call, the arguments break the
                schema, or the tool raised.
            AlreadyResumedError: with ``claims``, another run already claimed
                this approved call; it did not run here.
        """
        call, verdict = propose(self.tools, ctx.tool_call_id or "", name, tool_args)
        if verdict.outcome == "deny" or verdict.tool is None or verdict.validated is None:
            trace_refusal(call, verdict)
            raise ToolFailed(verdict.refusal or "")
        guarded, validated = verdict.tool, verdict.validated
        approved = ctx.tool_call_approved
        own = _own(ctx.tool_call_metadata) if approved else {}
        if verdict.outcome == "ask":
            if not approved:
                raise ApprovalRequired(
                    metadata=self._pause(ctx, guarded, verdict, call, by=[], own={})
                )
            if verdict.approvals > 1:
                by = stored_votes(own.get("approvals"), call.name, call.args)
                if vote_count(by) < verdict.approvals:
                    # Not enough distinct reviewers yet: nothing runs, the call pauses again.
                    _record_edit(ctx, tool_args)
                    raise ApprovalRequired(
                        metadata=self._pause(ctx, guarded, verdict, call, by=by, own=own)
                    )
        decided = allowed_by(verdict)  # an allow rule let it run: decided by a rule
        if approved:
            decided = reviewed(
                own.get("review_id"),
                own.get("asked_at"),
                decision=str(own.get("decision") or "approve"),
                by=own.get("decided_by"),
                decided_at=own.get("decided_at"),
            )
            refusal = _unbound(ctx, own, name, tool_args)
            if refusal is not None:
                trace_ended(call.id, name, "failed", decided, "tampered")
                raise ToolFailed(refusal)
            await self._claim(own)
            _record_edit(ctx, tool_args)
            late = deadline_refusal(guarded, own.get("asked_at"))  # the call is about to start
            if late is not None:
                trace_ended(call.id, name, "expired", decided)
                raise ToolFailed(late)
        with call_span(call.id, name, decided) as span:
            try:
                value = await run_body(guarded, validated)
            except Exception as exc:
                finish(span, "failed", exc)
                raise ToolFailed(failure_text(guarded, exc, validated, call.args)) from exc
            finish(span, "executed")
        return shown_result(guarded, value, validated, call.args)

    def _pause(
        self,
        ctx: RunContext[Any],
        tool: Tool[Any, Any],
        verdict: Verdict,
        call: ToolCall,
        *,
        by: list[str],
        own: Mapping[str, Any],
    ) -> dict[str, Any]:
        """toolguard's entry in ``DeferredToolRequests.metadata`` for a paused call.

        A call paused again (a quorum still short of votes) keeps its review id
        and the time it first asked, so its deadline counts from then.
        """
        meta: dict[str, Any] = {
            "description": tool.review_description(),
            "allowed_decisions": list(allowed_decisions(tool)),
        }
        if tool.redacted:
            meta["redacted"] = sorted(tool.redacted)
        if verdict.approvals > 1:
            meta["approvals"] = {
                "required": verdict.approvals,
                "by": by,
                "digest": args_digest(call.name, call.args),
            }
        review_id = own.get("review_id")
        if not isinstance(review_id, str) or not review_id:
            review_id = new_id()
        asked_at = own.get("asked_at")
        if isinstance(asked_at, bool) or not isinstance(asked_at, int | float):
            asked_at = now()
        meta["review_id"] = review_id
        meta["asked_at"] = asked_at
        meta["digest"] = _binding(ctx, review_id, call.name, call.args)
        return {METADATA_KEY: meta}

    async def _claim(self, own: Mapping[str, Any]) -> None:
        review_id = own.get("review_id")
        if self.claims is not None and isinstance(review_id, str):
            await claim_once(self.claims, review_id)


def _own(metadata: Any) -> dict[str, Any]:
    """toolguard's entry in a call's ``tool_call_metadata`` (``{}`` when absent)."""
    if isinstance(metadata, Mapping):
        own = metadata.get(METADATA_KEY)
        if isinstance(own, Mapping):
            return dict(own)
    return {}


def _proposed(ctx: RunContext[Any]) -> tuple[ModelResponse, ToolCallPart] | None:
    """The model's response and call part this call came from (the latest with its id)."""
    for message_ in reversed(ctx.messages):
        if not isinstance(message_, ModelResponse):
            continue
        for part in reversed(message_.parts):
            if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id:
                return message_, part
    return None


def _binding(ctx: RunContext[Any], review_id: str, name: str, args: Mapping[str, Any]) -> str:
    """The digest an approval of this call must carry.

    It covers the call in the run's history (its tool, its real arguments and
    the id of the run that proposed it) and the review id, as the runner's
    digest covers thread and review: an approval made for another run, or for
    other arguments, does not match. ``name`` and ``args`` stand in when the
    history does not hold the call (the toolset called directly).
    """
    run_id = ""
    proposed = _proposed(ctx)
    if proposed is not None:
        response, part = proposed
        run_id = response.run_id or ""
        name = part.tool_name
        try:
            args = to_json_data(part.args_as_dict())
        except (ValueError, RecursionError):
            return ""  # nothing can match arguments that cannot be read
    else:
        try:
            args = to_json_data(dict(args))
        except (ValueError, RecursionError):
            return ""
    return call_digest(name, dict(args), thread_id=run_id, review_id=review_id)


def _unbound(
    ctx: RunContext[Any], own: Mapping[str, Any], name: str, tool_args: dict[str, Any]
) -> str | None:
    """Why an approval does not cover this call (the text the model reads), or ``None``."""
    review_id, digest = own.get("review_id"), own.get("digest")
    if not isinstance(review_id, str) or not review_id or not isinstance(digest, str):
        return NO_REVIEW
    expected = _binding(ctx, review_id, name, tool_args)
    if not expected or not hmac.compare_digest(digest, expected):
        return NOT_APPROVED_HERE
    return None


def _record_edit(ctx: RunContext[Any], tool_args: dict[str, Any]) -> None:
    """Replace the model's call in the history by the edited one that runs.

    An approved call whose arguments differ from the model's ran with
    ``ToolApproved(override_args=...)``; the call part in the run's messages is
    updated so the history records the arguments that really ran.
    """
    proposed = _proposed(ctx)
    if proposed is not None and proposed[1].args_as_dict() != tool_args:
        proposed[1].args = dict(tool_args)


def toolset(
    tools: Tools | AbstractToolset[Any],
    *,
    id: str | None = None,
    claims: Claims | None = None,
    classifier: Classifier | None = None,
    rules: Rules | None = None,
    policies: Mapping[str, ApprovalPolicy] | None = None,
    shadow: ShadowMode = False,
) -> GuardedToolset:
    """Pydantic AI tools for ``Agent(toolsets=[...])``, guarded by toolguard.

    Give the agent ``output_type=[str, DeferredToolRequests]`` (or your
    output type plus ``DeferredToolRequests``) so a paused run returns the
    requests instead of failing.

    Args:
        tools: a :class:`~toolguard.Toolset` (its ``rules`` apply), or a list
            or mapping of functions and tools (then :func:`~toolguard.guard`
            classifies them), or a Pydantic AI ``MCPToolset`` (then its
            server's tools are classified with their MCP annotations when the
            agent lists them: see :class:`GuardedMCPToolset`).
        id: the toolset's id among the agent's toolsets.
        claims: a store with ``claim(key)``: an approved call is claimed
            there before it runs, so it runs once even when the paused run is
            resumed twice (two processes sharing the store).
        classifier: for an ``MCPToolset`` only: the classifier's ``always``,
            ``never`` and verbs (default ``Classifier()``).
        rules: for an ``MCPToolset`` only: allow/ask/deny rules
            (:class:`~toolguard.Rules`) applied before each tool's policy.
        policies: for an ``MCPToolset`` only: an
            :class:`~toolguard.ApprovalPolicy` by tool name (a quorum, a
            deadline, redacted parameters, ``when=``, a description), which
            replaces the classifier's answer for that tool.

    Raises:
        TypeError: ``claims`` has no ``claim`` method; any other Pydantic AI
            toolset.
        UnsupportedPolicyError: ``classifier``, ``rules`` or ``policies``
            given with tools that are not an ``MCPToolset`` (give those to
            :func:`toolguard.guard`); an ``MCPToolset`` built with
            ``tool_error_behavior="error"``, which toolguard cannot honour; a
            Runner, a ReviewedChat or a Judge instead of tools; ``shadow`` on:
            nothing here records what would have been asked.
    """
    refuse_shadow(shadow, "toolguard.integrations.pydantic_ai.toolset()")
    if isinstance(tools, AbstractToolset):
        mcp_toolset = _loaded_class("pydantic_ai.mcp", "MCPToolset")
        if mcp_toolset is not None and isinstance(tools, mcp_toolset):
            return GuardedMCPToolset(
                tools, id=id, claims=claims, classifier=classifier, rules=rules, policies=policies
            )
        msg = (
            f"toolguard guards a Pydantic AI MCPToolset, not a {type(tools).__name__}: pass the"
            " functions or tools themselves (a list, a mapping or a toolguard.Toolset)"
        )
        raise TypeError(msg)
    if classifier is not None or rules is not None or policies is not None:
        msg = (
            "classifier=, rules= and policies= are for a Pydantic AI MCPToolset; for other tools"
            " pass toolguard.guard(tools, classifier, rules=...) with @requires_approval on the"
            " functions"
        )
        raise UnsupportedPolicyError(msg)
    return GuardedToolset(as_toolset(tools), id=id, claims=claims)


def _loaded_class(module: str, name: str) -> type | None:
    """``module.name`` when ``module`` is already imported (an object of it exists only then)."""
    loaded = sys.modules.get(module)
    found = getattr(loaded, name, None) if loaded is not None else None
    return found if isinstance(found, type) else None


# ---------------------------------------------------------------------------- MCP servers

_MCP_CALL: ContextVar[tuple[AbstractToolset[Any], RunContext[Any], dict[str, ToolsetTool[Any]]]]
_MCP_CALL = ContextVar("toolguard_pydantic_ai_mcp_call")
"""The MCP toolset, run context and listed tools of the call being run (for the tools' bodies)."""


class GuardedMCPToolset(GuardedToolset):
    """A Pydantic AI ``MCPToolset`` whose tools toolguard guards.

    Build it with :func:`toolset`. Entering it enters the MCP toolset (the
    agent does that). Each time the agent lists the tools, the server's tools
    (as the ``MCPToolset`` lists them: its cache and filters apply) become
    toolguard tools with the same name, description and ``inputSchema``,
    classified as :mod:`toolguard.integrations.mcp` classifies them (the
    server's ``readOnlyHint`` / ``destructiveHint`` on top of the
    classifier's lists and verbs), then ``policies`` and ``rules`` apply.
    Every call is decided as :class:`GuardedToolset` decides it; a call that
    runs goes through the ``MCPToolset``'s own ``call_tool`` (its
    ``process_tool_call`` hook, task and app handling, and its mapping of the
    result: the structured content when present). An error the server
    reports becomes a failed tool result ``Tool `NAME` failed: MCPToolError:
    <the server's text>``, as a raising tool does everywhere in toolguard.
    """

    def __init__(
        self,
        server: AbstractToolset[Any],
        *,
        id: str | None = None,
        claims: Claims | None = None,
        classifier: Classifier | None = None,
        rules: Rules | None = None,
        policies: Mapping[str, ApprovalPolicy] | None = None,
    ) -> None:
        if getattr(server, "tool_error_behavior", None) == "error":
            msg = (
                "toolguard turns a tool's error into a failed tool result the model reads, so it"
                " cannot honour tool_error_behavior='error': build the MCPToolset with"
                " tool_error_behavior='failed' (or the default) and read the error in the result"
            )
            raise UnsupportedPolicyError(msg)
        given: object = policies  # checked at run time for untyped callers
        if given is not None and not (
            isinstance(given, Mapping)
            and all(isinstance(k, str) and isinstance(v, ApprovalPolicy) for k, v in given.items())
        ):
            msg = (
                "policies must map tool names to toolguard.ApprovalPolicy objects,"
                f" got {type(given).__name__}"
            )
            raise TypeError(msg)
        # The tools are known once the agent lists them; until then, none.
        super().__init__(Toolset([], classifier=classifier, rules=rules), id=id, claims=claims)
        self.server = server
        self.classifier = classifier
        self.rules = rules
        self.policies: dict[str, ApprovalPolicy] = dict(policies or {})
        self._listed: dict[str, ToolsetTool[Any]] = {}
        self._built: dict[str, Toolset] = {}

    async def __aenter__(self) -> GuardedMCPToolset:
        await self.server.__aenter__()
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        return await self.server.__aexit__(*args)

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        """This toolset over the MCP toolset's own one for the run (per-run auth or headers)."""
        server = await self.server.for_run(ctx)
        if server is self.server:
            return self
        run = copy.copy(self)
        run.server = server
        return run

    async def get_instructions(self, ctx: RunContext[Any]) -> Any:
        """The MCP toolset's instructions (when it includes the server's)."""
        return await self.server.get_instructions(ctx)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The server's tools, classified, described by their own schemas."""
        listed = await self.server.get_tools(ctx)
        self.tools = self._toolset(listed)
        self._listed = dict(listed)
        return await super().get_tools(ctx)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Decide and run one call as :meth:`GuardedToolset.call_tool` does, through the server."""
        token = _MCP_CALL.set((self.server, ctx, self._listed))
        try:
            return await super().call_tool(name, tool_args, ctx, tool)
        finally:
            _MCP_CALL.reset(token)

    def _toolset(self, listed: Mapping[str, ToolsetTool[Any]]) -> Toolset:
        """The toolguard tools for this listing (built once per distinct listing)."""
        key = json.dumps(
            [
                [
                    name,
                    tool.tool_def.description,
                    tool.tool_def.parameters_json_schema,
                    _annotations(tool),
                ]
                for name, tool in listed.items()
            ],
            sort_keys=True,
            default=repr,
        )
        built = self._built.get(key)
        if built is None:
            unknown = sorted(set(self.policies) - set(listed))
            if unknown:
                msg = f"policies name tools the MCP server does not list: {', '.join(unknown)}"
                raise ValueError(msg)
            tools = [self._tool(name, tool) for name, tool in listed.items()]
            built = Toolset(tools, classifier=self.classifier, rules=self.rules)
            self._built = {key: built}  # only the latest listing is kept
        return built

    def _tool(self, name: str, listed: ToolsetTool[Any]) -> Tool[Any, Any]:
        try:
            tool = SchemaTool(
                name,
                listed.tool_def.description or "",
                listed.tool_def.parameters_json_schema,
                _mcp_body(name),
            )
        except (TypeError, ValueError) as exc:
            msg = f"The MCP server's tool {name!r} cannot be guarded: {exc}"
            raise ValueError(msg) from None
        tool.annotations = _annotations(listed)
        policy = self.policies.get(name)
        return tool if policy is None else as_tool(tool, approval=policy)


def _annotations(tool: ToolsetTool[Any]) -> dict[str, Any]:
    """The MCP annotations Pydantic AI keeps in a listed tool's metadata (``{}`` when none)."""
    metadata = tool.tool_def.metadata
    found = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def _mcp_body(name: str) -> Callable[..., Any]:
    """The body of an MCP tool: the call goes to the MCP toolset that listed it."""
    from toolguard.integrations.mcp import MCPToolError  # noqa: PLC0415 - needs the mcp extra

    async def call(**args: Any) -> Any:
        server, ctx, listed = _MCP_CALL.get()
        try:
            return await server.call_tool(name, args, ctx, listed[name])
        except (ModelRetry, ToolFailed) as exc:
            raise MCPToolError(exc.message) from exc

    call.__name__ = call.__qualname__ = name
    return call


def _meta(requests: DeferredToolRequests, call: ToolCallPart) -> dict[str, Any]:
    return _own(requests.metadata.get(call.tool_call_id))


def _required(meta: Mapping[str, Any]) -> int:
    quorum = meta.get("approvals")
    required = quorum.get("required") if isinstance(quorum, Mapping) else None
    return required if type(required) is int and required > 1 else 1


def _items(requests: DeferredToolRequests) -> list[ReviewItem]:
    items = []
    for call in requests.approvals:
        meta = _meta(requests, call)
        args = _args_dict(call)
        allowed = meta.get("allowed_decisions") or allowed_decisions(None)
        required = _required(meta)
        by = stored_votes(meta.get("approvals"), call.tool_name, args) if required > 1 else []
        shown = redact_args(args, frozenset(_names(meta)))
        items.append(
            ReviewItem(
                name=call.tool_name,
                args=shown,
                description=meta.get("description"),
                allowed_decisions=tuple(allowed),
                progress=(
                    QuorumProgress(required=required, given=len(by), by=by)
                    if required > 1
                    else None
                ),
            )
        )
    return items


def _names(meta: Mapping[str, Any]) -> list[str]:
    names = meta.get("redacted")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _args_dict(call: ToolCallPart) -> dict[str, Any]:
    """The call's arguments as JSON data; refused when they cannot be shown faithfully."""
    try:
        args = call.args
        parsed = json.loads(args) if isinstance(args, str) and args.strip() else (args or {})
        if isinstance(parsed, dict):
            return to_json_data(parsed)  # type: ignore[no-any-return]
    except (ValueError, RecursionError):
        pass
    msg = (
        f"The arguments of the call {call.tool_call_id!r} to `{call.tool_name}` are not a JSON"
        " object a reviewer can be shown. Deny it with ToolDenied instead of reviewing it."
    )
    raise ValueError(msg)


def pending_review(requests: DeferredToolRequests) -> PendingReview:
    """The ``pending_review`` payload for the approvals a run asked for.

    Descriptions set with ``requires_approval(description=...)``, the tool's
    allowed decisions, its redacted parameters (shown as ``REDACTED``) and a
    quorum's progress (``review_configs[i]["approvals"]``) come from
    toolguard (carried in the requests' metadata), not only from Pydantic
    AI's call parts. Calls deferred for external execution
    (``requests.calls``) are not approvals and are not listed.
    """
    return review_payload(_items(requests))


def deferred_results(
    requests: DeferredToolRequests, decisions: Any, *, reviewer: str | int | UUID | None = None
) -> DeferredToolResults:
    """Turn a person's decisions into Pydantic AI's ``DeferredToolResults``.

    Decisions are checked with :func:`~toolguard.validate_decisions` against
    :func:`pending_review` (one per approval, in order). approve →
    ``ToolApproved()``; edit → ``ToolApproved(override_args=...)`` (the edited
    arguments are checked against the schema and the deny rules when the
    call runs; a bad edit becomes a failed tool result and nothing runs; a
    redacted argument left as ``REDACTED`` keeps its real value); reject →
    ``ToolDenied(reason or REJECTED_BY_USER_MESSAGE)``.

    A quorum (``requires_approval(approvals=N)``): each approval or edit is
    one vote of ``reviewer`` (needed, and distinct from the earlier ones),
    carried in the results' metadata. Until N distinct reviewers approved the
    same arguments, the call does not run: the next ``agent.run`` ends with
    ``DeferredToolRequests`` again, whose :func:`pending_review` shows the
    progress. An edit restarts the count for the edited arguments.

    Raises:
        NoPendingReviewError: the requests hold no approval.
        InvalidReviewDecisionError: the decisions do not answer the review,
            or an edit names another tool (Pydantic AI cannot switch tools),
            or an approve carries a standing grant.
        QuorumReviewerError: an anonymous reviewer, or one who already
            approved, votes on a quorum call; nothing changed.
    """
    review = pending_review(requests)
    parsed = checked_decisions(review, decisions, framework=FRAMEWORK)
    who = reviewer_text(reviewer)
    decided_at = now()
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call, decision in zip(requests.approvals, parsed, strict=True):
        meta = _meta(requests, call)
        args = _args_dict(call)
        required = _required(meta)
        carried: dict[str, Any] = {k: meta[k] for k in _BINDING if k in meta}
        # Who decided and when, for the call's span when it runs.
        carried.update(decision=decision.type, decided_at=decided_at)
        if who is not None:
            carried["decided_by"] = who
        if isinstance(decision, ApproveDecision):
            if required > 1:
                earlier = stored_votes(meta.get("approvals"), call.tool_name, args)
                by = add_vote(call.tool_name, required, earlier, reviewer)
                carried["approvals"] = _votes(required, by, call.tool_name, args)
            approvals[call.tool_call_id] = ToolApproved()
        elif isinstance(decision, EditDecision):
            names = frozenset(_names(meta))
            edited = dict(decision.edited_action.args)
            if names:
                edited = keep_redacted(edited, args, names)[0]
            if required > 1:
                by = add_vote(call.tool_name, required, [], reviewer)
                carried["approvals"] = _votes(required, by, call.tool_name, edited)
            approvals[call.tool_call_id] = ToolApproved(override_args=edited)
        else:
            approvals[call.tool_call_id] = ToolDenied(decision.message or REJECTED_BY_USER_MESSAGE)
            trace_ended(
                call.tool_call_id,
                call.tool_name,
                "rejected",
                reviewed(
                    meta.get("review_id"),
                    meta.get("asked_at"),
                    decision="reject",
                    by=who,
                    decided_at=decided_at,
                ),
            )
        if carried:
            metadata[call.tool_call_id] = {METADATA_KEY: carried}
    return DeferredToolResults(approvals=approvals, metadata=metadata)


def _votes(required: int, by: list[str], name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"required": required, "by": by, "digest": args_digest(name, args)}
