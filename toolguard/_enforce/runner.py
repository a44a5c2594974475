"""The runner: run one model turn of tool calls, pause for review, resume with decisions.

This is the direct, lenient path of the specification. It works with any
agent loop: give it the tool calls of one assistant message, get back either
one result per call (in order) or a paused turn with its ``pending_review``;
store the paused turn anywhere (it is JSON), and resume it with the human's
decisions, in this process or another one.
"""

from __future__ import annotations

import functools
import hmac
import json
import reprlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable
from uuid import UUID

import anyio

from toolguard._core import checks as check
from toolguard._core.catalog import message
from toolguard._core.errors import AlreadyResumedError, NoPendingReviewError
from toolguard._core.jsonable import clean_text, to_json_data
from toolguard._core.limits import (
    WIDEST_LIMITS,
    Limits,
    args_problem,
    args_too_deep,
    bounded_result,
    check_limits,
    preview,
    text_too_large,
)
from toolguard._core.records import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    ApproveDecision,
    EditDecision,
    PendingReview,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ResultOutcome,
    ToolCall,
    ToolResult,
    args_json,
    call_digest,
    new_id,
    trusted,
    utcnow,
    with_fields,
)
from toolguard._core.results import ResultTemplates, check_templates, result_text
from toolguard._enforce import quorum
from toolguard._enforce.decide import decide, failure_text, unknown_tool_text
from toolguard._policy.decisions import AnyDecision, as_decision_list, check_allowed, parse_decision
from toolguard._policy.redact import (
    REDACTED,
    SECRET_GONE,
    keep_redacted,
    redact_args,
    scrub,
    scrub_data,
    scrub_notes,
    shown_edit,
)
from toolguard._policy.rules import Effect, denied_text
from toolguard._policy.stand_in import get_stand_in
from toolguard._tools.classify import Classifier
from toolguard._tools.tool import Tool, ToolArgumentsError, ttl_seconds
from toolguard._tools.toolset import Tools, Toolset

EditPolicy = Literal["run", "recheck"]

TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
EXPIRED = "The review of this action expired before anyone decided. It was not executed."
EXPIRED_BEFORE_START = (
    "The review of this action expired before the approved call could start. It was not executed."
)
CANCELLED = "The review of this action was cancelled. It was not executed."
INTERRUPTED = (
    "The process stopped while this approved tool was running, so its outcome is unknown."
    " It was not run again."
)
CloseOutcome = Literal["expired", "cancelled"]

GrantCheck = Callable[[list[ToolCall]], Awaitable[set[str]]]
"""Which of these calls (that would need a review) a standing grant covers: their ids."""

REMEMBERED_TURNS: Final = 10_000
"""How many finished ``review_id`` s this process remembers to refuse a second resume."""


@runtime_checkable
class Claims(Protocol):
    """Claims a key once, across processes: what makes ``Runner(claims=...)`` once-only.

    :class:`~toolguard.MemoryStore`, :class:`~toolguard.SQLiteStore` and
    ``toolguard.postgres.PostgresStore`` have it.
    """

    async def claim(self, key: str) -> bool:
        """Record ``key``; ``True`` for the first caller ever, ``False`` for every later one."""
        ...


