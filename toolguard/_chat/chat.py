"""The chat use case: a complete agent loop with human review and durable state.

:class:`ReviewedChat` drives any :class:`~toolguard.ChatModel`: model →
tool calls → run or pause → … until the model answers with text. A pause
stores the thread and returns the ``pending_review``; :meth:`submit_review`
validates the decisions, claims the review with a compare-and-set save (so
racing submissions run the approved tools once), applies the decisions and
carries on. The thread is saved after every step, so another process with
the same store can pick it up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import operator
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import compress, count
from typing import Any, Literal, TypeAlias
from uuid import UUID

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from toolguard._core import checks as check
from toolguard._core.audit import AuditEvent, AuditKind, final_event, requested_event, to_jsonl
from toolguard._core.errors import (
    AccessDeniedError,
    ConcurrentUpdateError,
    CorruptThreadError,
    ModelError,
    NoPendingReviewError,
    ReviewerNotAllowedError,
    ReviewExpiredError,
    ReviewPendingError,
    StaleReviewError,
    StepLimitError,
    ThreadBusyError,
    UnknownGrantError,
    UnknownReviewError,
    UnknownThreadError,
)
from toolguard._core.jsonable import clean_text
from toolguard._core.limits import Limits
from toolguard._core.llm import ChatModel, Message, ModelResponse
from toolguard._core.records import (
    REJECTED_BY_USER_MESSAGE,
    Action,
    EditDecision,
    PendingReview,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ToolCall,
    ToolResult,
    args_json,
    new_id,
    trusted,
    utcnow,
    with_fields,
)
from toolguard._core.results import ResultTemplates, check_templates, result_text
from toolguard._core.standing import StandingGrant
from toolguard._enforce import grant_use, quorum
from toolguard._enforce.runner import (
    CloseOutcome,
    EditPolicy,
    Runner,
    Step,
    close_turn,
    interrupted_turn,
)
from toolguard._policy.decisions import AnyDecision, validate_decisions
from toolguard._policy.redact import SecretVault, shown_call_args, shown_decision
from toolguard._stores.memory import (
    Changes,
    MemoryStore,
    PreparedStore,
    Store,
    ThreadState,
    is_incremental,
    mark_stored,
    prepared_state,
    stored_count,
    takes_prepared,
)
from toolguard._stores.outbox import OutboxItem, Webhook, review_items
from toolguard._tools.classify import Classifier
from toolguard._tools.toolset import Tools

_log = logging.getLogger("toolguard")

Authorizer: TypeAlias = Callable[[str | None, ThreadState, list[Action]], bool | Awaitable[bool]]
"""Decides whether ``reviewer`` may decide on ``actions`` of ``thread``."""

REFUSED_DETAIL = "the authorization hook refused this reviewer"
"""The ``detail`` of the ``refused`` audit event of a reviewer the ``authorize`` hook refused."""


def reviewer_id(reviewer: object, name: str = "reviewer") -> str | None:
    """A reviewer identity as text: text as is, an ``int`` or a ``UUID`` as ``str()``.

    ``None`` stays ``None`` (anonymous). Lone surrogates are replaced like in
    any other text toolguard stores.

    Raises:
        TypeError: any other type (``bool`` included), naming the argument.
    """
    return quorum.reviewer_text(reviewer, name)


def _text_arg(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse an id argument that is not text (``None`` too, unless ``optional``)."""
    if isinstance(value, str) or (optional and value is None):
        return
    kind = "text or None" if optional else "text"
    msg = f"{name} must be {kind}, got {type(value).__name__}"
    raise TypeError(msg)


def _only_refusals_added(read: ThreadState, fresh: ThreadState) -> bool:
    """Whether ``fresh`` is ``read`` plus ``refused`` audit events, and nothing else.

    A changed webhook outbox (a delivery recorded) does not count either: it
    is no competing change of the conversation.
    """
    count = len(read.audit)
    if len(fresh.audit) < count or fresh.audit[:count] != read.audit:
        return False
    if any(e.kind != "refused" for e in fresh.audit[count:]):
        return False
    if len(fresh.audit) == count and fresh.outbox == read.outbox:
        return False  # nothing we can build on: a real conflict
    same = {"version", "updated_at", "audit", "outbox"}
    return read.model_dump(exclude=same) == fresh.model_dump(exclude=same)


AccessOperation: TypeAlias = Literal["read", "audit", "message"]
"""What an actor asks to do with a thread: read it, read its audit trail, or post a message."""

AccessHook: TypeAlias = Callable[[str | None, ThreadState, AccessOperation], bool | Awaitable[bool]]
"""Decides whether ``actor`` may do ``operation`` on ``thread`` (``ReviewedChat(access=...)``)."""

_CACHED_THREADS = 128
"""How many threads' last states a ReviewedChat keeps, to skip re-reading them (LRU)."""


_TAIL = 32
"""How many of the last stored messages / actions a save compares item by item."""


def _first_changed(old: list[Any], new: list[Any], stored: int) -> int:
    """The first index below ``stored`` where ``new`` holds another object than ``old``.

    Only the last :data:`_TAIL` stored items are compared: toolguard changes
    only the latest turn (a resumed turn's assistant message, its pending
    actions). When all of those differ (a list rebuilt whole), every item is
    compared (in C).
    """
    shared = min(stored, len(old), len(new))
    if shared <= _TAIL:  # a short thread: a plain loop is cheaper than the slices
        for index in range(shared):
            if old[index] is not new[index]:
                return index
        return shared
    start = shared - _TAIL
    first = next(
        compress(count(start), map(operator.is_not, old[start:shared], new[start:shared])),
        shared,
    )
    if first == start and start > 0:
        first = next(compress(count(), map(operator.is_not, old[:shared], new[:shared])), shared)
    return first


def _changes(base: ThreadState, update: dict[str, Any]) -> Changes | None:
    """What ``base.model_copy(update=update)`` changes, or ``None`` when not expressible.

    Lists in ``update`` share their unchanged items with ``base``'s
    (``[*state.audit, *events]``, ``_merge``, a copy of the messages with
    its last assistant message rewritten); an item that is not the same
    object is changed (see :func:`_first_changed`). ``_loop`` appends to the
    list it saved, so the stored length of ``base.messages`` is remembered at
    each save (``stored_counts``) rather than read from the list.
    """
    stored_messages = stored_count(base)
    keep, tail = stored_messages, ()
    messages = update.get("messages")
    if messages is not None:
        if messages is not base.messages:
            keep = _first_changed(base.messages, messages, stored_messages)
        tail = messages[keep:]
    actions: list[tuple[int, Action]] = []
    new_actions = update.get("actions")
    if new_actions is not None:
        old = base.actions
        if new_actions is old or len(new_actions) < len(old):
            return None
        stored = len(old)
        first = _first_changed(old, new_actions, stored)
        actions = [
            (i, new_actions[i]) for i in range(first, stored) if old[i] is not new_actions[i]
        ]
        actions.extend(enumerate(new_actions[stored:], stored))
    audit = update.get("audit")
    if audit is not None and (audit is base.audit or len(audit) < len(base.audit)):
        return None
    added = audit[len(base.audit) :] if audit is not None else ()
    return Changes(keep, tail, actions, added, stored_messages)


_REFUSALS_IN_A_ROW = 20
"""At most this many ``refused`` events in a row are recorded by the access hook's refusals."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTurn:
    """What one ``send_message`` or ``submit_review`` produced.

    Attributes:
        thread_id: the conversation's id (new when ``send_message`` started one).
        reply: the model's final text, or ``None`` while a review is pending.
        pending_review: the review payload to show a person, or ``None``.
        review_id: the id of that review; pass it back to bind decisions to it.
        actions: the approval requests this call created or finished, with
            their statuses.
    """

    thread_id: str
    reply: str | None = None
    pending_review: PendingReview | None = None
    review_id: str | None = None
    actions: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON data: ``{thread_id, reply, pending_review, review_id}``."""
        return {
            "thread_id": self.thread_id,
            "reply": self.reply,
            "pending_review": (
                self.pending_review.model_dump() if self.pending_review is not None else None
            ),
            "review_id": self.review_id,
        }


