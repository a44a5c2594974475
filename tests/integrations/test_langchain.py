"""toolguard.integrations.langchain with LangChain's create_agent, offline (fake chat model)."""

from __future__ import annotations

import time
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import Field

from toolguard import (
    AlreadyResumedError,
    ApprovalRequiredError,
    InvalidReviewDecisionError,
    MemoryStore,
    QuorumReviewerError,
    Rules,
    Toolset,
    guard,
    requires_approval,
)
from toolguard._enforce.actions import EXPIRED_BEFORE_START
from toolguard.integrations import langchain as tg

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
MODES = ["middleware", "tools"]


class FakeModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools and records what it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def model(*turns: AIMessage) -> FakeModel:
    return FakeModel(messages=iter([*turns, AIMessage(content="Done.")]))


def calls(*items: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in items],
    )


class World:
    """Tools that record every real execution, guarded with toolguard."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        ran = self.ran

        def send_email(to: str, subject: str = "") -> str:
            """Send an email.

            Args:
                to: Recipient address.
                subject: Subject line.
            """
            ran.append(("send_email", {"to": to, "subject": subject}))
            return f"sent to {to}"

        def search_mail(query: str) -> list[str]:
            """Search the mailbox.

            Args:
                query: Words to look for.
            """
            ran.append(("search_mail", {"query": query}))
            return [f"mail about {query}"]

        @requires_approval(when=lambda args: args["amount"] > 1000, description="Check the amount")
        async def transfer(amount: float, to: str) -> dict[str, Any]:
            """Transfer money.

            Args:
                amount: Euros.
                to: Account.
            """
            ran.append(("transfer", {"amount": amount, "to": to}))
            return {"ok": True, "amount": amount}

        self.toolset: Toolset = guard([send_email, search_mail, transfer])

    def agent(self, mode: str, chat_model: FakeModel, saver: InMemorySaver) -> Any:
        middleware = [tg.middleware(self.toolset)] if mode == "middleware" else []
        return create_agent(
            chat_model, tools=tg.tools(self.toolset), middleware=middleware, checkpointer=saver
        )


@pytest.fixture
def world() -> World:
    return World()


def payload(*actions: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    return {
        "action_requests": [{"name": n, "args": a, "description": d} for n, a, d in actions],
        "review_configs": [
            {"action_name": n, "allowed_decisions": ["approve", "edit", "reject"]}
            for n, _, _ in actions
        ],
    }


def tool_messages(result: dict[str, Any]) -> list[tuple[str, Any, str]]:
    return [
        (m.tool_call_id, m.content, m.status)
        for m in result["messages"]
        if isinstance(m, ToolMessage)
    ]


def start(world: World, mode: str, *turns: AIMessage) -> tuple[InMemorySaver, dict[str, Any]]:
    saver = InMemorySaver()
    agent = world.agent(mode, model(*turns), saver)
    return saver, agent.invoke({"messages": [HumanMessage("go")]}, CONFIG)


def resume(world: World, mode: str, saver: InMemorySaver, answer: Any) -> tuple[FakeModel, Any]:
    """Resume with a NEW agent object on the same checkpointer (a round trip)."""
    chat_model = model()
    agent = world.agent(mode, chat_model, saver)
    return chat_model, agent.invoke(Command(resume=answer), CONFIG)


def test_the_tools_keep_names_descriptions_and_parameter_descriptions(world: World) -> None:
    converted = [convert_to_openai_tool(t) for t in tg.tools(world.toolset)]
    assert converted[:2] == [
        {
            "type": "function",
            "function": {
                "name": "send_email",
                "description": "Send an email.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "to": {"type": "string", "description": "Recipient address."},
                        "subject": {
                            "type": "string",
                            "default": "",
                            "description": "Subject line.",
                        },
                    },
                    "required": ["to"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "search_mail",
                "description": "Search the mailbox.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Words to look for."}
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        },
    ]
    assert [t.name for t in tg.tools([world.toolset["search_mail"]])] == ["search_mail"]


@pytest.mark.parametrize("mode", MODES)
def test_a_safe_tool_runs_at_once(world: World, mode: str) -> None:
    _, result = start(world, mode, calls(("c1", "search_mail", {"query": "rent"})))
    assert "__interrupt__" not in result
    assert tool_messages(result) == [("c1", '["mail about rent"]', "success")]
    assert world.ran == [("search_mail", {"query": "rent"})]


@pytest.mark.parametrize("mode", MODES)
def test_a_guarded_call_pauses_with_the_exact_payload_and_approve_runs_it_once(
    world: World, mode: str
) -> None:
    saver, result = start(world, mode, calls(("c1", "send_email", {"to": "ann@x.io"})))
    [paused] = result["__interrupt__"]
    assert paused.value == payload(
        ("send_email", {"to": "ann@x.io"}, "Tool `send_email` is awaiting approval")
    )
    assert world.ran == []
    _, done = resume(world, mode, saver, {"decisions": [{"type": "approve"}]})
    assert "__interrupt__" not in done
    assert tool_messages(done) == [("c1", "sent to ann@x.io", "success")]
    assert world.ran == [("send_email", {"to": "ann@x.io", "subject": ""})]


@pytest.mark.parametrize("mode", MODES)
def test_a_rejection_reason_reaches_the_model(world: World, mode: str) -> None:
    saver, _ = start(world, mode, calls(("c1", "send_email", {"to": "boss@x.io"})))
    chat_model, done = resume(
        world, mode, saver, {"decisions": [{"type": "reject", "message": "Not the boss."}]}
    )
    assert tool_messages(done) == [("c1", "Not the boss.", "error")]
    last = chat_model.seen[-1][-1]
    assert isinstance(last, ToolMessage)
    assert (last.content, last.status) == ("Not the boss.", "error")
    assert world.ran == []


@pytest.mark.parametrize("mode", MODES)
def test_a_rejection_without_reason_uses_the_constant(world: World, mode: str) -> None:
    saver, _ = start(world, mode, calls(("c1", "send_email", {"to": "a"})))
    _, done = resume(world, mode, saver, [{"type": "reject"}])  # a bare list works too
    assert tool_messages(done) == [
        ("c1", "User rejected this action. It was not executed.", "error")
    ]


def test_an_edit_replaces_the_call_in_the_history_with_the_middleware(world: World) -> None:
    saver, _ = start(world, "middleware", calls(("c1", "send_email", {"to": "a"})))
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b"}}}
    _, done = resume(world, "middleware", saver, {"decisions": [edit]})
    ai = [m for m in done["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert [(c["id"], c["name"], c["args"]) for c in ai[0].tool_calls] == [
        ("c1", "send_email", {"to": "b"})
    ]
    assert tool_messages(done) == [("c1", "sent to b", "success")]
    assert world.ran == [("send_email", {"to": "b", "subject": ""})]


def test_an_edit_without_the_middleware_says_what_ran(world: World) -> None:
    saver, _ = start(world, "tools", calls(("c1", "send_email", {"to": "a"})))
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b"}}}
    _, done = resume(world, "tools", saver, {"decisions": [edit]})
    assert tool_messages(done) == [
        (
            "c1",
            'A reviewer edited this call; it ran with the arguments {"to": "b"}.\n\nsent to b',
            "success",
        )
    ]
    assert world.ran == [("send_email", {"to": "b", "subject": ""})]


def test_an_edit_to_another_tool_is_refused_without_the_middleware(world: World) -> None:
    saver, _ = start(world, "tools", calls(("c1", "send_email", {"to": "a"})))
    edit = {"type": "edit", "edited_action": {"name": "search_mail", "args": {"query": "q"}}}
    _, done = resume(world, "tools", saver, {"decisions": [edit]})
    assert tool_messages(done) == [
        (
            "c1",
            (
                "The reviewer's edit names the tool `search_mail`, but only `send_email` can run"
                " here: edit the arguments, not the tool. It was not executed."
            ),
            "error",
        )
    ]
    assert world.ran == []


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_with_bad_arguments_does_not_run(world: World, mode: str) -> None:
    saver, _ = start(world, mode, calls(("c1", "send_email", {"to": "a"})))
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 5}}}
    _, done = resume(world, mode, saver, {"decisions": [edit]})
    assert tool_messages(done) == [
        (
            "c1",
            "Invalid arguments for tool `send_email`: 'to': Input should be a valid string",
            "error",
        )
    ]
    assert world.ran == []


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_get_an_error_without_asking(world: World, mode: str) -> None:
    _, result = start(world, mode, calls(("c1", "send_email", {"subject": "hi"})))
    assert "__interrupt__" not in result
    assert tool_messages(result) == [
        ("c1", "Invalid arguments for tool `send_email`: 'to': Field required", "error")
    ]
    assert world.ran == []


@pytest.mark.parametrize("mode", MODES)
def test_when_decides_on_the_actual_arguments(world: World, mode: str) -> None:
    turn = calls(
        ("c1", "transfer", {"amount": 5, "to": "x"}),
        ("c2", "transfer", {"amount": 5000, "to": "y"}),
    )
    saver = InMemorySaver()
    agent = world.agent(mode, model(turn), saver)
    result = _ainvoke(agent, {"messages": [HumanMessage("pay")]})
    [paused] = result["__interrupt__"]
    assert paused.value == payload(("transfer", {"amount": 5000, "to": "y"}, "Check the amount"))
    done = _ainvoke(world.agent(mode, model(), saver), Command(resume=[{"type": "approve"}]))
    assert tool_messages(done) == [
        ("c1", '{"ok": true, "amount": 5.0}', "success"),
        ("c2", '{"ok": true, "amount": 5000.0}', "success"),
    ]
    assert sorted(world.ran, key=lambda r: r[1]["amount"]) == [
        ("transfer", {"amount": 5.0, "to": "x"}),
        ("transfer", {"amount": 5000.0, "to": "y"}),
    ]


def _ainvoke(agent: Any, value: Any) -> Any:
    import anyio

    async def run() -> Any:
        return await agent.ainvoke(value, CONFIG)

    return anyio.run(run)


@pytest.mark.parametrize("mode", MODES)
def test_refused_decisions_are_not_recorded_and_can_be_answered_again(
    world: World, mode: str
) -> None:
    saver, _ = start(world, mode, calls(("c1", "send_email", {"to": "a"})))
    agent = world.agent(mode, model(), saver)
    with pytest.raises(InvalidReviewDecisionError) as bad:
        agent.invoke(Command(resume={"decisions": [{"type": "postpone"}]}), CONFIG)
    assert str(bad.value) == (
        "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']"
    )
    with pytest.raises(InvalidReviewDecisionError) as count:
        agent.invoke(Command(resume={"decisions": []}), CONFIG)
    assert str(count.value) == "Expected 1 decision (one per action), got 0"
    assert world.ran == []
    _, done = resume(world, mode, saver, {"decisions": [{"type": "approve"}]})
    assert tool_messages(done) == [("c1", "sent to a", "success")]
    assert world.ran == [("send_email", {"to": "a", "subject": ""})]


def test_the_middleware_pauses_once_for_the_whole_turn(world: World) -> None:
    turn = calls(
        ("c1", "send_email", {"to": "a"}),
        ("c2", "search_mail", {"query": "q"}),
        ("c3", "send_email", {"to": "b"}),
    )
    saver, result = start(world, "middleware", turn)
    [paused] = result["__interrupt__"]
    description = "Tool `send_email` is awaiting approval"
    assert paused.value == payload(
        ("send_email", {"to": "a"}, description), ("send_email", {"to": "b"}, description)
    )
    _, done = resume(
        world, "middleware", saver, {"decisions": [{"type": "approve"}, {"type": "reject"}]}
    )
    assert tool_messages(done) == [
        ("c3", "User rejected this action. It was not executed.", "error"),
        ("c1", "sent to a", "success"),
        ("c2", '["mail about q"]', "success"),
    ]
    assert sorted(world.ran, key=str) == [
        ("search_mail", {"query": "q"}),
        ("send_email", {"to": "a", "subject": ""}),
    ]


def test_the_middleware_guards_plain_tools_given_to_the_agent(world: World) -> None:
    """create_agent gets LangChain's own tools; the middleware still runs them through toolguard."""
    from langchain_core.tools import tool as lc_tool

    ran: list[str] = []

    @lc_tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    assert delete_file.func is not None
    toolset = guard([delete_file.func])
    saver = InMemorySaver()

    def agent(chat_model: FakeModel) -> Any:
        return create_agent(
            chat_model,
            tools=[delete_file],
            middleware=[tg.middleware(toolset)],
            checkpointer=saver,
        )

    result = agent(model(calls(("c1", "delete_file", {"path": "/srv/x"})))).invoke(
        {"messages": [HumanMessage("rm")]}, CONFIG
    )
    assert result["__interrupt__"][0].value["action_requests"][0]["name"] == "delete_file"
    assert ran == []
    done = agent(model()).invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert tool_messages(done) == [("c1", "deleted", "success")]
    assert ran == ["/srv/x"]


