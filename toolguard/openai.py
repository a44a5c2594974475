"""Use any OpenAI-compatible chat model with toolguard.

:class:`OpenAIChatModel` implements :class:`~toolguard.ChatModel` over the
official ``openai`` client (install the ``openai`` extra:
``pip install "toolguard-hitl[openai]"``). It talks to OpenAI itself or to
any server that speaks the Chat Completions API — vLLM, Ollama, llama.cpp,
LM Studio — through ``base_url``::

    import openai
    from toolguard import ReviewedChat
    from toolguard.openai import OpenAIChatModel

    # OpenAI: reads OPENAI_API_KEY
    model = OpenAIChatModel(model="gpt-4o-mini")

    # A local server: Ollama (vLLM would be http://localhost:8000/v1)
    client = openai.AsyncOpenAI(base_url="http://localhost:11434/v1", api_key="ollama")
    model = OpenAIChatModel(client, model="qwen2.5:7b", parallel_tool_calls=None)

    # Or from the environment: OPENAI_API_KEY, OPENAI_BASE_URL, TOOLGUARD_MODEL
    model = OpenAIChatModel.from_env()

    chat = ReviewedChat(model, [send_email, search_contacts])
    turn = await chat.send_message("Mail Alice that the meeting moved to 10")

:class:`OpenAIResponsesModel` does the same over the Responses API
(``client.responses.create``), which OpenAI recommends for new projects: the
history becomes Responses input items (``function_call`` /
``function_call_output`` with their call ids) and the answer's items become
text and tool calls again::

    model = OpenAIResponsesModel(openai.AsyncOpenAI(), model="gpt-4o-mini")

Only the standard message keys (``role``, ``content``, ``name``,
``tool_calls``, ``tool_call_id``) are sent, so the bookkeeping toolguard
keeps in its history (such as a tool message's ``status``) never reaches the
server. Neither API has a status on a tool result, so the chat marks results
that are not a plain success in their text (see
:class:`~toolguard.text.ResultTemplates`); :meth:`~toolguard.Step.openai_messages`
does the same for hand-written loops. Every failure of the call — timeout, connection, an HTTP error
status, a response without choices — becomes a :class:`~toolguard.ModelError`
whose text names what failed, with the ``openai`` exception as its cause.

This module imports ``openai``; ``import toolguard`` never imports it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

try:
    import openai
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.openai needs the openai package: pip install "toolguard-hitl[openai]"'
    raise ImportError(msg) from exc

from toolguard._core import checks as check
from toolguard._core.errors import ModelError
from toolguard._core.jsonable import to_json_data
from toolguard._core.llm import Message, ModelResponse
from toolguard._core.records import ToolCall
from toolguard._enforce.calls import parse_tool_call

__all__ = [
    "DEFAULT_MODEL",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "to_openai_messages",
    "to_responses_input",
    "to_responses_tools",
]

DEFAULT_MODEL = "gpt-4o-mini"
"""The model :meth:`OpenAIChatModel.from_env` uses when ``TOOLGUARD_MODEL`` is not set."""

STANDARD_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
"""The message keys sent to the server; any other key of the history is left out."""

_LOCAL_API_KEY = "not-needed"


def _openai_tool_call(call: Any) -> dict[str, Any]:
    """One tool call of an assistant message, in the exact OpenAI shape."""
    call_id: Any
    name: Any
    arguments: Any
    if isinstance(call, ToolCall):
        arguments = call.arguments_error if call.arguments_error is not None else call.args
        call_id, name = call.id, call.name
    elif isinstance(call, Mapping):
        function = call.get("function")
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name = call.get("name")
            arguments = call["args"] if "args" in call else call.get("arguments")
        call_id = call.get("id")
    else:
        msg = f"A tool call in the history is not a mapping: {call!r}"
        raise TypeError(msg)
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(to_json_data(arguments), ensure_ascii=False)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def to_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The history as the Chat Completions API accepts it.

    Keeps only ``role``, ``content``, ``name``, ``tool_calls`` and
    ``tool_call_id``; drops ``name``, ``tool_call_id`` and ``tool_calls``
    when they are ``None`` and ``tool_calls`` when empty (the API refuses an
    empty list), and drops a ``None`` ``content`` next to tool calls (the
    API takes an assistant message with tool calls and no content). Tool
    calls are rewritten to ``{"id", "type": "function", "function": {"name",
    "arguments"}}`` with ``arguments`` as JSON text.

    Args:
        messages: OpenAI-style message dicts, possibly with extra keys.

    Returns:
        New dicts; the input is not changed.
    """
    sent: list[dict[str, Any]] = []
    append = sent.append
    for message in messages:
        clean = {key: message[key] for key in STANDARD_KEYS if key in message}
        if clean.get("name", "") is None:
            del clean["name"]
        if clean.get("tool_call_id", "") is None:
            del clean["tool_call_id"]
        if "tool_calls" in clean:
            calls = clean["tool_calls"]
            if calls:
                clean["tool_calls"] = [_openai_tool_call(c) for c in calls]
                if clean.get("content", "") is None:
                    del clean["content"]
            else:
                del clean["tool_calls"]
        append(clean)
    return sent


