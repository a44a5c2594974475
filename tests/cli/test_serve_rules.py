"""toolguard serve --rules FILE: argument rules from TOML applied to the served chat."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from toolguard import Rules
from toolguard._cli.main import main
from toolguard._cli.serve import ServeError, build_app, build_chat, load_rules

TOML = """
[rules]
deny = ["send_email"]
ask = ["search_mail"]
"""


def test_load_rules_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(TOML, encoding="utf-8")
    assert load_rules(str(path)) == Rules(deny=["send_email"], ask=["search_mail"])


def test_a_missing_or_bad_rules_file_is_a_serve_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ServeError) as caught:
        load_rules(str(missing))
    assert (
        str(caught.value) == f"--rules {missing}: cannot read the file: No such file or directory"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("[rules]\ndeny = ['x(']\n", encoding="utf-8")
    with pytest.raises(ServeError) as caught:
        load_rules(str(bad))
    assert str(caught.value) == f"--rules {bad}: The deny rule 'x(' must end with ')'"


def test_the_demo_chat_gets_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(TOML, encoding="utf-8")
    plain = build_chat(db=":memory:")
    chat = build_chat(db=":memory:", rules=str(path))
    assert plain.toolset.rules is None
    assert chat.toolset.rules == Rules(deny=["send_email"], ask=["search_mail"])
    assert list(chat.toolset) == list(plain.toolset)
    assert chat.system_prompt == plain.system_prompt


async def test_a_denied_call_over_http_is_refused_without_review(tmp_path: Path) -> None:
    """The demo model proposes send_email; the deny rule answers it, nobody is asked."""
    path = tmp_path / "rules.toml"
    path.write_text(TOML, encoding="utf-8")
    app = build_app(db=":memory:", rules=str(path))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.post(
            "/hitl/chat",
            json={"message": "Mail Alice that the meeting moved to 10"},
        )
        assert answer.status_code == 200
        body = answer.json()
        assert body["pending_review"] is None
        thread = await client.get(f"/hitl/threads/{body['thread_id']}")
    tool_messages = [m for m in thread.json()["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        (
            "Denied by a rule, not executed: The call to `send_email` is denied by the rule"
            " `deny send_email`. It was not executed."
        )
    ]


async def test_a_review_waiting_across_a_restart_with_a_deny_rule_ends_denied(
    tmp_path: Path,
) -> None:
    """Paused under no rules; the server restarts on the same --db with --rules denying the
    tool; the approval that then arrives runs nothing: the action ends denied, audited."""
    db = str(tmp_path / "serve.sqlite3")
    path = tmp_path / "rules.toml"
    path.write_text(TOML, encoding="utf-8")
    ask = {"message": "email alice that the meeting moved to 11"}
    before = build_app(db=db)
    transport = httpx.ASGITransport(app=before)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        paused = (await client.post("/hitl/chat", json=ask)).json()
    before.state.chat.store.close()
    assert paused["pending_review"]["action_requests"][0]["name"] == "send_email"

    after = build_app(db=db, rules=str(path))
    transport = httpx.ASGITransport(app=after)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            decided = await client.post(
                "/hitl/review",
                json={
                    "thread_id": paused["thread_id"],
                    "review_id": paused["review_id"],
                    "decisions": [{"type": "approve"}],
                },
            )
            thread = (await client.get(f"/hitl/threads/{paused['thread_id']}")).json()
            audit = await client.get(f"/hitl/threads/{paused['thread_id']}/audit")
            listed = (await client.get("/hitl/reviews")).json()
    finally:
        after.state.chat.store.close()

    denied = (
        "The call to `send_email` is denied by the rule `deny send_email`. It was not executed."
    )
    assert (decided.status_code, decided.json()) == (
        200,
        {
            "thread_id": paused["thread_id"],
            "reply": f"OK, I did not send the email to alice@example.com. Your reason: {denied}",
            "pending_review": None,
            "review_id": None,
        },
    )
    assert (
        thread["status"],
        [(a["status"], a["result"]["outcome"]) for a in thread["actions"]],
    ) == (
        "idle",
        [("failed", "denied")],
    )
    events = [json.loads(line) for line in audit.text.splitlines()]
    assert [(e["kind"], e["tool"], e["detail"]) for e in events] == [
        ("requested", "send_email", None),
        ("decided", "send_email", None),
        ("denied", "send_email", denied),
    ]
    assert listed == {"reviews": []}


def test_the_cli_passes_rules_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[dict[str, Any]] = []
    fake = types.ModuleType("toolguard._cli.serve")
    fake.serve = lambda **options: received.append(options)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolguard._cli.serve", fake)
    assert main(["serve", "--rules", "policy.toml"]) == 0
    assert main(["serve"]) == 0
    assert [options.get("rules") for options in received] == ["policy.toml", None]
    assert "rules" not in received[1]