def test_outside_a_graph_a_guarded_tool_fails_closed(world: World) -> None:
    send, search, transfer = tg.tools(world.toolset)
    with pytest.raises(ApprovalRequiredError) as info:
        send.invoke({"to": "a"})
    assert info.value.pending_review.model_dump() == payload(
        ("send_email", {"to": "a"}, "Tool `send_email` is awaiting approval")
    )
    assert search.invoke({"query": "x"}) == '["mail about x"]'
    assert send.invoke({"subject": "s"}) == (
        "Invalid arguments for tool `send_email`: 'to': Field required"
    )

    async def small() -> Any:
        return await transfer.ainvoke({"amount": 1, "to": "z"})

    import anyio

    assert anyio.run(small) == '{"ok": true, "amount": 1.0}'
    assert world.ran == [
        ("search_mail", {"query": "x"}),
        ("transfer", {"amount": 1.0, "to": "z"}),
    ]


def test_a_failing_tool_gives_an_error_message() -> None:
    def search_index() -> None:
        """Blow up."""
        msg = "boom"
        raise RuntimeError(msg)

    [tool] = tg.tools([search_index])
    assert tool.invoke({}) == "Tool `search_index` failed: RuntimeError: boom"


# ------------------------------------------------------------- rules, quorum, secrets, once only


