"""toolguard for the OpenAI Agents SDK: guarded tools pause as the SDK's own interruptions.

Install the extra: ``pip install "toolguard-hitl[openai-agents]"``.

::

    from agents import Agent, Runner
    from toolguard.integrations import openai_agents as tg

    agent = Agent(name="assistant", tools=tg.function_tools([send_email, search_contacts]))
    result = await Runner.run(agent, "Mail Alice that the meeting moved to 10", context={})
    if result.interruptions:
        review = tg.pending_review(result.interruptions)    # the payload, for a person
        state = result.to_state()                          # to_string() / from_string() to store
        tg.apply_decisions(state, decisions)
        result = await Runner.run(agent, state)

Each call is decided as toolguard's runner decides it: the toolset's
allow/ask/deny rules first, then the tool's own policy (the classifier,
``@requires_approval``, ``when=`` on the actual arguments). A call a deny rule
matches gets the denial as its result, unasked and unrun. A call that needs
no approval runs at once. A call that needs approval is the SDK's
``needs_approval``, so the run stops with ``result.interruptions``; a quorum
(``requires_approval(approvals=N)``) keeps it interrupted until N distinct
reviewers (``apply_decisions(..., reviewer=)``) approved, their votes kept in
the run's context under :data:`VOTES_KEY`. Redacted arguments show as
``REDACTED`` in :func:`pending_review`. Arguments that break the schema get an error result
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

A tool with ``requires_approval(ttl=...)`` records when each call asked in the
run's context under :data:`ASKED_KEY`; an approved call about to start past
that deadline does not run, and the model reads the runner's expiry text.

The tools never run a guarded body without the SDK's approval of that call:
calling ``FunctionTool.on_invoke_tool`` directly for a call that needs
approval raises :class:`~toolguard.ApprovalRequiredError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

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

from toolguard import (
    ApprovalRequiredError,
    ReviewStateError,
)
from toolguard._enforce.pipeline import (
    REJECTED_BY_USER_MESSAGE,
    AnyDecision,
    ApproveDecision,
    Claims,
    EditDecision,
    InvalidReviewDecisionError,
    PendingReview,
    ReviewItem,
    ShadowMode,
    Tool,
    ToolCall,
    Tools,
    Toolset,
    add_vote,
    allowed_by,
    args_digest,
    as_toolset,
    call_span,
    check_claims,
    checked_decisions,
    claim_once,
    deadline_refusal,
    edited_args,
    failure_text,
    finish,
    has_deadline,
    new_id,
    now,
    propose,
    refuse_shadow,
    review_item,
    review_payload,
    reviewer_text,
    run_body,
    shown_result,
    stored_votes,
    telemetry,
    to_json_data,
    trace_ended,
    trace_refusal,
    vote_count,
)
from toolguard._enforce.pipeline import (
    reviewed as decided_in_review,
)

__all__ = [
    "ASKED_KEY",
    "EDITED_RESULT",
    "EDITS_KEY",
    "REVIEWS_KEY",
    "TRACE_KEY",
    "VOTES_KEY",
    "ReviewStateError",
    "apply_decisions",
    "function_tools",
    "pending_review",
]

FRAMEWORK = "the OpenAI Agents SDK"
EDITS_KEY = "toolguard_edits"
"""The context key holding edited calls: ``{call_id: {"name", "args", "in_history"}}``."""

VOTES_KEY = "toolguard_votes"
"""The context key holding a quorum's votes: ``{call_id: {"by", "digest", "args"?}}``."""

REVIEWS_KEY = "toolguard_reviews"
"""The context key holding each paused call's review id, claimed once with ``claims``."""

ASKED_KEY = "toolguard_asked_at"
"""The context key holding when each paused call of a tool with a ``ttl`` asked (epoch seconds)."""

