"""Tests for toolguard.openai.OpenAIResponsesModel through the real openai client over HTTP.

The scripted server answers ``POST /v1/responses``; every request body the real
``openai`` client sent is checked exactly, as for the Chat Completions adapter.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests import openai_server
from tests.openai_server import (
    RESPONSES_PATH,
    ScriptedOpenAIServer,
    reply_error,
    reply_function_calls,
    reply_json,
    reply_response_text,
    response,
)
from toolguard import (
    REJECTED_BY_USER_MESSAGE,
    ChatModel,
    ModelError,
    ModelResponse,
    ReviewedChat,
    ToolCall,
    guard,
)
from toolguard.openai import OpenAIResponsesModel, to_responses_input, to_responses_tools

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

MODEL = "test-model"
SYSTEM = {"role": "system", "content": "You are careful."}
USER = {"role": "user", "content": "Mail Alice that the meeting moved to 10."}
EMAIL = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
SEND_EMAIL_TOOL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    },
}
SEND_EMAIL_RESPONSES_TOOL = {
    "type": "function",
    "name": "send_email",
    "description": "Send an email.",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    "strict": False,
}


@pytest.fixture
async def client(scripted_openai: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """A real AsyncOpenAI client for the scripted server (timeout 2 s, no retries)."""
    async with scripted_openai.client() as opened:
        yield opened


@pytest.fixture
def model(client: openai.AsyncOpenAI) -> OpenAIResponsesModel:
    """The Responses adapter over the scripted server."""
    return OpenAIResponsesModel(client, model=MODEL)


def where(server: ScriptedOpenAIServer) -> str:
    """How error messages name the server and model."""
    return f"{server.base_url}/ (model {MODEL!r})"


def call_item(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A function_call input item as the adapter sends it."""
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
    }


def output_item(call_id: str, output: str) -> dict[str, Any]:
    """A function_call_output input item."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


# --------------------------------------------------------------------------- the adapter


async def test_text_answer_and_the_exact_request(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """A text answer; the request goes to /v1/responses with input items and Responses tools."""
    scripted_openai.add(reply_response_text("Done."))
    answer = await model.complete([SYSTEM, USER], [SEND_EMAIL_TOOL])
    assert answer == ModelResponse(text="Done.", tool_calls=[])
    assert scripted_openai.paths == [RESPONSES_PATH]
    assert scripted_openai.requests == [
        {
            "model": MODEL,
            "input": [SYSTEM, USER],
            "store": False,
            "tools": [SEND_EMAIL_RESPONSES_TOOL],
            "parallel_tool_calls": True,
        }
    ]


async def test_no_tools_sends_neither_tools_nor_parallel_tool_calls(
    scripted_openai: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Without tools only model, input and store are sent (plus the options given)."""
    scripted_openai.add(reply_response_text("Hi"))
    chosen = OpenAIResponsesModel(
        client,
        model=MODEL,
        temperature=0.0,
        instructions="Be brief.",
        request_options={"max_output_tokens": 64},
    )
    await chosen.complete([USER], [])
    assert scripted_openai.requests == [
        {
            "model": MODEL,
            "input": [USER],
            "store": False,
            "temperature": 0.0,
            "instructions": "Be brief.",
            "max_output_tokens": 64,
        }
    ]


