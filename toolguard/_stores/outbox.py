"""Webhook notifications: review events POSTed from a durable outbox in the thread's store.

A save of :class:`~toolguard.ReviewedChat` that records a review event
(``judged``, ``requested``, ``decided``, ``expired`` or ``cancelled`` audit
events) also appends an
:class:`OutboxItem` to ``ThreadState.outbox`` — in the same compare-and-set
save, so an event is never recorded without its notification, nor the other
way round. :meth:`ReviewedChat.deliver_notifications` POSTs the due items,
removes each after a 2xx answer (again compare-and-set) and reschedules a
failed one with exponential backoff. Delivery is at least once: a crash
between the 2xx and the removal sends that item again, with the same ``id``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict

from toolguard._core.audit import AuditEvent
from toolguard._core.records import new_id

NotificationEvent = Literal[
    "review.judged",
    "review.requested",
    "review.decided",
    "review.expired",
    "review.cancelled",
    "review.reminder",
    "review.vote",
    "review.shadow",
]

SIGNATURE_HEADER = "X-Toolguard-Signature"
"""The header carrying ``sha256=<hex HMAC-SHA256 of the raw body with the secret>``."""


class OutboxItem(BaseModel):
    """One notification waiting in a thread's outbox (stored with the thread)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    """The item's id; for a webhook also the event's (``body["id"]``): receivers dedupe by it."""
    channel: str = "webhook"
    """Which channel sends it: ``webhook``, ``slack`` or ``email``."""
    body: dict[str, Any]
    """The JSON body to POST."""
    attempts: int = 0
    """Failed deliveries so far."""
    next_attempt_at: datetime | None = None
    """Not before this time (``None``: at once)."""
    last_error: str | None = None
    """Why the last attempt failed."""


def sign(body: bytes, secret: str) -> str:
    """The ``X-Toolguard-Signature`` value for ``body``: ``sha256=<hex>``."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class Webhook:
    """Where :class:`~toolguard.ReviewedChat` POSTs review events (``notify=``).

    Each event is a JSON object POSTed to ``url`` with the header
    ``X-Toolguard-Signature: sha256=<hex HMAC-SHA256 of the raw body with
    secret>``. A 2xx answer delivers it; anything else (or no answer within
    ``timeout`` seconds) is retried after ``backoff * 2**(attempts-1)``
    seconds, at most ``max_backoff``. Sending needs ``httpx`` (the ``http``
    extra).

    Args:
        url: an ``http://`` or ``https://`` URL.
        secret: the shared secret for the signature (non-empty text).
        timeout: seconds to wait for an answer.
        backoff: seconds before the first retry.
        max_backoff: the longest wait between retries.

    Raises:
        TypeError: ``url`` or ``secret`` is not text, or a number is not a number.
        ValueError: ``url`` is not an http(s) URL, ``secret`` is empty, or a
            number is not positive.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str,
        timeout: float = 10.0,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
    ) -> None:
        _text(url, "url")
        _text(secret, "secret")
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest or rest[0] in "/?#":
            msg = f"url must be an http:// or https:// URL, got {url!r}"
            raise ValueError(msg)
        if not secret:
            msg = "secret must not be empty: receivers verify the signature with it"
            raise ValueError(msg)
        for name, value in (("timeout", timeout), ("backoff", backoff)):
            _positive(value, name)
        _positive(max_backoff, "max_backoff")
        self.url = url
        self.secret = secret
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)

    def __repr__(self) -> str:
        return f"Webhook({self.url!r}, secret='***')"

    def delay(self, attempts: int) -> timedelta:
        """How long to wait after the ``attempts``-th failed attempt."""
        seconds = min(self.backoff * 2 ** min(attempts - 1, 60), self.max_backoff)
        return timedelta(seconds=seconds)

    async def send(self, item: OutboxItem) -> str | None:
        """POST ``item``; ``None`` when delivered (2xx), else why it failed."""
        import httpx  # noqa: PLC0415 - the http extra is optional

        raw = json.dumps(item.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(raw, self.secret),
            "User-Agent": "toolguard-webhook",
        }
        try:
            # A delivery under way finishes when its task is cancelled (e.g. by a server
            # shutting down): a request cancelled halfway would leave its connection open
            # and the receiver unsure whether it counts. httpx's own timeouts bound it.
            with anyio.CancelScope(shield=True):
                async with httpx.AsyncClient(
                    timeout=self.timeout, follow_redirects=False
                ) as client:
                    answer = await client.post(self.url, content=raw, headers=headers)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"[:200]
        if 200 <= answer.status_code < 300:
            return None
        return f"HTTP {answer.status_code}"


