"""toolguard.integrations.openai_agents with the real Agents SDK, the real openai client and HTTP.

The agent talks Chat Completions to the local scripted server (tests/openai_server.py);
tracing is disabled, so nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import openai
import pytest
from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    Runner,
    RunState,
    ToolApprovalItem,
    UserError,
    set_tracing_disabled,
)
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls
from toolguard import (
    REJECTED_BY_USER_MESSAGE,
    AlreadyResumedError,
    ApprovalPolicy,
    ApprovalRequiredError,
    InvalidReviewDecisionError,
    MemoryStore,
    NoPendingReviewError,
    QuorumReviewerError,
    Rules,
    Tool,
    guard,
    requires_approval,
)
from toolguard._enforce.actions import EXPIRED_BEFORE_START
from toolguard._enforce.frameworks import NO_ASKED_AT
from toolguard.integrations import openai_agents as tg
from toolguard.integrations.openai_agents import ReviewStateError

SEND_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
MAIL_PROMPT = "Mail Alice that the meeting moved to 10"


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """The SDK's trace exporter would call api.openai.com: keep it off."""
    set_tracing_disabled(True)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as opened:
        yield opened


class Counter:
    """Records every body that ran, with its arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def tools(self) -> list[Callable[..., Any]]:
        calls = self.calls

        def search_contacts(query: str) -> list[str]:
            """Find contacts by name.

            Args:
                query: words to look for.
            """
            calls.append(("search_contacts", {"query": query}))
            return ["alice@example.com"]

        def send_email(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            calls.append(("send_email", {"to": to, "subject": subject, "body": body}))
            return f"sent to {to}"

        return [search_contacts, send_email]


def make_agent(client: openai.AsyncOpenAI, tools: Any) -> Agent[Any]:
    model = OpenAIChatCompletionsModel(model="scripted-model", openai_client=client)
    return Agent(name="assistant", model=model, tools=list(tools))


def tool_messages(server: ScriptedOpenAIServer, index: int = -1) -> list[tuple[str, str]]:
    """The tool results sent in one request: (tool_call_id, content)."""
    return [
        (m["tool_call_id"], m["content"])
        for m in server.requests[index]["messages"]
        if m["role"] == "tool"
    ]


async def paused(
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
    counter: Counter,
    *tool_calls: tuple[str, str, dict[str, Any] | str],
    then: str = "Done.",
    context: Any = None,
) -> tuple[Agent[Any], Any]:
    server.add(reply_tool_calls(list(tool_calls)), reply_text(then))
    agent = make_agent(client, tg.function_tools(counter.tools()))
    result = await Runner.run(agent, MAIL_PROMPT, context={} if context is None else context)
    return agent, result


# --------------------------------------------------------------------------- pausing


async def test_safe_tool_runs_at_once_and_guarded_call_pauses_with_spec_payload(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    _, result = await paused(
        server,
        client,
        counter,
        ("c1", "search_contacts", {"query": "alice"}),
        ("c2", "send_email", SEND_ARGS),
    )
    assert counter.calls == [("search_contacts", {"query": "alice"})]
    assert [i.tool_name for i in result.interruptions] == ["send_email"]
    assert tg.pending_review(result.interruptions).model_dump() == {
        "action_requests": [
            {
                "name": "send_email",
                "args": SEND_ARGS,
                "description": "Tool `send_email` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert len(server.requests) == 1  # paused: the model was not asked again


async def test_tools_keep_names_descriptions_and_parameter_descriptions(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The request carries toolguard's schema, parameter descriptions included."""
    counter = Counter()
    toolset = guard(counter.tools())
    server.add(reply_text("Nothing to do."))
    await Runner.run(make_agent(client, tg.function_tools(toolset)), "hi")
    sent = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
    assert {name: (f["description"], f["parameters"]) for name, f in sent.items()} == {
        name: (tool.description, tool.parameters) for name, tool in toolset.items()
    }
    assert sent["send_email"]["parameters"]["properties"]["to"] == {
        "description": "the recipient's address.",
        "type": "string",
    }


