"""The chat use case: a complete agent loop with human review and durable state.

:class:`ReviewedChat` drives any :class:`~toolguard.ChatModel`: model →
tool calls → run or pause → … until the model answers with text. A pause
stores the thread and returns the ``pending_review``; :meth:`submit_review`
validates the decisions, claims the review with a compare-and-set save (so
racing submissions run the approved tools once), applies the decisions and
carries on. The thread is saved after every step, so another process with
the same store can pick it up.

The class orchestrates the parts that do the work: :mod:`.turns` (the turn
loop), :mod:`.reviews` (finding, claiming and closing a review, quorum
progress), :mod:`.threads` (reads, incremental writes, conflict retries),
:mod:`.access` (the ``authorize`` and ``access`` hooks) and
:mod:`.notifications` (webhook delivery).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, ClassVar, NamedTuple
from uuid import UUID

from anyio.from_thread import BlockingPortal, start_blocking_portal

from toolguard._chat.access import AccessGate, AccessHook, Authorizer, reviewer_id
from toolguard._chat.history import with_reviewer
from toolguard._chat.notifications import Notifications
from toolguard._chat.reminders import check_remind_after
from toolguard._chat.reviews import Reviews
from toolguard._chat.threads import Save, Threads, no_save, retry_on_conflict, text_arg
from toolguard._chat.turns import ChatTurn, TurnLoop, check_model
from toolguard._core import checks as check
from toolguard._core.audit import AuditEvent, to_jsonl
from toolguard._core.errors import (
    ConcurrentUpdateError,
    CorruptThreadError,
    ReviewPendingError,
    ThreadBusyError,
    UnknownGrantError,
)
from toolguard._core.jsonable import clean_text
from toolguard._core.limits import Limits
from toolguard._core.llm import ChatModel
from toolguard._core.records import PendingTurn, new_id, utcnow
from toolguard._core.results import ResultTemplates, check_templates
from toolguard._core.standing import GrantScope, StandingGrant
from toolguard._enforce import grant_use, pipeline
from toolguard._enforce.judge import Judge
from toolguard._enforce.runner import EditPolicy, Runner
from toolguard._enforce.shadow import Candidate, ShadowMode
from toolguard._notify.channels import Notify, check_notify
from toolguard._policy.redact import SecretVault
from toolguard._stores.memory import MemoryStore
from toolguard._stores.protocol import Store, ThreadState
from toolguard._tools.classify import Classifier
from toolguard._tools.toolset import Tools

_log = logging.getLogger("toolguard")


def _check_store(store: object) -> None:
    if store is not None and not all(
        callable(getattr(store, method, None)) for method in ("load", "save")
    ):
        msg = (
            "store must be a Store (async load() and save()), such as MemoryStore() or"
            f" SQLiteStore(path), or None; got {check.kind(store)}"
        )
        raise TypeError(msg)


class _Claim(NamedTuple):
    """A submission that settles its review: what the claim saves and the runner resumes."""

    state: ThreadState
    pending: PendingTurn
    submission: pipeline.Submission


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
            the model (see :class:`~toolguard.text.ResultTemplates`; the default
            marks them, e.g. ``Rejected by the reviewer, not executed:
            <reason>``). The stored tool messages hold that text and keep
            ``status``.

        limits: how deep and large tool-call arguments and tool results may
            be (see :class:`~toolguard.Limits`); ``None``: ``Limits()``.
        notify: a :class:`~toolguard.Webhook` that gets ``review.requested``,
            ``review.decided``, ``review.expired`` and ``review.cancelled`` events, a
            :class:`~toolguard.notify.Slack` channel, an :class:`~toolguard.notify.Email`
            one, or a list of them (one of each at most). They are written
            to the thread's outbox in the same save as the event and sent by
            :meth:`deliver_notifications` (``toolguard serve`` runs it in the
            background; otherwise call it or :meth:`run_notifications`).
        remind_after: with ``notify``, re-notify every channel of a review still
            waiting after this many seconds (or a ``timedelta``), once per interval, until
            it is decided or expires (``review.reminder``). ``None`` (default): never.
        store_secrets: ``True`` (the default): the store holds the real
            values of redacted arguments in the paused turn's calls and in
            the history's tool calls (reviews, audit and the HTTP views show
            ``REDACTED``). ``False``: the store holds ``REDACTED`` there too
            and the real values stay in this process's memory until the
            paused turn is decided or closed; a turn whose values are gone
            (a restart, another process) never runs its calls with the
            placeholder: they fail with ``SECRET_GONE``. The model then
            reads its own earlier calls with ``REDACTED`` values.
        judge: a :class:`~toolguard.Judge`: a model's second opinion on the
            calls (see docs/judge.md). It reads the person's own messages of
            the thread and the proposed call, never tool results; each
            verdict is a ``judged`` audit event. ``None`` (the default): no
            judge.
        shadow: shadow mode (see "Shadow mode" in docs/policies.md):
            ``True`` runs at once every call that would wait for a person,
            each with a ``shadow`` audit event (``would`` ``"ask"``, the
            rule or policy that would have asked, the judge's verdict) and a
            ``review.shadow`` notification; deny rules still refuse.
            ``"all"``: calls a deny rule refuses run too (``would``
            ``"deny"``). ``False`` (the default): enforce.
        candidate: a :class:`~toolguard.Candidate` (other rules and/or
            judge) evaluated on every call next to the enforced policy, each
            verdict a ``candidate`` audit event; it never changes what happens.

    Attributes:
        max_recorded_refusals: most ``refused`` audit events kept per review
            (default 20; set it on the class or an instance). Later refusals
            still raise ``ReviewerNotAllowedError`` but are not written, so a
            flood of refused attempts cannot grow a thread without bound.
    """

    max_recorded_refusals: int = 20

    _toolguard_component: ClassVar[str] = "ReviewedChat"
    """Named when a framework integration is given a ReviewedChat instead of tools."""

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
        notify: Notify = None,
        remind_after: float | timedelta | None = None,
        store_secrets: bool = True,
        judge: Judge | None = None,
        shadow: ShadowMode = False,
        candidate: Candidate | None = None,
    ) -> None:
        check_notify(notify)
        self.result_templates = check_templates(result_templates)
        check.positive_int(max_steps, "max_steps")
        check_model(model)
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
            judge=judge,
            shadow=shadow,
            candidate=candidate,
        )
        self.toolset = self.runner.toolset
        self.store: Store = store if store is not None else MemoryStore()
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.authorize = authorize
        self.access = access
        self.clock = clock
        self.notify = notify
        self.remind_after = check_remind_after(remind_after)
        # store_secrets=False: redacted values are stored as REDACTED, the real ones kept here.
        self.store_secrets = check.flag(store_secrets, "store_secrets")
        # The judge reads the thread's user messages as the person's own words; a front
        # that writes them itself (the MCP gateway) turns this off.
        self.judge_reads_messages = True
        # Grants held beyond one thread (the MCP gateway sets its own): then approves carry
        # grants of scope "server" instead of "thread".
        self.shared_grants: grant_use.SharedGrants | None = None
        self._vault = None if self.store_secrets else SecretVault(self.toolset)
        self._threads = Threads(self)
        self._gate = AccessGate(self, self._threads)
        self._turns = TurnLoop(self, self._threads, self._vault)
        self._reviews = Reviews(self, self._threads, self._vault)
        self._notifications = Notifications(self, self._threads)

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
        state = await self._threads.load(thread_id, fresh=True)
        await self._gate.check_access(actor, state, "read")
        return state

    async def audit_trail(self, thread_id: str, *, actor: str | None = None) -> list[AuditEvent]:
        """Every audit event of a thread, oldest first.

        Args:
            thread_id: the thread.
            actor: who asks, for the ``access`` hook (operation ``"audit"``).

        Raises:
            UnknownThreadError: no thread has that id.
            AccessDeniedError: the ``access`` hook refused ``actor``.
        """
        state = await self._threads.load(thread_id, fresh=True)
        await self._gate.check_access(actor, state, "audit")
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
                events.extend((await self._threads.load(thread_id, fresh=True)).audit)
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
        text_arg(thread_id, "thread_id", optional=True)
        if thread_id is None:
            state = ThreadState(thread_id=new_id(), created_at=self.clock())
            if self.system_prompt:
                state.messages.append({"role": "system", "content": self.system_prompt})
            expected: int | None = None
        else:
            state = await self._threads.load(thread_id)
            await self._gate.check_access(actor, state, "message")
            if state.status == "awaiting_review" and self._reviews.is_overdue(state):
                state = await self._reviews.close(state, "expired")
            if state.status == "awaiting_review":
                raise ReviewPendingError
            if state.status == "running":
                raise ThreadBusyError(state.thread_id)
            expected = state.version
        messages = [*state.messages, {"role": "user", "content": clean_text(message)}]
        return await self._turns.run(state, expected, messages)

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
        text_arg(thread_id, "thread_id")
        text_arg(review_id, "review_id", optional=True)
        who = reviewer_id(reviewer)
        runner = self.runner

        async def attempt(bound: str | None) -> Save[ChatTurn | _Claim]:
            nonlocal review_id
            state, pending = await self._reviews.current(thread_id, bound)
            await self._gate.check_reviewer(state, who)
            if self._vault is not None:  # the real values of secrets, if this process has them
                pending = self._vault.restore(pending)
            scope: GrantScope = "thread" if self.shared_grants is None else "server"
            submission = await pipeline.submit(
                runner,
                pending,
                decisions,
                reviewer=who,
                thread_id=state.thread_id,
                grant_scope=scope,
                may_decide=self._gate.may_decide(state),
            )
            plan = submission.plan
            if plan.pending is None:
                return await no_save(_Claim(state, pending, submission))
            # After a conflict every check is made again on the fresh thread, bound to the
            # review read here: both approvals count or this one gets a clean error (never a
            # lost approval, never an approval of arguments not shown).
            review_id = pending.review_id
            return functools.partial(self._reviews.save_progress, state, plan, who)

        async def again(_: str | None, __: ConcurrentUpdateError) -> str | None:
            return review_id

        outcome = await retry_on_conflict(attempt, review_id, again)
        if isinstance(outcome, ChatTurn):
            return outcome
        submission = outcome.submission
        claimed = await self._reviews.claim(outcome.state, submission.parsed, who, submission.plan)
        pending = outcome.pending
        if self._vault is not None:
            self._vault.drop(pending.review_id)
        step = await pipeline.apply(runner, pending, submission, claimed.thread_id)
        step = with_reviewer(step, who)
        return await self._turns.run(claimed, claimed.version, list(claimed.messages), step)

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
        text_arg(thread_id, "thread_id")
        text_arg(review_id, "review_id", optional=True)
        text_arg(reason, "reason", optional=True)
        who = reviewer_id(reviewer)
        state, pending = await self._reviews.current(thread_id, review_id)
        await self._gate.check_reviewer(state, who)
        closed_id = pending.review_id
        state = await self._reviews.close(state, "cancelled", reason=reason, actor=who)
        closed = [a for a in state.actions if a.status == "cancelled"]
        return ChatTurn(thread_id=state.thread_id, review_id=closed_id, actions=closed)

    async def expire_overdue(self, thread_id: str) -> bool:
        """Close the thread's review if it is past its deadline; return whether it was.

        Reviews are also expired on the next ``send_message`` or
        ``submit_review``; call this from a periodic job to close them sooner.
        """
        state = await self._threads.load(thread_id)
        if state.status == "awaiting_review" and self._reviews.is_overdue(state):
            await self._reviews.close(state, "expired")
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
        state = await self._threads.load(thread_id)
        if state.status != "running" or state.pending is None:
            return False
        await self._reviews.recover(state)
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
        text_arg(thread_id, "thread_id")
        text_arg(grant_id, "grant_id")
        who = reviewer_id(reviewer)

        async def attempt(state: ThreadState) -> Save[StandingGrant]:
            now = self.clock()
            grant = next((g for g in state.grants if g.id == grant_id), None)
            if grant is None:
                raise UnknownGrantError(clean_text(grant_id), thread_id)
            status = grant.status_at(now)
            if status != "active":
                raise UnknownGrantError(grant_id, thread_id, status)
            await self._gate.check_grant_reviewer(state, who, grant)
            revoked, event = grant_use.revoke(thread_id, grant, who, now)

            async def save() -> StandingGrant:
                await self._threads.save(
                    state,
                    state.version,
                    grants=grant_use.replaced(state.grants, revoked),
                    audit=[*state.audit, event],
                )
                return revoked

            return save

        async def again(_: ThreadState, __: ConcurrentUpdateError) -> ThreadState:
            # Changed meanwhile: look again (it may be used up or revoked now).
            return await self._threads.load(thread_id)

        return await retry_on_conflict(attempt, await self._threads.load(thread_id), again)

    # ------------------------------------------------------------------ webhook notifications

    async def deliver_notifications(self) -> int:
        """Send the due notifications once (every channel); returns how many were delivered.

        The first call (and every call after :meth:`run_notifications`'
        rescans) looks at every stored thread, so notifications a crashed
        process left in the outbox go out; later calls look at the threads
        this chat saved notifications for. Per thread, notifications go out
        in order within a channel: a failed one is retried after its channel's
        backoff and holds back that channel's later ones. With ``remind_after``, the
        reminders that are due are added first. Each is leased with a
        compare-and-set save before it is sent (so two processes do not both
        send it) and removed after a 2xx answer. A crash between that answer
        and the removal sends it again later: delivery is at least once, and
        receivers dedupe by the body's ``id``.
        """
        return await self._notifications.deliver()

    async def run_notifications(self, *, interval: float = 1.0, rescan: float = 60.0) -> None:
        """Call :meth:`deliver_notifications` every ``interval`` seconds, until cancelled.

        Every ``rescan`` seconds it looks at every stored thread again (for
        notifications other processes left behind). A failing pass is logged
        on the ``toolguard`` logger and the loop goes on.
        """
        await self._notifications.run(interval=interval, rescan=rescan)

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
"""Another name for :class:`ReviewedChat` (the chat use case), kept for code that uses it."""
