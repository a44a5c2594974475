"""toolguard.integrations.pydantic_ai with the real Pydantic AI agent loop and a FunctionModel."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.usage import RunUsage

from tests.helpers import MCP_SERVER_TABLE
from toolguard import (
    REJECTED_BY_USER_MESSAGE,
    AlreadyResumedError,
    ApprovalPolicy,
    Classifier,
    InvalidReviewDecisionError,
    MemoryStore,
    NoPendingReviewError,
    QuorumReviewerError,
    Rules,
    Tool,
    UnsupportedPolicyError,
    guard,
    requires_approval,
)
from toolguard._core.records import call_digest
from toolguard._enforce.actions import EXPIRED_BEFORE_START, TAMPERED
from toolguard.integrations import pydantic_ai as tg
from toolguard.text import set_language

SEND_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}


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


class Script:
    """A FunctionModel that answers from a list and records what the model was sent."""

    def __init__(self, *responses: ModelResponse) -> None:
        self.responses = list(responses)
        self.requests: list[list[ModelMessage]] = []
        self.infos: list[AgentInfo] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        self.infos.append(info)
        if not self.responses:
            return ModelResponse(parts=[TextPart("out of script")])
        return self.responses.pop(0)

    def model(self) -> FunctionModel:
        return FunctionModel(self)


def calls(*items: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in items]
    )


def text(value: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(value)])


def returns(messages: Sequence[ModelMessage]) -> list[tuple[str, str, Any, str]]:
    """Every tool result in ``messages``: (call id, tool, content, outcome)."""
    return [
        (part.tool_call_id, part.tool_name, part.content, part.outcome)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def call_parts(messages: Sequence[ModelMessage]) -> list[tuple[str, str, Any]]:
    return [
        (part.tool_call_id, part.tool_name, part.args)
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]


def agent_for(script: Script, tools: Any) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        script.model(),
        toolsets=[tg.toolset(tools)],
        output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
    )


async def paused_send(counter: Counter, script: Script) -> tuple[Agent[Any, Any], Any]:
    """Run a turn where the model searches (safe) and sends (guarded)."""
    agent = agent_for(script, counter.tools())
    result = await agent.run("Mail Alice that the meeting moved to 10")
    return agent, result


# --------------------------------------------------------------------------- pausing


async def test_safe_tool_runs_at_once_and_guarded_call_pauses_with_spec_payload() -> None:
    """The classifier guards send_email: search runs, the send becomes a deferred approval."""
    counter = Counter()
    script = Script(
        calls(("c1", "search_contacts", {"query": "alice"}), ("c2", "send_email", SEND_ARGS)),
        text("Sent."),
    )
    _, result = await paused_send(counter, script)
    assert counter.calls == [("search_contacts", {"query": "alice"})]
    assert isinstance(result.output, DeferredToolRequests)
    assert tg.pending_review(result.output).model_dump() == {
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
    assert returns(result.all_messages()) == [
        ("c1", "search_contacts", ["alice@example.com"], "success")
    ]


async def test_tools_keep_names_descriptions_and_parameter_descriptions() -> None:
    """The model sees toolguard's schema, parameter descriptions included."""
    counter = Counter()
    toolset = guard(counter.tools())
    script = Script(text("Nothing to do."))
    await agent_for(script, toolset).run("hi")
    seen = {
        t.name: (t.description, t.parameters_json_schema) for t in script.infos[0].function_tools
    }
    assert seen == {name: (tool.description, tool.parameters) for name, tool in toolset.items()}
    assert seen["search_contacts"][1]["properties"]["query"]["description"] == "words to look for."