async def test_description_override_reaches_the_payload(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    ran: list[int] = []

    @requires_approval(description="Wire money to another account")
    def pay(amount: int) -> str:
        ran.append(amount)
        return "paid"

    server.add(reply_tool_calls([("p1", "pay", {"amount": 5})]))
    result = await Runner.run(make_agent(client, tg.function_tools([pay])), "pay 5", context={})
    assert tg.pending_review(result.interruptions).model_dump() == {
        "action_requests": [
            {"name": "pay", "args": {"amount": 5}, "description": "Wire money to another account"}
        ],
        "review_configs": [
            {"action_name": "pay", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert ran == []


async def test_when_predicate_sees_the_actual_arguments(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """when= decides per call: a small transfer runs at once, a large one pauses."""
    ran: list[int] = []

    @requires_approval(when=lambda args: args["amount"] > 1000)
    def transfer(amount: int, to: str) -> str:
        ran.append(amount)
        return f"moved {amount}"

    server.add(
        reply_tool_calls(
            [
                ("t1", "transfer", {"amount": 10, "to": "bob"}),
                ("t2", "transfer", {"amount": 5000, "to": "eve"}),
            ]
        ),
        reply_text("ok"),
    )
    agent = make_agent(client, tg.function_tools([transfer]))
    result = await Runner.run(agent, "two transfers", context={})
    assert ran == [10]
    assert [(a.name, a.args) for a in tg.pending_review(result.interruptions).action_requests] == [
        ("transfer", {"amount": 5000, "to": "eve"})
    ]
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "approve"}])
    done = await Runner.run(agent, state)
    assert (ran, done.final_output) == ([10, 5000], "ok")
    assert tool_messages(server) == [("t1", "moved 10"), ("t2", "moved 5000")]


async def test_bad_arguments_get_an_error_result_without_review(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    _, result = await paused(
        server,
        client,
        counter,
        ("c1", "send_email", {"to": "alice@example.com", "subject": 3}),
        then="Sorry.",
    )
    assert (result.interruptions, result.final_output, counter.calls) == ([], "Sorry.", [])
    assert tool_messages(server) == [
        (
            "c1",
            (
                "Invalid arguments for tool `send_email`: 'subject': Input should be a valid"
                " string; 'body': Field required"
            ),
        )
    ]


async def test_arguments_that_are_not_an_object_never_reach_a_reviewer(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The SDK pauses a call whose arguments its policy cannot read; nobody is asked about it."""
    counter = Counter()
    agent, result = await paused(
        server,
        client,
        counter,
        ("c1", "send_email", "{not json"),
        ("c2", "send_email", SEND_ARGS),
        then="Half done.",
    )
    assert [i.call_id for i in result.interruptions] == ["c1", "c2"]
    review = tg.pending_review(result.interruptions)
    assert [a.args for a in review.action_requests] == [SEND_ARGS]
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "approve"}])
    await Runner.run(agent, state)
    assert counter.calls == [("send_email", SEND_ARGS)]
    assert tool_messages(server) == [
        (
            "c1",
            "Invalid arguments for tool `send_email`: expected a JSON object, got {not json",
        ),
        ("c2", "sent to alice@example.com"),
    ]


# --------------------------------------------------------------------------- decisions


async def test_approve_runs_the_body_exactly_once(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    agent, result = await paused(
        server, client, counter, ("c2", "send_email", SEND_ARGS), then="Sent."
    )
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "approve"}])
    done = await Runner.run(agent, state)
    assert done.final_output == "Sent."
    assert counter.calls == [("send_email", SEND_ARGS)]
    assert tool_messages(server) == [("c2", "sent to alice@example.com")]
    assert done.interruptions == []


async def test_resuming_the_same_state_twice_runs_the_body_once(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A retried resume of the same in-memory state does not run the approved call again."""
    counter = Counter()
    agent, result = await paused(
        server, client, counter, ("c2", "send_email", SEND_ARGS), then="Sent."
    )
    server.add(reply_text("Sent, again."))
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "approve"}])
    await Runner.run(agent, state)
    again = await Runner.run(agent, state)
    assert again.final_output == "Sent, again."
    assert counter.calls == [("send_email", SEND_ARGS)]


async def test_reject_reason_reaches_the_model_and_nothing_runs(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    agent, result = await paused(
        server, client, counter, ("c2", "send_email", SEND_ARGS), then="Not sent."
    )
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "reject", "message": "Alice is on leave"}])
    done = await Runner.run(agent, state)
    assert (done.final_output, counter.calls) == ("Not sent.", [])
    assert tool_messages(server) == [("c2", "Alice is on leave")]


