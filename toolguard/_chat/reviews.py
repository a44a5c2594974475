"""The review steps of a ReviewedChat: find the pending review, claim it, close it.

A submission is claimed with one compare-and-set save (so racing
submissions run the approved tools once); a quorum review that is not
settled yet saves its progress instead (the votes). A review can also end
without running anything: expired, cancelled, or interrupted by a crash
(:meth:`Reviews.recover`).
"""

from __future__ import annotations

import dataclasses

from toolguard._chat.history import (
    ENDED,
    decided_action,
    decided_event,
    merge_actions,
    rewrite_last_assistant,
    tool_message,
)
from toolguard._chat.threads import Save, Threads, only_refusals_added, retry_on_conflict
from toolguard._chat.turns import ChatTurn, TurnSettings
from toolguard._core import telemetry
from toolguard._core.audit import AuditEvent, final_event, requested_event
from toolguard._core.errors import (
    ConcurrentUpdateError,
    NoPendingReviewError,
    ReviewExpiredError,
    StaleReviewError,
    UnknownReviewError,
)
from toolguard._core.jsonable import clean_text
from toolguard._core.records import Action, PendingTurn
from toolguard._enforce import grant_use, quorum
from toolguard._enforce.close import CloseOutcome, close_turn, interrupted_turn
from toolguard._enforce.step import Step
from toolguard._policy.decisions import AnyDecision
from toolguard._policy.redact import SecretVault, shown_decision
from toolguard._stores.protocol import ThreadState


def stale(state: ThreadState, review_id: str, current: str | None) -> StaleReviewError:
    """A review id this thread had before (stale, or cancelled), or one it never had (unknown)."""
    known = review_id == state.review_id or any(e.review_id == review_id for e in state.audit)
    if not known:
        return UnknownReviewError(clean_text(review_id), current)
    cancelled = any(e.kind == "cancelled" and e.review_id == review_id for e in state.audit)
    return StaleReviewError(clean_text(review_id), current, cancelled=cancelled)