def _text(value: object, name: str) -> None:
    if not isinstance(value, str):
        msg = f"{name} must be text, got {type(value).__name__}"
        raise TypeError(msg)


def _positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{name} must be a number of seconds, got {type(value).__name__}"
        raise TypeError(msg)
    if not value > 0:
        msg = f"{name} must be positive, got {value}"
        raise ValueError(msg)


def _item(event: NotificationEvent, now: datetime, **fields: Any) -> OutboxItem:
    event_id = new_id()
    body = {"id": event_id, "event": event, "created_at": now.isoformat(), **fields}
    return OutboxItem(id=event_id, body=body)


def review_items(
    thread_id: str,
    added: Sequence[AuditEvent],
    changes: dict[str, Any],
    now: datetime,
) -> list[OutboxItem]:
    """The notifications for the audit events ``added`` by one save with ``changes``.

    A judge's verdicts come first (``review.judged``, one per call judged, in
    call order: the verdict informed the request or let the call run), then
    the review's own events.
    """
    items: list[OutboxItem] = [
        _item(
            "review.judged",
            now,
            thread_id=thread_id,
            review_id=e.review_id,
            action_id=e.action_id,
            tool=e.tool,
            args=e.args,
            judgement=e.judgement.model_dump(mode="json"),
        )
        for e in added
        if e.kind == "judged" and e.judgement is not None
    ]
    items += [  # shadow mode: a call ran at once where a person would have been asked
        _item(
            "review.shadow",
            now,
            thread_id=thread_id,
            tool=e.tool,
            args=e.args,
            would=e.would,
            reason=e.detail,
            judgement=e.judgement.model_dump(mode="json") if e.judgement else None,
        )
        for e in added
        if e.kind == "shadow"
    ]
    requested = [e for e in added if e.kind == "requested"]
    pending = changes.get("pending")
    if requested and pending is not None:
        items.append(
            _item(
                "review.requested",
                now,
                thread_id=thread_id,
                review_id=pending.review_id,
                pending_review=pending.pending_review.model_dump(mode="json"),
            )
        )
    for kind, event in (
        ("decided", "review.decided"),
        ("expired", "review.expired"),
        ("cancelled", "review.cancelled"),
    ):
        matching = [e for e in added if e.kind == kind]
        for review_id in dict.fromkeys(e.review_id for e in matching):
            group = [e for e in matching if e.review_id == review_id]
            fields: dict[str, Any] = {"thread_id": thread_id, "review_id": review_id}
            if kind == "decided":
                fields["reviewer"] = group[0].actor
                fields["decisions"] = [
                    {
                        "action_id": e.action_id,
                        "type": e.decision,
                        "tool": e.tool,
                        "args": e.args,
                        "message": e.detail,
                    }
                    for e in group
                ]
                fields["statuses"] = {
                    e.action_id: _DECIDED_STATUS.get(e.decision or "", "decided") for e in group
                }
            elif kind == "cancelled":
                fields["reviewer"] = group[0].actor
                fields["reason"] = group[0].detail
                fields["statuses"] = {e.action_id: "cancelled" for e in group}
            else:
                fields["statuses"] = {e.action_id: "expired" for e in group}
            items.append(_item(event, now, **fields))  # type: ignore[arg-type]
    return items


_DECIDED_STATUS = {
    "approve": "approved",
    "edit": "edited",
    "reject": "rejected",
    "respond": "responded",
}
