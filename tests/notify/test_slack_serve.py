"""``toolguard serve --slack-channel ... --smtp-url ...``, run as a process, against a fake Slack
Web API and an SMTP server on loopback.

One server for the module; each test starts its own conversation (the demo model proposes
``send_email``, a quorum of two, or ``add_task``), so the tests do not depend on their order.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("slack_sdk")
pytest.importorskip("aiosmtpd")
httpx = pytest.importorskip("httpx")

from tests.helpers import command_env  # noqa: E402
from toolguard._http.auth import token_hash  # noqa: E402

from .slack_fake import (  # noqa: E402
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    FakeSlack,
    button,
    signed,
    slack,  # noqa: F401 - a fixture
    submission,
)
from .smtp_fake import Mailbox, mailbox  # noqa: E402, F401 - a fixture

TOOLS = '''
import json, os
from toolguard import requires_approval

def _log(name, **args):
    with open(os.environ["NOTIFY_TOOLS_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": name, "args": args}) + "\\n")

@requires_approval(approvals=2, redact=["body"])
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    _log("send_email", to=to, subject=subject, body=body)
    return "sent"

@requires_approval
def add_task(title: str, due: str | None = None) -> str:
    """Add a task."""
    _log("add_task", title=title, due=due)
    return "added"

tools = [send_email, add_task]
'''

RULES = """
[reviewers]
"*" = ["alice", "bob"]

