"""The chat use case: a complete agent loop with human review and durable state.

:class:`ReviewedChat` drives any :class:`~toolguard.ChatModel`: model →
tool calls → run or pause → … until the model answers with text. A pause
stores the thread and returns the ``pending_review``; :meth:`submit_review`
validates the decisions, claims the review with a compare-and-set save (so
racing submissions run the approved tools once), applies the decisions and
carries on. The thread is saved after every step, so another process with
the same store can pick it up.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from toolguard._classify import Classifier
from toolguard._errors import (
    NoPendingReviewError,
    ReviewPendingError,
    StepLimitError,
    UnknownThreadError,
)
from toolguard._model import ChatModel, Message, ModelResponse
from toolguard._models import Action, PendingReview, ToolCall, ToolResult, new_id
from toolguard._runner import EditPolicy, Runner, Step
from toolguard._store import ConcurrentUpdateError, MemoryStore, Store, ThreadState
from toolguard._toolset import Tools
from toolguard._validate import validate_decisions


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTurn:
    """What one ``send_message`` or ``submit_review`` produced.

    Attributes:
        thread_id: the conversation's id (new when ``send_message`` started one).
        reply: the model's final text, or ``None`` while a review is pending.
        pending_review: the review payload to show a person, or ``None``.
        review_id: the id of that review; pass it back to bind decisions to it.
        actions: the approval requests this call created or finished, with
            their statuses.
    """

    thread_id: str
    reply: str | None = None
    pending_review: PendingReview | None = None
    review_id: str | None = None
    actions: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON data: ``{thread_id, reply, pending_review, review_id}``."""
        return {
            "thread_id": self.thread_id,
            "reply": self.reply,
            "pending_review": (
                self.pending_review.model_dump() if self.pending_review is not None else None
            ),
            "review_id": self.review_id,
        }


