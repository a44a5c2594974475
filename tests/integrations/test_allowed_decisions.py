"""Per-tool allowed decisions hold in every framework: an approve/reject tool refuses an edit.

``requires_approval(allowed_decisions=["approve", "reject"])`` shows in the payload each
integration builds, and ``validate_decisions`` refuses an ``edit`` with the catalog text;
nothing runs, and the same pause can still be approved.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from toolguard import InvalidReviewDecisionError, requires_approval

EDIT = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}}
REFUSED = "Decision 'edit' is not allowed for action 'send_email'. Allowed: ['approve', 'reject']"
PAYLOAD = {
    "action_requests": [
        {
            "name": "send_email",
            "args": {"to": "a@x"},
            "description": "Tool `send_email` is awaiting approval",
        }
    ],
    "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "reject"]}],
}


def make_tool(ran: list[str]) -> Any:
    @requires_approval(allowed_decisions=["approve", "reject"])
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    return send_email


def test_pydantic_ai_refuses_an_edit_and_still_approves() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolguard.integrations import pydantic_ai as tg

    def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("send_email", {"to": "a@x"}, "c1")])
        return ModelResponse(parts=[TextPart("done")])

    ran: list[str] = []
    agent = Agent(
        FunctionModel(scripted),
        toolsets=[tg.toolset([make_tool(ran)])],
        output_type=[str, DeferredToolRequests],
    )

    async def main() -> None:
        result = await agent.run("go")
        assert isinstance(result.output, DeferredToolRequests)
        assert tg.pending_review(result.output).model_dump() == PAYLOAD
        with pytest.raises(InvalidReviewDecisionError) as caught:
            tg.deferred_results(result.output, [EDIT])
        assert str(caught.value) == REFUSED
        assert ran == []
        approved = tg.deferred_results(result.output, [{"type": "approve"}])
        final = await agent.run(
            message_history=result.all_messages(), deferred_tool_results=approved
        )
        assert (final.output, ran) == ("done", ["a@x"])

    anyio.run(main)


def test_openai_agents_refuses_an_edit_and_still_approves() -> None:
    pytest.importorskip("agents")
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from toolguard.integrations import openai_agents as tg

    set_tracing_disabled(True)
    ran: list[str] = []
    model = ScriptedModel(
        [[function_call("send_email", {"to": "a@x"}, call_id="c1")], [assistant_message("done")]]
    )
    agent = Agent(name="a", model=model, tools=tg.function_tools([make_tool(ran)]))

    async def main() -> None:
        result = await Runner.run(agent, "go", context={})
        assert tg.pending_review(result.interruptions).model_dump() == PAYLOAD
        state = result.to_state()
        with pytest.raises(InvalidReviewDecisionError) as caught:
            tg.apply_decisions(state, [EDIT])
        assert str(caught.value) == REFUSED
        assert ran == []
        tg.apply_decisions(state, [{"type": "approve"}])
        final = await Runner.run(agent, state)
        assert (final.final_output, ran) == ("done", ["a@x"])

    anyio.run(main)


def test_langchain_middleware_refuses_an_edit_and_still_approves() -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    import toolguard
    from toolguard.integrations import langchain as tg

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    ran: list[str] = []
    tools = toolguard.guard([make_tool(ran)])
    call = {"id": "c1", "name": "send_email", "args": {"to": "a@x"}}
    model = FakeModel(messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage("done")]))
    agent = create_agent(
        model,
        tools=tg.tools(tools),
        middleware=[tg.middleware(tools)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config)
    assert paused["__interrupt__"][0].value == PAYLOAD
    with pytest.raises(InvalidReviewDecisionError) as caught:
        agent.invoke(Command(resume={"decisions": [EDIT]}), config)
    assert str(caught.value) == REFUSED
    assert ran == []
    done = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert (done["messages"][-1].content, ran) == ("done", ["a@x"])
