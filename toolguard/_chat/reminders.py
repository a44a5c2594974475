"""Reminders of reviews still waiting (``ReviewedChat.remind_after``): a ``review.reminder``
for every channel, once per interval, until the review is decided or expires.

A pass reads the threads awaiting review; one whose review has waited ``n`` intervals
and had fewer than ``n`` reminders gets one more: its outbox items and the count
(``ThreadState.posted[review_id]["reminders"]``) in one compare-and-set save, so two
processes never remind twice for one interval (the loser of the save skips it). After a
pause (a restart), a review gets one reminder, not the ones it missed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from toolguard._chat.threads import Threads, ThreadSettings
from toolguard._core.errors import ConcurrentUpdateError, CorruptThreadError
from toolguard._notify.channels import Channel, reminder_items
from toolguard._stores.protocol import ThreadState

_log = logging.getLogger("toolguard")

__all__ = ["Reminders", "check_remind_after"]


def check_remind_after(value: object) -> float | None:
    """``remind_after`` as seconds (``None``: no reminders).

    Raises:
        TypeError: not a number of seconds, a ``timedelta`` or ``None``.
        ValueError: not positive.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"remind_after must be seconds, a timedelta or None, got {type(value).__name__}"
        raise TypeError(msg)
    if not 0 < value < float("inf"):
        msg = f"remind_after must be a positive number of seconds, got {value}"
        raise ValueError(msg)
    return float(value)


class Reminders:
    """Adds the reminders that are due to the outboxes of a chat's threads."""

    def __init__(self, settings: ThreadSettings, threads: Threads) -> None:
        self.settings = settings
        self.threads = threads
        self.last_pass: datetime | None = None

    async def due(self, channels: Sequence[Channel]) -> int:
        """One pass, when the last one is far enough behind; how many reviews were reminded."""
        every: Any = getattr(self.settings, "remind_after", None)
        if every is None or not channels:
            return 0
        now = self.settings.clock()
        if self.last_pass is not None and (now - self.last_pass).total_seconds() < min(
            every / 4, 30.0
        ):
            return 0
        self.last_pass = now
        lister = getattr(self.settings.store, "thread_ids", None)
        if lister is None:
            return 0
        reminded = 0
        for thread_id in await lister():
            try:
                state = await self.settings.store.load(thread_id)
            except CorruptThreadError:
                continue
            if state is not None and await self._remind(channels, state, float(every)):
                reminded += 1
        return reminded

    async def _remind(self, channels: Sequence[Channel], state: ThreadState, every: float) -> bool:
        pending = state.pending
        if state.status != "awaiting_review" or pending is None:
            return False
        waiting = [a for a in pending.actions if a.status == "requested"]
        if not waiting:
            return False
        now = self.settings.clock()
        deadline = pending.expires_at
        if deadline is not None and deadline <= now:
            return False  # expiring, not reminding
        since = min(a.requested_at for a in waiting)
        intervals = int((now - since).total_seconds() // every)
        kept = state.posted.get(pending.review_id, {})
        sent = kept.get("reminders", 0)
        if intervals < 1 or (isinstance(sent, int) and sent >= intervals):
            return False
        count = (sent if isinstance(sent, int) else 0) + 1
        items = reminder_items(channels, state, pending.review_id, count, now)
        posted = {**state.posted, pending.review_id: {**kept, "reminders": intervals}}
        try:
            await self.threads.write(
                state, state.version, {"outbox": [*state.outbox, *items], "posted": posted}
            )
        except ConcurrentUpdateError:
            return False  # changed meanwhile (decided, or reminded by another process)
        self.threads.outbox_hints.add(state.thread_id)
        _log.info("reminder %d for the review of thread %r", count, state.thread_id)
        return True
