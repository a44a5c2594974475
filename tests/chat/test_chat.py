"""Tests for the chat use case: ReviewedChat runs model and tools, pauses and resumes a thread."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import make_mail_tools
from toolguard import (
    REJECTED_BY_USER_MESSAGE,
    ApprovalRequiredError,
    ChatTurn,
    InvalidReviewDecisionError,
    Message,
    ModelError,
    ModelResponse,
    NoPendingReviewError,
    ReviewedChat,
    ReviewPendingError,
    ScriptedModel,
    StaleReviewError,
    StepLimitError,
    ToolCall,
    UnknownThreadError,
    requires_approval,
)
from toolguard._stores.memory import MemoryStore
from toolguard._stores.sqlite import SQLiteStore
from toolguard.records import Action
from toolguard.text import set_language

AnyStore = MemoryStore | SQLiteStore
Log = list[tuple[str, dict[str, Any]]]

SYSTEM = "You are a careful assistant."
ASK = "Tell Alice the meeting is at 10."
ALICE = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
ALICE_JSON = '{"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}'
BOB = {"to": "bob@example.com", "subject": "Meeting", "body": "The meeting is at 11."}
BOB_JSON = '{"to": "bob@example.com", "subject": "Meeting", "body": "The meeting is at 11."}'
NO_PENDING = "There is no action awaiting approval in this conversation"
NO_PENDING_ID = "Tidak ada aksi yang menunggu persetujuan di percakapan ini"
REVIEW_PENDING = "Some actions are still awaiting approval. Send their decisions first."
REVIEW_PENDING_ID = "Masih ada aksi yang menunggu persetujuan. Kirim keputusannya dulu."
APPROVE = {"type": "approve"}


# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "chat.db") as sqlite_store:
            yield sqlite_store


def make_tools(log: Log) -> list[Callable[..., Any]]:
    """send_email and delete_file (guarded by the classifier) and search (not), logging each run."""
    return make_mail_tools(log, with_delete_file=True)


def make_chat(
    store: AnyStore | None,
    script: Sequence[Any],
    log: Log,
    *,
    max_steps: int = 8,
    repeat: bool = False,
) -> tuple[ReviewedChat, ScriptedModel]:
    """A chat over the logged tools, with the system prompt and a scripted model."""
    model = ScriptedModel(script, repeat=repeat)
    chat = ReviewedChat(
        model, make_tools(log), store=store, system_prompt=SYSTEM, max_steps=max_steps
    )
    return chat, model


def tc(call_id: str, name: str, **args: Any) -> ToolCall:
    """A scripted tool call."""
    return ToolCall(id=call_id, name=name, args=args)


def calls(*tool_calls: ToolCall, text: str | None = None) -> ModelResponse:
    """A model turn proposing ``tool_calls``."""
    return ModelResponse(text=text, tool_calls=list(tool_calls))


def system() -> Message:
    """The system prompt message."""
    return {"role": "system", "content": SYSTEM}


def user(text: str) -> Message:
    """A user message."""
    return {"role": "user", "content": text}


def assistant(text: str) -> Message:
    """A text-only assistant message."""
    return {"role": "assistant", "content": text}


def assistant_calls(*items: tuple[str, str, str], text: str | None = None) -> Message:
    """An assistant message with ``(id, name, arguments JSON text)`` tool calls."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            for cid, name, arguments in items
        ],
    }


def tool_msg(call_id: str, content: str, status: str = "success") -> Message:
    """A tool result message as the chat stores it."""
    return {"role": "tool", "tool_call_id": call_id, "content": content, "status": status}


