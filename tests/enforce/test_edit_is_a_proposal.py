"""An edit is a new proposal by its editor: a renamed call never steps around the policy.

eve may decide only ``send_note`` and ``post_status``; an edit of her review
into another tool is decided afresh, as if the model had proposed it: a deny
rule refuses it, an ask rule or the tool's policy puts it up for review by
the people who may decide it (eve's word never runs it), and a quorum tool
counts her vote only when she may decide that tool.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolguard import (
    Judge,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    ReviewerNotAllowedError,
    Rules,
    Runner,
    ScriptedModel,
    ToolCall,
    guard,
    requires_approval,
)
from toolguard.http import Reviewers

RULES = Rules(ask=["search_contacts"], deny=["drop_table"])

REVIEWERS = Reviewers(
    {
        "send_note": ["eve"],
        "post_status": ["eve", "frank"],
        "search_contacts": ["alice"],
        "wire_funds": ["alice", "bob"],
        "*": ["admin"],
    }
)

Ran = list[tuple[str, dict[str, Any]]]


def tools(ran: Ran) -> list[Any]:
    @requires_approval
    def send_note(text: str) -> str:
        """Send a note to the team."""
        ran.append(("send_note", {"text": text}))
        return f"noted {text}"

    def search_contacts(query: str) -> str:
        """Search the contact list."""
        ran.append(("search_contacts", {"query": query}))
        return f"contacts for {query}"

    @requires_approval(approvals=2)
    def post_status(text: str) -> str:
        """Post a public status update."""
        ran.append(("post_status", {"text": text}))
        return f"posted {text}"

    @requires_approval(approvals=2)
    def wire_funds(to: str, amount: int) -> str:
        """Wire money."""
        ran.append(("wire_funds", {"to": to, "amount": amount}))
        return f"wired {amount} to {to}"

    def drop_table(name: str) -> str:
        """Drop a table."""
        ran.append(("drop_table", {"name": name}))
        return f"dropped {name}"

    return [send_note, search_contacts, post_status, wire_funds, drop_table]


def chat(ran: Ran, first: ToolCall, *, authorize: Any = REVIEWERS) -> ReviewedChat:
    def react(messages: Any) -> ModelResponse:
        if messages[-1]["role"] == "user":
            return ModelResponse(tool_calls=[first])
        return ModelResponse(text=f"Result: {messages[-1]['content']}")

    return ReviewedChat(
        ScriptedModel([react], repeat=True),
        guard(tools(ran), rules=RULES),
        store=MemoryStore(),
        authorize=authorize,
    )


def edit(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "edit", "edited_action": {"name": name, "args": args}}]


NOTE = ToolCall(id="c1", name="send_note", args={"text": "hello"})
STATUS = ToolCall(id="c1", name="post_status", args={"text": "hello"})


def requests(turn: Any) -> list[dict[str, Any]]:
    assert turn.pending_review is not None
    return [r.model_dump() for r in turn.pending_review.action_requests]


def progress(turn: Any) -> list[Any]:
    assert turn.pending_review is not None
    return [
        c.approvals.model_dump() if c.approvals is not None else None
        for c in turn.pending_review.review_configs
    ]


async def test_a_rename_into_an_ask_ruled_tool_waits_for_its_own_reviewers() -> None:
    ran: Ran = []
    reviewed = chat(ran, NOTE)
    turn = await reviewed.send_message("note")
    turn = await reviewed.submit_review(
        edit("search_contacts", {"query": "*"}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="eve",
    )
    assert ran == []
    assert requests(turn) == [
        {
            "name": "search_contacts",
            "args": {"query": "*"},
            "description": "Tool `search_contacts` is awaiting approval",
        }
    ]
    # eve may not decide the new call; alice may.
    with pytest.raises(ReviewerNotAllowedError):
        await reviewed.submit_review(
            [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="eve"
        )
    assert ran == []
    done = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="alice"
    )
    assert ran == [("search_contacts", {"query": "*"})]
    assert done.reply == "Result: contacts for *"


async def test_a_rename_into_a_denied_call_is_refused() -> None:
    ran: Ran = []
    reviewed = chat(ran, NOTE)
    turn = await reviewed.send_message("note")
    done = await reviewed.submit_review(
        edit("drop_table", {"name": "users"}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="eve",
    )
    assert ran == []
    assert done.pending_review is None
    state = await reviewed.get_thread(turn.thread_id)
    assert state.messages[-2]["content"] == (
        "Denied by a rule, not executed: The call to `drop_table` is denied by the rule"
        " `deny drop_table`. It was not executed."
    )
    assert [a.status for a in state.actions] == ["failed"]


async def test_eves_rename_of_her_quorum_tool_is_no_vote_on_another_quorum_tool() -> None:
    ran: Ran = []
    reviewed = chat(ran, STATUS)
    turn = await reviewed.send_message("status")
    turn = await reviewed.submit_review(
        edit("wire_funds", {"to": "eve-acct", "amount": 9999}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="eve",
    )
    assert ran == []
    assert [r["name"] for r in requests(turn)] == ["wire_funds"]
    assert progress(turn) == [{"required": 2, "given": 0, "by": []}]
    turn = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="alice"
    )
    assert ran == []  # one approval of two: nothing runs on alice's word alone
    assert progress(turn) == [{"required": 2, "given": 1, "by": ["alice"]}]
    done = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert ran == [("wire_funds", {"to": "eve-acct", "amount": 9999})]
    assert done.pending_review is None


async def test_a_rename_of_a_single_approval_tool_into_a_quorum_tool_is_no_vote_either() -> None:
    ran: Ran = []
    reviewed = chat(ran, NOTE)
    turn = await reviewed.send_message("note")
    turn = await reviewed.submit_review(
        edit("wire_funds", {"to": "eve-acct", "amount": 9999}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="eve",
    )
    assert progress(turn) == [{"required": 2, "given": 0, "by": []}]
    turn = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="alice"
    )
    assert ran == []
    assert progress(turn) == [{"required": 2, "given": 1, "by": ["alice"]}]


async def test_an_editor_who_may_decide_the_quorum_tool_counts_once() -> None:
    ran: Ran = []
    reviewers = Reviewers({"send_note": ["alice"], "wire_funds": ["alice", "bob"]})
    reviewed = chat(ran, NOTE, authorize=reviewers)
    turn = await reviewed.send_message("note")
    turn = await reviewed.submit_review(
        edit("wire_funds", {"to": "acme", "amount": 5}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="alice",
    )
    assert ran == []
    assert progress(turn) == [{"required": 2, "given": 1, "by": ["alice"]}]
    done = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert ran == [("wire_funds", {"to": "acme", "amount": 5})]
    assert done.pending_review is None


async def test_a_same_tool_quorum_edit_counts_the_editor_only_when_listed() -> None:
    ran: Ran = []
    call = ToolCall(id="c1", name="wire_funds", args={"to": "acme", "amount": 5})
    reviewed = chat(ran, call)
    turn = await reviewed.send_message("pay")
    turn = await reviewed.submit_review(
        edit("wire_funds", {"to": "acme", "amount": 7}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="alice",
    )
    assert progress(turn) == [{"required": 2, "given": 1, "by": ["alice"]}]
    done = await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert ran == [("wire_funds", {"to": "acme", "amount": 7})]
    assert done.pending_review is None


async def test_an_authorize_hook_is_asked_with_the_new_tool_name() -> None:
    asked: list[tuple[str | None, list[str]]] = []

    def authorize(reviewer: str | None, thread: Any, actions: list[Any]) -> bool:
        asked.append((reviewer, [a.name for a in actions]))
        return reviewer == "root" or all(a.name == "send_note" for a in actions)

    ran: Ran = []
    reviewed = chat(ran, NOTE, authorize=authorize)
    turn = await reviewed.send_message("note")
    turn = await reviewed.submit_review(
        edit("search_contacts", {"query": "x"}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="eve",
    )
    assert asked == [("eve", ["send_note"]), ("eve", ["search_contacts"])]
    assert ran == []
    await reviewed.submit_review(
        [{"type": "approve"}], turn.thread_id, review_id=turn.review_id, reviewer="root"
    )
    assert ran == [("search_contacts", {"query": "x"})]


async def test_without_a_reviewer_list_a_rename_into_an_ask_ruled_tool_is_reviewed_again() -> None:
    ran: Ran = []
    reviewed = chat(ran, NOTE, authorize=None)
    turn = await reviewed.send_message("note")
    turn = await reviewed.submit_review(
        edit("search_contacts", {"query": "*"}), turn.thread_id, review_id=turn.review_id
    )
    assert ran == []
    assert [r["name"] for r in requests(turn)] == ["search_contacts"]
    # Without a reviewer list a same-tool edit still runs at once, as it always did.
    ran2: Ran = []
    reviewed = chat(ran2, NOTE, authorize=None)
    turn = await reviewed.send_message("note")
    done = await reviewed.submit_review(
        edit("send_note", {"text": "bye"}), turn.thread_id, review_id=turn.review_id
    )
    assert ran2 == [("send_note", {"text": "bye"})]
    assert done.pending_review is None


async def test_the_runner_decides_a_renamed_edit_afresh() -> None:
    ran: Ran = []
    runner = Runner(guard(tools(ran), rules=RULES))
    step = await runner.run([NOTE])
    assert step.pending is not None
    again = await runner.resume(step.pending, edit("search_contacts", {"query": "*"}))
    assert ran == []
    assert again.pending is not None
    assert [a.name for a in again.pending.actions] == ["search_contacts"]
    step = await runner.run([ToolCall(id="c2", name="send_note", args={"text": "x"})])
    assert step.pending is not None
    denied = await runner.resume(step.pending, edit("drop_table", {"name": "users"}))
    assert ran == []
    assert [r.outcome for r in denied.results] == ["denied"]


async def test_a_judge_never_approves_an_edited_call_on_its_own() -> None:
    """A judge that would allow anything: the model's call asks it, the edit's new call does not."""
    allow = (
        '{"risk": "low", "user_authorized": true, "outcome": "allow", "rationale": "Asked for."}'
    )
    judge = Judge(ScriptedModel([allow], repeat=True), auto_approve=True)
    ran: Ran = []
    rename = ToolCall(id="c1", name="wire_funds", args={"to": "acme", "amount": 5})

    def react(messages: Any) -> ModelResponse:
        if messages[-1]["role"] == "user":
            return ModelResponse(tool_calls=[rename])
        return ModelResponse(text=f"Result: {messages[-1]['content']}")

    reviewed = ReviewedChat(
        ScriptedModel([react], repeat=True),
        guard(tools(ran), rules=RULES),
        store=MemoryStore(),
        judge=judge,
    )
    turn = await reviewed.send_message("pay")  # a quorum tool: the judge never runs it
    assert ran == []
    turn = await reviewed.submit_review(
        edit("send_note", {"text": "paid"}),
        turn.thread_id,
        review_id=turn.review_id,
        reviewer="alice",
    )
    # The renamed call is a new review for a person, with no verdict of the judge's.
    assert ran == []
    assert requests(turn) == [
        {
            "name": "send_note",
            "args": {"text": "paid"},
            "description": "Tool `send_note` is awaiting approval",
        }
    ]
    assert [len(m.calls) for m in [judge.model]] == [1]  # asked about the model's call only
