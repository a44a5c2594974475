"""Tests for toolguard.openai.OpenAIChatModel through the real openai client over HTTP."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests import openai_server
from tests.openai_server import (
    OUT_OF_SCRIPT,
    ScriptedOpenAIServer,
    completion,
    reply_delay,
    reply_error,
    reply_json,
    reply_text,
    reply_tool_calls,
)
from toolguard import ChatModel, ModelError, ModelResponse, ToolCall
from toolguard.openai import DEFAULT_MODEL, OpenAIChatModel, to_openai_messages

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

MODEL = "test-model"
USER = {"role": "user", "content": "Mail Alice that the meeting moved to 10."}
SEND_EMAIL_TOOL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "subject": {"type": "string"},
                "body": {"type": "string"},
            },
            "required": ["to", "subject", "body"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_contacts",
        "description": "Find contacts.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
    },
}
EMAIL_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}


@pytest.fixture
async def client(scripted_openai: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """A real AsyncOpenAI client for the scripted server (timeout 2 s, no retries)."""
    async with scripted_openai.client() as opened:
        yield opened


@pytest.fixture
def model(client: openai.AsyncOpenAI) -> OpenAIChatModel:
    """The adapter over the scripted server with default options."""
    return OpenAIChatModel(client, model=MODEL)


def where(server: ScriptedOpenAIServer, model: str = MODEL) -> str:
    """How error messages name the server and model."""
    return f"{server.base_url}/ (model {model!r})"


# --------------------------------------------------------------------------- answers


async def test_text_answer(scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel) -> None:
    """A plain text reply becomes a ModelResponse with the text and no tool calls."""
    scripted_openai.add(reply_text("Done, Alice has been told."))
    response = await model.complete([USER], [SEND_EMAIL_TOOL])
    assert response == ModelResponse(text="Done, Alice has been told.", tool_calls=[])


async def test_single_tool_call(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """One tool call is parsed into a ToolCall with its id, name and JSON arguments."""
    scripted_openai.add(reply_tool_calls([("call_1", "send_email", EMAIL_ARGS)]))
    response = await model.complete([USER], [SEND_EMAIL_TOOL])
    assert response == ModelResponse(
        text=None, tool_calls=[ToolCall(id="call_1", name="send_email", args=EMAIL_ARGS)]
    )


async def test_parallel_tool_calls_keep_their_order(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """Several tool calls in one message come back in the model's order, with the text."""
    scripted_openai.add(
        reply_tool_calls(
            [
                ("call_b", "send_email", EMAIL_ARGS),
                ("call_a", "search_contacts", {"query": "Alice"}),
                ("call_c", "send_email", {"to": "bob@example.com", "subject": "", "body": ""}),
            ],
            text="Working on it.",
        )
    )
    response = await model.complete([USER], [SEND_EMAIL_TOOL, SEARCH_TOOL])
    assert response == ModelResponse(
        text="Working on it.",
        tool_calls=[
            ToolCall(id="call_b", name="send_email", args=EMAIL_ARGS),
            ToolCall(id="call_a", name="search_contacts", args={"query": "Alice"}),
            ToolCall(
                id="call_c",
                name="send_email",
                args={"to": "bob@example.com", "subject": "", "body": ""},
            ),
        ],
    )


async def test_invalid_json_arguments_are_kept_as_arguments_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """Arguments that are not JSON, or JSON but not an object, become arguments_error."""
    scripted_openai.add(
        reply_tool_calls(
            [("call_1", "send_email", '{"to": "alice@'), ("call_2", "send_email", "[1, 2]")]
        )
    )
    response = await model.complete([USER], [SEND_EMAIL_TOOL])
    assert response == ModelResponse(
        text=None,
        tool_calls=[
            ToolCall(id="call_1", name="send_email", args={}, arguments_error='{"to": "alice@'),
            ToolCall(id="call_2", name="send_email", args={}, arguments_error="[1, 2]"),
        ],
    )


