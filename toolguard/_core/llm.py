"""The model protocol: how the chat use case talks to any LLM.

A model gets the conversation (OpenAI Chat Completions message dicts) and
the tool schemas (OpenAI function tools) and answers with text, tool calls,
or both. :class:`toolguard.openai.OpenAIChatModel` implements it over the
official ``openai`` client; anything else (another SDK, a local model, a
script for tests) only needs one async method.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from toolguard._core.checks import flag, kind
from toolguard._core.errors import ModelError
from toolguard._core.records import ToolCall, new_id

Message = dict[str, Any]
"""One chat message in the OpenAI Chat Completions format."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One assistant turn.

    Attributes:
        text: the assistant's text, if any.
        tool_calls: the tool calls it proposes, in order.
    """

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a conversation with text and/or tool calls."""

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Answer the conversation.

        Args:
            messages: the history in OpenAI Chat Completions format (system,
                user, assistant with ``tool_calls``, and ``tool`` results).
            tools: the tools as OpenAI function tools.

        Raises:
            ModelError: when the model cannot be reached or answers badly.
        """
        ...


ScriptStep = ModelResponse | str | Callable[[Sequence[Message]], ModelResponse]


class ScriptedModel:
    """A model that follows a script: for tests, demos and benchmarks.

    Each step of the script answers one model call, in order: a
    :class:`ModelResponse`, a plain string (a text answer), or a callable
    that gets the messages and returns a response (to react to what the
    conversation holds, e.g. a rejection reason).

    Attributes:
        calls: the messages of every call received, for assertions.
    """

    def __init__(self, script: Iterable[ScriptStep], *, repeat: bool = False) -> None:
        steps: object = script  # checked at run time for untyped callers
        if isinstance(steps, str | ModelResponse) or not isinstance(steps, Iterable):
            msg = f"script must be a list of steps, got {kind(steps)}: write script=[{steps!r}]"
            raise TypeError(msg)
        self._script = list(script)
        given: list[object] = list(self._script)  # checked at run time for untyped callers
        for index, step in enumerate(given):
            if not isinstance(step, ModelResponse | str) and not callable(step):
                msg = (
                    f"script[{index}] must be a ModelResponse, a str or a function of the"
                    f" messages, got {kind(step)}"
                )
                raise TypeError(msg)
        flag(repeat, "repeat")
        self._position = 0
        self._repeat = repeat
        self.calls: list[list[Message]] = []

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Answer with the next step of the script."""
        if self._position >= len(self._script):
            if not self._repeat or not self._script:
                msg = f"ScriptedModel ran out of script after {len(self._script)} responses"
                raise ModelError(msg)
            self._position = 0
        step = self._script[self._position]
        self._position += 1
        self.calls.append([dict(m) for m in messages])
        if isinstance(step, ModelResponse):
            return step
        if isinstance(step, str):
            return ModelResponse(text=step)
        return step(messages)


def call(name: str, call_id: str | None = None, /, **args: Any) -> ToolCall:
    """Shorthand for a scripted tool call: ``call("send_email", to="a@b.c")``."""
    return ToolCall(id=call_id or f"call_{new_id()[:12]}", name=name, args=args)


async def close_client(model: object) -> None:
    """Close the HTTP client of ``model`` when it has one (an ``OpenAIChatModel``'s ``client``).

    For the models a command builds itself and owns: closing their client at
    shutdown ends its pooled connections instead of leaving them to the garbage
    collector. A model without a ``client``, or whose client has no ``close``,
    is left as it is; a failing close is not an error at shutdown.
    """
    close = getattr(getattr(model, "client", None), "close", None)
    if not callable(close):
        return
    try:
        result = close()
        if inspect.isawaitable(result):
            await result
    except Exception:  # noqa: S110 - shutting down: nothing left to report it to
        pass