def assistant_message(text: str | None, calls: Sequence[ToolCall]) -> Message:
    """An OpenAI assistant message carrying ``calls``."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": (
                        c.arguments_error if c.arguments_error is not None else args_json(c.args)
                    ),
                },
            }
            for c in calls
        ],
    }


def tool_message(result: ToolResult, templates: ResultTemplates | None = None) -> Message:
    """An OpenAI tool message for ``result`` (``status`` is kept for our own records).

    The content is what the model reads: a result that is not a plain
    success is marked with ``templates`` (default
    :class:`~toolguard.ResultTemplates`), so it stays recognisable once the
    ``status`` key is dropped (OpenAI's formats have none).
    """
    return {
        "role": "tool",
        "tool_call_id": result.call_id,
        "content": result_text(result, templates),
        "status": result.status,
    }


def _rewrite_last_assistant(messages: list[Message], calls: Sequence[ToolCall]) -> list[Message]:
    """Make the last assistant message carry ``calls`` (edits replace proposed calls)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            messages[index] = assistant_message(messages[index].get("content"), calls)
            break
    return messages


_ENDED: dict[str, AuditKind] = {"rejected": "rejected", "responded": "responded"}
"""The final audit event of an action that ended without running (recover)."""


def _decided_action(
    action: Action, decision: AnyDecision, reviewer: str | None, now: datetime
) -> Action:
    status = {
        "approve": "approved",
        "edit": "edited",
        "reject": "rejected",
        "respond": "responded",
    }[decision.type]
    return with_fields(
        action, {"status": status, "decision": decision, "reviewer": reviewer, "decided_at": now}
    )


def _stale(state: ThreadState, review_id: str, current: str | None) -> StaleReviewError:
    """A review id this thread had before (stale), or one it never had (unknown)."""
    known = review_id == state.review_id or any(e.review_id == review_id for e in state.audit)
    kind = StaleReviewError if known else UnknownReviewError
    return kind(clean_text(review_id), current)


def _decided_event(
    thread_id: str, review_id: str, action: Action, reviewer: str | None, now: datetime
) -> AuditEvent:
    decision = action.decision
    assert decision is not None  # noqa: S101 - built by _decided_action
    tool, detail = action.name, None
    args: dict[str, Any] | None = action.args
    if isinstance(decision, EditDecision):
        tool, args = decision.edited_action.name, decision.edited_action.args
    elif isinstance(decision, RejectDecision):
        args, detail = None, decision.message or REJECTED_BY_USER_MESSAGE
    elif isinstance(decision, RespondDecision):
        args, detail = None, decision.message
    return trusted(
        AuditEvent,
        {
            "id": new_id(),
            "at": now,
            "kind": "decided",
            "thread_id": thread_id,
            "review_id": review_id,
            "action_id": action.id,
            "tool": tool,
            "args": dict(args) if args is not None else None,
            "actor": reviewer,
            "decision": decision.type,
            "detail": detail,
            "digest": action.digest,
        },
    )


def _with_reviewer(step: Step, reviewer: str | None) -> Step:
    if reviewer is None:
        return step
    return dataclasses.replace(
        step,
        actions=[
            with_fields(a, {"reviewer": reviewer})
            if a.decided_at is not None and a.reviewer is None
            else a
            for a in step.actions
        ],
    )


def _merge(actions: list[Action], updates: Sequence[Action]) -> list[Action]:
    """``actions`` with ``updates`` in place of the actions of the same id, new ones appended.

    The updated actions are nearly always the latest ones (the pending turn's,
    at the end of a thread's actions): they are looked for there first, and
    the whole list is indexed only for an id not found there, so a long
    thread does not cost a walk over all its actions per update.
    """
    merged = list(actions)
    if not updates:
        return merged
    start = max(0, len(merged) - 2 * len(updates))
    position = {merged[i].id: i for i in range(start, len(merged))}
    if start and any(a.id not in position for a in updates):
        head = {merged[i].id: i for i in range(start)}
        head.update(position)  # a repeated id keeps its last place, as above
        position = head
    for action in updates:
        if action.id in position:
            merged[position[action.id]] = action
        else:
            position[action.id] = len(merged)
            merged.append(action)
    return merged


def _check_model(model: object) -> None:
    if not callable(getattr(model, "complete", None)):
        msg = (
            "model must be a ChatModel: an object with an async complete(messages, tools)"
            f" method, such as toolguard.openai.OpenAIChatModel; got {check.kind(model)}"
        )
        raise TypeError(msg)


def _check_store(store: object) -> None:
    if store is not None and not all(
        callable(getattr(store, method, None)) for method in ("load", "save")
    ):
        msg = (
            "store must be a Store (async load() and save()), such as MemoryStore() or"
            f" SQLiteStore(path), or None; got {check.kind(store)}"
        )
        raise TypeError(msg)


def _checked_response(model: object, answer: object) -> ModelResponse:
    """The model's answer, or ModelError (the thread unchanged) when it is not a ModelResponse."""
    problem = None
    if not isinstance(answer, ModelResponse):
        problem = f"returned {check.kind(answer)} instead of a toolguard.ModelResponse"
    elif (text := getattr(answer, "text", None)) is not None and not isinstance(text, str):
        problem = f"returned a ModelResponse whose text is {check.kind(text)}, not a str"
    elif not isinstance(calls := getattr(answer, "tool_calls", None), list | tuple):
        problem = f"returned a ModelResponse whose tool_calls is {check.kind(calls)}, not a list"
    if problem is None:
        return answer  # type: ignore[return-value]  # checked just above
    msg = (
        f"{type(model).__name__}.complete {problem}: it must return"
        " ModelResponse(text=..., tool_calls=[...]). The thread is unchanged."
    )
    raise ModelError(msg)


class _Spender:
    """Spends standing grants on a turn's calls, in one compare-and-set save, before they run.

    The runner awaits :meth:`spend` before it runs anything. The uses and the
    ``granted`` events are saved at ``expected``; when the thread changed
    meanwhile only in its grants or audit trail (a revocation, a refusal),
    the spending is worked out again on the fresh state, so a use is never
    spent twice and a revoked grant is never used. Any other change raises
    ``ConcurrentUpdateError`` and nothing of the turn runs.
    """

    def __init__(self, chat: ReviewedChat, state: ThreadState, expected: int | None) -> None:
        self.chat = chat
        self.state = state
        self.expected = expected

    async def spend(self, calls: list[ToolCall]) -> set[str]:
        chat = self.chat
        while True:
            state = self.state
            grants, events, covered = grant_use.spend(
                state.thread_id,
                state.grants,
                calls,
                chat.toolset,
                chat.clock(),
                key=chat.runner.signing_key,
            )
            if not events:
                return covered
            try:
                saved = await chat._write(
                    state, self.expected, {"grants": grants, "audit": [*state.audit, *events]}
                )
            except ConcurrentUpdateError:
                fresh = await chat.store.load(state.thread_id)
                if (
                    self.expected is None
                    or fresh is None
                    or not grant_use.only_grants_changed(state, fresh)
                ):
                    raise
                self.state, self.expected = fresh, fresh.version
                continue
            self.state, self.expected = saved, saved.version
            return covered


class ReviewedChat:
    """A chat agent whose guarded tool calls wait for a human.

    Args:
        model: any :class:`~toolguard.ChatModel` (e.g.
            ``toolguard.openai.OpenAIChatModel``).
        tools: a toolset from :func:`~toolguard.guard`, or a list/mapping of
            functions and tools (classified with ``classifier``).
        store: where threads live; defaults to a :class:`~toolguard.MemoryStore`.
            Use :class:`~toolguard.SQLiteStore` (or ``toolguard.postgres.PostgresStore``)
            to survive restarts.
        system_prompt: the first message of every new thread.
        max_steps: most model calls per ``send_message``/``submit_review``.
        classifier: used when ``tools`` is not already a toolset.
        edit_policy: see :class:`~toolguard.Runner`.
        sync_in_thread: run sync tools in a worker thread.
        review_ttl: how long a review stays open (seconds or ``timedelta``);
            a tool's ``requires_approval(ttl=...)`` wins. ``None`` (default):
            no deadline.
        authorize: who may decide: called as ``authorize(reviewer, thread,
            actions)`` (sync or async) before any decision or cancellation is
            applied; return ``True`` to allow, ``False`` to refuse
            (``ReviewerNotAllowedError``, audited, nothing else changes).
            Fails closed: any other return value raises ``TypeError``, and an
            exception raised by the hook propagates unchanged; either way
            nothing is decided, run or recorded. ``None``: anyone may decide.
        access: who may see or continue a thread: called as ``access(actor,
            thread, operation)`` (sync or async) with ``operation`` one of
            ``"read"`` (:meth:`get_thread`), ``"audit"`` (:meth:`audit_trail`)
            and ``"message"`` (:meth:`send_message` to an existing thread);
            return ``False`` to refuse (``AccessDeniedError``, audited as
            ``refused``, nothing else changes). ``None``: anyone may.
            Both hooks get the chat's own state of the thread (shared with
            its cache and, in a ``MemoryStore``, with the stored head until it
            is read): read it, never change it.
        clock: the time source (tests pass a fake one).
        signing_key: secret for the digests binding approvals to the shown
            calls (see :class:`~toolguard.Runner`); keep it out of the store.
        result_templates: how results that are not a plain success read to
            the model (see :class:`~toolguard.ResultTemplates`; the default
            marks them, e.g. ``Rejected by the reviewer, not executed:
            <reason>``). The stored tool messages hold that text and keep
            ``status``.

        limits: how deep and large tool-call arguments and tool results may
            be (see :class:`~toolguard.Limits`); ``None``: ``Limits()``.
        notify: a :class:`~toolguard.Webhook` that gets ``review.requested``,
            ``review.decided``, ``review.expired`` and ``review.cancelled`` events. They are written
            to the thread's outbox in the same save as the event and sent by
            :meth:`deliver_notifications` (``toolguard serve`` runs it in the
            background; otherwise call it or :meth:`run_notifications`).
        store_secrets: ``True`` (the default): the store holds the real
            values of redacted arguments in the paused turn's calls and in
            the history's tool calls (reviews, audit and the HTTP views show
            ``REDACTED``). ``False``: the store holds ``REDACTED`` there too
            and the real values stay in this process's memory until the
            paused turn is decided or closed; a turn whose values are gone
            (a restart, another process) never runs its calls with the
            placeholder: they fail with ``SECRET_GONE``. The model then
            reads its own earlier calls with ``REDACTED`` values.

    Attributes:
        max_recorded_refusals: most ``refused`` audit events kept per review
            (default 20; set it on the class or an instance). Later refusals
            still raise ``ReviewerNotAllowedError`` but are not written, so a
            flood of refused attempts cannot grow a thread without bound.
    """

    max_recorded_refusals: int = 20

    def __init__(
        self,
        model: ChatModel,
        tools: Tools,
        *,
        store: Store | None = None,
        system_prompt: str | None = None,
        max_steps: int = 8,
        classifier: Classifier | None = None,
        edit_policy: EditPolicy = "run",
        sync_in_thread: bool = True,
        review_ttl: float | timedelta | None = None,
        authorize: Authorizer | None = None,
        access: AccessHook | None = None,
        clock: Callable[[], datetime] = utcnow,
        signing_key: bytes | None = None,
        result_templates: ResultTemplates | None = None,
        limits: Limits | None = None,
        notify: Webhook | None = None,
        store_secrets: bool = True,
    ) -> None:
        notify_arg: object = notify
        if notify_arg is not None and not isinstance(notify_arg, Webhook):
            msg = f"notify must be a toolguard.Webhook or None, got {check.kind(notify_arg)}"
            raise TypeError(msg)
        self.result_templates = check_templates(result_templates)
        check.positive_int(max_steps, "max_steps")
        _check_model(model)
        _check_store(store)
        check.optional_text(system_prompt, "system_prompt")
        check.callable_or_none(authorize, "authorize", "a function (reviewer, thread, actions)")
        check.callable_or_none(access, "access", "a function (actor, thread, operation)")
        self.model = model
        self.runner = Runner(
            tools,
            classifier=classifier,
            edit_policy=edit_policy,
            sync_in_thread=sync_in_thread,
            review_ttl=review_ttl,
            clock=clock,
            signing_key=signing_key,
            limits=limits,
        )
        self.toolset = self.runner.toolset
        self.store: Store = store if store is not None else MemoryStore()
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.authorize = authorize
        self.access = access
        self.clock = clock
        self.notify = notify
        self._outbox_hints: set[str] = set()
        # The last state this chat saved or read per thread (LRU), checked against the
        # stored version before use: only with a store that has ``load_version``.
        self._states: OrderedDict[str, ThreadState] = OrderedDict()
        self._outbox_scanned = False
        self._tool_schemas = self.toolset.openai_tools()
        # store_secrets=False: redacted values are stored as REDACTED, the real ones kept here.
        self.store_secrets = check.flag(store_secrets, "store_secrets")
        self._vault = None if self.store_secrets else SecretVault(self.toolset)

    # ------------------------------------------------------------------ reading

    async def get_thread(self, thread_id: str, *, actor: str | None = None) -> ThreadState:
        """The stored thread.

        Args:
            thread_id: the thread.
            actor: who asks, for the ``access`` hook (operation ``"read"``).

        Raises:
            TypeError: ``thread_id`` is not text.
            UnknownThreadError: no thread has that id.
            AccessDeniedError: the ``access`` hook refused ``actor``.
            CorruptThreadError: the stored thread cannot be read back.
        """
        state = await self._load(thread_id, fresh=True)
        await self._check_access(actor, state, "read")
        return state

    async def _load(self, thread_id: str, *, fresh: bool = False) -> ThreadState:
        """The stored thread; ``fresh``: a copy of its own for the caller (read from the store).

        Otherwise the chat's cached state of the thread when the store says it
        is still the stored version (one cheap version read), else the stored
        one (and it is cached). Cached states are never handed to users.
        """
        _text_arg(thread_id, "thread_id")
        if clean_text(thread_id) != thread_id:
            # Lone surrogates: no stored thread has such an id (and no database takes it).
            raise UnknownThreadError(thread_id)
        store = self.store
        incremental = not fresh and is_incremental(store)
        if incremental:
            cached = self._states.get(thread_id)
            if cached is not None:
                version = await store.load_version(thread_id)  # type: ignore[attr-defined]
                if version == cached.version:
                    self._states.move_to_end(thread_id)
                    return cached
                self._states.pop(thread_id, None)
        state = await store.load(thread_id)
        if state is None:
            raise UnknownThreadError(thread_id)
        if incremental:
            self._remember(state)
        return state

    def _remember(self, state: ThreadState) -> None:
        """Cache ``state`` as the thread's latest (bounded, least recently used goes)."""
        states = self._states
        states[state.thread_id] = state
        states.move_to_end(state.thread_id)
        if len(states) > _CACHED_THREADS:
            states.popitem(last=False)

    async def _write(
        self, state: ThreadState, expected: int | None, changes: dict[str, Any]
    ) -> ThreadState:
        """One compare-and-set save of ``state`` updated with ``changes``.

        With an incremental store only what changed is written (see
        :func:`_changes`), and the saved state is cached; otherwise the whole
        state (a store with only ``load`` and ``save``). A failed save drops the cache
        entry, so the next read goes to the store.
        """
        store = self.store
        try:
            if not is_incremental(store):
                return await store.save(with_fields(state, changes), expected_version=expected)
            # The stores toolguard ships take the next state as it will be stored (one copy).
            prepared = takes_prepared(store)
            new = (
                prepared_state(state, changes, expected)
                if prepared
                else with_fields(state, changes)
            )
            delta = Changes.whole(new) if expected is None else _changes(state, changes)
            incremental: PreparedStore = store  # type: ignore[assignment]
            if delta is None:
                saved = await incremental.save(new, expected_version=expected)
            elif prepared:
                saved = await incremental._save_prepared(new, delta, expected)
            else:
                saved = await incremental.save_changes(new, delta, expected_version=expected)
        except BaseException:
            self._states.pop(state.thread_id, None)
            raise
        mark_stored(saved)
        self._remember(saved)
        return saved

    async def audit_trail(self, thread_id: str, *, actor: str | None = None) -> list[AuditEvent]:
        """Every audit event of a thread, oldest first.

        Args:
            thread_id: the thread.
            actor: who asks, for the ``access`` hook (operation ``"audit"``).

        Raises:
            UnknownThreadError: no thread has that id.
            AccessDeniedError: the ``access`` hook refused ``actor``.
        """
        state = await self._load(thread_id, fresh=True)
        await self._check_access(actor, state, "audit")
        return list(state.audit)

    async def export_audit(self, thread_ids: Sequence[str] | None = None) -> str:
        """The audit trail as JSON lines, for the given threads or every stored one.

        Listing every thread needs a store with ``thread_ids()`` (all the
        stores toolguard ships have it). When listing, a thread that cannot
        be read back is skipped with a warning on the ``toolguard`` logger,
        so one damaged row never hides the others' trails.

        Raises:
            UnknownThreadError: a given thread id is unknown.
            CorruptThreadError: a given thread cannot be read back.
        """
        if thread_ids is not None:
            thread_ids = check.id_list(thread_ids, "thread_ids")
        listed = thread_ids is None
        if thread_ids is None:
            lister = getattr(self.store, "thread_ids", None)
            if lister is None:
                msg = f"{type(self.store).__name__} cannot list threads: pass thread_ids"
                raise TypeError(msg)
            thread_ids = await lister()
        events: list[AuditEvent] = []
        for thread_id in thread_ids:
            try:
                events.extend((await self._load(thread_id, fresh=True)).audit)
            except CorruptThreadError as exc:  # noqa: PERF203 - one damaged thread, not all
                if not listed:
                    raise
                _log.warning("export_audit skipped thread %r: %s", exc.thread_id, exc.reason)
        return to_jsonl(events)

    # ------------------------------------------------------------------ the entry points

    async def send_message(
        self, message: str, thread_id: str | None = None, *, actor: str | None = None
    ) -> ChatTurn:
        """Send a user message and run the agent until it answers or pauses.

        A review past its deadline is closed first (its actions ``expired``,
        the model told so), so the conversation can go on.

        Args:
            message: the user's text.
            thread_id: an existing thread, or ``None`` to start a new one.
            actor: who sends it, for the ``access`` hook (operation
                ``"message"``, asked for an existing thread only).

        Returns:
            The reply, or the pending review when a guarded call waits.

        Raises:
            ReviewPendingError: the thread has actions awaiting decisions.
            ThreadBusyError: decisions are being applied in the thread.
            UnknownThreadError: no thread has that id.
            AccessDeniedError: the ``access`` hook refused ``actor``.
            ModelError: the model failed; the thread keeps its last saved step.
            StepLimitError: the model kept calling tools for ``max_steps`` steps.
        """
        text: object = message  # checked at run time for untyped callers
        if not isinstance(text, str):
            msg = f"message must be text, got {type(text).__name__}"
            raise TypeError(msg)
        _text_arg(thread_id, "thread_id", optional=True)
        if thread_id is None:
            state = ThreadState(thread_id=new_id(), created_at=self.clock())
            if self.system_prompt:
                state.messages.append({"role": "system", "content": self.system_prompt})
            expected: int | None = None
        else:
            state = await self._load(thread_id)
            await self._check_access(actor, state, "message")
            if state.status == "awaiting_review" and self._is_overdue(state):
                state = await self._close(state, "expired")
            if state.status == "awaiting_review":
                raise ReviewPendingError
            if state.status == "running":
                raise ThreadBusyError(state.thread_id)
            expected = state.version
        messages = [*state.messages, {"role": "user", "content": clean_text(message)}]
        return await self._loop(state, expected, messages)

    async def submit_review(
        self,
        decisions: Any,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
    ) -> ChatTurn:
        """Answer the pending review of a thread and carry on.

        Checks, in order: the thread exists; a review is pending (and not
        past its deadline); ``review_id``, when given, names that review;
        the reviewer is authorized; then :func:`~toolguard.validate_decisions`.
        A refused call changes nothing (an authorization refusal is only
        audited). The review is then claimed with a compare-and-set save: if
        another submission claimed it first, this one gets
        ``NoPendingReviewError`` and runs nothing. A refused reviewer's audit
        event saved meanwhile does not count: the claim is made again on top
        of it.

        Deadlines are absolute: the deadline is checked again, with the
        chat's clock, after the hook and the validation, right before the
        claim, and the runner checks it again when each approved call starts
        (one that starts too late ends ``expired``; the model is told).

        Args:
            decisions: one decision per action, in order (wire dicts or models).
            thread_id: the thread whose review this answers.
            review_id: the review these decisions answer (``ChatTurn.review_id``);
                strongly recommended, so that a late decision never approves a
                newer request.
            reviewer: who decides, for the authorization hook and the audit
                trail: text, or an ``int`` / ``UUID`` (turned into text with
                ``str()``), or ``None``.

        Raises:
            TypeError: ``thread_id`` or ``review_id`` is not text, or
                ``reviewer`` is none of the above; nothing changed.
            UnknownThreadError: no thread has that id.
            NoPendingReviewError: nothing awaits a decision (or another
                submission got there first).
            StaleReviewError: ``review_id`` is not the current review.
            ReviewExpiredError: the review passed its deadline; its actions
                are now ``expired`` and the model will be told.
            ReviewerNotAllowedError: the authorization hook said no.
            InvalidReviewDecisionError: the decisions do not fit the review.
            ModelError: the model failed after the tools ran; their results
                are saved in the thread.
        """
        _text_arg(thread_id, "thread_id")
        _text_arg(review_id, "review_id", optional=True)
        reviewer = reviewer_id(reviewer)
        while True:
            state, pending = await self._current_review(thread_id, review_id)
            await self._check_reviewer(state, reviewer)
            if self._vault is not None:  # the real values of secrets, if this process has them
                pending = self._vault.restore(pending)
            parsed = validate_decisions(pending, decisions)
            self.runner.check_allowed(pending, parsed)  # the tools' own policies, before the claim
            parsed = self.runner._scrub_notes(pending, parsed)  # notes never quote a secret
            waiting = [a for a in pending.actions if a.status == "requested"]
            grant_use.check_grant_decisions(self.toolset, waiting, parsed)  # quorum, ask rules
            plan = quorum.plan(self.runner, pending, parsed, reviewer, state.thread_id)
            if plan.pending is None:
                break
            try:
                return await self._save_progress(state, plan, reviewer)
            except ConcurrentUpdateError:
                # Another submission saved first: redo every check on the fresh thread, bound
                # to the review read here, so both approvals count or this one gets a clean
                # error (never a lost approval, never an approval of arguments not shown).
                review_id = pending.review_id
        claimed = await self._claim(state, parsed, reviewer, plan)
        if self._vault is not None:
            self._vault.drop(pending.review_id)
        waiting = [a for a in pending.actions if a.status == "requested"]
        step = await self.runner._resume_checked(
            pending, waiting, parsed, claimed.thread_id, reviewer, plan=plan
        )
        step = _with_reviewer(step, reviewer)
        return await self._loop(claimed, claimed.version, list(claimed.messages), step)

    async def cancel_review(
        self,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
        reason: str | None = None,
    ) -> ChatTurn:
        """Cancel the pending review: no action runs, the model is told why.

        Cancelled is its own outcome, distinct from rejected and expired. The
        thread becomes idle and can go on with a new message.

        Raises:
            TypeError: as for :meth:`submit_review`, or ``reason`` is not text or ``None``.
            UnknownThreadError: as for :meth:`submit_review`.
            NoPendingReviewError: as for :meth:`submit_review`.
            StaleReviewError: as for :meth:`submit_review`.
            ReviewExpiredError: as for :meth:`submit_review`.
            ReviewerNotAllowedError: as for :meth:`submit_review`.
        """
        _text_arg(thread_id, "thread_id")
        _text_arg(review_id, "review_id", optional=True)
        _text_arg(reason, "reason", optional=True)
        reviewer = reviewer_id(reviewer)
        state, pending = await self._current_review(thread_id, review_id)
        await self._check_reviewer(state, reviewer)
        closed_id = pending.review_id
        state = await self._close(state, "cancelled", reason=reason, actor=reviewer)
        closed = [a for a in state.actions if a.status == "cancelled"]
        return ChatTurn(thread_id=state.thread_id, review_id=closed_id, actions=closed)

    async def expire_overdue(self, thread_id: str) -> bool:
        """Close the thread's review if it is past its deadline; return whether it was.

        Reviews are also expired on the next ``send_message`` or
        ``submit_review``; call this from a periodic job to close them sooner.
        """
        state = await self._load(thread_id)
        if state.status == "awaiting_review" and self._is_overdue(state):
            await self._close(state, "expired")
            return True
        return False

    async def recover(self, thread_id: str) -> bool:
        """Finish a thread whose process died while applying decisions.

        At most once: approved or edited actions that had no result when the
        process stopped end ``failed`` with a result telling the model their
        outcome is unknown — they are never run again. Rejected actions end
        as decided. Returns whether there was anything to recover.

        Call it at start-up for the threads a crashed process left
        ``running``, or when ``ThreadBusyError`` persists. Do not call it
        while another live process is still applying the decisions.
        """
        state = await self._load(thread_id)
        if state.status != "running" or state.pending is None:
            return False
        step = interrupted_turn(state.pending, state.decisions or [], self.clock())
        # Keep who decided and when (the claim recorded them in state.actions).
        claimed = {a.id: a for a in state.actions}
        step = dataclasses.replace(
            step,
            actions=[
                a.model_copy(
                    update={
                        "reviewer": claimed[a.id].reviewer,
                        "decided_at": claimed[a.id].decided_at or a.decided_at,
                    }
                )
                if a.id in claimed
                else a
                for a in step.actions
            ],
        )
        now = self.clock()
        review_id = state.pending.review_id
        events = [
            final_event(
                state.thread_id,
                review_id,
                a,
                "interrupted" if a.status == "failed" else _ENDED[a.status],
                now,
            )
            for a in step.actions
        ]
        await self._end_turn(state, step, step.actions, events)
        return True

    async def running_threads(self) -> list[str]:
        """Ids of the stored threads left ``running`` (candidates for :meth:`recover`).

        A thread that cannot be read back is skipped with a warning on the
        ``toolguard`` logger (see :class:`~toolguard.CorruptThreadError`).
        """
        lister = getattr(self.store, "thread_ids", None)
        if lister is None:
            msg = f"{type(self.store).__name__} cannot list threads"
            raise TypeError(msg)
        found = []
        for thread_id in await lister():
            try:
                state = await self.store.load(thread_id)
            except CorruptThreadError as exc:
                _log.warning("running_threads skipped thread %r: %s", exc.thread_id, exc.reason)
                continue
            if state is not None and state.status == "running":
                found.append(thread_id)
        return found

    # ------------------------------------------------------------------ internals

    async def _current_review(
        self, thread_id: str, review_id: str | None
    ) -> tuple[ThreadState, PendingTurn]:
        """The thread and its pending review, after the deadline and binding checks."""
        state = await self._load(thread_id)
        if state.status == "awaiting_review" and self._is_overdue(state):
            await self._close(state, "expired")
            raise ReviewExpiredError(state.review_id or "")
        if state.status != "awaiting_review" or state.pending is None:
            if review_id is not None:
                raise _stale(state, review_id, None)
            raise NoPendingReviewError
        if review_id is not None and review_id != state.pending.review_id:
            raise _stale(state, review_id, state.pending.review_id)
        return state, state.pending

    def _is_overdue(self, state: ThreadState) -> bool:
        deadline = state.pending.expires_at if state.pending is not None else None
        return deadline is not None and self.clock() >= deadline

    async def _authorized(
        self, reviewer: str | None, state: ThreadState, actions: list[Action]
    ) -> bool:
        """The ``authorize`` hook's verdict (awaited if async); ``TypeError`` unless a bool."""
        assert self.authorize is not None  # noqa: S101 - callers check
        verdict: object = self.authorize(reviewer, state, actions)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True or verdict is False:
            return verdict
        msg = f"the authorize hook must return True or False, got {type(verdict).__name__}"
        raise TypeError(msg)

    async def _check_reviewer(self, state: ThreadState, reviewer: str | None) -> None:
        """Ask the ``authorize`` hook; record and raise a refusal. Fails closed.

        ``True`` allows; ``False`` refuses (audited, ``ReviewerNotAllowedError``);
        anything else raises ``TypeError``, and an exception from the hook
        propagates: neither changes anything.
        """
        if self.authorize is None or state.pending is None:
            return
        waiting = [a for a in state.pending.actions if a.status == "requested"]
        if await self._authorized(reviewer, state, waiting):
            return
        event = AuditEvent(
            at=self.clock(),
            kind="refused",
            thread_id=state.thread_id,
            review_id=state.pending.review_id,
            actor=reviewer,
            detail=REFUSED_DETAIL,
        )
        await self._record_refusal(state, event)
        raise ReviewerNotAllowedError(reviewer, state.thread_id)

    async def _record_refusal(self, state: ThreadState, event: AuditEvent) -> None:
        """Append a ``refused`` event to the thread's audit trail, within bounds.

        At most :attr:`max_recorded_refusals` refused events are kept per
        review (those outside a review count together); the last one kept says
        that later ones are not recorded, and later ones write nothing. The
        save is a compare-and-set on ``state``: when the thread changed since
        it was read, the refusal is not recorded (the concurrent save wins).
        Claims and other saves of the chat redo their save on top of a
        concurrent refusal (:func:`_only_refusals_added`), so recording a
        refusal never makes an authorized reviewer's submission fail; the cap
        bounds how often they redo it.
        """
        review = state.review_id
        kept = sum(1 for e in state.audit if e.kind == "refused" and e.review_id == review)
        limit = self.max_recorded_refusals
        if kept >= limit:
            return
        if kept == limit - 1:
            detail = (
                f"{event.detail or REFUSED_DETAIL}; later refusals for this review are not recorded"
            )
            event = event.model_copy(update={"review_id": review, "detail": detail})
        elif event.review_id != review:
            event = event.model_copy(update={"review_id": review})
        with contextlib.suppress(ConcurrentUpdateError):
            await self._save(state, state.version, audit=[*state.audit, event])

    async def _save_progress(
        self, state: ThreadState, plan: quorum.QuorumPlan, reviewer: str | None
    ) -> ChatTurn:
        """Save a submission that leaves a quorum incomplete (one compare-and-set save).

        The review stays pending with the progress; each decision is audited
        as a ``vote`` event, and a request an edit restarted gets its
        ``requested`` event (and ``review.requested`` webhook).

        Raises:
            ConcurrentUpdateError: the thread changed since ``state`` was read.
        """
        assert state.pending is not None  # noqa: S101 - checked by the caller
        assert plan.pending is not None  # noqa: S101 - checked by the caller
        now = self.clock()
        known = {a.id for a in state.pending.actions}
        new_review = plan.pending.review_id
        events = [
            *quorum.vote_events(
                state.thread_id, state.pending.review_id, plan.votes, reviewer, now
            ),
            *(
                requested_event(state.thread_id, new_review, a)
                for a in plan.pending.actions
                if a.id not in known
            ),
        ]
        old_review = state.pending.review_id
        # store_secrets=False: the paused turn is stored with REDACTED, its secrets kept here.
        pending = plan.pending if self._vault is None else self._vault.stash(plan.pending)
        try:
            saved = await self._save(
                state,
                state.version,
                pending=pending,
                actions=_merge(state.actions, plan.touched),
                audit=[*state.audit, *events],
            )
        except ConcurrentUpdateError:
            if self._vault is not None and new_review != old_review:
                self._vault.drop(new_review)
            raise
        if self._vault is not None and new_review != old_review:
            self._vault.drop(old_review)
        return ChatTurn(
            thread_id=saved.thread_id,
            pending_review=plan.pending.pending_review,
            review_id=new_review,
            actions=plan.touched,
        )

    async def _claim(
        self,
        state: ThreadState,
        parsed: list[AnyDecision],
        reviewer: str | None,
        plan: quorum.QuorumPlan | None = None,
    ) -> ThreadState:
        """Claim the pending review for ``parsed`` with a compare-and-set save.

        The deadline is checked right before every attempt, with the chat's
        clock. A concurrent save that only added ``refused`` events is not a
        competing claim: the claim is made again on the fresh state.
        """
        while True:
            if self._is_overdue(state):
                await self._close(state, "expired")
                raise ReviewExpiredError(state.review_id or "")
            assert state.pending is not None  # noqa: S101 - checked by _current_review
            now = self.clock()
            waiting = [a for a in state.pending.actions if a.status == "requested"]
            decided = [
                _decided_action(
                    action, shown_decision(decision, self.runner.toolset), reviewer, now
                )
                for action, decision in zip(waiting, parsed, strict=True)
            ]
            votes: list[AuditEvent] = []
            if plan is not None and plan.votes:
                # A quorum review settles: one vote for this submission's decisions, then
                # the decided events of every action (those settled earlier keep their
                # reviewer and time).
                review = state.pending.review_id
                votes = quorum.vote_events(state.thread_id, review, plan.votes, reviewer, now)
                decided = [quorum.shown_action(self.runner, action) for action, _ in plan.pairs]
            events = [
                *votes,
                *(
                    _decided_event(
                        state.thread_id,
                        state.pending.review_id,
                        action,
                        action.reviewer,
                        action.decided_at or now,
                    )
                    for action in decided
                ),
            ]
            made, made_events = grant_use.made_grants(
                state.thread_id,
                state.pending.review_id,
                decided,
                reviewer,
                now,
                key=self.runner.signing_key,
            )
            try:
                return await self._save(
                    state,
                    state.version,
                    status="running",
                    decisions=(
                        parsed
                        if self._vault is None
                        else [shown_decision(d, self.toolset) for d in parsed]
                    ),
                    actions=_merge(state.actions, decided),
                    audit=[*state.audit, *events, *made_events],
                    grants=[*state.grants, *made],
                )
            except ConcurrentUpdateError:
                fresh = await self.store.load(state.thread_id)
                refusals = fresh is not None and _only_refusals_added(state, fresh)
                if fresh is None or not (refusals or grant_use.only_grants_changed(state, fresh)):
                    raise NoPendingReviewError from None
                state = fresh

    async def _check_access(
        self, actor: str | None, state: ThreadState, operation: AccessOperation
    ) -> None:
        """Ask the ``access`` hook; a refusal is audited (capped) and raises AccessDeniedError."""
        actor = reviewer_id(actor, "actor")
        if self.access is None:
            return
        verdict: object = self.access(actor, state, operation)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True:
            return
        if verdict is not False:
            # Fails closed, like the authorize hook: nothing is read, changed or recorded.
            msg = f"the access hook must return True or False, got {type(verdict).__name__}"
            raise TypeError(msg)
        detail = f"the access hook refused the operation {operation!r}"
        trailing = 0
        for past in reversed(state.audit):
            if past.kind != "refused" or trailing >= _REFUSALS_IN_A_ROW:
                break
            trailing += 1
        last = state.audit[-1] if state.audit else None
        repeated = last is not None and (last.kind, last.actor, last.detail) == (
            "refused",
            actor,
            detail,
        )
        # Not while decisions are applied: recording would make that run's own save fail.
        if not repeated and trailing < _REFUSALS_IN_A_ROW and state.status != "running":
            event = AuditEvent(
                at=self.clock(),
                kind="refused",
                thread_id=state.thread_id,
                review_id=state.review_id,
                actor=actor,
                detail=detail,
            )
            with contextlib.suppress(ConcurrentUpdateError):
                # Only the audit trail changes; a concurrent save wins and keeps its state.
                await self._save(state, state.version, audit=[*state.audit, event])
        raise AccessDeniedError(actor, state.thread_id, operation)

    async def _close(
        self,
        state: ThreadState,
        outcome: CloseOutcome,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> ThreadState:
        assert state.pending is not None  # noqa: S101 - callers check awaiting_review
        now = self.clock()
        step = close_turn(state.pending, outcome, reason, now)
        if self._vault is not None:
            self._vault.drop(state.pending.review_id)
        closed = [
            a if a.status in _ENDED else a.model_copy(update={"reviewer": actor})
            for a in step.actions
        ]
        events = [
            final_event(
                state.thread_id,
                state.pending.review_id,
                a,
                _ENDED.get(a.status, outcome),  # settled before a quorum closed: as decided
                now,
            )
            for a in closed
        ]
        try:
            return await self._end_turn(state, step, closed, events)
        except ConcurrentUpdateError:
            raise NoPendingReviewError from None

    async def _end_turn(
        self, state: ThreadState, step: Step, actions: list[Action], events: list[AuditEvent]
    ) -> ThreadState:
        """Save a paused turn as finished without running anything: the model reads the results."""
        messages = _rewrite_last_assistant(list(state.messages), step.calls)
        messages.extend(tool_message(r, self.result_templates) for r in step.results)
        return await self._save(
            state,
            state.version,
            messages=messages,
            status="idle",
            pending=None,
            decisions=None,
            actions=_merge(state.actions, actions),
            audit=[*state.audit, *events],
        )

    async def _complete(self, messages: list[Message]) -> ModelResponse:
        answer: Any = self.model.complete(messages, self._tool_schemas)
        if inspect.isawaitable(answer):
            answer = await answer
        return _checked_response(self.model, answer)

    async def _save(self, state: ThreadState, expected: int | None, **changes: Any) -> ThreadState:
        """Compare-and-set save of ``state`` with ``changes``.

        A concurrent save that only appended ``refused`` audit events (a
        refused reviewer or reader) is not a competing change: the save is
        made again on top of it, keeping those events, so a refusal can never
        make this save fail. Any other concurrent change raises
        ``ConcurrentUpdateError``. The refusal caps bound the retries.
        A concurrent change of the webhook outbox (a delivery recorded) is
        treated the same way. With ``notify``, the notifications for the
        review events this save records go into the outbox in this save.
        """
        items: list[OutboxItem] = []
        if self.notify is not None and "audit" in changes:
            added = changes["audit"][len(state.audit) :]
            items = review_items(state.thread_id, added, changes, self.clock())
        while True:
            if items:
                changes = {**changes, "outbox": [*state.outbox, *items]}
            try:
                saved = await self._write(state, expected, changes)
            except ConcurrentUpdateError:
                if expected is None or expected != state.version:
                    raise
                fresh = await self.store.load(state.thread_id)
                if fresh is None or not (
                    _only_refusals_added(state, fresh)
                    or ("grants" not in changes and grant_use.only_grants_changed(state, fresh))
                ):
                    raise
                if "audit" in changes:
                    added = changes["audit"][len(state.audit) :]
                    changes = {**changes, "audit": [*fresh.audit, *added]}
                state, expected = fresh, fresh.version
            else:
                if items:
                    self._outbox_hints.add(saved.thread_id)
                return saved

    async def _loop(
        self,
        state: ThreadState,
        expected: int | None,
        messages: list[Message],
        step: Step | None = None,
    ) -> ChatTurn:
        touched: list[Action] = []
        model_calls = 0
        while True:
            if step is None:
                if model_calls >= self.max_steps:
                    msg = (
                        f"The model called tools for {self.max_steps} steps without answering;"
                        " the thread is saved and can go on with a new message."
                    )
                    raise StepLimitError(msg)
                response = await self._complete(messages)
                model_calls += 1
                if not response.tool_calls:
                    reply: str = clean_text(response.text or "")
                    messages.append({"role": "assistant", "content": reply})
                    state = await self._save(
                        state,
                        expected,
                        messages=messages,
                        status="idle",
                        pending=None,
                        decisions=None,
                    )
                    return ChatTurn(thread_id=state.thread_id, reply=reply, actions=touched)
                spender = _Spender(self, state, expected) if state.grants else None
                step = await self.runner.run(
                    response.tool_calls,
                    thread_id=state.thread_id,
                    grants=spender.spend if spender is not None else None,
                )
                if spender is not None:
                    state, expected = spender.state, spender.expected
                messages.append(
                    assistant_message(clean_text(response.text), self._kept(step.calls))
                )
                review_id = step.pending.review_id if step.pending else None
                fresh = True
            else:
                # Resumed: the paused turn's assistant message now records the calls as
                # they stand, edits included, so the history shows what really ran. Without
                # edits they are the calls it was written with at the pause.
                if step.replaced_calls:
                    messages = _rewrite_last_assistant(messages, self._kept(step.calls))
                review_id = state.pending.review_id if state.pending else None
                fresh = False
            touched = _merge(touched, step.actions)
            # A fresh step's actions are new: the runner just gave them their ids.
            actions = (
                [*state.actions, *step.actions] if fresh else _merge(state.actions, step.actions)
            )
            events = self._step_events(state.thread_id, review_id, step, fresh=fresh)
            audit = [*state.audit, *events]
            if step.pending is not None:
                state = await self._save(
                    state,
                    expected,
                    messages=messages,
                    status="awaiting_review",
                    pending=step.pending
                    if self._vault is None
                    else self._vault.stash(step.pending),
                    decisions=None,
                    actions=actions,
                    audit=audit,
                )
                return ChatTurn(
                    thread_id=state.thread_id,
                    pending_review=step.pending.pending_review,
                    review_id=step.pending.review_id,
                    actions=touched,
                )
            messages.extend(tool_message(r, self.result_templates) for r in step.results)
            state = await self._save(
                state,
                expected,
                messages=messages,
                status="idle",
                pending=None,
                decisions=None,
                actions=actions,
                audit=audit,
            )
            expected = state.version
            messages = list(messages)  # the saved state keeps its own list (compared on retries)
            step = None

    def _kept(self, calls: list[ToolCall]) -> list[ToolCall]:
        """The calls as the history stores them (secrets replaced with ``store_secrets=False``)."""
        return calls if self._vault is None else self._vault.shown_calls(calls)

    def _step_events(
        self, thread_id: str, review_id: str | None, step: Step, *, fresh: bool
    ) -> list[AuditEvent]:
        """The audit events of a step; ``fresh``: the step ran the model's calls just now."""
        now = self.clock()
        events: list[AuditEvent] = []
        calls = {c.id: c for c in step.calls} if fresh else {}
        for result in step.results:
            if result.outcome == "denied" and result.call_id in calls:
                # A deny rule refused the call: nobody was asked, so no action; audit it here.
                call = calls[result.call_id]
                events.append(
                    AuditEvent(
                        at=now,
                        kind="denied",
                        thread_id=thread_id,
                        tool=call.name,
                        args=shown_call_args(call, self.runner.toolset),
                        detail=result.content,
                    )
                )
        for action in step.actions:
            if action.status == "requested":
                new_review = step.pending.review_id if step.pending else review_id
                events.append(requested_event(thread_id, new_review or "", action))
            elif action.status in ("executed", "failed", "rejected", "expired", "responded"):
                # An approved or edited call a deny rule refused ends with a ``denied`` event.
                denied = action.result is not None and action.result.outcome == "denied"
                kind: AuditKind = "denied" if denied else action.status
                events.append(final_event(thread_id, review_id, action, kind, now))
        return events

    # ------------------------------------------------------------------ standing grants

    async def revoke_grant(
        self,
        thread_id: str,
        grant_id: str,
        *,
        reviewer: str | int | UUID | None = None,
    ) -> StandingGrant:
        """End a standing grant of a thread now: later matching calls are reviewed again.

        Revoking is a decision: the ``authorize`` hook is asked as for a
        review (``authorize(reviewer, thread, [the action whose approve made
        the grant])``); a refusal is audited and changes nothing else. The
        revocation is saved with a compare-and-set save and audited as
        ``grant_revoked``. A call already running under the grant finishes.

        Args:
            thread_id: the thread.
            grant_id: the grant's ``id`` (see ``ThreadState.grants``).
            reviewer: who revokes, as for :meth:`submit_review`.

        Returns:
            The grant as revoked.

        Raises:
            TypeError: ``thread_id`` or ``grant_id`` is not text, or ``reviewer``
                is not an identity.
            UnknownThreadError: no thread has that id.
            UnknownGrantError: the thread has no such grant, or it is no
                longer active (revoked already, used up or expired).
            ReviewerNotAllowedError: the authorization hook said no.
        """
        _text_arg(thread_id, "thread_id")
        _text_arg(grant_id, "grant_id")
        who = reviewer_id(reviewer)
        while True:
            state = await self._load(thread_id)
            now = self.clock()
            grant = next((g for g in state.grants if g.id == grant_id), None)
            if grant is None:
                raise UnknownGrantError(clean_text(grant_id), thread_id)
            status = grant.status_at(now)
            if status != "active":
                raise UnknownGrantError(grant_id, thread_id, status)
            await self._check_grant_reviewer(state, who, grant)
            revoked, event = grant_use.revoke(thread_id, grant, who, now)
            try:
                await self._save(
                    state,
                    state.version,
                    grants=grant_use.replaced(state.grants, revoked),
                    audit=[*state.audit, event],
                )
            except ConcurrentUpdateError:
                continue  # changed meanwhile: look again (it may be used up or revoked now)
            return revoked

    async def _check_grant_reviewer(
        self, state: ThreadState, reviewer: str | None, grant: StandingGrant
    ) -> None:
        """Ask the ``authorize`` hook about a grant's revocation; fails closed like a review."""
        if self.authorize is None:
            return
        actions = [a for a in state.actions if a.id == grant.action_id]
        if await self._authorized(reviewer, state, actions):
            return
        event = AuditEvent(
            at=self.clock(),
            kind="refused",
            thread_id=state.thread_id,
            review_id=state.review_id,
            actor=reviewer,
            detail=f"{REFUSED_DETAIL} (revoking grant {grant.id})",
        )
        await self._record_refusal(state, event)
        raise ReviewerNotAllowedError(reviewer, state.thread_id)

    # ------------------------------------------------------------------ webhook notifications

    async def deliver_notifications(self) -> int:
        """Send the due webhook notifications once; returns how many were delivered.

        The first call (and every call after :meth:`run_notifications`'
        rescans) looks at every stored thread, so notifications a crashed
        process left in the outbox go out; later calls look at the threads
        this chat saved notifications for. Per thread, notifications go out
        in order: a failed one is retried after the :class:`~toolguard.Webhook`'s
        backoff and holds back the later ones. Each is leased with a
        compare-and-set save before it is sent (so two processes do not both
        send it) and removed after a 2xx answer. A crash between that answer
        and the removal sends it again later: delivery is at least once, and
        receivers dedupe by the body's ``id``.
        """
        if self.notify is None:
            return 0
        if not self._outbox_scanned:
            lister = getattr(self.store, "thread_ids", None)
            if lister is not None:
                self._outbox_hints.update(await lister())
            self._outbox_scanned = True
        delivered = 0
        for thread_id in sorted(self._outbox_hints):
            self._outbox_hints.discard(thread_id)
            try:
                done, left = await self._deliver_thread(self.notify, thread_id)
            except CorruptThreadError as exc:
                _log.warning("notifications skipped thread %r: %s", exc.thread_id, exc.reason)
                continue
            delivered += done
            if left:
                self._outbox_hints.add(thread_id)
        return delivered

    async def run_notifications(self, *, interval: float = 1.0, rescan: float = 60.0) -> None:
        """Call :meth:`deliver_notifications` every ``interval`` seconds, until cancelled.

        Every ``rescan`` seconds it looks at every stored thread again (for
        notifications other processes left behind). A failing pass is logged
        on the ``toolguard`` logger and the loop goes on.
        """
        waited = 0.0
        while True:
            try:
                await self.deliver_notifications()
            except Exception:  # a down database must not end the loop
                _log.exception("webhook delivery pass failed")
            await anyio.sleep(interval)
            waited += interval
            if waited >= rescan:
                waited = 0.0
                self._outbox_scanned = False

    async def _deliver_thread(self, webhook: Webhook, thread_id: str) -> tuple[int, bool]:
        """Deliver one thread's due notifications: (how many were delivered, any left)."""
        delivered = 0
        while True:
            state = await self.store.load(thread_id)
            if state is None or not state.outbox:
                return delivered, False
            item = state.outbox[0]
            now = self.clock()
            if item.next_attempt_at is not None and item.next_attempt_at > now:
                return delivered, True
            lease = now + timedelta(seconds=webhook.timeout * 2 + 5)
            leased = item.model_copy(update={"next_attempt_at": lease})
            try:
                state = await self._save_outbox(state, item.id, leased)
            except ConcurrentUpdateError:
                continue  # changed meanwhile: look again
            error = await webhook.send(item)
            if error is None:
                delivered += 1
                await self._outbox_update(thread_id, item.id, None)
                continue
            attempts = item.attempts + 1
            failed = item.model_copy(
                update={
                    "attempts": attempts,
                    "next_attempt_at": self.clock() + webhook.delay(attempts),
                    "last_error": error,
                }
            )
            _log.warning(
                "webhook %s for thread %r failed (%s); attempt %d, retried later",
                item.body.get("event"),
                thread_id,
                error,
                attempts,
            )
            await self._outbox_update(thread_id, item.id, failed)
            return delivered, True

    async def _save_outbox(
        self, state: ThreadState, item_id: str, replacement: OutboxItem | None
    ) -> ThreadState:
        """Replace (or, with ``None``, remove) one outbox item: one compare-and-set save."""
        outbox = [
            replacement if i.id == item_id else i
            for i in state.outbox
            if i.id != item_id or replacement is not None
        ]
        return await self._write(state, state.version, {"outbox": outbox})

    async def _outbox_update(
        self, thread_id: str, item_id: str, replacement: OutboxItem | None
    ) -> None:
        """:meth:`_save_outbox` on the latest state, redone over concurrent saves."""
        while True:
            state = await self.store.load(thread_id)
            if state is None or all(i.id != item_id for i in state.outbox):
                return
            try:
                await self._save_outbox(state, item_id, replacement)
            except ConcurrentUpdateError:
                continue
            return

    # ------------------------------------------------------------------ without an event loop

    @contextmanager
    def blocking(self) -> Iterator[BlockingChat]:
        """Use the chat from code without an event loop.

        ::

            with chat.blocking() as session:
                turn = session.send_message("Mail Alice that the meeting moved")
                if turn.pending_review:
                    turn = session.submit_review([{"type": "approve"}], turn.thread_id)

        One event loop runs in a helper thread for the whole block, so model
        clients that keep connections (like ``openai.AsyncOpenAI``) work.
        """
        with start_blocking_portal() as portal:
            yield BlockingChat(self, portal)


class BlockingChat:
    """The synchronous face of a :class:`ReviewedChat` (see :meth:`ReviewedChat.blocking`)."""

    def __init__(self, chat: ReviewedChat, portal: BlockingPortal) -> None:
        self._chat = chat
        self._portal = portal

    def send_message(
        self, message: str, thread_id: str | None = None, *, actor: str | None = None
    ) -> ChatTurn:
        """Blocking :meth:`ReviewedChat.send_message`."""
        turn: ChatTurn = self._portal.call(
            functools.partial(self._chat.send_message, message, thread_id, actor=actor)
        )
        return turn

    def submit_review(
        self,
        decisions: Any,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
    ) -> ChatTurn:
        """Blocking :meth:`ReviewedChat.submit_review`."""
        turn: ChatTurn = self._portal.call(
            functools.partial(
                self._chat.submit_review,
                decisions,
                thread_id,
                review_id=review_id,
                reviewer=reviewer,
            )
        )
        return turn

    def cancel_review(
        self,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
        reason: str | None = None,
    ) -> ChatTurn:
        """Blocking :meth:`ReviewedChat.cancel_review`."""
        turn: ChatTurn = self._portal.call(
            functools.partial(
                self._chat.cancel_review,
                thread_id,
                review_id=review_id,
                reviewer=reviewer,
                reason=reason,
            )
        )
        return turn

    def revoke_grant(
        self, thread_id: str, grant_id: str, *, reviewer: str | int | UUID | None = None
    ) -> StandingGrant:
        """Blocking :meth:`ReviewedChat.revoke_grant`."""
        grant: StandingGrant = self._portal.call(
            functools.partial(self._chat.revoke_grant, thread_id, grant_id, reviewer=reviewer)
        )
        return grant

    def recover(self, thread_id: str) -> bool:
        """Blocking :meth:`ReviewedChat.recover`."""
        done: bool = self._portal.call(self._chat.recover, thread_id)
        return done

    def get_thread(self, thread_id: str, *, actor: str | None = None) -> ThreadState:
        """Blocking :meth:`ReviewedChat.get_thread`."""
        state: ThreadState = self._portal.call(
            functools.partial(self._chat.get_thread, thread_id, actor=actor)
        )
        return state

    def audit_trail(self, thread_id: str, *, actor: str | None = None) -> list[AuditEvent]:
        """Blocking :meth:`ReviewedChat.audit_trail`."""
        events: list[AuditEvent] = self._portal.call(
            functools.partial(self._chat.audit_trail, thread_id, actor=actor)
        )
        return events


ReviewedChatUseCase = ReviewedChat
"""The seed's name for :class:`ReviewedChat`."""
