"""The one pipeline every decision takes: propose, submit, apply.

Every path into toolguard (a decorated call with ``allow_once``, the
``Runner``, ``ReviewedChat``, the HTTP API, the MCP gateway and the framework
integrations) only translates its own world to and from these three steps:

* **propose** (:func:`propose`, which the runner's
  :func:`~toolguard._enforce.decide.decide` answers): a call the model proposed becomes one
  :class:`~toolguard._enforce.decide.Verdict` holding everything the policy
  says about it (rules on the validated arguments, the tool's own policy and
  ``when=``, whether a grant may stand in, how many approvals). The runner
  then asks the judge, when there is one, about the calls that ask.
* **submit** (:func:`submit`): a person's decisions become a
  :class:`Submission`: their count and shape checked (strict, or the lenient
  mode of ``Runner.resume``), each one a type its action allows, notes
  scrubbed of secrets, grants checked, every edit proposed afresh with its
  editor as the person deciding it (:func:`propose_edits`), and a quorum's
  votes counted (:mod:`toolguard._enforce.quorum`).
* **apply** (:func:`apply`): the submission's plan becomes results: the
  review claimed once only, each approved call proven to be the reviewed one
  (its digest), the deadline checked when it starts, and every body run by
  the one executor (:mod:`toolguard._enforce.execute`).

An edit is a new proposal by its editor: the edited call is decided like a
call the model proposed, so a deny rule refuses it; when it still asks and
the editor may not decide the new call (the ``authorize`` hook or the
``[reviewers]`` table, asked with the new tool's name), or the edit switched
tools, it becomes a new review, and the editor's vote counts toward a quorum
only when the editor may decide that tool.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from toolguard._core import telemetry
from toolguard._core.errors import (
    InvalidReviewDecisionError,
    NoPendingReviewError,
    UnsupportedPolicyError,
)
from toolguard._core.jsonable import to_json_data
from toolguard._core.records import (
    REJECTED_BY_USER_MESSAGE,
    Action,
    ApproveDecision,
    EditDecision,
    PendingReview,
    PendingTurn,
    QuorumProgress,
    ToolCall,
    call_digest,
    new_id,
)
from toolguard._core.standing import GrantScope
from toolguard._enforce import quorum
from toolguard._enforce.actions import check_decisions_allowed, review_action
from toolguard._enforce.calls import check_thread_id, parse_tool_call
from toolguard._enforce.decide import Verdict, failure_text
from toolguard._enforce.execute import run_body, run_body_sync
from toolguard._enforce.frameworks import (
    NOT_APPROVED_HERE,
    ReviewItem,
    allowed_by,
    allowed_decisions,
    as_toolset,
    call_span,
    check_claims,
    checked_decisions,
    claim_once,
    deadline_refusal,
    edited_args,
    finish,
    has_deadline,
    now,
    propose,
    refuse_grants,
    review_item,
    review_payload,
    reviewed,
    shown_result,
    trace_ended,
    trace_refusal,
)
from toolguard._enforce.grant_use import check_grant_decisions
from toolguard._enforce.once import Claims
from toolguard._enforce.quorum import (
    add_vote,
    args_digest,
    reviewer_text,
    stored_votes,
    vote_count,
)
from toolguard._enforce.resume import ResumingRunner, apply_decisions
from toolguard._enforce.shadow import ShadowMode, refuse_shadow
from toolguard._enforce.step import Step
from toolguard._policy.decisions import (
    AnyDecision,
    as_decision_list,
    parse_decision,
    validate_decisions,
)
from toolguard._policy.redact import keep_redacted, redact_args, scrub_notes
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.stand_in import get_stand_in
from toolguard._tools.approval import ApprovalPolicy
from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.tool import Tool, as_tool
from toolguard._tools.toolset import Tools, Toolset

__all__ = [
    "NOT_APPROVED_HERE",
    "REJECTED_BY_USER_MESSAGE",
    "AnyDecision",
    "ApproveDecision",
    "Claims",
    "EditDecision",
    "InvalidReviewDecisionError",
    "MayDecide",
    "PendingReview",
    "QuorumProgress",
    "ReviewItem",
    "Reviewers",
    "SchemaTool",
    "ShadowMode",
    "Submission",
    "Tool",
    "ToolCall",
    "Tools",
    "Toolset",
    "UnsupportedPolicyError",
    "Verdict",
    "add_vote",
    "allowed_by",
    "allowed_decisions",
    "answer_with_stand_in",
    "apply",
    "args_digest",
    "as_tool",
    "as_toolset",
    "call_digest",
    "call_span",
    "check_claims",
    "checked_decisions",
    "claim_once",
    "deadline_refusal",
    "edited_args",
    "failure_text",
    "finish",
    "framework_tool",
    "has_deadline",
    "keep_redacted",
    "new_id",
    "now",
    "propose",
    "propose_edits",
    "redact_args",
    "refuse_grants",
    "refuse_shadow",
    "resume_turn",
    "review_item",
    "review_payload",
    "reviewed",
    "reviewer_text",
    "run_body",
    "run_body_sync",
    "shown_result",
    "stored_votes",
    "submit",
    "telemetry",
    "to_json_data",
    "trace_ended",
    "trace_refusal",
    "vote_count",
]

# The framework integrations import the pipeline and toolguard's public names only: what
# they need beyond the three steps is handed on here (see ``__all__``).

MayDecide = Callable[[str | None, list[Action]], Awaitable[bool]]
"""Whether a reviewer may decide these requests (a chat's ``authorize`` hook, on its thread)."""


class _AnyObject:
    """Accepts every JSON object of arguments: the framework's own tool checks them."""

    @staticmethod
    def iter_errors(data: Any) -> list[Any]:
        return []


def _runs_in_its_framework(**args: Any) -> Any:
    msg = "This tool runs in its framework; toolguard only decides about its calls"
    raise RuntimeError(msg)


def framework_tool(
    name: str, approval: ApprovalPolicy | None, redact: Sequence[str] = ()
) -> Tool[..., Any]:
    """A tool its framework runs, known to the policy by name only (LangChain's middleware).

    It takes any JSON object of arguments (the framework's tool validates
    them when it runs) and is never run by toolguard; ``propose`` decides
    about its calls with the rules and ``approval`` (``None``: unguarded).
    ``redact`` (and ``approval.redact``) name its secret parameters.
    """
    secret = (*redact, *(approval.redact if approval is not None else ()))
    parameters = {"type": "object", "properties": {key: {} for key in secret}}
    return SchemaTool(
        name,
        "",
        parameters,
        _runs_in_its_framework,
        approval=approval,
        redact=redact,
        _validator=_AnyObject(),
    )


@dataclass(frozen=True, slots=True)
class Submission:
    """A person's decisions on a paused turn, checked and planned; nothing has changed yet."""

    parsed: list[AnyDecision]
    """The decisions as models, in the order of the waiting actions (notes scrubbed)."""
    plan: quorum.QuorumPlan
    """What they do: settle every action, or keep the review pending with a quorum's progress."""
    withheld: frozenset[str]
    """The ids of the actions whose edit its editor may not decide (it becomes a new review)."""
    reviewer: str | None
    """Who decided."""


async def propose_edits(
    runner: ResumingRunner,
    pending: PendingTurn,
    parsed: Sequence[AnyDecision],
    reviewer: str | None,
    may_decide: MayDecide | None,
    *,
    thread_id: str = "",
) -> frozenset[str]:
    """Ask who may decide each edited call, as if its editor had proposed it.

    For every edit that names a known tool, the request a reviewer would see
    for the edited call is built and ``may_decide(reviewer, [request])`` is
    asked (the ``authorize`` hook with the NEW tool's name and arguments).
    Without a hook every editor may decide (no reviewer list: an edit runs as
    it always did).

    Returns:
        The ids of the waiting actions whose editor may not decide the edited
        call: the edit is recorded, never counted as an approval, and the
        call becomes a new review for the people who may.
    """
    if may_decide is None:
        return frozenset()
    waiting = [a for a in pending.actions if a.status == "requested"]
    calls = {c.id: c for c in pending.calls}
    withheld: set[str] = set()
    for action, decision in zip(waiting, parsed, strict=False):
        if not isinstance(decision, EditDecision):
            continue
        edited = decision.edited_action
        tool = runner.toolset.get(edited.name)
        if tool is None:
            continue  # it fails as an unknown tool; nobody decides it
        args = dict(edited.args)
        real = calls.get(action.call_id)
        if edited.name == action.name and tool.redacted and real is not None:
            args = keep_redacted(edited.args, real.args, tool.redacted)[0]
        call = parse_tool_call(
            {"id": action.call_id, "name": edited.name, "args": args}, limits=runner.limits
        )
        request = review_action(runner, call, tool, thread_id, pending.review_id)
        if not await may_decide(reviewer, [request]):
            withheld.add(action.id)
    return frozenset(withheld)


async def submit(
    runner: ResumingRunner,
    pending: PendingTurn,
    decisions: Any,
    *,
    reviewer: str | int | UUID | None,
    thread_id: str,
    lenient: bool = False,
    grant_scope: GrantScope = "thread",
    keeps_grants: bool = True,
    may_decide: MayDecide | None = None,
) -> Submission:
    """Check and plan a submission of decisions on ``pending`` (pure: nothing changes).

    ``lenient``: the mode of ``Runner.resume``: fewer decisions than actions
    reject the rest, extra ones are ignored; otherwise
    :func:`~toolguard.validate_decisions` checks the count and order first.
    ``keeps_grants``: whether the caller keeps standing grants (a chat does);
    without, an approve carrying one is refused.

    Raises:
        NoPendingReviewError: nothing awaits a decision.
        InvalidReviewDecisionError: the decisions do not answer the review, or
            one of them is not allowed for its action or its grant is refused.
        QuorumReviewerError: an anonymous or repeated reviewer approves a
            quorum action.
    """
    who = quorum.reviewer_text(reviewer)
    waiting = [a for a in pending.actions if a.status == "requested"]
    if not waiting:
        raise NoPendingReviewError
    if lenient:
        parsed = [parse_decision(d) for d in as_decision_list(decisions)[: len(waiting)]]
    else:
        parsed = validate_decisions(pending, decisions, grant_scope=grant_scope)
    check_decisions_allowed(runner.toolset, pending, parsed)  # the tools' own policies
    if not keeps_grants:  # a grant would be dropped: refused, never ignored
        refuse_grants([a.name for a in waiting], parsed, "a Runner")
    parsed = scrub_notes(parsed, pending, runner.toolset)  # no secret quoted in a note
    check_grant_decisions(runner.toolset, pending, parsed)  # quorum tools, ask rules
    withheld = await propose_edits(runner, pending, parsed, who, may_decide, thread_id=thread_id)
    plan = quorum.plan(runner, pending, parsed, who, thread_id, withheld=withheld)
    return Submission(parsed=parsed, plan=plan, withheld=withheld, reviewer=who)


async def apply(
    runner: ResumingRunner, pending: PendingTurn, submission: Submission, thread_id: str
) -> Step:
    """Apply a planned submission: a quorum's progress, or the whole turn.

    See :func:`~toolguard._enforce.resume.apply_decisions`; while
    :mod:`toolguard.testing`'s stand-in reviewer is set, what pauses again is
    answered by it.
    """
    step = await apply_decisions(
        runner,
        pending,
        submission.parsed,
        thread_id,
        submission.reviewer,
        plan=submission.plan,
        withheld=submission.withheld,
    )
    return await answer_with_stand_in(runner, step, thread_id)


async def resume_turn(
    runner: ResumingRunner,
    pending: PendingTurn,
    decisions: Sequence[Any],
    *,
    thread_id: str = "",
    reviewer: str | int | UUID | None = None,
) -> Step:
    """``Runner.resume``: the lenient submission of ``decisions``, then :func:`apply`."""
    check_thread_id(thread_id)
    submission = await submit(
        runner,
        pending,
        decisions,
        reviewer=reviewer,
        thread_id=thread_id,
        lenient=True,
        keeps_grants=False,
    )
    return await apply(runner, pending, submission, thread_id)


async def answer_with_stand_in(runner: ResumingRunner, step: Step, thread_id: str) -> Step:
    """``step``, resumed with the stand-in reviewer's decisions while one is set and it pauses.

    The stand-in is :mod:`toolguard.testing`'s reviewer; without one the
    step is returned as it is.
    """
    stand_in = get_stand_in()
    while stand_in is not None and step.pending is not None:
        waiting = [a for a in step.pending.actions if a.status == "requested"]
        decisions = [stand_in(ToolCall(id=a.call_id, name=a.name, args=a.args)) for a in waiting]
        step = await resume_turn(runner, step.pending, decisions, thread_id=thread_id)
    return step
