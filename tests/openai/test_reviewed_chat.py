"""End-to-end tests: ReviewedChat + OpenAIChatModel + the real openai client over HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

from tests import openai_server
from tests.openai_server import (
    ScriptedOpenAIServer,
    reply_delay,
    reply_error,
    reply_text,
    reply_tool_calls,
)
from toolguard import REJECTED_BY_USER_MESSAGE, ModelError, ReviewedChat, guard
from toolguard.openai import OpenAIChatModel

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

MODEL = "test-model"
SYSTEM = {"role": "system", "content": "You are a careful assistant."}
ASK = "Mail Alice that the meeting moved to 10."
USER = {"role": "user", "content": ASK}
EMAIL = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
EMAIL_BOB = {"to": "bob@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
ALLOWED = ["approve", "edit", "reject"]
REJECTED = "Rejected by the reviewer, not executed: "
"""How the default ResultTemplates mark a rejection for a format without a status field."""


def review(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The expected pending_review dict for these (name, args) actions (English catalog)."""
    return {
        "action_requests": [
            {"name": name, "args": args, "description": f"Tool `{name}` is awaiting approval"}
            for name, args in calls
        ],
        "review_configs": [
            {"action_name": name, "allowed_decisions": ALLOWED} for name, _ in calls
        ],
    }


def assistant(
    *calls: tuple[str, str, dict[str, Any] | str], content: str | None = None
) -> dict[str, Any]:
    """The assistant message with tool calls exactly as the server receives it.

    Without text it has no ``content`` key at all (no ``"content": null``).
    """
    text = {"content": content} if content is not None else {}
    return {
        "role": "assistant",
        **text,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for call_id, name, args in calls
        ],
    }


