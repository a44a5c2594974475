"""A gateway a team shares: several ``toolguard mcp-proxy`` processes on one PostgreSQL store.

Processes with the same configuration behind one address (two machines, a
rolling restart) share everything that lives in the store: the reviews and
their audit trails, the gateway's grants (each use spent with a
compare-and-set save, so a grant of N uses covers N calls, whichever process
makes them), a judge's limits (counted in the store too) and the webhook
outboxes (each item delivered once). What a store cannot hold is the MCP
client waiting for its call: it is connected to one process, the one that
holds the call.

**Who holds a call.** Each process has a random id (:attr:`Processes.id`),
written into the ids of the calls it opens (``mcp-{process}-{random}``), and
a heartbeat: a thread of its own in the store (``toolguard-mcp-proxy-process-
{id}``) saved every :data:`HEARTBEAT_SECONDS`; a process whose heartbeat is
older than :data:`GONE_AFTER_SECONDS`, or that said it stopped, is gone. At
start-up a process closes only the reviews of processes that are gone (their
calls never run later); the ones another live process holds stay open.

**A decision made on another process's page.** The page of every process
lists every waiting call. A decision on a call another live process holds is
checked where it is made (the review's binding and deadline, the reviewer,
the decisions: every error is the usual one), then handed over through the
store: a thread ``toolguard-mcp-proxy-decision-{review id}``, created once
(a second decision on the same review finds it taken, and gets "no pending
review"). The holding process, which reads its waiting calls every 50 ms,
applies it with the reviewer's identity, so the call runs there, once, and
its answer reaches its client; the deciding request waits for that and
answers as a decision made in place does. A decision on a call whose process
is gone cancels its review instead: it never runs.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Final
from uuid import UUID

import anyio

from toolguard._chat.access import reviewer_id
from toolguard._chat.chat import ReviewedChat
from toolguard._chat.threads import text_arg
from toolguard._chat.turns import ChatTurn
from toolguard._core import telemetry
from toolguard._core.errors import ConcurrentUpdateError, NoPendingReviewError, ToolguardError
from toolguard._core.jsonable import to_json_data
from toolguard._core.records import utcnow
from toolguard._enforce import pipeline
from toolguard._stores.protocol import Store, ThreadState

__all__ = [
    "DECISION_PREFIX",
    "GONE_AFTER_SECONDS",
    "HEARTBEAT_SECONDS",
    "OWNER_GONE",
    "PROCESS_PREFIX",
    "GatewayChat",
    "Processes",
    "close_store",
    "is_postgres",
    "open_store",
    "owner_of",
    "share",
    "shown_db",
]

PROCESS_PREFIX: Final = "toolguard-mcp-proxy-process-"
"""The id of a process's heartbeat thread is this prefix and the process's id."""
DECISION_PREFIX: Final = "toolguard-mcp-proxy-decision-"
"""The id of a decision handed over to the process holding the call: this prefix and the
review's id."""
HEARTBEAT_SECONDS: Final = 5.0
"""How often a process saves its heartbeat."""
GONE_AFTER_SECONDS: Final = 20.0
"""A process whose heartbeat is older than this is gone."""
OWNER_GONE: Final = (
    "the toolguard mcp-proxy process that held this call stopped before a decision arrived"
)
"""The reason audited when a review is cancelled because the process holding it is gone."""
_POLL_SECONDS: Final = 0.05
_STOPPED: Final = "stopped"
_CALL_ID = re.compile(r"mcp-([0-9a-f]{12})-[0-9a-f]{24}")
_POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


