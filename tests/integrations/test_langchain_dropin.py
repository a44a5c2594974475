"""toolguard's drop-in HumanInTheLoopMiddleware keeps toolguard's guarantees in LangChain's shapes.

LangChain's own tests of the class run in test_langchain_dropin_upstream.py; these show
what toolguard adds underneath: rules (a deny rule holds at approval), quorum, redaction,
answers checked before LangGraph records them, once-only runs with a store, the digest
binding, deadlines and the audit trail naming the reviewer. Offline: a scripted chat model,
LangGraph's in-memory checkpointer.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

from langchain.agents import create_agent
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from toolguard import (
    AlreadyResumedError,
    InvalidReviewDecisionError,
    MemoryStore,
    QuorumReviewerError,
    ReviewerNotAllowedError,
    Rules,
    UnsupportedPolicyError,
)
from toolguard.integrations.langchain import (
    EDIT_NOTICE,
    NOT_REVIEWED,
    HumanInTheLoopMiddleware,
)

DENIED = (
    'The call to `send_email` is denied by the rule `deny send_email(to="*@evil.example")`.'
    " It was not executed."
)
TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
EXPIRED = (
    "The review of this action expired before the approved call could start. It was not executed."
)
DENY = Rules(deny=['send_email(to="*@evil.example")'])
MAIL = {"to": "ann@example.com", "body": "Hi"}


class FakeModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def calls(*items: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in items],
    )


class World:
    """An agent's tools recording every real run, and agents on one checkpointer."""

    def __init__(self, middleware: HumanInTheLoopMiddleware) -> None:
        self.ran: list[tuple[str, dict[str, Any]]] = []
        self.middleware = middleware
        self.saver = InMemorySaver()
        self.config: Any = {"configurable": {"thread_id": "t1"}}
        ran = self.ran

        @tool
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            ran.append(("send_email", {"to": to, "body": body}))
            return f"sent to {to}"

        @tool
        def draft_email(to: str, body: str) -> str:
            """Draft an email."""
            ran.append(("draft_email", {"to": to, "body": body}))
            return f"drafted to {to}"

        @tool
        def deploy(env: str, token: str) -> str:
            """Deploy a release."""
            ran.append(("deploy", {"env": env, "token": token}))
            return f"deployed {env} with {token}"

        @tool
        def search(query: str) -> str:
            """Search."""
            ran.append(("search", {"query": query}))
            return f"found {query}"

        self.tools = [send_email, draft_email, deploy, search]

    def agent(self, *turns: AIMessage) -> Any:
        model = FakeModel(messages=iter([*turns, AIMessage(content="Done.")]))
        return create_agent(
            model, tools=self.tools, middleware=[self.middleware], checkpointer=self.saver
        )

    def start(self, *items: tuple[str, str, dict[str, Any]]) -> Any:
        return self.agent(calls(*items)).invoke({"messages": [HumanMessage("go")]}, self.config)

    def resume(self, answer: Any, config: Any = None) -> Any:
        return self.agent().invoke(Command(resume=answer), config or self.config)


def tool_messages(result: Any) -> list[tuple[str, str, Any]]:
    return [
        (m.tool_call_id, m.status, m.content)
        for m in result["messages"]
        if isinstance(m, ToolMessage)
    ]


def request_of(name: str, args: dict[str, Any], allowed: list[str], **config: Any) -> Any:
    """The interrupt value of one call under review, as LangChain's class shows it."""
    description = f"Tool execution requires approval\n\nTool: {name}\nArgs: {args}"
    review: dict[str, Any] = {"action_name": name, "allowed_decisions": allowed}
    review.update(config)
    return {
        "action_requests": [{"name": name, "args": args, "description": description}],
        "review_configs": [review],
    }


ALL = ["approve", "edit", "reject", "respond"]


# ---------------------------------------------------------------------------- set-up


