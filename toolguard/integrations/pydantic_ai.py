"""toolguard for Pydantic AI: guarded tools pause as Pydantic AI's own deferred approvals.

Install the extra: ``pip install "toolguard-hitl[pydantic-ai]"``.

::

    from pydantic_ai import Agent, DeferredToolRequests
    from toolguard.integrations import pydantic_ai as tg

    agent = Agent(model, toolsets=[tg.toolset([send_email, search_contacts])],
                  output_type=[str, DeferredToolRequests])
    result = await agent.run("Mail Alice that the meeting moved to 10")
    if isinstance(result.output, DeferredToolRequests):
        review = tg.pending_review(result.output)        # SPEC's payload, for a person
        results = tg.deferred_results(result.output, decisions)
        result = await agent.run(message_history=result.all_messages(),
                                 deferred_tool_results=results)

A call that needs no approval runs at once. A call that toolguard says needs
approval (the classifier, ``@requires_approval``, ``when=`` on the actual
arguments) raises Pydantic AI's ``ApprovalRequired``, so the run ends with
``DeferredToolRequests``. Arguments that break the schema get a failed tool
result (``ToolFailed``) without asking anyone, and so does a tool that
raises. Approve runs the call once, reject returns the reason (or
``REJECTED_BY_USER_MESSAGE``) to the model as a denial, edit runs the edited
arguments through ``ToolApproved(override_args=...)``; an edit must keep the
tool's name (Pydantic AI cannot switch an approved call to another tool).

The toolset never runs a guarded body unless Pydantic AI marks the call
approved (``RunContext.tool_call_approved``): calling ``call_tool`` directly
raises ``ApprovalRequired`` instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

try:
    from pydantic_ai import RunContext
    from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
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

from toolguard._json import to_json_data
from toolguard._models import (
    REJECTED_BY_USER_MESSAGE,
    ApproveDecision,
    EditDecision,
    PendingReview,
)
from toolguard._tool import Tool, ToolArgumentsError
from toolguard._toolset import Tools, Toolset
from toolguard.integrations._review import (
    ReviewItem,
    allowed_decisions,
    as_toolset,
    checked_decisions,
    review_payload,
)

__all__ = ["GuardedToolset", "deferred_results", "pending_review", "toolset"]

FRAMEWORK = "Pydantic AI"
METADATA_KEY = "toolguard"
"""The key of toolguard's entry in ``DeferredToolRequests.metadata[tool_call_id]``."""

_ANY_ARGS = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)


class GuardedToolset(AbstractToolset[Any]):
    """A Pydantic AI toolset over a toolguard :class:`~toolguard.Toolset`.

    Build it with :func:`toolset`. Each tool keeps its name, description and
    JSON schema (parameter descriptions included). Arguments are checked by
    toolguard against the tool's schema, so a bad call becomes a failed
    tool result naming the offending field instead of a retry.

    Args:
        tools: the guarded registry.
        id: the toolset's id, unique among an agent's toolsets (needed for
            durable execution).
    """

    def __init__(self, tools: Toolset, *, id: str | None = None) -> None:
        self.tools = tools
        self._id = id

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
        """Run one call: at once, or pause it for approval, or refuse bad arguments.

        Raises:
            ApprovalRequired: the call needs a human and was not approved yet.
            ToolFailed: the arguments break the schema, or the tool raised.
        """
        guarded = self.tools.get(name)
        if guarded is None:
            available = ", ".join(self.tools) or "(none)"
            text = f"Tool `{name}` does not exist. Available tools: {available}"
            raise ToolFailed(text)
        try:
            validated = guarded.validate_args(tool_args)
        except ToolArgumentsError as exc:
            raise ToolFailed(str(exc)) from None
        except RecursionError:
            text = f"Invalid arguments for tool `{name}`: nested too deeply"
            raise ToolFailed(text) from None
        if not ctx.tool_call_approved and _needs_approval(guarded, validated):
            try:
                to_json_data(tool_args)  # what a reviewer will be shown must be JSON
            except (ValueError, RecursionError) as exc:
                text = f"Invalid arguments for tool `{name}`: {exc}"
                raise ToolFailed(text) from None
            raise ApprovalRequired(metadata={METADATA_KEY: _review_metadata(guarded)})
        if ctx.tool_call_approved:
            _record_edit(ctx, tool_args)
        try:
            return await guarded.execute(validated)
        except Exception as exc:
            text = f"Tool `{guarded.name}` failed: {type(exc).__name__}: {exc}"
            raise ToolFailed(text) from exc


