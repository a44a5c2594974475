"""LangChain's ``HumanInTheLoopMiddleware``, deciding with toolguard: change the import only.

::

    # from langchain.agents.middleware import HumanInTheLoopMiddleware
    from toolguard.integrations.langchain import HumanInTheLoopMiddleware

:class:`HumanInTheLoopMiddleware` takes LangChain 1.5's arguments
(``interrupt_on`` with ``True`` / ``False`` / config dicts of
``allowed_decisions``, ``description`` as text or a callable,
``args_schema`` and ``when``; ``description_prefix``; ``interrupt_mode``
``"batched"`` or ``"per_call"``; ``edit_notice``), pauses with LangChain's
wire shapes (a ``HITLRequest`` answered by ``{"decisions": [...]}``, or one
``tool_approval`` interrupt per call answered by one decision keyed by the
interrupt's id) and answers the model as LangChain does (the model's call
stays in the history and an edit's result starts with the edit notice; the
reject texts; the ``lc_source`` tags). Underneath, every call is proposed to
toolguard's policy and every answer is checked before LangGraph records it.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal

try:
    from langchain.agents.middleware.human_in_the_loop import (
        InterruptOnConfig as LangChainInterruptOnConfig,
    )
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        PrivateStateAttr,
        ToolCallRequest,
    )
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.errors import GraphBubbleUp
    from langgraph.runtime import get_runtime
    from langgraph.types import Command
    from langgraph.types import interrupt as graph_interrupt
    from pydantic import WithJsonSchema, WrapValidator
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = (
        "toolguard.integrations.langchain needs LangChain and LangGraph:"
        ' pip install "toolguard-hitl[langchain]"'
    )
    raise ImportError(msg) from exc

from toolguard import (
    Classifier,
    Rules,
    UnsupportedPolicyError,
)
from toolguard._enforce.pipeline import (
    NOT_APPROVED_HERE,
    Reviewers,
    ShadowMode,
    Tool,
    Toolset,
    add_vote,
    allowed_by,
    allowed_decisions,
    call_span,
    deadline_refusal,
    finish,
    framework_tool,
    now,
    propose,
    refuse_shadow,
    reviewed,
    telemetry,
    trace_ended,
    trace_refusal,
)
from toolguard.integrations.langchain_review import (
    ALL_DECISIONS,
    ENDS,
    HITL_RESPONSE_SCHEMA,
    Entry,
    Journal,
    Pause,
    Refused,
    answer_check,
    answer_message,
    blocking,
    check_answer,
    decision_schema,
    digest_of,
    each_message,
    error_message,
    named,
    policy_of,
    prepend_notice,
    result_text,
    scrubbed,
    seal_of,
    turn_request,
)

__all__ = ["EDIT_NOTICE", "NOT_REVIEWED", "HumanInTheLoopMiddleware", "InterruptOnConfig"]

EDIT_NOTICE = (
    "Note: a human reviewer replaced this tool call before it ran. The call recorded in "
    "your message is the one you produced, not the one that executed. This was "
    "intentional and authorized. Do not re-issue your original call."
)
"""LangChain's default text put before the result of a call a reviewer edited."""

NOT_REVIEWED = (
    "This call needs a review, but no decision was recorded for it (it was added after the"
    " review, or the agent's state was changed). It was not executed."
)
"""What the model reads for a call that needs a review and reaches its tool without one."""

EDITED_KEY = "hitl_edited_tool_calls"
"""LangChain's state key: the reviewer's replacement for each edited call, by call id."""

DECIDED_KEY = "toolguard_hitl_decisions"
"""The state key (private, checkpointed) of toolguard's record of each decided call, by id."""


class InterruptOnConfig(LangChainInterruptOnConfig, total=False):
    """LangChain's ``InterruptOnConfig`` with toolguard's settings of a tool.

    ``approvals``: how many distinct, named reviewers must approve (a quorum);
    ``redact``: names of arguments whose values reviewers see as ``[redacted]``;
    ``ttl``: seconds (or a ``timedelta``) an approved call may still start
    after the call asked.
    """

    approvals: int
    redact: list[str]
    ttl: float