async def test_missing_tool_call_ids_get_positional_ids(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """Tool calls without an id (some local servers) get call_<index>."""
    scripted_openai.add(
        reply_tool_calls(
            [(None, "search_contacts", {"query": "Alice"}), (None, "send_email", EMAIL_ARGS)]
        )
    )
    response = await model.complete([USER], [SEND_EMAIL_TOOL, SEARCH_TOOL])
    assert response == ModelResponse(
        text=None,
        tool_calls=[
            ToolCall(id="call_0", name="search_contacts", args={"query": "Alice"}),
            ToolCall(id="call_1", name="send_email", args=EMAIL_ARGS),
        ],
    )


async def test_lenient_tool_call_shape_from_local_servers(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """A tool call without id and type, with arguments as an object, is still understood."""
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "search_contacts", "arguments": {"query": "Al"}}}],
    }
    scripted_openai.add(reply_json(completion(message, finish_reason="eos")))
    response = await model.complete([USER], [SEARCH_TOOL])
    assert response == ModelResponse(
        text=None, tool_calls=[ToolCall(id="call_0", name="search_contacts", args={"query": "Al"})]
    )


@pytest.mark.parametrize("finish_reason", ["length", "content_filter", "stop", "eos_token"])
async def test_no_content_and_no_tool_calls(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel, finish_reason: str
) -> None:
    """Content null and no tool calls give an empty response, whatever the finish reason."""
    scripted_openai.add(reply_text(None, finish_reason=finish_reason))
    response = await model.complete([USER], [])
    assert response == ModelResponse(text=None, tool_calls=[])


async def test_empty_content_with_tool_calls_is_no_text(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """An empty content string next to tool calls (llama.cpp, vLLM) is read as no text."""
    scripted_openai.add(reply_tool_calls([("call_1", "search_contacts", {"query": "A"})], text=""))
    response = await model.complete([USER], [SEARCH_TOOL])
    assert response == ModelResponse(
        text=None, tool_calls=[ToolCall(id="call_1", name="search_contacts", args={"query": "A"})]
    )


async def test_refusal_is_the_text_when_there_is_no_content(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """A refusal without content is returned as the answer's text."""
    message = {"role": "assistant", "content": None, "refusal": "I cannot help with that."}
    scripted_openai.add(reply_json(completion(message)))
    response = await model.complete([USER], [])
    assert response == ModelResponse(text="I cannot help with that.", tool_calls=[])


async def test_the_model_satisfies_the_chat_model_protocol(model: OpenAIChatModel) -> None:
    """OpenAIChatModel is a ChatModel."""
    assert isinstance(model, ChatModel)


# --------------------------------------------------------------------------- what is sent


async def test_request_body_has_standard_keys_and_the_tools(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """Extra history keys are stripped; tools and parallel_tool_calls are sent as given."""
    scripted_openai.add(reply_text("ok"))
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief.", "created_at": "2024-01-01"},
        {**USER, "name": "bob", "metadata": {"ui": "web"}},
        {
            "role": "assistant",
            "content": None,
            "review_id": "r1",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_email", "arguments": '{"to": "a@b.c"}'},
                    "status": "approved",
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "User rejected this action. It was not executed.",
            "status": "error",
        },
    ]
    before = [dict(m) for m in history]
    await model.complete(history, [SEND_EMAIL_TOOL, SEARCH_TOOL])
    assert scripted_openai.requests == [
        {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": USER["content"], "name": "bob"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "send_email", "arguments": '{"to": "a@b.c"}'},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "call_1",
                    "content": "User rejected this action. It was not executed.",
                },
            ],
            "tools": [SEND_EMAIL_TOOL, SEARCH_TOOL],
            "parallel_tool_calls": True,
        }
    ]
    assert history == before