[slack]
U0ALICE = "alice"
U0BOB = "bob"
U0EVE = "eve"
"""

MAIL = "email alice that the meeting moved to 10"
TASK = "add a task to renew my passport by friday"
TASK_ARGS = {"title": "Renew my passport", "due": "2025-06-06"}


@dataclass
class Served:
    url: str
    tokens: dict[str, str]
    log: Path
    err: Path

    def chat(self, message: str, who: str = "alice") -> dict[str, Any]:
        answer = httpx.post(
            f"{self.url}hitl/chat", json={"message": message}, headers=self.auth(who), timeout=10
        )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def thread(self, thread_id: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}hitl/threads/{thread_id}", headers=self.auth("alice"))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    def audit(self, thread_id: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}hitl/threads/{thread_id}/audit", headers=self.auth("alice"))
        return [json.loads(line) for line in answer.text.splitlines()]

    def act(self, payload: dict[str, Any], **options: Any) -> httpx.Response:
        body, headers = signed(payload, **options)
        return httpx.post(f"{self.url}hitl/slack/actions", content=body, headers=headers)

    def ran(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
    slack: FakeSlack,  # noqa: F811 - the fixture
    mailbox: Mailbox,  # noqa: F811 - the fixture
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    (folder / "notify_tools.py").write_text(TOOLS, encoding="utf-8")
    (folder / "rules.toml").write_text(RULES, encoding="utf-8")
    tokens = {name: secrets.token_urlsafe(24) for name in ("alice", "bob")}
    (folder / "tokens.txt").write_text(
        "".join(f"{name} sha256:{token_hash(token)}\n" for name, token in tokens.items())
    )
    log, out, err = folder / "ran.jsonl", folder / "out.txt", folder / "err.txt"
    env = {
        **command_env(),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "NOTIFY_TOOLS_LOG": str(log),
    }
    argv = ["serve", "--tools", "notify_tools:tools", "--db", str(folder / "db.sqlite3")]
    argv += ["--port", "0", "--tokens", "tokens.txt", "--rules", "rules.toml"]
    argv += ["--slack-channel", CHANNEL, "--slack-api-url", slack.url]
    argv += ["--smtp-url", f"smtp://{mailbox.host}:{mailbox.port}"]
    argv += ["--email-from", "toolguard@example.com", "--email-to", "oncall@example.com"]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", *argv],
            cwd=folder,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 30
        while not out.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        first = out.read_text().split(" | ")[0]
        assert first.startswith("toolguard serve: http://127.0.0.1:"), err.read_text()
        yield Served(first.removeprefix("toolguard serve: "), tokens, log, err)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)


def posted(slack: FakeSlack, thread_id: str) -> dict[str, Any]:  # noqa: F811
    """The message Slack holds for the review of ``thread_id`` (waits for it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with slack.lock:
            for message in slack.messages.values():
                if "thread_ts" not in message and f"Thread `{thread_id}`" in json.dumps(
                    message["blocks"]
                ):
                    return dict(message)
        time.sleep(0.02)
    pytest.fail(f"no Slack message for thread {thread_id}")


def updated(slack: FakeSlack, ts: str, containing: str) -> dict[str, Any]:  # noqa: F811
    """The ``chat.update`` of message ``ts`` whose text holds ``containing`` (waits for it)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for body in slack.of("chat.update"):
            if body["ts"] == ts and containing in body["text"]:
                return body
        time.sleep(0.02)
    pytest.fail(f"no chat.update of {ts} with {containing!r}: {slack.of('chat.update')}")


def ephemeral_to(slack: FakeSlack, user: str, count: int) -> list[str]:  # noqa: F811
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [b["text"] for b in slack.of("chat.postEphemeral") if b["user"] == user]
        if len(found) >= count:
            return found
        time.sleep(0.02)
    pytest.fail(f"fewer than {count} ephemeral replies to {user}")


def test_a_review_is_posted_with_its_facts_and_mailed_without_its_secret(
    served: Served,
    slack: FakeSlack,  # noqa: F811
    mailbox: Mailbox,  # noqa: F811
) -> None:
    turn = served.chat(MAIL)
    thread_id, review_id = turn["thread_id"], turn["review_id"]
    message = posted(slack, thread_id)
    value = json.dumps({"thread_id": thread_id, "review_id": review_id})
    link = f"{served.url}?thread={thread_id}"
    args = (
        '{\n  "body": "[redacted]",\n  "subject": "The meeting moved to 10",\n'
        '  "to": "alice@example.com"\n}'
    )
    assert message["text"] == "Approval needed: send_email"
    assert message["blocks"] == [
        {"type": "header", "text": {"type": "plain_text", "text": "Approval needed: send_email"}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": (
                    "*send_email*: Tool `send_email` is awaiting approval\nApprovals: 0 of 2\n"
                    f"```{args}```"
                ),
            },
        },
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": (
                        f"Who may decide: alice, bob · Deadline: no deadline · Thread `{thread_id}`"
                    ),
                }
            ],
        },
        {
            "type": "actions",
            "block_id": "toolguard_decide",
            "elements": [
                {
                    "type": "button",
                    "action_id": "toolguard_approve",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": value,
                },
                {
                    "type": "button",
                    "action_id": "toolguard_reject",
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": value,
                },
                {
                    "type": "button",
                    "action_id": "toolguard_page",
                    "text": {"type": "plain_text", "text": "Edit or grant on the page"},
                    "url": link,
                },
            ],
        },
    ]
    (mail,) = mailbox.wait_for(thread_id)
    assert (mail["From"], mail["To"], mail["Subject"]) == (
        "toolguard@example.com",
        "oncall@example.com",
        "Approval needed: send_email",
    )
    indented = "\n".join(f"    {line}" for line in args.splitlines())
    assert mail.get_content().replace("\r\n", "\n") == (
        "Waiting for a decision: send_email.\n\n"
        "send_email: Tool `send_email` is awaiting approval\n"
        f"Approvals: 0 of 2\n{indented}\n\n"
        "Who may decide: alice, bob\nDeadline: no deadline\n"
        f"Thread: {thread_id}\n\n"
        f"Decide on the approval page (sign-in needed): {link}\n"
        "Opening this message or its link decides nothing.\n"
    )
    sent = json.dumps([c.body for c in slack.calls]) + mail.as_string()
    for secret in (BOT_TOKEN, SIGNING_SECRET, "The meeting moved to 10.", *served.tokens.values()):
        assert secret not in sent.replace('The meeting moved to 10"', "")


def test_forged_stale_unmapped_and_outsiders_decide_nothing(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    turn = served.chat(TASK)
    thread_id = turn["thread_id"]
    message = posted(slack, thread_id)
    approve = button("U0ALICE", "toolguard_approve", message)
    forged = served.act(approve, secret="not-the-signing-secret")  # noqa: S106 - forged
    stale = served.act(approve, at=int(time.time()) - 301)
    assert (forged.status_code, forged.json()) == (
        401,
        {"detail": "Not a valid Slack request: a signature that does not match."},
    )
    assert (stale.status_code, stale.json()) == (
        401,
        {"detail": "Not a valid Slack request: a timestamp more than 5 minutes away."},
    )
    assert served.act(button("U0MALLORY", "toolguard_approve", message)).status_code == 200
    assert served.act(button("U0EVE", "toolguard_approve", message)).status_code == 200
    assert ephemeral_to(slack, "U0MALLORY", 1) == [
        (
            "Your Slack user is not in toolguard's [slack] table, so you cannot decide here:"
            " nothing was decided. Ask whoever runs toolguard to add your user id (U0MALLORY)"
            " with your reviewer name."
        )
    ]
    assert ephemeral_to(slack, "U0EVE", 1)[-1] == (
        f"Reviewer 'eve' may not review conversation '{thread_id}'"
    )
    thread = served.thread(thread_id)
    assert thread["pending_review"] is not None
    assert [a["status"] for a in thread["actions"]] == ["requested"]
    assert [(e["kind"], e.get("actor")) for e in served.audit(thread_id)] == [
        ("requested", None),
        ("refused", "eve"),
    ]
    refusals = (served.err.read_text()).splitlines()
    assert any("refused a Slack request from 127.0.0.1: a signature" in r for r in refusals)
    assert all(e["args"] != TASK_ARGS for e in served.ran())  # nothing ran


def test_a_signed_approve_runs_the_call_once_and_updates_the_message(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    turn = served.chat(TASK)
    thread_id = turn["thread_id"]
    message = posted(slack, thread_id)
    before = len(served.ran())
    body, headers = signed(button("U0ALICE", "toolguard_approve", message))
    first = httpx.post(f"{served.url}hitl/slack/actions", content=body, headers=headers)
    replay = httpx.post(f"{served.url}hitl/slack/actions", content=body, headers=headers)
    assert (first.status_code, replay.status_code) == (200, 200)
    done = updated(slack, message["ts"], "Decided by alice")
    assert served.ran()[before:] == [{"tool": "add_task", "args": TASK_ARGS}]
    assert done["blocks"][-2]["text"]["text"].startswith("Decided by alice at ")
    assert done["blocks"][-2]["text"]["text"].endswith(": approved (add_task).")
    assert all(b["type"] != "actions" for b in done["blocks"])
    assert [e["kind"] for e in served.audit(thread_id)] == ["requested", "decided", "executed"]


def test_a_signed_reject_with_a_reason_reaches_the_model(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    turn = served.chat(TASK)
    thread_id = turn["thread_id"]
    message = posted(slack, thread_id)
    before = len(slack.of("views.open"))
    assert served.act(button("U0BOB", "toolguard_reject", message)).status_code == 200
    opened = slack.wait_for("views.open", before + 1)[-1]
    assert opened["trigger_id"] == "trigger-U0BOB-toolguard_reject"
    assert json.loads(opened["view"]["private_metadata"]) == {
        "thread_id": thread_id,
        "review_id": turn["review_id"],
        "channel": CHANNEL,
    }
    reason = "Not now: the passport office is closed this week."
    answer = served.act(submission("U0BOB", opened["view"], reason))
    assert (answer.status_code, answer.text) == (200, "")
    updated(slack, message["ts"], "Decided by bob")
    tool_messages = [m for m in served.thread(thread_id)["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [
        f"Rejected by the reviewer, not executed: {reason}"
    ]


def test_a_quorum_counts_each_slack_approver_once(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    turn = served.chat(MAIL)
    thread_id = turn["thread_id"]
    message = posted(slack, thread_id)
    before = len(served.ran())
    assert served.act(button("U0ALICE", "toolguard_approve", message)).status_code == 200
    vote = updated(slack, message["ts"], "Approval needed")
    assert "Approvals: 1 of 2 (alice)" in vote["blocks"][1]["text"]["text"]
    assert vote["blocks"][-1]["type"] == "actions"
    assert served.act(button("U0ALICE", "toolguard_approve", message)).status_code == 200
    assert ephemeral_to(slack, "U0ALICE", 1)[-1] == (
        "Reviewer 'alice' already approved action 'send_email' (1 of 2 approvals); another"
        " reviewer must approve it. Nothing was changed. Slack approves or rejects a whole"
        f" review; decide it on the page: {served.url}?thread={thread_id}."
    )
    assert served.ran()[before:] == []
    assert served.act(button("U0BOB", "toolguard_approve", message)).status_code == 200
    updated(slack, message["ts"], "Decided by")
    ran = served.ran()[before:]
    assert [(r["tool"], r["args"]["to"]) for r in ran] == [("send_email", "alice@example.com")]
    kinds = [(e["kind"], e.get("actor")) for e in served.audit(thread_id)]
    assert kinds == [
        ("requested", None),
        ("vote", "alice"),
        ("vote", "bob"),
        ("decided", "bob"),
        ("executed", "bob"),
    ]


def test_decided_on_the_page_the_message_updates(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    turn = served.chat(TASK)
    message = posted(slack, turn["thread_id"])
    decided = httpx.post(
        f"{served.url}hitl/review",
        json={
            "thread_id": turn["thread_id"],
            "review_id": turn["review_id"],
            "decisions": [{"type": "approve"}],
        },
        headers=served.auth("bob"),
    )
    assert decided.status_code == 200, decided.text
    done = updated(slack, message["ts"], "Decided by bob")
    assert done["text"].endswith(": approved (add_task).")


def test_with_slack_down_the_page_decides_and_the_message_follows(
    served: Served,
    slack: FakeSlack,  # noqa: F811
) -> None:
    slack.down = True
    try:
        turn = served.chat(TASK)
        thread_id = turn["thread_id"]
        deadline = time.monotonic() + 10
        while f"slack notification review.requested for thread '{thread_id}' failed" not in (
            served.err.read_text()
        ):
            assert time.monotonic() < deadline, served.err.read_text()
            time.sleep(0.05)
        decided = httpx.post(
            f"{served.url}hitl/review",
            json={"thread_id": thread_id, "decisions": [{"type": "approve"}]},
            headers=served.auth("alice"),
        )
        assert decided.status_code == 200, decided.text
    finally:
        slack.down = False
    message = posted(slack, thread_id)
    updated(slack, message["ts"], "Decided by alice")
    assert [e["kind"] for e in served.audit(thread_id)] == ["requested", "decided", "executed"]
