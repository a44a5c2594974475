"""Standing grants: "approve, and stop asking for this in this conversation".

An approve decision may carry a grant (:class:`GrantTerms`, the wire's
``{"scope": "thread", "match": "tool" | "args", "uses": 5, "ttl": 3600}``).
When the review is claimed, the chat stores a :class:`StandingGrant` in the
thread's state; later calls of the same thread that match it run without a
review while it is active (see docs/policies.md, "Standing grants").

This module holds the data only (it imports nothing of toolguard's models, so
``_models`` can use :class:`GrantTerms` in ``ApproveDecision``); the checks
live in :mod:`toolguard._policy.decisions` and the use in :mod:`toolguard._enforce.grant_use`.
"""

from __future__ import annotations

import math
import reprlib
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from toolguard._core.catalog import message

GrantMatch = Literal["tool", "args"]
"""``tool``: later calls of the same tool; ``args``: only those with the same arguments too."""

GrantScope = Literal["thread", "server"]
"""``thread``: the conversation of the review (:class:`~toolguard.ReviewedChat`);
``server``: every later call through the MCP gateway (``toolguard mcp-proxy``)."""

GrantEnd = Literal["used_up", "expired", "revoked"]
"""Why a grant is no longer active."""

GrantStatus = Literal["active", "used_up", "expired", "revoked"]
"""A grant's status at a given moment."""

GRANT_KEYS: Final[tuple[str, ...]] = ("scope", "match", "uses", "ttl")
"""The keys a grant may have."""

MAX_GRANT_USES: Final = 10_000
"""The most ``uses`` a grant may have."""

MAX_GRANT_TTL: Final = 366 * 24 * 3600
"""The longest ``ttl`` a grant may have, in seconds (366 days)."""

_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40


def shown(value: Any) -> str:
    """A short ``repr`` of a refused value, for error texts."""
    return _short.repr(value)


def terms_problem(
    data: dict[str, Any], scope: GrantScope = "thread"
) -> tuple[str, dict[str, object]] | None:
    """The catalog key and values of the first problem of a grant's fields, or ``None``.

    Checks, in order: unknown keys, ``scope`` (it must be ``scope``: ``"thread"``
    in a chat, ``"server"`` in the MCP gateway), ``match``, ``uses``, ``ttl``.
    ``bool`` is never a number here.
    """
    unknown = sorted(str(k) for k in data if k not in GRANT_KEYS)
    if unknown:
        return "grant_keys", {"keys": unknown, "allowed": list(GRANT_KEYS)}
    given = data.get("scope")
    if not (isinstance(given, str) and given == scope):
        if scope == "server":
            return "grant_scope_gateway", {"value": shown(given)}
        if isinstance(given, str) and given == "server":
            return "grant_scope_server", {}
        return "grant_scope", {"value": shown(given)}
    match = data.get("match")
    if not (isinstance(match, str) and match in ("tool", "args")):
        return "grant_match", {"value": shown(match)}
    uses = data.get("uses")
    if uses is not None and (type(uses) is not int or not 1 <= uses <= MAX_GRANT_USES):
        return "grant_uses", {"value": shown(uses), "limit": MAX_GRANT_USES}
    ttl = data.get("ttl")
    if ttl is not None and (
        type(ttl) not in (int, float) or not math.isfinite(ttl) or not 0 < ttl <= MAX_GRANT_TTL
    ):
        return "grant_ttl", {"value": shown(ttl), "limit": MAX_GRANT_TTL}
    return None


class GrantTerms(BaseModel):
    """What a reviewer grants with an approve: the ``grant`` of an approve decision.

    Built from the wire's ``{"scope": "thread", "match": "tool" | "args",
    "uses": 5, "ttl": 3600}``. Constructing it checks the fields like
    :func:`~toolguard.validate_decisions` does (a ``ValidationError`` here,
    an ``InvalidReviewDecisionError`` there).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: GrantScope = "thread"
    """Where the grant holds: ``"thread"`` (the conversation of the review), or
    ``"server"`` (every later call through the MCP gateway; accepted there only)."""
    match: GrantMatch
    """``"tool"``: any later call of the tool; ``"args"``: only with exactly the same arguments."""
    uses: int | None = None
    """How many later calls it covers (1 to 10,000); ``None``: no count."""
    ttl: float | None = None
    """How long it holds, in seconds from the decision (at most 366 days); ``None``: no limit."""

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, data: Any) -> Any:
        if isinstance(data, dict):
            scope: GrantScope = "server" if data.get("scope") == "server" else "thread"
            problem = terms_problem({"scope": "thread", **data}, scope)
            if problem is not None:
                raise ValueError(message(problem[0], **problem[1]))
        return data


class StandingGrant(BaseModel):
    """A grant stored in a thread (``ThreadState.grants``), active or ended.

    Ended grants stay listed with why (``ended``) and when, so the thread
    shows every grant it ever had; one is made per approve that carried a
    ``grant``, so the list grows with the reviews, never with the calls.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    """Unique id; the handle for revoking it."""
    tool: str
    """The tool whose calls it covers (compared exactly)."""
    match: GrantMatch
    """``"tool"`` or ``"args"`` (see :class:`GrantTerms`)."""
    args: dict[str, Any] | None = None
    """For ``match="args"``: the arguments a call must have, exactly; else ``None``."""
    uses: int | None = None
    """The uses granted (``None``: no count)."""
    uses_left: int | None = None
    """The uses not spent yet (``None``: no count)."""
    ttl: float | None = None
    """The ``ttl`` granted, in seconds (``None``: no limit)."""
    granted_by: str | None = None
    """The reviewer whose decision made it."""
    granted_at: datetime
    """When the decision was claimed."""
    expires_at: datetime | None = None
    """From this moment on it covers nothing (``granted_at + ttl``)."""
    review_id: str
    """The review whose decision made it."""
    action_id: str
    """The approval request whose approve carried it."""
    ended: GrantEnd | None = None
    """``None`` while it may be active; else why it ended (as recorded)."""
    ended_at: datetime | None = None
    """When it was recorded as ended."""
    ended_by: str | None = None
    """Who revoked it."""
    digest: str = ""
    """Digest of its fixed terms (tool, match, args, uses, expiry, origin), bound to the
    thread (HMAC with the chat's ``signing_key``); a grant that does not match it covers
    nothing, so a rewritten store cannot widen a grant."""

    def status_at(self, now: datetime) -> GrantStatus:
        """``active``, or why not, at ``now`` (an expiry needs no save to count)."""
        if self.ended is not None:
            return self.ended
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"