def test_the_drop_in_takes_langchains_arguments_and_refuses_what_it_cannot_honour() -> None:
    middleware = HumanInTheLoopMiddleware(
        {"send_email": True, "search": False, "deploy": {"allowed_decisions": ["approve"]}},
        description_prefix="Check this",
        interrupt_mode="per_call",
    )
    assert middleware.interrupt_on == {
        "send_email": {"allowed_decisions": ["approve", "edit", "reject", "respond"]},
        "deploy": {"allowed_decisions": ["approve"]},
    }
    assert (middleware.description_prefix, middleware.edit_notice) == ("Check this", EDIT_NOTICE)
    with pytest.raises(UnsupportedPolicyError) as judged:
        HumanInTheLoopMiddleware({"send_email": True}, judge=object())
    assert str(judged.value) == (
        "HumanInTheLoopMiddleware takes no judge: LangChain runs the turn, so a judge (judge=)"
        " would not apply. Run the tools with toolguard.Runner or toolguard.ReviewedChat for a"
        " judge."
    )


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        (
            {"allowed_decisions": ["approve"], "approval": 2},
            (
                "Invalid `interrupt_on` config for tool 'deploy': unknown key 'approval' (known:"
                " allowed_decisions, approvals, args_schema, description, redact, ttl, when)."
            ),
        ),
        (
            {"allowed_decisions": ["aprove"]},
            (
                "Invalid `interrupt_on` config for tool 'deploy': Unknown decision type 'aprove' in"
                " allowed_decisions. Choices: ['approve', 'edit', 'reject', 'respond']."
            ),
        ),
        (
            {"allowed_decisions": ["approve"], "approvals": 0},
            (
                "Invalid `interrupt_on` config for tool 'deploy': approvals must be at least 1,"
                " got 0."
            ),
        ),
        (
            {"allowed_decisions": ["approve"], "redact": "token"},
            (
                "Invalid `interrupt_on` config for tool 'deploy': redact must be a list of argument"
                " names, got the text 'token'."
            ),
        ),
        (
            {"allowed_decisions": ["approve"], "when": True},
            (
                "Invalid `interrupt_on` config for tool 'deploy': when must be a function of the"
                " tool call request, got bool."
            ),
        ),
        (
            "yes",
            (
                "Invalid `interrupt_on` config for tool 'deploy': expected True, False or a dict"
                " with allowed_decisions, got str."
            ),
        ),
    ],
)
def test_an_entry_toolguard_cannot_honour_is_refused_naming_the_tool(entry: Any, text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(text)) as refused:
        HumanInTheLoopMiddleware({"deploy": entry})
    assert str(refused.value) == text


def test_a_store_without_claims_and_keys_is_refused() -> None:
    with pytest.raises(TypeError) as refused:
        HumanInTheLoopMiddleware({"deploy": True}, store={"claims": []})
    assert str(refused.value) == (
        "store must be a toolguard store with claim() and digest_key() (MemoryStore,"
        " SQLiteStore, PostgresStore), got dict"
    )


# ---------------------------------------------------------------------------- rules


def test_a_deny_rule_refuses_a_call_unasked_and_holds_at_approval() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True}, rules=DENY))
    evil = {"to": "eve@evil.example", "body": "Hi"}
    result = world.start(("c1", "send_email", evil))
    assert "__interrupt__" not in result
    assert tool_messages(result) == [("c1", "error", DENIED)]
    # A review pending when the rule arrives: the approval runs nothing.
    world.config = {"configurable": {"thread_id": "t2"}}
    world.middleware = HumanInTheLoopMiddleware({"send_email": True})
    paused = world.start(("c1", "send_email", evil))
    assert paused["__interrupt__"][0].value == request_of("send_email", evil, ALL)
    world.middleware = HumanInTheLoopMiddleware({"send_email": True}, rules=DENY)
    done = world.resume({"decisions": [{"type": "approve"}]})
    assert tool_messages(done) == [("c1", "error", DENIED)]
    assert world.ran == []


def test_an_edit_is_a_new_proposal_a_deny_rule_refuses() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True}, rules=DENY))
    world.start(("c1", "send_email", MAIL))
    evil = {"to": "eve@evil.example", "body": "Hi"}
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": evil}}
    done = world.resume({"decisions": [edit]})
    assert tool_messages(done) == [("c1", "error", DENIED)]
    assert world.ran == []


def test_an_ask_rule_pauses_a_tool_interrupt_on_does_not_list() -> None:
    rules = Rules(ask=['search(query="payroll*")'])
    world = World(HumanInTheLoopMiddleware({"send_email": True}, rules=rules))
    payroll = {"query": "payroll 2026"}
    paused = world.start(("c1", "search", payroll), ("c2", "search", {"query": "x"}))
    assert paused["__interrupt__"][0].value == request_of(
        "search", {"query": "payroll 2026"}, ["approve", "edit", "reject"]
    )
    assert world.ran == []
    done = world.resume({"decisions": [{"type": "approve"}]})
    assert tool_messages(done) == [
        ("c1", "success", "found payroll 2026"),
        ("c2", "success", "found x"),
    ]