def _text(content: Any) -> str | None:
    """The message text: a string as is, text parts joined, empty as ``None``."""
    if isinstance(content, list):
        parts = [
            part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
            for part in content
        ]
        content = "".join(p for p in parts if isinstance(p, str))
    if isinstance(content, str):
        return content or None
    return None


def _field(value: Any, name: str) -> Any:
    """``value[name]`` for a mapping, else the attribute (``None`` when missing)."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _seconds(timeout: Any) -> str:
    """A timeout (number or ``httpx`` ``Timeout``) as text such as ``2 seconds``."""
    value = getattr(timeout, "read", timeout)
    if isinstance(value, (int, float)):
        return f"{value:g} seconds"
    return "the client's timeout"


def _status_detail(exc: openai.APIStatusError) -> str:
    """The error message the server gave, or a note that it gave none."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        return json.dumps(to_json_data(body), ensure_ascii=False)[:500]
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return "the response has no error message"


def _model_error(exc: openai.OpenAIError, timeout: Any, where: str) -> ModelError:
    """The :class:`ModelError` for a failed ``openai`` call (``raise ... from exc``)."""
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"The model call timed out after {_seconds(timeout)} waiting for {where}")
    if isinstance(exc, openai.APIConnectionError):
        cause = str(exc.__cause__ or "") or exc.message
        return ModelError(f"The model call failed: cannot connect to {where}: {cause}")
    if isinstance(exc, openai.APIStatusError):
        return ModelError(
            f"The model call failed: HTTP {exc.status_code} from {where}: {_status_detail(exc)}"
        )
    return ModelError(f"The model call failed: {type(exc).__name__} from {where}: {exc}")


def _check_options(
    client: object,
    parallel_tool_calls: object,
    temperature: object,
    extra_body: object,
    request_options: object,
) -> None:
    """Refuse wrong option types at construction rather than at the first request."""
    if isinstance(client, openai.OpenAI):
        msg = (
            "client must be an openai.AsyncOpenAI, got the sync openai.OpenAI: use AsyncOpenAI(...)"
        )
        raise TypeError(msg)
    if client is not None and getattr(client, "chat", None) is None:
        msg = f"client must be an openai.AsyncOpenAI or None, got {check.kind(client)}"
        raise TypeError(msg)
    if parallel_tool_calls is not None and not isinstance(parallel_tool_calls, bool):
        msg = (
            "parallel_tool_calls must be True, False or None,"
            f" got {check.kind(parallel_tool_calls)}"
        )
        raise TypeError(msg)
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float)
    ):
        msg = f"temperature must be a number or None, got {check.kind(temperature)}"
        raise TypeError(msg)
    for option, value in (("extra_body", extra_body), ("request_options", request_options)):
        if value is not None and not isinstance(value, Mapping):
            msg = f"{option} must be a dict or None, got {check.kind(value)}"
            raise TypeError(msg)