def request(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One English action request of the payload."""
    return {"name": name, "args": args, "description": f"Tool `{name}` is awaiting approval"}


def config(name: str) -> dict[str, Any]:
    """One review config of the payload."""
    return {"action_name": name, "allowed_decisions": ["approve", "edit", "reject"]}


def view(action: Action) -> dict[str, Any]:
    """An action as a dict without its random id and its timestamps."""
    # Deadlines, digests and reviewers are covered by tests/chat/test_trust.py.
    return action.model_dump(
        exclude={
            "id",
            "requested_at",
            "decided_at",
            "finished_at",
            "expires_at",
            "digest",
            "reviewer",
        }
    )


def requested(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The view of a freshly requested action."""
    return {
        "call_id": call_id,
        "name": name,
        "args": args,
        "description": f"Tool `{name}` is awaiting approval",
        "status": "requested",
        "decision": None,
        "result": None,
    }


def result(
    call_id: str,
    name: str,
    content: str,
    *,
    value: Any = None,
    ok: bool = True,
    outcome: str | None = None,
) -> dict[str, Any]:
    """A tool result dict (``outcome`` only for results that are not a plain success)."""
    dumped = {
        "call_id": call_id,
        "name": name,
        "status": "success" if ok else "error",
        "content": content,
        "value": value,
    }
    return dumped if outcome is None else {**dumped, "outcome": outcome}


async def pause_on_alice(chat: ReviewedChat) -> ChatTurn:
    """Send the meeting request; the script's first step proposes send_email to Alice."""
    turn = await chat.send_message(ASK)
    assert turn.pending_review is not None
    return turn


# --- plain replies --------------------------------------------------------------------------------


async def test_text_reply_stores_the_whole_history(store: AnyStore) -> None:
    """A text answer gives a ChatTurn with only the reply and stores system, user, assistant."""
    log: Log = []
    chat, model = make_chat(store, ["Hello! How can I help?", "Still here."], log)

    turn = await chat.send_message("Hi")

    assert turn == ChatTurn(thread_id=turn.thread_id, reply="Hello! How can I help?")
    assert turn.pending_review is None
    assert turn.review_id is None
    assert turn.actions == []
    assert turn.to_dict() == {
        "thread_id": turn.thread_id,
        "reply": "Hello! How can I help?",
        "pending_review": None,
        "review_id": None,
    }
    state = await chat.get_thread(turn.thread_id)
    assert state.messages == [system(), user("Hi"), assistant("Hello! How can I help?")]
    assert (state.version, state.status, state.pending, state.decisions, state.actions) == (
        1,
        "idle",
        None,
        None,
        [],
    )
    assert model.calls == [[system(), user("Hi")]]

    again = await chat.send_message("Are you there?", turn.thread_id)

    assert again == ChatTurn(thread_id=turn.thread_id, reply="Still here.")
    state = await chat.get_thread(turn.thread_id)
    assert state.messages == [
        system(),
        user("Hi"),
        assistant("Hello! How can I help?"),
        user("Are you there?"),
        assistant("Still here."),
    ]
    assert state.version == 2
    assert log == []


async def test_thread_without_system_prompt_starts_with_the_user(store: AnyStore) -> None:
    """Without a system prompt the stored history starts with the user's message."""
    chat = ReviewedChat(ScriptedModel(["Hi!"]), make_tools([]), store=store)
    turn = await chat.send_message("Hello")
    assert (await chat.get_thread(turn.thread_id)).messages == [user("Hello"), assistant("Hi!")]


# --- pausing ------------------------------------------------------------------------------------


async def test_guarded_call_pauses_with_the_spec_payload(store: AnyStore) -> None:
    """A guarded call does not run: the turn carries the whole payload, review_id and actions."""
    log: Log = []
    chat, model = make_chat(store, [calls(tc("call_1", "send_email", **ALICE))], log)

    turn = await chat.send_message(ASK)

    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "send_email",
                "args": {
                    "to": "alice@example.com",
                    "subject": "Meeting",
                    "body": "The meeting is at 10.",
                },
                "description": "Tool `send_email` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert turn.reply is None
    assert isinstance(turn.review_id, str)
    assert len(turn.review_id) == 32
    assert [view(a) for a in turn.actions] == [requested("call_1", "send_email", ALICE)]
    assert turn.to_dict() == {
        "thread_id": turn.thread_id,
        "reply": None,
        "pending_review": turn.pending_review.model_dump(),
        "review_id": turn.review_id,
    }
    assert log == []

    state = await chat.get_thread(turn.thread_id)
    assert state.status == "awaiting_review"
    assert state.version == 1
    assert state.review_id == turn.review_id
    assert state.pending is not None
    assert state.pending.pending_review == turn.pending_review
    assert state.decisions is None
    assert state.actions == turn.actions
    assert state.messages == [
        system(),
        user(ASK),
        assistant_calls(("call_1", "send_email", ALICE_JSON)),
    ]
    assert model.calls == [[system(), user(ASK)]]


async def test_paused_payload_equals_a_direct_call_of_the_guarded_function(
    store: AnyStore,
) -> None:
    """ChatTurn.pending_review equals ApprovalRequiredError.pending_review for the same args."""
    log: Log = []
    send_email, search, _ = make_tools(log)
    guarded_send = requires_approval(send_email)
    args = {"to": "chloé@example.com", "subject": "Réunion", "body": "À 10 h."}
    chat = ReviewedChat(
        ScriptedModel([calls(tc("call_1", "send_email", **args))]),
        [guarded_send, search],
        store=store,
    )

    turn = await chat.send_message(ASK)
    with pytest.raises(ApprovalRequiredError) as info:
        guarded_send(**args)

    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == info.value.pending_review.model_dump()
    assert turn.pending_review.model_dump() == {
        "action_requests": [request("send_email", args)],
        "review_configs": [config("send_email")],
    }
    assert log == []


async def test_indonesian_payload_is_the_spec_example_word_for_word(store: AnyStore) -> None:
    """With set_language("id") the payload is exactly the SPEC §1 example."""
    set_language("id")
    chat, _ = make_chat(store, [calls(tc("call_1", "send_email", **ALICE))], [])

    turn = await chat.send_message(ASK)

    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "send_email",
                "args": {
                    "to": "alice@example.com",
                    "subject": "Meeting",
                    "body": "The meeting is at 10.",
                },
                "description": "Tool `send_email` menunggu persetujuan",
            }
        ],
        "review_configs": [
            {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }


async def test_only_guarded_calls_are_listed_in_call_order(store: AnyStore) -> None:
    """Unguarded calls of the turn run at once and are not listed; guarded ones keep their order."""
    log: Log = []
    turn_calls = calls(
        tc("call_1", "delete_file", path="a.txt"),
        tc("call_2", "search", query="meeting"),
        tc("call_3", "send_email", **ALICE),
    )
    chat, _ = make_chat(store, [turn_calls], log)

    turn = await chat.send_message(ASK)

    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == {
        "action_requests": [
            request("delete_file", {"path": "a.txt"}),
            request("send_email", ALICE),
        ],
        "review_configs": [config("delete_file"), config("send_email")],
    }
    assert log == [("search", {"query": "meeting"})]


# --- what happens after the decisions -------------------------------------------------------------


async def test_approve_runs_the_tool_and_the_model_gets_the_result(store: AnyStore) -> None:
    """Approve runs the proposed call once; the model reads its result and answers."""
    log: Log = []
    chat, model = make_chat(
        store, [calls(tc("call_1", "send_email", **ALICE)), "Done: Alice knows."], log
    )
    paused = await pause_on_alice(chat)

    turn = await chat.submit_review([APPROVE], paused.thread_id)

    assert turn.reply == "Done: Alice knows."
    assert turn.pending_review is None
    assert turn.review_id is None
    assert turn.thread_id == paused.thread_id
    assert log == [("send_email", ALICE)]
    history = [
        system(),
        user(ASK),
        assistant_calls(("call_1", "send_email", ALICE_JSON)),
        tool_msg("call_1", "Email sent to alice@example.com"),
    ]
    assert model.calls[1] == history
    state = await chat.get_thread(paused.thread_id)
    assert state.messages == [*history, assistant("Done: Alice knows.")]
    assert (state.status, state.pending, state.decisions) == ("idle", None, None)


async def test_reject_with_reason_still_runs_the_unguarded_calls(store: AnyStore) -> None:
    """Reject: the guarded call does not run, the turn's unguarded one did; the model reads why."""
    log: Log = []
    turn_calls = calls(tc("call_1", "search", query="meeting"), tc("call_2", "send_email", **ALICE))
    chat, model = make_chat(store, [turn_calls, "Understood, I will not email Alice."], log)
    paused = await chat.send_message(ASK)

    turn = await chat.submit_review(
        [{"type": "reject", "message": "Do not email Alice."}], paused.thread_id
    )

    assert turn.reply == "Understood, I will not email Alice."
    assert log == [("search", {"query": "meeting"})]
    history = [
        system(),
        user(ASK),
        assistant_calls(
            ("call_1", "search", '{"query": "meeting"}'), ("call_2", "send_email", ALICE_JSON)
        ),
        tool_msg("call_1", '["result for meeting"]'),
        tool_msg("call_2", "Rejected by the reviewer, not executed: Do not email Alice.", "error"),
    ]
    assert model.calls[1] == history
    state = await chat.get_thread(paused.thread_id)
    assert state.messages == [*history, assistant("Understood, I will not email Alice.")]


async def test_approve_runs_the_guarded_call_without_repeating_the_unguarded_one(
    store: AnyStore,
) -> None:
    """On approve only the calls without a result run: the unguarded call of the turn ran once."""
    log: Log = []
    turn_calls = calls(tc("call_1", "search", query="meeting"), tc("call_2", "send_email", **ALICE))
    chat, model = make_chat(store, [turn_calls, "Sent."], log)
    paused = await chat.send_message(ASK)

    await chat.submit_review([APPROVE], paused.thread_id)

    assert log == [("search", {"query": "meeting"}), ("send_email", ALICE)]
    assert model.calls[1][-2:] == [
        tool_msg("call_1", '["result for meeting"]'),
        tool_msg("call_2", "Email sent to alice@example.com"),
    ]


async def test_all_rejected_runs_nothing_and_the_model_reads_each_reason(store: AnyStore) -> None:
    """All calls rejected: nothing runs; the model reads each reason or REJECTED_BY_USER_MESSAGE."""
    log: Log = []
    turn_calls = calls(
        tc("call_1", "send_email", **ALICE),
        tc("call_2", "delete_file", path="a.txt"),
        tc("call_3", "delete_file", path="b.txt"),
    )
    chat, model = make_chat(store, [turn_calls, "Nothing was done."], log)
    paused = await chat.send_message(ASK)

    turn = await chat.submit_review(
        [
            {"type": "reject", "message": "Wrong recipient"},
            {"type": "reject"},
            {"type": "reject", "message": ""},
        ],
        paused.thread_id,
    )

    assert turn.reply == "Nothing was done."
    assert log == []
    assert REJECTED_BY_USER_MESSAGE == "User rejected this action. It was not executed."
    assert model.calls[1][-3:] == [
        tool_msg("call_1", "Rejected by the reviewer, not executed: Wrong recipient", "error"),
        tool_msg("call_2", REJECTED_BY_USER_MESSAGE, "error"),
        tool_msg("call_3", REJECTED_BY_USER_MESSAGE, "error"),
    ]
    assert [a.status for a in turn.actions] == ["rejected", "rejected", "rejected"]


async def test_approve_ignores_a_message_field(store: AnyStore) -> None:
    """A message on an approve does nothing: the tool runs and the model reads its result."""
    log: Log = []
    chat, model = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Sent."], log)
    paused = await pause_on_alice(chat)

    await chat.submit_review([{"type": "approve", "message": "no!"}], paused.thread_id)

    assert log == [("send_email", ALICE)]
    assert model.calls[1][-1] == tool_msg("call_1", "Email sent to alice@example.com")


async def test_a_new_guarded_call_after_resuming_pauses_with_a_new_review(store: AnyStore) -> None:
    """After resuming, another guarded call pauses again with a new review_id and payload."""
    log: Log = []
    script = [
        calls(tc("call_1", "send_email", **ALICE)),
        calls(tc("call_2", "delete_file", path="draft.txt"), text="Now the draft."),
        "All done.",
    ]
    chat, model = make_chat(store, script, log)
    first = await pause_on_alice(chat)

    second = await chat.submit_review([APPROVE], first.thread_id)

    assert second.reply is None
    assert second.review_id is not None
    assert second.review_id != first.review_id
    assert second.pending_review is not None
    assert second.pending_review.model_dump() == {
        "action_requests": [request("delete_file", {"path": "draft.txt"})],
        "review_configs": [config("delete_file")],
    }
    assert [(a.call_id, a.status) for a in second.actions] == [
        ("call_1", "executed"),
        ("call_2", "requested"),
    ]
    assert log == [("send_email", ALICE)]
    state = await chat.get_thread(first.thread_id)
    assert state.status == "awaiting_review"
    assert state.review_id == second.review_id
    assert state.messages == [
        system(),
        user(ASK),
        assistant_calls(("call_1", "send_email", ALICE_JSON)),
        tool_msg("call_1", "Email sent to alice@example.com"),
        assistant_calls(("call_2", "delete_file", '{"path": "draft.txt"}'), text="Now the draft."),
    ]

    third = await chat.submit_review([APPROVE], first.thread_id)

    assert third == ChatTurn(
        thread_id=first.thread_id, reply="All done.", actions=list(third.actions)
    )
    assert [(a.call_id, a.status) for a in third.actions] == [("call_2", "executed")]
    assert log == [("send_email", ALICE), ("delete_file", {"path": "draft.txt"})]
    assert model.calls[2][-1] == tool_msg("call_2", "deleted draft.txt")


async def test_edit_rewrites_the_stored_call_and_runs_the_edited_args(store: AnyStore) -> None:
    """Edit runs edited_action's args and replaces the call (same id) in the stored history."""
    log: Log = []
    chat, model = make_chat(
        store, [calls(tc("call_1", "send_email", **ALICE), text="Sending."), "Sent to Bob."], log
    )
    paused = await pause_on_alice(chat)

    turn = await chat.submit_review(
        [{"type": "edit", "edited_action": {"name": "send_email", "args": BOB}}],
        paused.thread_id,
    )

    assert turn.reply == "Sent to Bob."
    assert log == [("send_email", BOB)]
    history = [
        system(),
        user(ASK),
        assistant_calls(("call_1", "send_email", BOB_JSON), text="Sending."),
        tool_msg("call_1", "Email sent to bob@example.com"),
    ]
    assert model.calls[1] == history
    state = await chat.get_thread(paused.thread_id)
    assert state.messages == [*history, assistant("Sent to Bob.")]
    assert [view(a) for a in state.actions] == [
        {
            **requested("call_1", "send_email", ALICE),
            "status": "executed",
            "decision": {"type": "edit", "edited_action": {"name": "send_email", "args": BOB}},
            "result": result(
                "call_1",
                "send_email",
                "Email sent to bob@example.com",
                value="Email sent to bob@example.com",
            ),
        }
    ]


async def test_edit_with_args_that_break_the_schema_fails_without_running(store: AnyStore) -> None:
    """Edited args that break the schema: the tool does not run, the model reads which field."""
    log: Log = []
    chat, model = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Sorry."], log)
    paused = await pause_on_alice(chat)
    edited = {"to": "bob@example.com", "cc": "carol@example.com"}

    turn = await chat.submit_review(
        [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}],
        paused.thread_id,
    )

    text = (
        "Invalid arguments for tool `send_email`: 'subject': Field required;"
        " 'body': Field required; 'cc': Extra inputs are not permitted"
    )
    assert log == []
    assert model.calls[1][-2:] == [
        assistant_calls(
            ("call_1", "send_email", '{"to": "bob@example.com", "cc": "carol@example.com"}')
        ),
        tool_msg("call_1", f"Error, not executed: {text}", "error"),
    ]
    assert [a.status for a in turn.actions] == ["failed"]
    assert turn.actions[0].result is not None
    assert turn.actions[0].result.model_dump() == result(
        "call_1", "send_email", text, ok=False, outcome="invalid_arguments"
    )
    assert (await chat.get_thread(paused.thread_id)).status == "idle"