def _record_edit(ctx: RunContext[Any], tool_args: dict[str, Any]) -> None:
    """Replace the model's call in the history by the edited one that runs (as SPEC says).

    An approved call whose arguments differ from the model's ran with
    ``ToolApproved(override_args=...)``; the call part in the run's messages is
    updated so the history records the arguments that really ran.
    """
    for message_ in ctx.messages:
        if not isinstance(message_, ModelResponse):
            continue
        for part in message_.parts:
            if isinstance(part, ToolCallPart) and part.tool_call_id == ctx.tool_call_id:
                if part.args_as_dict() != tool_args:
                    part.args = dict(tool_args)
                return


def _needs_approval(tool: Tool[Any, Any], validated: Mapping[str, Any]) -> bool:
    """The tool's policy on these arguments; a predicate that fails means "ask" (fail closed)."""
    try:
        return tool.needs_approval(validated)
    except Exception:
        return True


def _review_metadata(tool: Tool[Any, Any]) -> dict[str, Any]:
    return {
        "description": tool.review_description(),
        "allowed_decisions": list(allowed_decisions(tool)),
    }


def toolset(tools: Tools, *, id: str | None = None) -> GuardedToolset:
    """Pydantic AI tools for ``Agent(toolsets=[...])``, guarded by toolguard.

    Give the agent ``output_type=[str, DeferredToolRequests]`` (or your
    output type plus ``DeferredToolRequests``) so a paused run returns the
    requests instead of failing.

    Args:
        tools: a :class:`~toolguard.Toolset`, or a list or mapping of
            functions and tools (then :func:`~toolguard.guard` classifies
            them).
        id: the toolset's id among the agent's toolsets.
    """
    return GuardedToolset(as_toolset(tools), id=id)


def _items(requests: DeferredToolRequests) -> list[ReviewItem]:
    items = []
    for call in requests.approvals:
        meta = requests.metadata.get(call.tool_call_id, {}).get(METADATA_KEY) or {}
        allowed = meta.get("allowed_decisions") or allowed_decisions(None)
        items.append(
            ReviewItem(
                name=call.tool_name,
                args=_args_dict(call),
                description=meta.get("description"),
                allowed_decisions=tuple(allowed),
            )
        )
    return items


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
    """SPEC's ``pending_review`` payload for the approvals a run asked for.

    Descriptions set with ``requires_approval(description=...)`` and the
    tool's allowed decisions come from toolguard (carried in the requests'
    metadata), not only from Pydantic AI's call parts. Calls deferred for
    external execution (``requests.calls``) are not approvals and are not
    listed.
    """
    return review_payload(_items(requests))


def deferred_results(requests: DeferredToolRequests, decisions: Any) -> DeferredToolResults:
    """Turn a person's decisions into Pydantic AI's ``DeferredToolResults``.

    Decisions are checked with :func:`~toolguard.validate_decisions` against
    :func:`pending_review` (one per approval, in order). approve →
    ``ToolApproved()``; edit → ``ToolApproved(override_args=...)`` (the edited
    arguments are checked against the schema when the call runs; a bad edit
    becomes a failed tool result and nothing runs); reject →
    ``ToolDenied(reason or REJECTED_BY_USER_MESSAGE)``.

    Raises:
        NoPendingReviewError: the requests hold no approval.
        InvalidReviewDecisionError: the decisions do not answer the review,
            or an edit names another tool (Pydantic AI cannot switch tools).
    """
    review = pending_review(requests)
    parsed = checked_decisions(review, decisions, framework=FRAMEWORK)
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    for call, decision in zip(requests.approvals, parsed, strict=True):
        if isinstance(decision, ApproveDecision):
            approvals[call.tool_call_id] = ToolApproved()
        elif isinstance(decision, EditDecision):
            approvals[call.tool_call_id] = ToolApproved(
                override_args=dict(decision.edited_action.args)
            )
        else:
            approvals[call.tool_call_id] = ToolDenied(decision.message or REJECTED_BY_USER_MESSAGE)
    return DeferredToolResults(approvals=approvals)