def test_when_fails_closed_only_false_lets_a_call_run_unasked() -> None:
    def when(request: ToolCallRequest) -> Any:
        return request.tool_call["args"].get("risky")  # None for a call without the key

    world = World(
        HumanInTheLoopMiddleware({"search": {"allowed_decisions": ["approve"], "when": when}})
    )
    paused = world.start(("c1", "search", {"query": "a"}))
    assert paused["__interrupt__"][0].value == request_of("search", {"query": "a"}, ["approve"])
    world.config = {"configurable": {"thread_id": "t2"}}
    done = world.start(("c1", "search", {"query": "b", "risky": False}))
    assert tool_messages(done) == [("c1", "success", "found b")]


# ---------------------------------------------------------------------------- answers


def test_a_refused_answer_is_not_recorded_and_the_pause_can_be_answered_again() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": {"allowed_decisions": ["approve"]}}))
    world.start(("c1", "send_email", MAIL))
    with pytest.raises(InvalidReviewDecisionError, match="Number of human decisions") as count:
        world.resume({"decisions": []})
    assert str(count.value) == (
        "Number of human decisions (0) does not match number of hanging tool calls (1)."
    )
    with pytest.raises(InvalidReviewDecisionError, match="Unexpected human decision") as kind:
        world.resume({"decisions": [{"type": "reject"}]})
    assert str(kind.value) == (
        "Unexpected human decision: {'type': 'reject'}. Decision type 'reject' is not allowed"
        " for tool 'send_email'. Expected one of ['approve'] based on the tool's configuration."
    )
    grant_all = {"match": "tool", "scope": "thread"}
    with pytest.raises(InvalidReviewDecisionError) as grant:
        world.resume({"decisions": [{"type": "approve", "grant": grant_all}]})
    assert str(grant.value) == (
        "The approval of `send_email` carries a standing grant, which LangChain's middleware"
        " cannot keep: grants live in a conversation's state. Use toolguard.ReviewedChat (or its"
        " HTTP service) for grants, or approve without 'grant'."
    )
    assert world.ran == []
    done = world.resume({"decisions": [{"type": "approve"}]})
    assert tool_messages(done) == [("c1", "success", "sent to ann@example.com")]
    assert world.ran == [("send_email", MAIL)]


def test_a_call_that_reaches_its_tool_without_a_review_runs_nothing() -> None:
    middleware = HumanInTheLoopMiddleware({"send_email": True})
    request = ToolCallRequest(
        tool_call={"name": "send_email", "args": MAIL, "id": "c1", "type": "tool_call"},
        tool=None,
        state={
            "messages": [],
            "hitl_edited_tool_calls": {"c1": {"name": "send_email", "args": {"to": "x"}}},
        },
        runtime=None,  # type: ignore[arg-type]
    )

    def handler(_: Any) -> ToolMessage:
        raise AssertionError("ran")

    answer = middleware.wrap_tool_call(request, handler)
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.status, answer.content) == ("c1", "error", NOT_REVIEWED)


def test_an_edit_that_switches_to_a_tool_that_asks_is_a_new_review() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True, "draft_email": True}))
    world.start(("c1", "send_email", MAIL))
    edit = {"type": "edit", "edited_action": {"name": "draft_email", "args": MAIL}}
    again = world.resume({"decisions": [edit]})
    assert again["__interrupt__"][0].value == request_of("draft_email", MAIL, ALL)
    assert world.ran == []
    done = world.resume({"decisions": [{"type": "approve"}]})
    [(call_id, status, content)] = tool_messages(done)
    assert (call_id, status) == ("c1", "success")
    assert content == (
        f'{EDIT_NOTICE} Executed instead: draft_email with arguments {{"to": "ann@example.com",'
        ' "body": "Hi"}.\n\nTool response:\ndrafted to ann@example.com'
    )
    assert world.ran == [("draft_email", MAIL)]


# ---------------------------------------------------------------------------- quorum, secrets


DEPLOY = {"allowed_decisions": ["approve", "edit", "reject"], "approvals": 2, "redact": ["token"]}
PROD = {"env": "prod", "token": "s3cr3t"}
SHOWN = {"env": "prod", "token": "[redacted]"}


