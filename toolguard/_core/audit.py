"""The audit trail: who asked for what, who decided how, and what ran."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from toolguard._core.judgement import Judgement
from toolguard._core.records import EXCLUDE_IF, Action, is_none, new_id, omit_when, trusted
from toolguard._core.shadowing import CandidateVerdict, Would

AuditKind = Literal[
    "requested",
    "decided",
    "refused",
    "executed",
    "failed",
    "rejected",
    "responded",
    "expired",
    "cancelled",
    "interrupted",
    "denied",
    "vote",
    "grant_created",
    "granted",
    "grant_revoked",
    "grant_ended",
    "judged",
    "shadow",
    "candidate",
]


class AuditEvent(BaseModel):
    """One entry of a thread's audit trail.

    Every approval request has a ``requested`` event, at most one
    ``decided`` event (with the reviewer, the decision and the arguments it
    allowed to run), and exactly one final event: ``executed``, ``failed``,
    ``denied``, ``rejected``, ``responded``, ``expired``, ``cancelled`` or
    ``interrupted``
    (an approved call whose deadline passed before it could start has
    ``decided`` then ``expired``). ``refused`` records a reviewer the
    authorization hook (or a reader the access hook) turned away; at most
    ``ReviewedChat.max_recorded_refusals`` of them are kept per review.
    ``denied`` records a call a ``deny`` rule refused: at call time nobody
    was asked, so it has no approval request; an approved or edited call a
    deny rule refuses at resume (the rules may have changed while the review
    waited) ends with a ``denied`` event instead of ``executed``. ``vote``
    records one reviewer's decision on an action of a review that holds a
    quorum action (``requires_approval(approvals=N)``): who, which action, and for an
    approval or edit of the quorum action ``k of N approvals`` in ``detail``;
    the ``decided`` events follow once every action of the review is settled.

    Standing grants: ``grant_created`` (an approve carried a grant; its
    review and action, the reviewer, the tool), ``granted`` (a call ran
    under a grant without a review; ``actor`` is who granted it, ``detail``
    names the grant and the uses left), ``grant_revoked`` (``actor``: who)
    and ``grant_ended`` (used up, or found expired by a matching call).

    ``judged`` records a :class:`~toolguard.Judge`'s verdict on a call
    (``judgement``: risk, outcome, whether the person asked for it, the
    rationale, the model and its latency). For a call the judge approved on
    its own, ``actor`` is ``"judge"``, ``decision`` is ``approve`` and
    ``detail`` the rationale; it has no approval request. In the MCP
    gateway's thread ``toolguard-mcp-proxy-judge`` a ``judged`` event
    without ``judgement`` counts one auto-approval through the gateway (the
    tool and ``digest`` only, never the arguments).

    ``shadow`` records a call that ran at once in shadow mode
    (``ReviewedChat(shadow=True)``) where the enforced policy would have
    asked a person (``would`` ``"ask"``) or, with ``shadow="all"``, refused
    it by a deny rule (``would`` ``"deny"``): ``tool``, ``args`` (secrets
    redacted), ``detail`` (the rule or the tool's policy that would have
    decided) and, with a judge, its verdict as ``judgement``. It has no
    approval request; the call's result follows as usual.

    ``candidate`` records what a candidate policy (``candidate=``) would have
    done with a call, never enforced: ``tool``, ``args`` (secrets redacted),
    ``detail`` (its reason) and ``candidate`` (outcome ``run``, ``ask`` or
    ``deny``, the rule, its judge's verdict, or the error that kept it from
    deciding).

    ``digest`` covers the real arguments, secrets included: it is an
    HMAC-SHA-256 keyed with the chat's ``signing_key`` or, without one, its
    store's own secret, so it lets no reader test guesses of a secret.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(default_factory=new_id)
    """Unique id of the event."""
    at: datetime
    """When it happened (UTC)."""
    kind: AuditKind
    """What happened."""
    thread_id: str
    """The conversation."""
    review_id: str | None = None
    """The review the event belongs to."""
    action_id: str | None = None
    """The approval request, if the event concerns one."""
    tool: str | None = None
    """The tool's name (for ``decided``: the tool the decision lets run)."""
    args: dict[str, Any] | None = None
    """The arguments proposed (``requested``) or allowed to run (``decided``)."""
    actor: str | None = None
    """The reviewer, when known."""
    decision: str | None = None
    """``approve``, ``edit``, ``reject`` or ``respond`` for ``decided`` events."""
    detail: str | None = None
    """The reject reason, the respond message, the result text, or why something was refused."""
    digest: str | None = None
    """Digest of the name and arguments shown for review, bound to the thread and the review
    (``judged``: of the validated call in the thread); keyed, see above."""
    judgement: Judgement | None = Field(None, **omit_when(is_none))
    """The judge's verdict (``judged`` and ``shadow`` events); left out of dumps when ``None``."""
    would: Would | None = Field(None, **omit_when(is_none))
    """What would have happened (``shadow`` events only); left out of dumps when ``None``."""
    candidate: CandidateVerdict | None = Field(None, **omit_when(is_none))
    """The candidate's verdict (``candidate`` events only); left out of dumps when ``None``."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            for name in ("judgement", "would", "candidate"):
                if getattr(self, name) is None:
                    data.pop(name, None)
            return data


def requested_event(thread_id: str, review_id: str, action: Action) -> AuditEvent:
    """The ``requested`` event of an approval request."""
    return trusted(
        AuditEvent,
        {
            "id": new_id(),
            "at": action.requested_at,
            "kind": "requested",
            "thread_id": thread_id,
            "review_id": review_id,
            "action_id": action.id,
            "tool": action.name,
            "args": dict(action.args),
            "actor": None,
            "decision": None,
            "detail": (
                f"expires at {action.expires_at.isoformat()}" if action.expires_at else None
            ),
            "digest": action.digest,
            "judgement": None,
            "would": None,
            "candidate": None,
        },
    )


def final_event(
    thread_id: str, review_id: str | None, action: Action, kind: AuditKind, at: datetime
) -> AuditEvent:
    """The event that closes an approval request."""
    result = action.result
    return trusted(
        AuditEvent,
        {
            "id": new_id(),
            "at": at,
            "kind": kind,
            "thread_id": thread_id,
            "review_id": review_id,
            "action_id": action.id,
            "tool": result.name if result is not None else action.name,
            "args": None,
            "actor": action.reviewer,
            "decision": None,
            "detail": result.content if result is not None else None,
            "digest": None,
            "judgement": None,
            "would": None,
            "candidate": None,
        },
    )


def to_jsonl(events: Iterable[AuditEvent]) -> str:
    """Events as JSON lines (one object per line, keys sorted, newline-terminated)."""
    return "".join(
        json.dumps(event.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n"
        for event in events
    )
