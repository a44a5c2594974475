"""Reminders (``remind_after``): a threaded Slack reply, a second email and a ``review.reminder``
webhook, once per interval, until the review is decided; Slack down holds up only Slack."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("slack_sdk")
pytest.importorskip("aiosmtpd")

from tests.helpers import WEBHOOK_SECRET, Receiver, calls, receiver  # noqa: F401 - a fixture
from toolguard import MemoryStore, ReviewedChat, ScriptedModel, Webhook, requires_approval
from toolguard.notify import Email, Slack

from .slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, FakeSlack, slack  # noqa: F401
from .smtp_fake import Mailbox, mailbox  # noqa: F401 - a fixture

START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def at(self, seconds: float) -> None:
        self.now = START + timedelta(seconds=seconds)


@requires_approval
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def make_chat(
    clock: Clock,
    slack: FakeSlack,  # noqa: F811
    mailbox: Mailbox,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> ReviewedChat:
    channels: list[Any] = [
        Webhook(receiver.url, secret=WEBHOOK_SECRET),
        Slack(
            CHANNEL,
            token=BOT_TOKEN,
            signing_secret=SIGNING_SECRET,
            users={"U0ALICE": "alice"},
            api_url=slack.url,
            page_url="https://review.example.com/",
            backoff=30,
        ),
        Email(
            f"smtp://{mailbox.host}:{mailbox.port}",
            sender="toolguard@example.com",
            per_tool={"send_*": ["mail-team@example.com"], "*": ["all@example.com"]},
            page_url="https://review.example.com/",
        ),
    ]
    script = [
        calls(("call_1", "send_email", {"to": "bob@example.com", "body": "Hi"})),
        "Sent.",
    ]
    return ReviewedChat(
        ScriptedModel(script),
        [send_email],
        store=MemoryStore(),
        clock=clock,
        notify=channels,
        remind_after=60,
    )


def replies(slack: FakeSlack, ts: str) -> list[str]:  # noqa: F811
    return [b["text"] for b in slack.of("chat.postMessage") if b.get("thread_ts") == ts]


async def test_reminders_go_to_every_channel_once_per_interval_until_decided(
    slack: FakeSlack,  # noqa: F811
    mailbox: Mailbox,  # noqa: F811
    receiver: Receiver,  # noqa: F811
) -> None:
    clock = Clock()
    chat = make_chat(clock, slack, mailbox, receiver)
    turn = await chat.send_message("Mail Bob")
    thread_id = turn.thread_id
    assert await chat.deliver_notifications() == 3  # webhook, Slack, email
    message = next(
        m for m in slack.messages.values() if f"Thread `{thread_id}`" in json.dumps(m["blocks"])
    )
    (first,) = mailbox.wait_for(thread_id)
    assert first["To"] == "mail-team@example.com"
    clock.at(30)
    assert await chat.deliver_notifications() == 0
    clock.at(61)
    assert await chat.deliver_notifications() == 3
    assert await chat.deliver_notifications() == 0  # once per interval
    clock.at(100)
    assert await chat.deliver_notifications() == 0
    clock.at(400)  # after a pause: one reminder, not the five missed
    assert await chat.deliver_notifications() == 3
    assert replies(slack, message["ts"]) == [
        "Reminder 1: send_email still waits for a decision (no deadline).",
        "Reminder 2: send_email still waits for a decision (no deadline).",
    ]
    mails = mailbox.wait_for(thread_id, 3)
    assert [m["Subject"] for m in mails] == [
        "Approval needed: send_email",
        "Reminder 1: Approval needed: send_email",
        "Reminder 2: Approval needed: send_email",
    ]
    reminders = [b for b in receiver.accepted if b["event"] == "review.reminder"]
    assert [{k: v for k, v in b.items() if k not in ("id", "created_at")} for b in reminders] == [
        {
            "event": "review.reminder",
            "thread_id": thread_id,
            "review_id": turn.review_id,
            "reminder": count,
            "pending_review": {
                "action_requests": [
                    {
                        "name": "send_email",
                        "args": {"to": "bob@example.com", "body": "Hi"},
                        "description": "Tool `send_email` is awaiting approval",
                    }
                ],
                "review_configs": [
                    {
                        "action_name": "send_email",
                        "allowed_decisions": ["approve", "edit", "reject"],
                    }
                ],
            },
        }
        for count in (1, 2)
    ]
    assert [b["created_at"] for b in reminders] == [
        (START + timedelta(seconds=61)).isoformat(),
        (START + timedelta(seconds=400)).isoformat(),
    ]
    await chat.submit_review([{"type": "approve"}], thread_id, reviewer="alice")
    clock.at(1000)
    assert await chat.deliver_notifications() == 2  # review.decided: webhook and Slack
    clock.at(2000)
    assert await chat.deliver_notifications() == 0
    assert len(replies(slack, message["ts"])) == 2


async def test_slack_down_holds_up_only_slack(
    slack: FakeSlack,  # noqa: F811
    mailbox: Mailbox,  # noqa: F811
    receiver: Receiver,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    chat = make_chat(clock, slack, mailbox, receiver)
    slack.down = True
    try:
        turn = await chat.send_message("Mail Bob")
        with caplog.at_level("WARNING", logger="toolguard"):
            assert await chat.deliver_notifications() == 2  # webhook and email
    finally:
        slack.down = False
    assert [r.getMessage() for r in caplog.records if r.name == "toolguard"] == [
        (
            "slack notification review.requested for thread"
            f" {turn.thread_id!r} failed (Slack answered service_unavailable); attempt 1,"
            " retried in 30 s"
        )
    ]
    state = await chat.get_thread(turn.thread_id)
    assert [(i.channel, i.body["event"], i.attempts) for i in state.outbox] == [
        ("slack", "review.requested", 1)
    ]
    assert await chat.deliver_notifications() == 0  # not due yet
    clock.at(31)
    assert await chat.deliver_notifications() == 1
    state = await chat.get_thread(turn.thread_id)
    assert state.outbox == []
    assert set(state.posted[turn.review_id]) == {"slack"}