async def test_description_override_reaches_the_payload() -> None:
    """requires_approval(description=...) is what the reviewer reads, not the default text."""
    calls_made: list[str] = []

    @requires_approval(description="Wire money to another account")
    def pay(amount: int) -> str:
        calls_made.append("pay")
        return "paid"

    script = Script(calls(("p1", "pay", {"amount": 5})), text("ok"))
    result = await agent_for(script, [pay]).run("pay 5")
    assert tg.pending_review(result.output).model_dump() == {
        "action_requests": [
            {"name": "pay", "args": {"amount": 5}, "description": "Wire money to another account"}
        ],
        "review_configs": [
            {"action_name": "pay", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert calls_made == []


async def test_when_predicate_sees_the_actual_arguments() -> None:
    """when= decides per call: a small transfer runs at once, a large one pauses."""
    ran: list[int] = []

    @requires_approval(when=lambda args: args["amount"] > 1000)
    def transfer(amount: int, to: str) -> str:
        ran.append(amount)
        return f"moved {amount}"

    script = Script(
        calls(
            ("t1", "transfer", {"amount": 10, "to": "bob"}),
            ("t2", "transfer", {"amount": 5000, "to": "eve"}),
        ),
        text("ok"),
    )
    agent = agent_for(script, [transfer])
    result = await agent.run("two transfers")
    assert ran == [10]
    review = tg.pending_review(result.output)
    assert [(a.name, a.args) for a in review.action_requests] == [
        ("transfer", {"amount": 5000, "to": "eve"})
    ]
    done = await agent.run(
        message_history=result.all_messages(),
        deferred_tool_results=tg.deferred_results(result.output, [{"type": "approve"}]),
    )
    assert (ran, done.output) == ([10, 5000], "ok")


async def test_a_failing_predicate_asks_a_human() -> None:
    """A when= predicate that raises cannot judge the call: it pauses (fail closed)."""

    @requires_approval(when=lambda args: args["n"] < 1 / 0)
    def risky(n: int) -> str:
        return "ran"

    result = await agent_for(Script(calls(("r1", "risky", {"n": 1}))), [risky]).run("go")
    assert [a.name for a in tg.pending_review(result.output).action_requests] == ["risky"]


async def test_bad_arguments_get_an_error_result_without_review() -> None:
    """Arguments that break the schema: failed result naming the field, nothing pauses or runs."""
    counter = Counter()
    script = Script(
        calls(("c1", "send_email", {"to": "alice@example.com", "subject": 3})), text("Sorry.")
    )
    _, result = await paused_send(counter, script)
    assert result.output == "Sorry."
    assert counter.calls == []
    assert returns(script.requests[1]) == [
        (
            "c1",
            "send_email",
            (
                "Invalid arguments for tool `send_email`: 'subject': Input should be a valid"
                " string; 'body': Field required"
            ),
            "failed",
        )
    ]


async def test_a_tool_that_raises_is_a_failed_result() -> None:
    """The exception text reaches the model as a failed result, like toolguard's runner."""

    def search_disk(query: str) -> str:
        raise OSError("disk gone")

    script = Script(calls(("s1", "search_disk", {"query": "x"})), text("I could not."))
    result = await agent_for(script, [search_disk]).run("find x")
    assert result.output == "I could not."
    assert returns(script.requests[1]) == [
        ("s1", "search_disk", "Tool `search_disk` failed: OSError: disk gone", "failed")
    ]


# --------------------------------------------------------------------------- decisions


async def test_approve_runs_the_body_exactly_once() -> None:
    """Approve: the call runs once; the model reads its result."""
    counter = Counter()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Sent."))
    agent, result = await paused_send(counter, script)
    results = tg.deferred_results(result.output, [{"type": "approve"}])
    assert results.approvals == {"c2": ToolApproved()}
    done = await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert done.output == "Sent."
    assert counter.calls == [("send_email", SEND_ARGS)]
    assert returns(script.requests[-1]) == [
        ("c2", "send_email", "sent to alice@example.com", "success")
    ]


async def test_reject_reason_reaches_the_model_and_nothing_runs() -> None:
    """Reject with a reason: the model's next request carries exactly that reason."""
    counter = Counter()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Not sent."))
    agent, result = await paused_send(counter, script)
    results = tg.deferred_results(
        result.output, [{"type": "reject", "message": "Alice is on leave"}]
    )
    assert results.approvals == {"c2": ToolDenied("Alice is on leave")}
    await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert counter.calls == []
    assert returns(script.requests[-1]) == [("c2", "send_email", "Alice is on leave", "denied")]


async def test_reject_without_reason_sends_the_spec_constant() -> None:
    counter = Counter()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Not sent."))
    agent, result = await paused_send(counter, script)
    results = tg.deferred_results(result.output, [{"type": "reject", "message": ""}])
    await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert counter.calls == []
    assert returns(script.requests[-1]) == [
        ("c2", "send_email", REJECTED_BY_USER_MESSAGE, "denied")
    ]


async def test_edit_runs_the_edited_arguments_and_the_history_shows_them() -> None:
    """Edit: the body runs once with the edited args; the call part is replaced in the history."""
    counter = Counter()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Sent."))
    agent, result = await paused_send(counter, script)
    edited = {**SEND_ARGS, "to": "bob@example.com"}
    results = tg.deferred_results(
        result.output,
        [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}],
    )
    assert results.approvals == {"c2": ToolApproved(override_args=edited)}
    done = await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert counter.calls == [("send_email", edited)]
    assert call_parts(script.requests[-1]) == [("c2", "send_email", edited)]
    assert call_parts(done.all_messages()) == [("c2", "send_email", edited)]
    assert returns(script.requests[-1]) == [
        ("c2", "send_email", "sent to bob@example.com", "success")
    ]


async def test_edit_with_arguments_that_break_the_schema_does_not_run() -> None:
    counter = Counter()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Oops."))
    agent, result = await paused_send(counter, script)
    results = tg.deferred_results(
        result.output,
        [{"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 7}}}],
    )
    await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert counter.calls == []
    assert returns(script.requests[-1]) == [
        (
            "c2",
            "send_email",
            (
                "Invalid arguments for tool `send_email`: 'to': Input should be a valid string;"
                " 'subject': Field required; 'body': Field required"
            ),
            "failed",
        )
    ]


async def test_edit_to_another_tool_is_refused() -> None:
    """Pydantic AI cannot switch an approved call to another tool: a clear error, nothing built."""
    counter = Counter()
    _, result = await paused_send(counter, Script(calls(("c2", "send_email", SEND_ARGS))))
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.deferred_results(
            result.output,
            [
                {
                    "type": "edit",
                    "edited_action": {"name": "search_contacts", "args": {"query": "x"}},
                }
            ],
        )
    assert str(caught.value) == (
        "An edit cannot switch `send_email` to another tool (`search_contacts`) in Pydantic AI."
        " Edit the arguments of `send_email`, or reject the call."
    )


@pytest.mark.parametrize(
    ("decisions", "error"),
    [
        ([], "Expected 1 decision (one per action), got 0"),
        (
            [{"type": "postpone"}],
            "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
        ),
        ([{"type": "edit"}], "An 'edit' decision must include 'edited_action'"),
        ("approve", "'decisions' must be a list of decision objects, got str"),
    ],
)
async def test_decisions_are_validated_with_spec_texts(decisions: Any, error: str) -> None:
    counter = Counter()
    _, result = await paused_send(counter, Script(calls(("c2", "send_email", SEND_ARGS))))
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.deferred_results(result.output, decisions)
    assert str(caught.value) == error


def test_nothing_to_decide_is_no_pending_review() -> None:
    with pytest.raises(NoPendingReviewError) as caught:
        tg.deferred_results(DeferredToolRequests(), [])
    assert str(caught.value) == "There is no action awaiting approval in this conversation"


async def test_several_approvals_are_decided_in_order() -> None:
    """Two guarded calls: one approved, one rejected; each gets its own outcome."""
    counter = Counter()
    other = {**SEND_ARGS, "to": "carol@example.com"}
    script = Script(
        calls(("c1", "send_email", SEND_ARGS), ("c2", "send_email", other)), text("Done.")
    )
    agent, result = await paused_send(counter, script)
    review = tg.pending_review(result.output)
    assert [a.args["to"] for a in review.action_requests] == [
        "alice@example.com",
        "carol@example.com",
    ]
    results = tg.deferred_results(
        result.output, [{"type": "approve"}, {"type": "reject", "message": "not Carol"}]
    )
    await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert counter.calls == [("send_email", SEND_ARGS)]
    assert sorted(returns(script.requests[-1])) == [
        ("c1", "send_email", "sent to alice@example.com", "success"),
        ("c2", "send_email", "not Carol", "denied"),
    ]


# --------------------------------------------------------------------------- serialized state


async def test_approve_after_a_message_history_round_trip() -> None:
    """History and requests stored as JSON, loaded in a fresh agent: approve runs once."""
    counter = Counter()
    script = Script(
        calls(("c1", "search_contacts", {"query": "alice"}), ("c2", "send_email", SEND_ARGS)),
        text("Sent."),
    )
    _, result = await paused_send(counter, script)
    stored_history = ModelMessagesTypeAdapter.dump_json(result.all_messages())
    requests_adapter = TypeAdapter(DeferredToolRequests)
    stored_requests = requests_adapter.dump_json(result.output)

    history = ModelMessagesTypeAdapter.validate_json(stored_history)
    requests = requests_adapter.validate_json(stored_requests)
    assert tg.pending_review(requests) == tg.pending_review(result.output)
    fresh = agent_for(script, counter.tools())
    done = await fresh.run(
        message_history=history,
        deferred_tool_results=tg.deferred_results(requests, [{"type": "approve"}]),
    )
    assert done.output == "Sent."
    assert counter.calls == [("search_contacts", {"query": "alice"}), ("send_email", SEND_ARGS)]


# --------------------------------------------------------------------------- no bypass


def run_context(*, approved: bool, metadata: Any = None) -> RunContext[None]:
    return RunContext(
        deps=None,
        model=FunctionModel(Script()),
        usage=RunUsage(),
        tool_call_id="x1",
        tool_name="send_email",
        tool_call_approved=approved,
        tool_call_metadata=metadata,
    )


async def test_calling_the_toolset_directly_never_runs_a_guarded_body() -> None:
    """call_tool without Pydantic AI's approval raises ApprovalRequired; the body does not run.

    An approval without toolguard's review of that call (no metadata, or the
    review of other arguments) runs nothing either.
    """
    counter = Counter()
    toolset = tg.toolset(counter.tools())
    ctx = run_context(approved=False)
    tools = await toolset.get_tools(ctx)
    with pytest.raises(ApprovalRequired) as caught:
        await toolset.call_tool("send_email", dict(SEND_ARGS), ctx, tools["send_email"])
    assert caught.value.metadata is not None
    own = caught.value.metadata["toolguard"]
    review_id = own["review_id"]
    assert own == {
        "description": None,
        "allowed_decisions": ["approve", "edit", "reject"],
        "review_id": review_id,
        "asked_at": own["asked_at"],
        "digest": call_digest("send_email", SEND_ARGS, review_id=review_id),
    }
    assert counter.calls == []
    assert await toolset.call_tool(
        "search_contacts", {"query": "a"}, ctx, tools["search_contacts"]
    ) == ["alice@example.com"]
    unbound = run_context(approved=True)
    with pytest.raises(ToolFailed) as refused:
        await toolset.call_tool("send_email", dict(SEND_ARGS), unbound, tools["send_email"])
    assert refused.value.message == (
        "This approved call carries no toolguard review, so it cannot be matched to the call the"
        " reviewer approved: build the results with deferred_results(). It was not executed."
    )
    other = run_context(approved=True, metadata=caught.value.metadata)
    with pytest.raises(ToolFailed) as refused:
        await toolset.call_tool(
            "send_email", {**SEND_ARGS, "to": "eve@example.com"}, other, tools["send_email"]
        )
    assert refused.value.message == TAMPERED
    assert counter.calls == [("search_contacts", {"query": "a"})]
    approved = run_context(approved=True, metadata=caught.value.metadata)
    assert (
        await toolset.call_tool("send_email", dict(SEND_ARGS), approved, tools["send_email"])
        == "sent to alice@example.com"
    )
    assert counter.calls == [("search_contacts", {"query": "a"}), ("send_email", SEND_ARGS)]


def test_toolset_takes_a_toolset_with_its_own_classifier() -> None:
    """A Toolset built with a custom classifier keeps its classification."""
    counter = Counter()
    toolset = guard(counter.tools(), classifier=Classifier(always=["search_contacts"]))
    built = tg.toolset(toolset, id="mail")
    assert (built.id, built.tools.guarded) == ("mail", ["search_contacts", "send_email"])


def test_results_are_json_for_pydantic_ai() -> None:
    """The DeferredToolResults we build serialize with Pydantic AI's own types."""
    requests = DeferredToolRequests(
        approvals=[ToolCallPart("send_email", json.dumps(SEND_ARGS), tool_call_id="c9")]
    )
    results = tg.deferred_results(requests, [{"type": "reject"}])
    assert TypeAdapter(DeferredToolResults).dump_python(results, mode="json")["approvals"] == {
        "c9": {"message": REJECTED_BY_USER_MESSAGE, "kind": "tool-denied"}
    }
    assert tg.pending_review(requests).action_requests[0].args == SEND_ARGS


def test_import_without_pydantic_ai_names_the_extra() -> None:
    """Without Pydantic AI installed the module says which extra to install."""
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pydantic_ai':\n"
        "            raise ImportError('blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import toolguard.integrations.pydantic_ai\n"
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
            "toolguard.integrations.pydantic_ai needs Pydantic AI:"
            ' pip install "toolguard-hitl[pydantic-ai]"\n'
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproveOrReject(ApprovalPolicy):
    """A policy that lets the reviewer approve or reject only."""

    allowed_decisions: tuple[str, ...] = ("approve", "reject")


async def test_the_payload_keeps_the_tools_allowed_decisions() -> None:
    """review_configs carry the tool policy's allowed_decisions, not the framework's default."""

    def wipe_disk(disk: str) -> str:
        return "wiped"

    guarded = Tool(wipe_disk, approval=ApproveOrReject())
    script = Script(calls(("w1", "wipe_disk", {"disk": "sda"})))
    result = await agent_for(script, [guarded]).run("wipe")
    assert tg.pending_review(result.output).model_dump()["review_configs"] == [
        {"action_name": "wipe_disk", "allowed_decisions": ["approve", "reject"]}
    ]


async def test_edit_to_another_tool_is_refused_in_indonesian_too() -> None:
    """The new catalog text has its Indonesian entry."""
    counter = Counter()
    _, result = await paused_send(counter, Script(calls(("c2", "send_email", SEND_ARGS))))
    set_language("id")
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.deferred_results(
            result.output,
            [{"type": "edit", "edited_action": {"name": "search_contacts", "args": {}}}],
        )
    assert str(caught.value) == (
        "Edit tidak bisa mengganti `send_email` dengan tool lain (`search_contacts`) di"
        " Pydantic AI. Ubah argumen `send_email`, atau tolak panggilannya."
    )


def test_a_call_whose_arguments_cannot_be_shown_is_not_put_to_a_reviewer() -> None:
    """Arguments that are not a JSON object: refused with the fix, never shown as ``{}``."""
    requests = DeferredToolRequests(
        approvals=[ToolCallPart("send_email", "{not json", tool_call_id="c7")]
    )
    with pytest.raises(ValueError, match="not a JSON") as caught:
        tg.pending_review(requests)
    assert str(caught.value) == (
        "The arguments of the call 'c7' to `send_email` are not a JSON object a reviewer can be"
        " shown. Deny it with ToolDenied instead of reviewing it."
    )


# ------------------------------------------------------------- rules, quorum, secrets, once only


class Shell:
    """A shell tool whose body records every command it really ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        ran = self.ran

        def run_shell(command: str) -> str:
            """Run a shell command.

            Args:
                command: the command line.
            """
            ran.append(command)
            return f"ran {command}"

        def search_logs(query: str) -> list[str]:
            """Search the logs.

            Args:
                query: words to look for.
            """
            ran.append(f"search {query}")
            return [query]

        self.tools = [run_shell, search_logs]


SHELL_RULES = Rules(
    allow=['run_shell(command="ls *")'], ask=["search_logs"], deny=['run_shell(command="rm *")']
)
DENIED_RM = (
    'The call to `run_shell` is denied by the rule `deny run_shell(command="rm *")`.'
    " It was not executed."
)


async def test_rules_deny_ask_and_allow_like_the_runner() -> None:
    """deny: a failed result, never a pause or a run; ask: a review; allow: runs at once."""
    shell = Shell()
    script = Script(
        calls(
            ("r1", "run_shell", {"command": "rm -rf /tmp/x"}),
            ("r2", "run_shell", {"command": "ls /tmp"}),
            ("r3", "search_logs", {"query": "error"}),
        ),
        text("ok"),
    )
    agent = agent_for(script, guard(shell.tools, rules=SHELL_RULES))
    result = await agent.run("clean up")
    assert shell.ran == ["ls /tmp"]
    assert sorted(returns(result.all_messages())) == [
        ("r1", "run_shell", DENIED_RM, "failed"),
        ("r2", "run_shell", "ran ls /tmp", "success"),
    ]
    assert tg.pending_review(result.output).model_dump() == {
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


async def test_an_edit_cannot_route_around_a_deny_rule() -> None:
    """An approved edit whose arguments a deny rule matches is refused when it would run."""
    shell = Shell()
    rules = Rules(deny=['run_shell(command="rm *")'])
    script = Script(calls(("r1", "run_shell", {"command": "du -sh"})), text("ok"))
    agent = agent_for(script, guard(shell.tools, rules=rules))
    result = await agent.run("disk use")
    edit = {"type": "edit", "edited_action": {"name": "run_shell", "args": {"command": "rm -r /"}}}
    results = tg.deferred_results(result.output, [edit])
    await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert shell.ran == []
    assert returns(script.requests[-1]) == [("r1", "run_shell", DENIED_RM, "failed")]


def quorum_tools(ran: list[tuple[str, str]]) -> list[Any]:
    @requires_approval(approvals=2, redact=["token"])
    def deploy(env: str, token: str) -> str:
        """Deploy a release.

        Args:
            env: where to deploy.
            token: the deploy key.
        """
        ran.append((env, token))
        return f"deployed {env} with {token}"

    return [deploy]


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


async def test_a_quorum_runs_only_after_two_distinct_named_reviewers() -> None:
    """One approval re-pauses with the progress; anonymous and repeated votes are refused."""
    ran: list[tuple[str, str]] = []
    script = Script(calls(("d1", "deploy", DEPLOY_ARGS)), text("Deployed."))
    agent = agent_for(script, quorum_tools(ran))
    first = await agent.run("deploy")
    assert tg.pending_review(first.output).model_dump() == deploy_review("prod", 0, [])
    with pytest.raises(QuorumReviewerError) as anonymous:
        tg.deferred_results(first.output, [{"type": "approve"}])
    assert str(anonymous.value) == (
        "Action 'deploy' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=tg.deferred_results(
            first.output, [{"type": "approve"}], reviewer="alice"
        ),
    )
    assert ran == []
    assert isinstance(second.output, DeferredToolRequests)
    assert tg.pending_review(second.output).model_dump() == deploy_review("prod", 1, ["alice"])
    with pytest.raises(QuorumReviewerError) as again:
        tg.deferred_results(second.output, [{"type": "approve"}], reviewer=" ALICE ")
    assert str(again.value) == (
        "Reviewer ' ALICE ' already approved action 'deploy' (1 of 2 approvals); another"
        " reviewer must approve it. Nothing was changed."
    )
    done = await agent.run(
        message_history=second.all_messages(),
        deferred_tool_results=tg.deferred_results(
            second.output, [{"type": "approve"}], reviewer="bob"
        ),
    )
    assert (done.output, ran) == ("Deployed.", [("prod", "s3cr3t-deploy-key")])
    assert returns(script.requests[-1]) == [
        ("d1", "deploy", "deployed prod with [redacted]", "success")
    ]


async def test_a_plain_tool_approved_never_counts_as_a_quorum() -> None:
    """ToolApproved() built without toolguard's votes re-pauses a quorum call; nothing runs."""
    ran: list[tuple[str, str]] = []
    script = Script(calls(("d1", "deploy", DEPLOY_ARGS)), text("Deployed."))
    agent = agent_for(script, quorum_tools(ran))
    first = await agent.run("deploy")
    again = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"d1": ToolApproved()}),
    )
    assert ran == []
    assert tg.pending_review(again.output).model_dump() == deploy_review("prod", 0, [])


async def test_an_edit_restarts_the_quorum_and_keeps_a_redacted_secret() -> None:
    """An edit is the editor's vote for the new arguments; "[redacted]" keeps the real key."""
    ran: list[tuple[str, str]] = []
    script = Script(calls(("d1", "deploy", DEPLOY_ARGS)), text("Deployed."))
    agent = agent_for(script, quorum_tools(ran))
    first = await agent.run("deploy")
    edit = {
        "type": "edit",
        "edited_action": {"name": "deploy", "args": {"env": "staging", "token": "[redacted]"}},
    }
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=tg.deferred_results(first.output, [edit], reviewer="alice"),
    )
    assert ran == []
    assert tg.pending_review(second.output).model_dump() == deploy_review("staging", 1, ["alice"])
    await agent.run(
        message_history=second.all_messages(),
        deferred_tool_results=tg.deferred_results(
            second.output, [{"type": "approve"}], reviewer="carol"
        ),
    )
    assert ran == [("staging", "s3cr3t-deploy-key")]


