"""Guard LangChain / LangGraph agents with toolguard: one line each.

Using LangChain's ``HumanInTheLoopMiddleware``? Change its import; nothing else
(:class:`HumanInTheLoopMiddleware`, see :mod:`toolguard.integrations.langchain_hitl`)::

    from toolguard.integrations.langchain import HumanInTheLoopMiddleware

Starting from toolguard's tools::

    from langchain.agents import create_agent
    from toolguard.integrations import langchain as tg

    tools = toolguard.guard([search_mail, send_email])
    agent = create_agent(model, tools=tg.tools(tools), middleware=[tg.middleware(tools)],
                         checkpointer=InMemorySaver())

:func:`tools` gives LangChain ``BaseTool`` objects with the same names,
descriptions and argument schemas (parameter descriptions kept). They never
run a guarded body unapproved, even without the middleware: inside a LangGraph
graph a call that needs approval pauses with LangGraph's ``interrupt()``,
whose value is toolguard's ``pending_review`` payload for that one call; resume
with ``Command(resume={"decisions": [...]})`` (approve runs the body once, edit
runs the edited arguments and says so in the tool message, reject gives the
model the reason as an error tool message). Outside a graph such a call raises
:class:`~toolguard.ApprovalRequiredError` (fail closed). Arguments that break
the schema give an error tool message without asking anyone.

:func:`middleware` gives a :class:`ToolguardMiddleware` (a LangChain
``HumanInTheLoopMiddleware``) for ``create_agent``: after each model turn it
asks toolguard which calls need approval (the toolset's allow/ask/deny rules,
then the classifier, ``@requires_approval``, ``when=`` on the actual
arguments), pauses once for all of them with toolguard's
payload, validates the decisions with :func:`~toolguard.validate_decisions`,
replaces an edited call in the model's message (so the history shows what
ran), answers rejected calls with the reason, and runs approved calls exactly
once.

Both follow the toolset's deny rules (the model gets the denial as an error
tool message, nobody is asked), show redacted arguments as ``REDACTED``, and
hold a quorum (``requires_approval(approvals=N)``): each resume value
``{"decisions": [...], "reviewer": ...}`` is one round of votes, and the agent
pauses again, with the progress, until N distinct reviewers approved.

A tool with ``requires_approval(ttl=...)`` keeps its deadline: the call asked
when the LangGraph checkpoint of its paused step was made, and an approved call
about to start past that time plus the ttl does not run (the model reads the
runner's expiry text as an error tool message).

Needs ``pip install "toolguard-hitl[langchain]"``; tested with langchain 1.5,
langchain-core 1.8 and langgraph 1.2.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any, cast

try:
    from langchain.agents.middleware import HumanInTheLoopMiddleware as LangChainHITL
    from langchain.agents.middleware import InterruptOnConfig as LangChainConfig
    from langchain.agents.middleware.types import AgentState, PrivateStateAttr, ToolCallRequest
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.messages import ToolCall as LCToolCall
    from langchain_core.tools import BaseTool, ToolException
    from langgraph.errors import GraphBubbleUp
    from langgraph.types import Command, interrupt
    from pydantic import AfterValidator, PrivateAttr
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = (
        "toolguard.integrations.langchain needs LangChain and LangGraph:"
        ' pip install "toolguard-hitl[langchain]"'
    )
    raise ImportError(msg) from exc

import anyio

from toolguard import (
    ApprovalRequiredError,
    ToolguardError,
    validate_decisions,
)
from toolguard._enforce.pipeline import (
    REJECTED_BY_USER_MESSAGE,
    Claims,
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
    allowed_decisions,
    args_digest,
    as_toolset,
    call_span,
    check_claims,
    claim_once,
    deadline_refusal,
    edited_args,
    failure_text,
    finish,
    has_deadline,
    new_id,
    now,
    propose,
    refuse_grants,
    refuse_shadow,
    review_item,
    review_payload,
    reviewed,
    reviewer_text,
    run_body,
    run_body_sync,
    shown_result,
    telemetry,
    to_json_data,
    trace_ended,
    trace_refusal,
    vote_count,
)
from toolguard.integrations.langchain_hitl import (
    EDIT_NOTICE,
    NOT_REVIEWED,
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
)
from toolguard.integrations.langchain_review import asked_at as _asked_at
from toolguard.integrations.langchain_review import in_graph as _in_graph
from toolguard.integrations.langchain_review import task_id as _task_id

__all__ = [
    "APPROVED_KEY",
    "EDIT_NOTICE",
    "NOT_REVIEWED",
    "GuardedTool",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "ToolguardMiddleware",
    "middleware",
    "tools",
]

APPROVED_KEY = "toolguard_approved_calls"
"""Agent-state key (private, checkpointed) holding the calls a reviewer approved, by call id."""


_CALL_ID: ContextVar[str | None] = ContextVar("toolguard_langchain_call_id", default=None)
"""The id of the call a :class:`GuardedTool` runs (a LangChain ``ToolCall``'s), for its span."""


def _decision_list(answer: Any) -> Any:
    """The decisions in a resume value: ``{"decisions": [...]}`` (LangChain's) or a bare list."""
    if isinstance(answer, Mapping) and "decisions" in answer:
        return answer["decisions"]
    return answer


def _reviewer(answer: Any) -> str | None:
    """The ``reviewer`` of a resume value ``{"decisions": [...], "reviewer": ...}`` (or ``None``).

    Raises:
        InvalidReviewDecisionError: a reviewer that is not text, an int or a UUID.
    """
    given = answer.get("reviewer") if isinstance(answer, Mapping) else None
    try:
        return reviewer_text(given)
    except TypeError as exc:
        raise InvalidReviewDecisionError(str(exc)) from None


class _Refused(Exception):  # noqa: N818 - not a ValueError, so pydantic lets it through
    """Carries a refused resume value's error out of LangGraph's validation, unchanged."""

    def __init__(self, error: ToolguardError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _Waiting:
    """One call under review: the real arguments it would run with and its quorum's votes."""

    tool: Tool[Any, Any]
    name: str
    args: dict[str, Any]
    required: int
    by: list[str] = field(default_factory=list)
    decision: Any = None
    edited: bool = False
    reviewer: str | None = None
    """Who settled the call (the reviewer of the round that decided it)."""

    def item(self) -> ReviewItem:
        return review_item(self.tool, self.name, self.args, required=self.required, by=self.by)

    def vote(self, decision: Any, reviewer: str | None) -> bool:
        """Apply one decision; ``True`` once the call is settled (a quorum met, or not a vote).

        Raises:
            QuorumReviewerError: an anonymous or repeated reviewer approves a
                quorum call (nothing changed).
        """
        kind = getattr(decision, "type", None)
        if kind == "edit" and decision.edited_action.name == self.name:
            args = edited_args(self.tool, decision.edited_action.args, self.args)
            if self.required > 1:
                self.by = add_vote(self.name, self.required, [], reviewer)
                self.args, self.edited = args, True
                return False  # a new count starts for the edited arguments
            self.args, self.edited, self.decision = args, True, decision
            self.reviewer = reviewer
            return True
        if kind == "approve" and self.required > 1:
            self.by = add_vote(self.name, self.required, self.by, reviewer)
            if vote_count(self.by) < self.required:
                return False
        self.decision, self.reviewer = decision, reviewer
        return True

    def decided(self, review_id: str, asked_at: float | None) -> telemetry.Decided:
        """How the settled call was decided, for its spans (decided now)."""
        kind = str(getattr(self.decision, "type", ""))
        return reviewed(review_id, asked_at, decision=kind, by=self.reviewer, decided_at=now())


def _settle(waiting: list[_Waiting]) -> None:
    """Pause until every call in ``waiting`` is settled, one interrupt per round of votes.

    The decisions (and a quorum's votes) are checked while LangGraph validates
    the resume value, before it saves it: refused decisions raise the toolguard
    error (e.g. :class:`~toolguard.InvalidReviewDecisionError`) and are NOT
    recorded, so the same pause can be answered again. Each later round shows
    only the calls still waiting, with their progress.
    """
    while True:
        open_ = [w for w in waiting if w.decision is None]
        if not open_:
            return
        pending = review_payload([w.item() for w in open_])

        def check(
            value: Any, pending: PendingReview = pending, open_: list[_Waiting] = open_
        ) -> Any:
            try:
                _apply(pending, open_, value, dry_run=True)
            except ToolguardError as exc:
                raise _Refused(exc) from None
            return value

        schema: Any = Annotated[Any, AfterValidator(check)]
        try:
            answer = interrupt(pending.model_dump(mode="json"), response_schema=schema)
        except _Refused as refused:
            raise refused.error from None
        _apply(pending, open_, answer, dry_run=False)


def _apply(pending: PendingReview, open_: list[_Waiting], answer: Any, *, dry_run: bool) -> None:
    decisions = validate_decisions(pending, _decision_list(answer))
    refuse_grants([r.name for r in pending.action_requests], decisions, "LangChain")
    reviewer = _reviewer(answer)
    targets = [copy.copy(w) for w in open_] if dry_run else open_
    for entry, decision in zip(targets, decisions, strict=True):
        entry.vote(decision, reviewer)


def _content(value: Any) -> str:
    data = to_json_data(value)
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _claim_sync(claims: Claims, review_id: str) -> None:
    """:func:`claim_once` from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        anyio.run(claim_once, claims, review_id)
        return
    msg = "A claimed approval cannot be checked from sync code in an event loop: use ainvoke"
    raise RuntimeError(msg)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a call does: run ``validated`` (with ``note``), or answer with ``answer``."""

    validated: dict[str, Any]
    note: str | None = None
    answer: str | None = None
    review_id: str | None = None
    reviewed: bool = False
    """A reviewer approved it: it must start before its review's deadline."""
    asked_at: float | None = None
    call_id: str = ""
    """LangChain's id for the call (``""``: invoked without a ``ToolCall``)."""
    decided: telemetry.Decided | None = None
    """Who let it run, for its span."""


class GuardedTool(BaseTool):
    """A toolguard :class:`~toolguard.Tool` as a LangChain tool that cannot skip review.

    Build them with :func:`tools`. The argument schema is the toolguard
    tool's JSON schema, unchanged.
    """

    handle_tool_error: Any = True
    _tg_tool: Tool[Any, Any] = PrivateAttr()
    _tg_toolset: Toolset = PrivateAttr()
    _tg_approved: bool = PrivateAttr(default=False)
    _tg_claims: Claims | None = PrivateAttr(default=None)
    _tg_review_id: str | None = PrivateAttr(default=None)
    _tg_asked_at: float | None = PrivateAttr(default=None)
    _tg_decided: telemetry.Decided | None = PrivateAttr(default=None)

    def __init__(
        self,
        tool: Tool[Any, Any],
        *,
        toolset: Toolset | None = None,
        approved: bool = False,
        claims: Claims | None = None,
        review_id: str | None = None,
        asked_at: float | None = None,
        decided: telemetry.Decided | None = None,
    ) -> None:
        super().__init__(
            name=tool.name,
            description=tool.description or tool.name,
            args_schema=tool.parameters,
        )
        self._tg_tool = tool
        self._tg_toolset = toolset if toolset is not None else Toolset([tool])
        self._tg_approved = approved
        self._tg_claims = claims
        self._tg_review_id = review_id
        self._tg_asked_at = asked_at
        self._tg_decided = decided

    def run(
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """LangChain's ``run``, keeping the ``ToolCall``'s id for the call's span."""
        token = _CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _CALL_ID.reset(token)

    async def arun(
        self,
        tool_input: str | dict[str, Any],
        *args: Any,
        tool_call_id: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """LangChain's ``arun``, keeping the ``ToolCall``'s id for the call's span."""
        token = _CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _CALL_ID.reset(token)

    @property
    def toolguard_tool(self) -> Tool[Any, Any]:
        """The toolguard tool this LangChain tool runs."""
        return self._tg_tool

    def _decide(self, args: dict[str, Any]) -> _Plan:
        """What to run, or the answer to give instead.

        Raises ToolException for a deny rule, bad arguments, a rejection or a
        refused edit; ApprovalRequiredError outside a graph; LangGraph's
        interrupt inside one (once per round of a quorum's votes). A call that
        ends here (refused, rejected, answered by the reviewer) gets its span.
        """
        tool = self._tg_tool
        call_id = _CALL_ID.get() or ""
        call, verdict = propose(self._tg_toolset, call_id, tool.name, args)
        if verdict.outcome == "deny" or verdict.validated is None:
            decided = self._tg_decided if self._tg_approved else None
            trace_refusal(call, verdict, decided, call_id=call_id)
            raise ToolException(verdict.refusal or "")
        if self._tg_approved:
            # Approved by the middleware; its claim (if any) and its deadline are this pause's.
            return _Plan(
                verdict.validated,
                review_id=self._tg_review_id,
                reviewed=True,
                asked_at=self._tg_asked_at,
                call_id=call_id,
                decided=self._tg_decided,
            )
        if verdict.outcome == "run":
            return _Plan(verdict.validated, call_id=call_id, decided=allowed_by(verdict))
        waiting = _Waiting(tool, tool.name, call.args, verdict.approvals)
        if not _in_graph():
            item = waiting.item()
            asked = ToolCall(id=new_id(), name=tool.name, args=item.args)
            raise ApprovalRequiredError(pending_review=review_payload([item]), call=asked)
        task = _task_id()
        review_id = f"{task}:{tool.name}:{args_digest(tool.name, call.args)}"
        asked_at = _asked_at()
        _settle([waiting])
        # The span's review id names the paused task and call, never a digest of the arguments.
        decided = waiting.decided(f"{task}:{call_id or tool.name}", asked_at)
        decision = waiting.decision
        kind = getattr(decision, "type", None)
        if kind in ("approve", "edit"):
            if getattr(decision, "type", None) == "edit" and (
                decision.edited_action.name != tool.name
            ):
                msg = (
                    f"The reviewer's edit names the tool `{decision.edited_action.name}`, but"
                    f" only `{tool.name}` can run here: edit the arguments, not the tool."
                    " It was not executed."
                )
                trace_ended(call_id, tool.name, "failed", decided, "invalid_arguments")
                raise ToolException(msg)
            if not waiting.edited:
                return _Plan(
                    verdict.validated,
                    review_id=review_id,
                    reviewed=True,
                    asked_at=asked_at,
                    call_id=call_id,
                    decided=decided,
                )
            # An edit runs only if the policy lets these arguments run at all (deny rules).
            edited, again = propose(self._tg_toolset, call_id, tool.name, waiting.args)
            if again.outcome == "deny" or again.validated is None:
                trace_refusal(edited, again, decided, call_id=call_id)
                raise ToolException(again.refusal or "")
            ran = json.dumps(tool.shown_args(waiting.args), ensure_ascii=False, sort_keys=True)
            note = f"A reviewer edited this call; it ran with the arguments {ran}."
            return _Plan(
                again.validated,
                note=note,
                review_id=review_id,
                reviewed=True,
                asked_at=asked_at,
                call_id=call_id,
                decided=decided,
            )
        if kind == "respond":  # LangChain's: the reviewer answers instead of the tool
            trace_ended(call_id, tool.name, "responded", decided)
            return _Plan(verdict.validated, answer=str(getattr(decision, "message", "") or ""))
        trace_ended(call_id, tool.name, "rejected", decided)
        reason = getattr(decision, "message", None) or REJECTED_BY_USER_MESSAGE
        raise ToolException(reason)

    @staticmethod
    def _with_note(content: str, note: str | None) -> str:
        return content if note is None else f"{note}\n\n{content}"

    def _gate(self, plan: _Plan) -> None:
        """Refuse to start an approved call past its review's deadline (right before the body)."""
        late = deadline_refusal(self._tg_tool, plan.asked_at) if plan.reviewed else None
        if late is not None:
            trace_ended(plan.call_id, self._tg_tool.name, "expired", plan.decided)
            raise ToolException(late)

    def _run(self, /, **kwargs: Any) -> str:
        plan = self._decide(kwargs)
        if plan.answer is not None:
            return plan.answer
        if plan.review_id is not None and self._tg_claims is not None:
            _claim_sync(self._tg_claims, plan.review_id)
        self._gate(plan)
        tool = self._tg_tool
        with call_span(plan.call_id, tool.name, plan.decided) as span:
            try:
                value = run_body_sync(tool, plan.validated)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                finish(span, "failed", exc)
                raise ToolException(failure_text(tool, exc, plan.validated, kwargs)) from exc
            finish(span, "executed")
        shown = shown_result(tool, value, plan.validated, kwargs)
        return self._with_note(_content(shown), plan.note)

    async def _arun(self, /, **kwargs: Any) -> str:
        plan = self._decide(kwargs)
        if plan.answer is not None:
            return plan.answer
        if plan.review_id is not None:
            await claim_once(self._tg_claims, plan.review_id)
        self._gate(plan)
        tool = self._tg_tool
        with call_span(plan.call_id, tool.name, plan.decided) as span:
            try:
                value = await run_body(tool, plan.validated)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                finish(span, "failed", exc)
                raise ToolException(failure_text(tool, exc, plan.validated, kwargs)) from exc
            finish(span, "executed")
        shown = shown_result(tool, value, plan.validated, kwargs)
        return self._with_note(_content(shown), plan.note)


def tools(
    tools: Tools, *, claims: Claims | None = None, shadow: ShadowMode = False
) -> list[BaseTool]:
    """toolguard tools as LangChain tools that never run a guarded body unapproved.

    Args:
        tools: a :class:`~toolguard.Toolset` (its ``rules`` apply), or a list
            of functions and :class:`~toolguard.Tool` objects (classified with
            :func:`~toolguard.guard`).
        claims: a store with ``claim(key)`` (``MemoryStore``, ``SQLiteStore``,
            ``PostgresStore``): an approved call is claimed there before it
            runs, so a pause resumed twice (two processes) runs it once.

    Returns:
        One ``BaseTool`` per tool, in order, for ``create_agent(tools=...)``,
        a ``ToolNode`` or ``model.bind_tools``.

    Raises:
        TypeError: ``claims`` has no ``claim`` method.
        UnsupportedPolicyError: ``tools`` is a Runner, a ReviewedChat or a Judge: its
            judge would not apply here (the text names the alternative); or
            ``shadow`` is on: nothing here records what would have been asked.
    """
    refuse_shadow(shadow, "toolguard.integrations.langchain.tools()")
    toolset = as_toolset(tools)
    store = check_claims(claims)
    return [GuardedTool(tool, toolset=toolset, claims=store) for tool in toolset.values()]


class _ToolguardState(AgentState[Any]):
    """Agent state with the reviewer's approvals (private: checkpointed, not in the schema)."""

    toolguard_approved_calls: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


class ToolguardMiddleware(LangChainHITL[Any, Any, Any]):
    """LangChain's human-in-the-loop middleware, deciding with toolguard.

    Build it with :func:`middleware`. Only the calls toolguard says need
    approval (the toolset's allow/ask/deny rules, then the tool's policy, on
    the actual arguments) pause the agent; the pause's value is toolguard's
    ``pending_review`` payload for all of them, and the resume value is
    ``{"decisions": [...], "reviewer": ...}`` (or the bare list), checked
    with :func:`~toolguard.validate_decisions` (an invalid answer raises
    :class:`~toolguard.InvalidReviewDecisionError` and runs nothing). A call
    a deny rule refuses gets the denial as an error tool message, unasked.
    """

    state_schema = _ToolguardState  # type: ignore[assignment]

    def __init__(self, tools: Tools, *, claims: Claims | None = None) -> None:
        toolset = as_toolset(tools)
        interrupt_on: dict[str, bool | LangChainConfig] = {}
        for name, tool in toolset.items():
            config = {"allowed_decisions": list(allowed_decisions(tool))}
            interrupt_on[name] = cast("LangChainConfig", config)
        super().__init__(interrupt_on, edit_notice=None)
        self.toolset = toolset
        self.claims = check_claims(claims)
        self._guarded = {
            name: GuardedTool(tool, toolset=toolset, claims=self.claims)
            for name, tool in toolset.items()
        }
        self._approved = {
            name: GuardedTool(tool, toolset=toolset, approved=True)
            for name, tool in toolset.items()
        }

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Pause for the calls of the last model turn that need approval; apply the decisions."""
        messages = state["messages"]
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        waiting: list[tuple[int, dict[str, Any], _Waiting]] = []
        for index, call in enumerate(last.tool_calls):
            if call["name"] not in self.toolset or call.get("id") in answered:
                continue
            read, verdict = propose(
                self.toolset, str(call.get("id") or ""), call["name"], call["args"]
            )
            if verdict.outcome != "ask" or verdict.tool is None:
                continue  # runs at once, or the tool answers with its refusal, unasked
            entry = _Waiting(verdict.tool, call["name"], read.args, verdict.approvals)
            waiting.append((index, dict(call), entry))
        if not waiting:
            return {APPROVED_KEY: {}} if state.get(APPROVED_KEY) else None
        asked_at = _asked_at()  # the same in each resume of this pause
        waiting = self._settle_proposals(waiting)
        task = _task_id()
        revised = list(last.tool_calls)
        replies: list[ToolMessage] = []
        approved: dict[str, Any] = {}
        decided_at = now()
        for index, proposed, entry in waiting:
            decision = entry.decision
            kind = getattr(decision, "type", None)
            call_id = str(proposed.get("id") or "")
            review = f"{task}:{call_id}"
            if kind in ("approve", "edit"):
                name = entry.name
                if kind == "edit":
                    name = decision.edited_action.name
                if entry.edited or kind == "edit":
                    args = entry.args if name == entry.name else decision.edited_action.args
                    replaced = {**revised[index], "name": name, "args": args}
                    revised[index] = cast("LCToolCall", replaced)
                else:
                    args = proposed["args"]
                    if name != revised[index]["name"]:  # a renamed call, approved in its round
                        replaced = {**revised[index], "name": name, "args": args}
                        revised[index] = cast("LCToolCall", replaced)
                if name == entry.name:
                    approved[call_id] = {
                        "name": name,
                        "args": args,
                        "review": review,
                        "asked_at": asked_at,
                        "decision": "edit" if entry.edited or kind == "edit" else "approve",
                        "decided_at": decided_at,
                        "decided_by": entry.reviewer,
                    }
                # An edit to another tool is not an approval of it: its own guard decides.
            else:
                respond = kind == "respond"
                text = getattr(decision, "message", None)
                decided = reviewed(
                    review,
                    asked_at,
                    decision=str(kind),
                    by=entry.reviewer,
                    decided_at=decided_at,
                )
                trace_ended(call_id, entry.name, "responded" if respond else "rejected", decided)
                replies.append(
                    ToolMessage(
                        content=str(text or "") if respond else text or REJECTED_BY_USER_MESSAGE,
                        name=proposed["name"],
                        tool_call_id=call_id,
                        status="success" if respond else "error",
                    )
                )
        answered_turn = last.model_copy(update={"tool_calls": revised})
        return {"messages": [answered_turn, *replies], APPROVED_KEY: approved}

    def _settle_proposals(
        self, waiting: list[tuple[int, dict[str, Any], _Waiting]]
    ) -> list[tuple[int, dict[str, Any], _Waiting]]:
        """Settle every waiting call; an edit into another tool is a new proposal by its editor.

        The renamed call is decided afresh (a deny rule, bad arguments: its own
        tool refuses it when it runs); when it still asks, it waits here for a
        new round of decisions, with the editor's vote counted toward a quorum.
        """
        while True:
            _settle([entry for _, _, entry in waiting])
            again = False
            for position, (index, proposed, entry) in enumerate(waiting):
                decision = entry.decision
                if getattr(decision, "type", None) != "edit":
                    continue
                name = decision.edited_action.name
                if name == entry.name or name not in self.toolset:
                    continue
                call_id = str(proposed.get("id") or "")
                read, verdict = propose(self.toolset, call_id, name, decision.edited_action.args)
                if verdict.outcome != "ask" or verdict.tool is None:
                    continue  # runs at once, or its own tool answers with its refusal
                fresh = _Waiting(verdict.tool, name, read.args, verdict.approvals)
                if verdict.approvals > 1 and entry.reviewer is not None:
                    fresh.by = add_vote(name, verdict.approvals, [], entry.reviewer)
                renamed = {**proposed, "name": name, "args": dict(decision.edited_action.args)}
                waiting[position] = (index, renamed, fresh)
                again = True
            if not again:
                return waiting

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async variant of :meth:`after_model`."""
        return self.after_model(state, runtime)

    def _route(self, request: ToolCallRequest) -> ToolCallRequest:
        """Run our tools through toolguard: approved calls without asking again, others guarded."""
        call = request.tool_call
        name = call["name"]
        if name not in self._guarded:
            return request
        state = request.state if isinstance(request.state, Mapping) else {}
        record = (state.get(APPROVED_KEY) or {}).get(call.get("id") or "")
        if isinstance(record, Mapping) and (record.get("name"), record.get("args")) == (
            name,
            call["args"],
        ):
            tool = self.toolset[name]
            tracing = telemetry.tracer() is not None
            if self.claims is None and not has_deadline(tool) and not tracing:
                return request.override(tool=self._approved[name])
            review = record.get("review")
            review_id = review if isinstance(review, str) else f":{call.get('id') or ''}"
            asked_at = record.get("asked_at")
            asked = asked_at if isinstance(asked_at, int | float) else None
            decided = reviewed(
                review_id,
                asked,
                decision=str(record.get("decision") or "approve"),
                by=record.get("decided_by"),
                decided_at=record.get("decided_at"),
            )
            approved = GuardedTool(
                tool,
                toolset=self.toolset,
                approved=True,
                claims=self.claims,
                review_id=review_id,
                asked_at=asked,
                decided=decided,
            )
            return request.override(tool=approved)
        return request.override(tool=self._guarded[name])

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through its toolguard tool (see :meth:`after_model`)."""
        return handler(self._route(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async variant of :meth:`wrap_tool_call`."""
        return await handler(self._route(request))


def middleware(
    tools: Tools, *, claims: Claims | None = None, shadow: ShadowMode = False
) -> ToolguardMiddleware:
    """A ``HumanInTheLoopMiddleware`` for ``create_agent`` that decides with toolguard.

    Args:
        tools: the same tools given to the agent: a
            :class:`~toolguard.Toolset` (its ``rules`` apply), or a list of
            functions and :class:`~toolguard.Tool` objects (classified with
            :func:`~toolguard.guard`).
        claims: a store with ``claim(key)``: an approved call is claimed there
            before it runs, so a pause resumed twice (two processes) runs it
            once.

    Returns:
        The middleware; the agent needs a checkpointer to pause and resume.

    Raises:
        TypeError: ``claims`` has no ``claim`` method.
        UnsupportedPolicyError: ``tools`` is a Runner, a ReviewedChat or a Judge: its
            judge would not apply here (the text names the alternative); or
            ``shadow`` is on: nothing here records what would have been asked.
    """
    refuse_shadow(shadow, "toolguard.integrations.langchain.middleware()")
    return ToolguardMiddleware(tools, claims=claims)