async def test_parallel_function_calls_keep_order_ids_and_text(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """Several function_call items become ToolCalls in order, with call_id as the id."""
    scripted_openai.add(
        reply_function_calls(
            [
                ("call_b", "send_email", EMAIL),
                ("call_a", "search_contacts", {"query": "Alice"}),
                ("call_c", "send_email", '{"to": "al'),
            ],
            text="Working on it.",
        )
    )
    answer = await model.complete([USER], [SEND_EMAIL_TOOL])
    assert answer == ModelResponse(
        text="Working on it.",
        tool_calls=[
            ToolCall(id="call_b", name="send_email", args=EMAIL),
            ToolCall(id="call_a", name="search_contacts", args={"query": "Alice"}),
            ToolCall(id="call_c", name="send_email", args={}, arguments_error='{"to": "al'),
        ],
    )


def test_history_becomes_responses_input_items() -> None:
    """Assistant tool calls become function_call items, tool messages function_call_output."""
    history = [
        SYSTEM,
        USER,
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"q": "a"}'},
                },
                {"id": "c2", "name": "send_email", "args": EMAIL},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '["a"]', "status": "success"},
        {"role": "tool", "tool_call_id": "c2", "content": "Rejected: no", "status": "error"},
        {"role": "assistant", "content": "Done."},
    ]
    assert to_responses_input(history) == [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "c1", "name": "search", "arguments": '{"q": "a"}'},
        call_item("c2", "send_email", EMAIL),
        output_item("c1", '["a"]'),
        output_item("c2", "Rejected: no"),
        {"role": "assistant", "content": "Done."},
    ]


def test_unknown_role_is_refused() -> None:
    """A message with an unknown role raises ValueError naming it."""
    with pytest.raises(ValueError, match="unknown role 'robot'"):
        to_responses_input([{"role": "robot", "content": "x"}])


def test_tools_in_the_responses_shape_are_kept() -> None:
    """Chat Completions tools are converted; a tool already in the Responses shape is kept."""
    assert to_responses_tools([SEND_EMAIL_TOOL, SEND_EMAIL_RESPONSES_TOOL]) == [
        SEND_EMAIL_RESPONSES_TOOL,
        SEND_EMAIL_RESPONSES_TOOL,
    ]


async def test_the_model_satisfies_the_chat_model_protocol(model: OpenAIResponsesModel) -> None:
    """OpenAIResponsesModel is a ChatModel."""
    assert isinstance(model, ChatModel)


async def test_empty_model_name_is_refused(client: openai.AsyncOpenAI) -> None:
    """An empty model name raises ValueError at construction."""
    with pytest.raises(ValueError, match="model must be a non-empty model name, got ''"):
        OpenAIResponsesModel(client, model="")


# --------------------------------------------------------------------------- errors


async def test_http_error_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """An HTTP error status becomes ModelError naming the status and the server's message."""
    scripted_openai.add(reply_error(401, "Incorrect API key provided: test-key."))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: HTTP 401 from {where(scripted_openai)}: "
        "Incorrect API key provided: test-key."
    )
    assert type(caught.value.__cause__) is openai.AuthenticationError


async def test_failed_response_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """A 200 response with status failed and an error gives ModelError with its message."""
    body = {
        **response([]),
        "status": "failed",
        "error": {"code": "server_error", "message": "The model crashed."},
    }
    scripted_openai.add(reply_json(body))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: the response from {where(scripted_openai)} failed: "
        "The model crashed."
    )


async def test_response_without_output_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """A 200 response without an output list gives ModelError."""
    scripted_openai.add(reply_json({"id": "resp_1", "object": "response"}))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: the response from {where(scripted_openai)} has no output"
    )


async def test_function_call_without_a_name_is_a_model_error(
    scripted_openai: ScriptedOpenAIServer, model: OpenAIResponsesModel
) -> None:
    """A function_call item without a name gives ModelError naming its position."""
    scripted_openai.add(reply_function_calls([("call_1", "", {})]))
    with pytest.raises(ModelError) as caught:
        await model.complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: function call #0 from {where(scripted_openai)} has no name"
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
            await OpenAIResponsesModel(client, model=MODEL).complete([USER], [])
    assert str(caught.value) == (
        f"The model call failed: cannot connect to {base_url}/ (model {MODEL!r}): "
        "All connection attempts failed"
    )
    assert type(caught.value.__cause__) is openai.APIConnectionError


# --------------------------------------------------------------------------- a whole chat


