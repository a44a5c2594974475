"""The Slack path: the Approve and Reject buttons of a review's Slack message.

The chat of :class:`~tests.conformance.paths.HTTPPath` (proposals through ``POST /hitl/chat``)
with a :class:`toolguard.notify.Slack` channel, whose app serves ``POST /hitl/slack/actions``;
a fake Slack Web API on loopback takes its replies. A decision is one signed click, as Slack
sends it: ``approve`` is the Approve button (every call of the review), ``reject`` the reject
form's submission with the decision's message as the reason. The reviewer is the Slack user the
``[slack]`` table maps to that name (a decision without one is a click by ``reviewer``: every
click comes from a named person). What a click did is read back from the thread (a review
still waiting, or the reply the model wrote) or from the reply Slack showed only to the person
(a refusal).

Slack cannot express the rest: edits, grants, answers and any decision list that is not one
approve or one reject of the whole review are refused by the adapter with
:data:`ON_THE_PAGE`, the way the message sends them to the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from tests.notify.slack_fake import BOT_TOKEN, CHANNEL, SIGNING_SECRET, running_slack, signed
from toolguard import ReviewedChat, Rules

from .paths import ADAPTERS, Adapter, HTTPPath, Outcome, Paused, Ran, Refused, _who

ON_THE_PAGE = (
    "Slack's buttons approve or reject a whole review: edits, standing grants and answers are"
    " made on the page the message links. Nothing was sent."
)
"""What the adapter answers for a decision no Slack button sends."""
REPLY = "Slack reply"
"""The :class:`Refused` kind of a refusal Slack showed only to the person who clicked."""


def _ids(text: str) -> str:
    return re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)


class SlackPath(HTTPPath):
    """``POST /hitl/slack/actions`` in process (httpx's ASGI transport), SQLite behind it."""

    name = "slack"
    title = "Slack buttons (`POST /hitl/slack/actions`)"

    @asynccontextmanager
    async def _session(self, *, rules: Rules | None, ttl: float | None) -> AsyncIterator[Adapter]:
        from toolguard.notify import Slack

        with running_slack() as fake:
            self.fake = fake
            self.slack = Slack(
                CHANNEL,
                token=BOT_TOKEN,
                signing_secret=SIGNING_SECRET,
                users={},
                api_url=fake.url,
            )
            await self.open(rules=rules, ttl=ttl)
            yield self

    def _client(self, chat: ReviewedChat) -> Any:
        import httpx

        from toolguard.http import create_app

        chat.notify = self.slack  # before the app is made: it adds the Slack route
        app = create_app(chat, reviewer=_who)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1")

    def _user(self, reviewer: str | None) -> str:
        """The Slack user id the ``[slack]`` table maps to ``reviewer`` (``None``: the person
        who clicks when no one is named, ``reviewer``)."""
        reviewer = "reviewer" if reviewer is None else reviewer
        users = self.slack.users
        for user, name in users.items():
            if name == reviewer:
                return user
        user = f"U{len(users):04d}"
        users[user] = reviewer
        return user

    async def _send(
        self, client: Any, decisions: Any, reviewer: str | None, thread_id: str, review_id: str
    ) -> Outcome:
        kinds = {d.get("type") for d in decisions} if isinstance(decisions, list) else set()
        plain = isinstance(decisions, list) and all(
            isinstance(d, dict) and set(d) <= {"type", "message"} for d in decisions
        )
        state = await self.chat.get_thread(thread_id)
        waiting = len(state.pending.pending_review.action_requests) if state.pending else 1
        if not plain or kinds not in ({"approve"}, {"reject"}) or len(decisions) != waiting:
            return self.record(Refused("adapter", ON_THE_PAGE))
        user = self._user(reviewer)
        value = json.dumps({"thread_id": thread_id, "review_id": review_id})
        if kinds == {"approve"}:
            payload: dict[str, Any] = {
                "type": "block_actions",
                "user": {"id": user},
                "channel": {"id": CHANNEL},
                "trigger_id": "trigger",
                "actions": [{"action_id": "toolguard_approve", "type": "button", "value": value}],
            }
        else:
            metadata = {"thread_id": thread_id, "review_id": review_id, "channel": CHANNEL}
            reason = decisions[0].get("message") or ""
            payload = {
                "type": "view_submission",
                "user": {"id": user},
                "view": {
                    "callback_id": "toolguard_reject_reason",
                    "private_metadata": json.dumps(metadata),
                    "state": {"values": {"reason": {"reason": {"value": reason}}}},
                },
            }
        before = len(self.fake.of("chat.postEphemeral"))
        body, headers = signed(payload)
        response = await client.post("/hitl/slack/actions", content=body, headers=headers)
        self.written.append(response.text)
        replies = [r["text"] for r in self.fake.of("chat.postEphemeral")[before:]]
        if response.status_code != 200:
            return Refused(f"HTTP {response.status_code}", _ids(response.text))
        if response.text:  # the reject form's own errors
            errors = response.json()["errors"]
            return self.record(Refused(REPLY, _ids(errors["reason"])))
        if replies:
            return self.record(Refused(REPLY, _ids(replies[-1])))
        return await self._read_back(thread_id, review_id)

    async def _read_back(self, thread_id: str, review_id: str) -> Outcome:
        """What the click did: the review still (or again) waiting, or the model's reply."""
        await self._error_of(self.chat, thread_id)
        state = await self.chat.get_thread(thread_id)
        if state.pending is not None:
            if state.pending.review_id != review_id:
                self.reviews.append((thread_id, state.pending.review_id))
            return self.record(Paused(state.pending.pending_review.model_dump(mode="json")))
        self.reviews = [r for r in self.reviews if r[0] != thread_id]
        replies = [m for m in state.messages if m.get("role") == "assistant"]
        text = str(replies[-1].get("content") or "")
        return self.record(Ran(error=self._last_error.get(thread_id, False), text=text))

    async def texts(self) -> list[str]:
        texts = await super().texts()
        texts.extend(json.dumps(call.body) for call in self.fake.calls)
        return texts


ADAPTERS[SlackPath.name] = SlackPath
