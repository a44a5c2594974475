"""Reach reviewers where they already are: :class:`Slack` and :class:`Email` channels.

Give them to ``ReviewedChat(notify=...)``, alone or in a list with a
:class:`~toolguard.Webhook` (one of each at most). Every channel goes through the
thread's durable outbox: an event is written in the same save as the review's
audit event, sent in order, and retried with back-off while the channel is down.

::

    from toolguard import ReviewedChat, Webhook
    from toolguard.notify import Email, Slack

    chat = ReviewedChat(
        model,
        tools,
        notify=[
            Slack("C0123456789", token=bot_token, signing_secret=signing_secret,
                  users={"U024BE7LH": "alice"}, page_url="https://review.example.com/"),
            Email("smtp://mail.example.com:587", sender="toolguard@example.com",
                  to=["oncall@example.com"], page_url="https://review.example.com/"),
        ],
        remind_after=600,
    )

Slack needs the ``slack`` extra, email the ``email`` extra. Slack's buttons come back to
``POST /hitl/slack/actions`` of :func:`toolguard.http.create_app` (or ``toolguard
serve``/``mcp-proxy``). See docs/reviewers.md.
"""

from __future__ import annotations

from toolguard._notify.email import Email
from toolguard._notify.slack import Slack

__all__ = ["Email", "Slack"]
