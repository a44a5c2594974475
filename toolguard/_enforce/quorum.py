"""A quorum of reviewers: ``requires_approval(approvals=N)``.

A submission of decisions on a review that holds a quorum action is first
*planned* here, without changing anything: each decision either settles its
action (a reject, a respond, a missing decision, an approval that completes
the quorum, any decision on an action needing one approval) or adds to the
action's progress (a partial approval, or an edit that restarts the count
for the new arguments). When every action of the turn is settled, the runner
applies the settled decisions as one resume; otherwise the review stays
pending with its progress. See "A quorum of reviewers" in docs/policies.md.
"""

from __future__ import annotations

import hmac
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from toolguard._core.audit import AuditEvent
from toolguard._core.errors import QuorumReviewerError
from toolguard._core.jsonable import clean_text
from toolguard._core.records import (
    Action,
    ApproveDecision,
    EditDecision,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ToolCall,
    call_digest,
    new_id,
)
from toolguard._core.reveal import without_invisible
from toolguard._enforce.actions import RunnerSettings, review_action, unreviewed
from toolguard._enforce.calls import parse_tool_call
from toolguard._enforce.decide import decide
from toolguard._policy.decisions import AnyDecision
from toolguard._policy.redact import keep_redacted, shown_decision
from toolguard._policy.stand_in import get_stand_in

_SPACES = re.compile(r"\s+")
_KEY_ROUNDS = 4
"""At most this many rounds of :func:`reviewer_key`'s clean-up (one or two suffice for real ids)."""


def reviewer_text(reviewer: object, name: str = "reviewer") -> str | None:
    """A reviewer identity as text (``int`` and ``UUID`` with ``str()``); ``None`` stays ``None``.

    Raises:
        TypeError: any other type (``bool`` included).
    """
    if reviewer is None:
        return None
    if isinstance(reviewer, str):
        text: str = clean_text(reviewer)
        return text
    if isinstance(reviewer, UUID) or (isinstance(reviewer, int) and not isinstance(reviewer, bool)):
        return str(reviewer)
    msg = f"{name} must be text, an int, a UUID or None, got {type(reviewer).__name__}"
    raise TypeError(msg)


def reviewer_key(reviewer: str | None) -> str | None:
    """The form two reviewer ids are compared in for a quorum; ``None`` when anonymous.

    NFKC-normalised; format characters and every character the review page
    draws as nothing removed (the page's own list,
    :data:`toolguard._core.reveal.INVISIBLE`: zero-width characters, joiners,
    variation selectors, fillers such as U+3164 and U+2800, controls); runs
    of whitespace collapsed to one space, leading and trailing whitespace
    stripped; case-folded; repeated until nothing changes (a removal can
    make a new composition). ``"Alice"``, ``" alice "``, ``"ALICE\u200b"``
    and ``"alice\u3164"`` are one reviewer; ``7`` and ``"7"`` too. An id
    that is empty after this is anonymous.
    """
    if reviewer is None:
        return None
    key = reviewer
    for _ in range(_KEY_ROUNDS):
        text = unicodedata.normalize("NFKC", key)
        text = without_invisible("".join(ch for ch in text if unicodedata.category(ch) != "Cf"))
        step = _SPACES.sub(" ", text).strip().casefold()
        if step == key:
            break
        key = step
    return key or None


@dataclass(frozen=True, slots=True)
class Vote:
    """One decision of a submission on a review holding a quorum action (a ``vote`` event)."""

    action: Action
    """The action as the decision leaves it (a restarted edit: the new request)."""
    decision: AnyDecision | None
    """The decision as recorded: an edit's secret arguments shown as ``REDACTED``
    (``None``: none was given, on the lenient path)."""
    given: int
    """Approvals of the action's current arguments after this decision."""
    required: int
    """Approvals it needs."""


@dataclass(slots=True)
class QuorumPlan:
    """What a submission does: keep the review pending, or settle every action."""

    pending: PendingTurn | None = None
    """The review still pending, with its progress; ``None`` when every action is settled.
    Like the turn's calls, its settled actions keep their decisions as given (an edit's
    real secret values, to run them): store it as the paused turn, never show it."""
    pairs: list[tuple[Action, AnyDecision | None]] = field(default_factory=list)
    """When settled: each action to finish and its decision, in call order."""
    touched: list[Action] = field(default_factory=list)
    """The actions this submission changed (for the thread's records: decisions as shown)."""
    votes: list[Vote] = field(default_factory=list)
    """One per decision, when the review holds a quorum action (else empty)."""
    calls: list[ToolCall] = field(default_factory=list)
    """The turn's calls as they stand (an edit that restarted a quorum replaces its call)."""