def tool_msg(call_id: str, content: str) -> dict[str, Any]:
    """A tool message exactly as the server receives it."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


@dataclass
class Office:
    """The tools under test and a log of what really ran."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)

    def tools(self) -> list[Any]:
        """send_email and delete_file (guarded by the classifier), search_contacts (not)."""

        def send_email(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            self.sent.append({"to": to, "subject": subject, "body": body})
            return f"Email sent to {to}"

        def delete_file(path: str) -> str:
            """Delete a file.

            Args:
                path: the file to delete.
            """
            self.deleted.append(path)
            return f"Deleted {path}"

        def search_contacts(query: str) -> list[str]:
            """Find contacts by name.

            Args:
                query: part of a name.
            """
            self.searched.append(query)
            return [f"{query.lower()}@example.com"]

        return [send_email, delete_file, search_contacts]


@pytest.fixture
def office() -> Office:
    """A fresh set of tools and logs."""
    return Office()


@pytest.fixture
async def client(scripted_openai: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """A real AsyncOpenAI client for the scripted server (timeout 2 s, no retries)."""
    async with scripted_openai.client() as opened:
        yield opened


@pytest.fixture
def chat(client: openai.AsyncOpenAI, office: Office) -> ReviewedChat:
    """A ReviewedChat over the scripted server, with a system prompt."""
    model = OpenAIChatModel(client, model=MODEL)
    return ReviewedChat(model, guard(office.tools()), system_prompt=SYSTEM["content"])


def body(chat: ReviewedChat, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The exact request body the adapter sends for ``messages`` with the chat's tools."""
    return {
        "model": MODEL,
        "messages": messages,
        "tools": chat.toolset.openai_tools(),
        "parallel_tool_calls": True,
    }


# --------------------------------------------------------------------------- approve


async def test_single_guarded_call_pauses_and_runs_after_approval(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """A guarded call pauses with the exact pending_review; approval runs it; the model answers."""
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", EMAIL)]), reply_text("Alice has been told.")
    )
    turn = await chat.send_message(ASK)
    assert turn.to_dict() == {
        "thread_id": turn.thread_id,
        "reply": None,
        "pending_review": review(("send_email", EMAIL)),
        "review_id": turn.review_id,
    }
    assert isinstance(turn.review_id, str)
    assert office.sent == []
    assert scripted_openai.requests == [body(chat, [SYSTEM, USER])]

    final = await chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert final.to_dict() == {
        "thread_id": turn.thread_id,
        "reply": "Alice has been told.",
        "pending_review": None,
        "review_id": None,
    }
    assert [(a.name, a.status) for a in final.actions] == [("send_email", "executed")]
    assert office.sent == [EMAIL]
    assert scripted_openai.requests[1] == body(
        chat,
        [
            SYSTEM,
            USER,
            assistant(("call_1", "send_email", EMAIL)),
            tool_msg("call_1", "Email sent to alice@example.com"),
        ],
    )
    state = await chat.get_thread(turn.thread_id)
    assert (state.status, state.pending, state.messages[-2:]) == (
        "idle",
        None,
        [
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": "Email sent to alice@example.com",
                "status": "success",
            },
            {"role": "assistant", "content": "Alice has been told."},
        ],
    )


async def test_parallel_guarded_calls_are_reviewed_together(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """Two guarded calls of one turn form one review, in order; approving both runs both."""
    scripted_openai.add(
        reply_tool_calls(
            [
                ("call_1", "send_email", EMAIL),
                ("call_2", "delete_file", {"path": "reports/old.txt"}),
            ]
        ),
        reply_text("Done both."),
    )
    turn = await chat.send_message(ASK)
    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == review(
        ("send_email", EMAIL), ("delete_file", {"path": "reports/old.txt"})
    )
    final = await chat.submit_review([{"type": "approve"}, {"type": "approve"}], turn.thread_id)
    assert final.reply == "Done both."
    assert (office.sent, office.deleted) == ([EMAIL], ["reports/old.txt"])
    assert scripted_openai.requests[1]["messages"] == [
        SYSTEM,
        USER,
        assistant(
            ("call_1", "send_email", EMAIL), ("call_2", "delete_file", {"path": "reports/old.txt"})
        ),
        tool_msg("call_1", "Email sent to alice@example.com"),
        tool_msg("call_2", "Deleted reports/old.txt"),
    ]


# --------------------------------------------------------------------------- reject


async def test_unguarded_call_runs_even_when_the_guarded_one_is_rejected(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """Only the guarded call is reviewed; the unguarded one of the same turn still runs."""
    scripted_openai.add(
        reply_tool_calls(
            [("call_s", "search_contacts", {"query": "Alice"}), ("call_m", "send_email", EMAIL)]
        ),
        reply_text("I did not send it."),
    )
    turn = await chat.send_message(ASK)
    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == review(("send_email", EMAIL))
    final = await chat.submit_review([{"type": "reject"}], turn.thread_id)
    assert final.reply == "I did not send it."
    assert (office.searched, office.sent) == (["Alice"], [])
    assert scripted_openai.requests[1]["messages"] == [
        SYSTEM,
        USER,
        assistant(
            ("call_s", "search_contacts", {"query": "Alice"}), ("call_m", "send_email", EMAIL)
        ),
        tool_msg("call_s", '["alice@example.com"]'),
        tool_msg("call_m", REJECTED_BY_USER_MESSAGE),
    ]


async def test_all_rejected_runs_nothing_and_tells_the_model(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """Rejecting every call runs no tool; the model reads REJECTED_BY_USER_MESSAGE for each."""
    scripted_openai.add(
        reply_tool_calls(
            [("call_1", "send_email", EMAIL), ("call_2", "delete_file", {"path": "/etc/hosts"})]
        ),
        reply_text("Understood, nothing was done."),
    )
    turn = await chat.send_message(ASK)
    final = await chat.submit_review(
        [{"type": "reject"}, {"type": "reject", "message": ""}], turn.thread_id
    )
    assert final.reply == "Understood, nothing was done."
    assert [(a.name, a.status) for a in final.actions] == [
        ("send_email", "rejected"),
        ("delete_file", "rejected"),
    ]
    assert (office.sent, office.deleted) == ([], [])
    assert scripted_openai.requests[1] == body(
        chat,
        [
            SYSTEM,
            USER,
            assistant(
                ("call_1", "send_email", EMAIL), ("call_2", "delete_file", {"path": "/etc/hosts"})
            ),
            tool_msg("call_1", REJECTED_BY_USER_MESSAGE),
            tool_msg("call_2", REJECTED_BY_USER_MESSAGE),
        ],
    )
    state = await chat.get_thread(turn.thread_id)
    assert [m.get("status") for m in state.messages if m["role"] == "tool"] == ["error", "error"]


async def test_reject_reason_reaches_the_model_which_proposes_again(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """The rejection reason is the tool message content; the model adjusts and is reviewed again."""

    def adjust(request: dict[str, Any]) -> openai_server.Reply:
        reason = request["messages"][-1]["content"]
        to = "bob@example.com" if "Bob" in reason else "nobody@example.com"
        return reply_tool_calls([("call_2", "send_email", {**EMAIL, "to": to})])

    scripted_openai.add(reply_tool_calls([("call_1", "send_email", EMAIL)]), adjust)
    turn = await chat.send_message(ASK)
    again = await chat.submit_review(
        [{"type": "reject", "message": "Send it to Bob instead."}], turn.thread_id
    )
    assert scripted_openai.requests[1]["messages"][-1] == tool_msg(
        "call_1", f"{REJECTED}Send it to Bob instead."
    )
    assert again.to_dict() == {
        "thread_id": turn.thread_id,
        "reply": None,
        "pending_review": review(("send_email", EMAIL_BOB)),
        "review_id": again.review_id,
    }
    assert again.review_id != turn.review_id
    assert office.sent == []


# --------------------------------------------------------------------------- edit


async def test_edit_runs_the_edited_call_and_history_records_it(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """An edit runs the tool with the edited args; the model then sees the edited call."""
    edited = {"to": "alice@example.com", "subject": "Meeting moved", "body": "Now at 11 — sorry!"}
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", EMAIL)]), reply_text("Sent the edited mail.")
    )
    turn = await chat.send_message(ASK)
    final = await chat.submit_review(
        [{"type": "edit", "edited_action": {"name": "send_email", "args": edited}}],
        turn.thread_id,
    )
    assert final.reply == "Sent the edited mail."
    assert office.sent == [edited]
    edited_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "send_email", "arguments": json.dumps(edited, ensure_ascii=False)},
    }
    assert scripted_openai.requests[1]["messages"] == [
        SYSTEM,
        USER,
        {"role": "assistant", "tool_calls": [edited_call]},
        tool_msg("call_1", "Email sent to alice@example.com"),
    ]
    state = await chat.get_thread(turn.thread_id)
    assert state.messages[2] == {"role": "assistant", "content": None, "tool_calls": [edited_call]}


# --------------------------------------------------------------------------- re-interrupt


async def test_a_new_guarded_call_after_approval_pauses_again(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """After an approval the model asks for another guarded action: a new review with a new id."""
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", EMAIL)]),
        reply_tool_calls([("call_2", "delete_file", {"path": "drafts/draft.txt"})]),
        reply_text("Mail sent and draft deleted."),
    )
    first = await chat.send_message(ASK)
    second = await chat.submit_review([{"type": "approve"}], first.thread_id)
    assert second.to_dict() == {
        "thread_id": first.thread_id,
        "reply": None,
        "pending_review": review(("delete_file", {"path": "drafts/draft.txt"})),
        "review_id": second.review_id,
    }
    assert second.review_id is not None
    assert second.review_id != first.review_id
    assert (office.sent, office.deleted) == ([EMAIL], [])
    third = await chat.submit_review([{"type": "approve"}], first.thread_id)
    assert third.reply == "Mail sent and draft deleted."
    assert office.deleted == ["drafts/draft.txt"]
    assert len(scripted_openai.requests) == 3


# --------------------------------------------------------------------------- tolerated input


async def test_invalid_arguments_and_missing_ids_go_back_to_the_model(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """Calls without ids get call_<i>; broken JSON arguments never run and the model is told."""
    scripted_openai.add(
        reply_tool_calls(
            [(None, "send_email", '{"to": "alice@'), (None, "search_contacts", {"query": "Al"})]
        ),
        reply_text("Let me retry."),
    )
    turn = await chat.send_message(ASK)
    assert turn.reply == "Let me retry."
    assert (office.sent, office.searched) == ([], ["Al"])
    assert scripted_openai.requests[1]["messages"] == [
        SYSTEM,
        USER,
        assistant(
            ("call_0", "send_email", '{"to": "alice@'),
            ("call_1", "search_contacts", {"query": "Al"}),
        ),
        tool_msg(
            "call_0",
            "Error, not executed: Invalid arguments for tool `send_email`: expected a JSON"
            ' object, got {"to": "alice@',
        ),
        tool_msg("call_1", '["al@example.com"]'),
    ]


# --------------------------------------------------------------------------- model errors


async def test_http_500_surfaces_as_model_error_and_leaves_the_thread_unchanged(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat
) -> None:
    """A failing model call raises ModelError; the stored thread is exactly as before."""
    scripted_openai.add(reply_text("Hello!"), reply_error(500, "Upstream overloaded"))
    turn = await chat.send_message("Hi")
    before = await chat.get_thread(turn.thread_id)
    with pytest.raises(ModelError) as caught:
        await chat.send_message("Are you there?", turn.thread_id)
    assert str(caught.value) == (
        f"The model call failed: HTTP 500 from {scripted_openai.base_url}/ (model {MODEL!r}): "
        "Upstream overloaded"
    )
    assert await chat.get_thread(turn.thread_id) == before


async def test_timeout_surfaces_as_model_error_and_leaves_the_thread_unchanged(
    scripted_openai: ScriptedOpenAIServer, office: Office
) -> None:
    """A model slower than the client timeout raises ModelError; the stored thread is unchanged."""
    scripted_openai.add(reply_text("Hello!"), reply_delay(30))
    async with scripted_openai.client(timeout=0.2) as client:
        chat = ReviewedChat(OpenAIChatModel(client, model=MODEL), guard(office.tools()))
        turn = await chat.send_message("Hi")
        before = await chat.get_thread(turn.thread_id)
        with pytest.raises(ModelError) as caught:
            await chat.send_message("Are you there?", turn.thread_id)
        assert await chat.get_thread(turn.thread_id) == before
    assert str(caught.value) == (
        f"The model call timed out after 0.2 seconds waiting for {scripted_openai.base_url}/"
        f" (model {MODEL!r})"
    )


async def test_model_error_on_a_new_thread_stores_nothing(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat
) -> None:
    """A model failure on the first message raises ModelError and creates no thread."""
    scripted_openai.add(reply_error(429, "Rate limit reached"))
    with pytest.raises(ModelError):
        await chat.send_message(ASK)
    assert await chat.store.thread_ids() == []  # type: ignore[attr-defined]


async def test_model_error_after_approval_keeps_the_tool_result_and_does_not_rerun(
    scripted_openai: ScriptedOpenAIServer, chat: ReviewedChat, office: Office
) -> None:
    """A model failure after an approved tool ran keeps its result; the tool never reruns."""
    scripted_openai.add(
        reply_tool_calls([("call_1", "send_email", EMAIL)]),
        reply_error(500, "boom"),
        reply_text("Sorry for the delay: the mail went out."),
    )
    turn = await chat.send_message(ASK)
    with pytest.raises(ModelError):
        await chat.submit_review([{"type": "approve"}], turn.thread_id)
    state = await chat.get_thread(turn.thread_id)
    assert (state.status, state.pending, state.messages[-1]) == (
        "idle",
        None,
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Email sent to alice@example.com",
            "status": "success",
        },
    )
    later = await chat.send_message("Did it work?", turn.thread_id)
    assert later.reply == "Sorry for the delay: the mail went out."
    assert office.sent == [EMAIL]
    assert scripted_openai.requests[2]["messages"][-2:] == [
        tool_msg("call_1", "Email sent to alice@example.com"),
        {"role": "user", "content": "Did it work?"},
    ]