async def test_redacted_arguments_never_reach_the_reviewer_and_run_for_real() -> None:
    """pending_review and toolguard's metadata show "[redacted]"; approve runs the real value."""
    ran: list[str] = []

    @requires_approval(redact=["password"])
    def login(user: str, password: str) -> str:
        """Log in."""
        ran.append(password)
        return f"welcome {user}"

    script = Script(calls(("l1", "login", {"user": "ann", "password": "hunter2-long"})), text("ok"))
    agent = agent_for(script, [login])
    result = await agent.run("log in")
    assert tg.pending_review(result.output).model_dump()["action_requests"] == [
        {
            "name": "login",
            "args": {"user": "ann", "password": "[redacted]"},
            "description": "Tool `login` is awaiting approval",
        }
    ]
    own = result.output.metadata["l1"]["toolguard"]
    assert own == {
        "description": None,
        "allowed_decisions": ["approve", "edit", "reject"],
        "redacted": ["password"],
        "review_id": own["review_id"],
        "asked_at": own["asked_at"],
        "digest": own["digest"],  # a SHA-256 hex digest, not the value
    }
    assert "hunter2" not in json.dumps(result.output.metadata)
    await agent.run(
        message_history=result.all_messages(),
        deferred_tool_results=tg.deferred_results(result.output, [{"type": "approve"}]),
    )
    assert ran == ["hunter2-long"]