TRACE_KEY = "toolguard_trace"
"""The context key holding, while the application traces, each paused call's review for its spans.

``{call_id: {"review_id", "asked_at", "decided_at"?, "decision"?, "by"?}}``:
the review's id, when the call asked and when it was decided (epoch
seconds), the decision's type and the reviewer. Written only when a tracer
provider is set and the run's context is a dict (or none: it becomes one).
"""

EDITED_RESULT = "A reviewer edited this call; it ran with the arguments {args}. Result: {result}"
"""What the model reads for an edited call whose history item could not be replaced."""

_TOOL_ATTR = "_toolguard_tool"


def function_tools(
    tools: Tools, *, claims: Claims | None = None, shadow: ShadowMode = False
) -> list[FunctionTool]:
    """The tools as Agents SDK ``FunctionTool`` objects, guarded by toolguard.

    Each keeps its name, description and JSON schema (parameter
    descriptions included; not in the SDK's strict mode, so optional
    parameters stay optional). Every call is decided as toolguard's runner
    decides it: the toolset's allow/ask/deny rules, then the tool's policy.

    Args:
        tools: a :class:`~toolguard.Toolset` (its ``rules`` apply), or a list
            or mapping of functions and tools (then :func:`~toolguard.guard`
            classifies them).
        claims: a store with ``claim(key)`` (``MemoryStore``, ``SQLiteStore``,
            ``PostgresStore``): an approved call is claimed there before it
            runs, so a paused run resumed twice (two processes) runs it once.
            The review id it claims is kept in the run's context under
            :data:`REVIEWS_KEY` (the context must be a dict).

    Raises:
        TypeError: ``claims`` has no ``claim`` method.
        UnsupportedPolicyError: ``tools`` is a Runner, a ReviewedChat or a Judge: its
            judge would not apply here (the text names the alternative); or
            ``shadow`` is on: nothing here records what would have been asked.
    """
    refuse_shadow(shadow, "function_tools()")
    toolset = as_toolset(tools)
    store = check_claims(claims)
    return [_function_tool(toolset, tool, store) for tool in toolset.values()]


def _function_tool(toolset: Toolset, tool: Tool[Any, Any], claims: Claims | None) -> FunctionTool:
    async def needs_approval(
        ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        _, verdict = propose(toolset, call_id, tool.name, params)
        if verdict.outcome != "ask":
            return False  # runs at once, or gets its refusal without asking anyone
        needs = []
        if verdict.approvals > 1:
            needs.append(f"the votes of its {verdict.approvals} reviewers")
        if claims is not None:
            needs.append("its once-only claim")
        if has_deadline(tool):
            needs.append("when it asked, for its deadline")
        review_id, asked_at = new_id(), now()
        if needs:
            context = _run_context(ctx, tool.name, " and ".join(needs))
            if claims is not None:
                _keep_entry(context, REVIEWS_KEY, call_id, review_id)
            if has_deadline(tool):
                _keep_entry(context, ASKED_KEY, call_id, asked_at)
        traced = _trace_context(ctx) if telemetry.tracer() is not None else None
        if traced is not None:
            _keep_entry(traced, TRACE_KEY, call_id, {"review_id": review_id, "asked_at": asked_at})
        return True

    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> str:
        return await _invoke(toolset, tool, claims, ctx, input_json)

    function_tool = FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )
    setattr(function_tool, _TOOL_ATTR, tool)
    return function_tool


def _keep_entry(context: MutableMapping[str, Any], key: str, call_id: str, value: Any) -> None:
    stored = context.get(key)
    entries = dict(stored) if isinstance(stored, Mapping) else {}
    context[key] = {**entries, call_id: value}


def _run_context(wrapper: RunContextWrapper[Any], name: str, need: str) -> MutableMapping[str, Any]:
    """The run's context dict, where a quorum's votes, review ids and ask times are kept.

    Raises:
        ReviewStateError: the context is not a dict (``None`` becomes ``{}``).
    """
    context: object = wrapper.context
    if context is None:
        fresh: dict[str, Any] = {}
        wrapper.context = fresh
        return fresh
    if not isinstance(context, MutableMapping):
        msg = (
            f"The call to `{name}` needs a review whose state toolguard keeps in the run's"
            f" context ({need}), but this run's context is a {type(context).__name__}."
            " Pass context={} (or a dict of your own) to Runner.run, or use toolguard.Runner"
            " or toolguard.ReviewedChat, which keep it in their own paused turn."
        )
        raise ReviewStateError(msg)
    return cast("MutableMapping[str, Any]", context)