def required_approvals(runner: RunnerSettings, action: Action) -> int:
    """The approvals ``action`` needs: the stored count or the tool's policy, whichever is more.

    The tool's code wins over a lower stored value, so a rewritten store
    cannot shrink a quorum.
    """
    tool = runner.toolset.get(action.name)
    policy = tool.approvals if tool is not None else 1
    return max(action.approvals_required, policy, 1)


def held_actions(pending: PendingTurn) -> list[Action]:
    """Actions already settled while others of the turn wait (no result yet)."""
    return [a for a in pending.actions if a.status != "requested" and a.result is None]


def plan(  # noqa: PLR0915 - one flat pass over the decisions reads best
    runner: RunnerSettings,
    pending: PendingTurn,
    parsed: list[AnyDecision],
    reviewer: str | None,
    thread_id: str,
    *,
    withheld: frozenset[str] = frozenset(),
) -> QuorumPlan:
    """Plan a submission (pure: raises before anything changes, see the module docstring).

    ``withheld``: the actions whose edit its editor may not decide: an edit of
    one of them restarts the count without the editor's vote.

    Raises:
        QuorumReviewerError: an anonymous reviewer approves or edits a quorum
            action, or a reviewer approves one they already approved.
    """
    waiting = [a for a in pending.actions if a.status == "requested"]
    held = held_actions(pending)
    needs = {a.id: required_approvals(runner, a) for a in waiting}
    if get_stand_in() is not None or (not held and all(n <= 1 for n in needs.values())):
        # No quorum (or toolguard.testing's stand-in decides): settle every action at once.
        padded: list[AnyDecision | None] = [*parsed[: len(waiting)]]
        padded += [None] * (len(waiting) - len(padded))
        return QuorumPlan(pairs=list(zip(waiting, padded, strict=True)), calls=list(pending.calls))
    key = reviewer_key(reviewer)
    now = runner.clock()
    calls = list(pending.calls)
    position = {c.id: i for i, c in enumerate(calls)}
    replaced = list(pending.replaced_calls)
    out = QuorumPlan()
    after: dict[str, Action] = {}  # action id -> the action as this submission leaves it
    fresh: dict[str, Action] = {}  # replaced action id -> its restarted request
    for i, action in enumerate(waiting):
        decision = parsed[i] if i < len(parsed) else None
        required = needs[action.id]
        settled = {"decision": decision, "decided_at": now, "reviewer": reviewer}
        shown = shown_decision(decision, runner.toolset)  # what the records say
        if required <= 1 or not isinstance(decision, (ApproveDecision, EditDecision)):
            status = _status(decision)
            after[action.id] = action.model_copy(update={**settled, "status": status})
            out.votes.append(Vote(after[action.id], shown, len(action.approved_by), required))
            continue
        if key is None:
            raise QuorumReviewerError(None, action.name, required, action.approved_by)
        if isinstance(decision, ApproveDecision):
            if any(reviewer_key(b) == key for b in action.approved_by):
                raise QuorumReviewerError(reviewer, action.name, required, action.approved_by)
            by = [*action.approved_by, reviewer or ""]
            update: dict[str, Any]
            if len(by) >= required:
                update = {**settled, "status": "approved", "approved_by": by}
            else:
                update = {"approved_by": by, "approvals_required": required}
            after[action.id] = action.model_copy(update=update)
            out.votes.append(Vote(after[action.id], shown, len(by), required))
            continue
        restarted = _restart(
            runner,
            action,
            calls[position[action.call_id]],
            decision,
            required=required,
            thread_id=thread_id,
            review_id=pending.review_id,
        )
        if restarted is None:
            # The edit can never run (unknown tool, bad arguments, a deny rule, a secret no
            # longer at hand): it settles now and the resume gives the model the error, as for
            # any edit.
            after[action.id] = action.model_copy(update={**settled, "status": "edited"})
            out.votes.append(Vote(after[action.id], shown, 0, required))
            continue
        new_call, request = restarted
        # The editor's vote counts only when the editor may decide the edited call.
        if action.id not in withheld:
            request = editor_vote(request, reviewer)
        by = request.approved_by
        calls[position[new_call.id]] = new_call
        replaced = [c for c in replaced if c.id != new_call.id] + [new_call]
        # The replaced request is finished: only its record remains, with the edit as shown.
        after[action.id] = action.model_copy(
            update={**settled, "decision": shown, "status": "edited", "finished_at": now}
        )
        fresh[action.id] = request
        out.votes.append(Vote(after[action.id], shown, len(by), request.approvals_required))
    changed = [after[a.id] for a in waiting]
    if not fresh and all(a.status != "requested" for a in changed):
        settled_all = {a.id: a for a in [*held, *changed]}
        order = {c.id: i for i, c in enumerate(calls)}
        ordered = sorted(settled_all.values(), key=lambda a: order.get(a.call_id, len(order)))
        out.pairs = [(a, a.decision) for a in ordered]
        out.calls = calls
        return out
    # Still pending: the review keeps its id unless an edit restarted a count, which
    # binds the new arguments (and everything carried along) to a new review id.
    review_id = new_id() if fresh else pending.review_id
    kept: list[Action] = []
    for action in pending.actions:
        current = after.get(action.id, action)
        real = calls[position[action.call_id]].args  # the digests cover the real arguments
        if action.id in fresh:
            # The new request, bound to the new review.
            kept.append(_bind(runner, fresh[action.id], real, review_id, thread_id))
            continue
        if current.result is not None:
            kept.append(current)  # finished earlier in this turn: unchanged
            continue
        kept.append(
            _rebound(
                runner,
                current,
                real,
                old_review=pending.review_id,
                new_review=review_id,
                thread_id=thread_id,
            )
        )
    actions = kept
    out.pending = PendingTurn(
        review_id=review_id,
        calls=calls,
        results=list(pending.results),
        actions=actions,
        replaced_calls=replaced,
    )
    out.calls = calls
    by_id = {a.id: a for a in actions}
    out.votes = [
        Vote(by_id.get(v.action.id, v.action), v.decision, v.given, v.required) for v in out.votes
    ]
    out.touched = [shown_action(runner, a) for a in _unique([*changed, *actions])]
    return out


