"""Attack: run a guarded body through a framework object without a human's approval.

A hostile model (or code holding the framework's tool objects) calls the
Agents SDK ``FunctionTool.on_invoke_tool`` or the Pydantic AI toolset's
``call_tool`` directly, with hostile arguments (deep, NaN, lone surrogates,
bidi text, odd call ids), or plants an "edit" in the run's context. The
guarded body must never run: the call is refused as needing approval or
gets an error result, and any review payload built for it is clean JSON.
A deny rule holds even for a call the framework approved, and votes planted
in the framework's state count one reviewer (however it is spelled) once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ToolApprovalItem
from agents.tool_context import ToolContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import ResponseFunctionToolCall
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RunUsage

from tests.adversarial.strategies import hostile_json, odd_ids
from toolguard import ApprovalRequiredError, Rules, guard, requires_approval
from toolguard._enforce import quorum as toolguard_review
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
        assert refused.metadata is not None
        own = refused.metadata["toolguard"]
        binding = {k: own[k] for k in ("review_id", "asked_at", "digest")}  # the review's binding
        assert own == {
            "description": None,
            "allowed_decisions": ["approve", "edit", "reject"],
            **binding,
        }
    else:
        assert isinstance(refused, ToolFailed)
        assert refused.message.startswith("Invalid arguments for tool `delete_everything`")
    assert RAN == []


# ----------------------------------------------------------------------------- rules and quorum

SHELL_RAN: list[Any] = []


def run_shell(command: Any = None) -> str:
    """Run a shell command.

    Args:
        command: the command line.
    """
    SHELL_RAN.append(command)
    return "ran"


@requires_approval(approvals=2)
def wire_money(amount: Any = None) -> str:
    """Wire money out.

    Args:
        amount: how much.
    """
    SHELL_RAN.append(amount)
    return "wired"


RULED = guard([run_shell, wire_money], rules=Rules(deny=['run_shell(command="rm *")']))
RULED_AGENTS = {t.name: t for t in openai_agents.function_tools(RULED)}
RULED_PYDANTIC = pydantic_ai.toolset(RULED)

rm_commands = st.tuples(st.text(max_size=30), st.sampled_from(["", " ", "\u200b"])).map(
    lambda parts: f"rm {parts[0]}"
)
#: Ways one reviewer may be written: case, spaces, zero-width and compatibility forms.
one_reviewer = st.sampled_from(["alice", "Alice", " ALICE ", "alice\u200b", "\uff41lice"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=rm_commands, approved=st.booleans())
async def test_a_deny_rule_holds_even_for_an_approved_call(command: str, approved: bool) -> None:
    """A call a deny rule matches never runs, whether or not the framework approved it."""
    SHELL_RAN.clear()
    ctx = _ctx()
    ctx.tool_call_approved = approved
    tools = await RULED_PYDANTIC.get_tools(ctx)
    with pytest.raises(ToolFailed) as refused:
        await RULED_PYDANTIC.call_tool("run_shell", {"command": command}, ctx, tools["run_shell"])
    assert refused.value.message == (
        'The call to `run_shell` is denied by the rule `deny run_shell(command="rm *")`.'
        " It was not executed."
    )
    text = json.dumps({"command": command})
    agents_ctx = ToolContext(
        context={}, tool_name="run_shell", tool_call_id="c1", tool_arguments=text
    )
    if approved:
        agents_ctx.approve_tool(_approval_item("run_shell", text))
    outcome = await RULED_AGENTS["run_shell"].on_invoke_tool(agents_ctx, text)
    assert outcome.startswith("The call to `run_shell` is denied by the rule")
    assert SHELL_RAN == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    by=st.lists(one_reviewer, max_size=4),
    digest=st.one_of(st.none(), st.text(max_size=64)),
    amount=st.integers(),
)
async def test_forged_votes_of_one_reviewer_never_make_a_quorum(
    by: list[str], digest: str | None, amount: int
) -> None:
    """Approved by the framework, votes planted in its state: one reviewer is never two."""
    SHELL_RAN.clear()
    args = {"amount": amount}
    good = toolguard_review.args_digest("wire_money", args)
    record = {"required": 2, "by": by, "digest": digest if digest is not None else good}
    ctx = _ctx()
    ctx.tool_call_approved = True
    ctx.tool_call_metadata = {"toolguard": {"approvals": record}}
    tools = await RULED_PYDANTIC.get_tools(ctx)
    with pytest.raises(ApprovalRequired):
        await RULED_PYDANTIC.call_tool("wire_money", dict(args), ctx, tools["wire_money"])
    text = json.dumps(args)
    agents_ctx = ToolContext(
        context={openai_agents.VOTES_KEY: {"c1": record}},
        tool_name="wire_money",
        tool_call_id="c1",
        tool_arguments=text,
    )
    agents_ctx.approve_tool(_approval_item("wire_money", text))
    with pytest.raises(ApprovalRequiredError):
        await RULED_AGENTS["wire_money"].on_invoke_tool(agents_ctx, text)
    assert SHELL_RAN == []


def _approval_item(name: str, arguments: str) -> ToolApprovalItem:
    raw = ResponseFunctionToolCall(
        type="function_call", call_id="c1", name=name, arguments=arguments
    )
    return ToolApprovalItem(agent=Agent(name="a"), raw_item=raw, tool_name=name)
