"""The [reviewers] table: who may decide which tool, as ReviewedChat's authorize hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from toolguard import (
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Rules,
    RuleSyntaxError,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard.http import Reviewers, TokenAuth, create_app, new_token

TABLE = """
[rules]
deny = ["drop_*"]

[reviewers]
"*" = ["admin"]
"send_*" = ["alice", "bob"]
"send_email" = ["alice"]
"wire_*" = ["carol", "dave"]
"""


def test_the_most_specific_key_decides_alone() -> None:
    reviewers = Reviewers.from_toml(TABLE)
    assert reviewers is not None
    assert reviewers.key_for("send_email") == "send_email"  # the exact name
    assert reviewers.key_for("send_sms") == "send_*"  # more literal characters than "*"
    assert reviewers.key_for("search") == "*"
    assert reviewers.names_for("send_email") == ("alice",)
    assert reviewers.allows("alice", "send_sms")
    assert reviewers.allows("bob", "send_sms")
    assert not reviewers.allows("admin", "send_sms")  # lists are never merged
    assert not reviewers.allows("Alice", "send_email")  # names compare exactly
    assert not reviewers.allows(None, "search")
    assert Reviewers({"a*": ["x"], "*b": ["y"]}).names_for("ab") == ("x",)  # a tie: file order
    assert Reviewers({"send_email": ["x"]}).names_for("search") == ()  # no key: nobody


def test_the_rules_file_keeps_its_rules_beside_the_table(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(TABLE, encoding="utf-8")
    assert Rules.from_toml(path) == Rules(deny=["drop_*"])
    top_level = 'deny = ["drop_*"]\n[reviewers]\n"*" = ["admin"]\n'
    assert Rules.from_toml(top_level) == Rules(deny=["drop_*"])
    assert Reviewers.from_toml(top_level) == Reviewers({"*": ["admin"]})
    assert Reviewers.from_toml('[rules]\ndeny = ["x"]\n') is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            '[reviewers]\n"*" = "admin"\n',
            """[reviewers] '*' must be a non-empty list of reviewer names, e.g. ["alice", "bob"]""",
        ),
        (
            '[reviewers]\n"*" = []\n',
            """[reviewers] '*' must be a non-empty list of reviewer names, e.g. ["alice", "bob"]""",
        ),
        (
            'reviewers = ["admin"]\n',
            "[reviewers] must be a table of tool-name globs to lists of reviewer names",
        ),
        (
            '[reviewers]\n" " = ["a"]\n',
            "A key of the [reviewers] table must be a tool-name glob such as 'send_*'",
        ),
    ],
)
def test_a_bad_table_is_refused(text: str, error: str) -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        Reviewers.from_toml(text)
    assert str(caught.value) == error


@requires_approval(approvals=2)
def wire_transfer(amount: int, to: str) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


def wire_chat(store: MemoryStore) -> ReviewedChat:
    def react(messages: Any) -> ModelResponse:
        if messages[-1]["role"] == "user":
            call = ToolCall(id="c1", name="wire_transfer", args={"amount": 900, "to": "ACME"})
            return ModelResponse(tool_calls=[call])
        return ModelResponse(text=f"Result: {messages[-1]['content']}")

    reviewers = Reviewers.from_toml(TABLE)
    return ReviewedChat(
        ScriptedModel([react], repeat=True), [wire_transfer], store=store, authorize=reviewers
    )


async def test_over_http_an_unlisted_reviewer_gets_403_and_a_quorum_counts_identities(
    tmp_path: Path,
) -> None:
    tokens, lines = {}, []
    for name in ("carol", "dave", "mallory"):
        tokens[name], line = new_token(name)
        lines.append(line)
    path = tmp_path / "tokens"
    path.write_text("\n".join(lines), encoding="utf-8")
    store = MemoryStore()
    app = create_app(wire_chat(store), auth=TokenAuth.from_file(path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:

        def who(name: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {tokens[name]}"}

        paused = await http.post("/hitl/chat", json={"message": "pay"}, headers=who("carol"))
        body = paused.json()
        review = {
            "thread_id": body["thread_id"],
            "review_id": body["review_id"],
            "decisions": [{"type": "approve"}],
        }
        refused = await http.post("/hitl/review", json=review, headers=who("mallory"))
        assert refused.status_code == 403
        assert refused.json() == {
            "detail": f"Reviewer 'mallory' may not review conversation '{body['thread_id']}'"
        }
        first = await http.post("/hitl/review", json=review, headers=who("carol"))
        again = await http.post("/hitl/review", json=review, headers=who("carol"))
        second = await http.post("/hitl/review", json=review, headers=who("dave"))
    approvals = first.json()["pending_review"]["review_configs"][0]["approvals"]
    assert approvals == {"required": 2, "given": 1, "by": ["carol"]}
    assert again.status_code == 400
    assert (second.status_code, second.json()["reply"]) == (200, "Result: sent 900 to ACME")
    thread = await store.load(body["thread_id"])
    assert thread is not None
    assert [(e.kind, e.actor, e.detail) for e in thread.audit if e.kind != "vote"] == [
        ("requested", None, None),
        ("refused", "mallory", "the authorization hook refused this reviewer"),
        ("decided", "dave", None),
        ("executed", "dave", "sent 900 to ACME"),
    ]
    votes = [(e.actor, e.detail) for e in thread.audit if e.kind == "vote"]
    assert votes == [("carol", "1 of 2 approvals"), ("dave", "2 of 2 approvals")]