def editor_vote(request: Action, editor: str | None) -> Action:
    """``request`` (the new request an edit made) with its editor's approval counted.

    Call it only when the editor may decide the edited call. An anonymous
    editor's vote is not counted (a quorum needs named reviewers).
    """
    if reviewer_key(editor) is None:
        return request
    return request.model_copy(update={"approved_by": [editor]})


def shown_action(runner: RunnerSettings, action: Action) -> Action:
    """``action`` as the thread's records keep it: an edit's secret arguments as ``REDACTED``."""
    decision = shown_decision(action.decision, runner.toolset)
    return (
        action if decision is action.decision else action.model_copy(update={"decision": decision})
    )


def _unique(actions: list[Action]) -> list[Action]:
    seen: dict[str, Action] = {}
    for action in actions:
        seen[action.id] = action
    return list(seen.values())


def _status(decision: AnyDecision | None) -> str:
    if decision is None or isinstance(decision, RejectDecision):
        return "rejected"
    if isinstance(decision, RespondDecision):
        return "responded"
    return "approved" if isinstance(decision, ApproveDecision) else "edited"


def _restart(
    runner: RunnerSettings,
    action: Action,
    call: ToolCall,
    decision: EditDecision,
    *,
    required: int,
    thread_id: str,
    review_id: str,
) -> tuple[ToolCall, Action] | None:
    """The call and request an edit of a quorum action restarts; ``None``: it settles now.

    ``None`` when the edit can never run (unknown tool, bad arguments, a deny
    rule, a secret no longer at hand) and when the edited call needs no
    quorum (a renamed call decided afresh): the resume then decides it.

    A redacted parameter of the same tool left as ``REDACTED`` keeps this
    call's real value, once the call is proven to be the reviewed one (as a
    single reviewer's edit does, see :meth:`Runner.resume`).
    """
    edited = decision.edited_action
    tool = runner.toolset.get(edited.name)
    if tool is None:
        return None
    args = dict(edited.args)
    if edited.name == action.name and tool.redacted:
        args, kept = keep_redacted(edited.args, call.args, tool.redacted)
        if (
            kept
            and unreviewed(runner, action, call, tool, thread_id=thread_id, review_id=review_id)
            is not None
        ):
            return None  # the resume gives the model why (tampered, or the secret is gone)
    new_call = parse_tool_call(
        {"id": call.id, "name": edited.name, "args": args}, limits=runner.limits
    )
    # An edit is a new proposal: decided afresh (limits, deny rules, schema, ask rules, policy).
    verdict = decide(runner.toolset, new_call)
    if verdict.outcome == "deny":
        return None
    # A renamed call needs what its own tool needs; the same tool keeps the larger count.
    renamed = edited.name != action.name
    required = verdict.approvals if renamed else max(required, verdict.approvals)
    if required <= 1:
        return None  # no quorum left: the edit settles now, and the resume decides it
    request = review_action(runner, new_call, tool, thread_id, "")  # one request shape
    update: dict[str, Any] = {"approvals_required": required}
    if not request.allowed_decisions:
        update["allowed_decisions"] = list(action.allowed_decisions)
    return new_call, request.model_copy(update=update)


