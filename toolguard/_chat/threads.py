"""Thread reads and writes of a ReviewedChat: a cache, incremental saves, conflict retries.

Every write is a compare-and-set save. :func:`retry_on_conflict` is the one
way a writer goes again after a :class:`ConcurrentUpdateError`: the writer
says what to try on the thread it read, and how to read it again (or to
give up) after a conflict. :meth:`Threads.save` builds on it to save over a
concurrent save that changed nothing the save depends on (a refused
reviewer's audit event, a webhook delivery recorded).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from datetime import datetime
from itertools import compress, count
from typing import Any, Protocol, TypeVar

from toolguard._core.errors import ConcurrentUpdateError, UnknownThreadError
from toolguard._core.jsonable import clean_text
from toolguard._core.records import utcnow
from toolguard._enforce import grant_use
from toolguard._notify.channels import Notify, channels_of, outbox_items
from toolguard._stores.outbox import OutboxItem
from toolguard._stores.protocol import (
    Changes,
    ChangesStore,
    Store,
    ThreadState,
    give_key,
    keeps_versions,
    saves_changes,
)

_S = TypeVar("_S")
_T = TypeVar("_T")

Save = Callable[[], Awaitable[_T]]
"""One compare-and-set save, ready to go (or a result that needs none)."""


async def retry_on_conflict(
    attempt: Callable[[_S], Awaitable[Save[_T]]],
    state: _S,
    again: Callable[[_S, ConcurrentUpdateError], Awaitable[_S]],
) -> _T:
    """``attempt(state)``'s save, tried again until no concurrent save gets in between.

    ``attempt`` checks ``state`` (the thread as read, or whatever the writer
    works from) and returns the save to make; only that save's
    :class:`ConcurrentUpdateError` is retried, so an error of the checks (a
    hook's own, say) propagates as it is. After a conflict, ``again(state,
    error)`` returns what the next attempt works from (usually the thread
    read again), or raises (``error`` itself, or a clearer error) when the
    conflict stands.
    """
    while True:
        save = await attempt(state)
        try:
            return await save()
        except ConcurrentUpdateError as conflict:
            state = await again(state, conflict)


async def no_save(result: _T) -> Save[_T]:
    """An attempt's outcome that needs no save: ``result`` as it is."""

    async def done() -> _T:
        return result

    return done