def test_a_quorum_needs_two_named_reviewers_and_secrets_stay_redacted() -> None:
    world = World(HumanInTheLoopMiddleware({"deploy": DEPLOY}))
    paused = world.start(("c1", "deploy", PROD))
    progress = {"required": 2, "given": 0, "by": []}
    assert paused["__interrupt__"][0].value == request_of(
        "deploy", SHOWN, ["approve", "edit", "reject"], approvals=progress
    )
    with pytest.raises(QuorumReviewerError) as anonymous:
        world.resume({"decisions": [{"type": "approve"}]})
    assert str(anonymous.value) == (
        "Action 'deploy' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    once = world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"})
    progress = {"required": 2, "given": 1, "by": ["alice"]}
    assert once["__interrupt__"][0].value == request_of(
        "deploy", SHOWN, ["approve", "edit", "reject"], approvals=progress
    )
    with pytest.raises(QuorumReviewerError):
        world.resume({"decisions": [{"type": "approve"}], "reviewer": "ALICE"})
    assert world.ran == []
    done = world.resume({"decisions": [{"type": "approve"}], "reviewer": "bob"})
    assert world.ran == [("deploy", PROD)]  # the tool got the real value
    assert tool_messages(done) == [("c1", "success", "deployed prod with [redacted]")]


def test_an_edit_keeping_the_placeholder_keeps_the_secret_and_the_notice_hides_it() -> None:
    world = World(HumanInTheLoopMiddleware({"deploy": {**DEPLOY, "approvals": 1}}))
    world.start(("c1", "deploy", PROD))
    edit = {"type": "edit", "edited_action": {"name": "deploy", "args": {**SHOWN, "env": "dev"}}}
    done = world.resume({"decisions": [edit]})
    assert world.ran == [("deploy", {"env": "dev", "token": "s3cr3t"})]
    assert tool_messages(done) == [
        (
            "c1",
            "success",
            (
                f'{EDIT_NOTICE} Executed instead: deploy with arguments {{"env": "dev", "token":'
                ' "[redacted]"}.\n\nTool response:\ndeployed dev with [redacted]'
            ),
        )
    ]


def test_reviewers_decide_only_the_tools_they_are_listed_for() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True}, reviewers={"send_*": ["alice"]}))
    world.start(("c1", "send_email", MAIL))
    for who in ["bob", None]:
        with pytest.raises(ReviewerNotAllowedError) as refused:
            world.resume({"decisions": [{"type": "approve"}], "reviewer": who})
        assert str(refused.value) == f"Reviewer {who!r} may not review conversation 't1'"
    assert world.ran == []
    done = world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"})
    assert tool_messages(done) == [("c1", "success", "sent to ann@example.com")]


# ---------------------------------------------------------------------------- store


def test_a_replayed_resume_runs_nothing_twice_and_the_audit_names_the_reviewer() -> None:
    store = MemoryStore()
    world = World(HumanInTheLoopMiddleware({"send_email": True}, store=store))
    world.start(("c1", "send_email", MAIL))
    paused = world.agent().get_state(world.config).config  # the paused checkpoint
    done = world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"})
    assert tool_messages(done) == [("c1", "success", "sent to ann@example.com")]
    with pytest.raises(AlreadyResumedError):
        world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"}, paused)
    assert world.ran == [("send_email", MAIL)]
    audit = anyio_run(store.load, "langgraph:t1").audit
    assert [(e.kind, e.tool, e.args, e.actor, e.decision, e.detail) for e in audit] == [
        ("requested", "send_email", MAIL, None, None, None),
        ("decided", "send_email", MAIL, "alice", "approve", None),
        ("executed", "send_email", None, None, None, "sent to ann@example.com"),
    ]
    assert len({e.review_id for e in audit}) == 1
    assert audit[0].digest == audit[1].digest  # keyed with the store's secret
    assert audit[0].digest is not None
    assert len(audit[0].digest) == 64


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run", {"name": "send_email", "args": {"to": "eve@evil.example", "body": "Hi"}}),
        ("asked_at", 4102444800.0),  # a later deadline
        ("kind", "edit"),
        ("tool", "search"),
    ],
)
def test_a_changed_checkpoint_runs_nothing(field: str, value: Any) -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True}, store=MemoryStore()))
    world.start(("c1", "send_email", MAIL))
    agent = world.agent()
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), world.config)
    # Replay the step that runs the tools with the recorded decision changed.
    history = list(agent.get_state_history(world.config))
    before_tools = next(s for s in history if s.next == ("tools",))
    record = {**before_tools.values["toolguard_hitl_decisions"]["c1"], field: value}
    forked = agent.update_state(
        before_tools.config,
        {"toolguard_hitl_decisions": {"c1": record}},
        as_node="HumanInTheLoopMiddleware.after_model",
    )
    done = world.agent().invoke(None, forked)
    assert tool_messages(done) == [("c1", "error", TAMPERED)]
    assert world.ran == [("send_email", MAIL)]


