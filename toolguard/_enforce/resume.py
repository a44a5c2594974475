"""Resuming a paused turn: apply the reviewers' decisions and run what they allow.

:func:`resume_turn` is :meth:`Runner.resume <toolguard.Runner.resume>`:
it reads and checks the decisions, then :func:`apply_decisions` settles the
turn. ``ReviewedChat``, which checks the decisions itself before it claims
the review, calls :func:`apply_decisions` directly.

Applying a settled submission goes in three steps: each decision is settled
(:meth:`_Resumption.settle`: rejected and answered calls end now, approved
and edited ones are proven to be the reviewed calls, asked the rules again
and validated), the calls that may run run together
(:meth:`_Resumption.run_jobs`), and the step is built, paused again when an
edit must be reviewed in its turn (:meth:`_Resumption.step`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, cast
from uuid import UUID

from toolguard._core import telemetry
from toolguard._core.errors import AlreadyResumedError
from toolguard._core.records import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    ActionStatus,
    ApproveDecision,
    EditDecision,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ToolCall,
    ToolResult,
    new_id,
)
from toolguard._enforce import quorum
from toolguard._enforce.actions import (
    EXPIRED_BEFORE_START,
    RunnerSettings,
    review_action,
    unreviewed,
)
from toolguard._enforce.calls import parse_tool_call
from toolguard._enforce.decide import Verdict, decide
from toolguard._enforce.execute import DeadlinePassed, Executor, run_body
from toolguard._enforce.once import FINISHED, Claims, claim_turn
from toolguard._enforce.step import Step, error_result
from toolguard._policy.decisions import AnyDecision
from toolguard._policy.redact import keep_redacted, shown_edit
from toolguard._tools.tool import Tool


class ResumingRunner(RunnerSettings, Protocol):
    """What resuming a turn reads from a :class:`~toolguard.Runner`."""

    @property
    def edit_policy(self) -> str:
        """``"run"`` or ``"recheck"`` (see the ``Runner``)."""
        ...

    @property
    def claims(self) -> Claims | None:
        """The store claiming each resumed review once across processes (``None``: none)."""
        ...

    @property
    def sync_in_thread(self) -> bool:
        """Whether sync tools run in a worker thread."""
        ...

    @property
    def executor(self) -> Executor:
        """Runs the approved calls (its concurrency limit is shared by every turn)."""
        ...


async def apply_decisions(
    runner: ResumingRunner,
    pending: PendingTurn,
    parsed: Sequence[AnyDecision],
    thread_id: str,
    reviewer: str | int | UUID | None = None,
    *,
    plan: quorum.QuorumPlan | None = None,
    withheld: frozenset[str] = frozenset(),
) -> Step:
    """Apply decisions already parsed and checked: a quorum's progress, or the whole turn.

    ``parsed``: at most one decision model per waiting action of ``pending``
    (status ``requested``), in order, each one its action allows (see
    :func:`~toolguard.validate_decisions` and ``Runner.check_allowed``).
    While a quorum is incomplete nothing runs and nothing is claimed: the
    step is paused with the progress. Otherwise the turn is claimed (once
    only) and what the decisions allow runs, as ``Runner.resume`` describes.
    ``plan``: the caller's :func:`quorum.plan` of this very submission, when
    it settles every action without a quorum (it is not planned again).
    ``withheld``: the actions whose edit its editor may not decide (see
    :func:`toolguard._enforce.pipeline.propose_edits`): their edited call is
    reviewed again and the editor's vote is not counted.

    Raises:
        AlreadyResumedError: the turn was already resumed or closed (in this
            process, or claimed by another one); nothing ran.
        QuorumReviewerError: an anonymous or repeated reviewer approves a
            quorum action; nothing changed.
    """
    who = quorum.reviewer_text(reviewer)
    if plan is None or plan.pending is not None or plan.votes:
        plan = quorum.plan(runner, pending, list(parsed), who, thread_id, withheld=withheld)
    if plan.pending is not None:
        # A quorum is still incomplete: nothing runs, nothing is claimed.
        if FINISHED.done(pending.review_id):
            raise AlreadyResumedError(pending.review_id)
        return Step(
            calls=plan.calls,
            results=list(plan.pending.results),
            pending=plan.pending,
            replaced_calls=list(plan.pending.replaced_calls),
            actions=plan.touched,
        )
    await claim_turn(runner.claims, pending.review_id)
    resumption = _Resumption(runner, pending, thread_id, who, withheld)
    for action, decision in plan.pairs:
        resumption.settle(action, decision)
    await resumption.run_jobs()
    step = resumption.step()
    resumption.trace(step)
    return step


def refusal_result(call: ToolCall, verdict: Verdict, name: str) -> ToolResult:
    """The error result of a call the policy refused when it was about to run."""
    return error_result(call, verdict.refusal or "", verdict.refusal_kind or "failed", name)


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
            raise DeadlinePassed
        return await run_body(self._tool, validated, in_thread=in_thread)


class _Resumption:
    """One settled submission being applied to a claimed turn."""

    def __init__(
        self,
        runner: ResumingRunner,
        pending: PendingTurn,
        thread_id: str,
        reviewer: str | None,
        withheld: frozenset[str] = frozenset(),
    ) -> None:
        self.runner = runner
        self.reviewer = reviewer  # who submitted the decisions
        self.withheld = withheld  # actions whose edit the editor may not decide
        self.review_id = pending.review_id
        self.thread_id = thread_id
        self.calls = list(pending.calls)
        self.position = {c.id: i for i, c in enumerate(self.calls)}
        self.results = {r.call_id: r for r in pending.results}
        self.replaced = list(pending.replaced_calls)
        self.now = runner.clock()
        # Each decided action is copied once, at the end, with all its updates.
        self.decided: list[tuple[Action, dict[str, Any]]] = []
        self.again: list[Action] = []
        self.again_id = ""  # the review id of the edits put up for review again, made when needed
        self.jobs: list[tuple[int, ToolCall, _Deadline, dict[str, Any]]] = []

    # ------------------------------------------------------------------ settling each decision

    def settle(self, action: Action, decision: AnyDecision | None) -> None:
        """Settle one action: end it now, or queue its call to run."""
        call = self.calls[self.position[action.call_id]]
        if decision is None:
            self._finish(action, error_result(call, NO_DECISION, "no_decision"), "rejected", None)
        elif isinstance(decision, RejectDecision):
            reason = decision.message or REJECTED_BY_USER_MESSAGE
            self._finish(action, error_result(call, reason, "rejected"), "rejected", decision)
        elif isinstance(decision, RespondDecision):
            # LangChain's respond: the reviewer's answer is the tool's result; it never runs.
            answer = ToolResult(
                call_id=call.id,
                name=call.name,
                status="success",
                content=decision.message,
                outcome="responded",
            )
            self._finish(action, answer, "responded", decision)
        elif isinstance(decision, ApproveDecision):
            self._approve(action, call, decision)
        else:
            self._edit(action, call, decision)

    def _finish(
        self, action: Action, result: ToolResult, status: str, decision: AnyDecision | None
    ) -> None:
        """End ``action`` now with ``result`` (nothing runs)."""
        self.results[result.call_id] = result
        self.decided.append(
            (
                action,
                {
                    "status": status,
                    "decision": decision,
                    "result": result,
                    "decided_at": self.now,
                    "finished_at": self.now,
                },
            )
        )

    def _approve(self, action: Action, call: ToolCall, decision: ApproveDecision) -> None:
        """Queue the reviewed call to run, or end it failed (tampered, unknown, denied, invalid)."""
        runner = self.runner
        tool = runner.toolset.get(action.name)
        # The call that runs is the turn's call (real values, secrets included); its digest and
        # the shown arguments must both still be the reviewed ones.
        problem = unreviewed(
            runner, action, call, tool, thread_id=self.thread_id, review_id=self.review_id
        )
        if problem is not None:
            self._finish(action, problem, "failed", decision)
            return
        # Decided again with the rules of this process, not those of the one that paused: a
        # deny rule added while the review waited stops the approved call.
        verdict = decide(runner.toolset, call)
        if verdict.outcome == "deny" or verdict.tool is None or verdict.validated is None:
            self._finish(action, refusal_result(call, verdict, action.name), "failed", decision)
            return
        self._queue(action, call, verdict.tool, verdict.validated)
        self.decided.append(
            (action, {"status": "approved", "decision": decision, "decided_at": self.now})
        )

    def _edit(self, action: Action, call: ToolCall, decision: EditDecision) -> None:
        """Replace the call (same id) by the edited one: queue it, review it again, or end it."""
        runner = self.runner
        edited = decision.edited_action
        shown = self._shown_edit(action, call, decision)
        if shown is None:
            return
        edited_args, decision = shown  # an edit of a redacted call is recorded as shown
        new_call = parse_tool_call(
            {"id": call.id, "name": edited.name, "args": edited_args}, limits=runner.limits
        )
        self.calls[self.position[call.id]] = new_call
        self.replaced = [c for c in self.replaced if c.id != call.id] + [new_call]
        # An edit is a new proposal by its editor: the edited call is decided afresh, as if the
        # model had proposed it (unknown tool, limits, deny rules, schema, ask rules, the tool).
        verdict = decide(runner.toolset, new_call)
        if verdict.outcome == "deny" or verdict.tool is None or verdict.validated is None:
            self._finish(action, refusal_result(new_call, verdict, edited.name), "failed", decision)
            return
        tool, validated = verdict.tool, verdict.validated
        changes = {"status": "edited", "decision": decision, "decided_at": self.now}
        if verdict.outcome == "ask" and self._reviewed_again(action, edited.name, verdict):
            self.decided.append((action, {**changes, "finished_at": self.now}))
            self.again_id = self.again_id or new_id()
            request = review_action(runner, new_call, tool, self.thread_id, self.again_id)
            if verdict.approvals > 1 and action.id not in self.withheld:
                # A quorum counts the editor's vote, when the editor may decide the new call.
                request = quorum.editor_vote(request, self.reviewer)
            self.again.append(request)
            return
        self._queue(action, new_call, tool, validated)
        self.decided.append((action, changes))

    def _reviewed_again(self, action: Action, name: str, verdict: Verdict) -> bool:
        """Whether an edited call that asks goes to a new review instead of running now.

        It does when the edit switched tools, when the editor may not decide
        the new call (the ``authorize`` hook or the reviewer list said no),
        when the runner re-checks every edit (``edit_policy="recheck"``), and
        when the new call needs more than one approval (a quorum).
        """
        return (
            name != action.name
            or action.id in self.withheld
            or self.runner.edit_policy == "recheck"
            or verdict.approvals > 1
        )

    def _shown_edit(
        self, action: Action, call: ToolCall, decision: EditDecision
    ) -> tuple[dict[str, Any], EditDecision] | None:
        """The edit's real arguments and the decision as recorded; ``None``: it ended failed.

        A redacted parameter left as ``REDACTED`` keeps this call's real
        value, once the call is proven to be the reviewed one (never another
        call's value); the recorded decision shows the secrets as ``REDACTED``.
        """
        toolset = self.runner.toolset
        edited = decision.edited_action
        same_tool = toolset.get(action.name) if edited.name == action.name else None
        if same_tool is not None and same_tool.redacted:
            edited_args, kept = keep_redacted(edited.args, call.args, same_tool.redacted)
            problem = (
                unreviewed(
                    self.runner,
                    action,
                    call,
                    same_tool,
                    thread_id=self.thread_id,
                    review_id=self.review_id,
                )
                if kept
                else None
            )
            decision = shown_edit(decision, same_tool.shown_args(edited.args))
            if problem is not None:
                self._finish(action, problem, "failed", decision)
                return None
            return edited_args, decision
        if (other := toolset.get(edited.name)) is not None and other.redacted:
            decision = shown_edit(decision, other.shown_args(edited.args))
        return dict(edited.args), decision

    def _queue(
        self, action: Action, call: ToolCall, tool: Tool[Any, Any], validated: dict[str, Any]
    ) -> None:
        """Queue ``call`` to run; its record is the next one decided (see :class:`_Deadline`)."""
        gate = _Deadline(tool, action.expires_at, self.runner.clock)
        self.jobs.append((len(self.decided), call, gate, validated))

    # ------------------------------------------------------------------ running, then the step

    async def run_jobs(self) -> None:
        """Run the queued calls together and record how each ended."""
        if not self.jobs:
            return
        runner = self.runner
        decided: dict[str, telemetry.Decided] = {}
        if telemetry.tracer() is not None:
            for slot, call, _, _ in self.jobs:
                action, changes = self.decided[slot]
                decided[call.id] = telemetry.action_decided(
                    self.review_id,
                    action.model_copy(
                        update={**changes, "decided_at": action.decided_at or self.now}
                    ),
                    self.reviewer,
                )
        outcomes = await runner.executor.run_all(
            [(call, cast("Tool[Any, Any]", gate), args) for _, call, gate, args in self.jobs],
            in_thread=runner.sync_in_thread,
            limits=runner.limits,
            decided=decided,
        )
        finished_at = runner.clock()
        for (slot, call, gate, _), result in zip(self.jobs, outcomes, strict=True):
            record = self.decided[slot][1]
            if gate.missed:
                late = error_result(call, EXPIRED_BEFORE_START, "expired", result.name)
                self.results[late.call_id] = late
                record.update(status="expired", result=late, finished_at=finished_at)
                continue
            self.results[result.call_id] = result
            status: ActionStatus = "executed" if result.status == "success" else "failed"
            if result.outcome == "cancelled":  # its caller gave up after it started
                status = "cancelled"
            record.update(status=status, result=result, finished_at=finished_at)

    def trace(self, step: Step) -> None:
        """Spans for the actions that ended without running (the executor traced the others)."""
        if telemetry.tracer() is None:
            return
        ran = {slot for slot, *_ in self.jobs}
        ended = [a for i, a in enumerate(step.actions[: len(self.decided)]) if i not in ran]
        telemetry.actions_ended(self.review_id, ended, self.reviewer, self.runner.toolset)

    def step(self) -> Step:
        """The turn's step: complete, or paused on the edits put up for review again."""
        calls, results = self.calls, self.results
        actions = [
            action.model_copy(update={**changes, "decided_at": action.decided_at or self.now})
            for action, changes in self.decided
        ]
        if not self.again:
            return Step(
                calls=calls,
                results=[results[c.id] for c in calls],
                replaced_calls=self.replaced,
                actions=actions,
            )
        paused = PendingTurn(
            review_id=self.again_id,
            calls=calls,
            results=[results[c.id] for c in calls if c.id in results],
            actions=self.again,
            replaced_calls=self.replaced,
        )
        return Step(
            calls=calls,
            results=paused.results,
            pending=paused,
            replaced_calls=self.replaced,
            actions=actions + self.again,
        )