def text_arg(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse an id argument that is not text (``None`` too, unless ``optional``)."""
    if isinstance(value, str) or (optional and value is None):
        return
    kind = "text or None" if optional else "text"
    msg = f"{name} must be {kind}, got {type(value).__name__}"
    raise TypeError(msg)


def only_refusals_added(read: ThreadState, fresh: ThreadState) -> bool:
    """Whether ``fresh`` is ``read`` plus ``refused`` audit events, and nothing else.

    A changed webhook outbox (a delivery recorded) does not count either: it
    is no competing change of the conversation.
    """
    count = len(read.audit)
    if len(fresh.audit) < count or fresh.audit[:count] != read.audit:
        return False
    if any(e.kind != "refused" for e in fresh.audit[count:]):
        return False
    if len(fresh.audit) == count and fresh.outbox == read.outbox:
        return False  # nothing we can build on: a real conflict
    same = {"version", "updated_at", "audit", "outbox", "posted"}
    return read.model_dump(exclude=same) == fresh.model_dump(exclude=same)


CACHED_THREADS = 128
"""How many threads' last states a ReviewedChat keeps, to skip re-reading them (LRU)."""

TAIL = 32
"""How many of the last stored messages / actions a save compares item by item."""


def first_changed(old: list[Any], new: list[Any], stored: int) -> int:
    """The first index below ``stored`` where ``new`` holds another object than ``old``.

    Only the last :data:`TAIL` stored items are compared: toolguard changes
    only the latest turn (a resumed turn's assistant message, its pending
    actions). When all of those differ (a list rebuilt whole), every item is
    compared (in C).
    """
    shared = min(stored, len(old), len(new))
    if shared <= TAIL:  # a short thread: a plain loop is cheaper than the slices
        for index in range(shared):
            if old[index] is not new[index]:
                return index
        return shared
    start = shared - TAIL
    first = next(
        compress(count(start), map(operator.is_not, old[start:shared], new[start:shared])),
        shared,
    )
    if first == start and start > 0:
        first = next(compress(count(), map(operator.is_not, old[:shared], new[:shared])), shared)
    return first


def mark_stored(state: ThreadState) -> None:
    """Remember how many messages ``state`` (just saved) has in the store."""
    private = state.__pydantic_private__  # read directly: pydantic's __getattr__ costs more
    if private is None:
        state._stored_messages = len(state.messages)
    else:
        private["_stored_messages"] = len(state.messages)


def stored_count(state: ThreadState) -> int:
    """How many of ``state.messages`` the store holds (more may have been appended since)."""
    private = state.__pydantic_private__
    count = private.get("_stored_messages") if private is not None else None
    return len(state.messages) if count is None else count


def changes_of(base: ThreadState, update: dict[str, Any]) -> Changes | None:
    """What ``base.model_copy(update=update)`` changes, or ``None`` when not expressible.

    Lists in ``update`` share their unchanged items with ``base``'s
    (``[*state.audit, *events]``, ``merge_actions``, a copy of the messages
    with its last assistant message rewritten); an item that is not the same
    object is changed (see :func:`first_changed`). The turn loop appends to
    the list it saved, so the stored length of ``base.messages`` is
    remembered at each save (``stored_count``) rather than read from the list.
    """
    stored_messages = stored_count(base)
    keep, tail = stored_messages, ()
    messages = update.get("messages")
    if messages is not None:
        if messages is not base.messages:
            keep = first_changed(base.messages, messages, stored_messages)
        tail = messages[keep:]
    actions: list[tuple[int, Any]] = []
    new_actions = update.get("actions")
    if new_actions is not None:
        old = base.actions
        if new_actions is old or len(new_actions) < len(old):
            return None
        stored = len(old)
        first = first_changed(old, new_actions, stored)
        actions = [
            (i, new_actions[i]) for i in range(first, stored) if old[i] is not new_actions[i]
        ]
        actions.extend(enumerate(new_actions[stored:], stored))
    audit = update.get("audit")
    if audit is not None and (audit is base.audit or len(audit) < len(base.audit)):
        return None
    added = audit[len(base.audit) :] if audit is not None else ()
    return Changes(keep, tail, actions, added, stored_messages)


class ThreadSettings(Protocol):
    """What :class:`Threads` reads from its chat, at each use."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def notify(self) -> Notify: ...


class Threads:
    """A chat's reads and writes of its threads.

    Keeps the last state it saved or read per thread (LRU), checked against
    the stored version before use (only with a store that has
    ``load_version``), and notes the threads it saved webhook notifications
    for (:attr:`outbox_hints`).
    """

    def __init__(self, settings: ThreadSettings) -> None:
        self.settings = settings
        self.states: OrderedDict[str, ThreadState] = OrderedDict()
        self.outbox_hints: set[str] = set()

    async def load(self, thread_id: str, *, fresh: bool = False) -> ThreadState:
        """The stored thread; ``fresh``: a copy of its own for the caller (read from the store).

        Otherwise the chat's cached state of the thread when the store says it
        is still the stored version (one cheap version read), else the stored
        one (and it is cached). Cached states are never handed to users.
        """
        text_arg(thread_id, "thread_id")
        if clean_text(thread_id) != thread_id:
            # Lone surrogates: no stored thread has such an id (and no database takes it).
            raise UnknownThreadError(thread_id)
        store = self.settings.store
        # A chat without signing_key keys its digests with the store's secret (first use).
        await give_key(getattr(self.settings, "runner", None), store)
        incremental = not fresh and keeps_versions(store)
        if incremental:
            cached = self.states.get(thread_id)
            if cached is not None:
                version = await store.load_version(thread_id)  # type: ignore[attr-defined]
                if version == cached.version:
                    self.states.move_to_end(thread_id)
                    return cached
                self.states.pop(thread_id, None)
        state = await store.load(thread_id)
        if state is None:
            raise UnknownThreadError(thread_id)
        if incremental:
            self.remember(state)
        return state

    def remember(self, state: ThreadState) -> None:
        """Cache ``state`` as the thread's latest (bounded, least recently used goes)."""
        states = self.states
        states[state.thread_id] = state
        states.move_to_end(state.thread_id)
        if len(states) > CACHED_THREADS:
            states.popitem(last=False)

    async def write(
        self, state: ThreadState, expected: int | None, changes: dict[str, Any]
    ) -> ThreadState:
        """One compare-and-set save of ``state`` updated with ``changes``.

        With a store that has ``save_changes`` only what changed is written
        (see :func:`changes_of`); otherwise the whole state. With a store
        that has ``load_version`` the saved state is cached. A failed save
        drops the cache entry, so the next read goes to the store.
        """
        store = self.settings.store
        # The next state as it will be stored, in one copy: handed over to the store (see
        # the protocol's save_changes), which keeps it rather than making a copy of its own.
        update = {**changes, "version": (expected or 0) + 1, "updated_at": utcnow()}
        new = state.model_copy(update=update)
        try:
            if not saves_changes(store):
                saved = await store.save(new, expected_version=expected)
                if not keeps_versions(store):
                    return saved
                mark_stored(saved)
                self.remember(saved)
                return saved
            delta = Changes.whole(new) if expected is None else changes_of(state, changes)
            incremental: ChangesStore = store  # type: ignore[assignment]
            if delta is None:
                saved = await incremental.save(new, expected_version=expected)
            else:
                saved = await incremental.save_changes(new, delta, expected_version=expected)
        except BaseException:
            self.states.pop(state.thread_id, None)
            raise
        mark_stored(saved)
        self.remember(saved)
        return saved

    async def reread(self, state: ThreadState) -> ThreadState | None:
        """The thread of ``state`` as stored now, read from the store (``None``: gone)."""
        return await self.settings.store.load(state.thread_id)

    async def save(self, state: ThreadState, expected: int | None, **changes: Any) -> ThreadState:
        """Compare-and-set save of ``state`` with ``changes``.

        A concurrent save that only appended ``refused`` audit events (a
        refused reviewer or reader) is not a competing change: the save is
        made again on top of it, keeping those events, so a refusal can never
        make this save fail. Any other concurrent change raises
        ``ConcurrentUpdateError``. The refusal caps bound the retries.
        A concurrent change of the webhook outbox (a delivery recorded) is
        treated the same way. With ``notify``, the notifications for the
        review events this save records go into the outbox in this save.
        """
        items: list[OutboxItem] = []
        if self.settings.notify is not None and "audit" in changes:
            added = changes["audit"][len(state.audit) :]
            channels = channels_of(self.settings.notify)
            items = outbox_items(channels, state.thread_id, added, changes, self.settings.clock())

        async def attempt(at: tuple[ThreadState, int | None, dict[str, Any]]) -> Save[ThreadState]:
            state, expected, changes = at
            if items:
                changes = {**changes, "outbox": [*state.outbox, *items]}

            async def write() -> ThreadState:
                return await self.write(state, expected, changes)

            return write

        async def again(
            at: tuple[ThreadState, int | None, dict[str, Any]], conflict: ConcurrentUpdateError
        ) -> tuple[ThreadState, int | None, dict[str, Any]]:
            state, expected, changes = at
            if expected is None or expected != state.version:
                raise conflict
            fresh = await self.reread(state)
            if fresh is None or not (
                only_refusals_added(state, fresh)
                or ("grants" not in changes and grant_use.only_grants_changed(state, fresh))
            ):
                raise conflict
            if "audit" in changes:
                added = changes["audit"][len(state.audit) :]
                changes = {**changes, "audit": [*fresh.audit, *added]}
            return fresh, fresh.version, changes

        saved = await retry_on_conflict(attempt, (state, expected, changes), again)
        if items:
            self.outbox_hints.add(saved.thread_id)
        return saved
