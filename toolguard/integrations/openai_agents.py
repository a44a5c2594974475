"""toolguard for the OpenAI Agents SDK: guarded tools pause as the SDK's own interruptions.

Install the extra: ``pip install "toolguard-hitl[openai-agents]"``.

::

    from agents import Agent, Runner
    from toolguard.integrations import openai_agents as tg

    agent = Agent(name="assistant", tools=tg.function_tools([send_email, search_contacts]))
    result = await Runner.run(agent, "Mail Alice that the meeting moved to 10", context={})
    if result.interruptions:
        review = tg.pending_review(result.interruptions)    # SPEC's payload, for a person
        state = result.to_state()                          # to_string() / from_string() to store
        tg.apply_decisions(state, decisions)
        result = await Runner.run(agent, state)

A call that needs no approval runs at once. A call that toolguard says needs
approval (the classifier, ``@requires_approval``, ``when=`` on the actual
arguments) is the SDK's ``needs_approval``, so the run stops with
``result.interruptions``. Arguments that break the schema get an error result
without asking anyone, and so does a tool that raises.

Decisions: approve is ``RunState.approve``; reject is ``RunState.reject``
with the reason (or ``REJECTED_BY_USER_MESSAGE``) as the text the model
reads; edit, which the SDK does not have, is an approval plus the edited
arguments kept in the run's context under :data:`EDITS_KEY` (the context
must be a dict: pass ``context={}`` or your own dict to ``Runner.run``; a run
without context gets one), so it survives ``RunState.to_string()`` /
``from_string()``; the tool then runs with the edited arguments, checked
against the schema. The model's call in the run's history is replaced by the
edited one, so the model (and ``result.to_input_list()``) sees what ran; if
the SDK's history item cannot be found, the tool result starts with
:data:`EDITED_RESULT`'s note of the arguments that ran instead. An edit that
names another tool, or a run whose context is not a dict, is refused with an
error: the original arguments never run in place of an edit. With the
Responses API's server-side conversation (``previous_response_id``) the
server keeps the model's own arguments: toolguard cannot rewrite it.

The tools never run a guarded body without the SDK's approval of that call:
calling ``FunctionTool.on_invoke_tool`` directly for a call that needs
approval raises :class:`~toolguard.ApprovalRequiredError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, cast

try:
    from agents import FunctionTool, RunContextWrapper, RunState, ToolApprovalItem
    from agents.items import ToolCallItem
    from agents.tool_context import ToolContext
    from openai.types.responses import ResponseFunctionToolCall
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = (
        "toolguard.integrations.openai_agents needs the OpenAI Agents SDK:"
        ' pip install "toolguard-hitl[openai-agents]"'
    )
    raise ImportError(msg) from exc

from toolguard._errors import ApprovalRequiredError, InvalidReviewDecisionError
from toolguard._json import clean_text, to_json_data
from toolguard._models import (
    REJECTED_BY_USER_MESSAGE,
    ApproveDecision,
    EditDecision,
    PendingReview,
    ToolCall,
)
from toolguard._tool import Tool, ToolArgumentsError
from toolguard._toolset import Tools
from toolguard.integrations._review import (
    ReviewItem,
    allowed_decisions,
    as_toolset,
    checked_decisions,
    review_payload,
)

__all__ = ["EDITED_RESULT", "EDITS_KEY", "apply_decisions", "function_tools", "pending_review"]

FRAMEWORK = "the OpenAI Agents SDK"
EDITS_KEY = "toolguard_edits"
"""The context key holding edited calls: ``{call_id: {"name", "args", "in_history"}}``."""

EDITED_RESULT = "A reviewer edited this call; it ran with the arguments {args}. Result: {result}"
"""What the model reads for an edited call whose history item could not be replaced."""

_TOOL_ATTR = "_toolguard_tool"


def function_tools(tools: Tools) -> list[FunctionTool]:
    """The tools as Agents SDK ``FunctionTool`` objects, guarded by toolguard.

    Each keeps its name, description and JSON schema (parameter
    descriptions included; not in the SDK's strict mode, so optional
    parameters stay optional).

    Args:
        tools: a :class:`~toolguard.Toolset`, or a list or mapping of
            functions and tools (then :func:`~toolguard.guard` classifies
            them).
    """
    return [_function_tool(tool) for tool in as_toolset(tools).values()]


def _function_tool(tool: Tool[Any, Any]) -> FunctionTool:
    async def needs_approval(
        _ctx: RunContextWrapper[Any], params: dict[str, Any], _call_id: str
    ) -> bool:
        try:
            to_json_data(params)  # what a reviewer would be shown must be JSON
            validated = tool.validate_args(params)
        except (ValueError, RecursionError):
            return False  # the call gets its error result without asking anyone
        return _needs_approval(tool, validated)

    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> str:
        return await _invoke(tool, ctx, input_json)

    function_tool = FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
        needs_approval=needs_approval if tool.guarded else False,
    )
    setattr(function_tool, _TOOL_ATTR, tool)
    return function_tool


def _needs_approval(tool: Tool[Any, Any], validated: Mapping[str, Any]) -> bool:
    """The tool's policy on these arguments; a predicate that fails means "ask" (fail closed)."""
    try:
        return tool.needs_approval(validated)
    except Exception:
        return True