def _trace_context(wrapper: object) -> MutableMapping[str, Any] | None:
    """The run's context dict for :data:`TRACE_KEY` (``None`` becomes ``{}``; else ``None``).

    Tracing never refuses a run: a context that is not a dict just carries no review.
    """
    context: object = getattr(wrapper, "context", None)
    if context is None and wrapper is not None:
        fresh: dict[str, Any] = {}
        cast("Any", wrapper).context = fresh
        return fresh
    return (
        cast("MutableMapping[str, Any]", context) if isinstance(context, MutableMapping) else None
    )


def _traced(context: object, call_id: str, *, edited: bool = False) -> telemetry.Decided:
    """How an approved call was decided, for its span, from :data:`TRACE_KEY` (and the claims)."""
    entry = _context_entry(context, TRACE_KEY, call_id)
    entry = entry if isinstance(entry, Mapping) else {}
    review_id = entry.get("review_id") or _context_entry(context, REVIEWS_KEY, call_id)
    asked_at = entry.get("asked_at") or _context_entry(context, ASKED_KEY, call_id)
    decision = entry.get("decision")
    return decided_in_review(
        review_id,
        asked_at,
        decision=decision if isinstance(decision, str) else "edit" if edited else "approve",
        by=entry.get("by"),
        decided_at=entry.get("decided_at"),
    )


def _parse_object(text: str | None) -> dict[str, Any] | None:
    """JSON object arguments as JSON data, or ``None`` when they are not an object."""
    if text is None or not text.strip():
        return {}
    try:
        parsed = json.loads(text)
        return to_json_data(parsed) if isinstance(parsed, dict) else None
    except (ValueError, RecursionError):  # not JSON, or too deep to be shown to anyone
        return None


def _as_the_sdk_gives_it(value: Any) -> Any:
    """An MCP tool's result as the Agents SDK's own MCP path gives it to the model: the text of
    its content blocks (not ``{"result": ...}``, the structured content an MCP server adds), or
    the structured content as JSON from a server built with ``use_structured_content=True``.
    Any other value is left as it is."""
    text = getattr(value, "content_text", None)
    if not isinstance(value, dict) or not isinstance(text, str):
        return value
    structured = getattr(value, "structured_content", None)
    if getattr(value, "structured_first", False) and structured:
        return json.dumps(structured)
    return text


def _result_text(value: Any) -> str:
    try:
        data = to_json_data(value)
    except (ValueError, RecursionError) as exc:
        return f"The tool's result cannot be sent as JSON: {exc}"
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _context_entry(context: object, key: str, call_id: str) -> Any:
    if not isinstance(context, Mapping):
        return None
    entries = context.get(key)
    return entries.get(call_id) if isinstance(entries, Mapping) else None


def _edit_for(ctx: ToolContext[Any]) -> dict[str, Any] | None:
    edit = _context_entry(ctx.context, EDITS_KEY, ctx.tool_call_id)
    return dict(edit) if isinstance(edit, Mapping) else None