class _FinishedTurns:
    """The review ids this process resumed or closed (bounded: the latest ``limit``)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._ids: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # runners may be used from several threads

    def finish(self, review_id: str, how: str, *, after: tuple[str, ...] = ()) -> None:
        """Record how the turn ended; raise when it already ended (unless in ``after``)."""
        with self._lock:
            done = self._ids.get(review_id)
            if done is not None and done not in after:
                raise AlreadyResumedError(review_id)
            self._ids[review_id] = how
            self._ids.move_to_end(review_id)
            while len(self._ids) > self._limit:
                self._ids.popitem(last=False)

    def done(self, review_id: str) -> bool:
        """Whether the turn was resumed or closed (and is still remembered)."""
        with self._lock:
            return review_id in self._ids

    def forget(self, review_id: str) -> None:
        """Undo :meth:`finish` (the claim failed before anything ran)."""
        with self._lock:
            self._ids.pop(review_id, None)


_FINISHED = _FinishedTurns(REMEMBERED_TURNS)


class _Deadline:
    """Stands in for the tool of one approved job: it refuses to start past the deadline.

    The check runs at the moment the job would call the tool (after any wait
    for a ``max_concurrency`` slot), with the runner's clock.
    """

    __slots__ = ("_clock", "_deadline", "_tool", "missed")

    def __init__(
        self, tool: Tool[Any, Any], deadline: datetime | None, clock: Callable[[], datetime]
    ) -> None:
        self._tool = tool
        self._deadline = deadline
        self._clock = clock
        self.missed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    async def execute(self, validated: Mapping[str, Any], *, in_thread: bool = True) -> Any:
        if self._deadline is not None and self._clock() >= self._deadline:
            self.missed = True
            raise _DeadlineMissed
        return await self._tool.execute(validated, in_thread=in_thread)


class _DeadlineMissed(Exception):  # noqa: N818 - internal signal, never escapes the runner
    """The review's deadline passed before the approved call started."""


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

    def tool_messages(self, templates: ResultTemplates | None = None) -> list[dict[str, Any]]:
        """The results as OpenAI Chat Completions tool messages, in call order.

        Each is ``{"role": "tool", "tool_call_id", "content"}``; the content of
        a result that is not a plain success is marked with ``templates``
        (default :class:`~toolguard.ResultTemplates`), since the format has no
        status field.

        Raises:
            ValueError: the turn is still paused (not every call has a result).
        """
        templates = check_templates(templates, "templates")
        if self.pending is not None:
            msg = "The turn is paused: resume it with the decisions before sending its results"
            raise ValueError(msg)
        return [
            {"role": "tool", "tool_call_id": r.call_id, "content": result_text(r, templates)}
            for r in self.results
        ]

    def openai_messages(
        self, text: str | None = None, templates: ResultTemplates | None = None
    ) -> list[dict[str, Any]]:
        """The finished turn in OpenAI Chat Completions format, ready to append to the history.

        ``[assistant message, tool message per call]``: the assistant message
        carries ``text`` (the model's content, ``None`` when it had none) and
        the tool calls as they stand (edits applied, arguments as JSON
        text), then one tool message per call in call order (see
        :meth:`tool_messages`). A hand-written loop sends these instead of
        toolguard's own :class:`~toolguard.ToolCall` shape.

        Raises:
            ValueError: the turn is still paused.
        """
        tools = self.tool_messages(templates)
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if self.calls:
            assistant["tool_calls"] = [openai_tool_call(c) for c in self.calls]
        return [assistant, *tools]


def openai_tool_call(call: ToolCall) -> dict[str, Any]:
    """One call in the OpenAI Chat Completions shape (``arguments`` as JSON text)."""
    arguments = call.arguments_error if call.arguments_error is not None else args_json(call.args)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


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
                return trusted(
                    ToolCall,
                    {
                        "id": call_id,
                        "name": name,
                        "args": args,
                        "arguments_error": None,
                        "error": None,
                    },
                )
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


def _check_thread_id(thread_id: object) -> None:
    if not isinstance(thread_id, str):
        msg = f"thread_id must be text, got {type(thread_id).__name__}"
        raise TypeError(msg)