async def test_no_tools_means_no_tools_and_no_parallel_tool_calls(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """Without tools the body has neither tools nor parallel_tool_calls."""
    scripted_openai.add(reply_text("Hi"))
    await model.complete([USER], [])
    assert scripted_openai.requests == [{"model": MODEL, "messages": [USER]}]


async def test_options_are_sent(
    scripted_openai: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """temperature, extra_body, request_options are sent; parallel_tool_calls=None is not."""
    scripted_openai.add(reply_text("Hi"))
    model = OpenAIChatModel(
        client,
        model="local-llm",
        parallel_tool_calls=None,
        temperature=0.0,
        extra_body={"top_k": 20},
        request_options={"max_tokens": 64, "seed": 7},
    )
    await model.complete([USER], [SEARCH_TOOL])
    assert scripted_openai.requests == [
        {
            "model": "local-llm",
            "messages": [USER],
            "tools": [SEARCH_TOOL],
            "temperature": 0.0,
            "max_tokens": 64,
            "seed": 7,
            "top_k": 20,
        }
    ]


async def test_parallel_tool_calls_false_is_sent(
    scripted_openai: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """parallel_tool_calls=False is sent as false when there are tools."""
    scripted_openai.add(reply_text("Hi"))
    await OpenAIChatModel(client, model=MODEL, parallel_tool_calls=False).complete(
        [USER], [SEARCH_TOOL]
    )
    assert scripted_openai.requests == [
        {"model": MODEL, "messages": [USER], "tools": [SEARCH_TOOL], "parallel_tool_calls": False}
    ]


def test_to_openai_messages_normalises_tool_calls() -> None:
    """Tool calls get the exact OpenAI shape with JSON text arguments; empty/None keys go."""
    messages = [
        {"role": "user", "content": "hi", "name": None},
        {"role": "assistant", "content": "plain", "tool_calls": []},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "f", "arguments": {"a": [1, "é"]}}},
                {"id": "c2", "name": "g", "args": {"b": True}},
                ToolCall(id="c3", name="h", args={"c": None}),
                ToolCall(id="c4", name="h", arguments_error="{oops"),
                {"id": "c5", "type": "function", "function": {"name": "k"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "status": "success"},
    ]
    assert to_openai_messages(messages) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "plain"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": [1, "é"]}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "g", "arguments": '{"b": true}'},
                },
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "h", "arguments": '{"c": null}'},
                },
                {"id": "c4", "type": "function", "function": {"name": "h", "arguments": "{oops"}},
                {"id": "c5", "type": "function", "function": {"name": "k", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


# --------------------------------------------------------------------------- errors


async def test_http_500_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """HTTP 500 becomes ModelError naming the status, server, model and the server's message."""
    scripted_openai.add(reply_error(500, "The server had an error while processing your request."))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [SEND_EMAIL_TOOL])
    assert str(caught.value) == (
        f"The model call failed: HTTP 500 from {where(scripted_openai)}: "
        "The server had an error while processing your request."
    )
    assert type(caught.value.__cause__) is openai.InternalServerError


@pytest.mark.parametrize(
    ("status", "text", "cause"),
    [
        (429, "Rate limit reached for requests", openai.RateLimitError),
        (401, "Incorrect API key provided: test-key.", openai.AuthenticationError),
        (404, "The model `test-model` does not exist", openai.NotFoundError),
        (503, "Service unavailable", openai.InternalServerError),
    ],
)
async def test_http_error_statuses_are_model_errors(
    scripted_openai: ScriptedOpenAIServer,
    model: OpenAIChatModel,
    status: int,
    text: str,
    cause: type[Exception],
) -> None:
    """Every HTTP error status becomes a ModelError with the server's message."""
    scripted_openai.add(reply_error(status, text))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: HTTP {status} from {where(scripted_openai)}: {text}"
    )
    assert type(caught.value.__cause__) is cause


async def test_http_error_with_a_text_body(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """An error status with a non-JSON body quotes the body text."""
    scripted_openai.add(reply_json("upstream connect error\n", status=502))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: HTTP 502 from {where(scripted_openai)}: upstream connect error"
    )


async def test_out_of_script_is_an_http_500(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """The scripted server answers 500 once its script is used up."""
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: HTTP 500 from {where(scripted_openai)}: {OUT_OF_SCRIPT}"
    )


async def test_timeout_is_a_model_error(scripted_openai: ScriptedOpenAIServer) -> None:
    """A server slower than the client's timeout gives ModelError naming the timeout."""
    scripted_openai.add(reply_delay(30))
    async with scripted_openai.client(timeout=0.2) as client:
        model = OpenAIChatModel(client, model=MODEL)
        with pytest.raises(ModelError) as caught:
            await model.complete([USER], [SEND_EMAIL_TOOL])
    assert str(caught.value) == (
        f"The model call timed out after 0.2 seconds waiting for {where(scripted_openai)}"
    )
    assert type(caught.value.__cause__) is openai.APITimeoutError


async def test_per_call_timeout_from_request_options(
    scripted_openai: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A timeout given in request_options is the one the error names."""
    scripted_openai.add(reply_delay(30))
    model = OpenAIChatModel(client, model=MODEL, request_options={"timeout": 0.15})
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call timed out after 0.15 seconds waiting for {where(scripted_openai)}"
    )


async def test_connection_refused_is_a_model_error() -> None:
    """A server that cannot be reached gives ModelError naming the address."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    async with openai.AsyncOpenAI(
        api_key="k", base_url=base_url, timeout=2, max_retries=0
    ) as client:
        with pytest.raises(ModelError) as caught:
            await OpenAIChatModel(client, model=MODEL).complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: cannot connect to {base_url}/ (model {MODEL!r}): "
        "All connection attempts failed"
    )
    assert type(caught.value.__cause__) is openai.APIConnectionError


