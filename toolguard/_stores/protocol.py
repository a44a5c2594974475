"""What keeps a conversation between steps: the thread state and the store protocol.

A thread is saved after every step. Saves are compare-and-set on a version
number: a save names the version it read, and fails with
:class:`ConcurrentUpdateError` when somebody else saved in between. That is
what makes two racing submissions of the same review run the approved tool
once — across processes too, with a shared database — without holding a lock.

Every :class:`Store` has ``load`` and ``save`` (whole states). A store may
also have one optional method for writing, ``save_changes`` (see
:class:`ChangesStore`): then ``ReviewedChat`` writes only what a save
changes, never the whole history again. :func:`saves_changes` is the check,
a plain look-up of the attribute; the SQLite and PostgreSQL stores have it.
A subclass of such a store that overrides ``save`` to add something to
every save overrides ``save_changes`` too (or sets ``save_changes = None``
to be given whole states).

A store may also have ``load_version`` (every store toolguard ships has
it; a store with ``save_changes`` must): then ``ReviewedChat`` keeps the
last state of each thread it saved or read, and reads ``load`` only when
the stored version differs (:func:`keeps_versions`).

``ReviewedChat`` hands each state it saves over: its ``version`` is already
the next one (``expected_version + 1``) and its ``updated_at`` set, and the
chat never changes it afterwards. A store may keep such a state and return
it as it is instead of making a copy (see :func:`handed_over`).

A store may also have ``digest_key`` (see :class:`KeyStore`; every store
toolguard ships has it): the secret a ``ReviewedChat`` given no
``signing_key`` keys its digests with, made at random on first use and kept
in the store, so that approvals stay bound across restarts and processes
while no digest the chat publishes (audit trail, exports) lets a reader test
guesses of a redacted secret. A store without it gets a key of this process
(:func:`digest_key`): reviews it left pending then cannot be approved by
another process or after a restart (they fail closed).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

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
    posted: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """What the notification channels keep per review id: where its Slack message is
    (``{"slack": {"channel": ..., "ts": ...}}``) and how many reminders went out."""
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
            state: the new state; its ``version`` is ignored (a state whose
                ``version`` is already ``expected_version + 1`` is handed
                over: the store may keep and return it as it is).
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


class Changes(NamedTuple):
    """What a save changes, relative to the state at the version it expects.

    Built by :class:`~toolguard.ReviewedChat` for a store with
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


class ChangesStore(Store, Protocol):
    """A :class:`Store` with ``save_changes``: it writes only what changed.

    ``load_version`` comes with it: ``ReviewedChat`` reads it to check that
    the state it keeps of a thread is still the stored one.
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
        ``Changes.whole(state)``). Compare-and-set exactly like ``save``,
        and a state handed over is returned as it is, as ``save`` may.
        """
        ...


def saves_changes(store: object) -> bool:
    """Whether ``store`` writes only what changed: it has a ``save_changes`` method."""
    return callable(getattr(store, "save_changes", None))


def keeps_versions(store: object) -> bool:
    """Whether ``store`` has ``load_version``: the chat may keep its states, checked by version."""
    return callable(getattr(store, "load_version", None))


def next_state(state: ThreadState, expected_version: int | None) -> ThreadState:
    """The state to store for a save that expects ``expected_version`` (a copy of ``state``)."""
    return state.model_copy(update={"version": (expected_version or 0) + 1, "updated_at": utcnow()})


def handed_over(state: ThreadState, expected_version: int | None) -> ThreadState:
    """The state a save stores: ``state`` itself when handed over, else :func:`next_state`.

    Handed over: its ``version`` is already ``expected_version + 1`` (its
    ``updated_at`` is kept too), and the caller never changes it afterwards.
    """
    if state.version == (expected_version or 0) + 1:
        return state
    return next_state(state, expected_version)


def load_state(thread_id: str, text: str | bytes) -> ThreadState:
    """Read a stored state back, or raise :class:`CorruptThreadError`.

    pydantic-core reads JSON nested at most 200 levels deep; a store written
    before the argument limits existed may hold deeper arguments, so a state it
    refuses is read again with Python's ``json`` (about 990 levels) before
    giving up.
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


def conflict(thread_id: str, expected: int | None, found: int | None) -> ConcurrentUpdateError:
    """The error of a compare-and-set save that found another version."""
    return ConcurrentUpdateError(
        f"Thread {thread_id!r} was changed by someone else"
        f" (expected version {expected}, found {found})"
    )


def check_key(key: object) -> None:
    """Refuse a claim key that is not text."""
    if not isinstance(key, str):
        msg = f"key must be text, got {type(key).__name__}"
        raise TypeError(msg)


# --------------------------------------------------------------------------- the digest key

KEY_BYTES: Final = 32
"""The length of a digest key a store makes (random bytes)."""
MIN_KEY_BYTES: Final = 16
"""The shortest digest key a store may give."""

PROCESS_KEY: Final = os.urandom(KEY_BYTES)
"""The digest key of the stores that keep none (no ``digest_key``): this process's alone."""

_log = logging.getLogger("toolguard")
_warned: set[str] = set()


class KeyStore(Store, Protocol):
    """A :class:`Store` that keeps the secret of a chat's digests (optional method)."""

    async def digest_key(self) -> bytes:
        """The store's digest key: random bytes made on first use and kept, the same ever after.

        Every caller, in any process using the same data, gets the same key;
        two first uses at once must agree on one (e.g. insert-if-absent, then
        read). At least 16 bytes.
        """
        ...


class KeyHolder(Protocol):
    """Something whose digests are keyed by ``signing_key`` (a chat's runner)."""

    signing_key: bytes | None


async def digest_key(store: object) -> bytes:
    """The secret a chat on ``store`` keys its digests with when given no ``signing_key``.

    The store's own :meth:`KeyStore.digest_key`, or, for a store without one,
    :data:`PROCESS_KEY` (a warning on the ``toolguard`` logger, once per
    store class): then reviews left pending in one process cannot be
    approved by another or after a restart; they fail closed.

    Raises:
        TypeError: the store's ``digest_key()`` gave something other than
            at least 16 bytes (nothing is keyed with it).
    """
    own = getattr(store, "digest_key", None)
    if not callable(own):
        name = type(store).__name__
        if name not in _warned:
            _warned.add(name)
            _log.warning(
                "%s keeps no digest key (no digest_key() method): the digests of this process"
                " use a key of its own, so reviews it leaves pending cannot be approved after a"
                " restart or by another process; pass signing_key= to keep them",
                name,
            )
        return PROCESS_KEY
    key: object = await own()
    if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
        # Never the value itself: it is (meant to be) a secret.
        got = f"{len(key)} bytes" if isinstance(key, bytes) else type(key).__name__
        msg = (
            f"{type(store).__name__}.digest_key() must return at least {MIN_KEY_BYTES} random"
            f" bytes, got {got}"
        )
        raise TypeError(msg)
    return key


async def give_key(holder: KeyHolder | None, store: object) -> None:
    """Key ``holder``'s digests with the store's :func:`digest_key` when it has no key yet.

    What a ``ReviewedChat`` given no ``signing_key`` does before it makes or
    checks a digest: its runner's ``signing_key`` becomes the store's key.
    """
    if holder is not None and holder.signing_key is None:
        holder.signing_key = await digest_key(store)