class Office:
    """send_email (guarded by its verb) and search_contacts (not), with a log of what ran."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Any]:
        """The two tools."""

        def send_email(to: str, subject: str, body: str) -> str:
            """Send an email."""
            self.ran.append(("send_email", {"to": to, "subject": subject, "body": body}))
            return f"Email sent to {to}"

        def search_contacts(query: str) -> list[str]:
            """Find contacts by name."""
            self.ran.append(("search_contacts", {"query": query}))
            return [f"{query.lower()}@example.com"]

        return [send_email, search_contacts]


@pytest.fixture
def office() -> Office:
    """Fresh tools."""
    return Office()


@pytest.fixture
def chat(model: OpenAIResponsesModel, office: Office) -> ReviewedChat:
    """A ReviewedChat over the Responses adapter."""
    return ReviewedChat(model, guard(office.tools()), system_prompt=SYSTEM["content"])


async def test_pause_approve_and_final_text(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """A guarded function_call pauses; approving runs it once; its output reaches the model."""
    scripted_openai.add(
        reply_function_calls([("call_1", "send_email", EMAIL)]),
        reply_response_text("Alice has been told."),
    )
    turn = await chat.send_message(USER["content"])
    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "send_email",
                "args": EMAIL,
                "description": "Tool `send_email` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert office.ran == []
    final = await chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert final.reply == "Alice has been told."
    assert office.ran == [("send_email", EMAIL)]
    assert scripted_openai.requests[1]["input"] == [
        SYSTEM,
        USER,
        call_item("call_1", "send_email", EMAIL),
        output_item("call_1", "Email sent to alice@example.com"),
    ]
    assert [t["name"] for t in scripted_openai.requests[1]["tools"]] == [
        "send_email",
        "search_contacts",
    ]


async def test_reject_reason_reaches_the_model_marked(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """A rejection reaches the model as a function_call_output marked by the template."""
    scripted_openai.add(
        reply_function_calls([("call_1", "send_email", EMAIL)]),
        reply_response_text("OK, not sent."),
    )
    turn = await chat.send_message(USER["content"])
    final = await chat.submit_review(
        [{"type": "reject", "message": "Send it to Bob instead."}], turn.thread_id
    )
    assert final.reply == "OK, not sent."
    assert office.ran == []
    assert scripted_openai.requests[1]["input"][-1] == output_item(
        "call_1", "Rejected by the reviewer, not executed: Send it to Bob instead."
    )


async def test_parallel_calls_one_guarded_one_not(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """Of two parallel calls the unguarded one runs at once; the guarded one is rejected."""
    scripted_openai.add(
        reply_function_calls(
            [("call_s", "search_contacts", {"query": "Alice"}), ("call_m", "send_email", EMAIL)]
        ),
        reply_response_text("I did not send it."),
    )
    turn = await chat.send_message(USER["content"])
    assert [r.name for r in turn.pending_review.action_requests] == ["send_email"]  # type: ignore[union-attr]
    assert office.ran == [("search_contacts", {"query": "Alice"})]
    await chat.submit_review([{"type": "reject"}], turn.thread_id)
    assert scripted_openai.requests[1]["input"][2:] == [
        call_item("call_s", "search_contacts", {"query": "Alice"}),
        call_item("call_m", "send_email", EMAIL),
        output_item("call_s", '["alice@example.com"]'),
        output_item("call_m", REJECTED_BY_USER_MESSAGE),
    ]


async def test_model_error_keeps_the_tool_results(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """A failing Responses call after the approval raises ModelError; the result is saved."""
    scripted_openai.add(
        reply_function_calls([("call_1", "send_email", EMAIL)]), reply_error(500, "Overloaded")
    )
    turn = await chat.send_message(USER["content"])
    with pytest.raises(ModelError, match="HTTP 500"):
        await chat.submit_review([{"type": "approve"}], turn.thread_id)
    state = await chat.get_thread(turn.thread_id)
    assert (state.status, state.messages[-1]) == (
        "idle",
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Email sent to alice@example.com",
            "status": "success",
        },
    )
    assert office.ran == [("send_email", EMAIL)]