async def test_edit_to_another_guarded_tool_is_reviewed_again(store: AnyStore) -> None:
    """An edit switching to another guarded tool pauses with a new review; nothing runs before."""
    log: Log = []
    chat, model = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Deleted."], log)
    paused = await pause_on_alice(chat)

    again = await chat.submit_review(
        [{"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "x.txt"}}}],
        paused.thread_id,
    )

    assert log == []
    assert again.review_id is not None
    assert again.review_id != paused.review_id
    assert again.pending_review is not None
    assert again.pending_review.model_dump() == {
        "action_requests": [request("delete_file", {"path": "x.txt"})],
        "review_configs": [config("delete_file")],
    }
    assert [(a.call_id, a.name, a.status) for a in again.actions] == [
        ("call_1", "send_email", "edited"),
        ("call_1", "delete_file", "requested"),
    ]
    state = await chat.get_thread(paused.thread_id)
    edited_call = assistant_calls(("call_1", "delete_file", '{"path": "x.txt"}'))
    assert state.messages == [system(), user(ASK), edited_call]
    assert state.status == "awaiting_review"

    done = await chat.submit_review([APPROVE], paused.thread_id)

    assert done.reply == "Deleted."
    assert log == [("delete_file", {"path": "x.txt"})]
    assert model.calls[1] == [system(), user(ASK), edited_call, tool_msg("call_1", "deleted x.txt")]


# --- lifecycle of the actions -------------------------------------------------------------------


async def test_action_statuses_across_the_lifecycle(store: AnyStore) -> None:
    """requested at the pause, then executed / failed / rejected / executed (edited) after it."""
    log: Log = []
    turn_calls = calls(
        tc("call_1", "send_email", **ALICE),
        tc("call_2", "delete_file", path="/"),
        tc("call_3", "delete_file", path="old.txt"),
        tc("call_4", "send_email", **ALICE),
    )
    chat, _ = make_chat(store, [turn_calls, "Some of it worked."], log)

    paused = await chat.send_message(ASK)

    at_pause = [
        requested("call_1", "send_email", ALICE),
        requested("call_2", "delete_file", {"path": "/"}),
        requested("call_3", "delete_file", {"path": "old.txt"}),
        requested("call_4", "send_email", ALICE),
    ]
    assert [view(a) for a in paused.actions] == at_pause
    paused_state = await chat.get_thread(paused.thread_id)
    assert paused_state.actions == paused.actions
    assert len({a.id for a in paused.actions}) == 4
    assert all(a.decided_at is None and a.finished_at is None for a in paused.actions)

    turn = await chat.submit_review(
        [
            APPROVE,
            APPROVE,
            {"type": "reject", "message": "Keep it."},
            {"type": "edit", "edited_action": {"name": "send_email", "args": BOB}},
        ],
        paused.thread_id,
    )

    sent_alice = "Email sent to alice@example.com"
    sent_bob = "Email sent to bob@example.com"
    finished = [
        {
            **at_pause[0],
            "status": "executed",
            "decision": {"type": "approve"},
            "result": result("call_1", "send_email", sent_alice, value=sent_alice),
        },
        {
            **at_pause[1],
            "status": "failed",
            "decision": {"type": "approve"},
            "result": result(
                "call_2",
                "delete_file",
                "Tool `delete_file` failed: RuntimeError: refusing to delete /",
                ok=False,
                outcome="failed",
            ),
        },
        {
            **at_pause[2],
            "status": "rejected",
            "decision": {"type": "reject", "message": "Keep it."},
            "result": result("call_3", "delete_file", "Keep it.", ok=False, outcome="rejected"),
        },
        {
            **at_pause[3],
            "status": "executed",
            "decision": {"type": "edit", "edited_action": {"name": "send_email", "args": BOB}},
            "result": result("call_4", "send_email", sent_bob, value=sent_bob),
        },
    ]
    assert [view(a) for a in turn.actions] == finished
    state = await chat.get_thread(paused.thread_id)
    assert state.actions == turn.actions
    assert [a.id for a in state.actions] == [a.id for a in paused.actions]
    assert [a.requested_at for a in state.actions] == [a.requested_at for a in paused.actions]
    assert all(a.decided_at is not None and a.finished_at is not None for a in state.actions)
    assert sorted(log, key=repr) == sorted(
        [("send_email", ALICE), ("delete_file", {"path": "/"}), ("send_email", BOB)], key=repr
    )


async def test_thread_actions_accumulate_over_turns(store: AnyStore) -> None:
    """ThreadState.actions keeps every request of the thread; ChatTurn.actions only this call's."""
    script = [
        calls(tc("call_1", "send_email", **ALICE)),
        "Sent.",
        calls(tc("call_2", "delete_file", path="x.txt")),
    ]
    chat, _ = make_chat(store, script, [])
    first = await pause_on_alice(chat)
    await chat.submit_review([APPROVE], first.thread_id)

    second = await chat.send_message("Delete x.txt", first.thread_id)

    assert [view(a) for a in second.actions] == [
        requested("call_2", "delete_file", {"path": "x.txt"})
    ]
    state = await chat.get_thread(first.thread_id)
    assert [(a.call_id, a.status) for a in state.actions] == [
        ("call_1", "executed"),
        ("call_2", "requested"),
    ]


# --- refused calls change nothing ---------------------------------------------------------------


@pytest.mark.parametrize(("language", "text"), [("en", REVIEW_PENDING), ("id", REVIEW_PENDING_ID)])
async def test_send_message_while_pending_is_refused(
    store: AnyStore, language: str, text: str
) -> None:
    """A user message while a review is pending raises ReviewPendingError and changes nothing."""
    set_language(language)
    log: Log = []
    chat, model = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Sent."], log)
    paused = await pause_on_alice(chat)
    before = await chat.get_thread(paused.thread_id)

    with pytest.raises(ReviewPendingError) as info:
        await chat.send_message("Also tell Bob.", paused.thread_id)

    assert str(info.value) == text
    assert await chat.get_thread(paused.thread_id) == before
    assert len(model.calls) == 1
    turn = await chat.submit_review([APPROVE], paused.thread_id)
    assert turn.reply == "Sent."
    assert log == [("send_email", ALICE)]


@pytest.mark.parametrize(("language", "text"), [("en", NO_PENDING), ("id", NO_PENDING_ID)])
async def test_submit_review_without_pending_is_refused(
    store: AnyStore, language: str, text: str
) -> None:
    """submit_review on an idle thread raises NoPendingReviewError (before any validation)."""
    set_language(language)
    chat, _ = make_chat(store, ["Hello."], [])
    turn = await chat.send_message("Hi")
    before = await chat.get_thread(turn.thread_id)

    for decisions in ([APPROVE], [], "not a list"):
        with pytest.raises(NoPendingReviewError) as info:
            await chat.submit_review(decisions, turn.thread_id)
        assert str(info.value) == text
    assert await chat.get_thread(turn.thread_id) == before


EDIT_NO_ACTION = {"type": "edit"}
EDIT_BAD_NAME = {"type": "edit", "edited_action": {"name": 7, "args": {}}}
EDIT_BAD_ARGS = {"type": "edit", "edited_action": {"name": "send_email", "args": []}}
CHOICES = "Choices: ['approve', 'edit', 'reject']"

INVALID_CASES: list[tuple[Any, str, str]] = [
    (
        [],
        "Expected 2 decisions (one per action), got 0",
        "Butuh 2 keputusan (satu per aksi), diterima 0",
    ),
    (
        [APPROVE],
        "Expected 2 decisions (one per action), got 1",
        "Butuh 2 keputusan (satu per aksi), diterima 1",
    ),
    (
        [{"type": "postpone"}, EDIT_NO_ACTION, APPROVE],
        "Expected 2 decisions (one per action), got 3",
        "Butuh 2 keputusan (satu per aksi), diterima 3",
    ),
    (
        [APPROVE, {"type": "postpone"}],
        f"Unknown decision type 'postpone'. {CHOICES}",
        "Jenis keputusan 'postpone' tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        [{"type": "postpone"}, EDIT_NO_ACTION],
        f"Unknown decision type 'postpone'. {CHOICES}",
        "Jenis keputusan 'postpone' tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        [None, APPROVE],
        f"Unknown decision type None. {CHOICES}",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        [EDIT_NO_ACTION, {"type": "postpone"}],
        "An 'edit' decision must include 'edited_action'",
        "Keputusan 'edit' wajib menyertakan 'edited_action'",
    ),
    (
        [EDIT_BAD_NAME, EDIT_NO_ACTION],
        "'edited_action' must contain 'name' (text) and 'args' (object)",
        "'edited_action' harus berisi 'name' (teks) dan 'args' (objek)",
    ),
    (
        [APPROVE, EDIT_BAD_ARGS],
        "'edited_action' must contain 'name' (text) and 'args' (object)",
        "'edited_action' harus berisi 'name' (teks) dan 'args' (objek)",
    ),
    (
        {"decisions": [APPROVE, APPROVE]},
        "'decisions' must be a list of decision objects, got dict",
        "'decisions' harus berupa daftar objek keputusan, diterima dict",
    ),
]


@pytest.mark.parametrize("language", ["en", "id"])
@pytest.mark.parametrize(
    ("decisions", "english", "indonesian"),
    INVALID_CASES,
    ids=[
        "empty",
        "one-for-two",
        "three-for-two",
        "second-type",
        "first-type-before-edit",
        "not-an-object",
        "edit-without-action-first",
        "edited-action-bad-name",
        "edited-action-bad-args",
        "not-a-list",
    ],
)
async def test_invalid_decisions_are_refused_in_spec_order_and_change_nothing(
    store: AnyStore, decisions: Any, english: str, indonesian: str, language: str
) -> None:
    """Count, then each decision (type, then edited_action) in order; the thread stays identical."""
    set_language(language)
    log: Log = []
    turn_calls = calls(tc("call_1", "send_email", **ALICE), tc("call_2", "delete_file", path="x"))
    chat, model = make_chat(store, [turn_calls, "Done."], log)
    paused = await chat.send_message(ASK)
    before = await chat.get_thread(paused.thread_id)

    with pytest.raises(InvalidReviewDecisionError) as info:
        await chat.submit_review(decisions, paused.thread_id)

    assert str(info.value) == (english if language == "en" else indonesian)
    assert await chat.get_thread(paused.thread_id) == before
    assert log == []
    assert len(model.calls) == 1
    turn = await chat.submit_review([APPROVE, {"type": "reject"}], paused.thread_id)
    assert turn.reply == "Done."
    assert log == [("send_email", ALICE)]


async def test_unknown_thread_id_is_refused_everywhere(store: AnyStore) -> None:
    """send_message, submit_review and get_thread raise UnknownThreadError; no thread is created."""
    chat, model = make_chat(store, ["Hello."], [])
    text = "Unknown thread_id 'nope': start a conversation with send_message"

    with pytest.raises(UnknownThreadError) as sent:
        await chat.send_message("Hi", "nope")
    with pytest.raises(UnknownThreadError) as submitted:
        await chat.submit_review([APPROVE], "nope")
    with pytest.raises(UnknownThreadError) as read:
        await chat.get_thread("nope")

    assert [str(e.value) for e in (sent, submitted, read)] == [text, text, text]
    assert [e.value.thread_id for e in (sent, submitted, read)] == ["nope", "nope", "nope"]
    assert await store.thread_ids() == []
    assert model.calls == []


async def test_bad_arguments_are_refused_before_anything_is_stored(store: AnyStore) -> None:
    """A non-text message raises TypeError and max_steps below 1 raises ValueError."""
    chat, model = make_chat(store, ["Hello."], [])
    message: Any = 42

    with pytest.raises(TypeError) as typed:
        await chat.send_message(message)
    with pytest.raises(ValueError, match=r"^max_steps must be at least 1, got 0$") as steps:
        make_chat(store, [], [], max_steps=0)

    assert str(typed.value) == "message must be text, got int"
    assert str(steps.value) == "max_steps must be at least 1, got 0"
    assert await store.thread_ids() == []
    assert model.calls == []


# --- step limit and model errors ------------------------------------------------------------------


def searching_model() -> Callable[[Sequence[Message]], ModelResponse]:
    """A model step that keeps calling search, until the user says 'Just answer.'."""

    def step(messages: Sequence[Message]) -> ModelResponse:
        if messages[-1] == user("Just answer."):
            return ModelResponse(text="Here is my answer.")
        return calls(tc(f"call_{len(messages)}", "search", query="more"))

    return step


async def test_step_limit_saves_the_thread_and_it_can_go_on(store: AnyStore) -> None:
    """A model that never stops calling tools hits StepLimitError; the work is saved and usable."""
    log: Log = []
    chat, model = make_chat(store, [searching_model()], log, max_steps=3, repeat=True)

    with pytest.raises(StepLimitError) as info:
        await chat.send_message("Find everything.")

    assert str(info.value) == (
        "The model called tools for 3 steps without answering;"
        " the thread is saved and can go on with a new message."
    )
    assert len(model.calls) == 3
    assert log == [("search", {"query": "more"})] * 3
    thread_ids = await store.thread_ids()
    assert len(thread_ids) == 1
    state = await chat.get_thread(thread_ids[0])
    found = '["result for more"]'
    assert state.messages == [
        system(),
        user("Find everything."),
        assistant_calls(("call_2", "search", '{"query": "more"}')),
        tool_msg("call_2", found),
        assistant_calls(("call_4", "search", '{"query": "more"}')),
        tool_msg("call_4", found),
        assistant_calls(("call_6", "search", '{"query": "more"}')),
        tool_msg("call_6", found),
    ]
    assert (state.status, state.pending, state.version) == ("idle", None, 3)

    turn = await chat.send_message("Just answer.", state.thread_id)

    assert turn == ChatTurn(thread_id=state.thread_id, reply="Here is my answer.")
    final = await chat.get_thread(state.thread_id)
    assert final.messages == [
        *state.messages,
        user("Just answer."),
        assistant("Here is my answer."),
    ]


async def test_model_error_on_a_new_thread_creates_nothing(store: AnyStore) -> None:
    """A failing model on the first message raises ModelError and stores no thread."""
    chat, _ = make_chat(store, [], [])

    with pytest.raises(ModelError) as info:
        await chat.send_message("Hi")

    assert str(info.value) == "ScriptedModel ran out of script after 0 responses"
    assert await store.thread_ids() == []


async def test_model_error_leaves_an_existing_thread_unchanged(store: AnyStore) -> None:
    """A failing model on a later message raises ModelError; the stored thread is identical."""
    chat, _ = make_chat(store, ["Hello."], [])
    turn = await chat.send_message("Hi")
    before = await chat.get_thread(turn.thread_id)

    with pytest.raises(ModelError) as info:
        await chat.send_message("Again?", turn.thread_id)

    assert str(info.value) == "ScriptedModel ran out of script after 1 responses"
    assert await chat.get_thread(turn.thread_id) == before
    assert await store.thread_ids() == [turn.thread_id]


async def test_model_error_after_approval_keeps_the_tool_result(store: AnyStore) -> None:
    """The model failing after an approved tool ran: the result is saved and the thread is idle."""
    log: Log = []
    chat, _ = make_chat(store, [calls(tc("call_1", "send_email", **ALICE))], log)
    paused = await pause_on_alice(chat)

    with pytest.raises(ModelError):
        await chat.submit_review([APPROVE], paused.thread_id)

    assert log == [("send_email", ALICE)]
    state = await chat.get_thread(paused.thread_id)
    assert state.messages == [
        system(),
        user(ASK),
        assistant_calls(("call_1", "send_email", ALICE_JSON)),
        tool_msg("call_1", "Email sent to alice@example.com"),
    ]
    assert (state.status, state.pending, state.decisions) == ("idle", None, None)
    assert [a.status for a in state.actions] == ["executed"]
    with pytest.raises(NoPendingReviewError):
        await chat.submit_review([APPROVE], paused.thread_id)
    assert log == [("send_email", ALICE)]


# --- classification, sync use -------------------------------------------------------------------


async def test_plain_tool_list_is_auto_classified(store: AnyStore) -> None:
    """Plain functions are classified: send_email and delete_file guarded, search runs freely."""
    log: Log = []
    script = [
        calls(tc("call_1", "search", query="meeting")),
        calls(tc("call_2", "send_email", **ALICE)),
        "Sent.",
    ]
    chat, _ = make_chat(store, script, log)

    assert chat.toolset.guarded == ["send_email", "delete_file"]
    explained = chat.toolset.explain("send_email")
    assert (explained.needs_approval, explained.matched_verb) == (True, "send")
    assert chat.toolset.explain("search").needs_approval is False

    turn = await chat.send_message(ASK)

    assert log == [("search", {"query": "meeting"})]
    assert turn.pending_review is not None
    assert [r.name for r in turn.pending_review.action_requests] == ["send_email"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_blocking_session_from_sync_code(tmp_path: Path, kind: str) -> None:
    """chat.blocking() runs send_message, submit_review and get_thread from plain sync code."""
    log: Log = []
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "sync.db")
    chat, _ = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Sent."], log)

    with contextlib.ExitStack() as stack:
        if isinstance(store, SQLiteStore):
            stack.callback(store.close)
        session = stack.enter_context(chat.blocking())
        paused = session.send_message(ASK)
        assert paused.pending_review is not None
        assert session.get_thread(paused.thread_id).status == "awaiting_review"
        turn = session.submit_review([APPROVE], paused.thread_id)
        assert turn == ChatTurn(thread_id=paused.thread_id, reply="Sent.", actions=turn.actions)
        assert session.get_thread(paused.thread_id).status == "idle"
        with pytest.raises(NoPendingReviewError):
            session.submit_review([APPROVE], paused.thread_id)

    assert log == [("send_email", ALICE)]


# --- double and concurrent submissions -----------------------------------------------------------


async def test_double_submit_runs_the_tool_once(store: AnyStore) -> None:
    """Submitting the same decisions twice: the second raises NoPendingReviewError, one run."""
    log: Log = []
    chat, _ = make_chat(store, [calls(tc("call_1", "send_email", **ALICE)), "Sent."], log)
    paused = await pause_on_alice(chat)

    first = await chat.submit_review([APPROVE], paused.thread_id)
    after_first = await chat.get_thread(paused.thread_id)
    with pytest.raises(NoPendingReviewError) as info:
        await chat.submit_review([APPROVE], paused.thread_id)

    assert first.reply == "Sent."
    assert str(info.value) == NO_PENDING
    assert log == [("send_email", ALICE)]
    assert await chat.get_thread(paused.thread_id) == after_first


def slow_tools(log: Log) -> list[Callable[..., Any]]:
    """An async send_email that sleeps a little before it logs, to widen race windows."""

    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        await anyio.sleep(0.05)
        log.append(("send_email", {"to": to, "subject": subject, "body": body}))
        return f"Email sent to {to}"

    return [send_email]


async def race(chats: Sequence[ReviewedChat], thread_id: str, count: int) -> list[str]:
    """``count`` tasks submit an approve at once (round robin over ``chats``); their outcomes."""
    outcomes: list[str] = []

    async def submit(chat: ReviewedChat) -> None:
        try:
            turn = await chat.submit_review([APPROVE], thread_id)
        except NoPendingReviewError as exc:
            outcomes.append(f"NoPendingReviewError: {exc}")
        else:
            outcomes.append(f"OK: {turn.reply}")

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(submit, chats[i % len(chats)])
    return sorted(outcomes)


async def test_racing_submissions_run_the_tool_once(store: AnyStore) -> None:
    """Concurrent submissions on one thread: one wins, the others get NoPendingReviewError."""
    log: Log = []
    model = ScriptedModel([calls(tc("call_1", "send_email", **ALICE)), "Sent."])
    chat = ReviewedChat(model, slow_tools(log), store=store)
    paused = await pause_on_alice(chat)

    outcomes = await race([chat], paused.thread_id, 6)

    assert outcomes == [f"NoPendingReviewError: {NO_PENDING}"] * 5 + ["OK: Sent."]
    assert log == [("send_email", ALICE)]
    state = await chat.get_thread(paused.thread_id)
    assert (state.status, [a.status for a in state.actions]) == ("idle", ["executed"])


async def test_racing_submissions_through_two_sqlite_stores_run_the_tool_once(
    tmp_path: Path,
) -> None:
    """Two chats with two SQLiteStore instances on one file: one submission wins, one run."""
    log: Log = []
    path = tmp_path / "shared.db"
    async with SQLiteStore(path) as store_a, SQLiteStore(path) as store_b:
        chat_a = ReviewedChat(
            ScriptedModel([calls(tc("call_1", "send_email", **ALICE)), "Sent by A."]),
            slow_tools(log),
            store=store_a,
        )
        chat_b = ReviewedChat(ScriptedModel(["Sent by B."]), slow_tools(log), store=store_b)
        paused = await pause_on_alice(chat_a)

        outcomes = await race([chat_a, chat_b], paused.thread_id, 6)

        assert outcomes[:5] == [f"NoPendingReviewError: {NO_PENDING}"] * 5
        assert outcomes[5] in ("OK: Sent by A.", "OK: Sent by B.")
        assert log == [("send_email", ALICE)]
        assert await store_a.load(paused.thread_id) == await store_b.load(paused.thread_id)


# --- binding a decision to its review (SPEC §2) ---------------------------------------------------


async def test_a_decision_for_an_old_review_does_not_approve_a_new_one(store: AnyStore) -> None:
    """A stale approve (for a review already answered) is refused, not applied to the next one."""
    log: Log = []
    script = [
        calls(tc("call_1", "send_email", **ALICE)),
        calls(tc("call_2", "delete_file", path="important.txt")),
    ]
    chat, _ = make_chat(store, script, log)
    first = await pause_on_alice(chat)
    second = await chat.submit_review([APPROVE], first.thread_id)
    assert second.review_id is not None
    before = await chat.get_thread(first.thread_id)

    with pytest.raises(StaleReviewError) as caught:
        await chat.submit_review([APPROVE], first.thread_id, review_id=first.review_id)
    assert str(caught.value) == (
        f"The review {first.review_id} is no longer current in this conversation."
        " Load the thread and decide on its current review."
    )
    assert isinstance(caught.value, NoPendingReviewError)

    assert log == [("send_email", ALICE)]
    assert await chat.get_thread(first.thread_id) == before