def _parse_object(text: str | None) -> dict[str, Any] | None:
    """JSON object arguments as JSON data, or ``None`` when they are not an object."""
    if text is None or not text.strip():
        return {}
    try:
        parsed = json.loads(text)
        return to_json_data(parsed) if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):  # not JSON, or too deep to be shown to anyone
        return None


def _result_text(value: Any) -> str:
    try:
        data = to_json_data(value)
    except (ValueError, RecursionError) as exc:
        return f"The tool's result cannot be sent as JSON: {exc}"
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _edit_for(ctx: ToolContext[Any]) -> dict[str, Any] | None:
    context = ctx.context
    if not isinstance(context, Mapping):
        return None
    edits = context.get(EDITS_KEY)
    if not isinstance(edits, Mapping):
        return None
    edit = edits.get(ctx.tool_call_id)
    return dict(edit) if isinstance(edit, Mapping) else None


async def _invoke(tool: Tool[Any, Any], ctx: ToolContext[Any], input_json: str) -> str:
    """Run one call of ``tool`` the way toolguard's runner would."""
    approved = ctx.is_tool_approved(tool.name, ctx.tool_call_id) is True
    edit = _edit_for(ctx) if approved else None
    if edit is not None:
        args: dict[str, Any] | None = edit.get("args")
        if not isinstance(args, dict) or edit.get("name") != tool.name:
            return (
                f"The edited call for `{tool.name}` is malformed in the run's context."
                " It was not executed."
            )
    else:
        args = _parse_object(input_json)
        if args is None:
            shown = clean_text(input_json)[:200]
            return f"Invalid arguments for tool `{tool.name}`: expected a JSON object, got {shown}"
    try:
        validated = tool.validate_args(args)
    except ToolArgumentsError as exc:
        return str(exc)
    except RecursionError:
        return f"Invalid arguments for tool `{tool.name}`: nested too deeply"
    if not approved and _needs_approval(tool, validated):
        call = ToolCall(id=ctx.tool_call_id, name=tool.name, args=args)
        review = review_payload([_review_item(tool, args)])
        raise ApprovalRequiredError(pending_review=review, call=call)
    try:
        value = await tool.execute(validated)
    except Exception as exc:
        text = f"Tool `{tool.name}` failed: {type(exc).__name__}: {exc}"
    else:
        text = _result_text(value)
    if edit is not None and not edit.get("in_history"):
        ran = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return EDITED_RESULT.format(args=ran, result=text)
    return text


def _review_item(tool: Tool[Any, Any] | None, args: dict[str, Any], name: str = "") -> ReviewItem:
    return ReviewItem(
        name=tool.name if tool is not None else name,
        args=args,
        description=tool.review_description() if tool is not None else None,
        allowed_decisions=allowed_decisions(tool),
    )


def _toolguard_tool(item: ToolApprovalItem) -> Tool[Any, Any] | None:
    """The toolguard tool behind an interruption, found on the interrupted agent."""
    agent = getattr(item, "agent", None)
    for candidate in getattr(agent, "tools", None) or ():
        if isinstance(candidate, FunctionTool) and candidate.name == item.tool_name:
            found = getattr(candidate, _TOOL_ATTR, None)
            return found if isinstance(found, Tool) else None
    return None


def _reviewable(
    interruptions: Sequence[ToolApprovalItem],
) -> tuple[
    list[tuple[ToolApprovalItem, Tool[Any, Any] | None, ReviewItem]], list[ToolApprovalItem]
]:
    """Split interruptions into the ones a person reviews and toolguard calls with bad arguments.

    A toolguard call whose arguments are not a JSON object cannot run; the SDK
    still asks for its approval (its policy cannot read them), so it is not
    shown to anyone: approving it gives the model the error result.
    """
    reviewed = []
    broken = []
    for item in interruptions:
        if not isinstance(cast("object", item), ToolApprovalItem):
            msg = f"pending_review() takes the run's interruptions, got {type(item).__name__}"
            raise TypeError(msg)
        tool = _toolguard_tool(item)
        args = _parse_object(item.arguments)
        if args is None:
            if tool is not None:
                broken.append(item)
                continue
            args = {}
        reviewed.append((item, tool, _review_item(tool, args, name=item.tool_name or "")))
    return reviewed, broken