def test_a_long_decision_is_cut_in_the_error() -> None:
    world = World(HumanInTheLoopMiddleware({"send_email": True}))
    world.start(("c1", "send_email", MAIL))
    kind = "x" * 1000
    with pytest.raises(InvalidReviewDecisionError) as refused:
        world.resume({"decisions": [{"type": kind}]})
    assert str(refused.value) == (
        f"Unexpected human decision: {str({'type': kind})[:300]}.... Decision type"
        f" '{kind[:300]}...' is not allowed for tool 'send_email'. Expected one of ['approve',"
        " 'edit', 'reject',"
        " 'respond'] based on the tool's configuration."
    )


def test_an_approval_past_its_deadline_runs_nothing() -> None:
    ttl = 0.2
    entry = {"allowed_decisions": ["approve"], "ttl": ttl}
    world = World(HumanInTheLoopMiddleware({"send_email": entry}))
    world.start(("c1", "send_email", MAIL))
    time.sleep(ttl * 1.5)
    done = world.resume({"decisions": [{"type": "approve"}]})
    assert tool_messages(done) == [("c1", "error", EXPIRED)]
    assert world.ran == []


# ---------------------------------------------------------------------------- per call


def test_per_call_pauses_keep_the_quorum_redaction_and_checks() -> None:
    world = World(HumanInTheLoopMiddleware({"deploy": DEPLOY}, interrupt_mode="per_call"))
    paused = world.start(("c1", "deploy", PROD))
    [first] = paused["__interrupt__"]
    assert first.value == {
        "type": "tool_approval",
        "tool_call_id": "c1",
        "name": "deploy",
        "args": SHOWN,
        "description": f"Tool execution requires approval\n\nTool: deploy\nArgs: {SHOWN}",
        "approvals": {"required": 2, "given": 0, "by": []},
    }
    with pytest.raises(QuorumReviewerError):
        world.resume({first.id: {"type": "approve"}})
    second = world.resume({first.id: {"type": "approve", "reviewer": "alice"}})["__interrupt__"]
    assert second[0].value["approvals"] == {"required": 2, "given": 1, "by": ["alice"]}
    assert world.ran == []
    done = world.resume({second[0].id: {"type": "approve", "reviewer": "bob"}})
    assert tool_messages(done) == [("c1", "success", "deployed prod with [redacted]")]
    assert world.ran == [("deploy", PROD)]


def test_per_call_a_deny_rule_refuses_unasked_and_a_replay_runs_nothing_twice() -> None:
    store = MemoryStore()
    world = World(
        HumanInTheLoopMiddleware(
            {"send_email": True}, rules=DENY, store=store, interrupt_mode="per_call"
        )
    )
    evil = {"to": "eve@evil.example", "body": "Hi"}
    paused = world.start(("c1", "send_email", evil), ("c2", "send_email", MAIL))
    [intr] = paused["__interrupt__"]
    assert intr.value["tool_call_id"] == "c2"
    checkpoint = world.agent().get_state(world.config).config
    done = world.resume({intr.id: {"type": "approve", "reviewer": "alice"}})
    assert tool_messages(done) == [
        ("c1", "error", DENIED),
        ("c2", "success", "sent to ann@example.com"),
    ]
    with pytest.raises(AlreadyResumedError):
        world.resume({intr.id: {"type": "approve", "reviewer": "alice"}}, checkpoint)
    assert world.ran == [("send_email", MAIL)]
    kinds = [(e.kind, e.actor) for e in anyio_run(store.load, "langgraph:t1").audit]
    # The denied call and the call asking for review are recorded by two of LangGraph's
    # tasks, in whichever order they finish; the decision and the run follow.
    assert sorted(kinds[:2]) == [("denied", None), ("requested", None)]
    assert kinds[2:] == [("decided", "alice"), ("executed", None)]


