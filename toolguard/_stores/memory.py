"""Where conversations live between steps: the store protocol and the in-memory store.

A thread is saved after every step (by the stores toolguard ships: only
what changed, see :class:`IncrementalStore`). Saves are compare-and-set on a
version number: a save names the version it read, and fails with
:class:`ConcurrentUpdateError` when somebody else saved in between. That is
what makes two racing submissions of the same review run the approved tool
once — across processes too, with a shared database — without holding a lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final, Literal, NamedTuple, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from toolguard._core.audit import AuditEvent
from toolguard._core.errors import ConcurrentUpdateError, CorruptThreadError
from toolguard._core.records import (
    Action,
    ApproveDecision,
    EditDecision,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    utcnow,
    with_fields,
)
from toolguard._core.standing import StandingGrant
from toolguard._stores.outbox import OutboxItem

ThreadStatus = Literal["idle", "awaiting_review", "running"]


class ThreadState(BaseModel):
    """Everything about one conversation, as stored after each step.

    The whole state is JSON (``model_dump_json`` / ``model_validate_json``),
    so any store that keeps a text per thread id can hold it.
    """

    model_config = ConfigDict(extra="ignore")

    thread_id: str
    """The conversation's id."""
    version: int = 0
    """Bumped by every save; saves compare it (compare-and-set)."""
    status: ThreadStatus = "idle"
    """``awaiting_review`` while a review is pending; ``running`` while decisions are applied."""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The history in OpenAI Chat Completions format."""
    pending: PendingTurn | None = None
    """The paused turn while a review is pending (or being applied)."""
    decisions: list[ApproveDecision | EditDecision | RejectDecision | RespondDecision] | None = None
    """The accepted decisions while they are being applied (``status == "running"``)."""
    actions: list[Action] = Field(default_factory=list)
    """Every approval request of the thread, latest status, oldest first."""
    audit: list[AuditEvent] = Field(default_factory=list)
    """The audit trail, oldest first."""
    outbox: list[OutboxItem] = Field(default_factory=list)
    """Webhook notifications not delivered yet, oldest first (``ReviewedChat(notify=...)``)."""
    grants: list[StandingGrant] = Field(default_factory=list)
    """Standing grants made by approves in this thread, active or ended, oldest first."""
    created_at: datetime = Field(default_factory=utcnow)
    """When the thread was created."""
    updated_at: datetime = Field(default_factory=utcnow)
    """When it was last saved."""

    _stored_messages: int | None = PrivateAttr(default=None)
    """How many messages the store holds for this version (set by ReviewedChat's saves)."""

    def __eq__(self, other: object) -> bool:
        """Equal fields (and extras); the private bookkeeping above does not count."""
        if not isinstance(other, ThreadState):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    @property
    def review_id(self) -> str | None:
        """The id of the pending review, if any."""
        return self.pending.review_id if self.pending is not None else None


@runtime_checkable
class Store(Protocol):
    """Keeps :class:`ThreadState` by thread id, with compare-and-set saves."""

    async def load(self, thread_id: str) -> ThreadState | None:
        """The stored state, or ``None`` for an unknown thread.

        Raises:
            CorruptThreadError: the stored thread cannot be read back.
        """
        ...

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        """Store ``state`` if the stored version is still ``expected_version``.

        Args:
            state: the new state; its ``version`` is ignored.
            expected_version: the version that was read, or ``None`` to
                create a thread that must not exist yet.

        Returns:
            The state as stored, with ``version = expected_version + 1``
            (1 for a new thread) and ``updated_at`` set.

        Raises:
            ConcurrentUpdateError: the stored version differs (or the thread
                exists when creating); nothing was written.
        """
        ...


LISTS: Final[set[str]] = {"messages", "actions", "audit"}
"""The append-only parts of a :class:`ThreadState`; everything else is its "head"."""


class Changes(NamedTuple):
    """What a save changes, relative to the state at the version it expects.

    Built by :class:`~toolguard.ReviewedChat` for stores with
    ``save_changes``: the store writes these and the head (the state without
    its messages, actions and audit events), never the whole history.

    Attributes:
        keep_messages: how many of the stored messages stay; the rest are
            replaced by ``messages`` (a resumed turn rewrites its assistant
            message).
        messages: the messages after the first ``keep_messages``.
        actions: ``(position, action)`` of every new or changed action; a
            position at the end appends.
        audit: the audit events appended.
        stored_messages: how many messages the stored state has, when known
            (``None``: unknown); equal to ``keep_messages``, nothing is
            replaced and a store need not delete any.

    A named tuple: four are made per approval cycle, and a tuple is made
    several times faster than a frozen dataclass.
    """

    keep_messages: int
    messages: Sequence[dict[str, Any]] = ()
    actions: Sequence[tuple[int, Action]] = ()
    audit: Sequence[AuditEvent] = ()
    stored_messages: int | None = None

    @staticmethod
    def whole(state: ThreadState) -> Changes:
        """Everything of ``state``: the changes that create it."""
        return Changes(0, state.messages, list(enumerate(state.actions)), state.audit)


class IncrementalStore(Store, Protocol):
    """A :class:`Store` that also writes only what changed (the stores toolguard ships).

    ``ReviewedChat`` uses these methods when a store has them, and the
    whole-state ``load``/``save`` otherwise.
    """

    async def load_version(self, thread_id: str) -> int | None:
        """The stored version of a thread (``None`` when unknown), without reading it."""
        ...

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        """Like ``save``, writing only ``changes`` and the head of ``state``.

        ``state`` is the whole new state; ``changes`` say how it differs from
        the stored one at ``expected_version`` (for a new thread,
        ``Changes.whole(state)``). Compare-and-set exactly like ``save``.
        """
        ...


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


def is_incremental(store: object) -> bool:
    """Whether ``store`` has ``load_version`` and ``save_changes`` (and they fit its ``save``).

    A subclass that overrides ``save`` or ``load`` but not ``save_changes``
    (say, a MemoryStore that adds a check to every save) is used through its
    whole-state methods, so its override is never bypassed.
    """
    return _known(_INCREMENTAL, _incremental_type, store)


_INCREMENTAL: dict[type, bool] = {}


def _known(cache: dict[type, bool], test: Callable[[type], bool], store: object) -> bool:
    """``test(type(store))``, remembered in ``cache`` per type."""
    kind = type(store)
    found = cache.get(kind)
    if found is None:
        found = cache[kind] = test(kind)
    return found


class PreparedStore(IncrementalStore, Protocol):
    """The stores toolguard ships: a save of a state whose next version is already set.

    Private to ``ReviewedChat``. ``stored`` is ``state`` as the store would
    return it (``version = expected_version + 1``, ``updated_at`` now), so the
    store makes no copy of its own; ``ReviewedChat`` hands it over and never
    changes it afterwards (it keeps it as its cached state, read-only).
    """

    async def _save_prepared(
        self, stored: ThreadState, changes: Changes, expected_version: int | None
    ) -> ThreadState: ...


def takes_prepared(store: object) -> bool:
    """Whether ``store`` saves prepared states through the ``save_changes`` it has.

    A subclass that overrides ``save_changes`` (or ``save`` or ``load``) is
    saved through its own methods, never around them.
    """
    return _known(_PREPARED, _prepared_type, store)


_PREPARED: dict[type, bool] = {}


def _prepared_type(kind: type) -> bool:
    if not (_incremental_type(kind) and callable(getattr(kind, "_save_prepared", None))):
        return False
    mro = kind.__mro__
    owner = {name: next(i for i, b in enumerate(mro) if name in b.__dict__) for name in _SAVES}
    return owner["_save_prepared"] <= min(owner["save_changes"], owner["save"], owner["load"])


_SAVES: Final = ("_save_prepared", "save_changes", "save", "load")


def prepared_state(state: ThreadState, update: dict[str, Any], expected: int | None) -> ThreadState:
    """``next_state(with_fields(state, update), expected)`` in one copy."""
    return with_fields(state, {**update, "version": (expected or 0) + 1, "updated_at": utcnow()})


def _incremental_type(kind: type) -> bool:
    if not (
        callable(getattr(kind, "save_changes", None))
        and callable(getattr(kind, "load_version", None))
    ):
        return False

    def owner(name: str) -> int:
        return next(i for i, base in enumerate(kind.__mro__) if name in base.__dict__)

    return owner("save_changes") <= min(owner("save"), owner("load"))


def head_json(state: ThreadState) -> str:
    """The state without its append-only lists, as JSON (every other field, new ones too)."""
    # model_dump_json(exclude=LISTS), straight from the serializer (the same text, cheaper).
    return state.__pydantic_serializer__.to_json(state, exclude=LISTS).decode()


def item_json(item: dict[str, Any] | BaseModel) -> str:
    """One message, action or audit event as JSON, as ``model_dump_json`` writes it in a state."""
    return item_bytes(item).decode()


def assemble(
    head: str, messages: Sequence[str], actions: Sequence[str], audit: Sequence[str]
) -> str:
    """The whole state's JSON from its head and its lists' items.

    The head's keys come last, so a row that still holds a whole state (written
    by toolguard 0.1.0 or by a whole-state ``save``) wins over empty lists, and
    a damaged one stays damaged (``CorruptThreadError``, never silently empty).
    """
    if not (messages or actions or audit):
        return head
    return (
        f'{{"messages":[{",".join(messages)}],"actions":[{",".join(actions)}],'
        f'"audit":[{",".join(audit)}],{head[1:]}'
    )


def item_bytes(item: dict[str, Any] | BaseModel) -> bytes:
    """:func:`item_json` as UTF-8 bytes (smaller in memory than text)."""
    if isinstance(item, BaseModel):
        return item.__pydantic_serializer__.to_json(item)
    return to_json(item)


def assemble_bytes(
    head: bytes, messages: Sequence[bytes], actions: Sequence[bytes], audit: Sequence[bytes]
) -> bytes:
    """:func:`assemble` for bytes."""
    if not (messages or actions or audit):
        return head
    return b"".join(
        (
            b'{"messages":[',
            b",".join(messages),
            b'],"actions":[',
            b",".join(actions),
            b'],"audit":[',
            b",".join(audit),
            b"],",
            head[1:],
        )
    )


def load_state(thread_id: str, text: str | bytes) -> ThreadState:
    """Read a stored state back, or raise :class:`CorruptThreadError`.

    pydantic-core reads JSON nested at most 200 levels deep; toolguard 0.1.0
    could store deeper arguments, so a state it refuses is read again with
    Python's ``json`` (about 990 levels) before giving up.
    """
    try:
        return ThreadState.model_validate_json(text)
    except ValidationError as first:
        try:
            return ThreadState.model_validate(json.loads(text))
        except (ValueError, RecursionError, TypeError):
            raise CorruptThreadError(thread_id, _reason(first)) from None


def _reason(error: ValidationError) -> str:
    """The first problems pydantic found, on one line, at most 200 characters."""
    problems = [
        f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" if e["loc"] else e["msg"]
        for e in error.errors(include_url=False)[:3]
    ]
    reason = "; ".join(problems)
    return reason if len(reason) <= 200 else reason[:199] + "…"


def next_state(state: ThreadState, expected_version: int | None) -> ThreadState:
    """The state to write for a save that expects ``expected_version``."""
    return with_fields(state, {"version": (expected_version or 0) + 1, "updated_at": utcnow()})


class _Lists:
    """A thread's append-only parts in a MemoryStore, one JSON text per item.

    While the thread is in the store's window of recent threads, the items a
    ReviewedChat saved are kept as they are (message dicts, actions, audit
    events) and counted in ``unsettled``; :meth:`settle` turns them into JSON.
    """

    __slots__ = ("actions", "audit", "messages", "unsettled")

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.actions: list[Any] = []
        self.audit: list[Any] = []
        self.unsettled = 0

    def settle(self) -> None:
        """Turn every item still kept as it was saved into JSON bytes (never raises)."""
        left = self.unsettled
        for items in (self.messages, self.audit):
            # Only ever appended to: what is not JSON yet is their end, whatever their length.
            index = len(items)
            while index and type(items[index - 1]) is not bytes:
                index -= 1
                items[index] = _settled_bytes(items[index])
                left -= 1
        actions = self.actions  # replaced in place too: from the end until all are found
        index = len(actions)
        while left > 0 and index:
            index -= 1
            if type(actions[index]) is not bytes:
                actions[index] = _settled_bytes(actions[index])
                left -= 1
        self.unsettled = 0


def _settled_bytes(item: Any, exclude: set[str] | None = None) -> bytes:
    """:func:`item_bytes` (with ``exclude`` for a head), and never an exception.

    Settling runs after the save that kept the item returned, maybe inside
    another thread's save: it must not fail. A value pydantic cannot write
    (a lone surrogate that got past toolguard's cleaning, say) is written by
    Python's ``json`` with such characters escaped, as :func:`load_state`
    reads back.
    """
    try:
        if isinstance(item, BaseModel):
            return item.__pydantic_serializer__.to_json(item, exclude=exclude)
        return to_json(item)
    except (PydanticSerializationError, ValueError, TypeError):
        data = (
            item.model_dump(mode="json", exclude=exclude) if isinstance(item, BaseModel) else item
        )
        return json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str).encode()


