"""The notification channels of a chat behind one durable outbox (:class:`Channel`).

A chat's ``notify`` is a :class:`~toolguard.Webhook`, a :class:`~toolguard.Slack`, an
:class:`~toolguard.Email`, or a list of them (at most one of each). Each save that records
review events appends one :class:`~toolguard._stores.outbox.OutboxItem` per event and per
channel that wants it (:func:`outbox_items`), in the same compare-and-set save as the events;
:mod:`toolguard._chat.notifications` leases, sends and retries each item with its channel's
back-off, in order within a channel, so a channel that is down never holds the others up.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

from toolguard._core import checks as check
from toolguard._core.audit import AuditEvent
from toolguard._core.records import new_id
from toolguard._stores.outbox import OutboxItem, Webhook, review_items

if TYPE_CHECKING:
    from toolguard._stores.protocol import ThreadState

__all__ = [
    "Channel",
    "Notify",
    "Retrying",
    "Sent",
    "WebhookChannel",
    "backoff_delay",
    "channels_of",
    "check_notify",
    "check_seconds",
    "outbox_items",
    "reminder_items",
]


class Sent(NamedTuple):
    """How one send went: ``error`` is ``None`` when delivered, else why it failed.

    ``memo``: what the channel keeps for the item's review in ``ThreadState.posted``
    (a Slack message's channel and ``ts``), saved with the item's removal.
    """

    error: str | None
    memo: dict[str, Any] | None = None


@runtime_checkable
class Channel(Protocol):
    """One way of reaching reviewers: what it sends, how, and how long it waits to retry."""

    name: str
    """``webhook``, ``slack`` or ``email``: the ``channel`` of its outbox items."""
    timeout: float
    """Seconds one send may take (the lease is twice that, plus 5 s)."""

    def delay(self, attempts: int) -> timedelta:
        """How long to wait after the ``attempts``-th failed attempt."""
        ...

    def wants(self, event: str) -> bool:
        """Whether the channel sends events of this kind (``review.requested``, ...)."""
        ...

    async def send(self, item: OutboxItem, state: ThreadState) -> Sent:
        """Send ``item`` of the thread ``state`` (as stored now); never raises for a failure."""
        ...


def check_seconds(**numbers: object) -> None:
    """Refuse a number of seconds that is not a positive number (``ValueError``)."""
    for label, number in numbers.items():
        if isinstance(number, bool) or not isinstance(number, int | float) or not number > 0:
            msg = f"{label} must be a positive number of seconds, got {number!r}"
            raise ValueError(msg)


def backoff_delay(backoff: float, max_backoff: float, attempts: int) -> timedelta:
    """``backoff * 2**(attempts-1)`` seconds, at most ``max_backoff``."""
    return timedelta(seconds=min(backoff * 2 ** min(attempts - 1, 60), max_backoff))


class Retrying:
    """A channel's timeout and back-off, as a webhook's: checked, kept, and the delay."""

    timeout: float
    backoff: float
    max_backoff: float

    def _retrying(self, timeout: float, backoff: float, max_backoff: float) -> None:
        """Check and keep the seconds (``ValueError``: one is not a positive number)."""
        check_seconds(timeout=timeout, backoff=backoff, max_backoff=max_backoff)
        self.timeout = float(timeout)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)

    def delay(self, attempts: int) -> timedelta:
        """How long to wait after the ``attempts``-th failed attempt."""
        return backoff_delay(self.backoff, self.max_backoff, attempts)


class WebhookChannel:
    """A :class:`~toolguard.Webhook` as a channel: every event but the Slack-only votes."""

    name = "webhook"

    def __init__(self, webhook: Webhook) -> None:
        self.webhook = webhook
        self.timeout = webhook.timeout

    def delay(self, attempts: int) -> timedelta:
        return self.webhook.delay(attempts)

    def wants(self, event: str) -> bool:
        return event != "review.vote"

    async def send(self, item: OutboxItem, state: ThreadState) -> Sent:
        return Sent(await self.webhook.send(item))


Notify: TypeAlias = "Webhook | Channel | Sequence[Webhook | Channel] | None"
"""What ``ReviewedChat(notify=...)`` takes."""


def check_notify(value: object) -> None:
    """Refuse a ``notify`` that is not a channel, a list of channels, or ``None``.

    Raises:
        TypeError: something else was given.
        ValueError: two channels of the same kind.
    """
    channels_of(value)


def channels_of(notify: object) -> tuple[Channel, ...]:
    """The channels of a chat's ``notify`` (see :data:`Notify`), in the order given.

    Raises:
        TypeError: an item is not a ``Webhook``, ``Slack`` or ``Email``.
        ValueError: two channels of the same kind.
    """
    if notify is None:
        return ()
    items: Sequence[object] = list(notify) if isinstance(notify, (list, tuple)) else [notify]
    found: list[Channel] = []
    for item in items:
        if isinstance(item, Webhook):
            found.append(WebhookChannel(item))
        elif isinstance(item, Channel) and not isinstance(item, type):
            found.append(item)
        else:
            msg = (
                "notify must be a toolguard.Webhook, Slack or Email, a list of them, or None,"
                f" got {check.kind(item)}"
            )
            raise TypeError(msg)
    names = [c.name for c in found]
    for name in names:
        if names.count(name) > 1:
            msg = f"notify has more than one {name} channel: give at most one of each"
            raise ValueError(msg)
    return tuple(found)


def _vote_items(thread_id: str, added: Sequence[AuditEvent], now: datetime) -> list[OutboxItem]:
    """One ``review.vote`` per review with votes in ``added``: a quorum's progress to show."""
    items = []
    for review_id in dict.fromkeys(e.review_id for e in added if e.kind == "vote"):
        event_id = new_id()
        body = {
            "id": event_id,
            "event": "review.vote",
            "created_at": now.isoformat(),
            "thread_id": thread_id,
            "review_id": review_id,
        }
        items.append(OutboxItem(id=event_id, body=body))
    return items


def outbox_items(
    channels: Sequence[Channel],
    thread_id: str,
    added: Sequence[AuditEvent],
    changes: dict[str, Any],
    now: datetime,
) -> list[OutboxItem]:
    """The outbox items of one save's audit events ``added``: each event, once per channel
    that wants it (a webhook's item keeps the event's id as its own)."""
    if not channels:
        return []
    events = review_items(thread_id, added, changes, now) + _vote_items(thread_id, added, now)
    return _per_channel(channels, events)


def reminder_items(
    channels: Sequence[Channel], state: ThreadState, review_id: str, count: int, now: datetime
) -> list[OutboxItem]:
    """The ``review.reminder`` items of the ``count``-th reminder of a review still waiting."""
    pending = state.pending
    if pending is None:
        return []
    event_id = new_id()
    body = {
        "id": event_id,
        "event": "review.reminder",
        "created_at": now.isoformat(),
        "thread_id": state.thread_id,
        "review_id": review_id,
        "reminder": count,
        "pending_review": pending.pending_review.model_dump(mode="json"),
    }
    return _per_channel(channels, [OutboxItem(id=event_id, body=body)])


def _per_channel(channels: Sequence[Channel], events: Sequence[OutboxItem]) -> list[OutboxItem]:
    items: list[OutboxItem] = []
    for event in events:
        kind = str(event.body.get("event"))
        for channel in channels:
            if not channel.wants(kind):
                continue
            if channel.name == "webhook":
                items.append(event)
            else:
                items.append(
                    event.model_copy(
                        update={"id": f"{event.id}.{channel.name}", "channel": channel.name}
                    )
                )
    return items