async def test_claims_run_an_approved_call_once_across_two_resumes() -> None:
    """Two processes resume the same stored pause: the first runs it, the second is refused."""
    counter = Counter()
    store = MemoryStore()
    script = Script(calls(("c2", "send_email", SEND_ARGS)), text("Sent."), text("Sent."))

    def agent() -> Agent[None, str | DeferredToolRequests]:
        return Agent(
            script.model(),
            toolsets=[tg.toolset(counter.tools(), claims=store)],
            output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
        )

    paused = await agent().run("mail")
    history = ModelMessagesTypeAdapter.dump_json(paused.all_messages())
    requests = TypeAdapter(DeferredToolRequests).dump_json(paused.output)
    [review_id] = [m["toolguard"]["review_id"] for m in paused.output.metadata.values()]
    outcomes: list[Any] = []
    for _ in range(2):  # each resume loads the stored pause, as another process would
        stored = TypeAdapter(DeferredToolRequests).validate_json(requests)
        try:
            done = await agent().run(
                message_history=ModelMessagesTypeAdapter.validate_json(history),
                deferred_tool_results=tg.deferred_results(stored, [{"type": "approve"}]),
            )
        except AlreadyResumedError as exc:
            outcomes.append(str(exc))
        else:
            outcomes.append(done.output)
    assert outcomes == [
        "Sent.",
        f"The paused turn {review_id} was already resumed or closed; its tools are not run again.",
    ]
    assert counter.calls == [("send_email", SEND_ARGS)]