def _items(whole: Changes, *, owned: bool) -> tuple[list[Any], list[tuple[int, Any]], list[Any]]:
    """The items of a save as a MemoryStore keeps them: JSON bytes, or as they are (owned)."""
    if owned:
        return list(whole.messages), list(whole.actions), list(whole.audit)
    return (
        [item_bytes(m) for m in whole.messages],
        [(i, item_bytes(a)) for i, a in whole.actions],
        [item_bytes(e) for e in whole.audit],
    )


_LIVE_HEADS: Final = 64
"""How many threads' last heads a MemoryStore keeps as states before turning them into JSON."""

_UNSETTLED_ITEMS: Final = 64
"""How many saved items a thread in that window keeps as they are; more are turned into JSON."""


class MemoryStore:
    """Keeps threads in this process's memory: for demos and tests.

    States are stored as JSON text, so what comes back is a copy that
    behaves exactly like a state read from a database. A save writes what
    changed: the head of the state and each new message, action or audit
    event, never the whole history again.

    For the last threads a ``ReviewedChat`` saved (at most 64), the head and
    the new items (at most 64 per thread) are kept as the chat saved them,
    which it never changes, and turned into JSON when the thread is read or
    leaves that window: a head or an action the next save replaces is never
    serialized. ``save`` and ``save_changes`` serialize at once: what they
    were given or returned can be changed afterwards without changing the
    store.
    """

    def __init__(self) -> None:
        # thread id -> (version, head); a thread without _lists holds its whole state (text).
        # A head is JSON bytes, or the state itself while the thread is in _live (see below).
        self._threads: dict[str, tuple[int, str | bytes | ThreadState]] = {}
        self._lists: dict[str, _Lists] = {}
        # Threads last saved by a ReviewedChat, oldest first: their head is the saved state
        # itself, turned into JSON only when it is read, or when the thread leaves this
        # window (_LIVE_HEADS). A head replaced by the next save is never serialized.
        self._live: dict[str, None] = {}
        self._claims: set[str] = set()
        # A plain lock: the critical section never awaits, and it also holds when
        # several event loops (threads) share one store.
        self._lock = threading.Lock()

    async def load(self, thread_id: str) -> ThreadState | None:
        """The stored state, or ``None`` (``CorruptThreadError`` when it cannot be read back)."""
        with self._lock:
            entry = self._threads.get(thread_id)
            if entry is None:
                return None
            if thread_id in self._live:
                self._settle(thread_id)
            lists = self._lists.get(thread_id)
            head = cast("str | bytes", self._threads[thread_id][1])  # settled: JSON
            text = (
                head
                if lists is None or isinstance(head, str)
                else assemble_bytes(head, lists.messages, lists.actions, lists.audit)
            )
        return load_state(thread_id, text)

    def _settle(self, thread_id: str) -> None:
        """Turn the thread's head and items into JSON; it leaves the window (lock held)."""
        del self._live[thread_id]
        entry = self._threads.get(thread_id)
        if entry is not None and isinstance(entry[1], ThreadState):
            self._threads[thread_id] = (entry[0], _settled_bytes(entry[1], LISTS))
        lists = self._lists.get(thread_id)
        if lists is not None:
            lists.settle()

    async def load_version(self, thread_id: str) -> int | None:
        """The stored version of a thread, or ``None``."""
        entry = self._threads.get(thread_id)
        return entry[0] if entry is not None else None

    async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
        """Compare-and-set save of the whole state (see :class:`Store`)."""
        return self._write(next_state(state, expected_version), None, expected_version)

    async def save_changes(
        self, state: ThreadState, changes: Changes, *, expected_version: int | None
    ) -> ThreadState:
        """Compare-and-set save of only ``changes`` and the head (see :class:`IncrementalStore`)."""
        return self._write(next_state(state, expected_version), changes, expected_version)

    async def _save_prepared(
        self, stored: ThreadState, changes: Changes, expected_version: int | None
    ) -> ThreadState:
        """``save_changes`` of a state handed over by ReviewedChat (see :class:`PreparedStore`)."""
        return self._write(stored, changes, expected_version, owned=True)

    def _write(
        self,
        stored: ThreadState,
        changes: Changes | None,
        expected_version: int | None,
        *,
        owned: bool = False,
    ) -> ThreadState:
        # A state handed over (owned) is never changed again: its head and its new items
        # can wait (see _live); the others are turned into JSON now.
        head: bytes | ThreadState = (
            stored if owned else stored.__pydantic_serializer__.to_json(stored, exclude=LISTS)
        )
        thread_id = stored.thread_id
        entry = self._threads.get(thread_id)
        if changes is not None and entry is not None and isinstance(entry[1], str):
            changes = None  # a whole stored state (written by hand): write this one whole
        whole = changes if changes is not None else Changes.whole(stored)
        messages, actions, audit = _items(whole, owned=owned)
        with self._lock:
            entry = self._threads.get(thread_id)
            current = entry[0] if entry is not None else None
            if current != expected_version:
                msg = (
                    f"Thread {thread_id!r} was changed by someone else"
                    f" (expected version {expected_version}, found {current})"
                )
                raise ConcurrentUpdateError(msg)
            live = self._live
            if not owned and thread_id in live:
                self._settle(thread_id)  # only a window thread holds items not yet JSON
            lists = self._lists.get(thread_id)
            if changes is not None and entry is not None and isinstance(entry[1], str):
                # Written whole by hand meanwhile: store this state whole (rare, under the lock).
                changes, whole = None, Changes.whole(stored)
                messages, actions, audit = _items(whole, owned=owned)
            if changes is None or lists is None:
                lists = _Lists()
            else:
                dropped = lists.messages[whole.keep_messages :]
                if dropped:
                    if lists.unsettled:
                        lists.unsettled -= sum(type(m) is not bytes for m in dropped)
                    del lists.messages[whole.keep_messages :]
            lists.messages.extend(messages)
            for position, item in actions:
                if position < len(lists.actions):
                    if owned and type(lists.actions[position]) is bytes:
                        lists.unsettled += 1
                    lists.actions[position] = item
                else:
                    lists.actions.append(item)
                    lists.unsettled += int(owned)
            lists.audit.extend(audit)
            self._lists[thread_id] = lists
            self._threads[thread_id] = (stored.version, head)
            if owned:
                lists.unsettled += len(messages) + len(audit)
                if lists.unsettled > _UNSETTLED_ITEMS:
                    lists.settle()  # a long conversation in the window: bounded all the same
                live.pop(thread_id, None)
                live[thread_id] = None
                if len(live) > _LIVE_HEADS:
                    self._settle(next(iter(live)))
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
        _check_key(key)
        with self._lock:
            if key in self._claims:
                return False
            self._claims.add(key)
            return True


def _check_key(key: object) -> None:
    """Refuse a claim key that is not text."""
    if not isinstance(key, str):
        msg = f"key must be text, got {type(key).__name__}"
        raise TypeError(msg)
