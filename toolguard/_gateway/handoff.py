"""A decision on a waiting call answers at once; the call runs in its client's name.

A call that waits for a person is held by its client's ``tools/call`` request
(:meth:`WaitingChat.holding`). A decision on it, made on the approval page,
through the API or by the client's own answer to the approval question, is
applied there, in a task of that request (:class:`Held`), not in the
reviewer's request:

- the reviewer's request answers as soon as the decision is recorded and the
  call started (a decision that runs nothing, a rejection or one vote of
  several, answers once it is applied); the page then shows the call running
  (its thread ``running``, the action ``approved``), then its result;
- the upstream's requests during the call (sampling, elicitation, roots) are
  the call's client's (:mod:`toolguard._gateway.relay` reads :func:`deciding`);
- a client that gives up on the call while it runs (``notifications/cancelled``,
  its own timeout, a closed connection) cancels it on the upstream server: the
  upstream gets ``notifications/cancelled``, the action ends ``cancelled``
  (audited as a ``cancelled`` event whose detail is :data:`CANCELLED_AFTER_START`,
  with the ``review.cancelled`` webhook), and the event hook gets ``review.decided``
  with status ``cancelled`` (:func:`abandon`).

A call nobody holds in this process (another gateway process holds it, or a
2026-07-28 client has not retried yet) is decided as before: in the request
that decides.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar
from uuid import UUID

import anyio
import anyio.abc

from toolguard._chat.turns import ChatTurn
from toolguard._core.errors import ToolguardError
from toolguard._enforce.execute import CallCancelled
from toolguard._gateway.shared import GatewayChat

__all__ = [
    "ABANDONED",
    "CANCELLED_AFTER_START",
    "GONE_BEFORE_START",
    "Deciding",
    "Held",
    "WaitingChat",
    "abandon",
    "deciding",
]

ABANDONED: Final = (
    "the MCP client gave up on the call (it cancelled it, timed out or disconnected)"
    " before a decision arrived"
)
"""The reason audited when a review is cancelled because its client gave up before a decision."""
CANCELLED_AFTER_START: Final = (
    "The MCP client gave up on the call after it started (it cancelled it, timed out or"
    " disconnected); toolguard cancelled it on the upstream server, where its outcome is"
    " unknown."
)
"""The result of a call whose client gave up while it ran on the upstream server."""
GONE_BEFORE_START: Final = (
    "The MCP client gave up on the call as it was approved (it cancelled it, timed out or"
    " disconnected); it was not executed."
)
"""The result of an approved call whose client gave up before it reached the upstream server."""
_HOOK_SECONDS: Final = 5.0  # how long the event hook may take while a call is being abandoned

_T = TypeVar("_T")

# The decision being applied in this task, for the call's body (the relay reads it).
_DECIDING: contextvars.ContextVar[Deciding | None] = contextvars.ContextVar(
    "_DECIDING", default=None
)


def deciding() -> Deciding | None:
    """The decision being applied in this task to a call this process holds, or ``None``."""
    return _DECIDING.get()


class Deciding:
    """One decision being applied to a held call (in a task of the call's request)."""

    def __init__(self, held: Held) -> None:
        self.held = held
        self.started = anyio.Event()
        """Set when the call starts, or when the decision is applied (whichever comes first)."""

    async def run(self, send: Callable[[], Awaitable[_T]]) -> _T:
        """Run the call on the upstream (``send()``), cancelled there if its client gives up.

        Raises:
            CallCancelled: the client gave up before or while it ran.
        """
        held = self.held
        if held.gone:
            raise CallCancelled(GONE_BEFORE_START)
        self.started.set()  # recorded and started: the reviewer's request answers
        with anyio.CancelScope() as scope:
            held.running = scope
            try:
                return await send()
            finally:
                held.running = None
        raise CallCancelled(CANCELLED_AFTER_START)  # the scope was cancelled: the client left


class Held:
    """A call this process holds while it waits: its client's request, and the task group of
    that request in which decisions on it are applied.

    Args:
        thread_id: the call's thread.
        ctx: the client's ``tools/call`` request (its MCP request context).
        tasks: a task group of that request.
    """

    def __init__(self, thread_id: str, ctx: Any, tasks: anyio.abc.TaskGroup) -> None:
        self.thread_id = thread_id
        self.ctx = ctx
        self.tasks = tasks
        self.gone = False
        """Whether the client gave up on the call."""
        self.running: anyio.CancelScope | None = None
        """The scope of the call while it runs on the upstream."""

    def give_up(self) -> None:
        """The client gave up: a call not started never starts, one running is cancelled."""
        self.gone = True
        if self.running is not None:
            self.running.cancel()

    async def decide(self, submit: Callable[[], Awaitable[ChatTurn]]) -> ChatTurn:
        """Apply a decision (``submit()``) in the call's request; answer once the call started
        or the decision is applied.

        The decision's errors (a stale review, a reviewer not allowed, decisions that
        do not fit) are raised here, as the chat raises them. An answer given once the
        call started says nothing more (``ChatTurn(thread_id)``): the thread tells the
        rest as it happens.
        """
        step = Deciding(self)
        box: dict[str, Any] = {}

        async def apply() -> None:
            token = _DECIDING.set(step)
            try:
                with anyio.CancelScope(shield=True):  # applied to the end, as one made in place
                    box["turn"] = await submit()
            except Exception as exc:
                if step.started.is_set():  # nobody waits for it any more: say it
                    sys.stderr.write(
                        f"toolguard mcp-proxy: applying the decision on thread"
                        f" {self.thread_id} failed after the call started ({exc})\n"
                    )
                box["error"] = exc
            finally:
                _DECIDING.reset(token)
                step.started.set()

        self.tasks.start_soon(apply)
        await step.started.wait()
        if "turn" in box:
            turn: ChatTurn = box["turn"]
            return turn
        if "error" in box:
            raise box["error"]
        return ChatTurn(thread_id=self.thread_id)


class WaitingChat(GatewayChat):
    """The gateway's chat: a decision on a call this process holds runs in the call's request
    (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: dict[str, Held] = {}

    @contextlib.asynccontextmanager
    async def holding(self, thread_id: str, ctx: Any) -> AsyncIterator[Held]:
        """Hold the call of ``thread_id`` for its client's request ``ctx`` while inside.

        Leaving by an exception (the client gave up: its request is cancelled) gives
        the call up (:meth:`Held.give_up`); either way, a decision being applied is
        applied to the end before this returns.
        """
        async with anyio.create_task_group() as tasks:
            held = Held(thread_id, ctx, tasks)
            self._held[thread_id] = held
            try:
                yield held
            except BaseException:
                held.give_up()
                raise
            finally:
                if self._held.get(thread_id) is held:
                    del self._held[thread_id]

    def _holding(self, thread_id: object) -> Held | None:
        """The call of ``thread_id`` this process holds (any other value: ``None``)."""
        return self._held.get(thread_id) if isinstance(thread_id, str) else None

    async def submit_review(
        self,
        decisions: Any,
        thread_id: str,
        *,
        review_id: str | None = None,
        reviewer: str | int | UUID | None = None,
    ) -> ChatTurn:
        """:meth:`~toolguard.ReviewedChat.submit_review`, applied in the request of the call it
        decides when this process holds it; answers once the call started."""
        held = self._holding(thread_id)
        submit = functools.partial(
            super().submit_review, decisions, thread_id, review_id=review_id, reviewer=reviewer
        )
        if held is None or deciding() is not None:
            return await submit()
        return await held.decide(submit)


async def abandon(proxy: Any, thread_id: str, review_id: str, name: str, args: Any) -> None:
    """Close the review of a call its client gave up on: it never runs, whoever approves.

    Audited as ``cancelled`` (reason :data:`ABANDONED`); the event hook gets
    ``review.decided`` with status ``cancelled``. A review decided or expired
    meanwhile keeps that outcome (and its hook event); a call cancelled as it ran
    (:data:`CANCELLED_AFTER_START`) is told to the hook here, its request being gone.
    """
    with anyio.CancelScope(shield=True):
        try:
            await proxy.chat.cancel_review(thread_id, review_id=review_id, reason=ABANDONED)
        except ToolguardError:
            if not await _cancelled_as_it_ran(proxy.chat, thread_id, review_id):
                return  # decided or expired first: that outcome stands
        except Exception as exc:  # the store failed: the deadline still closes the review
            sys.stderr.write(
                f"toolguard mcp-proxy: cancelling the review of an abandoned call failed"
                f" ({exc}); it stays open until its deadline\n"
            )
            return
        payload = {
            "thread_id": thread_id,
            "review_id": review_id,
            "tool": name,
            "args": proxy._shown(name, args),  # secrets redacted, as the reviewer sees them
            "status": "cancelled",
        }
        with anyio.move_on_after(_HOOK_SECONDS):  # a stuck hook must not hold the call
            await proxy._emit("review.decided", payload)


async def _cancelled_as_it_ran(chat: Any, thread_id: str, review_id: str) -> bool:
    """Whether the call of review ``review_id`` was approved, then cancelled as it ran."""
    state = await chat.get_thread(thread_id)
    ids = {e.action_id for e in state.audit if e.review_id == review_id}
    return any(
        action.id in ids
        and action.status == "cancelled"
        and action.result is not None
        and action.result.content in (CANCELLED_AFTER_START, GONE_BEFORE_START)
        for action in state.actions
    )
