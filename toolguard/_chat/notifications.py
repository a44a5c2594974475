"""Delivery of a ReviewedChat's notifications: the due outbox items of its threads, in order.

The items are written by the chat's saves (see :mod:`toolguard._notify.channels`); this
sends them, each through its channel (webhook, Slack, email): an item is leased with a
compare-and-set save before it is sent (so two processes do not both send it) and removed
after it was delivered (with what its channel keeps of the review, e.g. a Slack message's
``ts``, in the same save), or rescheduled after its channel's backoff. Items of one channel
go in order; a channel that fails waits without holding the others up. Reminders of reviews
still waiting (``remind_after``) are added by :mod:`toolguard._chat.reminders`.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta
from typing import Any

import anyio

from toolguard._chat.reminders import Reminders
from toolguard._chat.threads import Save, Threads, ThreadSettings, no_save, retry_on_conflict
from toolguard._core.errors import ConcurrentUpdateError, CorruptThreadError
from toolguard._notify.channels import Channel, channels_of
from toolguard._stores.outbox import OutboxItem
from toolguard._stores.protocol import ThreadState

_log = logging.getLogger("toolguard")


class Notifications:
    """Delivers the notifications in the outboxes of a chat's threads, through its channels."""

    def __init__(self, settings: ThreadSettings, threads: Threads) -> None:
        self.settings = settings
        self.threads = threads
        self.scanned = False
        """Whether every stored thread was looked at since the last rescan."""
        self.reminders = Reminders(settings, threads)

    async def deliver(self) -> int:
        """One delivery pass (see ``ReviewedChat.deliver_notifications``)."""
        channels = channels_of(self.settings.notify)
        if not channels:
            return 0
        await self.reminders.due(channels)
        hints = self.threads.outbox_hints
        if not self.scanned:
            lister = getattr(self.settings.store, "thread_ids", None)
            if lister is not None:
                hints.update(await lister())
            self.scanned = True
        delivered = 0
        for thread_id in sorted(hints):
            hints.discard(thread_id)
            try:
                done, left = await self._deliver_thread(channels, thread_id)
            except CorruptThreadError as exc:
                _log.warning("notifications skipped thread %r: %s", exc.thread_id, exc.reason)
                continue
            delivered += done
            if left:
                hints.add(thread_id)
        return delivered

    async def run(self, *, interval: float, rescan: float) -> None:
        """Deliver every ``interval`` seconds, rescanning every ``rescan``, until cancelled."""
        waited = 0.0
        while True:
            try:
                await self.deliver()
            except Exception:  # a down database must not end the loop
                _log.exception("notification delivery pass failed")
            await anyio.sleep(interval)
            waited += interval
            if waited >= rescan:
                waited = 0.0
                self.scanned = False

    async def _read(self, thread_id: str) -> ThreadState | None:
        return await self.settings.store.load(thread_id)

    async def _deliver_thread(
        self, channels: tuple[Channel, ...], thread_id: str
    ) -> tuple[int, bool]:
        """Deliver one thread's due notifications: (how many were delivered, any left)."""
        clock = self.settings.clock
        by_name = {channel.name: channel for channel in channels}
        failed_now: set[str] = set()  # channels that failed in this pass: they wait

        async def lease(
            state: ThreadState | None,
        ) -> Save[tuple[OutboxItem | None, ThreadState | None, bool]]:
            """Lease the first due item of a channel: (the item, the thread, any left)."""
            if state is None or not state.outbox:
                return await no_save((None, None, False))
            now = clock()
            seen: set[str] = set()
            left = False
            for item in state.outbox:
                if item.channel in seen:  # one channel's items go in order
                    left = True
                    continue
                seen.add(item.channel)
                channel = by_name.get(item.channel)
                if channel is None:
                    return self._drop(state, item)
                if item.channel in failed_now or (
                    item.next_attempt_at is not None and item.next_attempt_at > now
                ):
                    left = True
                    continue
                until = now + timedelta(seconds=channel.timeout * 2 + 5)
                leased = item.model_copy(update={"next_attempt_at": until})

                async def save(
                    state: ThreadState = state, item: OutboxItem = item, leased: OutboxItem = leased
                ) -> tuple[OutboxItem | None, ThreadState | None, bool]:
                    saved = await self._replace(state, item.id, leased)
                    return item, saved, True

                return save
            return await no_save((None, None, left))

        async def read_again(_: object, __: ConcurrentUpdateError) -> ThreadState | None:
            return await self._read(thread_id)

        delivered = 0
        while True:
            item, state, left = await retry_on_conflict(
                lease, await self._read(thread_id), read_again
            )
            if item is None or state is None:
                if item is not None:  # a dropped item: look again
                    continue
                return delivered, left
            channel = by_name[item.channel]
            sent = await channel.send(item, state)
            if sent.error is None:
                delivered += 1
                await self._update(thread_id, item.id, None, sent.memo)
                continue
            attempts = item.attempts + 1
            wait = channel.delay(attempts)
            failed = item.model_copy(
                update={
                    "attempts": attempts,
                    "next_attempt_at": clock() + wait,
                    "last_error": sent.error,
                }
            )
            _log.warning(
                "%s notification %s for thread %r failed (%s); attempt %d, retried in %d s",
                item.channel,
                item.body.get("event"),
                thread_id,
                sent.error,
                attempts,
                math.ceil(wait.total_seconds()),
            )
            await self._update(thread_id, item.id, failed, None)
            failed_now.add(item.channel)

    def _drop(
        self, state: ThreadState, item: OutboxItem
    ) -> Save[tuple[OutboxItem | None, ThreadState | None, bool]]:
        """Remove an item of a channel this chat no longer has (logged), then look again."""

        async def save() -> tuple[OutboxItem | None, ThreadState | None, bool]:
            await self._replace(state, item.id, None)
            _log.warning(
                "dropped a %s notification %s for thread %r: no %s channel is configured",
                item.channel,
                item.body.get("event"),
                state.thread_id,
                item.channel,
            )
            return item, None, True

        return save

    async def _replace(
        self,
        state: ThreadState,
        item_id: str,
        replacement: OutboxItem | None,
        memo: dict[str, Any] | None = None,
    ) -> ThreadState:
        """Replace (or, with ``None``, remove) one outbox item, keeping ``memo`` for its
        review (see ``ThreadState.posted``): one compare-and-set save."""
        outbox = [
            replacement if i.id == item_id else i
            for i in state.outbox
            if i.id != item_id or replacement is not None
        ]
        changes: dict[str, Any] = {"outbox": outbox}
        if memo:
            review_id = next(
                (str(i.body.get("review_id")) for i in state.outbox if i.id == item_id), None
            )
            if review_id is not None:
                kept = {**state.posted.get(review_id, {}), **memo}
                changes["posted"] = {**state.posted, review_id: kept}
        return await self.threads.write(state, state.version, changes)

    async def _update(
        self,
        thread_id: str,
        item_id: str,
        replacement: OutboxItem | None,
        memo: dict[str, Any] | None,
    ) -> None:
        """:meth:`_replace` on the latest state, redone over concurrent saves."""

        async def attempt(state: ThreadState | None) -> Save[object]:
            if state is None or all(i.id != item_id for i in state.outbox):
                return await no_save(None)
            return lambda: self._replace(state, item_id, replacement, memo)

        async def read_again(_: object, __: ConcurrentUpdateError) -> ThreadState | None:
            return await self._read(thread_id)

        await retry_on_conflict(attempt, await self._read(thread_id), read_again)
