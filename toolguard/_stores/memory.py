"""The in-memory store: threads kept in this process, for demos and tests."""

from __future__ import annotations

import json
import os
import threading

from pydantic_core import PydanticSerializationError

from toolguard._stores.protocol import (
    KEY_BYTES,
    ThreadState,
    check_key,
    conflict,
    handed_over,
    load_state,
)


class MemoryStore:
    """Keeps threads in this process's memory: for demos and tests.

    What comes back from :meth:`load` is read from JSON, a copy that behaves
    exactly like a state read from a database. A saved state is written as
    JSON at once, unless it was handed over (its ``version`` already the
    next one, as ``ReviewedChat`` saves): then the store keeps it as it is,
    and the caller never changes it. Saves are compare-and-set on the
    version (see :class:`~toolguard.Store`).
    """

    def __init__(self) -> None:
        # thread id -> (version, the state as JSON, or the state itself when handed over)
        self._threads: dict[str, tuple[int, str | bytes | ThreadState]] = {}
        self._claims: set[str] = set()
        self._digest_key: bytes | None = None
        # A plain lock: the critical section never awaits, and it also holds when
        # several event loops (threads) share one store.
        self._lock = threading.Lock()

    async def load(self, thread_id: str) -> ThreadState | None:
        """The stored state, or ``None`` (``CorruptThreadError`` when it cannot be read back)."""
        entry = self._threads.get(thread_id)
        if entry is None:
            return None
        kept = entry[1]
        return load_state(thread_id, _as_json(kept) if isinstance(kept, ThreadState) else kept)

    async def load_version(self, thread_id: str) -> int | None:
        """The stored version of a thread (``None`` when unknown), without reading it."""
        entry = self._threads.get(thread_id)
        return None if entry is None else entry[0]

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        """Compare-and-set save of the whole state (see :class:`~toolguard.Store`).

        A ``state`` whose ``version`` is already ``expected_version + 1`` is
        handed over: kept and returned as it is (its ``updated_at`` too).
        """
        stored = handed_over(state, expected_version)
        kept = stored if stored is state else _as_json(stored)
        thread_id = stored.thread_id
        with self._lock:
            entry = self._threads.get(thread_id)
            current = entry[0] if entry is not None else None
            if current != expected_version:
                raise conflict(thread_id, expected_version, current)
            self._threads[thread_id] = (stored.version, kept)
        return stored

    async def thread_ids(self) -> list[str]:
        """Every stored thread id."""
        return list(self._threads)

    async def claim(self, key: str) -> bool:
        """Claim ``key`` once: ``True`` for the first caller, ``False`` ever after.

        ``Runner(claims=store)`` claims each paused turn before resuming it.
        Claims are kept for the store's lifetime (this process only).

        Raises:
            TypeError: ``key`` is not text.
        """
        check_key(key)
        with self._lock:
            if key in self._claims:
                return False
            self._claims.add(key)
            return True

    async def digest_key(self) -> bytes:
        """The secret of the digests of a chat on this store (without ``signing_key``).

        32 random bytes made on first use and kept in memory with the
        threads: the same for the store's lifetime, gone with it.
        """
        with self._lock:
            if self._digest_key is None:
                self._digest_key = os.urandom(KEY_BYTES)
            return self._digest_key


def _as_json(state: ThreadState) -> bytes:
    """``state`` as JSON; a text pydantic cannot write (a lone surrogate) is escaped instead."""
    try:
        return state.__pydantic_serializer__.to_json(state)
    except (PydanticSerializationError, ValueError):
        data = state.model_dump(mode="json")
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str).encode()