def _error(
    call: ToolCall, content: str, outcome: ResultOutcome, name: str | None = None
) -> ToolResult:
    return ToolResult(
        call_id=call.id, name=name or call.name, status="error", content=content, outcome=outcome
    )


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
            The digest also covers the thread and review ids, so an approved
            call copied into another review never runs.
        claims: a store with ``claim(key)`` (:class:`~toolguard.MemoryStore`,
            :class:`~toolguard.SQLiteStore`, ``PostgresStore``): :meth:`resume`
            claims the turn's ``review_id`` there before running anything, so a
            paused turn is resumed once across processes sharing the store.
            ``None`` (the default): once per process only.
        limits: how deep and large arguments and results may be (see
            :class:`Limits`); arguments beyond them get an error result
            without review, results beyond them are kept in a bounded form.
            ``None``: ``Limits()``.
    """

    __slots__ = (
        "_limiter",
        "claims",
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
        claims: Claims | None = None,
        limits: Limits | None = None,
    ) -> None:
        policy: object = edit_policy  # checked at run time for untyped callers
        if not isinstance(policy, str) or policy not in ("run", "recheck"):
            msg = f"edit_policy must be 'run' or 'recheck', got {edit_policy!r}"
            raise ValueError(msg)
        rules: object = classifier
        if rules is not None and not isinstance(rules, Classifier):
            msg = f"classifier must be a toolguard.Classifier or None, got {check.kind(rules)}"
            raise TypeError(msg)
        limit = check.positive_int(max_concurrency, "max_concurrency", none="no limit")
        self.toolset = (
            tools if isinstance(tools, Toolset) else Toolset(tools, classifier=classifier)
        )
        self.edit_policy: EditPolicy = edit_policy
        self.sync_in_thread = check.flag(sync_in_thread, "sync_in_thread")
        self._limiter = anyio.CapacityLimiter(limit) if limit else None
        self.review_ttl = ttl_seconds(review_ttl, "review_ttl")
        self.clock = check.callable_or_none(
            clock, "clock", "a function returning the current datetime", none=False
        )
        self.signing_key = check.signing_key(signing_key)
        if claims is not None and not callable(getattr(claims, "claim", None)):
            msg = (
                f"claims must be a store with an async claim(key) method (MemoryStore,"
                f" SQLiteStore, PostgresStore), got {type(claims).__name__}"
            )
            raise TypeError(msg)
        self.claims = claims
        self.limits = check_limits(limits)

    # ------------------------------------------------------------------ helpers

    def _rule(self, call: ToolCall) -> tuple[Effect | None, ToolResult | None]:
        """What the toolset's rules say about ``call``; a deny comes with its error result."""
        rules = self.toolset.rules
        if not rules:
            return None, None
        decided = rules.decide(call.name, call.args)
        if decided.effect == "deny" and decided.rule is not None:
            return "deny", _error(call, denied_text(call.name, decided.rule), "denied")
        return decided.effect, None

    def _unknown_tool(self, call: ToolCall, name: str) -> ToolResult:
        return _error(call, unknown_tool_text(self.toolset, name), "unknown_tool", name)

    async def _execute(
        self, call: ToolCall, tool: Tool[Any, Any], args: dict[str, Any]
    ) -> ToolResult:
        try:
            if self._limiter is not None:
                async with self._limiter:
                    value = await tool.execute(args, in_thread=self.sync_in_thread)
            else:
                value = await tool.execute(args, in_thread=self.sync_in_thread)
        except Exception as exc:  # the one failure text of every path, secrets scrubbed
            return _error(call, failure_text(tool, exc, args, call.args), "failed", tool.name)
        # Never raises: the tool ran, so its result is recorded whatever it is (see Limits).
        content, data = bounded_result(value, self.limits)
        if tool.redacted:  # a result echoing a secret argument: recorded and shown scrubbed
            secrets = tool.secret_texts(args) + tool.secret_texts(call.args)
            content, data = scrub(content, secrets), scrub_data(data, secrets)
        return trusted(
            ToolResult,
            {
                "call_id": call.id,
                "name": tool.name,
                "status": "success",
                "content": content,
                "value": data,
                "outcome": None,
            },
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

    def _gate(self, tool: Tool[Any, Any], action: Action) -> Tool[Any, Any]:
        """The tool of an approved job, refusing to start past the action's deadline."""
        return cast("Tool[Any, Any]", _Deadline(tool, action.expires_at, self.clock))

    async def _claim(self, review_id: str) -> None:
        """Mark the turn resumed in this process, and claim it in ``claims`` (once only)."""
        _FINISHED.finish(review_id, "resumed")
        if self.claims is None:
            return
        try:
            claimed = await self.claims.claim(f"resume:{review_id}")
        except BaseException:
            _FINISHED.forget(review_id)  # nothing ran: the caller may try again
            raise
        if not claimed:
            raise AlreadyResumedError(review_id)

    def _action(
        self, call: ToolCall, tool: Tool[Any, Any], thread_id: str, review_id: str
    ) -> Action:
        now = self.clock()
        ttl = tool.approval.ttl if tool.approval and tool.approval.ttl else self.review_ttl
        return trusted(
            Action,
            {
                "id": new_id(),
                "call_id": call.id,
                "name": call.name,
                # What the reviewer is shown: secret values replaced; the digest covers the real
                # ones.
                "args": dict(tool.shown_args(call.args)),
                "description": (
                    tool.review_description() or message("action_description", name=call.name)
                ),
                "status": "requested",
                "decision": None,
                "result": None,
                "requested_at": now,
                "decided_at": None,
                "finished_at": None,
                "expires_at": now + timedelta(seconds=ttl) if ttl else None,
                "digest": call_digest(
                    call.name, call.args, self.signing_key, thread_id=thread_id, review_id=review_id
                ),
                "reviewer": None,
                "allowed_decisions": list(tool.approval.allowed_decisions if tool.approval else ()),
                "approvals_required": tool.approvals,
                "approved_by": [],
            },
        )

    def _unreviewed(
        self,
        action: Action,
        call: ToolCall,
        tool: Tool[Any, Any] | None,
        thread_id: str,
        review_id: str,
    ) -> ToolResult | None:
        """The error result when ``call`` is not the call ``action`` showed, else ``None``.

        The digest covers the real arguments; the shown ones must be the
        real ones with the secrets replaced. A call whose secret values
        were replaced by ``REDACTED`` in storage (kept in memory only, and
        gone) fails with ``SECRET_GONE``: it never runs with the placeholder.
        """
        expected = call_digest(
            action.name, call.args, self.signing_key, thread_id=thread_id, review_id=review_id
        )
        redacted = tool.redacted if tool is not None else frozenset()
        shown = redact_args(call.args, redacted)
        if hmac.compare_digest(action.digest, expected) and (
            shown == action.args and call.name == action.name
        ):
            return None
        if redacted and any(call.args.get(n) == REDACTED for n in redacted):
            return _error(call, SECRET_GONE, "failed")
        # The stored request no longer matches what the reviewer was shown.
        return _error(call, TAMPERED, "tampered")

    def allowed_decisions(self, action: Action) -> tuple[str, ...]:
        """The decision types ``action`` may get: shown to the reviewer AND allowed by the tool.

        The stored list is what the payload showed; the tool's policy (code,
        not the store) must allow the type too, so a rewritten store cannot
        widen what a reviewer may do.
        """
        tool = self.toolset.get(action.name)
        if tool is None or tool.approval is None:
            return tuple(action.allowed_decisions)
        policy = tool.approval.allowed_decisions
        return tuple(kind for kind in action.allowed_decisions if kind in policy)

    def check_allowed(self, pending: PendingTurn, decisions: Sequence[Any]) -> None:
        """Refuse decisions (models, in order) their waiting action does not allow.

        Raises:
            InvalidReviewDecisionError: with the catalog text naming the
                decision, the action and what it allows; nothing has run.
        """
        waiting = [a for a in pending.actions if a.status == "requested"]
        for action, decision in zip(waiting, decisions, strict=False):
            check_allowed(decision.type, (action.name, self.allowed_decisions(action)))

    # ------------------------------------------------------------------ run

    async def run(
        self, calls: Sequence[Any], *, thread_id: str = "", grants: GrantCheck | None = None
    ) -> Step:
        """Run one model turn of tool calls.

        Calls that need no approval run now (concurrently; sync tools in a
        worker thread). Calls to unknown tools, or with arguments that break
        the schema, get an error result without asking anyone. The others
        become actions of a ``pending_review``.

        Args:
            calls: the tool calls of one assistant message, in order (see
                :func:`parse_tool_call` for the accepted shapes).
            thread_id: the conversation the turn belongs to; the digests of the
                actions cover it, so pass the same id to :meth:`resume`.
            grants: standing grants (``ReviewedChat`` passes them; see
                docs/policies.md): awaited once, before anything runs, with
                the calls that would need a review (not those an ``ask``
                rule matched), in order; the ids it returns run without a
                review. ``None``: every such call is reviewed.

        Returns:
            A complete :class:`Step` (one result per call, in order) or a
            paused one whose ``pending`` is to be stored and resumed.
        """
        _check_thread_id(thread_id)
        review_id = new_id()
        parsed = _unique_ids(
            [parse_tool_call(raw, index, limits=self.limits) for index, raw in enumerate(calls)]
        )
        results: dict[str, ToolResult] = {}
        jobs: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]] = []
        actions: list[Action] = []
        reviews: list[tuple[ToolCall, Tool[Any, Any], dict[str, Any], bool]] = []
        for call in parsed:
            # One core decides for every path: run now, ask a person, or refuse.
            verdict = decide(self.toolset, call)
            if verdict.outcome == "deny":  # a deny verdict always carries its text and kind
                kind = cast("ResultOutcome", verdict.refusal_kind)
                results[call.id] = _error(call, cast("str", verdict.refusal), kind)
                continue
            # A run or ask verdict always carries the tool and the validated arguments.
            tool = cast("Tool[Any, Any]", verdict.tool)
            validated = cast("dict[str, Any]", verdict.validated)
            if verdict.outcome == "ask":
                reviews.append((call, tool, validated, not verdict.grantable))
            else:
                jobs.append((call, tool, validated))
        covered: set[str] = set()
        if grants is not None and any(not asked for *_, asked in reviews):
            covered = set(await grants([c for c, _, _, asked in reviews if not asked]))
        for call, tool, validated, asked in reviews:
            if call.id in covered and not asked:
                jobs.append((call, tool, validated))
            else:
                actions.append(self._action(call, tool, thread_id, review_id))
        if jobs:
            for result in await self._execute_all(jobs):
                results[result.call_id] = result
        if not actions:
            return Step(calls=parsed, results=[results[c.id] for c in parsed])
        pending = trusted(
            PendingTurn,
            {
                "review_id": review_id,
                "calls": list(parsed),
                "results": [results[c.id] for c in parsed if c.id in results],
                "actions": list(actions),
                "replaced_calls": [],
            },
        )
        step = Step(calls=parsed, results=pending.results, pending=pending, actions=actions)
        return await self._stand_in(step, thread_id)

    async def _stand_in(self, step: Step, thread_id: str) -> Step:
        stand_in = get_stand_in()
        while stand_in is not None and step.pending is not None:
            waiting = [a for a in step.pending.actions if a.status == "requested"]
            decisions = [
                stand_in(ToolCall(id=a.call_id, name=a.name, args=a.args)) for a in waiting
            ]
            step = await self.resume(step.pending, decisions, thread_id=thread_id)
        return step

    # ------------------------------------------------------------------ resume

    async def resume(
        self,
        pending: PendingTurn,
        decisions: Sequence[Any],
        *,
        thread_id: str = "",
        reviewer: str | int | UUID | None = None,
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
        * respond (only for tools that allow it): the call does not run; the
          reviewer's ``message`` is its result, with status ``"success"`` as
          in LangChain and ``outcome`` ``"responded"``; the action ends
          ``responded``.

        Each decision must be one its action allows (the tool's
        ``allowed_decisions``), on this lenient path too.

        The toolset's rules are asked again for every approved or edited
        call, with this runner's rules (they may have changed while the
        review waited): a call a ``deny`` rule matches does not run; it gets
        the rule's error result (``outcome`` ``"denied"``) and its action
        ends ``failed``.

        Once only: a turn is resumed at most once. This process remembers the
        latest ``REMEMBERED_TURNS`` review ids it resumed or closed (any
        runner), and with ``claims`` the review id is claimed in that store
        first, so no other process resumes it too. An approved or edited call
        whose deadline (``Action.expires_at``) has passed when its job starts
        does not run: it ends ``expired`` and the model reads
        ``EXPIRED_BEFORE_START``. An approval runs only when the action's
        digest still matches its name, arguments, ``thread_id`` and the
        turn's ``review_id`` (else it fails with ``TAMPERED``).

        A quorum (``requires_approval(approvals=N)``, N > 1): an approval
        from ``reviewer`` that does not complete the quorum runs nothing and
        returns a paused step whose ``pending`` carries the progress (same
        ``review_id``; an edit restarts the count under a new one). The turn
        runs once every action of it is settled. See "A quorum of
        reviewers" in docs/policies.md.

        Args:
            pending: the paused turn.
            decisions: one decision per waiting action, in order.
            thread_id: the id given to :meth:`run` for this turn.
            reviewer: who decides (text, an ``int`` or a ``UUID``); needed to
                approve or edit a quorum action.

        Returns:
            A complete :class:`Step` (one result per call of the turn, in
            order), or a paused one when an edit needs its own review or a
            quorum is not complete yet.

        Raises:
            NoPendingReviewError: ``pending`` has no waiting action.
            InvalidReviewDecisionError: ``decisions`` is not a list, or one
                of the decisions used is malformed or not allowed for its
                action; nothing ran.
            AlreadyResumedError: the turn was already resumed or closed (in
                this process, or claimed by another one); nothing ran.
            QuorumReviewerError: an anonymous or repeated reviewer approves a
                quorum action; nothing changed.
        """
        _check_thread_id(thread_id)
        waiting = [a for a in pending.actions if a.status == "requested"]
        if not waiting:
            raise NoPendingReviewError
        parsed = [parse_decision(d) for d in as_decision_list(decisions)[: len(waiting)]]
        self.check_allowed(pending, parsed)
        parsed = self._scrub_notes(pending, parsed)
        return await self._resume_checked(pending, waiting, parsed, thread_id, reviewer)

    def _scrub_notes(
        self, pending: PendingTurn, parsed: Sequence[AnyDecision]
    ) -> list[AnyDecision]:
        """``parsed`` (one per waiting action) with reject and respond notes not quoting secrets.

        A note that quotes a secret argument of the call it answers, in any
        spelling, has it replaced by ``REDACTED`` before anything records it.
        """
        waiting = [a for a in pending.actions if a.status == "requested"]
        return scrub_notes(parsed, waiting, pending.calls, self.toolset)

    async def _resume_checked(  # noqa: PLR0915 - one flat pass over the decisions reads best
        self,
        pending: PendingTurn,
        waiting: list[Action],
        parsed: Sequence[AnyDecision],
        thread_id: str,
        reviewer: str | int | UUID | None = None,
        *,
        plan: quorum.QuorumPlan | None = None,
    ) -> Step:
        """:meth:`resume` with decisions already parsed and checked against ``waiting``.

        For :class:`~toolguard.ReviewedChat`, which checks them (with
        :func:`~toolguard.validate_decisions` and :meth:`check_allowed`) before
        it claims the review: ``waiting`` are the actions of ``pending`` whose
        status is ``requested``, ``parsed`` at most one decision model per
        waiting action, each one its action allows. Applies a quorum's
        progress (nothing runs or is claimed while it is incomplete), then
        claims the turn (once only) and runs what the decisions allow, as
        :meth:`resume` does. ``plan``: the caller's :func:`quorum.plan` of this very
        submission, when it settles every action without a quorum (not planned again).
        """
        if plan is None or plan.pending is not None or plan.votes:
            plan = quorum.plan(
                self, pending, list(parsed), quorum.reviewer_text(reviewer), thread_id
            )
        if plan.pending is not None:
            # A quorum is still incomplete: nothing runs, nothing is claimed.
            if _FINISHED.done(pending.review_id):
                raise AlreadyResumedError(pending.review_id)
            return Step(
                calls=plan.calls,
                results=list(plan.pending.results),
                pending=plan.pending,
                replaced_calls=list(plan.pending.replaced_calls),
                actions=plan.touched,
            )
        await self._claim(pending.review_id)
        calls = list(pending.calls)
        position = {c.id: i for i, c in enumerate(calls)}
        results = {r.call_id: r for r in pending.results}
        replaced = list(pending.replaced_calls)
        now = self.clock()
        # Each decided action is copied once, at the end, with all its updates.
        decided: list[tuple[Action, dict[str, Any]]] = []
        again: list[Action] = []
        again_id = ""  # the review id of the edits put up for review again, made when needed
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

        for action, given in plan.pairs:
            decision = given  # an edit of a redacted call is recorded as shown
            call = calls[position[action.call_id]]
            if decision is None:
                finish(action, _error(call, NO_DECISION, "no_decision"), "rejected", None)
            elif isinstance(decision, RejectDecision):
                reason = decision.message or REJECTED_BY_USER_MESSAGE
                finish(action, _error(call, reason, "rejected"), "rejected", decision)
            elif isinstance(decision, RespondDecision):
                # LangChain's respond: the reviewer's answer is the tool's result; it never runs.
                answer = ToolResult(
                    call_id=call.id,
                    name=call.name,
                    status="success",
                    content=decision.message,
                    outcome="responded",
                )
                finish(action, answer, "responded", decision)
            elif isinstance(decision, ApproveDecision):
                tool = self.toolset.get(action.name)
                # The call that runs is the turn's call (real values, secrets included); its
                # digest and the shown arguments must both still be the reviewed ones.
                problem = self._unreviewed(action, call, tool, thread_id, pending.review_id)
                if problem is not None:
                    finish(action, problem, "failed", decision)
                    continue
                if tool is None:
                    finish(action, self._unknown_tool(call, action.name), "failed", decision)
                    continue
                _, refusal = self._rule(call)
                if refusal is not None:
                    # The rules of this process decide, not those of the one that paused: a
                    # deny rule added while the review waited stops the approved call.
                    finish(action, refusal, "failed", decision)
                    continue
                try:
                    validated = tool.validate_args(call.args)
                except ToolArgumentsError as exc:
                    finish(action, _error(call, str(exc), "invalid_arguments"), "failed", decision)
                    continue
                jobs.append((len(decided), call, self._gate(tool, action), validated))
                decided.append(
                    (action, {"status": "approved", "decision": decision, "decided_at": now})
                )
            else:
                assert isinstance(decision, EditDecision)  # noqa: S101 - the union is closed
                edited = decision.edited_action
                same_tool = self.toolset.get(action.name) if edited.name == action.name else None
                edited_args = dict(edited.args)
                if same_tool is not None and same_tool.redacted:
                    # A redacted parameter left as REDACTED keeps this call's real value, once
                    # the call is proven to be the reviewed one (never another call's value).
                    edited_args, kept = keep_redacted(edited.args, call.args, same_tool.redacted)
                    problem = (
                        self._unreviewed(action, call, same_tool, thread_id, pending.review_id)
                        if kept
                        else None
                    )
                    decision = shown_edit(decision, same_tool.shown_args(edited.args))
                    if problem is not None:
                        finish(action, problem, "failed", decision)
                        continue
                elif (other := self.toolset.get(edited.name)) is not None and other.redacted:
                    decision = shown_edit(decision, other.shown_args(edited.args))
                new_call = parse_tool_call(
                    {"id": call.id, "name": edited.name, "args": edited_args}, limits=self.limits
                )
                calls[position[call.id]] = new_call
                replaced = [c for c in replaced if c.id != call.id] + [new_call]
                tool = self.toolset.get(edited.name)
                if tool is None:
                    finish(action, self._unknown_tool(new_call, edited.name), "failed", decision)
                    continue
                if new_call.error is not None:
                    finish(
                        action,
                        _error(new_call, new_call.error, "invalid_arguments"),
                        "failed",
                        decision,
                    )
                    continue
                _, refusal = self._rule(new_call)
                if refusal is not None:
                    # A deny rule holds for edited calls too: an edit cannot route around it.
                    finish(action, refusal, "failed", decision)
                    continue
                try:
                    validated = tool.validate_args(new_call.args)
                except ToolArgumentsError as exc:
                    result = _error(new_call, str(exc), "invalid_arguments")
                    finish(action, result, "failed", decision)
                    continue
                recheck = edited.name != action.name or self.edit_policy == "recheck"
                changes = {"status": "edited", "decision": decision, "decided_at": now}
                if recheck and tool.needs_approval(validated):
                    decided.append((action, {**changes, "finished_at": now}))
                    again_id = again_id or new_id()
                    again.append(self._action(new_call, tool, thread_id, again_id))
                    continue
                jobs.append((len(decided), new_call, self._gate(tool, action), validated))
                decided.append((action, changes))
        if jobs:
            outcomes = await self._execute_all([(c, t, a) for _, c, t, a in jobs])
            finished_at = self.clock()
            for (slot, call, gate, _), result in zip(jobs, outcomes, strict=True):
                if cast("_Deadline", gate).missed:
                    late = _error(call, EXPIRED_BEFORE_START, "expired", result.name)
                    results[late.call_id] = late
                    decided[slot][1].update(status="expired", result=late, finished_at=finished_at)
                    continue
                results[result.call_id] = result
                decided[slot][1].update(
                    status="executed" if result.status == "success" else "failed",
                    result=result,
                    finished_at=finished_at,
                )
        actions = [
            with_fields(action, {**changes, "decided_at": action.decided_at or now})
            for action, changes in decided
        ]
        if again:
            paused = PendingTurn(
                review_id=again_id,
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
            return await self._stand_in(step, thread_id)
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
            AlreadyResumedError: this process already resumed or closed the
                turn (see :meth:`resume`).
        """
        step = close_turn(pending, outcome, reason, self.clock())
        _FINISHED.finish(pending.review_id, "closed")
        return step

    def interrupted(self, pending: PendingTurn, decisions: Sequence[Any]) -> Step:
        """Finish a turn whose process died while applying ``decisions`` (at most once).

        Approved and edited actions end ``failed`` with a result saying the
        outcome is unknown; they are NOT run again. Rejected (or undecided)
        actions end as the decisions say. Nothing runs. A turn this process
        resumed may be finished this way (its outcome is what is unknown).

        Raises:
            AlreadyResumedError: this process already closed or finished the
                turn this way.
        """
        step = interrupted_turn(pending, decisions, self.clock())
        _FINISHED.finish(pending.review_id, "interrupted", after=("resumed",))
        return step

    # ------------------------------------------------------------------ without an event loop

    def run_sync(self, calls: Sequence[Any], *, thread_id: str = "") -> Step:
        """:meth:`run` for code without an event loop (starts one with anyio)."""
        return anyio.run(functools.partial(self.run, calls, thread_id=thread_id))

    def resume_sync(
        self,
        pending: PendingTurn,
        decisions: Sequence[Any],
        *,
        thread_id: str = "",
        reviewer: str | int | UUID | None = None,
    ) -> Step:
        """:meth:`resume` for code without an event loop (starts one with anyio)."""
        return anyio.run(
            functools.partial(
                self.resume, pending, decisions, thread_id=thread_id, reviewer=reviewer
            )
        )