def is_postgres(db: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database (a ``postgresql://`` URL)."""
    return db.startswith(_POSTGRES_SCHEMES)


def open_store(db: str) -> Store:
    """The gateway's store: PostgreSQL for a ``postgresql://`` URL, else a SQLite file."""
    if is_postgres(db):
        from toolguard.postgres import PostgresStore  # noqa: PLC0415 - the extra is optional

        return PostgresStore(db)
    from toolguard._stores.sqlite import SQLiteStore  # noqa: PLC0415

    return SQLiteStore(db)


def shown_db(db: str) -> str:
    """``--db`` as the status line shows it: a PostgreSQL URL's password is ``***``."""
    if not is_postgres(db):
        return db
    scheme, _, rest = db.partition("://")
    userinfo, at, where = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return db
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{where}"


async def close_store(store: Store) -> None:
    """Close ``store`` (PostgreSQL's connections, SQLite's file)."""
    closing = getattr(store, "aclose", None)
    if closing is not None:
        with anyio.CancelScope(shield=True):
            await closing()
        return
    close = getattr(store, "close", None)
    if close is not None:
        close()


def owner_of(call_id: str) -> str | None:
    """The id of the process that opened the call ``call_id`` (``None``: not a shared one)."""
    found = _CALL_ID.fullmatch(call_id)
    return found[1] if found is not None else None


def _owner(state: ThreadState) -> str | None:
    """The process holding the call of a thread's pending review, if it names one."""
    if state.pending is None:
        return None
    for action in state.pending.actions:
        owner = owner_of(action.call_id)
        if owner is not None:
            return owner
    return None


class Processes:
    """This process's id and heartbeat, and whether another process is alive.

    Args:
        store: the shared store (its saves stamp ``updated_at`` with the time).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.id = secrets.token_hex(6)

    def call_id(self) -> str:
        """A new call id naming this process."""
        return f"mcp-{self.id}-{secrets.token_hex(12)}"

    async def beat(self, *, stopped: bool = False) -> None:
        """Save this process's heartbeat now (``stopped``: say it stopped, for good)."""
        thread_id = f"{PROCESS_PREFIX}{self.id}"
        for _ in range(10):  # only this process writes its thread: a conflict is a retry
            now = utcnow()
            state = await self.store.load(thread_id)
            expected = state.version if state is not None else None
            if state is None:
                state = ThreadState(thread_id=thread_id, created_at=now)
            note = [{"role": "system", "content": _STOPPED}] if stopped else []
            beat = state.model_copy(update={"updated_at": now, "messages": note})
            try:
                await self.store.save(beat, expected_version=expected)
            except ConcurrentUpdateError:
                continue
            return

    async def run(self) -> None:
        """Save the heartbeat every :data:`HEARTBEAT_SECONDS` until cancelled; then say so."""
        try:
            while True:
                try:
                    await self.beat()
                except Exception as exc:  # the store is away: the next beat tries again
                    sys.stderr.write(f"toolguard mcp-proxy: the heartbeat was not saved ({exc})\n")
                await anyio.sleep(HEARTBEAT_SECONDS)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self.beat(stopped=True)
                except Exception as exc:  # the others see it gone a little later
                    sys.stderr.write(f"toolguard mcp-proxy: the last heartbeat failed ({exc})\n")

    async def alive(self, process: str) -> bool:
        """Whether the process ``process`` runs (this one does)."""
        if process == self.id:
            return True
        state = await self.store.load(f"{PROCESS_PREFIX}{process}")
        if state is None or any(m.get("content") == _STOPPED for m in state.messages):
            return False
        return utcnow() - state.updated_at < timedelta(seconds=GONE_AFTER_SECONDS)


def _handed(thread_id: str, review_id: str, decisions: Any, reviewer: str | None) -> str:
    return json.dumps(
        {
            "thread_id": thread_id,
            "review_id": review_id,
            "decisions": to_json_data(decisions),
            "reviewer": reviewer,
            "traceparent": telemetry.caller(),
        }
    )


class GatewayChat(ReviewedChat):
    """The gateway's chat: a decision on a call another process holds is handed over to it.

    Without :attr:`processes` (one process on its store) it is a
    :class:`~toolguard.ReviewedChat`.
    """

    processes: Processes | None = None

    async def held_elsewhere(self, state: ThreadState) -> bool:
        """Whether another live process holds the call of ``state``'s pending review."""
        if self.processes is None:
            return False
        owner = _owner(state)
        return (
            owner is not None and owner != self.processes.id and await self.processes.alive(owner)
        )

    async def submit_review(
        self,
        decisions: Any,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
    ) -> ChatTurn:
        """:meth:`ReviewedChat.submit_review`, handed over when another process holds the call."""
        processes = self.processes
        if processes is None:
            return await super().submit_review(
                decisions, thread_id, review_id=review_id, reviewer=reviewer
            )
        text_arg(thread_id, "thread_id")
        text_arg(review_id, "review_id", optional=True)
        who = reviewer_id(reviewer)
        state, pending = await self._reviews.current(thread_id, review_id)
        owner = _owner(state)
        if owner is None or owner == processes.id:
            return await super().submit_review(
                decisions, thread_id, review_id=review_id, reviewer=who
            )
        if not await processes.alive(owner):
            # Its client is gone with it: the call never runs.
            await self.cancel_review(thread_id, review_id=pending.review_id, reason=OWNER_GONE)
            raise NoPendingReviewError
        # Checked here, with the usual errors; nothing is claimed: the holder applies it.
        await self._gate.check_reviewer(state, who)
        await pipeline.submit(
            self.runner,
            pending,
            decisions,
            reviewer=who,
            thread_id=state.thread_id,
            grant_scope="thread" if self.shared_grants is None else "server",
            may_decide=self._gate.may_decide(state),
        )
        box = ThreadState(
            thread_id=f"{DECISION_PREFIX}{pending.review_id}",
            created_at=self.clock(),
            messages=[
                {"role": "user", "content": _handed(thread_id, pending.review_id, decisions, who)}
            ],
        )
        try:
            await self.store.save(box, expected_version=None)
        except ConcurrentUpdateError:
            raise NoPendingReviewError from None  # another decision got there first
        return await self._answer_of(box.thread_id, thread_id, pending.review_id, owner)

    async def _answer_of(self, box_id: str, thread_id: str, review_id: str, owner: str) -> ChatTurn:
        """Wait until the holder applied the decision handed over in ``box_id``."""
        processes = self.processes
        assert processes is not None  # noqa: S101 - only called when shared
        checked = utcnow()
        while True:
            box = await self.store.load(box_id)
            answers = [m for m in (box.messages if box is not None else []) if m["role"] != "user"]
            if answers:
                answer = json.loads(str(answers[0].get("content")))
                if "error" in answer:
                    raise NoPendingReviewError(str(answer["error"]))
                state = await self.get_thread(thread_id)
                reply = next(
                    (
                        m.get("content")
                        for m in reversed(state.messages)
                        if m["role"] == "assistant" and isinstance(m.get("content"), str)
                    ),
                    None,
                )
                actions = [a for a in state.actions if a.call_id in _call_ids(state, review_id)]
                return ChatTurn(thread_id=thread_id, reply=reply, actions=actions)
            if utcnow() - checked > timedelta(seconds=HEARTBEAT_SECONDS):
                checked = utcnow()
                if not await processes.alive(owner):  # gone before it took the decision
                    left = await self.store.load(thread_id)
                    if left is not None and left.status == "awaiting_review":
                        await self.cancel_review(thread_id, review_id=review_id, reason=OWNER_GONE)
                    raise NoPendingReviewError
            await anyio.sleep(_POLL_SECONDS)

    async def take_handed_over(self, state: ThreadState) -> bool:
        """Apply a decision another process handed over for ``state``'s pending review.

        Called by the process holding the call while it waits. Returns whether
        one was applied (or refused: its answer says why).
        """
        if self.processes is None or state.pending is None:
            return False
        box_id = f"{DECISION_PREFIX}{state.pending.review_id}"
        box = await self.store.load(box_id)
        if box is None or len(box.messages) != 1:
            return False
        handed = json.loads(str(box.messages[0].get("content")))
        answer: dict[str, Any] = {"ok": True}
        # Applied to the end whatever happens to the waiting client meanwhile, as a decision
        # made in place; the deciding request's span is linked to the call's.
        with anyio.CancelScope(shield=True), telemetry.current(handed.get("traceparent")):
            try:  # as a decision made on this process's page (in the call's request)
                await self.submit_review(
                    handed["decisions"],
                    state.thread_id,
                    review_id=state.pending.review_id,
                    reviewer=handed.get("reviewer"),
                )
            except ToolguardError as exc:
                answer = {"error": str(exc)}
            reply = {"role": "assistant", "content": json.dumps(answer)}
            with contextlib.suppress(ConcurrentUpdateError):  # only the holder answers
                await self.store.save(
                    box.model_copy(update={"messages": [*box.messages, reply]}),
                    expected_version=box.version,
                )
        return True


def _call_ids(state: ThreadState, review_id: str) -> Sequence[str]:
    """The call ids of the actions of review ``review_id`` in ``state``'s audit trail."""
    found = {e.action_id for e in state.audit if e.review_id == review_id and e.action_id}
    return [a.call_id for a in state.actions if a.id in found]


def share(chat: GatewayChat, model: Any) -> Processes:
    """Make ``chat`` (on a shared store) and its call model name this process and hand over.

    ``model``: the gateway's :class:`~toolguard._gateway.proxy.CallModel`, whose new calls
    then name this process. Run :meth:`Processes.run` beside the gateway.
    """
    processes = Processes(chat.store)
    chat.processes = processes
    model.new_id = processes.call_id
    return processes