async def _invoke(
    toolset: Toolset,
    tool: Tool[Any, Any],
    claims: Claims | None,
    ctx: ToolContext[Any],
    input_json: str,
) -> str:
    """Run one call of ``tool`` the way toolguard's runner would."""
    approved = ctx.is_tool_approved(tool.name, ctx.tool_call_id) is True
    edit = _edit_for(ctx) if approved else None
    decided = _traced(ctx.context, ctx.tool_call_id, edited=edit is not None) if approved else None
    source: Any = input_json
    if edit is not None:
        source = edit.get("args")
        if not isinstance(source, dict) or edit.get("name") != tool.name:
            trace_ended(ctx.tool_call_id, tool.name, "failed", decided, "tampered")
            return (
                f"The edited call for `{tool.name}` is malformed in the run's context."
                " It was not executed."
            )
    elif not input_json.strip():
        source = {}
    call, verdict = propose(toolset, ctx.tool_call_id, tool.name, source)
    if verdict.outcome == "deny" or verdict.validated is None:
        trace_refusal(call, verdict, decided)
        return verdict.refusal or ""  # a deny rule, bad arguments: nothing runs
    validated = verdict.validated
    if verdict.outcome == "ask":
        quorum = verdict.approvals > 1
        by: list[str] = []
        if approved and quorum:
            record = _context_entry(ctx.context, VOTES_KEY, ctx.tool_call_id)
            by = stored_votes(record, tool.name, call.args)
        if not approved or (quorum and vote_count(by) < verdict.approvals):
            item = review_item(tool, tool.name, call.args, required=verdict.approvals, by=by)
            shown = ToolCall(id=call.id, name=tool.name, args=item.args)
            raise ApprovalRequiredError(pending_review=review_payload([item]), call=shown)
    if approved and claims is not None:
        review_id = _context_entry(ctx.context, REVIEWS_KEY, ctx.tool_call_id)
        if not isinstance(review_id, str) or not review_id:
            return (
                f"The approved call to `{tool.name}` has no toolguard review id in the run's"
                " context, so it cannot be claimed once. It was not executed."
            )
        await claim_once(claims, review_id)
    if approved:
        asked_at = _context_entry(ctx.context, ASKED_KEY, ctx.tool_call_id)
        late = deadline_refusal(tool, asked_at)
        if late is not None:
            trace_ended(call.id, tool.name, "expired", decided)
            return late  # the call is about to start, past its review's deadline
    if not approved or verdict.outcome == "run":
        decided = allowed_by(verdict)  # the SDK's approval of a call toolguard lets run
    with call_span(call.id, tool.name, decided) as span:
        try:
            value = await run_body(tool, validated)
        except Exception as exc:
            finish(span, "failed", exc)
            text = failure_text(tool, exc, validated, call.args)
        else:
            finish(span, "executed")
            shown = shown_result(tool, _as_the_sdk_gives_it(value), validated, call.args)
            text = _result_text(shown)
    if edit is not None and not edit.get("in_history"):
        ran = json.dumps(tool.shown_args(call.args), ensure_ascii=False, sort_keys=True)
        return EDITED_RESULT.format(args=ran, result=text)
    return text


def _toolguard_tool(item: ToolApprovalItem) -> Tool[Any, Any] | None:
    """The toolguard tool behind an interruption, found on the interrupted agent."""
    agent = getattr(item, "agent", None)
    for candidate in getattr(agent, "tools", None) or ():
        if isinstance(candidate, FunctionTool) and candidate.name == item.tool_name:
            found = getattr(candidate, _TOOL_ATTR, None)
            return found if isinstance(found, Tool) else None
    return None


@dataclass(frozen=True, slots=True)
class _Paused:
    """One interruption a person reviews."""

    item: ToolApprovalItem
    tool: Tool[Any, Any] | None
    args: dict[str, Any]
    """The real arguments under review: the model's, or a quorum's pending edit."""
    proposed: dict[str, Any]
    """The model's own arguments."""
    required: int
    by: list[str]
    entry: ReviewItem


def _reviewable(
    interruptions: Sequence[ToolApprovalItem], context: object
) -> tuple[list[_Paused], list[ToolApprovalItem]]:
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
        proposed = _parse_object(item.arguments)
        if proposed is None:
            if tool is not None:
                broken.append(item)
                continue
            proposed = {}
        name = tool.name if tool is not None else item.tool_name or ""
        required = tool.approvals if tool is not None else 1
        args, by = proposed, []
        if required > 1:
            record = _context_entry(context, VOTES_KEY, str(item.call_id))
            pending_edit = record.get("args") if isinstance(record, Mapping) else None
            if isinstance(pending_edit, dict):
                args = pending_edit
            by = stored_votes(record, name, args)
        entry = review_item(tool, name, args, required=required, by=by)
        reviewed.append(_Paused(item, tool, args, proposed, required, by, entry))
    return reviewed, broken