def assistant_message(text: str | None, calls: Sequence[ToolCall]) -> Message:
    """An OpenAI assistant message carrying ``calls``."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": (
                        c.arguments_error
                        if c.arguments_error is not None
                        else json.dumps(c.args, ensure_ascii=False)
                    ),
                },
            }
            for c in calls
        ],
    }


def tool_message(result: ToolResult) -> Message:
    """An OpenAI tool message for ``result`` (``status`` is kept for our own records)."""
    return {
        "role": "tool",
        "tool_call_id": result.call_id,
        "content": result.content,
        "status": result.status,
    }


def _merge(actions: list[Action], updates: Sequence[Action]) -> list[Action]:
    position = {a.id: i for i, a in enumerate(actions)}
    merged = list(actions)
    for action in updates:
        if action.id in position:
            merged[position[action.id]] = action
        else:
            position[action.id] = len(merged)
            merged.append(action)
    return merged


class ReviewedChat:
    """A chat agent whose guarded tool calls wait for a human.

    Args:
        model: any :class:`~toolguard.ChatModel` (e.g.
            ``toolguard.openai.OpenAIChatModel``).
        tools: a toolset from :func:`~toolguard.guard`, or a list/mapping of
            functions and tools (classified with ``classifier``).
        store: where threads live; defaults to a :class:`~toolguard.MemoryStore`.
            Use :class:`~toolguard.SQLiteStore` to survive restarts.
        system_prompt: the first message of every new thread.
        max_steps: most model calls per ``send_message``/``submit_review``.
        classifier: used when ``tools`` is not already a toolset.
        edit_policy: see :class:`~toolguard.Runner`.
        sync_in_thread: run sync tools in a worker thread.
    """

    def __init__(
        self,
        model: ChatModel,
        tools: Tools,
        *,
        store: Store | None = None,
        system_prompt: str | None = None,
        max_steps: int = 8,
        classifier: Classifier | None = None,
        edit_policy: EditPolicy = "run",
        sync_in_thread: bool = True,
    ) -> None:
        if max_steps < 1:
            msg = f"max_steps must be at least 1, got {max_steps}"
            raise ValueError(msg)
        self.model = model
        self.runner = Runner(
            tools, classifier=classifier, edit_policy=edit_policy, sync_in_thread=sync_in_thread
        )
        self.toolset = self.runner.toolset
        self.store: Store = store if store is not None else MemoryStore()
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self._tool_schemas = self.toolset.openai_tools()

    # ------------------------------------------------------------------ reading

    async def get_thread(self, thread_id: str) -> ThreadState:
        """The stored thread.

        Raises:
            UnknownThreadError: no thread has that id.
        """
        state = await self.store.load(thread_id)
        if state is None:
            raise UnknownThreadError(thread_id)
        return state

    # ------------------------------------------------------------------ the two entry points

    async def send_message(self, message: str, thread_id: str | None = None) -> ChatTurn:
        """Send a user message and run the agent until it answers or pauses.

        Args:
            message: the user's text.
            thread_id: an existing thread, or ``None`` to start a new one.

        Returns:
            The reply, or the pending review when a guarded call waits.

        Raises:
            ReviewPendingError: the thread has actions awaiting decisions.
            UnknownThreadError: no thread has that id.
            ModelError: the model failed; the thread keeps its last saved step.
            StepLimitError: the model kept calling tools for ``max_steps`` steps.
        """
        text: object = message  # checked at run time for untyped callers
        if not isinstance(text, str):
            msg = f"message must be text, got {type(text).__name__}"
            raise TypeError(msg)
        if thread_id is None:
            state = ThreadState(thread_id=new_id())
            if self.system_prompt:
                state.messages.append({"role": "system", "content": self.system_prompt})
            expected: int | None = None
        else:
            state = await self.get_thread(thread_id)
            if state.status != "idle":
                raise ReviewPendingError
            expected = state.version
        messages = [*state.messages, {"role": "user", "content": message}]
        return await self._loop(state, expected, messages)

    async def submit_review(self, decisions: Any, thread_id: str) -> ChatTurn:
        """Answer the pending review of a thread and carry on.

        Checks, in order: the thread exists, a review is pending, then
        :func:`~toolguard.validate_decisions`. A refused call changes
        nothing. The review is then claimed with a compare-and-set save:
        if another submission claimed it first, this one gets
        ``NoPendingReviewError`` and runs nothing.

        Args:
            decisions: one decision per action, in order (wire dicts or models).
            thread_id: the thread whose review this answers.

        Raises:
            UnknownThreadError: no thread has that id.
            NoPendingReviewError: nothing awaits a decision (or another
                submission got there first).
            InvalidReviewDecisionError: the decisions do not fit the review.
            ModelError: the model failed after the tools ran; their results
                are saved in the thread.
        """
        state = await self.get_thread(thread_id)
        if state.status != "awaiting_review" or state.pending is None:
            raise NoPendingReviewError
        parsed = validate_decisions(state.pending, decisions)
        pending = state.pending
        try:
            claimed = await self.store.save(
                state.model_copy(update={"status": "running", "decisions": parsed}),
                expected_version=state.version,
            )
        except ConcurrentUpdateError:
            raise NoPendingReviewError from None
        step = await self.runner.resume(pending, parsed)
        return await self._loop(claimed, claimed.version, list(claimed.messages), step)

    # ------------------------------------------------------------------ the loop

    async def _complete(self, messages: list[Message]) -> ModelResponse:
        return await self.model.complete(messages, self._tool_schemas)

    async def _save(self, state: ThreadState, expected: int | None, **changes: Any) -> ThreadState:
        return await self.store.save(state.model_copy(update=changes), expected_version=expected)

    async def _loop(
        self,
        state: ThreadState,
        expected: int | None,
        messages: list[Message],
        step: Step | None = None,
    ) -> ChatTurn:
        touched: list[Action] = []
        model_calls = 0
        while True:
            if step is None:
                if model_calls >= self.max_steps:
                    msg = (
                        f"The model called tools for {self.max_steps} steps without answering;"
                        " the thread is saved and can go on with a new message."
                    )
                    raise StepLimitError(msg)
                response = await self._complete(messages)
                model_calls += 1
                if not response.tool_calls:
                    reply = response.text or ""
                    messages.append({"role": "assistant", "content": reply})
                    state = await self._save(
                        state,
                        expected,
                        messages=messages,
                        status="idle",
                        pending=None,
                        decisions=None,
                    )
                    return ChatTurn(thread_id=state.thread_id, reply=reply, actions=touched)
                step = await self.runner.run(response.tool_calls)
                messages.append(assistant_message(response.text, step.calls))
            else:
                # Resumed: the paused turn's assistant message now records the calls as
                # they stand, edits included, so the history shows what really ran.
                for index in range(len(messages) - 1, -1, -1):
                    if messages[index].get("role") == "assistant":
                        messages[index] = assistant_message(
                            messages[index].get("content"), step.calls
                        )
                        break
            touched = _merge(touched, step.actions)
            actions = _merge(state.actions, step.actions)
            if step.pending is not None:
                state = await self._save(
                    state,
                    expected,
                    messages=messages,
                    status="awaiting_review",
                    pending=step.pending,
                    decisions=None,
                    actions=actions,
                )
                return ChatTurn(
                    thread_id=state.thread_id,
                    pending_review=step.pending.pending_review,
                    review_id=step.pending.review_id,
                    actions=touched,
                )
            messages.extend(tool_message(r) for r in step.results)
            state = await self._save(
                state,
                expected,
                messages=messages,
                status="idle",
                pending=None,
                decisions=None,
                actions=actions,
            )
            expected = state.version
            step = None

    # ------------------------------------------------------------------ without an event loop

    @contextmanager
    def blocking(self) -> Iterator[BlockingChat]:
        """Use the chat from code without an event loop.

        ::

            with chat.blocking() as session:
                turn = session.send_message("Mail Alice that the meeting moved")
                if turn.pending_review:
                    turn = session.submit_review([{"type": "approve"}], turn.thread_id)

        One event loop runs in a helper thread for the whole block, so model
        clients that keep connections (like ``openai.AsyncOpenAI``) work.
        """
        with start_blocking_portal() as portal:
            yield BlockingChat(self, portal)


class BlockingChat:
    """The synchronous face of a :class:`ReviewedChat` (see :meth:`ReviewedChat.blocking`)."""

    def __init__(self, chat: ReviewedChat, portal: BlockingPortal) -> None:
        self._chat = chat
        self._portal = portal

    def send_message(self, message: str, thread_id: str | None = None) -> ChatTurn:
        """Blocking :meth:`ReviewedChat.send_message`."""
        return self._portal.call(self._chat.send_message, message, thread_id)

    def submit_review(self, decisions: Any, thread_id: str) -> ChatTurn:
        """Blocking :meth:`ReviewedChat.submit_review`."""
        turn: ChatTurn = self._portal.call(self._chat.submit_review, decisions, thread_id)
        return turn

    def get_thread(self, thread_id: str) -> ThreadState:
        """Blocking :meth:`ReviewedChat.get_thread`."""
        return self._portal.call(self._chat.get_thread, thread_id)


ReviewedChatUseCase = ReviewedChat
"""The seed's name for :class:`ReviewedChat`."""
