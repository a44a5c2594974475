"""Attack: run a guarded body through a framework object without a human's approval.

A hostile model (or code holding the framework's tool objects) calls the
Agents SDK ``FunctionTool.on_invoke_tool`` or the Pydantic AI toolset's
``call_tool`` directly, with hostile arguments (deep, NaN, lone surrogates,
bidi text, odd call ids), or plants an "edit" in the run's context. The
guarded body must never run: the call is refused as needing approval or
gets an error result, and any review payload built for it is clean JSON.
"""

from __future__ import annotations

import json
from typing import Any

from agents.tool_context import ToolContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RunUsage

from tests.adversarial.strategies import hostile_json, odd_ids
from toolguard import ApprovalRequiredError, requires_approval
from toolguard.integrations import openai_agents, pydantic_ai

RAN: list[Any] = []


@requires_approval
def delete_everything(target: Any = None) -> str:
    """Delete it all.

    Args:
        target: what to delete.
    """
    RAN.append(target)
    return "deleted"


AGENTS_TOOL = openai_agents.function_tools([delete_everything])[0]
PYDANTIC_TOOLSET = pydantic_ai.toolset([delete_everything])

hostile_args = st.one_of(
    st.dictionaries(st.just("target"), hostile_json, max_size=1),
    st.dictionaries(st.text(max_size=8), hostile_json, max_size=3),
)


def _json_text(args: Any) -> str:
    try:
        return json.dumps(args)
    except (ValueError, RecursionError):
        return "{broken"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=hostile_args, call_id=odd_ids, plant_edit=st.booleans())
async def test_agents_invoker_never_runs_a_guarded_body(
    args: dict[str, Any], call_id: str, plant_edit: bool
) -> None:
    """Direct on_invoke_tool: refused or an error text; a planted edit changes nothing."""
    RAN.clear()
    context: dict[str, Any] = {}
    if plant_edit:
        context[openai_agents.EDITS_KEY] = {
            call_id: {"name": "delete_everything", "args": {"target": "all"}}
        }
    text = _json_text(args)
    ctx = ToolContext(
        context=context, tool_name="delete_everything", tool_call_id=call_id, tool_arguments=text
    )
    try:
        outcome = await AGENTS_TOOL.on_invoke_tool(ctx, text)
    except ApprovalRequiredError as exc:
        payload = exc.pending_review.model_dump(mode="json")
        json.dumps(payload, allow_nan=False).encode()  # clean JSON, encodable as UTF-8
    else:
        assert outcome.startswith("Invalid arguments for tool `delete_everything`")
    assert RAN == []


def _ctx() -> RunContext[None]:
    model = FunctionModel(lambda _m, _i: ModelResponse(parts=[TextPart("x")]))
    return RunContext(deps=None, model=model, usage=RunUsage(), tool_call_id="c", tool_name="d")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=hostile_args)
async def test_pydantic_ai_toolset_never_runs_a_guarded_body(args: dict[str, Any]) -> None:
    """Direct call_tool without approval: ApprovalRequired or a failed result; never the body."""
    RAN.clear()
    ctx = _ctx()
    tools = await PYDANTIC_TOOLSET.get_tools(ctx)
    refused: Exception | None = None
    try:
        await PYDANTIC_TOOLSET.call_tool("delete_everything", args, ctx, tools["delete_everything"])
    except (ApprovalRequired, ToolFailed) as exc:
        refused = exc
    if isinstance(refused, ApprovalRequired):
        assert refused.metadata == {
            "toolguard": {"description": None, "allowed_decisions": ["approve", "edit", "reject"]}
        }
    else:
        assert isinstance(refused, ToolFailed)
        assert refused.message.startswith("Invalid arguments for tool `delete_everything`")
    assert RAN == []
