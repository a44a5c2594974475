"""Webhook delivery of a ReviewedChat: the due outbox items of its threads, POSTed in order.

The items are written by the chat's saves (see :mod:`toolguard._stores.outbox`);
this sends them: each is leased with a compare-and-set save before it is
sent (so two processes do not both send it) and removed after a 2xx answer,
or rescheduled after the webhook's backoff.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import anyio

from toolguard._chat.threads import Save, Threads, ThreadSettings, no_save, retry_on_conflict
from toolguard._core.errors import ConcurrentUpdateError, CorruptThreadError
from toolguard._stores.outbox import OutboxItem, Webhook
from toolguard._stores.protocol import ThreadState

_log = logging.getLogger("toolguard")


class Notifications:
    """Delivers the webhook notifications in the outboxes of a chat's threads."""

    def __init__(self, settings: ThreadSettings, threads: Threads) -> None:
        self.settings = settings
        self.threads = threads
        self.scanned = False
        """Whether every stored thread was looked at since the last rescan."""

    async def deliver(self) -> int:
        """One delivery pass (see ``ReviewedChat.deliver_notifications``)."""
        webhook = self.settings.notify
        if webhook is None:
            return 0
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
                done, left = await self._deliver_thread(webhook, thread_id)
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
                _log.exception("webhook delivery pass failed")
            await anyio.sleep(interval)
            waited += interval
            if waited >= rescan:
                waited = 0.0
                self.scanned = False

    async def _read(self, thread_id: str) -> ThreadState | None:
        return await self.settings.store.load(thread_id)

    async def _deliver_thread(self, webhook: Webhook, thread_id: str) -> tuple[int, bool]:
        """Deliver one thread's due notifications: (how many were delivered, any left)."""
        clock = self.settings.clock

        async def lease(state: ThreadState | None) -> Save[tuple[OutboxItem | None, bool]]:
            """Lease the thread's first item when it is due: (the item, any left)."""
            if state is None or not state.outbox:
                return await no_save((None, False))
            item = state.outbox[0]
            now = clock()
            if item.next_attempt_at is not None and item.next_attempt_at > now:
                return await no_save((None, True))
            until = now + timedelta(seconds=webhook.timeout * 2 + 5)
            leased = item.model_copy(update={"next_attempt_at": until})

            async def save() -> tuple[OutboxItem | None, bool]:
                await self._replace(state, item.id, leased)
                return item, True

            return save

        async def read_again(_: object, __: ConcurrentUpdateError) -> ThreadState | None:
            return await self._read(thread_id)

        delivered = 0
        while True:
            item, left = await retry_on_conflict(lease, await self._read(thread_id), read_again)
            if item is None:
                return delivered, left
            error = await webhook.send(item)
            if error is None:
                delivered += 1
                await self._update(thread_id, item.id, None)
                continue
            attempts = item.attempts + 1
            failed = item.model_copy(
                update={
                    "attempts": attempts,
                    "next_attempt_at": clock() + webhook.delay(attempts),
                    "last_error": error,
                }
            )
            _log.warning(
                "webhook %s for thread %r failed (%s); attempt %d, retried later",
                item.body.get("event"),
                thread_id,
                error,
                attempts,
            )
            await self._update(thread_id, item.id, failed)
            return delivered, True

    async def _replace(
        self, state: ThreadState, item_id: str, replacement: OutboxItem | None
    ) -> ThreadState:
        """Replace (or, with ``None``, remove) one outbox item: one compare-and-set save."""
        outbox = [
            replacement if i.id == item_id else i
            for i in state.outbox
            if i.id != item_id or replacement is not None
        ]
        return await self.threads.write(state, state.version, {"outbox": outbox})

    async def _update(self, thread_id: str, item_id: str, replacement: OutboxItem | None) -> None:
        """:meth:`_replace` on the latest state, redone over concurrent saves."""

        async def attempt(state: ThreadState | None) -> Save[object]:
            if state is None or all(i.id != item_id for i in state.outbox):
                return await no_save(None)
            return lambda: self._replace(state, item_id, replacement)

        async def read_again(_: object, __: ConcurrentUpdateError) -> ThreadState | None:
            return await self._read(thread_id)

        await retry_on_conflict(attempt, await self._read(thread_id), read_again)