def _source(
    source: RunState[Any, Any] | Sequence[ToolApprovalItem],
) -> tuple[list[ToolApprovalItem], object]:
    if isinstance(source, RunState):
        wrapper = getattr(source, "_context", None)
        return source.get_interruptions(), getattr(wrapper, "context", None)
    return list(source), None


def pending_review(source: RunState[Any, Any] | Sequence[ToolApprovalItem]) -> PendingReview:
    """The ``pending_review`` payload for a paused run.

    Descriptions set with ``requires_approval(description=...)``, the tool's
    allowed decisions and its redacted parameters (shown as ``REDACTED``)
    come from toolguard. Interruptions of tools not built by
    :func:`function_tools` are listed with the default description.

    Args:
        source: the paused ``RunState`` (``result.to_state()``), or
            ``result.interruptions``. Give the state to see a quorum's votes
            so far (they are kept in its context); the interruptions alone
            show ``given: 0``.
    """
    interruptions, context = _source(source)
    reviewed, _ = _reviewable(interruptions, context)
    return review_payload([paused.entry for paused in reviewed])


def apply_decisions(
    state: RunState[Any, Any], decisions: Any, *, reviewer: str | int | UUID | None = None
) -> PendingReview | None:
    """Apply a person's decisions to a paused run; then ``Runner.run(agent, state)`` resumes it.

    Decisions are checked with :func:`~toolguard.validate_decisions` against
    :func:`pending_review` of the state, in order; a refused list changes
    nothing. approve → ``state.approve``; reject → ``state.reject`` with the
    reason or ``REJECTED_BY_USER_MESSAGE``; edit → approval plus the edited
    arguments under ``context[EDITS_KEY]`` (the tool runs them, checked
    against the schema and the deny rules; a redacted argument left as
    ``REDACTED`` keeps its real value), and the model's call in the run's
    history replaced by the edited one. Calls with arguments that are not a
    JSON object are approved so the model gets their error result.

    A quorum (``requires_approval(approvals=N)``): each approval is one vote
    of ``reviewer`` (needed, and distinct from the earlier ones), kept in the
    run's context under :data:`VOTES_KEY`. Until N distinct reviewers
    approved the same arguments the call stays an interruption and nothing
    runs; an edit restarts the count for the edited arguments.

    Returns:
        The review still waiting (a quorum in progress, with its
        ``approvals`` progress), or ``None`` when every call is decided.

    Raises:
        NoPendingReviewError: the state has no interruption to decide.
        InvalidReviewDecisionError: the decisions do not answer the review;
            an edit names another tool or a tool not built by
            :func:`function_tools`; an approve carries a standing grant.
        QuorumReviewerError: an anonymous reviewer, or one who already
            approved, votes on a quorum call; nothing changed.
        TypeError: an edit while the run's context is not a dict (pass
            ``context={}`` to ``Runner.run``).
    """
    wrapper = getattr(state, "_context", None)
    reviewed, broken = _reviewable(state.get_interruptions(), getattr(wrapper, "context", None))
    review = review_payload([paused.entry for paused in reviewed])
    parsed = checked_decisions(review, decisions, framework=FRAMEWORK)
    edits: dict[str, dict[str, Any]] = {}
    votes: dict[str, dict[str, Any] | None] = {}
    settled: list[tuple[ToolApprovalItem, AnyDecision]] = []
    held: list[ReviewItem] = []
    for paused, decision in zip(reviewed, parsed, strict=True):
        call_id = str(paused.item.call_id)
        name = paused.entry.name
        if isinstance(decision, EditDecision) and paused.tool is None:
            msg = (
                f"The tool `{name}` was not built by toolguard's function_tools(), so"
                " it cannot run edited arguments. Approve or reject the call."
            )
            raise InvalidReviewDecisionError(msg)
        if isinstance(decision, (ApproveDecision, EditDecision)) and paused.required > 1:
            # A vote: it counts for the arguments it approved (an edit starts a new count).
            args, earlier = paused.args, paused.by
            if isinstance(decision, EditDecision):
                args = edited_args(paused.tool, decision.edited_action.args, paused.args)
                earlier = []
            by = add_vote(name, paused.required, earlier, reviewer)
            record: dict[str, Any] = {"by": by, "digest": args_digest(name, args)}
            if args != paused.proposed:
                record["args"] = args
            votes[call_id] = record
            if vote_count(by) < paused.required:
                held.append(review_item(paused.tool, name, args, required=paused.required, by=by))
                continue
            if args != paused.proposed:
                edits[call_id] = {"name": name, "args": args}
            settled.append((paused.item, ApproveDecision()))
            continue
        if isinstance(decision, EditDecision):
            args = edited_args(paused.tool, decision.edited_action.args, paused.proposed)
            edits[call_id] = {"name": decision.edited_action.name, "args": args}
        if paused.required > 1:
            votes[call_id] = None  # rejected: its votes end with it
        settled.append((paused.item, decision))
    if edits or votes:
        _keep(state, edits, votes)
    tracing = telemetry.tracer() is not None
    traced = _trace_context(wrapper) if tracing else None
    for item, decision in settled:
        if isinstance(decision, (ApproveDecision, EditDecision)):
            state.approve(item)
        else:
            reason = getattr(decision, "message", None) or REJECTED_BY_USER_MESSAGE
            state.reject(item, rejection_message=reason)
        if tracing:
            _trace_decision(traced, item, decision, reviewer_text(reviewer), edits)
    for item in broken:
        state.approve(item)
    return review_payload(held) if held else None


