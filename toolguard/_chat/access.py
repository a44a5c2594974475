"""The access gate of a ReviewedChat: who may decide, who may read or continue a thread.

Two hooks ask: ``authorize(reviewer, thread, actions)`` before a decision,
a cancellation or a grant's revocation, and ``access(actor, thread,
operation)`` before a read, an audit read or a message. Both fail closed (a
verdict other than ``True`` or ``False`` raises ``TypeError``; a hook's own
exception propagates) and a refusal is audited as a ``refused`` event, in
bounds: a flood of refused attempts never grows a thread without limit, and
recording a refusal never makes anyone else's save fail (a concurrent save
wins; the chat's own saves go again on top of a refusal).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol, TypeAlias

from toolguard._chat.threads import Threads, ThreadSettings
from toolguard._core.audit import AuditEvent
from toolguard._core.errors import AccessDeniedError, ConcurrentUpdateError, ReviewerNotAllowedError
from toolguard._core.records import Action
from toolguard._core.standing import StandingGrant
from toolguard._enforce import quorum
from toolguard._stores.protocol import ThreadState

Authorizer: TypeAlias = Callable[[str | None, ThreadState, list[Action]], bool | Awaitable[bool]]
"""Decides whether ``reviewer`` may decide on ``actions`` of ``thread``."""

AccessOperation: TypeAlias = Literal["read", "audit", "message"]
"""What an actor asks to do with a thread: read it, read its audit trail, or post a message."""

AccessHook: TypeAlias = Callable[[str | None, ThreadState, AccessOperation], bool | Awaitable[bool]]
"""Decides whether ``actor`` may do ``operation`` on ``thread`` (``ReviewedChat(access=...)``)."""

REFUSED_DETAIL = "the authorization hook refused this reviewer"
"""The ``detail`` of the ``refused`` audit event of a reviewer the ``authorize`` hook refused."""

REFUSALS_IN_A_ROW = 20
"""At most this many ``refused`` events in a row are recorded by the access hook's refusals."""


def reviewer_id(reviewer: object, name: str = "reviewer") -> str | None:
    """A reviewer identity as text: text as is, an ``int`` or a ``UUID`` as ``str()``.

    ``None`` stays ``None`` (anonymous). Lone surrogates are replaced like in
    any other text toolguard stores.

    Raises:
        TypeError: any other type (``bool`` included), naming the argument.
    """
    return quorum.reviewer_text(reviewer, name)


class GateSettings(ThreadSettings, Protocol):
    """What :class:`AccessGate` reads from its chat, at each use."""

    @property
    def authorize(self) -> Authorizer | None: ...

    @property
    def access(self) -> AccessHook | None: ...

    @property
    def max_recorded_refusals(self) -> int: ...