def pending_review(interruptions: Sequence[ToolApprovalItem]) -> PendingReview:
    """SPEC's ``pending_review`` payload for a run's ``interruptions``.

    Descriptions set with ``requires_approval(description=...)`` and the
    tool's allowed decisions come from toolguard. Interruptions of tools not
    built by :func:`function_tools` are listed with the default description.

    Args:
        interruptions: ``result.interruptions`` or ``state.get_interruptions()``.
    """
    reviewed, _ = _reviewable(list(interruptions))
    return review_payload([entry for _, _, entry in reviewed])


def apply_decisions(state: RunState[Any, Any], decisions: Any) -> None:
    """Apply a person's decisions to a paused run; then ``Runner.run(agent, state)`` resumes it.

    Decisions are checked with :func:`~toolguard.validate_decisions` against
    :func:`pending_review` of the state's interruptions, in order; a refused
    list changes nothing. approve → ``state.approve``; reject →
    ``state.reject`` with the reason or ``REJECTED_BY_USER_MESSAGE``; edit →
    approval plus the edited arguments under ``context[EDITS_KEY]`` (the
    tool runs them, checked against the schema), and the model's call in the
    run's history replaced by the edited one. Calls with arguments that are
    not a JSON object are approved so the model gets their error result.

    Raises:
        NoPendingReviewError: the state has no interruption to decide.
        InvalidReviewDecisionError: the decisions do not answer the review;
            an edit names another tool or a tool not built by
            :func:`function_tools`.
        TypeError: an edit while the run's context is not a dict (pass
            ``context={}`` to ``Runner.run``).
    """
    reviewed, broken = _reviewable(state.get_interruptions())
    review = review_payload([entry for _, _, entry in reviewed])
    parsed = checked_decisions(review, decisions, framework=FRAMEWORK)
    edits: dict[str, dict[str, Any]] = {}
    for (item, tool, entry), decision in zip(reviewed, parsed, strict=True):
        if isinstance(decision, EditDecision):
            if tool is None:
                msg = (
                    f"The tool `{entry.name}` was not built by toolguard's function_tools(), so"
                    " it cannot run edited arguments. Approve or reject the call."
                )
                raise InvalidReviewDecisionError(msg)
            edits[str(item.call_id)] = {
                "name": decision.edited_action.name,
                "args": dict(decision.edited_action.args),
            }
    if edits:
        context = _edit_context(state)  # refuses before anything changes
        for call_id, edit in edits.items():
            edit["in_history"] = _replace_in_history(state, call_id, edit["args"])
        stored = context.get(EDITS_KEY)
        context[EDITS_KEY] = {**(stored if isinstance(stored, Mapping) else {}), **edits}
    for (item, _, _), decision in zip(reviewed, parsed, strict=True):
        if isinstance(decision, (ApproveDecision, EditDecision)):
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.message or REJECTED_BY_USER_MESSAGE)
    for item in broken:
        state.approve(item)


def _replace_in_history(state: RunState[Any, Any], call_id: str, args: dict[str, Any]) -> bool:
    """Replace the model's call by the edited one in the run's history (what the model reads next).

    Only the history item is replaced (a copy); the SDK's approval record of
    the call is left as it was. Returns whether the call was found.
    """
    items = getattr(state, "_generated_items", None)
    if not isinstance(items, list):
        return False
    for item in items:
        raw = getattr(item, "raw_item", None)
        if (
            isinstance(item, ToolCallItem)
            and isinstance(raw, ResponseFunctionToolCall)
            and raw.call_id == call_id
        ):
            text = json.dumps(args, ensure_ascii=False)
            item.raw_item = raw.model_copy(update={"arguments": text})
            return True
    return False


def _edit_context(state: RunState[Any, Any]) -> MutableMapping[str, Any]:
    """The run's context dict, which carries edits (``None`` becomes ``{}``)."""
    wrapper: RunContextWrapper[Any] | None = getattr(state, "_context", None)
    if wrapper is None:
        msg = "This RunState has no run context, so it cannot carry an edit. Approve or reject."
        raise TypeError(msg)
    context: object = wrapper.context
    if context is not None and not isinstance(context, MutableMapping):
        msg = (
            "An edit is kept in the run's context, which must be a dict to survive"
            f" RunState.to_string(); this run's context is a {type(context).__name__}."
            " Pass context={} (or a dict of your own) to Runner.run, or approve or reject."
        )
        raise TypeError(msg)
    if context is None:
        fresh: dict[str, Any] = {}
        wrapper.context = fresh
        return fresh
    return cast("MutableMapping[str, Any]", context)
