"""The runner: run one model turn of tool calls, pause for review, resume with decisions.

This is the direct, lenient path into toolguard. It works with any
agent loop: give it the tool calls of one assistant message, get back either
one result per call (in order) or a paused turn with its ``pending_review``;
store the paused turn anywhere (it is JSON), and resume it with the human's
decisions, in this process or another one.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast
from uuid import UUID

import anyio

from toolguard._core import checks as check
from toolguard._core import telemetry
from toolguard._core.judgement import Judgement
from toolguard._core.limits import Limits, check_limits
from toolguard._core.llm import Message
from toolguard._core.records import (
    Action,
    PendingTurn,
    ResultOutcome,
    ToolCall,
    ToolResult,
    new_id,
    trusted,
    utcnow,
)
from toolguard._enforce import pipeline
from toolguard._enforce.actions import allowed_decisions as allowed_for
from toolguard._enforce.actions import check_decisions_allowed, review_action
from toolguard._enforce.calls import check_thread_id, parse_tool_call, unique_ids
from toolguard._enforce.close import CloseOutcome, close_turn, interrupted_turn
from toolguard._enforce.decide import Verdict, decide
from toolguard._enforce.execute import Executor, Job
from toolguard._enforce.judge import Judge
from toolguard._enforce.once import FINISHED, Claims
from toolguard._enforce.shadow import (
    Candidate,
    ShadowMode,
    Watch,
    check_candidate,
    check_shadow,
    evaluate,
)
from toolguard._enforce.step import Step, error_result
from toolguard._tools.approval import ttl_seconds
from toolguard._tools.classify import Classifier
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Tools, Toolset

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

# ReviewedChat imports Step, CloseOutcome, close_turn and interrupted_turn from this module
# (they are defined in step.py and close.py); listing them here exports them.
EditPolicy = Literal["run", "recheck"]

GrantCheck = Callable[[list[ToolCall]], Awaitable[set[str]]]

Review = tuple[ToolCall, Tool[Any, Any], dict[str, Any], bool]
"""A call up for review: the call, its tool, the validated arguments, asked by a rule."""
"""Which of these calls (that would need a review) a standing grant covers: their ids."""


class Runner:
    """Runs tool calls through a toolset and pauses the guarded ones for review.

    Args:
        tools: a :class:`Toolset` from :func:`guard`, or anything ``guard``
            takes (a list or mapping of functions and tools is classified
            with ``classifier``).
        classifier: used when ``tools`` is not already a toolset.
        edit_policy: ``"run"`` (the default, LangChain's behaviour) runs an
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
            call copied into another review never runs. Anyone who reads a
            plain digest of a call with a short redacted secret can test
            guesses of it: keep the paused turns private, or give a key (a
            ``ReviewedChat`` given none keys its runner with its store's
            secret).
        claims: a store with ``claim(key)`` (:class:`~toolguard.MemoryStore`,
            :class:`~toolguard.SQLiteStore`, ``PostgresStore``): :meth:`resume`
            claims the turn's ``review_id`` there before running anything, so a
            paused turn is resumed once across processes sharing the store.
            ``None`` (the default): once per process only.
        limits: how deep and large arguments and results may be (see
            :class:`Limits`); arguments beyond them get an error result
            without review, results beyond them are kept in a bounded form.
            ``None``: ``Limits()``.
        judge: a :class:`~toolguard.Judge`: a model's second opinion on the
            calls (see docs/judge.md). ``None`` (the default): no judge.
        shadow: shadow mode (see "Shadow mode" in docs/policies.md):
            ``True`` runs at once every call that would wait for a person and
            lists it in the step's ``shadowed`` (``would`` ``"ask"``, the rule
            or policy's reason, the judge's verdict); a deny rule still
            refuses. ``"all"``: calls a deny rule refuses run too
            (``would`` ``"deny"``). ``False`` (the default): enforce.
        candidate: a :class:`~toolguard.Candidate` (other rules and/or
            judge) evaluated on every call next to the enforced policy; its
            verdicts are the step's ``candidates``, never enforced.
    """

    _toolguard_component: ClassVar[str] = "Runner"
    """Named when a framework integration is given a Runner instead of tools."""

    __slots__ = (
        "candidate",
        "claims",
        "clock",
        "edit_policy",
        "executor",
        "judge",
        "limits",
        "review_ttl",
        "shadow",
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
        judge: Judge | None = None,
        shadow: ShadowMode = False,
        candidate: Candidate | None = None,
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
        self.executor = Executor(limit)  # one concurrency limit for every turn of this runner
        self.review_ttl = ttl_seconds(review_ttl, "review_ttl")
        self.clock: Callable[[], datetime] = check.callable_or_none(
            clock, "clock", "a function returning the current datetime", none=False
        )
        self.signing_key = check.signing_key(signing_key)
        if claims is not None and not callable(getattr(claims, "claim", None)):
            msg = (
                f"claims must be a store with an async claim(key) method (MemoryStore,"
                f" SQLiteStore, PostgresStore), got {type(claims).__name__}"
            )
            raise TypeError(msg)
        self.claims: Claims | None = claims
        self.limits: Limits = check_limits(limits)
        given: object = judge  # checked at run time for untyped callers
        if given is not None and not isinstance(given, Judge):
            msg = f"judge must be a toolguard.Judge or None, got {type(given).__name__}"
            raise TypeError(msg)
        self.judge: Judge | None = judge
        self.shadow: ShadowMode = check_shadow(shadow)
        self.candidate: Candidate | None = check_candidate(candidate)

    def allowed_decisions(self, action: Action) -> tuple[str, ...]:
        """The decision types ``action`` may get: shown to the reviewer AND allowed by the tool.

        The stored list is what the payload showed; the tool's policy (code,
        not the store) must allow the type too, so a rewritten store cannot
        widen what a reviewer may do.
        """
        return allowed_for(self.toolset, action)

    def check_allowed(self, pending: PendingTurn, decisions: Sequence[Any]) -> None:
        """Refuse decisions (models, in order) their waiting action does not allow.

        Raises:
            InvalidReviewDecisionError: with the catalog text naming the
                decision, the action and what it allows; nothing has run.
        """
        check_decisions_allowed(self.toolset, pending, decisions)

    # ------------------------------------------------------------------ run

    async def run(
        self,
        calls: Sequence[Any],
        *,
        thread_id: str = "",
        grants: GrantCheck | None = None,
        conversation: Sequence[Message] = (),
        auto_approved: Sequence[str] | None = None,
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
            conversation: the conversation so far (OpenAI Chat Completions
                messages); a judge reads the person's own messages (role
                ``user``) from it, nothing else.
            auto_approved: the calls a judge already approved on its own in
                this thread (the ``digest`` of their ``judged`` events:
                ``call_key`` of the validated call, keyed with
                ``signing_key``; ``ReviewedChat`` reads them from the audit
                trail); ``None``: the judge's own memory of this process.

        Returns:
            A complete :class:`Step` (one result per call, in order) or a
            paused one whose ``pending`` is to be stored and resumed.
        """
        check_thread_id(thread_id)
        review_id = new_id()
        parsed = unique_ids(
            [parse_tool_call(raw, index, limits=self.limits) for index, raw in enumerate(calls)]
        )
        results: dict[str, ToolResult] = {}
        jobs: list[Job] = []
        actions: list[Action] = []
        reviews: list[Review] = []
        decided: dict[str, telemetry.Decided] = {}  # who let a call run, for its span
        verdicts: dict[str, Verdict] = {}
        watch = Watch(self.shadow)  # what shadow mode ran that would have been stopped
        otel = telemetry.tracer()
        for call in parsed:
            # One core decides for every path: run now, ask a person, or refuse.
            verdict = verdicts[call.id] = decide(self.toolset, call)
            if watch.denied(call, verdict, jobs, decided):  # shadow="all": it runs
                continue
            if verdict.outcome == "deny":  # a deny verdict always carries its text and kind
                results[call.id] = self._refused(call, verdict, otel)
                continue
            # A run or ask verdict always carries the tool and the validated arguments.
            tool = cast("Tool[Any, Any]", verdict.tool)
            validated = cast("dict[str, Any]", verdict.validated)
            if verdict.outcome == "ask":
                reviews.append((call, tool, validated, not verdict.grantable))
            else:
                jobs.append((call, tool, validated))
                if verdict.rule is not None:  # an allow rule let it run
                    decided[call.id] = telemetry.Decided(by=telemetry.BY_RULE)
        covered: set[str] = set()
        if grants is not None and any(not asked for *_, asked in reviews):
            covered = set(await grants([c for c, _, _, asked in reviews if not asked]))
        granted = [(c, t, v) for c, t, v, asked in reviews if c.id in covered and not asked]
        reviews = [r for r in reviews if r[0].id not in covered or r[3]]
        judgements: dict[str, Judgement] = {}
        if self.judge is not None:
            jobs, reviews, judgements = await self._judged(
                jobs, reviews, thread_id, conversation, auto_approved
            )
            for call_id, judgement in judgements.items():
                if judgement.auto_approved:
                    decided[call_id] = telemetry.Decided(by=telemetry.BY_JUDGE)
        for call, _, _ in granted:
            decided[call.id] = telemetry.Decided(by=telemetry.BY_GRANT)
        jobs += granted
        # Shadow mode: what would wait for a person runs now, recorded as such.
        reviews = watch.asked(reviews, verdicts, judgements, jobs, decided)
        candidates = await evaluate(  # a candidate policy's verdicts, recorded only
            self.candidate, self.toolset, parsed, verdicts, thread_id, conversation
        )
        for call, tool, _, _ in reviews:
            opinion = judgements.get(call.id)
            actions.append(review_action(self, call, tool, thread_id, review_id, judgement=opinion))
        judged = [judgements[c.id] for c in parsed if c.id in judgements]
        if jobs:
            ran = await self.executor.run_all(
                jobs, in_thread=self.sync_in_thread, limits=self.limits, decided=decided
            )
            for result in ran:
                results[result.call_id] = result
        if not actions:
            return Step(
                calls=parsed,
                results=[results[c.id] for c in parsed],
                judgements=judged,
                shadowed=watch.records(parsed),
                candidates=candidates,
            )
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
        step = Step(
            calls=parsed,
            results=pending.results,
            pending=pending,
            actions=actions,
            judgements=judged,
            shadowed=watch.records(parsed),
            candidates=candidates,
        )
        return await pipeline.answer_with_stand_in(self, step, thread_id)

    def _refused(self, call: ToolCall, verdict: Verdict, otel: Tracer | None) -> ToolResult:
        """The error result of a refused call (its span ended when tracing)."""
        kind = cast("ResultOutcome", verdict.refusal_kind)
        result = error_result(call, cast("str", verdict.refusal), kind)
        if otel is not None:
            by = telemetry.BY_RULE if verdict.rule is not None else None
            known = self.toolset.get(call.name)  # None: an unknown tool
            telemetry.ended(otel, call.id, call.name, result, telemetry.Decided(by=by), tool=known)
        return result

    async def _judged(
        self,
        jobs: list[Job],
        reviews: list[Review],
        thread_id: str,
        conversation: Sequence[Message],
        auto_approved: Sequence[str] | None,
    ) -> tuple[list[Job], list[Review], dict[str, Judgement]]:
        """Route calls by the judge's verdicts: which run now, which a person reviews.

        A verdict never refuses a call. A call up for review runs without a
        person only when the judge may approve it on its own, the thread has
        auto-approvals left and the judge has not approved this very call in
        the thread before; with ``scope="all"`` a call that would run
        at once goes to a person when the judge asks (or cannot decide).
        """
        judge = cast("Judge", self.judge)
        judged_jobs = jobs if judge.scope == "all" else []
        items = [(call, tool) for call, tool, _, _ in reviews]
        items += [(call, tool) for call, tool, _ in judged_jobs]
        verdicts = await judge.judge_all(items, thread_id=thread_id, conversation=conversation)
        by_id = {v.call_id: v for v in verdicts}
        # The thread's count (or the gateway's): the same validated call again, or one past
        # max_auto_approvals, takes no slot and a person decides.
        approvals = judge.approvals(thread_id, auto_approved)
        kept_jobs: list[Job] = [] if judged_jobs else list(jobs)
        kept_reviews: list[Review] = []
        for call, tool, validated, asked in reviews:
            verdict = by_id[call.id]
            if judge.may_approve(verdict, tool, asked_by_rule=asked) and await approvals.take(
                call.name, validated, key=self.signing_key, limit=judge.max_auto_approvals
            ):
                by_id[call.id] = verdict.model_copy(update={"auto_approved": True})
                kept_jobs.append((call, tool, validated))
            else:
                kept_reviews.append((call, tool, validated, asked))
        for call, tool, validated in judged_jobs:
            if by_id[call.id].outcome == "allow":  # an undecided verdict is an ask
                kept_jobs.append((call, tool, validated))
            else:
                kept_reviews.append((call, tool, validated, True))
        return kept_jobs, kept_reviews, by_id

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
          an unknown tool name, arguments that break the schema or a deny
          rule give an error result, and an edit that switches to another
          tool needing a review (its own policy or an ask rule) is put up
          for review again.
        * reject: the call does not run; the model reads the reason, or
          ``REJECTED_BY_USER_MESSAGE``.
        * respond (only for tools that allow it): the call does not run; the
          reviewer's ``message`` is its result, with status ``"success"`` as
          in LangChain and ``outcome`` ``"responded"``; the action ends
          ``responded``.

        Each decision must be one its action allows (the tool's
        ``allowed_decisions``), on this lenient path too. An approve carrying
        a standing ``grant`` is refused: a Runner keeps no conversation to
        hold it (use :class:`~toolguard.ReviewedChat`).

        An edit is a new proposal: the edited call is decided again as if
        the model had proposed it (deny and ask rules, the schema, the
        tool's policy). One that switched tools and still needs a review,
        or needs a quorum, is put up for review again.

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
        return await pipeline.resume_turn(
            self, pending, decisions, thread_id=thread_id, reviewer=reviewer
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
        FINISHED.finish(pending.review_id, "closed")
        telemetry.actions_ended(pending.review_id, step.actions, tools=self.toolset)
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
        FINISHED.finish(pending.review_id, "interrupted", after=("resumed",))
        telemetry.actions_ended(pending.review_id, step.actions, tools=self.toolset)
        return step

    # ------------------------------------------------------------------ without an event loop

    def run_sync(
        self,
        calls: Sequence[Any],
        *,
        thread_id: str = "",
        conversation: Sequence[Message] = (),
        auto_approved: Sequence[str] | None = None,
    ) -> Step:
        """:meth:`run` for code without an event loop (starts one with anyio)."""
        return anyio.run(
            functools.partial(
                self.run,
                calls,
                thread_id=thread_id,
                conversation=conversation,
                auto_approved=auto_approved,
            )
        )

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