def test_an_approve_with_a_standing_grant_is_refused() -> None:
    """A grant needs a conversation's state: refused with the alternative, never dropped."""
    requests = DeferredToolRequests(
        approvals=[ToolCallPart("send_email", json.dumps(SEND_ARGS), tool_call_id="c9")]
    )
    grant = {"type": "approve", "grant": {"scope": "thread", "match": "tool"}}
    with pytest.raises(InvalidReviewDecisionError) as caught:
        tg.deferred_results(requests, [grant])
    assert str(caught.value) == (
        "The approval of `send_email` carries a standing grant, which Pydantic AI cannot keep:"
        " grants live in a conversation's state. Use toolguard.ReviewedChat (or its HTTP"
        " service) for grants, or approve without 'grant'."
    )


# --------------------------------------------------------------------------- deadlines, binding


def deleter(ran: list[str], *, ttl: float | None = None) -> Callable[..., Any]:
    @requires_approval(ttl=ttl)
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return delete_file


async def test_an_approval_past_the_deadline_runs_nothing() -> None:
    """Approved after the tool's ttl: the model reads the runner's expiry text; no body ran."""
    ran: list[str] = []
    script = Script(calls(("d1", "delete_file", {"path": "/srv/a"})), text("Could not."))
    agent = agent_for(script, [deleter(ran, ttl=0.2)])
    paused = await agent.run("delete /srv/a")
    history = ModelMessagesTypeAdapter.dump_json(paused.all_messages())
    requests = TypeAdapter(DeferredToolRequests).dump_json(paused.output)
    await anyio.sleep(0.3)
    stored = TypeAdapter(DeferredToolRequests).validate_json(requests)
    done = await agent.run(
        message_history=ModelMessagesTypeAdapter.validate_json(history),
        deferred_tool_results=tg.deferred_results(stored, [{"type": "approve"}]),
    )
    assert done.output == "Could not."
    assert returns(script.requests[-1]) == [("d1", "delete_file", EXPIRED_BEFORE_START, "failed")]
    assert EXPIRED_BEFORE_START == (
        "The review of this action expired before the approved call could start."
        " It was not executed."
    )
    assert ran == []