class OpenAIChatModel:
    """A :class:`~toolguard.ChatModel` backed by ``openai.AsyncOpenAI`` Chat Completions.

    Args:
        client: the client to use (its ``base_url``, ``api_key``,
            ``timeout`` and ``max_retries`` apply). ``None`` builds
            ``openai.AsyncOpenAI()``, which reads ``OPENAI_API_KEY`` and
            ``OPENAI_BASE_URL``.
        model: the model name, e.g. ``"gpt-4o-mini"`` or a local model's name.
        parallel_tool_calls: sent with every request that has tools.
            ``None`` leaves it out, for servers that do not know it.
        temperature: the sampling temperature; ``None`` leaves it out.
        extra_body: extra JSON fields for the request body (server-specific
            options, e.g. vLLM's ``{"top_k": 20}``).
        request_options: extra keyword arguments for
            ``client.chat.completions.create`` (e.g. ``{"max_tokens": 512,
            "seed": 1}`` or a per-call ``timeout``).

    Attributes:
        client: the ``openai.AsyncOpenAI`` client in use (close it with
            ``await model.client.close()`` when done).
        model: the model name sent with every request.

    Example:
        ::

            model = OpenAIChatModel(
                openai.AsyncOpenAI(base_url="http://localhost:8000/v1", api_key="EMPTY"),
                model="Qwen/Qwen2.5-7B-Instruct",
            )
            response = await model.complete(
                [{"role": "user", "content": "Hi"}], tools=[]
            )
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        *,
        model: str,
        parallel_tool_calls: bool | None = True,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        name: object = model  # checked at run time for untyped callers
        if not isinstance(name, str):
            msg = f"model must be a model name (str), got {check.kind(name)}"
            raise TypeError(msg)
        if not model:
            msg = f"model must be a non-empty model name, got {model!r}"
            raise ValueError(msg)
        _check_options(client, parallel_tool_calls, temperature, extra_body, request_options)
        self.client = client if client is not None else openai.AsyncOpenAI()
        self.model = model
        self.parallel_tool_calls = parallel_tool_calls
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body is not None else None
        self.request_options = dict(request_options) if request_options is not None else {}

    @classmethod
    def from_env(cls, model: str | None = None, **options: Any) -> OpenAIChatModel:
        """Build the model from environment variables.

        Reads ``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` and ``TOOLGUARD_MODEL``.
        With a base URL but no key (a local server such as Ollama or vLLM
        without ``--api-key``) a placeholder key is used.

        Args:
            model: the model name; defaults to ``TOOLGUARD_MODEL``, else
                ``"gpt-4o-mini"``.
            **options: further keyword arguments of :class:`OpenAIChatModel`.
        """
        base_url = os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and base_url is not None:
            api_key = _LOCAL_API_KEY
        client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url)
        name = model if model else os.environ.get("TOOLGUARD_MODEL") or DEFAULT_MODEL
        return cls(client, model=name, **options)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={str(self.client.base_url)!r})"

    def _where(self) -> str:
        return f"{self.client.base_url} (model {self.model!r})"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Ask the model for its next turn.

        Args:
            messages: the history in OpenAI Chat Completions format; keys
                outside the standard ones are not sent.
            tools: OpenAI function tools; with none, neither ``tools`` nor
                ``parallel_tool_calls`` is sent.

        Returns:
            The first choice's text and tool calls. Tool calls without an id
            get ``call_<index>``; arguments that are not a JSON object are
            kept in ``arguments_error`` (the call will not run).

        Raises:
            ModelError: on a timeout, a connection failure, an HTTP error
                status, or a response without a usable choice.
        """
        request: dict[str, Any] = {
            **self.request_options,
            "model": self.model,
            "messages": to_openai_messages(messages),
        }
        if tools:
            request["tools"] = list(tools)
            if self.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = self.parallel_tool_calls
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.extra_body is not None:
            request["extra_body"] = self.extra_body
        try:
            completion: Any = await self.client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            timeout = request.get("timeout", self.client.timeout)
            raise _model_error(exc, timeout, self._where()) from exc
        return self._response(completion)

    def _response(self, completion: Any) -> ModelResponse:
        if isinstance(completion, str):
            msg = (
                f"The model call failed: the response from {self._where()} is not JSON: "
                f"{completion[:200]!r}"
            )
            raise ModelError(msg)
        choices = getattr(completion, "choices", None)
        if not choices:
            msg = f"The model call failed: the response from {self._where()} has no choices"
            raise ModelError(msg)
        message = getattr(choices[0], "message", None)
        if message is None:
            msg = f"The model call failed: the first choice from {self._where()} has no message"
            raise ModelError(msg)
        raw_calls = getattr(message, "tool_calls", None) or []
        for index, raw in enumerate(raw_calls):
            if not isinstance(_field(_field(raw, "function"), "name"), str):
                msg = (
                    f"The model call failed: tool call #{index} from {self._where()}"
                    " has no function name"
                )
                raise ModelError(msg)
        try:
            calls = [parse_tool_call(raw, index) for index, raw in enumerate(raw_calls)]
        except ValueError as exc:
            msg = f"The model call failed: unusable tool call from {self._where()}: {exc}"
            raise ModelError(msg) from exc
        text = _text(getattr(message, "content", None))
        if text is None and not calls:
            refusal = getattr(message, "refusal", None)
            text = refusal if isinstance(refusal, str) and refusal else None
        return ModelResponse(text=text, tool_calls=calls)


# --------------------------------------------------------------------------- the Responses API


def _message_text(content: Any) -> str:
    """A history message's content as text (parts joined; ``None`` as empty)."""
    return _text(content) or ""


def to_responses_input(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The history (OpenAI Chat Completions messages) as Responses API input items.

    * ``system`` / ``developer`` / ``user`` → ``{"role", "content"}`` messages;
    * ``assistant`` → its text as an assistant message (when it has any),
      then one ``{"type": "function_call", "call_id", "name", "arguments"}``
      per tool call, in order (``arguments`` as JSON text);
    * ``tool`` → ``{"type": "function_call_output", "call_id", "output"}``.

    Keys outside the standard ones (such as ``status``) are left out; a tool
    message's content is sent as it stands in the history (the chat has
    already marked results that are not a plain success).

    Raises:
        TypeError: a message or tool call is not a mapping.
        ValueError: a message has an unknown role.
    """
    items: list[dict[str, Any]] = []
    for message in to_openai_messages(messages):
        role = message.get("role")
        if role in ("system", "developer", "user"):
            items.append({"role": role, "content": _message_text(message.get("content"))})
        elif role == "assistant":
            text = _text(message.get("content"))
            if text is not None:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or []:
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": _message_text(message.get("content")),
                }
            )
        else:
            msg = (
                f"A history message has an unknown role {role!r}:"
                " use system, developer, user, assistant or tool"
            )
            raise ValueError(msg)
    return items


def to_responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions function tools as Responses function tools.

    ``{"type": "function", "function": {"name", "description", "parameters"}}``
    becomes ``{"type": "function", "name", "description", "parameters",
    "strict": False}`` (not strict: toolguard's schemas allow optional
    parameters, which strict mode refuses). A tool already in the Responses
    shape is kept as it is.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function")
        if not isinstance(function, Mapping):
            out.append(dict(tool))
            continue
        converted: dict[str, Any] = {"type": "function", "name": function.get("name")}
        if function.get("description") is not None:
            converted["description"] = function["description"]
        converted["parameters"] = function.get("parameters") or {"type": "object", "properties": {}}
        converted["strict"] = False
        out.append(converted)
    return out


class OpenAIResponsesModel:
    """A :class:`~toolguard.ChatModel` backed by ``openai.AsyncOpenAI`` Responses.

    The chat keeps its history in Chat Completions format; each call turns it
    into Responses input items (:func:`to_responses_input`), sends the tools
    as Responses function tools (:func:`to_responses_tools`), and reads the
    answer's ``message`` and ``function_call`` items back into text and tool
    calls (the ``call_id`` is the tool call's id). Nothing is stored on the
    server (``store=False``), since the whole history is sent each time.

    Args:
        client: the client to use; ``None`` builds ``openai.AsyncOpenAI()``.
        model: the model name, e.g. ``"gpt-4o-mini"``.
        parallel_tool_calls: sent with every request that has tools;
            ``None`` leaves it out.
        temperature: the sampling temperature; ``None`` leaves it out.
        instructions: the Responses ``instructions`` (a system prompt kept
            outside the history); ``None`` leaves it out.
        extra_body: extra JSON fields for the request body.
        request_options: extra keyword arguments for
            ``client.responses.create`` (e.g. ``{"max_output_tokens": 512}``).

    Attributes:
        client: the ``openai.AsyncOpenAI`` client in use.
        model: the model name sent with every request.
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        *,
        model: str,
        parallel_tool_calls: bool | None = True,
        temperature: float | None = None,
        instructions: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        request_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not model:
            msg = f"model must be a non-empty model name, got {model!r}"
            raise ValueError(msg)
        self.client = client if client is not None else openai.AsyncOpenAI()
        if not hasattr(self.client, "responses"):
            msg = (
                "OpenAIResponsesModel needs an openai client with the Responses API (openai>=1.66)"
            )
            raise TypeError(msg)
        self.model = model
        self.parallel_tool_calls = parallel_tool_calls
        self.temperature = temperature
        self.instructions = instructions
        self.extra_body = dict(extra_body) if extra_body is not None else None
        self.request_options = dict(request_options) if request_options is not None else {}

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel(model={self.model!r}, base_url={str(self.client.base_url)!r})"

    def _where(self) -> str:
        return f"{self.client.base_url} (model {self.model!r})"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Ask the model for its next turn through ``client.responses.create``.

        Args:
            messages: the history in OpenAI Chat Completions format.
            tools: OpenAI Chat Completions function tools (converted).

        Returns:
            The answer's text (its ``output_text`` parts joined) and its
            ``function_call`` items as tool calls, in order. Arguments that
            are not a JSON object are kept in ``arguments_error``.

        Raises:
            ModelError: on a timeout, a connection failure, an HTTP error
                status, a failed response, or a function call without a name.
        """
        request: dict[str, Any] = {
            **self.request_options,
            "model": self.model,
            "input": to_responses_input(messages),
            "store": False,
        }
        if tools:
            request["tools"] = to_responses_tools(tools)
            if self.parallel_tool_calls is not None:
                request["parallel_tool_calls"] = self.parallel_tool_calls
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.instructions is not None:
            request["instructions"] = self.instructions
        if self.extra_body is not None:
            request["extra_body"] = self.extra_body
        try:
            response: Any = await self.client.responses.create(**request)
        except openai.OpenAIError as exc:
            timeout = request.get("timeout", self.client.timeout)
            raise _model_error(exc, timeout, self._where()) from exc
        return self._response(response)

    def _response(self, response: Any) -> ModelResponse:
        if isinstance(response, str):
            msg = (
                f"The model call failed: the response from {self._where()} is not JSON: "
                f"{response[:200]!r}"
            )
            raise ModelError(msg)
        error = _field(response, "error")
        if error is not None or _field(response, "status") == "failed":
            detail = _field(error, "message") if error is not None else None
            msg = (
                f"The model call failed: the response from {self._where()} failed: "
                f"{detail or 'no error message'}"
            )
            raise ModelError(msg)
        output = _field(response, "output")
        if not isinstance(output, list):
            msg = f"The model call failed: the response from {self._where()} has no output"
            raise ModelError(msg)
        texts: list[str] = []
        raw_calls: list[dict[str, Any]] = []
        for item in output:
            kind = _field(item, "type")
            if kind == "message":
                parts = _field(item, "content") or []
                texts.extend(
                    text
                    for part in parts
                    if _field(part, "type") == "output_text"
                    and isinstance(text := _field(part, "text"), str)
                )
            elif kind == "function_call":
                name = _field(item, "name")
                if not isinstance(name, str) or not name:
                    msg = (
                        f"The model call failed: function call #{len(raw_calls)} from"
                        f" {self._where()} has no name"
                    )
                    raise ModelError(msg)
                call_id = _field(item, "call_id") or _field(item, "id")
                raw_calls.append(
                    {"id": call_id, "name": name, "arguments": _field(item, "arguments")}
                )
        calls = [parse_tool_call(raw, index) for index, raw in enumerate(raw_calls)]
        return ModelResponse(text="".join(texts) or None, tool_calls=calls)
