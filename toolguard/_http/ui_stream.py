"""A turn of a :class:`~toolguard.ReviewedChat` as the parts of the Vercel AI SDK's UI message
stream (``useChat``'s protocol, version ``v1``): server-sent events ``data: {json}``, ended
by ``data: [DONE]``.

The parts are read from the thread itself, after the turn: the messages it added (the
model's text, its tool calls and their results, in the redacted form a person may see),
the results of calls that already ran in a paused step, and one ``tool-approval-request``
per action awaiting review. Nothing here decides anything: it only renders what the chat
stored.
"""

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from toolguard._core.jsonable import clean_text
from toolguard._core.records import Action, ToolResult
from toolguard._http.waiting import waiting_facts
from toolguard._stores.protocol import ThreadState

Part = dict[str, Any]
"""One part (chunk) of the stream, as JSON data."""

Link = Callable[[str], str | None]
"""The address of a thread's review on an approval page (``None``: no page to link)."""

STREAM_HEADERS: Final = {
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The headers of a UI message stream besides its ``text/event-stream`` media type."""

METADATA_KEY: Final = "toolguard"
"""The key of the assistant message's metadata that names the thread: ``{"toolguard":
{"threadId": ..., "reviewId": ...}}``."""

DENIED_STATUSES: Final = frozenset({"rejected"})
"""Action statuses shown as ``tool-output-denied`` (a person said no)."""


def sse(parts: Iterable[Part]) -> str:
    """The server-sent events of ``parts``, then ``data: [DONE]``.

    JSON text escapes every non-ASCII character, so a lone surrogate in a tool's
    output still renders (``JSON.parse`` reads the escapes back).
    """
    events = [
        "data: " + json.dumps(part, ensure_ascii=True, separators=(",", ":"), default=str)
        for part in parts
    ]
    return "".join(f"{event}\n\n" for event in [*events, "data: [DONE]"])


def error_parts(text: str) -> list[Part]:
    """The stream of a refused request: one ``error`` part (``useChat`` shows it as its
    ``error``); no message is started, so the conversation on the page stays as it was."""
    return [{"type": "error", "errorText": clean_text(text)}]


def approval_id(review_id: str, action: Action) -> str:
    """The ``approvalId`` of an action awaiting review: its review's id, ``.``, its own id
    (so an answer names the review it answers, and the chat checks that review)."""
    return f"{review_id}.{action.id}"


def _arguments(text: object) -> Any:
    """A stored call's arguments as JSON data (the text itself when it is not an object)."""
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text, parse_constant=lambda name: name)
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _output_part(call_id: str, status: str, content: str, action: Action | None) -> Part:
    """The part that ends a tool call: its output, its error, or the person's refusal."""
    if action is not None and action.status in DENIED_STATUSES:
        return {"type": "tool-output-denied", "toolCallId": call_id}
    if status == "success":
        return {"type": "tool-output-available", "toolCallId": call_id, "output": content}
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": content}


class Rendering:
    """The parts of one response: the messages a turn added and what waits for a person.

    Args:
        state: the thread after the turn.
        shown: its messages as a person may see them (secrets redacted).
        start: the index of the first message the turn added.
        done: tool call ids whose output an earlier response already showed (the calls
            that ran in the step before it paused).
        link: the address of the thread's review on an approval page.
    """

    def __init__(
        self,
        state: ThreadState,
        shown: Sequence[Mapping[str, Any]],
        start: int,
        done: frozenset[str],
        link: Link | None,
    ) -> None:
        self.state = state
        self.shown = shown
        self.start = start
        self.done = set(done)
        self.link = link
        self.actions = {action.call_id: action for action in state.actions}
        self.parts: list[Part] = []
        self.in_step = False

    def render(self) -> list[Part]:
        """``start``, the steps, the approval requests and ``finish``."""
        pending = self.state.pending if self.state.status == "awaiting_review" else None
        metadata = {
            "threadId": self.state.thread_id,
            "reviewId": pending.review_id if pending is not None else None,
        }
        self.parts.append({"type": "start", "messageMetadata": {METADATA_KEY: metadata}})
        for index in range(self.start, len(self.shown)):
            self._message(index, self.shown[index])
        if pending is not None:
            for result in pending.results:
                self._result(result)
            for action in pending.actions:
                if action.status == "requested":
                    self.parts.append(self._approval_request(action, pending.review_id))
        self._end_step()
        reason = "tool-calls" if pending is not None else "stop"
        self.parts.append({"type": "finish", "finishReason": reason})
        return self.parts

    def _end_step(self) -> None:
        if self.in_step:
            self.parts.append({"type": "finish-step"})
            self.in_step = False

    def _message(self, index: int, message: Mapping[str, Any]) -> None:
        role = message.get("role")
        if role == "assistant":
            self._end_step()
            self.parts.append({"type": "start-step"})
            self.in_step = True
            content = message.get("content")
            if isinstance(content, str) and content:
                text_id = f"text-{index}"
                self.parts += [
                    {"type": "text-start", "id": text_id},
                    {"type": "text-delta", "id": text_id, "delta": content},
                    {"type": "text-end", "id": text_id},
                ]
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                self.parts.append(
                    {
                        "type": "tool-input-available",
                        "toolCallId": str(call.get("id", "")),
                        "toolName": str(function.get("name", "")),
                        "input": _arguments(function.get("arguments")),
                    }
                )
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            if call_id in self.done:
                return
            self.done.add(call_id)
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            status = str(message.get("status", "success"))
            self.parts.append(_output_part(call_id, status, text, self.actions.get(call_id)))

    def _result(self, result: ToolResult) -> None:
        if result.call_id in self.done:
            return
        self.done.add(result.call_id)
        action = self.actions.get(result.call_id)
        self.parts.append(_output_part(result.call_id, result.status, result.content, action))

    def _approval_request(self, action: Action, review_id: str) -> Part:
        descriptor = waiting_facts(self.state.thread_id, review_id, action)
        if action.expires_at is not None:
            descriptor["expiresAt"] = action.expires_at.isoformat().replace("+00:00", "Z")
        url = self.link(self.state.thread_id) if self.link is not None else None
        if url is not None:
            descriptor["reviewUrl"] = url
        return {
            "type": "tool-approval-request",
            "approvalId": approval_id(review_id, action),
            "toolCallId": action.call_id,
            "reason": action.description,
            "approvalDescriptor": descriptor,
        }


def turn_parts(
    state: ThreadState,
    shown: Sequence[Mapping[str, Any]],
    *,
    start: int,
    done: frozenset[str] = frozenset(),
    link: Link | None = None,
) -> list[Part]:
    """The parts of the response to one turn (see :class:`Rendering`)."""
    return Rendering(state, shown, start, done, link).render()