async def test_reject_without_reason_sends_the_spec_constant(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    agent, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "reject"}])
    await Runner.run(agent, state)
    assert counter.calls == []
    assert tool_messages(server) == [("c2", REJECTED_BY_USER_MESSAGE)]


def assistant_calls(server: ScriptedOpenAIServer, index: int = -1) -> list[tuple[str, Any]]:
    """The tool calls of the assistant messages in one request: (id, parsed arguments)."""
    return [
        (call["id"], json.loads(call["function"]["arguments"]))
        for m in server.requests[index]["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


async def test_edit_runs_the_edited_arguments_and_the_history_shows_them(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Edit: the body runs once with the edited args; the model's call is replaced by them."""
    counter = Counter()
    agent, result = await paused(
        server, client, counter, ("c2", "send_email", SEND_ARGS), then="Sent."
    )
    edited = {**SEND_ARGS, "to": "bob@example.com"}
    state = result.to_state()
    tg.apply_decisions(
        state, [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}]
    )
    done = await Runner.run(agent, state)
    assert counter.calls == [("send_email", edited)]
    assert assistant_calls(server) == [("c2", edited)]
    assert tool_messages(server) == [("c2", "sent to bob@example.com")]
    assert done.context_wrapper.context == {
        tg.EDITS_KEY: {"c2": {"name": "send_email", "args": edited, "in_history": True}}
    }
    # The next turn's input (the history the application keeps) shows what ran, too.
    server.add(reply_text("Anything else?"))
    await Runner.run(agent, [*done.to_input_list(), {"role": "user", "content": "thanks"}])
    assert assistant_calls(server) == [("c2", edited)]
    assert counter.calls == [("send_email", edited)]


async def test_edit_tells_the_model_when_the_history_cannot_be_rewritten(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the SDK's history item is not found, the tool result says which arguments ran."""
    monkeypatch.setattr(tg, "_replace_in_history", lambda *_args: False)
    counter = Counter()
    agent, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    edited = {**SEND_ARGS, "to": "bob@example.com"}
    state = result.to_state()
    tg.apply_decisions(
        state, [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}]
    )
    await Runner.run(agent, state)
    assert counter.calls == [("send_email", edited)]
    assert assistant_calls(server) == [("c2", SEND_ARGS)]
    assert tool_messages(server) == [
        (
            "c2",
            (
                "A reviewer edited this call; it ran with the arguments"
                ' {"body": "The meeting is at 10.", "subject": "Meeting", "to": "bob@example.com"}.'
                " Result: sent to bob@example.com"
            ),
        )
    ]


async def test_edit_survives_a_run_state_round_trip(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Decide, store the state as text, load it in a fresh agent: the edited call runs once."""
    counter = Counter()
    _, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    loaded = await RunState.from_string(
        make_agent(client, tg.function_tools(counter.tools())), result.to_state().to_string()
    )
    edited = {**SEND_ARGS, "subject": "Moved"}
    tg.apply_decisions(
        loaded, [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}]
    )
    stored = loaded.to_string()
    fresh = make_agent(client, tg.function_tools(counter.tools()))
    await Runner.run(fresh, await RunState.from_string(fresh, stored))
    assert counter.calls == [("send_email", edited)]
    assert assistant_calls(server) == [("c2", edited)]


async def test_edit_of_a_run_without_context_keeps_it_in_a_new_dict(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    server.add(reply_tool_calls([("c2", "send_email", SEND_ARGS)]), reply_text("ok"))
    agent = make_agent(client, tg.function_tools(counter.tools()))
    result = await Runner.run(agent, MAIL_PROMPT)
    edited = {**SEND_ARGS, "body": "Now at 11."}
    state = result.to_state()
    tg.apply_decisions(
        state, [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}]
    )
    await Runner.run(agent, await RunState.from_string(agent, state.to_string()))
    assert counter.calls == [("send_email", edited)]


async def test_edit_with_arguments_that_break_the_schema_does_not_run(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    agent, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    state = result.to_state()
    tg.apply_decisions(
        state, [{"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 7}}}]
    )
    await Runner.run(agent, state)
    assert counter.calls == []
    assert tool_messages(server) == [
        (
            "c2",
            (
                "Invalid arguments for tool `send_email`: 'to': Input should be a valid string;"
                " 'subject': Field required; 'body': Field required"
            ),
        )
    ]


async def test_edit_to_another_tool_is_refused_and_nothing_changes(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    counter = Counter()
    agent, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    state = result.to_state()
    before = state.to_json()
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.apply_decisions(
            state,
            [
                {
                    "type": "edit",
                    "edited_action": {"name": "search_contacts", "args": {"query": "x"}},
                }
            ],
        )
    assert str(caught.value) == (
        "An edit cannot switch `send_email` to another tool (`search_contacts`) in the OpenAI"
        " Agents SDK. Edit the arguments of `send_email`, or reject the call."
    )
    assert state.to_json() == before
    tg.apply_decisions(state, [{"type": "approve"}])
    await Runner.run(agent, state)
    assert counter.calls == [("send_email", SEND_ARGS)]


async def test_edit_needs_a_dict_context(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A context that cannot carry the edit: refused with the fix, the call stays pending."""

    class Deps:
        pass

    counter = Counter()
    _, result = await paused(
        server, client, counter, ("c2", "send_email", SEND_ARGS), context=Deps()
    )
    state = result.to_state()
    with pytest.raises(TypeError) as caught:
        tg.apply_decisions(
            state, [{"type": "edit", "edited_action": {"name": "send_email", "args": SEND_ARGS}}]
        )
    assert str(caught.value) == (
        "An edit is kept in the run's context, which must be a dict to survive"
        " RunState.to_string(); this run's context is a Deps. Pass context={} (or a dict of"
        " your own) to Runner.run, or approve or reject."
    )
    assert [i.call_id for i in state.get_interruptions()] == ["c2"]
    assert counter.calls == []


@pytest.mark.parametrize(
    ("decisions", "error"),
    [
        ([], "Expected 1 decision (one per action), got 0"),
        (
            [{"type": "postpone"}],
            "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
        ),
        (
            [{"type": "edit", "edited_action": {"name": "send_email"}}],
            "'edited_action' must contain 'name' (text) and 'args' (object)",
        ),
        ({"type": "approve"}, "'decisions' must be a list of decision objects, got dict"),
    ],
)
async def test_decisions_are_validated_with_spec_texts(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI, decisions: Any, error: str
) -> None:
    counter = Counter()
    _, result = await paused(server, client, counter, ("c2", "send_email", SEND_ARGS))
    state = result.to_state()
    before = state.to_json()
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.apply_decisions(state, decisions)
    assert str(caught.value) == error
    assert state.to_json() == before


async def test_a_finished_run_has_nothing_to_decide(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    server.add(reply_text("Hello."))
    result = await Runner.run(make_agent(client, tg.function_tools(Counter().tools())), "hi")
    with pytest.raises(NoPendingReviewError):
        tg.apply_decisions(result.to_state(), [{"type": "approve"}])


async def test_approve_after_a_run_state_round_trip(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The paused run stored as text and loaded with a fresh agent: approve runs once."""
    counter = Counter()
    _, result = await paused(
        server,
        client,
        counter,
        ("c1", "search_contacts", {"query": "alice"}),
        ("c2", "send_email", SEND_ARGS),
        then="Sent.",
    )
    stored = result.to_state().to_string()
    fresh = make_agent(client, tg.function_tools(counter.tools()))
    state = await RunState.from_string(fresh, stored)
    assert tg.pending_review(state.get_interruptions()) == tg.pending_review(result.interruptions)
    tg.apply_decisions(state, [{"type": "approve"}])
    done = await Runner.run(fresh, state)
    assert done.final_output == "Sent."
    assert counter.calls == [("search_contacts", {"query": "alice"}), ("send_email", SEND_ARGS)]
    assert tool_messages(server) == [
        ("c1", '["alice@example.com"]'),
        ("c2", "sent to alice@example.com"),
    ]


async def test_foreign_tools_are_reviewed_but_cannot_be_edited(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """An SDK tool with its own needs_approval is listed with the default text; edits refused."""
    ran: list[str] = []

    async def invoke(_ctx: ToolContext[Any], _args: str) -> str:
        ran.append("wipe")
        return "wiped"

    wipe = FunctionTool(
        name="wipe",
        description="Wipe it.",
        params_json_schema={"type": "object", "properties": {}},
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=True,
    )
    server.add(reply_tool_calls([("w1", "wipe", {})]), reply_text("ok"))
    agent = make_agent(client, [wipe])
    result = await Runner.run(agent, "wipe", context={})
    assert tg.pending_review(result.interruptions).model_dump()["action_requests"] == [
        {"name": "wipe", "args": {}, "description": "Tool `wipe` is awaiting approval"}
    ]
    state = result.to_state()
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.apply_decisions(state, [{"type": "edit", "edited_action": {"name": "wipe", "args": {}}}])
    assert str(caught.value) == (
        "The tool `wipe` was not built by toolguard's function_tools(), so it cannot run edited"
        " arguments. Approve or reject the call."
    )
    tg.apply_decisions(state, [{"type": "approve"}])
    await Runner.run(agent, state)
    assert ran == ["wipe"]


# --------------------------------------------------------------------------- no bypass


def tool_context(call_id: str, args: dict[str, Any]) -> ToolContext[Any]:
    return ToolContext(
        context={},
        tool_name="send_email",
        tool_call_id=call_id,
        tool_arguments=json.dumps(args),
    )


async def test_calling_on_invoke_tool_directly_never_runs_a_guarded_body() -> None:
    """Without the SDK's approval of that call the invoker raises ApprovalRequiredError."""
    counter = Counter()
    tools = {t.name: t for t in tg.function_tools(counter.tools())}
    with pytest.raises(ApprovalRequiredError) as caught:
        await tools["send_email"].on_invoke_tool(
            tool_context("x1", SEND_ARGS), json.dumps(SEND_ARGS)
        )
    assert caught.value.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "send_email",
                "args": SEND_ARGS,
                "description": "Tool `send_email` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    # An edit planted in the context without an approval is ignored too.
    ctx = tool_context("x2", SEND_ARGS)
    ctx.context[tg.EDITS_KEY] = {"x2": {"name": "send_email", "args": SEND_ARGS}}
    with pytest.raises(ApprovalRequiredError):
        await tools["send_email"].on_invoke_tool(ctx, json.dumps(SEND_ARGS))
    assert counter.calls == []
    safe = await tools["search_contacts"].on_invoke_tool(
        tool_context("x3", {"query": "a"}), '{"query": "a"}'
    )
    assert (safe, counter.calls) == ('["alice@example.com"]', [("search_contacts", {"query": "a"})])


def test_import_without_the_agents_sdk_names_the_extra() -> None:
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'agents':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import toolguard.integrations.openai_agents\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr, done.stdout) == (
        0,
        "",
        (
            "toolguard.integrations.openai_agents needs the OpenAI Agents SDK:"
            ' pip install "toolguard-hitl[openai-agents]"\n'
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproveOrReject(ApprovalPolicy):
    """A policy that lets the reviewer approve or reject only."""

    allowed_decisions: tuple[str, ...] = ("approve", "reject")


async def test_the_payload_keeps_the_tools_allowed_decisions(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    def wipe_disk(disk: str) -> str:
        return "wiped"

    guarded = Tool(wipe_disk, approval=ApproveOrReject())
    server.add(reply_tool_calls([("w1", "wipe_disk", {"disk": "sda"})]))
    result = await Runner.run(make_agent(client, tg.function_tools([guarded])), "wipe")
    assert tg.pending_review(result.interruptions).model_dump()["review_configs"] == [
        {"action_name": "wipe_disk", "allowed_decisions": ["approve", "reject"]}
    ]


# ------------------------------------------------------------- rules, quorum, secrets, once only


def shell_tools(ran: list[str]) -> list[Callable[..., Any]]:
    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command: the command line.
        """
        ran.append(command)
        return f"ran {command}"

    def search_logs(query: str) -> list[str]:
        """Search the logs."""
        ran.append(f"search {query}")
        return [query]

    return [run_shell, search_logs]


SHELL_RULES = Rules(
    allow=['run_shell(command="ls *")'], ask=["search_logs"], deny=['run_shell(command="rm *")']
)
DENIED_RM = (
    'The call to `run_shell` is denied by the rule `deny run_shell(command="rm *")`.'
    " It was not executed."
)


async def test_rules_deny_ask_and_allow_like_the_runner(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """deny: the model reads the denial, nothing runs or pauses; ask: a review; allow: runs."""
    ran: list[str] = []
    server.add(
        reply_tool_calls(
            [
                ("r1", "run_shell", {"command": "rm -rf /tmp/x"}),
                ("r2", "run_shell", {"command": "ls /tmp"}),
                ("r3", "search_logs", {"query": "error"}),
            ]
        ),
        reply_text("ok"),
    )
    agent = make_agent(client, tg.function_tools(guard(shell_tools(ran), rules=SHELL_RULES)))
    result = await Runner.run(agent, "clean up", context={})
    assert ran == ["ls /tmp"]
    assert tg.pending_review(result.interruptions).model_dump() == {
        "action_requests": [
            {
                "name": "search_logs",
                "args": {"query": "error"},
                "description": "Tool `search_logs` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "search_logs", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "reject", "message": "no"}])
    await Runner.run(agent, state)
    assert tool_messages(server) == [("r1", DENIED_RM), ("r2", "ran ls /tmp"), ("r3", "no")]
    assert ran == ["ls /tmp"]


def deploy_tool(ran: list[tuple[str, str]]) -> Any:
    @requires_approval(approvals=2, redact=["token"])
    def deploy(env: str, token: str) -> str:
        """Deploy a release."""
        ran.append((env, token))
        return f"deployed {env} with {token}"

    return deploy


DEPLOY_ARGS = {"env": "prod", "token": "s3cr3t-deploy-key"}


def deploy_review(env: str, given: int, by: list[str]) -> dict[str, Any]:
    return {
        "action_requests": [
            {
                "name": "deploy",
                "args": {"env": env, "token": "[redacted]"},
                "description": "Tool `deploy` is awaiting approval",
            }
        ],
        "review_configs": [
            {
                "action_name": "deploy",
                "allowed_decisions": ["approve", "edit", "reject"],
                "approvals": {"required": 2, "given": given, "by": by},
            }
        ],
    }


async def test_a_quorum_runs_only_after_two_distinct_named_reviewers(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """One vote keeps the interruption (progress shown); anonymous and repeated votes refused."""
    ran: list[tuple[str, str]] = []
    server.add(reply_tool_calls([("d1", "deploy", DEPLOY_ARGS)]), reply_text("Deployed."))
    agent = make_agent(client, tg.function_tools([deploy_tool(ran)]))
    result = await Runner.run(agent, "deploy", context={})
    state = result.to_state()
    assert tg.pending_review(state).model_dump() == deploy_review("prod", 0, [])
    with pytest.raises(QuorumReviewerError) as anonymous:
        tg.apply_decisions(state, [{"type": "approve"}])
    assert str(anonymous.value) == (
        "Action 'deploy' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    left = tg.apply_decisions(state, [{"type": "approve"}], reviewer="alice")
    assert left is not None
    assert left.model_dump() == deploy_review("prod", 1, ["alice"])
    stored = state.to_string()  # the votes travel with the state
    state = await RunState.from_string(agent, stored)
    again = await Runner.run(agent, state)
    assert (ran, len(server.requests)) == ([], 1)
    state = again.to_state()
    assert tg.pending_review(state).model_dump() == deploy_review("prod", 1, ["alice"])
    with pytest.raises(QuorumReviewerError):
        tg.apply_decisions(state, [{"type": "approve"}], reviewer="Alice")
    assert tg.apply_decisions(state, [{"type": "approve"}], reviewer="bob") is None
    done = await Runner.run(agent, state)
    assert (done.final_output, ran) == ("Deployed.", [("prod", "s3cr3t-deploy-key")])
    assert tool_messages(server) == [("d1", "deployed prod with [redacted]")]


async def test_the_sdks_own_approval_never_counts_as_a_quorum(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """state.approve without toolguard's votes: the quorum call refuses to run."""
    ran: list[tuple[str, str]] = []
    server.add(reply_tool_calls([("d1", "deploy", DEPLOY_ARGS)]), reply_text("Deployed."))
    agent = make_agent(client, tg.function_tools([deploy_tool(ran)]))
    result = await Runner.run(agent, "deploy", context={})
    state = result.to_state()
    state.approve(state.get_interruptions()[0])
    with pytest.raises(UserError) as caught:
        await Runner.run(agent, state)
    assert isinstance(caught.value.__cause__, ApprovalRequiredError)
    assert caught.value.__cause__.pending_review.model_dump() == deploy_review("prod", 0, [])
    assert ran == []


async def test_an_edit_restarts_the_quorum_and_keeps_a_redacted_secret(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The edit is its author's vote for the new arguments; "[redacted]" keeps the real key."""
    ran: list[tuple[str, str]] = []
    server.add(reply_tool_calls([("d1", "deploy", DEPLOY_ARGS)]), reply_text("Deployed."))
    agent = make_agent(client, tg.function_tools([deploy_tool(ran)]))
    result = await Runner.run(agent, "deploy", context={})
    state = result.to_state()
    edit = {
        "type": "edit",
        "edited_action": {"name": "deploy", "args": {"env": "staging", "token": "[redacted]"}},
    }
    left = tg.apply_decisions(state, [edit], reviewer="alice")
    assert left is not None
    assert left.model_dump() == deploy_review("staging", 1, ["alice"])
    assert tg.apply_decisions(state, [{"type": "approve"}], reviewer="carol") is None
    await Runner.run(agent, state)
    assert ran == [("staging", "s3cr3t-deploy-key")]


async def test_a_quorum_needs_a_dict_context(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A run whose context cannot keep the votes is refused at the pause, never dropped."""
    ran: list[tuple[str, str]] = []
    server.add(reply_tool_calls([("d1", "deploy", DEPLOY_ARGS)]))
    agent = make_agent(client, tg.function_tools([deploy_tool(ran)]))
    with pytest.raises(UserError) as caught:
        await Runner.run(agent, "deploy", context=["not", "a", "dict"])
    assert isinstance(caught.value.__cause__, ReviewStateError)
    assert str(caught.value.__cause__) == (
        "The call to `deploy` needs a review whose state toolguard keeps in the run's context"
        " (the votes of its 2 reviewers), but this run's context is a list. Pass context={}"
        " (or a dict of your own) to Runner.run, or use toolguard.Runner or"
        " toolguard.ReviewedChat, which keep it in their own paused turn."
    )
    assert ran == []


async def test_redacted_arguments_never_reach_the_reviewer_and_run_for_real(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    ran: list[str] = []

    @requires_approval(redact=["password"])
    def login(user: str, password: str) -> str:
        """Log in."""
        ran.append(password)
        return f"welcome {user}, {password}"

    server.add(
        reply_tool_calls([("l1", "login", {"user": "ann", "password": "hunter2-long"})]),
        reply_text("ok"),
    )
    agent = make_agent(client, tg.function_tools([login]))
    result = await Runner.run(agent, "log in", context={})
    assert tg.pending_review(result.interruptions).model_dump()["action_requests"] == [
        {
            "name": "login",
            "args": {"user": "ann", "password": "[redacted]"},
            "description": "Tool `login` is awaiting approval",
        }
    ]
    state = result.to_state()
    edit = {
        "type": "edit",
        "edited_action": {"name": "login", "args": {"user": "bob", "password": "[redacted]"}},
    }
    tg.apply_decisions(state, [edit])
    await Runner.run(agent, state)
    assert ran == ["hunter2-long"]
    assert tool_messages(server) == [("l1", "welcome bob, [redacted]")]


async def test_claims_run_an_approved_call_once_across_two_resumes(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Two processes load the same stored state and approve: the body runs once."""
    counter = Counter()
    store = MemoryStore()
    server.add(reply_tool_calls([("c2", "send_email", SEND_ARGS)]), reply_text("Sent."))
    agent = make_agent(client, tg.function_tools(counter.tools(), claims=store))
    result = await Runner.run(agent, MAIL_PROMPT, context={})
    stored = result.to_state().to_string()
    review_id = result.context_wrapper.context[tg.REVIEWS_KEY]["c2"]
    first = await RunState.from_string(agent, stored)
    second = await RunState.from_string(agent, stored)
    tg.apply_decisions(first, [{"type": "approve"}])
    tg.apply_decisions(second, [{"type": "approve"}])
    done = await Runner.run(agent, first)
    assert done.final_output == "Sent."
    with pytest.raises(UserError) as caught:
        await Runner.run(agent, second)
    assert isinstance(caught.value.__cause__, AlreadyResumedError)
    assert str(caught.value.__cause__) == (
        f"The paused turn {review_id} was already resumed or closed; its tools are not run again."
    )
    assert counter.calls == [("send_email", SEND_ARGS)]


# --------------------------------------------------------------------------- deadlines


def deleter(ran: list[str], *, ttl: float) -> Callable[..., Any]:
    @requires_approval(ttl=ttl)
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return delete_file


async def test_an_approval_past_the_deadline_runs_nothing(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Approved after the tool's ttl, resumed from stored text: the runner's expiry text, no run."""
    ran: list[str] = []
    server.add(reply_tool_calls([("d1", "delete_file", {"path": "/srv/a"})]), reply_text("No."))
    agent = make_agent(client, tg.function_tools([deleter(ran, ttl=0.2)]))
    result = await Runner.run(agent, "delete /srv/a", context={})
    stored = result.to_state().to_string()
    assert set(json.loads(stored)["context"]["context"][tg.ASKED_KEY]) == {"d1"}
    await anyio.sleep(0.3)
    state = await RunState.from_string(agent, stored)
    assert tg.apply_decisions(state, [{"type": "approve"}]) is None
    done = await Runner.run(agent, state)
    assert done.final_output == "No."
    assert tool_messages(server) == [("d1", EXPIRED_BEFORE_START)]
    assert EXPIRED_BEFORE_START == (
        "The review of this action expired before the approved call could start."
        " It was not executed."
    )
    assert ran == []


async def test_an_approval_in_time_runs_once(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    ran: list[str] = []
    server.add(reply_tool_calls([("d1", "delete_file", {"path": "/srv/a"})]), reply_text("Ok."))
    agent = make_agent(client, tg.function_tools([deleter(ran, ttl=60)]))
    result = await Runner.run(agent, "delete /srv/a", context={})
    state = result.to_state()
    tg.apply_decisions(state, [{"type": "approve"}])
    done = await Runner.run(agent, state)
    assert done.final_output == "Ok."
    assert tool_messages(server) == [("d1", "deleted /srv/a")]
    assert ran == ["/srv/a"]


def approval_item(name: str, call_id: str, arguments: str) -> ToolApprovalItem:
    raw = ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=arguments
    )
    return ToolApprovalItem(agent=Agent(name="a"), raw_item=raw, tool_name=name)


async def test_an_approval_without_a_record_of_when_it_asked_runs_nothing() -> None:
    """The SDK's approval of a call whose ask time is missing or forged: nothing runs."""
    ran: list[str] = []
    [tool] = tg.function_tools([deleter(ran, ttl=60)])
    args = json.dumps({"path": "/srv/a"})
    for planted in [None, "yesterday", float("nan"), 0.0]:
        ctx = ToolContext(
            context={} if planted is None else {tg.ASKED_KEY: {"d1": planted}},
            tool_name="delete_file",
            tool_call_id="d1",
            tool_arguments=args,
        )
        ctx.approve_tool(approval_item("delete_file", "d1", args))
        outcome = await tool.on_invoke_tool(ctx, args)
        expected = EXPIRED_BEFORE_START if planted == 0.0 else NO_ASKED_AT
        assert outcome == expected
    assert NO_ASKED_AT == (
        "toolguard has no record of when the review of this call began, so its deadline"
        " cannot be checked. It was not executed."
    )
    assert ran == []


async def test_a_deadline_needs_a_dict_context(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A run whose context cannot keep when the call asked is refused at the pause."""
    ran: list[str] = []
    server.add(reply_tool_calls([("d1", "delete_file", {"path": "/srv/a"})]))
    agent = make_agent(client, tg.function_tools([deleter(ran, ttl=60)]))
    with pytest.raises(UserError) as caught:
        await Runner.run(agent, "delete", context=("not", "a", "dict"))
    assert isinstance(caught.value.__cause__, ReviewStateError)
    assert str(caught.value.__cause__) == (
        "The call to `delete_file` needs a review whose state toolguard keeps in the run's"
        " context (when it asked, for its deadline), but this run's context is a tuple. Pass"
        " context={} (or a dict of your own) to Runner.run, or use toolguard.Runner or"
        " toolguard.ReviewedChat, which keep it in their own paused turn."
    )
    assert ran == []
