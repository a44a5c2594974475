"""Once only: a paused turn is resumed or closed at most once.

This process remembers the latest :data:`REMEMBERED_TURNS` review ids it
resumed or closed (any runner); with :class:`Claims` (a store) the review id
is also claimed there before anything runs, so no other process sharing the
store resumes it too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final, Protocol, runtime_checkable

from toolguard._core.errors import AlreadyResumedError

REMEMBERED_TURNS: Final = 10_000
"""How many finished ``review_id`` s this process remembers to refuse a second resume."""


@runtime_checkable
class Claims(Protocol):
    """Claims a key once, across processes: what makes ``Runner(claims=...)`` once-only.

    :class:`~toolguard.MemoryStore`, :class:`~toolguard.SQLiteStore` and
    ``toolguard.postgres.PostgresStore`` have it.
    """

    async def claim(self, key: str) -> bool:
        """Record ``key``; ``True`` for the first caller ever, ``False`` for every later one."""
        ...


class FinishedTurns:
    """The review ids this process resumed or closed (bounded: the latest ``limit``)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._ids: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()  # runners may be used from several threads

    def finish(self, review_id: str, how: str, *, after: tuple[str, ...] = ()) -> None:
        """Record how the turn ended; raise when it already ended (unless in ``after``)."""
        with self._lock:
            done = self._ids.get(review_id)
            if done is not None and done not in after:
                raise AlreadyResumedError(review_id)
            self._ids[review_id] = how
            self._ids.move_to_end(review_id)
            while len(self._ids) > self._limit:
                self._ids.popitem(last=False)

    def done(self, review_id: str) -> bool:
        """Whether the turn was resumed or closed (and is still remembered)."""
        with self._lock:
            return review_id in self._ids

    def forget(self, review_id: str) -> None:
        """Undo :meth:`finish` (the claim failed before anything ran)."""
        with self._lock:
            self._ids.pop(review_id, None)


FINISHED = FinishedTurns(REMEMBERED_TURNS)
"""The turns this process resumed or closed, shared by every runner."""


async def claim_turn(claims: Claims | None, review_id: str) -> None:
    """Mark the turn resumed in this process, and claim it in ``claims`` (once only).

    Raises:
        AlreadyResumedError: this process or, through ``claims``, another one
            already resumed or closed the turn; nothing is recorded then.
    """
    FINISHED.finish(review_id, "resumed")
    if claims is None:
        return
    try:
        claimed = await claims.claim(f"resume:{review_id}")
    except BaseException:
        FINISHED.forget(review_id)  # nothing ran: the caller may try again
        raise
    if not claimed:
        raise AlreadyResumedError(review_id)
