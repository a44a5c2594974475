"""Standing grants at work: made by a claimed approve, spent by matching calls, revoked.

Pure functions over a thread's grants; :class:`~toolguard.ReviewedChat`
saves what they return with its compare-and-set save, so a use is spent in
the same save that records it, and two racing turns never spend one use twice.
Grants held beyond one thread (scope ``"server"``, the MCP gateway's) live in
a :class:`SharedGrants` the chat is given: it records them once the review is
claimed and spends them on the calls of new turns.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from toolguard._core.audit import AuditEvent
from toolguard._core.catalog import message
from toolguard._core.errors import InvalidReviewDecisionError
from toolguard._core.records import (
    Action,
    AnyDecision,
    ApproveDecision,
    PendingTurn,
    ToolCall,
    call_digest,
    new_id,
)
from toolguard._core.standing import StandingGrant
from toolguard._policy.allow_once import same_arguments
from toolguard._policy.rules import rule_for
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset


class SharedGrants(Protocol):
    """Grants held beyond one thread (``ReviewedChat.shared_grants``; the MCP gateway's).

    A chat given one accepts grants of scope ``"server"`` (and no longer
    ``"thread"``): the claim of a review records them with :meth:`record`,
    and every new turn offers its calls that would need a review to
    :meth:`spend` before anything runs.
    """

    async def record(
        self, thread_id: str, pending: PendingTurn, grants: Sequence[StandingGrant]
    ) -> None:
        """Keep ``grants``, made by the claim of ``pending`` in ``thread_id``; never raises."""
        ...

    async def spend(
        self, thread_id: str, calls: Sequence[ToolCall], toolset: Toolset, now: datetime
    ) -> tuple[set[str], list[AuditEvent]]:
        """Spend one use per covered call: their ids and the thread's ``granted`` events."""
        ...


def quorum_of(tool: object) -> object:
    """The approvals a tool needs (``approvals`` on the tool or its policy; default 1)."""
    approvals: object = getattr(tool, "approvals", 1)
    if approvals == 1 and type(approvals) is int:
        approvals = getattr(getattr(tool, "approval", None), "approvals", 1)
    return approvals


def single(approvals: object) -> bool:
    """Whether one approval is enough (anything unreadable counts as a quorum: fail closed)."""
    return type(approvals) is int and approvals <= 1


def check_grant_decisions(
    toolset: Toolset, pending: PendingTurn, decisions: Sequence[AnyDecision]
) -> None:
    """Refuse grants a deployment's policy forbids, before anything is claimed.

    A grant is refused for an action whose tool needs a quorum (``approvals``
    above 1: a grant would let later calls skip it) and for one an ``ask``
    rule matched (the rule asks for a review of every such call; grants never
    cover those), and a ``match: "args"`` grant for a tool with redacted
    parameters (the reviewer never saw the secret it would have to match).

    Raises:
        InvalidReviewDecisionError: naming the action and the reason; nothing changed.
    """
    actions = [a for a in pending.actions if a.status == "requested"]
    calls = {c.id: c for c in pending.calls}
    for action, decision in zip(actions, decisions, strict=False):
        if not isinstance(decision, ApproveDecision) or decision.grant is None:
            continue
        tool = toolset.get(action.name)
        approvals = quorum_of(tool)
        shared = decision.grant.scope == "server"  # its arguments are kept as a digest
        if decision.grant.match == "args" and tool is not None and tool.redacted and not shared:
            # The action shows REDACTED where the secret is: a grant on "the same arguments"
            # could only compare what was shown (any secret would match) or keep the secret.
            raise InvalidReviewDecisionError(
                message("grant_redacted", name=repr(action.name), params=sorted(tool.redacted))
            )
        if not single(approvals):
            raise InvalidReviewDecisionError(
                message("grant_quorum", name=repr(action.name), approvals=approvals)
            )
        # The rules read the call's real arguments (the action shows secrets as REDACTED).
        call = calls.get(action.call_id)
        rule = rule_for(toolset.rules, action.name, call.args if call else action.args)
        if rule is not None and rule.effect == "ask":
            raise InvalidReviewDecisionError(
                message("grant_ask_rule", name=repr(action.name), rule=rule.pattern)
            )


def grant_digest(grant: StandingGrant, thread_id: str, key: bytes | None) -> str:
    """The digest of a grant's fixed terms, bound to its thread (see ``StandingGrant.digest``)."""
    return terms_digest(grant, grant.args, thread_id, key)


def terms_digest(
    grant: StandingGrant, args: dict[str, Any] | None, thread_id: str, key: bytes | None
) -> str:
    """The digest of a grant's fixed terms with ``args`` as the arguments it covers."""
    terms = {
        "grant": grant.id,
        "match": grant.match,
        "args": args,
        "uses": grant.uses,
        "expires_at": grant.expires_at.timestamp() if grant.expires_at is not None else None,
        "granted_by": grant.granted_by,
        "action_id": grant.action_id,
    }
    return call_digest(
        grant.tool, terms, key, thread_id=thread_id, review_id=f"grant:{grant.review_id}"
    )


def _genuine(grant: StandingGrant, thread_id: str, key: bytes | None) -> bool:
    """Whether the grant's terms are those it was made with (and its counter within them)."""
    if grant.uses is not None and (grant.uses_left is None or grant.uses_left > grant.uses):
        return False
    if grant.uses is None and grant.uses_left is not None:
        return False
    return hmac.compare_digest(grant.digest, grant_digest(grant, thread_id, key))


def _uses(grant: StandingGrant) -> str:
    return "unlimited" if grant.uses_left is None else str(grant.uses_left)


def _terms(grant: StandingGrant) -> str:
    uses = "no limit" if grant.uses is None else str(grant.uses)
    ttl = "none" if grant.ttl is None else f"{grant.ttl:g} s"
    return f"grant {grant.id}: match {grant.match}, uses {uses}, ttl {ttl}"


def shared_ids(decided: Sequence[Action]) -> set[str]:
    """The actions whose approve carried a grant of scope ``"server"`` (:class:`SharedGrants`)."""
    return {
        a.id
        for a in decided
        if isinstance(a.decision, ApproveDecision)
        and a.decision.grant is not None
        and a.decision.grant.scope == "server"
    }


def made_grants(
    thread_id: str,
    review_id: str,
    decided: Sequence[Action],
    reviewer: str | None,
    now: datetime,
    *,
    key: bytes | None = None,
) -> tuple[list[StandingGrant], list[AuditEvent]]:
    """The grants the claimed approves carry, and their ``grant_created`` events.

    Each grant is its chooser's: the reviewer recorded on the action it was
    decided with (in a quorum review, the one who settled that action, not
    necessarily the one whose approval settled the review); ``reviewer`` only
    for an action that records none.
    """
    grants: list[StandingGrant] = []
    events: list[AuditEvent] = []
    for action in decided:
        decision = action.decision
        if not isinstance(decision, ApproveDecision) or decision.grant is None:
            continue
        chooser = action.reviewer if action.reviewer is not None else reviewer
        terms = decision.grant
        grant = StandingGrant(
            id=new_id(),
            tool=action.name,
            match=terms.match,
            args=dict(action.args) if terms.match == "args" else None,
            uses=terms.uses,
            uses_left=terms.uses,
            ttl=terms.ttl,
            granted_by=chooser,
            granted_at=now,
            expires_at=now + timedelta(seconds=terms.ttl) if terms.ttl is not None else None,
            review_id=review_id,
            action_id=action.id,
        )
        grant = grant.model_copy(update={"digest": grant_digest(grant, thread_id, key)})
        grants.append(grant)
        events.append(
            AuditEvent(
                at=now,
                kind="grant_created",
                thread_id=thread_id,
                review_id=review_id,
                action_id=action.id,
                tool=grant.tool,
                args=grant.args,
                actor=chooser,
                detail=f"{'server ' if terms.scope == 'server' else ''}{_terms(grant)}",
            )
        )
    return grants, events


def _ended(thread_id: str, grant: StandingGrant, now: datetime, why: str) -> AuditEvent:
    return AuditEvent(
        at=now,
        kind="grant_ended",
        thread_id=thread_id,
        review_id=grant.review_id,
        tool=grant.tool,
        actor=grant.granted_by,
        detail=f"grant {grant.id} {why}",
    )


def _covers(grant: StandingGrant, call: ToolCall) -> bool:
    if grant.ended is not None or grant.tool != call.name:
        return False
    return grant.match == "tool" or (
        grant.args is not None and same_arguments(grant.args, call.args)
    )


def use_once(  # noqa: PLR0917 - one use: the grant, the call, where and when
    grant: StandingGrant,
    call: ToolCall,
    tool: Tool[..., Any],
    thread_id: str,
    now: datetime,
    name: str = "grant",
) -> tuple[StandingGrant, AuditEvent]:
    """One use of ``grant`` by ``call``: the grant after it, and the call's ``granted`` event.

    The use that brings ``uses_left`` to 0 marks the grant used up. The event
    belongs to ``thread_id`` (the call's thread), names the grant (``name``
    and its id), who granted it, and the arguments with secrets replaced.
    """
    left = None if grant.uses_left is None else grant.uses_left - 1
    spent = grant.model_copy(
        update={
            "uses_left": left,
            "ended": "used_up" if left == 0 else None,
            "ended_at": now if left == 0 else None,
        }
    )
    event = AuditEvent(
        at=now,
        kind="granted",
        thread_id=thread_id,
        review_id=grant.review_id,
        tool=call.name,
        args=tool.shown_args(call.args),  # secrets as REDACTED
        actor=grant.granted_by,
        detail=f"{name} {grant.id}; uses left: {_uses(spent)}",
    )
    return spent, event


def spend(
    thread_id: str,
    grants: Sequence[StandingGrant],
    calls: Sequence[ToolCall],
    toolset: Toolset,
    now: datetime,
    *,
    key: bytes | None = None,
    covers: Callable[[StandingGrant, ToolCall], bool] | None = None,
    ended_in: str | None = None,
    name: str = "grant",
) -> tuple[list[StandingGrant], list[AuditEvent], set[str]]:
    """Spend uses on ``calls`` (in order): the grants after, the events, the ids covered.

    Each call takes one use of the oldest active grant that matches it: the
    same tool name, exactly (and with ``match="args"`` exactly the same
    arguments, see :func:`~toolguard._policy.allow_once.same_arguments`). A grant found
    past its ``expires_at`` is marked expired instead (``grant_ended``); the
    use that brings ``uses_left`` to 0 marks it used up. A tool that now needs
    a quorum is never covered, and a grant whose digest does not match its
    terms (a rewritten store) covers nothing. Nothing is changed when no
    grant matched.

    The gateway keeps its grants apart from the calls' threads: it gives its
    own ``covers`` check, the thread its ``grant_ended`` events belong to
    (``ended_in``) and the name its ``granted`` events give the grant.
    """
    after = list(grants)
    events: list[AuditEvent] = []
    covered: set[str] = set()
    if covers is None:

        def covers(grant: StandingGrant, call: ToolCall) -> bool:
            return _covers(grant, call) and _genuine(grant, thread_id, key)

    ends = thread_id if ended_in is None else ended_in
    for call in calls:
        tool = toolset.get(call.name)
        if tool is None or tool.name != call.name or not single(quorum_of(tool)):
            continue
        for index, grant in enumerate(after):
            if not covers(grant, call):
                continue
            if grant.status_at(now) == "expired":
                after[index] = grant.model_copy(update={"ended": "expired", "ended_at": now})
                events.append(_ended(ends, grant, now, "expired"))
                continue
            spent, granted = use_once(grant, call, tool, thread_id, now, name)
            after[index] = spent
            events.append(granted)
            if spent.ended == "used_up":
                events.append(_ended(ends, spent, now, "used up"))
            covered.add(call.id)
            break
    return after, events, covered


def revoke(
    thread_id: str, grant: StandingGrant, reviewer: str | None, now: datetime
) -> tuple[StandingGrant, AuditEvent]:
    """The revoked grant and its ``grant_revoked`` event."""
    revoked = grant.model_copy(update={"ended": "revoked", "ended_at": now, "ended_by": reviewer})
    event = AuditEvent(
        at=now,
        kind="grant_revoked",
        thread_id=thread_id,
        review_id=grant.review_id,
        tool=grant.tool,
        actor=reviewer,
        detail=f"grant {grant.id} revoked; uses left: {_uses(grant)}",
    )
    return revoked, event


def replaced(grants: Sequence[StandingGrant], grant: StandingGrant) -> list[StandingGrant]:
    """``grants`` with the one of ``grant``'s id replaced by it."""
    return [grant if g.id == grant.id else g for g in grants]


def only_grants_changed(read: Any, fresh: Any) -> bool:
    """Whether ``fresh`` (a ThreadState) differs from ``read`` only in grants, audit and outbox.

    Such a change (a revocation, another turn's spend, a refusal) is not a
    competing turn: spending is redone on ``fresh``.
    """
    count = len(read.audit)
    if len(fresh.audit) < count or fresh.audit[:count] != read.audit:
        return False
    if len(fresh.audit) == count and fresh.grants == read.grants and fresh.outbox == read.outbox:
        return False  # nothing we can build on: a real conflict
    same = {"version", "updated_at", "audit", "outbox", "posted", "grants"}
    return bool(read.model_dump(exclude=same) == fresh.model_dump(exclude=same))