async def test_the_async_hooks_keep_the_store_and_the_quorum() -> None:
    store = MemoryStore()
    world = World(HumanInTheLoopMiddleware({"deploy": DEPLOY}, store=store))
    agent = world.agent(calls(("c1", "deploy", PROD)))
    await agent.ainvoke({"messages": [HumanMessage("go")]}, world.config)
    for who in ["alice", "bob"]:
        done = await world.agent().ainvoke(
            Command(resume={"decisions": [{"type": "approve"}], "reviewer": who}), world.config
        )
    assert tool_messages(done) == [("c1", "success", "deployed prod with [redacted]")]
    audit = (await store.load("langgraph:t1")).audit
    assert [(e.kind, e.actor, e.detail) for e in audit] == [
        ("requested", None, None),
        ("vote", "alice", "1 of 2 approvals"),
        ("vote", "bob", "2 of 2 approvals"),
        ("decided", "bob", None),
        ("executed", None, "deployed prod with [redacted]"),
    ]
    assert all("s3cr3t" not in e.model_dump_json() for e in audit)


def anyio_run(func: Any, *args: Any) -> Any:
    import anyio

    return anyio.run(func, *args)


# ---------------------------------------------------------------------------- spans


def test_the_spans_name_the_reviewer_and_a_denied_call(spans: Any) -> None:
    from tests.helpers import span_named, tool_call_attributes

    world = World(HumanInTheLoopMiddleware({"send_email": True}, rules=DENY))
    evil = {"to": "eve@evil.example", "body": "Hi"}
    world.start(("c1", "send_email", MAIL), ("c2", "send_email", evil))
    world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"})
    by_call = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s
        for s in spans.get_finished_spans()
        if s.name == "execute_tool send_email"
    }
    sent, denied = by_call.pop("c1"), by_call.pop("c2")
    assert by_call == {}
    attributes = dict(sent.attributes or {})
    assert attributes == tool_call_attributes(
        "send_email",
        "c1",
        decided_by="alice",
        review_id=attributes["toolguard.review_id"],
        review__wait_ms=attributes["toolguard.review.wait_ms"],
        outcome="executed",
    )
    assert str(attributes["toolguard.review_id"]).endswith(":c1")
    assert dict(denied.attributes or {}) == tool_call_attributes(
        "send_email", "c2", decided_by="rule", outcome="denied"
    )
    review = span_named(spans, "toolguard.review")
    assert dict(review.attributes or {})["toolguard.decided_by"] == "alice"


def test_a_description_factory_sees_no_secret() -> None:
    seen: list[Any] = []

    def describe(call: Any, state: Any, runtime: Any) -> str:
        seen.append(call["args"])
        return f"Deploy to {call['args']['env']}"

    entry = {"allowed_decisions": ["approve"], "redact": ["token"], "description": describe}
    world = World(HumanInTheLoopMiddleware({"deploy": entry}))
    paused = world.start(("c1", "deploy", PROD))
    assert paused["__interrupt__"][0].value["action_requests"] == [
        {"name": "deploy", "args": SHOWN, "description": "Deploy to prod"}
    ]
    assert seen == [SHOWN]


def test_per_call_an_edit_a_deny_rule_refuses_runs_nothing() -> None:
    world = World(
        HumanInTheLoopMiddleware({"send_email": True}, rules=DENY, interrupt_mode="per_call")
    )
    [intr] = world.start(("c1", "send_email", MAIL))["__interrupt__"]
    evil = {"to": "eve@evil.example", "body": "Hi"}
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": evil}}
    done = world.resume({intr.id: edit})
    assert tool_messages(done) == [("c1", "error", DENIED)]
    assert world.ran == []


async def test_the_sync_hooks_keep_the_store_inside_a_running_event_loop() -> None:
    store = MemoryStore()
    world = World(HumanInTheLoopMiddleware({"send_email": True}, store=store))
    world.start(("c1", "send_email", MAIL))  # invoke (sync) from async code
    done = world.resume({"decisions": [{"type": "approve"}], "reviewer": "alice"})
    assert tool_messages(done) == [("c1", "success", "sent to ann@example.com")]
    audit = (await store.load("langgraph:t1")).audit
    assert [(e.kind, e.actor) for e in audit] == [
        ("requested", None),
        ("decided", "alice"),
        ("executed", None),
    ]