class Ops:
    """A shell, a quorum deploy with a secret and a log search, each recording real runs."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        ran = self.ran

        def run_shell(command: str) -> str:
            """Run a shell command."""
            ran.append(("run_shell", {"command": command}))
            return f"ran {command}"

        def search_logs(query: str) -> list[str]:
            """Search the logs."""
            ran.append(("search_logs", {"query": query}))
            return [query]

        @requires_approval(approvals=2, redact=["token"])
        def deploy(env: str, token: str) -> str:
            """Deploy a release."""
            ran.append(("deploy", {"env": env, "token": token}))
            return f"deployed {env} with {token}"

        rules = Rules(
            allow=['run_shell(command="ls *")'],
            ask=["search_logs"],
            deny=['run_shell(command="rm *")'],
        )
        self.toolset = guard([run_shell, search_logs, deploy], rules=rules)

    def agent(
        self, mode: str, chat_model: FakeModel, saver: InMemorySaver, claims: Any = None
    ) -> Any:
        middleware = [tg.middleware(self.toolset, claims=claims)] if mode == "middleware" else []
        return create_agent(
            chat_model,
            tools=tg.tools(self.toolset, claims=claims),
            middleware=middleware,
            checkpointer=saver,
        )


DENIED_RM = (
    'The call to `run_shell` is denied by the rule `deny run_shell(command="rm *")`.'
    " It was not executed."
)
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


@pytest.mark.parametrize("mode", MODES)
def test_rules_deny_ask_and_allow_like_the_runner(mode: str) -> None:
    """deny: an error tool message, never an interrupt or a run; ask: a review; allow: runs."""
    ops = Ops()
    saver = InMemorySaver()
    turn = calls(
        ("r1", "run_shell", {"command": "rm -rf /tmp/x"}),
        ("r2", "run_shell", {"command": "ls /tmp"}),
        ("r3", "search_logs", {"query": "error"}),
    )
    result = ops.agent(mode, model(turn), saver).invoke({"messages": [HumanMessage("go")]}, CONFIG)
    [paused] = result["__interrupt__"]
    assert paused.value == payload(
        ("search_logs", {"query": "error"}, "Tool `search_logs` is awaiting approval")
    )
    done = ops.agent(mode, model(), saver).invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), CONFIG
    )
    assert sorted(tool_messages(done)) == [
        ("r1", DENIED_RM, "error"),
        ("r2", "ran ls /tmp", "success"),
        ("r3", "no", "error"),
    ]
    assert ops.ran == [("run_shell", {"command": "ls /tmp"})]


@pytest.mark.parametrize("mode", MODES)
def test_a_quorum_runs_only_after_two_distinct_named_reviewers(mode: str) -> None:
    """One vote pauses again with the progress; anonymous and repeated votes are refused."""
    ops = Ops()
    saver = InMemorySaver()
    first = ops.agent(mode, model(calls(("d1", "deploy", DEPLOY_ARGS))), saver).invoke(
        {"messages": [HumanMessage("deploy")]}, CONFIG
    )
    assert first["__interrupt__"][0].value == deploy_review("prod", 0, [])
    agent = ops.agent(mode, model(), saver)
    with pytest.raises(QuorumReviewerError) as anonymous:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert str(anonymous.value) == (
        "Action 'deploy' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    vote = {"decisions": [{"type": "approve"}], "reviewer": "alice"}
    second = ops.agent(mode, model(), saver).invoke(Command(resume=vote), CONFIG)
    assert ops.ran == []
    assert second["__interrupt__"][0].value == deploy_review("prod", 1, ["alice"])
    with pytest.raises(QuorumReviewerError) as again:
        ops.agent(mode, model(), saver).invoke(
            Command(resume={"decisions": [{"type": "approve"}], "reviewer": "ALICE"}), CONFIG
        )
    assert str(again.value) == (
        "Reviewer 'ALICE' already approved action 'deploy' (1 of 2 approvals); another"
        " reviewer must approve it. Nothing was changed."
    )
    done = ops.agent(mode, model(), saver).invoke(
        Command(resume={"decisions": [{"type": "approve"}], "reviewer": "bob"}), CONFIG
    )
    assert tool_messages(done) == [("d1", "deployed prod with [redacted]", "success")]
    assert ops.ran == [("deploy", DEPLOY_ARGS)]


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_restarts_the_quorum_and_keeps_a_redacted_secret(mode: str) -> None:
    """An edit is its author's vote for the new arguments; "[redacted]" keeps the real key."""
    ops = Ops()
    saver = InMemorySaver()
    ops.agent(mode, model(calls(("d1", "deploy", DEPLOY_ARGS))), saver).invoke(
        {"messages": [HumanMessage("deploy")]}, CONFIG
    )
    edit = {
        "type": "edit",
        "edited_action": {"name": "deploy", "args": {"env": "staging", "token": "[redacted]"}},
    }
    second = ops.agent(mode, model(), saver).invoke(
        Command(resume={"decisions": [edit], "reviewer": "alice"}), CONFIG
    )
    assert second["__interrupt__"][0].value == deploy_review("staging", 1, ["alice"])
    ops.agent(mode, model(), saver).invoke(
        Command(resume={"decisions": [{"type": "approve"}], "reviewer": "carol"}), CONFIG
    )
    assert ops.ran == [("deploy", {"env": "staging", "token": "s3cr3t-deploy-key"})]


