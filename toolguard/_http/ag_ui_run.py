"""One AG-UI run of a :class:`~toolguard.ReviewedChat`: a ``RunAgentInput`` in, AG-UI events out
(the ``ag-ui`` extra: the ``ag-ui-protocol`` package's models and encoder).

A thin translation, both ways. A run without ``resume`` sends the last message, the user's
text, with :meth:`~toolguard.ReviewedChat.send_message` (a run with no new user message in a
known conversation only shows where it stands: the interrupts still waiting); a run with
``resume`` answers the interrupts of the paused run with
:meth:`~toolguard.ReviewedChat.submit_review`, whose checks (once only, deadlines, reviewers,
quorum, rules, edits against the schema) decide. The conversation is the chat's thread named
by the run's ``state`` (``{"toolguard": {"threadId": ...}}``, sent to the client in a
``STATE_SNAPSHOT`` when the thread starts); the client's message history is not read beyond
its last message: the chat keeps its own.

The events are read from the thread after the turn (:class:`Rendering`): the model's text,
its tool calls and their results (secrets redacted), and, for a paused turn, ``RUN_FINISHED``
with one interrupt per action awaiting review. Whatever a run cannot do is a ``RUN_ERROR``
that changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, Final, TypeVar

import anyio
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic_core import PydanticSerializationError

from toolguard._chat.chat import ReviewedChat
from toolguard._chat.turns import ChatTurn
from toolguard._core.errors import UnknownThreadError
from toolguard._core.jsonable import clean_text
from toolguard._core.records import Action
from toolguard._http.answers import ECHO_LIMIT, Refusal, answer, shorten
from toolguard._http.waiting import waiting_facts
from toolguard._policy.redact import shown_messages
from toolguard._stores.protocol import ThreadState

_log = logging.getLogger("toolguard.http")

_T = TypeVar("_T")

STATE_KEY: Final = "toolguard"
"""The key of the run's state that names the chat's thread: ``{"toolguard": {"threadId": ...}}``
(also the key of each interrupt's metadata)."""
INTERRUPT_REASON: Final = "tool_call"
"""The ``reason`` of every interrupt: a tool call awaits a person's decision."""
PAYLOAD_FIELDS: Final = frozenset({"approved", "editedArgs", "reason"})
"""What a resume entry's payload may carry."""
_ID_LIMIT: Final = 128  # the longest thread, review or action id (as the HTTP API's ids)

# The texts of the runs this route refuses itself (code INVALID_RUN).
BAD_STATE: Final = (
    "The run's state must be an object (it names the conversation under 'toolguard')."
    " Nothing was changed."
)
BAD_THREAD: Final = (
    "state.toolguard.threadId must be a conversation id (text of at most 128 characters)."
    " Nothing was changed."
)
NO_THREAD: Final = (
    "The resume names no conversation: send the run's state as this server sent it"
    " (state.toolguard.threadId). Nothing was changed."
)
NO_MESSAGE: Final = (
    "The last message of the run must be the user's text (a user message with text content)."
    " Nothing was changed."
)
UNKNOWN_THREAD: Final = (
    "Unknown conversation {thread_id} (state.toolguard.threadId): start a new one with a run"
    " whose state names none."
)
UNKNOWN: Final = (
    "The interrupt {interrupt} is not awaiting an answer in this run. Nothing was changed."
)
TWICE: Final = "The interrupt {interrupt} is answered twice. Nothing was changed."
TWO_REVIEWS: Final = (
    "The resume answers interrupts of two different runs; answer the interrupts of one run at"
    " a time. Nothing was changed."
)
UNANSWERED: Final = (
    "Every interrupt of the run needs an answer in the same resume; {names} has none."
    " Nothing was changed."
)
MALFORMED: Final = (
    "The answer to the interrupt {interrupt} is malformed: a resolved interrupt's payload is"
    " {{approved: true or false, editedArgs?: object, reason?: text}}, and editedArgs goes with"
    " approved: true. Nothing was changed."
)
NOT_CARRIED: Final = (
    "The answer to the interrupt {interrupt} carries {fields}: a resume carries approved,"
    " editedArgs and reason only; standing grants are made on the approval page."
    " Nothing was changed."
)
FAILED: Final = "The run failed on the server; see its log."

INVALID_RUN: Final = "INVALID_RUN"
"""The ``RUN_ERROR`` code of a run this route refuses itself (the text says why)."""
INTERNAL: Final = "INTERNAL_ERROR"
"""The ``RUN_ERROR`` code of an unexpected failure (logged on ``toolguard.http``)."""


class RunRefused(Exception):  # noqa: N818 - a refusal, answered as RUN_ERROR
    """A run that cannot be applied: its text and code are the ``RUN_ERROR``'s."""

    def __init__(self, text: str, code: str = INVALID_RUN) -> None:
        super().__init__(text)
        self.code = code


def _echo(value: object) -> str:
    return shorten(repr(value), ECHO_LIMIT)


# --------------------------------------------------------------------------- reading a run


def thread_of(state: Any) -> str | None:
    """The chat's thread the run's ``state`` names (``None``: none, a new conversation)."""
    if state is None:
        return None
    if not isinstance(state, dict):
        raise RunRefused(BAD_STATE)
    ours = state.get(STATE_KEY)
    if not isinstance(ours, dict) or "threadId" not in ours:
        return None
    thread_id = ours["threadId"]
    if not isinstance(thread_id, str) or not 0 < len(thread_id) <= _ID_LIMIT:
        raise RunRefused(BAD_THREAD)
    return thread_id


def text_of(body: RunAgentInput) -> str:
    """The text of the run's last message, which must be the user's."""
    if not body.messages or body.messages[-1].role != "user":
        raise RunRefused(NO_MESSAGE)
    content = body.messages[-1].content
    if isinstance(content, str):
        text = content
    else:
        texts = [getattr(part, "text", None) for part in content if part.type == "text"]
        if len(texts) != len(content):  # images, audio, documents: not for this chat
            raise RunRefused(NO_MESSAGE)
        text = "\n".join(t for t in texts if isinstance(t, str) and t)
    if not text:
        raise RunRefused(NO_MESSAGE)
    return text


def interrupt_id(review_id: str, action: Action) -> str:
    """The interrupt of an action awaiting review: its review's id, ``.``, its own id (so a
    resume names the review it answers, and the chat checks that review)."""
    return f"{review_id}.{action.id}"


def _decision(entry: ResumeEntry, name: str) -> dict[str, Any]:
    """The decision of one resume entry (``name``: the tool an edit runs)."""
    shown = _echo(entry.interrupt_id)
    payload = entry.payload
    if entry.status == "cancelled":
        reason = payload.get("reason") if isinstance(payload, dict) else None
        return {"type": "reject", **({"message": reason} if isinstance(reason, str) else {})}
    if not isinstance(payload, dict):
        raise RunRefused(MALFORMED.format(interrupt=shown))
    extra = sorted(str(key) for key in payload.keys() - PAYLOAD_FIELDS)
    if extra:
        fields = ", ".join(_echo(key) for key in extra[:5])
        raise RunRefused(NOT_CARRIED.format(interrupt=shown, fields=fields))
    approved, edited = payload.get("approved"), payload.get("editedArgs")
    reason = payload.get("reason")
    if (
        not isinstance(approved, bool)
        or not (edited is None or (approved and isinstance(edited, dict)))
        or not (reason is None or isinstance(reason, str))
    ):
        raise RunRefused(MALFORMED.format(interrupt=shown))
    if edited is not None:
        return {"type": "edit", "edited_action": {"name": name, "args": clean_text(edited)}}
    if approved:
        return {"type": "approve"}
    return {"type": "reject", **({"message": reason} if reason else {})}


def _review_of(entries: Sequence[ResumeEntry]) -> str:
    """The one review the entries' interrupt ids name."""
    reviews, seen = set(), set()
    for entry in entries:
        answered = entry.interrupt_id
        review_id, dot, action_id = answered.partition(".")
        if not (dot and 0 < len(review_id) <= _ID_LIMIT and 0 < len(action_id) <= _ID_LIMIT):
            raise RunRefused(UNKNOWN.format(interrupt=_echo(answered)))
        if answered in seen:
            raise RunRefused(TWICE.format(interrupt=_echo(answered)))
        seen.add(answered)
        reviews.add(review_id)
    if len(reviews) > 1:
        raise RunRefused(TWO_REVIEWS)
    return reviews.pop()


def decisions_for(
    state: ThreadState, entries: Sequence[ResumeEntry]
) -> tuple[list[dict[str, Any]], str]:
    """The decisions of a resume and the id of the review it answers.

    For the review awaiting decisions: one decision per action awaiting review, in the
    review's order; every entry must name one of them, and each needs one. For any other
    review (answered already, being applied, of another thread, never made), the decisions
    as sent, bound to that review: the chat refuses them with its own text.

    Raises:
        RunRefused: an entry does not fit the review awaiting decisions, or is malformed.
    """
    review_id = _review_of(entries)
    pending = state.pending
    if pending is None or pending.review_id != review_id or state.status != "awaiting_review":
        return [_decision(entry, "") for entry in entries], review_id
    waiting = {interrupt_id(review_id, a): a for a in pending.actions if a.status == "requested"}
    by_id = {entry.interrupt_id: entry for entry in entries}
    for answered in by_id:
        if answered not in waiting:
            raise RunRefused(UNKNOWN.format(interrupt=_echo(answered)))
    missing = [action.name for key, action in waiting.items() if key not in by_id]
    if missing:
        raise RunRefused(UNANSWERED.format(names=", ".join(f"`{name}`" for name in missing)))
    return [_decision(by_id[key], action.name) for key, action in waiting.items()], review_id


# --------------------------------------------------------------------------- the events


def _expires(action: Action) -> str | None:
    if action.expires_at is None:
        return None
    return action.expires_at.isoformat().replace("+00:00", "Z")


def response_schema(parameters: Mapping[str, Any] | None, action: Action) -> dict[str, Any]:
    """The JSON Schema of a resume payload for ``action``: ``approved``, the tool's
    arguments' schema as ``editedArgs`` (where an edit is allowed), ``reason``."""
    properties: dict[str, Any] = {
        "approved": {"type": "boolean", "description": "true runs the call, false rejects it."}
    }
    if "edit" in action.allowed_decisions:
        schema = dict(parameters) if parameters else {"type": "object"}
        schema["description"] = "All the arguments to run instead (an edit), with approved: true."
        properties["editedArgs"] = schema
    properties["reason"] = {"type": "string", "description": "Why, for the model (a rejection)."}
    return {
        "type": "object",
        "properties": properties,
        "required": ["approved"],
        "additionalProperties": False,
    }


class Rendering:
    """The events of one run after ``RUN_STARTED``: the messages a turn added, the run's state
    when the conversation is new, and ``RUN_FINISHED`` (with the interrupts of a paused turn).

    Args:
        chat: the chat (its tools' schemas).
        body: the run.
        state: the thread after the turn.
        start: the index of the first message the turn added.
        done: tool call ids whose result an earlier run already showed (the calls that ran
            in the step before it paused).
        named: whether the run's state already names this thread.
    """

    def __init__(
        self,
        chat: ReviewedChat,
        body: RunAgentInput,
        state: ThreadState,
        *,
        start: int,
        done: frozenset[str],
        named: bool,
    ) -> None:
        self.chat = chat
        self.body = body
        self.state = state
        self.start = start
        self.done = set(done)
        self.named = named
        self.events: list[BaseEvent] = []

    def render(self) -> list[BaseEvent]:
        """The messages, the results of a paused step, the state, ``RUN_FINISHED``."""
        state = self.state
        shown = shown_messages(self.chat, state.messages)
        for index in range(self.start, len(shown)):
            self._message(index, shown[index])
        pending = state.pending if state.status == "awaiting_review" else None
        if pending is not None:
            for result in pending.results:
                self._result(f"{state.thread_id}.{result.call_id}", result.call_id, result.content)
        if not self.named:
            before = self.body.state if isinstance(self.body.state, dict) else {}
            ours = {"threadId": state.thread_id}
            self.events.append(StateSnapshotEvent(snapshot={**before, STATE_KEY: ours}))
        waiting = [a for a in pending.actions if a.status == "requested"] if pending else []
        outcome = None
        if pending is not None and waiting:
            interrupts = [self._interrupt(action, pending.review_id) for action in waiting]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        finished = RunFinishedEvent(
            thread_id=self.body.thread_id, run_id=self.body.run_id, outcome=outcome
        )
        self.events.append(finished)
        return self.events

    def _message(self, index: int, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        if role == "assistant":
            message_id = f"{self.state.thread_id}.{index}"
            content = message.get("content")
            if isinstance(content, str) and content:
                self.events += [
                    TextMessageStartEvent(message_id=message_id, role="assistant"),
                    TextMessageContentEvent(message_id=message_id, delta=content),
                    TextMessageEndEvent(message_id=message_id),
                ]
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                call_id = str(call.get("id", ""))
                arguments = function.get("arguments")
                self.events += [
                    ToolCallStartEvent(
                        tool_call_id=call_id,
                        tool_call_name=str(function.get("name", "")),
                        parent_message_id=message_id,
                    ),
                    ToolCallArgsEvent(
                        tool_call_id=call_id,
                        delta=arguments if isinstance(arguments, str) else "{}",
                    ),
                    ToolCallEndEvent(tool_call_id=call_id),
                ]
        elif role == "tool":
            content = message.get("content")
            text = content if isinstance(content, str) else str(content)
            call_id = str(message.get("tool_call_id", ""))
            self._result(f"{self.state.thread_id}.{index}", call_id, text)

    def _result(self, message_id: str, call_id: str, content: str) -> None:
        if call_id in self.done:
            return
        self.done.add(call_id)
        self.events.append(
            ToolCallResultEvent(
                message_id=message_id, tool_call_id=call_id, content=content, role="tool"
            )
        )

    def _interrupt(self, action: Action, review_id: str) -> Interrupt:
        about = waiting_facts(self.state.thread_id, review_id, action)
        tool = self.chat.toolset.get(action.name)
        parameters = tool.parameters if tool is not None else None
        return Interrupt(
            id=interrupt_id(review_id, action),
            reason=INTERRUPT_REASON,
            message=action.description,
            tool_call_id=action.call_id,
            response_schema=response_schema(parameters, action),
            expires_at=_expires(action),
            metadata={STATE_KEY: about},
        )


# --------------------------------------------------------------------------- one run


async def _asked(call: Awaitable[_T], prefix: str) -> _T:
    """Await a call of the chat; its refusals become :class:`RunRefused` (the error's class
    name as the code, its text as the HTTP API gives it)."""
    try:
        return await answer(call, prefix)
    except Refusal as exc:
        cause = exc.__cause__
        if isinstance(cause, UnknownThreadError):
            raise RunRefused(
                UNKNOWN_THREAD.format(thread_id=_echo(cause.thread_id)), type(cause).__name__
            ) from exc
        code = type(cause).__name__ if cause is not None else INVALID_RUN
        raise RunRefused(str(exc.detail), code) from exc


async def _turn(
    chat: ReviewedChat, body: RunAgentInput, who: str | None, prefix: str
) -> list[BaseEvent]:
    """The events after ``RUN_STARTED`` of a run that the chat applied."""
    thread_id = thread_of(body.state)
    before: ThreadState | None = None
    turn: ChatTurn
    if body.resume:
        if thread_id is None:
            raise RunRefused(NO_THREAD)
        before = await _asked(chat.get_thread(thread_id, actor=who), prefix)
        decisions, review_id = decisions_for(before, body.resume)
        turn = await _asked(
            chat.submit_review(decisions, thread_id, review_id=review_id, reviewer=who), prefix
        )
    elif thread_id is not None and (not body.messages or body.messages[-1].role != "user"):
        # Nothing new to say: where the conversation stands (the interrupts still waiting).
        state = await _asked(chat.get_thread(thread_id, actor=who), prefix)
        ran = state.pending.results if state.pending is not None else []
        shown = frozenset(result.call_id for result in ran)
        start = len(state.messages)
        return Rendering(chat, body, state, start=start, done=shown, named=True).render()
    else:
        text = text_of(body)
        if thread_id is not None:
            before = await _asked(chat.get_thread(thread_id, actor=who), prefix)
        turn = await _asked(chat.send_message(text, thread_id, actor=who), prefix)
    after = await _asked(chat.get_thread(turn.thread_id, actor=who), prefix)
    start = len(before.messages) if before is not None else 0
    ran = before.pending.results if before is not None and before.pending is not None else []
    done = frozenset(result.call_id for result in ran)
    named = thread_id == turn.thread_id
    return Rendering(chat, body, after, start=start, done=done, named=named).render()


async def run_events(
    chat: ReviewedChat, body: RunAgentInput, who: str | None, prefix: str
) -> AsyncIterator[str]:
    """The server-sent events of one run: ``RUN_STARTED`` at once, then the turn's events, or
    ``RUN_ERROR`` when the run is refused (nothing changed) or fails."""
    encoder = EventEncoder()
    yield _encoded(encoder, RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id))
    error: RunErrorEvent | None = None
    events: list[BaseEvent] = []
    # A client that goes away does not cut a turn short: the chat finishes and saves it.
    with anyio.CancelScope(shield=True):
        try:
            events = await _turn(chat, body, who, prefix)
        except RunRefused as exc:
            error = RunErrorEvent(message=clean_text(str(exc)), code=exc.code)
        except Exception:
            _log.exception("toolguard.http: an AG-UI run failed")
            error = RunErrorEvent(message=FAILED, code=INTERNAL)
    for event in [error] if error is not None else events:
        yield _encoded(encoder, event)


def _encoded(encoder: EventEncoder, event: BaseEvent) -> str:
    """The event as a server-sent event; a lone surrogate (JSON text may escape one, UTF-8
    cannot hold it) becomes U+FFFD."""
    try:
        return encoder.encode(event)
    except PydanticSerializationError:
        mended = type(event).model_validate(clean_text(event.model_dump(by_alias=True)))
        return encoder.encode(mended)