@pytest.mark.parametrize(
    "body",
    [
        {"id": "chatcmpl-1", "object": "chat.completion", "choices": []},
        {"id": "chatcmpl-1", "object": "chat.completion"},
        {"error": None},
    ],
)
async def test_response_without_choices_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel, body: dict[str, Any]
) -> None:
    """A 200 response with no choices gives ModelError."""
    scripted_openai.add(reply_json(body))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: the response from {where(scripted_openai)} has no choices"
    )


async def test_response_that_is_not_json_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """A 200 response whose body is not JSON gives ModelError quoting the start of it."""
    scripted_openai.add(reply_json("<html>gateway</html>"))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: the response from {where(scripted_openai)} is not JSON: "
        "'<html>gateway</html>'"
    )


async def test_tool_call_without_a_name_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIChatModel
) -> None:
    """A tool call with no function name cannot be used and gives ModelError."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_9", "type": "function", "function": {"arguments": "{}"}}],
    }
    scripted_openai.add(reply_json(completion(message, finish_reason="tool_calls")))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [SEARCH_TOOL])
    assert str(caught.value) == (
        f"The model call failed: tool call #0 from {where(scripted_openai)} has no function name"
    )


# --------------------------------------------------------------------------- construction


async def test_default_client_reads_the_environment(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no client, AsyncOpenAI() is built from OPENAI_API_KEY and OPENAI_BASE_URL."""
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    scripted_openai.add(reply_text("from env"))
    model = OpenAIChatModel(model=MODEL)
    try:
        assert await model.complete([USER], []) == ModelResponse(text="from env")
    finally:
        await model.client.close()
    assert (model.client.api_key, str(model.client.base_url)) == (
        "env-key",
        f"{scripted_openai.base_url}/",
    )


async def test_from_env_reads_model_and_base_url(
    scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """from_env uses TOOLGUARD_MODEL and OPENAI_BASE_URL; a local server needs no key."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("TOOLGUARD_MODEL", "llama3.1:8b")
    scripted_openai.add(reply_text("local"))
    model = OpenAIChatModel.from_env()
    try:
        assert await model.complete([USER], []) == ModelResponse(text="local")
    finally:
        await model.client.close()
    assert scripted_openai.requests == [{"model": "llama3.1:8b", "messages": [USER]}]
    assert model.client.api_key == "not-needed"


async def test_from_env_defaults_and_explicit_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """from_env falls back to gpt-4o-mini; an explicit model wins over TOOLGUARD_MODEL."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("TOOLGUARD_MODEL", raising=False)
    default = OpenAIChatModel.from_env()
    monkeypatch.setenv("TOOLGUARD_MODEL", "from-env")
    explicit = OpenAIChatModel.from_env("gpt-4.1", temperature=0.5)
    try:
        assert (default.model, explicit.model, explicit.temperature) == (
            DEFAULT_MODEL,
            "gpt-4.1",
            0.5,
        )
        assert DEFAULT_MODEL == "gpt-4o-mini"
        assert repr(default) == (
            "OpenAIChatModel(model='gpt-4o-mini', base_url='https://api.openai.com/v1/')"
        )
    finally:
        await default.client.close()
        await explicit.client.close()


async def test_empty_model_name_is_refused(client: openai.AsyncOpenAI) -> None:
    """An empty model name is refused at construction."""
    with pytest.raises(ValueError, match=r"^model must be a non-empty model name, got ''$"):
        OpenAIChatModel(client, model="")


def test_to_openai_messages_drops_only_a_null_content_next_to_tool_calls() -> None:
    """``"content": null`` goes only beside tool calls; text, empty text and other nulls stay."""
    call_c1 = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call_c1]},
        {"role": "assistant", "content": "", "tool_calls": [call_c1]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call_c1]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": None},
        {"role": "assistant", "tool_calls": [call_c1]},
    ]
    assert to_openai_messages(messages) == [
        {"role": "assistant", "tool_calls": [call_c1]},
        {"role": "assistant", "content": "", "tool_calls": [call_c1]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call_c1]},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": None},
        {"role": "assistant", "tool_calls": [call_c1]},
    ]
    assert [list(m) for m in to_openai_messages(messages)] == [
        ["role", "tool_calls"],
        ["role", "content", "tool_calls"],
        ["role", "content", "tool_calls"],
        ["role", "content"],
        ["role", "content"],
        ["role", "tool_calls"],
    ]