async def test_an_approval_in_time_runs_once() -> None:
    """Approved well within the tool's ttl: the body runs once."""
    ran: list[str] = []
    script = Script(calls(("d1", "delete_file", {"path": "/srv/a"})), text("Deleted."))
    agent = agent_for(script, [deleter(ran, ttl=60)])
    paused = await agent.run("delete /srv/a")
    done = await agent.run(
        message_history=paused.all_messages(),
        deferred_tool_results=tg.deferred_results(paused.output, [{"type": "approve"}]),
    )
    assert done.output == "Deleted."
    assert returns(script.requests[-1]) == [("d1", "delete_file", "deleted /srv/a", "success")]
    assert ran == ["/srv/a"]


async def test_a_quorum_paused_again_keeps_when_it_first_asked() -> None:
    """Each round of a quorum's votes keeps the review id and the time the call first asked."""
    ran: list[str] = []

    @requires_approval(approvals=2, ttl=60)
    def wire(amount: int) -> str:
        """Wire money."""
        ran.append(str(amount))
        return "wired"

    script = Script(calls(("w1", "wire", {"amount": 5})), text("Wired."))
    agent = agent_for(script, [wire])
    first = await agent.run("wire 5")
    second = await agent.run(
        message_history=first.all_messages(),
        deferred_tool_results=tg.deferred_results(
            first.output, [{"type": "approve"}], reviewer="alice"
        ),
    )
    before, after = (
        first.output.metadata["w1"]["toolguard"],
        second.output.metadata["w1"]["toolguard"],
    )
    assert (after["review_id"], after["asked_at"], after["digest"]) == (
        before["review_id"],
        before["asked_at"],
        before["digest"],
    )
    done = await agent.run(
        message_history=second.all_messages(),
        deferred_tool_results=tg.deferred_results(
            second.output, [{"type": "approve"}], reviewer="bob"
        ),
    )
    assert done.output == "Wired."
    assert ran == ["5"]