@pytest.mark.parametrize("mode", MODES)
def test_claims_run_an_approved_call_once_across_two_resumes(mode: str) -> None:
    """Two processes resume the same paused checkpoint: the body runs once, the second refuses."""
    ops = Ops()
    saver = InMemorySaver()
    store = MemoryStore()
    turn = calls(("s1", "search_logs", {"query": "error"}))
    ops.agent(mode, model(turn), saver, store).invoke({"messages": [HumanMessage("go")]}, CONFIG)
    paused = ops.agent(mode, model(), saver, store).get_state(CONFIG).config
    answer = Command(resume={"decisions": [{"type": "approve"}]})
    done = ops.agent(mode, model(), saver, store).invoke(answer, paused)
    assert tool_messages(done) == [("s1", '["error"]', "success")]
    with pytest.raises(AlreadyResumedError):
        ops.agent(mode, model(), saver, store).invoke(answer, paused)
    assert ops.ran == [("search_logs", {"query": "error"})]


def test_outside_a_graph_a_quorum_tool_shows_its_progress_and_secrets_redacted() -> None:
    ops = Ops()
    deploy = next(t for t in tg.tools(ops.toolset) if t.name == "deploy")
    with pytest.raises(ApprovalRequiredError) as info:
        deploy.invoke(DEPLOY_ARGS)
    assert info.value.pending_review.model_dump() == deploy_review("prod", 0, [])
    assert info.value.call.args == {"env": "prod", "token": "[redacted]"}
    assert ops.ran == []