_CHECK: ContextVar[Any] = ContextVar("toolguard_hitl_check", default=None)
"""The schema that checks the answer to the batched pause about to be raised."""


def interrupt(value: Any, *, response_schema: Any = None) -> Any:
    """LangGraph's ``interrupt``, the answer checked before LangGraph records it.

    The batched pause keeps LangChain's one-argument call; its check comes
    from :data:`_CHECK`. A refused answer raises toolguard's error (or
    pydantic's ``ValidationError`` for a per-call answer of the wrong shape)
    and nothing is recorded: the same pause can be answered again.
    """
    schema = response_schema if response_schema is not None else _CHECK.get()
    try:
        return graph_interrupt(value, response_schema=schema)
    except Refused as refused:
        raise refused.error from None


@dataclass(slots=True)
class _Approval:
    """A call a reviewer approved or edited: what runs, under which review, who decided."""

    run: dict[str, Any]
    kind: str
    review: str
    asked: Any
    decided: telemetry.Decided
    tool: Tool[Any, Any] | None


@dataclass(slots=True)
class _Plan:
    """What one call does: give ``answer``, or run ``request`` (claimed under ``review``)."""

    answer: ToolMessage | None = None
    request: ToolCallRequest | None = None
    executed: dict[str, Any] | None = None
    """The reviewer's call that runs instead of the model's, as the notice shows it."""
    review: str | None = None
    tool: Tool[Any, Any] | None = None
    argsets: tuple[Any, ...] = ()
    decided: telemetry.Decided | None = None


class _State(AgentState[Any]):
    """The agent's state with the reviewers' decisions (private: checkpointed, not shown)."""

    hitl_edited_tool_calls: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]
    toolguard_hitl_decisions: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


def _check_mode(interrupt_mode: object) -> None:
    """LangChain's check of ``interrupt_mode`` (its text)."""
    if interrupt_mode not in ("batched", "per_call"):
        msg = f"`interrupt_mode` must be 'batched' or 'per_call', got {interrupt_mode!r}."
        raise ValueError(msg)