def close_turn(
    pending: PendingTurn, outcome: CloseOutcome, reason: str | None, now: datetime
) -> Step:
    """The step ending ``pending`` as ``outcome`` (see :meth:`Runner.close`); records nothing."""
    waiting = [a for a in pending.actions if a.status == "requested"]
    if not waiting:
        raise NoPendingReviewError
    text = EXPIRED if outcome == "expired" else CANCELLED
    if outcome == "cancelled" and reason:
        text = f"The review of this action was cancelled: {reason}. It was not executed."
    results = {r.call_id: r for r in pending.results}
    calls = {c.id: c for c in pending.calls}
    closed: list[Action] = []
    for action in waiting:
        result = _error(calls[action.call_id], text, outcome)
        results[result.call_id] = result
        closed.append(
            action.model_copy(update={"status": outcome, "result": result, "finished_at": now})
        )
    for action in quorum.held_actions(pending):
        # Settled while a quorum waited: a reject keeps its result, an approval never runs.
        ended = _held_end(action, calls[action.call_id], text, outcome)
        results[ended.call_id] = ended
        status = outcome if ended.outcome == outcome else action.status
        closed.append(
            action.model_copy(update={"status": status, "result": ended, "finished_at": now})
        )
    return Step(
        calls=list(pending.calls),
        results=[results[c.id] for c in pending.calls],
        replaced_calls=list(pending.replaced_calls),
        actions=closed,
    )