# --------------------------------------------------------------------------- deadlines


def deleting(ran: list[str], ttl: float, mode: str, saver: InMemorySaver, *turns: AIMessage) -> Any:
    @requires_approval(ttl=ttl)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        ran.append(path)
        return f"deleted {path}"

    tools = guard([delete_file])
    middleware = [tg.middleware(tools)] if mode == "middleware" else []
    return create_agent(
        model(*turns), tools=tg.tools(tools), middleware=middleware, checkpointer=saver
    )


@pytest.mark.parametrize("mode", MODES)
def test_an_approval_past_the_deadline_runs_nothing(mode: str) -> None:
    """Approved after the tool's ttl, by a new agent: the runner's expiry text; nothing ran."""
    ran: list[str] = []
    saver = InMemorySaver()
    turn = calls(("d1", "delete_file", {"path": "/srv/a"}))
    paused = deleting(ran, 0.2, mode, saver, turn).invoke(
        {"messages": [HumanMessage("go")]}, CONFIG
    )
    assert "__interrupt__" in paused
    time.sleep(0.3)
    answer = Command(resume={"decisions": [{"type": "approve"}]})
    done = deleting(ran, 0.2, mode, saver).invoke(answer, CONFIG)
    assert tool_messages(done) == [("d1", EXPIRED_BEFORE_START, "error")]
    assert EXPIRED_BEFORE_START == (
        "The review of this action expired before the approved call could start."
        " It was not executed."
    )
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
async def test_an_approval_in_time_runs_once(mode: str) -> None:
    """Approved within the tool's ttl (async agent): the body runs once."""
    ran: list[str] = []
    saver = InMemorySaver()
    turn = calls(("d1", "delete_file", {"path": "/srv/a"}))
    agent = deleting(ran, 60, mode, saver, turn)
    paused = await agent.ainvoke({"messages": [HumanMessage("go")]}, CONFIG)
    assert "__interrupt__" in paused
    answer = Command(resume={"decisions": [{"type": "approve"}]})
    done = await deleting(ran, 60, mode, saver).ainvoke(answer, CONFIG)
    assert tool_messages(done) == [("d1", "deleted /srv/a", "success")]
    assert ran == ["/srv/a"]
