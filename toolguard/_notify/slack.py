"""Slack, both ways: each review as one message with Approve / Reject buttons (:class:`Slack`).

The messages go out through the durable outbox (:mod:`toolguard._notify.channels`):
``review.requested`` posts the message (``chat.postMessage``, Block Kit) and its channel and
``ts`` are kept with the thread; a quorum's vote and the review's end (decided anywhere,
expired, cancelled) update it (``chat.update``: the buttons go, the outcome, who and when
come); a reminder is a threaded reply. The buttons come back to ``POST /hitl/slack/actions``
(:mod:`toolguard._http.slack`), which verifies Slack's signature and decides through the
chat's own review path as the reviewer the ``[slack]`` table names.

The Web API is called with slack-sdk's ``WebClient`` (the ``slack`` extra) in a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread

from toolguard._notify.channels import Retrying, Sent
from toolguard._notify.facts import ReviewFacts, shown_args

if TYPE_CHECKING:
    from toolguard._policy.reviewers import Reviewers
    from toolguard._stores.outbox import OutboxItem
    from toolguard._stores.protocol import ThreadState

__all__ = ["APPROVE", "DEFAULT_API_URL", "PAGE", "REJECT", "REJECT_VIEW", "Slack"]

DEFAULT_API_URL: Final = "https://slack.com/api/"
"""Slack's Web API (``--slack-api-url``'s default)."""
APPROVE: Final = "toolguard_approve"
"""The ``action_id`` of the Approve button."""
REJECT: Final = "toolguard_reject"
"""The ``action_id`` of the Reject button (it opens the reason's modal)."""
PAGE: Final = "toolguard_page"
"""The ``action_id`` of the link button to the page (edits and grants)."""
REJECT_VIEW: Final = "toolguard_reject_reason"
"""The ``callback_id`` of the modal asking for the reason of a reject."""
_SECTION_LIMIT: Final = 2900  # Slack takes at most 3000 characters in a section's text
_EVENTS: Final = frozenset(
    {
        "review.requested",
        "review.vote",
        "review.decided",
        "review.expired",
        "review.cancelled",
        "review.reminder",
    }
)
_OUTCOMES: Final = {
    "approve": "approved",
    "edit": "approved as edited",
    "reject": "rejected",
    "respond": "answered",
}


def escape(text: str) -> str:
    """``text`` for Slack's mrkdwn: ``&``, ``<`` and ``>`` escaped (no mentions, no links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str) -> str:
    return text if len(text) <= _SECTION_LIMIT else f"{text[:_SECTION_LIMIT]}…"


def _when(at: object) -> str:
    if not isinstance(at, str):
        return "?"
    try:
        return datetime.fromisoformat(at).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return at


class Slack(Retrying):
    """Post each review to a Slack channel and take Approve / Reject back (``notify=``).

    Slack users decide as the reviewer ``users`` maps them to (the ``[slack]`` table of a
    rules file): the chat's ``authorize`` hook, a quorum, the audit trail and the webhooks
    see that name; a user not in ``users`` is refused and nothing changes. Serve the chat
    with :func:`toolguard.http.create_app` (or ``toolguard serve``): it adds
    ``POST /hitl/slack/actions``, the Slack app's interactivity URL. Sending needs the
    ``slack`` extra.

    Args:
        channel: the Slack channel's id (``C0123456789``); the app's bot must be in it.
        token: the bot token (``xoxb-...``; ``toolguard serve`` reads ``SLACK_BOT_TOKEN``).
        signing_secret: the app's signing secret (``SLACK_SIGNING_SECRET``).
        users: Slack user id → reviewer name.
        api_url: another Slack-compatible Web API (default: Slack's).
        page_url: the approval page's address, linked from each message.
        reviewers: who may decide which tool (shown in the message).
        timeout: seconds one Web API call may take.
        backoff: seconds before the first retry of a failed send.
        max_backoff: the longest wait between retries.

    Raises:
        TypeError, ValueError: an argument is not valid (the text says which).
    """

    name = "slack"

    def __init__(
        self,
        channel: str,
        *,
        token: str,
        signing_secret: str,
        users: Mapping[str, str],
        api_url: str | None = None,
        page_url: str | None = None,
        reviewers: Reviewers | None = None,
        timeout: float = 10.0,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
    ) -> None:
        texts: list[tuple[object, str]] = [
            (channel, "channel"),
            (token, "token"),
            (signing_secret, "signing_secret"),
        ]
        for value, label in texts:
            if not isinstance(value, str) or not value.strip():
                msg = (
                    f"{label} must be non-empty text, got {value!r}"
                    if label == "channel"
                    else (f"{label} must be non-empty text")
                )
                raise (TypeError if not isinstance(value, str) else ValueError)(msg)
        given: object = users
        if not isinstance(given, Mapping) or not all(
            isinstance(k, str) and k.strip() and isinstance(v, str) and v.strip()
            for k, v in given.items()
        ):
            msg = 'users must map Slack user ids to reviewer names, e.g. {"U024BE7LH": "alice"}'
            raise TypeError(msg)
        url: object = api_url if api_url is not None else DEFAULT_API_URL
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            msg = f"api_url must be an http:// or https:// URL, got {api_url!r}"
            raise ValueError(msg)
        self._retrying(timeout, backoff, max_backoff)
        self.channel = channel
        self.token = token
        self.signing_secret = signing_secret
        self.users: dict[str, str] = dict(users)
        self.api_url = url if url.endswith("/") else f"{url}/"
        self.page_url = page_url
        self.reviewers = reviewers

    def __repr__(self) -> str:
        return f"Slack({self.channel!r}, token='***', signing_secret='***', users={self.users!r})"

    # ------------------------------------------------------------------ the channel

    def wants(self, event: str) -> bool:
        """Every review event but the judge's own (shown in the request's message)."""
        return event in _EVENTS

    def reviewer_of(self, user_id: str) -> str | None:
        """The reviewer a Slack user decides as, or ``None`` when the table has no such user."""
        return self.users.get(user_id)

    async def send(self, item: OutboxItem, state: ThreadState) -> Sent:
        """Post, update or reply in the thread of the review's message (see the module)."""
        from slack_sdk.errors import SlackApiError  # noqa: PLC0415 - the slack extra

        body = item.body
        event = str(body.get("event"))
        facts = ReviewFacts.of(body, state, page_url=self.page_url, who=self._who)
        posted = state.posted.get(facts.review_id, {}).get("slack")
        where = posted if isinstance(posted, dict) and posted.get("ts") else None
        try:
            with anyio.CancelScope(shield=True):
                if event == "review.reminder":
                    return await self._remind(facts, body, where)
                blocks, text = self._blocks(event, body, facts, state)
                if where is None:
                    answer = await self.call(
                        "chat.postMessage", channel=self.channel, text=text, blocks=blocks
                    )
                    memo = {"slack": {"channel": answer["channel"], "ts": answer["ts"]}}
                    return Sent(None, memo)
                await self.call(
                    "chat.update",
                    channel=where["channel"],
                    ts=where["ts"],
                    text=text,
                    blocks=blocks,
                )
                return Sent(None)
        except SlackApiError as exc:
            return Sent(f"Slack answered {exc.response.get('error', 'an error')}"[:200])
        except Exception as exc:  # any failure of the call is retried later
            return Sent(f"{type(exc).__name__}: {exc}"[:200])
        return Sent("the send was cancelled")  # pragma: no cover - a shielded scope never is

    async def _remind(
        self, facts: ReviewFacts, body: Mapping[str, Any], where: Mapping[str, Any] | None
    ) -> Sent:
        text = (
            f"Reminder {body.get('reminder', 1)}: {escape(facts.tools)} still waits for a"
            f" decision ({facts.deadline_text()})."
        )
        if where is None:
            await self.call("chat.postMessage", channel=self.channel, text=text)
        else:
            await self.call(
                "chat.postMessage", channel=where["channel"], thread_ts=where["ts"], text=text
            )
        return Sent(None)

    def _who(self, tool: str) -> Sequence[str]:
        return self.reviewers.names_for(tool) if self.reviewers is not None else ()

    # ------------------------------------------------------------------ the Web API

    def client(self) -> Any:
        """A slack-sdk ``WebClient`` for :attr:`api_url` with the bot token."""
        from slack_sdk import WebClient  # noqa: PLC0415 - the slack extra

        return WebClient(token=self.token, base_url=self.api_url, timeout=int(self.timeout) or 1)

    async def call(self, method: str, **arguments: Any) -> dict[str, Any]:
        """Call one Web API method (JSON body) in a worker thread; its answer's data.

        Raises:
            slack_sdk.errors.SlackApiError: Slack answered ``ok: false``.
            OSError: Slack could not be reached.
        """
        client = self.client()

        def call() -> dict[str, Any]:
            answer = client.api_call(method, json=arguments)
            data: dict[str, Any] = dict(answer.data) if isinstance(answer.data, dict) else {}
            return data

        return await anyio.to_thread.run_sync(call)

    # ------------------------------------------------------------------ the message

    def _blocks(
        self, event: str, body: Mapping[str, Any], facts: ReviewFacts, state: ThreadState
    ) -> tuple[list[dict[str, Any]], str]:
        """The message's blocks and its plain text (notifications, screen readers)."""
        waiting = event in ("review.requested", "review.vote") and (
            state.pending is not None and state.pending.review_id == facts.review_id
        )
        if event == "review.vote" and not waiting:
            event = "review.requested"  # an old vote of a review that ended: keep its end shown
        heading = {
            "review.requested": "Approval needed",
            "review.vote": "Approval needed",
            "review.decided": "Decided",
            "review.expired": "Expired",
            "review.cancelled": "Cancelled",
        }.get(event, "Review")
        text = f"{heading}: {facts.tools}"
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": text[:150]}}
        ]
        for call in facts.calls:
            lines = [f"*{escape(call.tool)}*: {escape(call.why)}"]
            if call.progress is not None:
                given, required, by = call.progress
                who = f" ({escape(', '.join(by))})" if by else ""
                lines.append(f"Approvals: {given} of {required}{who}")
            args = shown_args(call.args).replace("```", "`\u200b``")
            lines.append(f"```{escape(args)}```")
            blocks.append(
                {"type": "section", "text": {"type": "mrkdwn", "text": _cut("\n".join(lines))}}
            )
        blocks.extend(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(escape(verdict))}]}
            for verdict in facts.verdicts
        )
        if waiting:
            about = (
                f"Who may decide: {escape(facts.deciders_text())} · Deadline:"
                f" {facts.deadline_text()} · Thread `{escape(facts.thread_id)}`"
            )
            blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": about}]})
            blocks.append(
                {
                    "type": "actions",
                    "block_id": "toolguard_decide",
                    "elements": self._buttons(facts),
                }
            )
            return blocks, text
        outcome = _outcome(event, body)
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut(escape(outcome))}}
        )
        about = f"Thread `{escape(facts.thread_id)}`"
        if facts.link is not None:
            about += f" · <{facts.link}|Open the review on the page>"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": about}]})
        return blocks, f"{text}. {outcome}"

    def _buttons(self, facts: ReviewFacts) -> list[dict[str, Any]]:
        value = json.dumps({"thread_id": facts.thread_id, "review_id": facts.review_id})
        buttons: list[dict[str, Any]] = [
            {
                "type": "button",
                "action_id": APPROVE,
                "style": "primary",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": value,
            },
            {
                "type": "button",
                "action_id": REJECT,
                "style": "danger",
                "text": {"type": "plain_text", "text": "Reject"},
                "value": value,
            },
        ]
        if facts.link is not None:
            buttons.append(
                {
                    "type": "button",
                    "action_id": PAGE,
                    "text": {"type": "plain_text", "text": "Edit or grant on the page"},
                    "url": facts.link,
                }
            )
        return buttons


def _outcome(event: str, body: Mapping[str, Any]) -> str:
    """One line: what became of the review, who, when."""
    when = _when(body.get("created_at"))
    if event == "review.decided":
        who = body.get("reviewer") or "an anonymous reviewer"
        parts = []
        for decision in body.get("decisions") or []:
            kind = _OUTCOMES.get(str(decision.get("type")), str(decision.get("type")))
            reason = decision.get("message")
            part = f"{kind} ({decision.get('tool')})"
            parts.append(f"{part}: {reason}" if reason else part)
        return f"Decided by {who} at {when}: {'; '.join(parts)}."
    if event == "review.expired":
        return f"Expired at {when} without a decision: nothing ran."
    if event == "review.cancelled":
        who = body.get("reviewer")
        reason = body.get("reason")
        by = f" by {who}" if who else ""
        return f"Cancelled{by} at {when}: nothing ran" + (f" ({reason})." if reason else ".")
    return "No longer waiting for a decision."