def _held_end(action: Action, call: ToolCall, text: str, outcome: ResultOutcome) -> ToolResult:
    """The result of an action settled while a quorum waited, when the turn closes unrun."""
    decision = action.decision
    if isinstance(decision, RejectDecision):
        return _error(call, decision.message or REJECTED_BY_USER_MESSAGE, "rejected")
    if isinstance(decision, RespondDecision):
        return ToolResult(
            call_id=call.id,
            name=call.name,
            status="success",
            content=decision.message,
            outcome="responded",
        )
    if decision is None:
        return _error(call, NO_DECISION, "no_decision")
    return _error(call, EXPIRED_BEFORE_START if outcome == "expired" else text, outcome)


def interrupted_turn(pending: PendingTurn, decisions: Sequence[Any], now: datetime) -> Step:
    """The step finishing an interrupted turn (see :meth:`Runner.interrupted`); records nothing."""
    waiting = [a for a in pending.actions if a.status == "requested"]
    parsed = [parse_decision(d) for d in list(decisions)[: len(waiting)]]
    results = {r.call_id: r for r in pending.results}
    calls = {c.id: c for c in pending.calls}
    ended: list[Action] = []
    pairs: list[tuple[Action, Any]] = [
        (action, parsed[i] if i < len(parsed) else None) for i, action in enumerate(waiting)
    ]
    pairs += [(a, a.decision) for a in quorum.held_actions(pending)]  # settled before the quorum
    for action, decision in pairs:
        call = calls[action.call_id]
        status: Any
        if decision is None:
            result, status = _error(call, NO_DECISION, "no_decision"), "rejected"
        elif isinstance(decision, RejectDecision):
            reason = decision.message or REJECTED_BY_USER_MESSAGE
            result, status = _error(call, reason, "rejected"), "rejected"
        elif isinstance(decision, RespondDecision):
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                status="success",
                content=decision.message,
                outcome="responded",
            )
            status = "responded"
        else:
            result, status = _error(call, INTERRUPTED, "interrupted"), "failed"
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
