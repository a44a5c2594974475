"""The runner: run one model turn of tool calls, pause for review, resume with decisions.

This is the direct, lenient path of the specification. It works with any
agent loop: give it the tool calls of one assistant message, get back either
one result per call (in order) or a paused turn with its ``pending_review``;
store the paused turn anywhere (it is JSON), and resume it with the human's
decisions, in this process or another one.
"""

from __future__ import annotations

import hmac
import json
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import anyio

from toolguard._classify import Classifier
from toolguard._errors import NoPendingReviewError
from toolguard._json import clean_text, to_json_data
from toolguard._limits import (
    WIDEST_LIMITS,
    Limits,
    args_problem,
    args_too_deep,
    bounded_result,
    check_limits,
    preview,
    text_too_large,
)
from toolguard._messages import message
from toolguard._models import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    ApproveDecision,
    EditDecision,
    PendingReview,
    PendingTurn,
    RejectDecision,
    ToolCall,
    ToolResult,
    call_digest,
    new_id,
    utcnow,
)
from toolguard._override import get_stand_in
from toolguard._tool import Tool, ToolArgumentsError, ttl_seconds
from toolguard._toolset import Tools, Toolset
from toolguard._validate import as_decision_list, parse_decision

EditPolicy = Literal["run", "recheck"]

TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
EXPIRED = "The review of this action expired before anyone decided. It was not executed."
CANCELLED = "The review of this action was cancelled. It was not executed."
INTERRUPTED = (
    "The process stopped while this approved tool was running, so its outcome is unknown."
    " It was not run again."
)
CloseOutcome = Literal["expired", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What one run or resume of a turn produced.

    Attributes:
        calls: the turn's tool calls as they stand now: an edited call
            replaces the proposed one (same id), so record these in the
            assistant message.
        results: one result per call in ``calls`` order when the turn is
            complete; when paused, the results known so far, in call order.
        pending: the paused turn (store it, resume it later), or ``None``.
        replaced_calls: the calls rewritten by edit decisions.
        actions: the approval requests this step touched, with their status.
    """

    calls: list[ToolCall]
    results: list[ToolResult]
    pending: PendingTurn | None = None
    replaced_calls: list[ToolCall] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)

    @property
    def paused(self) -> bool:
        """Whether the turn waits for decisions."""
        return self.pending is not None

    @property
    def pending_review(self) -> PendingReview | None:
        """The review payload while paused, else ``None``."""
        return self.pending.pending_review if self.pending is not None else None


def parse_tool_call(raw: Any, index: int = 0, *, limits: Limits | None = None) -> ToolCall:
    """Read one tool call in any common shape.

    Accepts a :class:`ToolCall`; an OpenAI tool call (``{"id", "type":
    "function", "function": {"name", "arguments"}}`` as a dict or as the
    ``openai`` client's object); or a flat ``{"id", "name", "args" |
    "arguments"}`` dict. ``arguments`` may be JSON text or already parsed.
    Arguments that are not a JSON object are kept as ``arguments_error``: the
    call will not run and the model is told why.

    Arguments beyond ``limits`` (too deep, too large), or holding NaN,
    ``Infinity`` or an integer of more than 4,000 digits, are refused: the
    call gets ``args={}``, ``error`` (the text the model will read) and, in
    ``arguments_error``, at most 1,000 characters of what was sent. Such a
    call never runs and is never put up for review. Lone surrogates in the
    name, the id and the arguments become U+FFFD.

    Args:
        raw: the tool call.
        index: its position in the model's message (names an id-less call).
        limits: the bounds to enforce; ``None`` enforces the widest
            :class:`Limits` allows (the runner passes its own).

    Raises:
        ValueError: the call has no tool name.
    """
    bounds = WIDEST_LIMITS if limits is None else limits
    if isinstance(raw, ToolCall):
        if raw.error is None and raw.arguments_error is None:
            args, error = args_problem(raw.name, raw.args, bounds)
            if error is not None or args is not raw.args:
                return _checked(raw.id, raw.name, raw.args, args, error)
        if raw.name.isascii() and raw.id.isascii():
            return raw
        return raw.model_copy(update={"id": clean_text(raw.id), "name": clean_text(raw.name)})
    if isinstance(raw, Mapping):
        function = raw.get("function")
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name = raw.get("name")
            arguments = raw["args"] if "args" in raw else raw.get("arguments")
        call_id = raw.get("id")
    else:
        function = getattr(raw, "function", None)
        if function is not None:
            name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        else:
            name = getattr(raw, "name", None)
            arguments = getattr(raw, "args", getattr(raw, "arguments", None))
        call_id = getattr(raw, "id", None)
    if not isinstance(name, str):
        msg = f"Tool call #{index} has no tool name: {_shown(raw)}"
        raise ValueError(msg)
    call_id = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
    if arguments is None or arguments == "":
        return _checked(call_id, name, {}, {}, None)
    if isinstance(arguments, str):
        text = arguments
        too_large = (
            text_too_large(name, text, bounds) if len(text) * 4 > bounds.max_args_bytes else None
        )
        if too_large is not None:
            return _checked(call_id, name, text, {}, too_large)
        try:
            parsed = json.loads(text)
        except RecursionError:
            return _checked(call_id, name, text, {}, args_too_deep(name, None, bounds))
        except ValueError:
            return ToolCall(
                id=clean_text(call_id), name=clean_text(name), arguments_error=clean_text(text)
            )
        if type(parsed) is dict:
            args, error = args_problem(name, parsed, bounds, text)
            if error is None and call_id.isascii() and name.isascii():
                return ToolCall(id=call_id, name=name, args=args)
            return _checked(call_id, name, text, args, error)
        arguments = parsed
    if isinstance(arguments, Mapping):
        args, error = args_problem(name, dict(arguments), bounds)
        return _checked(call_id, name, arguments, args, error)
    try:
        shown = json.dumps(to_json_data(arguments))
    except Exception:
        shown = preview(arguments)
    return ToolCall(id=clean_text(call_id), name=clean_text(name), arguments_error=shown)


def _shown(raw: Any) -> str:
    """A short ``repr`` of anything (bounded in depth and length; never raises)."""
    try:
        return reprlib.repr(raw)
    except Exception:
        return f"<{type(raw).__name__}>"


def _checked(
    call_id: str, name: str, sent: Any, args: dict[str, Any], error: str | None
) -> ToolCall:
    """The call with clean name and id: its arguments, or refused with ``error``."""
    if error is None:
        if call_id.isascii() and name.isascii():
            return ToolCall(id=call_id, name=name, args=args)
        return ToolCall(id=clean_text(call_id), name=clean_text(name), args=args)
    return ToolCall(
        id=clean_text(call_id),
        name=clean_text(name),
        arguments_error=preview(sent),
        error=error,
    )


def _unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Give repeated call ids a fresh suffix, so every call keeps its own result."""
    taken = {c.id for c in calls}
    seen: set[str] = set()
    out: list[ToolCall] = []
    for index, call in enumerate(calls):
        kept = call
        if call.id in seen:
            fresh, suffix = f"{call.id}_{index}", 0
            while fresh in taken:
                suffix += 1
                fresh = f"{call.id}_{index}_{suffix}"
            taken.add(fresh)
            kept = call.model_copy(update={"id": fresh})
        seen.add(kept.id)
        out.append(kept)
    return out


def _error(call: ToolCall, content: str, name: str | None = None) -> ToolResult:
    return ToolResult(call_id=call.id, name=name or call.name, status="error", content=content)


class Runner:
    """Runs tool calls through a toolset and pauses the guarded ones for review.

    Args:
        tools: a :class:`Toolset` from :func:`guard`, or anything ``guard``
            takes (a list or mapping of functions and tools is classified
            with ``classifier``).
        classifier: used when ``tools`` is not already a toolset.
        edit_policy: ``"run"`` (the default, as in the specification) runs an
            edited call of the same tool, since the reviewer wrote it.
            ``"recheck"`` treats every edit as a new proposal: when the
            tool's policy says the edited call needs approval, it is put up
            for review again instead of running. In both modes an edit that
            switches to ANOTHER guarded tool is put up for review again: an
            approval of one tool never runs another one.
        sync_in_thread: run sync tools in a worker thread (the default), so
            a slow tool does not block the event loop.
        max_concurrency: most tool calls of one turn running at once
            (``None``: all of them).
        review_ttl: how long a review stays open, in seconds or as a
            ``timedelta``; a tool's own ``requires_approval(ttl=...)`` wins.
            ``None`` (the default): no deadline — it is the user's decision.
        clock: the time source for request times and deadlines (tests pass
            a fake one).
        signing_key: a secret for the digest that binds an approval to the
            shown call (HMAC-SHA-256). Without it the digest is a plain
            SHA-256, which detects accidental or naive changes to a stored
            review but not an attacker who can rewrite the store and
            recompute it; with a key kept out of the store, they cannot.
        limits: how deep and large arguments and results may be (see
            :class:`Limits`); arguments beyond them get an error result
            without review, results beyond them are kept in a bounded form.
            ``None``: ``Limits()``.
    """

    __slots__ = (
        "_limiter",
        "clock",
        "edit_policy",
        "limits",
        "review_ttl",
        "signing_key",
        "sync_in_thread",
        "toolset",
    )

    def __init__(
        self,
        tools: Tools,
        *,
        classifier: Classifier | None = None,
        edit_policy: EditPolicy = "run",
        sync_in_thread: bool = True,
        max_concurrency: int | None = None,
        review_ttl: float | timedelta | None = None,
        clock: Callable[[], datetime] = utcnow,
        signing_key: bytes | None = None,
        limits: Limits | None = None,
    ) -> None:
        if edit_policy not in ("run", "recheck"):
            msg = f"edit_policy must be 'run' or 'recheck', got {edit_policy!r}"
            raise ValueError(msg)
        self.toolset = (
            tools if isinstance(tools, Toolset) else Toolset(tools, classifier=classifier)
        )
        self.edit_policy: EditPolicy = edit_policy
        self.sync_in_thread = sync_in_thread
        self._limiter = anyio.CapacityLimiter(max_concurrency) if max_concurrency else None
        self.review_ttl = ttl_seconds(review_ttl)
        self.clock = clock
        self.signing_key = signing_key
        self.limits = check_limits(limits)

    # ------------------------------------------------------------------ helpers

    def _unknown_tool(self, call: ToolCall, name: str) -> ToolResult:
        available = ", ".join(self.toolset) or "(none)"
        return _error(call, f"Tool `{name}` does not exist. Available tools: {available}", name)

    async def _execute(
        self, call: ToolCall, tool: Tool[Any, Any], args: dict[str, Any]
    ) -> ToolResult:
        try:
            if self._limiter is not None:
                async with self._limiter:
                    value = await tool.execute(args, in_thread=self.sync_in_thread)
            else:
                value = await tool.execute(args, in_thread=self.sync_in_thread)
        except Exception as exc:
            return _error(
                call, f"Tool `{tool.name}` failed: {type(exc).__name__}: {exc}", tool.name
            )
        # Never raises: the tool ran, so its result is recorded whatever it is (see Limits).
        content, data = bounded_result(value, self.limits)
        return ToolResult(
            call_id=call.id, name=tool.name, status="success", content=content, value=data
        )

    async def _execute_all(
        self, jobs: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]]
    ) -> list[ToolResult]:
        if len(jobs) == 1:
            return [await self._execute(*jobs[0])]
        out: list[ToolResult | None] = [None] * len(jobs)

        async def one(i: int) -> None:
            out[i] = await self._execute(*jobs[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(jobs)):
                tg.start_soon(one, i)
        return [r for r in out if r is not None]

    def _action(self, call: ToolCall, tool: Tool[Any, Any]) -> Action:
        now = self.clock()
        ttl = tool.approval.ttl if tool.approval and tool.approval.ttl else self.review_ttl
        return Action(
            id=new_id(),
            call_id=call.id,
            name=call.name,
            args=call.args,
            description=tool.review_description() or message("action_description", name=call.name),
            requested_at=now,
            expires_at=now + timedelta(seconds=ttl) if ttl else None,
            digest=call_digest(call.name, call.args, self.signing_key),
        )

    # ------------------------------------------------------------------ run

    async def run(self, calls: Sequence[Any]) -> Step:
        """Run one model turn of tool calls.

        Calls that need no approval run now (concurrently; sync tools in a
        worker thread). Calls to unknown tools, or with arguments that break
        the schema, get an error result without asking anyone. The others
        become actions of a ``pending_review``.

        Args:
            calls: the tool calls of one assistant message, in order (see
                :func:`parse_tool_call` for the accepted shapes).

        Returns:
            A complete :class:`Step` (one result per call, in order) or a
            paused one whose ``pending`` is to be stored and resumed.
        """
        parsed = _unique_ids(
            [parse_tool_call(raw, index, limits=self.limits) for index, raw in enumerate(calls)]
        )
        results: dict[str, ToolResult] = {}
        jobs: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]] = []
        actions: list[Action] = []
        for call in parsed:
            tool = self.toolset.get(call.name)
            if tool is None:
                results[call.id] = self._unknown_tool(call, call.name)
                continue
            if call.error is not None:
                results[call.id] = _error(call, call.error)
                continue
            if call.arguments_error is not None:
                results[call.id] = _error(
                    call,
                    f"Invalid arguments for tool `{call.name}`: expected a JSON object,"
                    f" got {call.arguments_error[:200]}",
                )
                continue
            try:
                validated = tool.validate_args(call.args)
            except ToolArgumentsError as exc:
                results[call.id] = _error(call, str(exc))
                continue
            if tool.needs_approval(validated):
                actions.append(self._action(call, tool))
            else:
                jobs.append((call, tool, validated))
        if jobs:
            for result in await self._execute_all(jobs):
                results[result.call_id] = result
        if not actions:
            return Step(calls=parsed, results=[results[c.id] for c in parsed])
        pending = PendingTurn(
            calls=parsed,
            results=[results[c.id] for c in parsed if c.id in results],
            actions=actions,
        )
        step = Step(calls=parsed, results=pending.results, pending=pending, actions=actions)
        return await self._stand_in(step)

    async def _stand_in(self, step: Step) -> Step:
        stand_in = get_stand_in()
        while stand_in is not None and step.pending is not None:
            waiting = [a for a in step.pending.actions if a.status == "requested"]
            decisions = [
                stand_in(ToolCall(id=a.call_id, name=a.name, args=a.args)) for a in waiting
            ]
            step = await self.resume(step.pending, decisions)
        return step

    # ------------------------------------------------------------------ resume

    async def resume(  # noqa: PLR0915 - one flat pass over the decisions reads best
        self, pending: PendingTurn, decisions: Sequence[Any]
    ) -> Step:
        """Apply decisions to a paused turn and run what they allow (lenient path).

        Decisions are matched to the waiting actions in order. Fewer
        decisions than actions: the rest are rejected with ``NO_DECISION``;
        more: the extra ones are ignored. Use
        :func:`~toolguard.validate_decisions` first for the strict checks.

        * approve: the proposed call runs.
        * edit: the call is replaced (same id) by ``edited_action`` and runs;
          an unknown tool name or arguments that break the schema give an
          error result, and an edit that switches to another guarded tool
          is put up for review again.
        * reject: the call does not run; the model reads the reason, or
          ``REJECTED_BY_USER_MESSAGE``.

        Returns:
            A complete :class:`Step` (one result per call of the turn, in
            order), or a paused one when an edit needs its own review.

        Raises:
            NoPendingReviewError: ``pending`` has no waiting action.
            InvalidReviewDecisionError: ``decisions`` is not a list, or one
                of the decisions used is malformed; nothing ran.
        """
        waiting = [a for a in pending.actions if a.status == "requested"]
        if not waiting:
            raise NoPendingReviewError
        parsed = [parse_decision(d) for d in as_decision_list(decisions)[: len(waiting)]]
        calls = list(pending.calls)
        position = {c.id: i for i, c in enumerate(calls)}
        results = {r.call_id: r for r in pending.results}
        replaced = list(pending.replaced_calls)
        now = self.clock()
        # Each decided action is copied once, at the end, with all its updates.
        decided: list[tuple[Action, dict[str, Any]]] = []
        again: list[Action] = []
        jobs: list[tuple[int, ToolCall, Tool[Any, Any], dict[str, Any]]] = []

        def finish(action: Action, result: ToolResult, status: Any, decision: Any) -> None:
            results[result.call_id] = result
            decided.append(
                (
                    action,
                    {
                        "status": status,
                        "decision": decision,
                        "result": result,
                        "decided_at": now,
                        "finished_at": now,
                    },
                )
            )

        for i, action in enumerate(waiting):
            decision = parsed[i] if i < len(parsed) else None
            call = calls[position[action.call_id]]
            if decision is None:
                finish(action, _error(call, NO_DECISION), "rejected", None)
            elif isinstance(decision, RejectDecision):
                reason = decision.message or REJECTED_BY_USER_MESSAGE
                finish(action, _error(call, reason), "rejected", decision)
            elif isinstance(decision, ApproveDecision):
                tool = self.toolset.get(action.name)
                if not hmac.compare_digest(
                    action.digest, call_digest(action.name, action.args, self.signing_key)
                ):
                    # The stored request no longer matches what the reviewer was shown.
                    finish(action, _error(call, TAMPERED), "failed", decision)
                    continue
                if tool is None:
                    finish(action, self._unknown_tool(call, action.name), "failed", decision)
                    continue
                try:
                    validated = tool.validate_args(action.args)
                except ToolArgumentsError as exc:
                    finish(action, _error(call, str(exc)), "failed", decision)
                    continue
                jobs.append((len(decided), call, tool, validated))
                decided.append(
                    (action, {"status": "approved", "decision": decision, "decided_at": now})
                )
            else:
                assert isinstance(decision, EditDecision)  # noqa: S101 - the union is closed
                edited = decision.edited_action
                new_call = parse_tool_call(
                    {"id": call.id, "name": edited.name, "args": edited.args}, limits=self.limits
                )
                calls[position[call.id]] = new_call
                replaced = [c for c in replaced if c.id != call.id] + [new_call]
                tool = self.toolset.get(edited.name)
                if tool is None:
                    finish(action, self._unknown_tool(new_call, edited.name), "failed", decision)
                    continue
                if new_call.error is not None:
                    finish(action, _error(new_call, new_call.error), "failed", decision)
                    continue
                try:
                    validated = tool.validate_args(new_call.args)
                except ToolArgumentsError as exc:
                    finish(action, _error(new_call, str(exc)), "failed", decision)
                    continue
                recheck = edited.name != action.name or self.edit_policy == "recheck"
                changes = {"status": "edited", "decision": decision, "decided_at": now}
                if recheck and tool.needs_approval(validated):
                    decided.append((action, {**changes, "finished_at": now}))
                    again.append(self._action(new_call, tool))
                    continue
                jobs.append((len(decided), new_call, tool, validated))
                decided.append((action, changes))
        if jobs:
            outcomes = await self._execute_all([(c, t, a) for _, c, t, a in jobs])
            finished_at = self.clock()
            for (slot, _, _, _), result in zip(jobs, outcomes, strict=True):
                results[result.call_id] = result
                decided[slot][1].update(
                    status="executed" if result.status == "success" else "failed",
                    result=result,
                    finished_at=finished_at,
                )
        actions = [action.model_copy(update=changes) for action, changes in decided]
        if again:
            paused = PendingTurn(
                calls=calls,
                results=[results[c.id] for c in calls if c.id in results],
                actions=again,
                replaced_calls=replaced,
            )
            step = Step(
                calls=calls,
                results=paused.results,
                pending=paused,
                replaced_calls=replaced,
                actions=actions + again,
            )
            return await self._stand_in(step)
        return Step(
            calls=calls,
            results=[results[c.id] for c in calls],
            replaced_calls=replaced,
            actions=actions,
        )

    # ------------------------------------------------------------------ closing without decisions

    def close(self, pending: PendingTurn, outcome: CloseOutcome, reason: str | None = None) -> Step:
        """End a paused turn without running any waiting action.

        Every waiting action gets status ``outcome`` (``"expired"`` or
        ``"cancelled"``) and an error result telling the model so (with
        ``reason`` for a cancellation). Nothing runs.

        Raises:
            NoPendingReviewError: ``pending`` has no waiting action.
        """
        waiting = [a for a in pending.actions if a.status == "requested"]
        if not waiting:
            raise NoPendingReviewError
        now = self.clock()
        text = EXPIRED if outcome == "expired" else CANCELLED
        if outcome == "cancelled" and reason:
            text = f"The review of this action was cancelled: {reason}. It was not executed."
        results = {r.call_id: r for r in pending.results}
        calls = {c.id: c for c in pending.calls}
        closed: list[Action] = []
        for action in waiting:
            result = _error(calls[action.call_id], text)
            results[result.call_id] = result
            closed.append(
                action.model_copy(update={"status": outcome, "result": result, "finished_at": now})
            )
        return Step(
            calls=list(pending.calls),
            results=[results[c.id] for c in pending.calls],
            replaced_calls=list(pending.replaced_calls),
            actions=closed,
        )

    def interrupted(self, pending: PendingTurn, decisions: Sequence[Any]) -> Step:
        """Finish a turn whose process died while applying ``decisions`` (at most once).

        Approved and edited actions end ``failed`` with a result saying the
        outcome is unknown; they are NOT run again. Rejected (or undecided)
        actions end as the decisions say. Nothing runs.
        """
        waiting = [a for a in pending.actions if a.status == "requested"]
        parsed = [parse_decision(d) for d in list(decisions)[: len(waiting)]]
        now = self.clock()
        results = {r.call_id: r for r in pending.results}
        calls = {c.id: c for c in pending.calls}
        ended: list[Action] = []
        for i, action in enumerate(waiting):
            decision = parsed[i] if i < len(parsed) else None
            call = calls[action.call_id]
            if decision is None or isinstance(decision, RejectDecision):
                text = NO_DECISION if decision is None else decision.message
                result = _error(call, text or REJECTED_BY_USER_MESSAGE)
                status: Any = "rejected"
            else:
                result = _error(call, INTERRUPTED)
                status = "failed"
            results[result.call_id] = result
            ended.append(
                action.model_copy(
                    update={
                        "status": status,
                        "decision": decision,
                        "result": result,
                        "decided_at": action.decided_at or now,
                        "finished_at": now,
                    }
                )
            )
        return Step(
            calls=list(pending.calls),
            results=[results[c.id] for c in pending.calls],
            replaced_calls=list(pending.replaced_calls),
            actions=ended,
        )

    # ------------------------------------------------------------------ without an event loop

    def run_sync(self, calls: Sequence[Any]) -> Step:
        """:meth:`run` for code without an event loop (starts one with anyio)."""
        return anyio.run(self.run, calls)

    def resume_sync(self, pending: PendingTurn, decisions: Sequence[Any]) -> Step:
        """:meth:`resume` for code without an event loop (starts one with anyio)."""
        return anyio.run(self.resume, pending, decisions)