def _trace_decision(
    context: MutableMapping[str, Any] | None,
    item: ToolApprovalItem,
    decision: AnyDecision,
    reviewer: str | None,
    edits: Mapping[str, Any],
) -> None:
    """Record who decided a call and when, for its span; a rejection's span is recorded now.

    ``context``: the run's context dict (``None``: it is not a dict, so only
    a rejection's span is recorded, without its review).
    """
    call_id = str(item.call_id)
    stored = _context_entry(context, TRACE_KEY, call_id)
    entry: dict[str, Any] = dict(stored) if isinstance(stored, Mapping) else {}
    entry.update(decided_at=now(), decision="edit" if call_id in edits else decision.type)
    if reviewer is not None:
        entry["by"] = reviewer
    if context is not None:
        _keep_entry(context, TRACE_KEY, call_id, entry)
    if not isinstance(decision, (ApproveDecision, EditDecision)):  # the SDK rejects it
        known = context if context is not None else {TRACE_KEY: {call_id: entry}}
        rejected = _traced(known, call_id)
        trace_ended(call_id, item.tool_name or "", "rejected", rejected)


def _keep(
    state: RunState[Any, Any],
    edits: dict[str, dict[str, Any]],
    votes: dict[str, dict[str, Any] | None],
) -> None:
    """Write edits and a quorum's votes into the run's context (``None``: drop the votes)."""
    context = _edit_context(state)  # refuses before anything changes
    for call_id, edit in edits.items():
        edit["in_history"] = _replace_in_history(state, call_id, edit["args"])
    if edits:
        stored = context.get(EDITS_KEY)
        context[EDITS_KEY] = {**(stored if isinstance(stored, Mapping) else {}), **edits}
    if votes:
        stored = context.get(VOTES_KEY)
        kept = {**(stored if isinstance(stored, Mapping) else {}), **votes}
        context[VOTES_KEY] = {k: v for k, v in kept.items() if v is not None}


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