def _bind(
    runner: RunnerSettings, action: Action, args: dict[str, Any], review_id: str, thread_id: str
) -> Action:
    """``action`` bound to ``review_id``: the digest of its call's real ``args``."""
    digest = call_digest(
        action.name, args, runner.signing_key, thread_id=thread_id, review_id=review_id
    )
    return action.model_copy(update={"digest": digest})


def _rebound(
    runner: RunnerSettings,
    action: Action,
    args: dict[str, Any],
    *,
    old_review: str,
    new_review: str,
    thread_id: str,
) -> Action:
    """``action`` bound to ``new_review``, only when its digest holds for ``old_review``.

    ``args`` are the real arguments of its call (secrets included: the
    digest covers them). A digest that does not hold (a rewritten store, a
    secret no longer at hand) is kept as it is, so the action still fails
    closed (``TAMPERED`` or ``SECRET_GONE``) when it is approved.
    """
    if old_review == new_review:
        return action
    expected = call_digest(
        action.name, args, runner.signing_key, thread_id=thread_id, review_id=old_review
    )
    if not hmac.compare_digest(action.digest, expected):
        return action
    return _bind(runner, action, args, new_review, thread_id)


def progress_text(given: int, required: int) -> str:
    """``"1 of 2 approvals"``: the detail of a ``vote`` event."""
    return f"{given} of {required} approvals"


def vote_detail(vote: Vote) -> str | None:
    """The ``detail`` of a vote's audit event: the progress of an approval or edit of a quorum."""
    if vote.required <= 1 or not isinstance(vote.decision, (ApproveDecision, EditDecision)):
        return None
    return progress_text(vote.given, vote.required)


def vote_args(vote: Vote) -> dict[str, Any] | None:
    """The arguments a vote approved (an edit: the new ones, as shown); ``None`` for a reject."""
    if isinstance(vote.decision, EditDecision):
        return vote.decision.edited_action.args
    if isinstance(vote.decision, ApproveDecision):
        return vote.action.args
    return None


def vote_events(
    thread_id: str, review_id: str, votes: list[Vote], reviewer: str | None, now: datetime
) -> list[AuditEvent]:
    """The ``vote`` audit events of a submission (``review_id``: the review it answered)."""
    return [
        AuditEvent(
            at=now,
            kind="vote",
            thread_id=thread_id,
            review_id=review_id,
            action_id=vote.action.id,
            tool=vote.action.name,
            args=vote_args(vote),
            actor=reviewer,
            decision=vote.decision.type if vote.decision is not None else None,
            detail=vote_detail(vote),
            digest=vote.action.digest,
        )
        for vote in votes
    ]


# --------------------------------------------------------------------------- framework votes
# The framework integrations keep a quorum's votes in their own paused state; they are
# counted here, like the chat's.


def args_digest(name: str, args: Mapping[str, Any]) -> str:
    """What a quorum's votes approved: the call's name and real arguments, digested."""
    return call_digest(name, dict(args))


def add_vote(name: str, required: int, by: Sequence[str], reviewer: object) -> list[str]:
    """``by`` plus ``reviewer``'s approval of a call that needs ``required`` approvals.

    Raises:
        QuorumReviewerError: ``reviewer`` is anonymous (``None`` or blank), or
            already approved these arguments; nothing changed.
        TypeError: ``reviewer`` is not text, an ``int`` or a ``UUID``.
    """
    text = reviewer_text(reviewer)
    key = reviewer_key(text)
    if key is None:
        raise QuorumReviewerError(None, name, required, list(by))
    if any(reviewer_key(other) == key for other in by):
        raise QuorumReviewerError(text, name, required, list(by))
    return [*by, text or ""]


def vote_count(by: Sequence[Any]) -> int:
    """How many distinct, named reviewers are in ``by`` (the same one twice counts once)."""
    keys = {reviewer_key(b) for b in by if isinstance(b, str)}
    keys.discard(None)
    return len(keys)


def stored_votes(record: Any, name: str, args: Mapping[str, Any]) -> list[str]:
    """The reviewers a stored ``{"by", "digest"}`` record holds for this very call, or ``[]``."""
    if not isinstance(record, Mapping) or record.get("digest") != args_digest(name, args):
        return []
    by = record.get("by")
    return [b for b in by if isinstance(b, str)] if isinstance(by, list) else []