class HumanInTheLoopMiddleware(AgentMiddleware[Any, Any, Any]):
    """LangChain's human-in-the-loop middleware, with toolguard deciding underneath.

    Built and answered as LangChain's class (see the module). What toolguard adds:

    - every call is proposed to toolguard's policy: ``rules=``
      (:class:`~toolguard.Rules`; a deny rule refuses a call even after a
      reviewer approved or edited it, an ask rule pauses any tool, an allow
      rule lets a call run unasked), then the tool's ``interrupt_on`` entry;
      ``when`` fails closed (only ``False`` lets a call run unasked);
    - each answer is checked before LangGraph records it (a wrong count, a
      decision the tool does not allow, a malformed decision): the error is
      raised, nothing is recorded, and the pause can be answered again;
    - per tool: ``approvals`` (a quorum of distinct, named reviewers, named
      by ``"reviewer"`` in the resume value, or in a per-call decision),
      ``redact`` (secrets shown as ``[redacted]`` to reviewers, in
      descriptions and edit notices, and scrubbed from results) and ``ttl``
      (an approved call does not start past its deadline);
    - ``reviewers=`` (tool-name globs to reviewer names): only they may
      decide a tool's calls (:class:`~toolguard.ReviewerNotAllowedError`);
    - ``store=`` (``MemoryStore``, ``SQLiteStore``, ``PostgresStore``): an
      approved call is claimed there before it runs, so a pause resumed twice
      (two processes, or a replay from the paused checkpoint) runs it once
      (:class:`~toolguard.AlreadyResumedError`); each decided call is bound
      by an HMAC digest keyed with the store's secret (or ``signing_key``),
      so a changed checkpoint runs nothing; each review is written to the
      store's audit trail (thread ``langgraph:<thread_id>``).

    Raises:
        ValueError: an invalid ``interrupt_on`` entry or ``interrupt_mode``
            (LangChain's texts), an unknown key in an entry, or a toolguard
            setting in it that toolguard refuses (naming the tool).
        TypeError: ``store`` without ``claim`` and ``digest_key``, or
            ``reviewers`` / ``signing_key`` of the wrong type.
        UnsupportedPolicyError: ``judge`` or ``shadow`` given: LangChain runs the
            turn, so neither a judge nor shadow mode's record would apply.
    """

    state_schema = _State

    def __init__(
        self,
        interrupt_on: Mapping[str, bool | LangChainInterruptOnConfig | InterruptOnConfig],
        *,
        description_prefix: str = "Tool execution requires approval",
        edit_notice: str | None = EDIT_NOTICE,
        interrupt_mode: Literal["batched", "per_call"] = "batched",
        rules: Rules | None = None,
        store: object = None,
        signing_key: bytes | None = None,
        reviewers: Reviewers | Mapping[str, Sequence[str]] | None = None,
        judge: object = None,
        shadow: ShadowMode = False,
    ) -> None:
        super().__init__()
        refuse_shadow(shadow, "HumanInTheLoopMiddleware")
        _check_mode(interrupt_mode)
        if judge is not None:
            msg = (
                "HumanInTheLoopMiddleware takes no judge: LangChain runs the turn, so a judge"
                " (judge=) would not apply. Run the tools with toolguard.Runner or"
                " toolguard.ReviewedChat for a judge."
            )
            raise UnsupportedPolicyError(msg)
        self.interrupt_mode = interrupt_mode
        self.edit_notice = edit_notice
        self.description_prefix = description_prefix
        self.interrupt_on: dict[str, Any] = {}
        asking: list[Tool[Any, Any]] = []
        for name, config in interrupt_on.items():
            policy = policy_of(name, config)
            if policy is None:
                continue
            self.interrupt_on[name] = (
                {"allowed_decisions": list(ALL_DECISIONS)} if config is True else config
            )
            asking.append(framework_tool(name, policy))
        given: object = reviewers  # checked at run time for untyped callers
        if isinstance(given, Mapping):
            given = Reviewers(given)
        if given is not None and not isinstance(given, Reviewers):
            msg = (
                "reviewers must map tool-name globs to lists of reviewer names, got"
                f" {type(given).__name__}"
            )
            raise TypeError(msg)
        self.reviewers = given
        self.rules = rules
        self.journal = Journal(store, signing_key)
        self._asking = Toolset(asking, rules=rules)
        names = list(self.interrupt_on)
        self._open = Toolset(
            [framework_tool(t.name, None, t.approval.redact if t.approval else ()) for t in asking],
            classifier=Classifier(never=names) if names else None,
            rules=rules,
        )

    # ------------------------------------------------------------------ the policy

    def _key(self) -> bytes | None:
        """The digest key, read from the store once (from a synchronous hook)."""
        known = self.journal.known_key
        return known if known is not None or not self.journal.keyed else blocking(self.journal.key)

    def _shown_args(self, name: str, args: Any, reviewed: Tool[Any, Any] | None) -> Any:
        """``args`` of a call of ``name`` as a person sees them (its own tool's secrets hidden)."""
        own = reviewed is not None and reviewed.name == name
        tool = reviewed if own else self._asking.get(name)
        return tool.shown_args(args) if tool is not None else dict(args)

    def _toolset(self, name: str, *, asks: bool) -> Toolset | None:
        """Who decides a call of ``name`` (``None``: nothing, it runs as LangChain's would)."""
        if name in self.interrupt_on:
            return self._asking if asks else self._open
        if self.rules is None:
            return None
        tool = framework_tool(name, None)
        return Toolset([tool], classifier=Classifier(never=[name]), rules=self.rules)

    @staticmethod
    def _when(config: Mapping[str, Any] | None, request: Callable[[], ToolCallRequest]) -> bool:
        """Whether the tool's entry asks about the call (only ``False`` from ``when`` skips)."""
        if config is None:
            return False
        when = config.get("when")
        return when is None or when(request()) is not False

    def _entry(self, call: Mapping[str, Any], read: Any, verdict: Any, seen: Any) -> Entry:
        """A call that asks, as its reviewer sees it (a description factory sees no secret).

        ``seen`` is ``(state, runtime)`` for a description factory.
        """
        tool, name, args = verdict.tool, read.name, read.args
        config = self.interrupt_on.get(name)
        allowed = list(config["allowed_decisions"]) if config else list(allowed_decisions(tool))
        shown = {**call, "name": name, "args": tool.shown_args(args)}
        given = config.get("description") if config else None
        if callable(given):
            description = str(given(shown, *seen))
        elif given is not None:
            description = str(given)
        else:
            description = f"{self.description_prefix}\n\nTool: {name}\nArgs: {shown['args']}"
        return Entry(dict(call), allowed, tool, name, args, verdict.approvals, description)

    # ------------------------------------------------------------------ answers

    def _settle(self, entries: list[Entry], state: Any, runtime: Any, pause: Pause) -> None:
        """Pause once per round (a quorum's votes, a new review) until every call is settled."""
        while open_ := [e for e in entries if not e.kind]:
            shown = [e.request() for e in open_]
            request = {
                "action_requests": [r for r, _ in shown],
                "review_configs": [c for _, c in shown],
            }
            check = answer_check(open_, pause.thread, self.reviewers, single=False)
            schema = Annotated[Any, WrapValidator(check), WithJsonSchema(HITL_RESPONSE_SCHEMA)]
            token = _CHECK.set(schema)
            try:
                answer = interrupt(request)
            finally:
                _CHECK.reset(token)
            check_answer(open_, answer, pause.thread, self.reviewers, dry_run=False)
            for entry in open_:
                self.journal.votes(pause, entry)
                self._reconsider(entry, state, runtime)

    def _reconsider(self, entry: Entry, state: Any, runtime: Any) -> None:
        """An edit is a new proposal by its editor: a deny rule refuses it; another tool that
        asks makes it a new review (the editor's vote counts if they may decide that tool)."""
        if entry.kind != "edit" or entry.run is None:
            return
        name, args = entry.run["name"], entry.run["args"]
        switched = name != entry.name
        call = {**entry.call, "name": name, "args": args}
        asks = switched and self._when(
            self.interrupt_on.get(name), lambda: turn_request(call, state, runtime)
        )
        toolset = self._toolset(name, asks=asks)
        if toolset is None:
            return
        read, verdict = propose(toolset, str(call.get("id") or ""), name, args)
        if verdict.outcome == "deny" or verdict.validated is None:
            entry.kind, entry.run, entry.text = "deny", None, verdict.refusal or ""
            return
        if verdict.outcome != "ask" or not switched:
            return
        fresh = self._entry(entry.call, read, verdict, (state, runtime))
        editor = entry.reviewer
        may = self.reviewers is None or self.reviewers.allows(editor, name)
        if fresh.required > 1 and editor is not None and may:
            fresh.by = add_vote(name, fresh.required, [], editor)
        fresh.edited = True
        entry.take(fresh)

    # ------------------------------------------------------------------ a batched turn

    def _turn(self, state: Any, runtime: Any, pause: Pause) -> dict[str, Any] | None:
        messages = state["messages"]
        if not messages:
            return None
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        entries: list[Entry] = []
        for call in last.tool_calls:
            name = call["name"]
            config = self.interrupt_on.get(name)
            asks = self._when(config, functools.partial(turn_request, call, state, runtime))
            toolset = self._toolset(name, asks=asks)
            if toolset is None:
                continue
            read, verdict = propose(toolset, str(call.get("id") or ""), name, call["args"])
            if verdict.outcome == "ask":  # the others run, or are refused where they would run
                entries.append(self._entry(call, read, verdict, (state, runtime)))
        if not entries:
            cleared: dict[str, Any] = {k: {} for k in (EDITED_KEY, DECIDED_KEY) if state.get(k)}
            return cleared or None
        for entry in entries:
            self.journal.requested(pause, entry)
        self._settle(entries, state, runtime, pause)
        replies: list[ToolMessage] = []
        edited: dict[str, Any] = {}
        decided: dict[str, Any] = {}
        at = now()
        for entry in entries:
            call_id = str(entry.call.get("id") or "")
            decided[call_id] = self.journal.record(pause, entry, at)
            if entry.kind == "edit" and entry.run is not None:
                shown = self._shown_args(entry.run["name"], entry.run["args"], entry.tool)
                edited[call_id] = {"name": entry.run["name"], "args": shown}
            elif entry.kind in ("reject", "respond"):
                replies.append(answer_message(entry.call, entry.kind, entry.text))
            elif entry.kind == "deny":
                replies.append(error_message(entry.call, entry.text))
        return {"messages": [last, *replies], EDITED_KEY: edited, DECIDED_KEY: decided}

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Pause once for the calls of the last model turn that need a review; apply the answers.

        Raises:
            ValueError: a wrong number of decisions, or a decision type the tool
                does not allow (LangChain's texts); the errors of toolguard's
                checks (``InvalidReviewDecisionError`` and its kin). Nothing is
                recorded: the pause can be answered again.
        """
        if self.interrupt_mode == "per_call":
            return None
        pause = Pause.here(self._key())
        try:
            return self._turn(state, runtime, pause)
        finally:
            if pause.book:
                blocking(self.journal.flush, pause.book)

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async variant of :meth:`after_model`."""
        if self.interrupt_mode == "per_call":
            return None
        pause = Pause.here(await self.journal.key())
        try:
            return self._turn(state, runtime, pause)
        finally:
            if pause.book:
                await self.journal.flush(pause.book)

    # ------------------------------------------------------------------ running a call

    def _proposed(self, request: ToolCallRequest, pause: Pause) -> tuple[Any, Any] | _Plan:
        """Propose the call to the policy; a plan when it runs unasked or is refused."""
        call = request.tool_call
        name, call_id = call["name"], str(call.get("id") or "")
        toolset = self._toolset(name, asks=self._when(self.interrupt_on.get(name), lambda: request))
        if toolset is None:
            return _Plan(request=request)
        read, verdict = propose(toolset, call_id, name, call["args"])
        if verdict.outcome == "deny" or verdict.validated is None:
            trace_refusal(read, verdict, call_id=call_id)
            shown = verdict.tool.shown_args(call["args"]) if verdict.tool else None
            self.journal.note(
                pause, f"{pause.review(call)}:denied", "denied", action_id=call_id, tool=name,
                args=shown, detail=verdict.refusal,
            )  # fmt: skip
            return _Plan(answer=error_message(call, verdict.refusal or ""))
        if verdict.outcome == "run":
            tool, decided = verdict.tool, allowed_by(verdict)
            return _Plan(request=request, tool=tool, argsets=(call["args"],), decided=decided)
        return read, verdict

    def _recorded(self, request: ToolCallRequest, record: Mapping[str, Any], pause: Pause) -> _Plan:
        """The plan of a call this turn's review decided (its record in the state)."""
        call, key = request.tool_call, pause.key
        if not hmac.compare_digest(
            str(record.get("call")), digest_of(key, call["name"], call["args"])
        ):
            return _Plan(answer=error_message(call, NOT_APPROVED_HERE))
        kind, run, review = record.get("kind"), record.get("run"), str(record.get("review"))
        if kind not in ("approve", "edit"):
            return _Plan(answer=error_message(call, str(record.get("text") or NOT_APPROVED_HERE)))
        well_formed = (
            isinstance(run, Mapping)
            and isinstance(run.get("name"), str)
            and isinstance(run.get("args"), dict)
        )
        if not well_formed or not hmac.compare_digest(
            str(record.get("digest")),
            digest_of(key, run["name"], run["args"], pause.thread, seal_of(record)),  # type: ignore[index]
        ):
            return _Plan(answer=error_message(call, NOT_APPROVED_HERE))
        asked = record.get("asked_at")
        by, at = record.get("by"), record.get("at")
        approval = _Approval(
            run=dict(run),  # type: ignore[arg-type]
            kind=str(kind),
            review=review,
            asked=asked,
            decided=reviewed(review, asked, decision=str(kind), by=by, decided_at=at),
            tool=self._asking.get(str(record.get("tool"))),
        )
        return self._approved(request, approval, pause)

    def _approved(self, request: ToolCallRequest, approval: _Approval, pause: Pause) -> _Plan:
        """An approved (or edited) call: the rules and its deadline now, then what runs."""
        call, run, review = request.tool_call, approval.run, approval.review
        call_id = str(call.get("id") or "")
        refusal, final = None, "denied"
        toolset = self._toolset(run["name"], asks=False)
        if toolset is not None:  # a deny rule holds at approval: the rules may have changed
            read, verdict = propose(toolset, call_id, run["name"], run["args"])
            if verdict.outcome == "deny" or verdict.validated is None:
                trace_refusal(read, verdict, approval.decided, call_id=call_id)
                refusal = verdict.refusal or ""
        if refusal is None and approval.tool is not None:
            refusal, final = deadline_refusal(approval.tool, approval.asked), "expired"
            if refusal is not None:
                trace_ended(call_id, call["name"], final, approval.decided)
        if refusal is not None:
            self.journal.note(
                pause, f"{review}:{final}", final, review_id=review, action_id=call_id,
                tool=run["name"], detail=refusal,
            )  # fmt: skip
            return _Plan(answer=error_message(call, refusal))
        tool = approval.tool
        shown = self._shown_args(run["name"], run["args"], tool)
        edit = approval.kind == "edit"
        return _Plan(
            request=apply_edit(request, run) if edit else request,
            executed={"name": run["name"], "args": shown} if edit else None,
            review=review,
            tool=tool,
            argsets=(run["args"], call["args"]),
            decided=approval.decided,
        )

    def _per_call(self, request: ToolCallRequest, pause: Pause) -> _Plan:
        """Ask about one call as it starts (``interrupt_mode="per_call"``)."""
        proposed = self._proposed(request, pause)
        if isinstance(proposed, _Plan):
            return proposed
        read, verdict = proposed
        call = request.tool_call
        name, call_id = call["name"], call.get("id")
        if call_id is None:
            msg = (
                f"Tool call `{name}` has no ID, so its result can't be matched "
                "to it. Make sure the chat model returns tool call IDs."
            )
            raise ValueError(msg)
        entry = self._entry(call, read, verdict, (request.state, get_runtime()))
        self.journal.requested(pause, entry)
        while not entry.kind:
            value: dict[str, Any] = {
                "type": "tool_approval",
                "tool_call_id": call_id,
                "name": name,
                "args": entry.tool.shown_args(entry.args),
                "description": entry.description,
            }
            if entry.required > 1:
                value["approvals"] = entry.request()[1]["approvals"]
            check = answer_check([entry], pause.thread, self.reviewers, single=True)
            schema = decision_schema(entry.allowed, name, request.tool, check)
            answer = interrupt(value, response_schema=schema)
            as_round = {"decisions": [answer], "reviewer": named(answer)}
            check_answer([entry], as_round, pause.thread, self.reviewers, dry_run=False)
            self.journal.votes(pause, entry)
        self._reconsider(entry, request.state, None)  # the schema kept the tool: deny rules
        at = now()
        self.journal.settled(pause, entry, at)
        review = pause.review(call)
        decided = reviewed(
            review, pause.asked, decision=entry.kind, by=entry.reviewer, decided_at=at
        )
        if entry.run is None:  # rejected, answered, or an edit a deny rule refuses
            trace_ended(str(call_id), name, ENDS[entry.kind], decided)
            if entry.kind == "deny":
                return _Plan(answer=error_message(call, entry.text))
            return _Plan(answer=answer_message(call, entry.kind, entry.text))
        approval = _Approval(entry.run, entry.kind, review, pause.asked, decided, entry.tool)
        return self._approved(request, approval, pause)

    def _plan(self, request: ToolCallRequest, pause: Pause) -> _Plan:
        if self.interrupt_mode == "per_call":
            return self._per_call(request, pause)
        state = request.state if isinstance(request.state, Mapping) else {}
        record = (state.get(DECIDED_KEY) or {}).get(str(request.tool_call.get("id") or ""))
        if isinstance(record, Mapping):
            return self._recorded(request, record, pause)
        proposed = self._proposed(request, pause)
        if isinstance(proposed, _Plan):
            return proposed
        call = request.tool_call  # it asks, and no review decided it
        trace_ended(str(call.get("id") or ""), call["name"], "failed", None, "not_reviewed")
        return _Plan(answer=error_message(call, NOT_REVIEWED))

    def _shown(self, plan: _Plan, result: Any, pause: Pause) -> Any:
        """The result the model reads: secrets scrubbed, the edit notice first; its audit event."""
        request: Any = plan.request
        call_id = str(request.tool_call.get("id") or "")

        def change(message: ToolMessage) -> Any:
            message = scrubbed(message, plan.tool, *plan.argsets)
            if plan.executed is None:
                return message
            return prepend_notice(message, self.edit_notice, plan.executed)

        shown = each_message(result, call_id, change)
        if plan.review is not None:
            text, failed = result_text(shown, call_id)
            final = "failed" if failed else "executed"
            self.journal.note(
                pause, f"{plan.review}:{final}", final, review_id=plan.review, action_id=call_id,
                tool=request.tool_call["name"], detail=text,
            )  # fmt: skip
        return shown

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call as decided: unasked, as a reviewer approved or edited it, or not at all.

        In ``per_call`` mode this is where the call pauses for its review.
        """
        pause = Pause.here(self._key())
        try:
            plan = self._plan(request, pause)
            if plan.answer is not None:
                return plan.answer
            to_run: Any = plan.request
            if plan.tool is None and plan.review is None:
                return handler(to_run)  # nothing of toolguard's to do
            if plan.review is not None and self.journal.store is not None:
                blocking(self.journal.claim, plan.review)
            call_id = str(to_run.tool_call.get("id") or "")
            with call_span(call_id, to_run.tool_call["name"], plan.decided) as span:
                try:
                    result = handler(to_run)
                except GraphBubbleUp:
                    raise
                except Exception as exc:
                    finish(span, "failed", exc)
                    raise
                finish(span, _outcome(result, call_id))
            return self._shown(plan, result, pause)  # type: ignore[no-any-return]
        finally:
            if pause.book:
                blocking(self.journal.flush, pause.book)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async variant of :meth:`wrap_tool_call`."""
        pause = Pause.here(await self.journal.key())
        try:
            plan = self._plan(request, pause)
            if plan.answer is not None:
                return plan.answer
            to_run: Any = plan.request
            if plan.tool is None and plan.review is None:
                return await handler(to_run)  # nothing of toolguard's to do
            if plan.review is not None and self.journal.store is not None:
                await self.journal.claim(plan.review)
            call_id = str(to_run.tool_call.get("id") or "")
            with call_span(call_id, to_run.tool_call["name"], plan.decided) as span:
                try:
                    result = await handler(to_run)
                except GraphBubbleUp:
                    raise
                except Exception as exc:
                    finish(span, "failed", exc)
                    raise
                finish(span, _outcome(result, call_id))
            return self._shown(plan, result, pause)  # type: ignore[no-any-return]
        finally:
            if pause.book:
                await self.journal.flush(pause.book)


def apply_edit(request: ToolCallRequest, run: Mapping[str, Any]) -> ToolCallRequest:
    """Point the request at the reviewer's call (LangChain's: another tool by its name).

    Raises:
        ValueError: the reviewer named a tool the agent does not have.
    """
    call: Any = {**request.tool_call, "name": run["name"], "args": run["args"]}
    if run["name"] == request.tool_call["name"]:
        return request.override(tool_call=call)
    available = request.runtime.tools
    tool = next((t for t in available if t.name == run["name"]), None)
    if tool is None:
        names = ", ".join(sorted(t.name for t in available))
        msg = (
            f"Reviewer edited tool call {request.tool_call['id']!r} to {run['name']!r},"
            f" which is not an available tool. Available tools: {names}."
        )
        raise ValueError(msg)
    return request.override(tool_call=call, tool=tool)


def _outcome(result: Any, call_id: str) -> str:
    return "failed" if result_text(result, call_id)[1] else "executed"