class Reviews:
    """The steps of a thread's pending review, each saved with a compare-and-set save."""

    def __init__(self, settings: TurnSettings, threads: Threads, vault: SecretVault | None) -> None:
        self.settings = settings
        self.threads = threads
        self.vault = vault

    def is_overdue(self, state: ThreadState) -> bool:
        """Whether the thread's pending review is past its deadline."""
        deadline = state.pending.expires_at if state.pending is not None else None
        return deadline is not None and self.settings.clock() >= deadline

    async def current(
        self, thread_id: str, review_id: str | None
    ) -> tuple[ThreadState, PendingTurn]:
        """The thread and its pending review, after the deadline and binding checks."""
        state = await self.threads.load(thread_id)
        if state.status == "awaiting_review" and self.is_overdue(state):
            await self.close(state, "expired")
            raise ReviewExpiredError(state.review_id or "")
        if state.status != "awaiting_review" or state.pending is None:
            if review_id is not None:
                raise stale(state, review_id, None)
            raise NoPendingReviewError
        if review_id is not None and review_id != state.pending.review_id:
            raise stale(state, review_id, state.pending.review_id)
        return state, state.pending

    async def save_progress(
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
        now = self.settings.clock()
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
        vault = self.vault
        # store_secrets=False: the paused turn is stored with REDACTED, its secrets kept here.
        pending = plan.pending if vault is None else vault.stash(plan.pending)
        try:
            saved = await self.threads.save(
                state,
                state.version,
                pending=pending,
                actions=merge_actions(state.actions, plan.touched),
                audit=[*state.audit, *events],
            )
        except ConcurrentUpdateError:
            if vault is not None and new_review != old_review:
                vault.drop(new_review)
            raise
        if vault is not None and new_review != old_review:
            vault.drop(old_review)
        return ChatTurn(
            thread_id=saved.thread_id,
            pending_review=plan.pending.pending_review,
            review_id=new_review,
            actions=plan.touched,
        )

    async def claim(
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
        runner = self.settings.runner

        async def attempt(state: ThreadState) -> Save[ThreadState]:
            if self.is_overdue(state):
                await self.close(state, "expired")
                raise ReviewExpiredError(state.review_id or "")
            assert state.pending is not None  # noqa: S101 - checked by current()
            now = self.settings.clock()
            waiting = [a for a in state.pending.actions if a.status == "requested"]
            decided = [
                decided_action(action, shown_decision(decision, runner.toolset), reviewer, now)
                for action, decision in zip(waiting, parsed, strict=True)
            ]
            votes: list[AuditEvent] = []
            if plan is not None and plan.votes:
                # A quorum review settles: one vote for this submission's decisions, then
                # the decided events of every action (those settled earlier keep their
                # reviewer and time).
                review = state.pending.review_id
                votes = quorum.vote_events(state.thread_id, review, plan.votes, reviewer, now)
                decided = [quorum.shown_action(runner, action) for action, _ in plan.pairs]
            events = [
                *votes,
                *(
                    decided_event(
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
                key=runner.signing_key,
            )
            server = grant_use.shared_ids(decided)  # kept by the chat's shared grants
            shared = [g for g in made if g.action_id in server]
            made = [g for g in made if g.action_id not in server]
            pending = state.pending

            async def save() -> ThreadState:
                saved = await self.threads.save(
                    state,
                    state.version,
                    status="running",
                    decisions=(
                        parsed
                        if self.vault is None
                        else [shown_decision(d, self.settings.toolset) for d in parsed]
                    ),
                    actions=merge_actions(state.actions, decided),
                    audit=[*state.audit, *events, *made_events],
                    grants=[*state.grants, *made],
                )
                keeper = self.settings.shared_grants
                if shared and keeper is not None:  # recorded once the claim stands
                    await keeper.record(saved.thread_id, pending, shared)
                return saved

            return save

        async def again(state: ThreadState, _: ConcurrentUpdateError) -> ThreadState:
            fresh = await self.threads.reread(state)
            refusals = fresh is not None and only_refusals_added(state, fresh)
            if fresh is None or not (refusals or grant_use.only_grants_changed(state, fresh)):
                raise NoPendingReviewError from None
            return fresh

        return await retry_on_conflict(attempt, state, again)

    async def close(
        self,
        state: ThreadState,
        outcome: CloseOutcome,
        *,
        reason: str | None = None,
        actor: str | None = None,
    ) -> ThreadState:
        """End the pending review without running anything (expired, cancelled)."""
        assert state.pending is not None  # noqa: S101 - callers check awaiting_review
        now = self.settings.clock()
        step = close_turn(state.pending, outcome, reason, now)
        if self.vault is not None:
            self.vault.drop(state.pending.review_id)
        closed = [
            a if a.status in ENDED else a.model_copy(update={"reviewer": actor})
            for a in step.actions
        ]
        events = [
            final_event(
                state.thread_id,
                state.pending.review_id,
                a,
                ENDED.get(a.status, outcome),  # settled before a quorum closed: as decided
                now,
            )
            for a in closed
        ]
        try:
            saved = await self.end_turn(state, step, closed, events)
        except ConcurrentUpdateError:
            raise NoPendingReviewError from None
        telemetry.actions_ended(state.pending.review_id, closed, tools=self.settings.toolset)
        return saved

    async def recover(self, state: ThreadState) -> None:
        """End a turn left ``running`` by a crash: unfinished approved calls fail, never rerun."""
        assert state.pending is not None  # noqa: S101 - checked by the caller
        step = interrupted_turn(state.pending, state.decisions or [], self.settings.clock())
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
        now = self.settings.clock()
        review_id = state.pending.review_id
        events = [
            final_event(
                state.thread_id,
                review_id,
                a,
                "interrupted" if a.status == "failed" else ENDED[a.status],
                now,
            )
            for a in step.actions
        ]
        await self.end_turn(state, step, step.actions, events)
        telemetry.actions_ended(review_id, step.actions, tools=self.settings.toolset)

    async def end_turn(
        self, state: ThreadState, step: Step, actions: list[Action], events: list[AuditEvent]
    ) -> ThreadState:
        """Save a paused turn as finished without running anything: the model reads the results."""
        messages = rewrite_last_assistant(list(state.messages), step.calls)
        messages.extend(tool_message(r, self.settings.result_templates) for r in step.results)
        return await self.threads.save(
            state,
            state.version,
            messages=messages,
            status="idle",
            pending=None,
            decisions=None,
            actions=merge_actions(state.actions, actions),
            audit=[*state.audit, *events],
        )