class AccessGate:
    """Asks a chat's ``authorize`` and ``access`` hooks; records and raises their refusals."""

    def __init__(self, settings: GateSettings, threads: Threads) -> None:
        self.settings = settings
        self.threads = threads

    async def authorized(
        self, reviewer: str | None, state: ThreadState, actions: list[Action]
    ) -> bool:
        """The ``authorize`` hook's verdict (awaited if async); ``TypeError`` unless a bool."""
        authorize = self.settings.authorize
        assert authorize is not None  # noqa: S101 - callers check
        verdict: object = authorize(reviewer, state, actions)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True or verdict is False:
            return verdict
        msg = f"the authorize hook must return True or False, got {type(verdict).__name__}"
        raise TypeError(msg)

    def may_decide(
        self, state: ThreadState
    ) -> Callable[[str | None, list[Action]], Awaitable[bool]] | None:
        """Who may decide new requests on ``state`` (an edited call's), or ``None`` without a hook.

        The ``authorize`` hook is asked with the new requests, as for a review
        of them; its ``False`` is no refusal (nothing is recorded): the edit
        becomes a new review for the people who may decide it.
        """
        if self.settings.authorize is None:
            return None

        async def ask(reviewer: str | None, actions: list[Action]) -> bool:
            return await self.authorized(reviewer, state, actions)

        return ask

    async def check_reviewer(self, state: ThreadState, reviewer: str | None) -> None:
        """Ask the ``authorize`` hook; record and raise a refusal. Fails closed.

        ``True`` allows; ``False`` refuses (audited, ``ReviewerNotAllowedError``);
        anything else raises ``TypeError``, and an exception from the hook
        propagates: neither changes anything.
        """
        if self.settings.authorize is None or state.pending is None:
            return
        waiting = [a for a in state.pending.actions if a.status == "requested"]
        if await self.authorized(reviewer, state, waiting):
            return
        event = AuditEvent(
            at=self.settings.clock(),
            kind="refused",
            thread_id=state.thread_id,
            review_id=state.pending.review_id,
            actor=reviewer,
            detail=REFUSED_DETAIL,
        )
        await self.record_refusal(state, event)
        raise ReviewerNotAllowedError(reviewer, state.thread_id)

    async def check_grant_reviewer(
        self, state: ThreadState, reviewer: str | None, grant: StandingGrant
    ) -> None:
        """Ask the ``authorize`` hook about a grant's revocation; fails closed like a review."""
        if self.settings.authorize is None:
            return
        actions = [a for a in state.actions if a.id == grant.action_id]
        if await self.authorized(reviewer, state, actions):
            return
        event = AuditEvent(
            at=self.settings.clock(),
            kind="refused",
            thread_id=state.thread_id,
            review_id=state.review_id,
            actor=reviewer,
            detail=f"{REFUSED_DETAIL} (revoking grant {grant.id})",
        )
        await self.record_refusal(state, event)
        raise ReviewerNotAllowedError(reviewer, state.thread_id)

    async def record_refusal(self, state: ThreadState, event: AuditEvent) -> None:
        """Append a ``refused`` event to the thread's audit trail, within bounds.

        At most ``max_recorded_refusals`` refused events are kept per review
        (those outside a review count together); the last one kept says that
        later ones are not recorded, and later ones write nothing. The save
        is a compare-and-set on ``state``: when the thread changed since it
        was read, the refusal is not recorded (the concurrent save wins).
        Claims and other saves of the chat redo their save on top of a
        concurrent refusal (``only_refusals_added``), so recording a refusal
        never makes an authorized reviewer's submission fail; the cap bounds
        how often they redo it.
        """
        review = state.review_id
        kept = sum(1 for e in state.audit if e.kind == "refused" and e.review_id == review)
        limit = self.settings.max_recorded_refusals
        if kept >= limit:
            return
        if kept == limit - 1:
            detail = (
                f"{event.detail or REFUSED_DETAIL}; later refusals for this review are not recorded"
            )
            event = event.model_copy(update={"review_id": review, "detail": detail})
        elif event.review_id != review:
            event = event.model_copy(update={"review_id": review})
        await self._write_refusal(state, event)

    async def check_access(
        self, actor: str | None, state: ThreadState, operation: AccessOperation
    ) -> None:
        """Ask the ``access`` hook; a refusal is audited (capped) and raises AccessDeniedError.

        A refusal is not recorded when it repeats the last audit event (the
        same actor refused the same operation), after :data:`REFUSALS_IN_A_ROW`
        refusals in a row, or while decisions are applied (recording would
        make that run's own save fail).
        """
        actor = reviewer_id(actor, "actor")
        access = self.settings.access
        if access is None:
            return
        verdict: object = access(actor, state, operation)
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
            if past.kind != "refused" or trailing >= REFUSALS_IN_A_ROW:
                break
            trailing += 1
        last = state.audit[-1] if state.audit else None
        repeated = last is not None and (last.kind, last.actor, last.detail) == (
            "refused",
            actor,
            detail,
        )
        if not repeated and trailing < REFUSALS_IN_A_ROW and state.status != "running":
            event = AuditEvent(
                at=self.settings.clock(),
                kind="refused",
                thread_id=state.thread_id,
                review_id=state.review_id,
                actor=actor,
                detail=detail,
            )
            await self._write_refusal(state, event)
        raise AccessDeniedError(actor, state.thread_id, operation)

    async def _write_refusal(self, state: ThreadState, event: AuditEvent) -> None:
        """Save ``event`` after ``state``'s audit trail; a concurrent save wins (kept as is)."""
        with contextlib.suppress(ConcurrentUpdateError):
            await self.threads.save(state, state.version, audit=[*state.audit, event])