async def test_an_approval_resumed_with_another_run_runs_nothing() -> None:
    """Two runs pause with the same call id; A's approval on B's history runs nothing.

    The model reads the runner's text for an approval of another call, as a
    failed result; B's own approval then runs B's call once. The same holds
    when both runs propose the very same arguments: an approval is bound to
    the run that asked.
    """
    ran: list[str] = []
    script = Script(
        calls(("c1", "delete_file", {"path": "/srv/a"})),
        calls(("c1", "delete_file", {"path": "/srv/b"})),
        text("Refused."),
        text("Deleted."),
    )
    agent = agent_for(script, [deleter(ran)])
    run_a = await agent.run("delete /srv/a")
    run_b = await agent.run("delete /srv/b")
    foreign = tg.deferred_results(run_a.output, [{"type": "approve"}])
    done = await agent.run(message_history=run_b.all_messages(), deferred_tool_results=foreign)
    assert done.output == "Refused."
    assert returns(script.requests[-1]) == [("c1", "delete_file", TAMPERED, "failed")]
    assert ran == []
    own = tg.deferred_results(run_b.output, [{"type": "approve"}])
    done = await agent.run(message_history=run_b.all_messages(), deferred_tool_results=own)
    assert done.output == "Deleted."
    assert ran == ["/srv/b"]

    same = Script(
        calls(("c1", "delete_file", {"path": "/srv/a"})),
        calls(("c1", "delete_file", {"path": "/srv/a"})),
        text("Refused."),
    )
    twin = agent_for(same, [deleter(ran)])
    run_a, run_b = await twin.run("delete /srv/a"), await twin.run("delete /srv/a")
    foreign = tg.deferred_results(run_a.output, [{"type": "approve"}])
    done = await twin.run(message_history=run_b.all_messages(), deferred_tool_results=foreign)
    assert returns(same.requests[-1]) == [("c1", "delete_file", TAMPERED, "failed")]
    assert ran == ["/srv/b"]


async def test_an_edited_approval_of_another_run_runs_nothing() -> None:
    """An edit made on run A's review, applied to run B: neither the edit nor B's call runs."""
    ran: list[str] = []
    script = Script(
        calls(("c1", "delete_file", {"path": "/srv/a"})),
        calls(("c1", "delete_file", {"path": "/srv/b"})),
        text("Refused."),
    )
    agent = agent_for(script, [deleter(ran)])
    run_a, run_b = await agent.run("delete /srv/a"), await agent.run("delete /srv/b")
    edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "/srv/x"}}}
    foreign = tg.deferred_results(run_a.output, [edit])
    await agent.run(message_history=run_b.all_messages(), deferred_tool_results=foreign)
    assert returns(script.requests[-1]) == [("c1", "delete_file", TAMPERED, "failed")]
    assert ran == []


# --------------------------------------------------------------------------- an MCPToolset


