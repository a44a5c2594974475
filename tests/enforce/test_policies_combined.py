"""Policies together: a quorum of reviewers on a tool with a secret argument (docs/policies.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import toolguard
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._stores.memory import MemoryStore
from toolguard._stores.sqlite import SQLiteStore

APPROVE = {"type": "approve"}
CALL = {"id": "c1", "name": "login_and_pay", "args": {"user": "ann", "password": "hunter22"}}


def make_chat(store: Any, log: list[dict[str, str]], **options: Any) -> ReviewedChat:
    @toolguard.requires_approval(approvals=2, redact=["password"])
    def login_and_pay(user: str, password: str) -> str:
        """Log in and pay.

        Args:
            user: who.
            password: the secret.
        """
        log.append({"user": user, "password": password})
        return f"paid as {user}"

    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(**CALL)]), ModelResponse(text="done")]
    )
    return ReviewedChat(model, [login_and_pay], store=store, **options)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_quorum_never_shows_the_secret_and_runs_the_real_value_once(
    kind: str, tmp_path: Path
) -> None:
    """Both reviewers see the placeholder and the progress; the tool gets the real password once."""
    store: Any = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "t.db")
    log: list[dict[str, str]] = []
    chat = make_chat(store, log)
    turn = await chat.send_message("pay")
    assert turn.pending_review is not None
    assert turn.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "login_and_pay",
                "args": {"user": "ann", "password": "[redacted]"},
                "description": "Tool `login_and_pay` is awaiting approval",
            }
        ],
        "review_configs": [
            {
                "action_name": "login_and_pay",
                "allowed_decisions": ["approve", "edit", "reject"],
                "approvals": {"required": 2, "given": 0, "by": []},
            }
        ],
    }
    second = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="alice"
    )
    assert second.pending_review is not None
    assert second.pending_review.model_dump()["action_requests"][0]["args"] == {
        "user": "ann",
        "password": "[redacted]",
    }
    assert log == []
    third = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert third.reply == "done"
    assert log == [{"user": "ann", "password": "hunter22"}]
    state = await chat.get_thread(turn.thread_id)
    assert [(e.kind, e.actor, e.args) for e in state.audit] == [
        ("requested", None, {"user": "ann", "password": "[redacted]"}),
        ("vote", "alice", {"user": "ann", "password": "[redacted]"}),
        ("vote", "bob", {"user": "ann", "password": "[redacted]"}),
        ("decided", "bob", {"user": "ann", "password": "[redacted]"}),
        ("executed", "bob", None),
    ]
    assert "hunter22" not in await chat.export_audit([turn.thread_id])
    if kind == "sqlite":
        await store.aclose()


async def test_a_quorum_with_secrets_kept_out_of_the_store() -> None:
    """store_secrets=False: the votes in between keep the real value in memory only."""
    store = MemoryStore()
    log: list[dict[str, str]] = []
    chat = make_chat(store, log, store_secrets=False)
    turn = await chat.send_message("pay")
    await chat.submit_review([APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="alice")
    state = await chat.get_thread(turn.thread_id)
    assert "hunter22" not in state.model_dump_json()
    third = await chat.submit_review(
        [APPROVE], turn.thread_id, review_id=turn.review_id, reviewer="bob"
    )
    assert (third.reply, log) == ("done", [{"user": "ann", "password": "hunter22"}])
    state = await chat.get_thread(turn.thread_id)
    assert "hunter22" not in state.model_dump_json()


def make_login_chat(store: Any, log: list[dict[str, str]], passwords: list[str]) -> ReviewedChat:
    """A chat whose model logs in once per message, with the given passwords in turn."""

    @toolguard.requires_approval(redact=["password"])
    def login(user: str, password: str) -> str:
        """Log in.

        Args:
            user: who.
            password: the secret.
        """
        log.append({"user": user, "password": password})
        return f"logged in as {user}"

    script: list[Any] = []
    for i, password in enumerate(passwords):
        call = ToolCall(id=f"c{i}", name="login", args={"user": "ann", "password": password})
        script += [ModelResponse(tool_calls=[call]), ModelResponse(text=f"done {i}")]
    return ReviewedChat(ScriptedModel(script), [login], store=store)


async def test_a_grant_on_the_same_arguments_is_refused_for_a_redacted_tool() -> None:
    """The reviewer saw '[redacted]': a grant on "these arguments" is refused, nothing changes."""
    store = MemoryStore()
    log: list[dict[str, str]] = []
    chat = make_login_chat(store, log, ["pw-1"])
    turn = await chat.send_message("log in")
    before = await chat.get_thread(turn.thread_id)
    grant = {"type": "approve", "grant": {"scope": "thread", "match": "args"}}
    with pytest.raises(toolguard.InvalidReviewDecisionError) as caught:
        await chat.submit_review([grant], turn.thread_id, review_id=turn.review_id, reviewer="m")
    assert str(caught.value) == (
        "No grant with match 'args' for action 'login': its arguments ['password'] are secret"
        " and shown redacted; use match 'tool'"
    )
    after = await chat.get_thread(turn.thread_id)
    assert (after.version, after.status, after.grants, log) == (
        before.version,
        "awaiting_review",
        [],
        [],
    )


async def test_a_grant_on_the_tool_runs_later_secrets_without_showing_them() -> None:
    """match 'tool': the next login (another password) runs unreviewed; no secret in the audit."""
    store = MemoryStore()
    log: list[dict[str, str]] = []
    chat = make_login_chat(store, log, ["pw-one", "pw-two"])
    turn = await chat.send_message("log in")
    grant = {"type": "approve", "grant": {"scope": "thread", "match": "tool", "uses": 1}}
    first = await chat.submit_review(
        [grant], turn.thread_id, review_id=turn.review_id, reviewer="maria"
    )
    assert first.reply == "done 0"
    second = await chat.send_message("again", turn.thread_id)
    assert (second.reply, second.pending_review) == ("done 1", None)
    assert log == [
        {"user": "ann", "password": "pw-one"},
        {"user": "ann", "password": "pw-two"},
    ]
    exported = await chat.export_audit([turn.thread_id])
    assert ("pw-one" in exported, "pw-two" in exported) == (False, False)
    state = await chat.get_thread(turn.thread_id)
    assert [e.kind for e in state.audit] == [
        "requested",
        "decided",
        "grant_created",
        "executed",
        "granted",
        "grant_ended",
    ]