class InMemory:
    """A fastmcp transport to an MCP server object in this process (mcp's in-memory streams)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    @asynccontextmanager
    async def connect_session(
        self, *, transport_options: Any = None, **session_kwargs: Any
    ) -> AsyncIterator[Any]:
        from fastmcp.client.transports.base import TransportOptions
        from mcp.shared.memory import create_client_server_memory_streams

        options = transport_options or TransportOptions()
        server = self.server
        async with (
            create_client_server_memory_streams() as (ours, theirs),
            anyio.create_task_group() as group,
        ):
            group.start_soon(
                lambda: server.run(theirs[0], theirs[1], server.create_initialization_options())
            )
            try:
                async with options.session_class(
                    read_stream=ours[0], write_stream=ours[1], **session_kwargs
                ) as session:
                    yield session
            finally:
                group.cancel_scope.cancel()


def mcp_toolset(log: Path, **options: Any) -> Any:
    """A Pydantic AI MCPToolset over the test MCP server (tests/integrations/mcp_server.py)."""
    pytest.importorskip("fastmcp")
    from fastmcp.client.transports.base import ClientTransport
    from pydantic_ai.mcp import MCPToolset

    from .mcp_server import build_server

    transport = type("InMemoryTransport", (InMemory, ClientTransport), {})(build_server(log))
    return MCPToolset(transport, **options)


def mcp_agent(script: Script, guarded: Any) -> Agent[None, str | DeferredToolRequests]:
    return Agent(
        script.model(),
        toolsets=[guarded],
        output_type=[str, DeferredToolRequests],  # type: ignore[arg-type]
    )


FAIL_ALWAYS = "Tool `fail_always` failed: MCPToolError: no such file: x"


def logged(log: Path) -> list[dict[str, Any]]:
    from .mcp_server import executions

    return executions(log)


async def mcp_paused(tmp_path: Path) -> tuple[Path, Script, Any, Any, Any]:
    """The model reads a file, asks for stats, fails a call and deletes a file (which pauses)."""
    log = tmp_path / "executions.jsonl"
    script = Script(
        calls(
            ("c1", "read_file", {"path": "a"}),
            ("c2", "delete_file", {"path": "d"}),
            ("c3", "stats", {}),
            ("c4", "fail_always", {"path": "x"}),
        ),
        text("Done."),
    )
    guarded = tg.toolset(mcp_toolset(log))
    agent = mcp_agent(script, guarded)
    result = await agent.run("tidy up")
    return log, script, guarded, agent, result


async def test_an_mcp_toolset_runs_read_only_tools_and_defers_the_rest(tmp_path: Path) -> None:
    log, _, guarded, _, result = await mcp_paused(tmp_path)
    assert guarded.tools.table() == MCP_SERVER_TABLE
    assert logged(log) == [
        {"tool": "read_file", "args": {"path": "a"}},
        {"tool": "stats", "args": {}},
        {"tool": "fail_always", "args": {"path": "x"}},
    ]
    assert isinstance(result.output, DeferredToolRequests)
    assert tg.pending_review(result.output).model_dump() == {
        "action_requests": [
            {
                "name": "delete_file",
                "args": {"path": "d"},
                "description": "Tool `delete_file` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert returns(result.all_messages()) == [
        ("c1", "read_file", ["read_file done", {"path": "a"}], "success"),
        ("c3", "stats", {"files": 3}, "success"),
        ("c4", "fail_always", FAIL_ALWAYS, "failed"),
    ]


async def test_an_mcp_call_approved_runs_once(tmp_path: Path) -> None:
    log, script, _, agent, result = await mcp_paused(tmp_path)
    results = tg.deferred_results(result.output, [{"type": "approve"}])
    done = await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert done.output == "Done."
    assert returns(script.requests[-1]) == [
        ("c1", "read_file", ["read_file done", {"path": "a"}], "success"),
        ("c2", "delete_file", ["delete_file done", {"path": "d"}], "success"),
        ("c3", "stats", {"files": 3}, "success"),
        ("c4", "fail_always", FAIL_ALWAYS, "failed"),
    ]
    assert [e for e in logged(log) if e["tool"] == "delete_file"] == [
        {"tool": "delete_file", "args": {"path": "d"}}
    ]


async def test_an_mcp_call_rejected_does_not_run(tmp_path: Path) -> None:
    log, script, _, agent, result = await mcp_paused(tmp_path)
    results = tg.deferred_results(result.output, [{"type": "reject", "message": "Keep it."}])
    done = await agent.run(message_history=result.all_messages(), deferred_tool_results=results)
    assert done.output == "Done."
    assert returns(script.requests[-1]) == [
        ("c1", "read_file", ["read_file done", {"path": "a"}], "success"),
        ("c2", "delete_file", "Keep it.", "denied"),
        ("c3", "stats", {"files": 3}, "success"),
        ("c4", "fail_always", FAIL_ALWAYS, "failed"),
    ]
    assert [e["tool"] for e in logged(log)] == ["read_file", "stats", "fail_always"]


async def test_an_mcp_toolset_honours_the_classifier_rules_and_policies(tmp_path: Path) -> None:
    """never exempts a tool; a deny rule refuses; a policy gives read_file a quorum of two."""
    log = tmp_path / "executions.jsonl"
    script = Script(
        calls(
            ("c1", "read_file", {"path": "a"}),
            ("c2", "purge_cache", {"path": "/cache"}),
            ("c3", "list_files", {"path": "/etc"}),
        ),
        text("Done."),
    )
    guarded = tg.toolset(
        mcp_toolset(log),
        classifier=Classifier(never=["purge_cache"]),
        rules=Rules(deny=['list_files(path="/etc*")']),
        policies={"read_file": ApprovalPolicy(approvals=2)},
    )
    agent = mcp_agent(script, guarded)
    result = await agent.run("tidy up")
    assert logged(log) == [{"tool": "purge_cache", "args": {"path": "/cache"}}]
    denied = (
        'The call to `list_files` is denied by the rule `deny list_files(path="/etc*")`.'
        " It was not executed."
    )
    assert returns(result.all_messages()) == [
        ("c2", "purge_cache", ["purge_cache done", {"path": "/cache"}], "success"),
        ("c3", "list_files", denied, "failed"),
    ]
    assert isinstance(result.output, DeferredToolRequests)
    review = tg.pending_review(result.output).model_dump()
    assert review["review_configs"][0]["approvals"] == {"required": 2, "given": 0, "by": []}
    first = tg.deferred_results(result.output, [{"type": "approve"}], reviewer="ann")
    again = await agent.run(message_history=result.all_messages(), deferred_tool_results=first)
    assert isinstance(again.output, DeferredToolRequests)  # one vote of two: nothing ran
    assert [e["tool"] for e in logged(log)] == ["purge_cache"]
    second = tg.deferred_results(again.output, [{"type": "approve"}], reviewer="bob")
    done = await agent.run(message_history=again.all_messages(), deferred_tool_results=second)
    assert done.output == "Done."
    assert logged(log) == [
        {"tool": "purge_cache", "args": {"path": "/cache"}},
        {"tool": "read_file", "args": {"path": "a"}},
    ]


async def test_what_an_mcp_toolset_cannot_honour_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "executions.jsonl"
    with pytest.raises(UnsupportedPolicyError) as behaviour:
        tg.toolset(mcp_toolset(log, tool_error_behavior="error"))
    assert str(behaviour.value) == (
        "toolguard turns a tool's error into a failed tool result the model reads, so it cannot"
        " honour tool_error_behavior='error': build the MCPToolset with"
        " tool_error_behavior='failed' (or the default) and read the error in the result"
    )
    with pytest.raises(TypeError) as policies:
        tg.toolset(mcp_toolset(log), policies={"read_file": {"approvals": 2}})  # type: ignore[dict-item]
    assert str(policies.value) == (
        "policies must map tool names to toolguard.ApprovalPolicy objects, got dict"
    )
    with pytest.raises(UnsupportedPolicyError) as listed:  # a ToolguardError and a TypeError
        tg.toolset([Counter().tools()[0]], rules=Rules(deny=["search_contacts"]))
    assert str(listed.value) == (
        "classifier=, rules= and policies= are for a Pydantic AI MCPToolset; for other tools pass"
        " toolguard.guard(tools, classifier, rules=...) with @requires_approval on the functions"
    )
    from pydantic_ai.toolsets import FunctionToolset

    with pytest.raises(TypeError) as other:
        tg.toolset(FunctionToolset([Counter().tools()[0]]))
    assert str(other.value) == (
        "toolguard guards a Pydantic AI MCPToolset, not a FunctionToolset: pass the functions"
        " or tools themselves (a list, a mapping or a toolguard.Toolset)"
    )
    typo = tg.toolset(mcp_toolset(log), policies={"read_fiel": ApprovalPolicy()})
    with pytest.raises(ValueError, match=r"^policies name") as unknown:
        await mcp_agent(Script(text("hi")), typo).run("hello")
    assert str(unknown.value) == "policies name tools the MCP server does not list: read_fiel"
    assert logged(log) == []
