"""``POST /hitl/slack/actions``: the Slack app's interactivity URL (:func:`slack_routers`).

Every request must carry Slack's signature (``X-Slack-Signature: v0=`` HMAC-SHA256 of
``v0:{timestamp}:{raw body}`` with the signing secret, checked in constant time by
slack-sdk's ``SignatureVerifier``) and a timestamp at most 5 minutes away; any other gets a
401, decides nothing and is logged (``toolguard.slack``, with the peer's address). A payload
seen before (the same signature) is answered and ignored. A button translates to the chat's
own review path, :meth:`~toolguard.ReviewedChat.submit_review` (the one ``POST /hitl/review``
calls), as the reviewer the ``[slack]`` table names: Approve approves every waiting call of
the review, Reject opens a modal (``views.open``) whose reason rejects them. A Slack user not
in the table, one the chat refuses (``[reviewers]``, quorum rules), a review no longer
waiting, or a review Slack cannot decide (an edit-only tool, say) gets an ephemeral reply
saying why, and nothing changes. Slack wants an answer within 3 seconds: a decision that
takes longer (a slow tool, the model's next reply) goes on after the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from toolguard._core.errors import (
    AccessDeniedError,
    InvalidReviewDecisionError,
    NoPendingReviewError,
    ReviewerNotAllowedError,
    ToolguardError,
    UnknownThreadError,
)
from toolguard._notify.channels import channels_of
from toolguard._notify.facts import page_link
from toolguard._notify.slack import APPROVE, REJECT, REJECT_VIEW, Slack

if TYPE_CHECKING:
    from toolguard._chat.chat import ReviewedChat

__all__ = ["ACTIONS_PATH", "slack_routers", "verified"]

ACTIONS_PATH: Final = "/hitl/slack/actions"
"""Where Slack sends the buttons' and the modal's payloads."""
WINDOW: Final = 5 * 60
"""Seconds a request's timestamp may be away from this server's clock."""
ACK_WITHIN: Final = 2.5
"""Seconds a decision may take before Slack gets its answer (it wants one within 3)."""
_SEEN_LIMIT: Final = 10_000
_log = logging.getLogger("toolguard.slack")


def verified(secret: str, raw: bytes, headers: Mapping[str, str], now: float) -> str | None:
    """Why a request is not Slack's (``None``: its signature and timestamp are good)."""
    from slack_sdk.signature import SignatureVerifier  # noqa: PLC0415 - the slack extra

    stamp = headers.get("x-slack-request-timestamp", "")
    signature = headers.get("x-slack-signature", "")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        return "no valid X-Slack-Request-Timestamp"
    if abs(now - int(stamp)) > WINDOW:
        return "a timestamp more than 5 minutes away"
    if not signature.startswith("v0=") or len(signature) > 100:
        return "no valid X-Slack-Signature"

    class _Now:
        def now(self) -> float:
            return now

    try:
        good = SignatureVerifier(secret, clock=_Now()).is_valid(raw, stamp, signature)  # type: ignore[arg-type]
    except (ValueError, UnicodeDecodeError):
        good = False
    return None if good else "a signature that does not match"


class _Seen:
    """The signatures of the requests taken in the last minutes (a replay is ignored)."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

    def first(self, signature: str, now: float) -> bool:
        """Whether ``signature`` is new (it is remembered until it could no longer pass)."""
        oldest = next(iter(self.until.values()), None)
        if len(self.until) > _SEEN_LIMIT or (oldest is not None and oldest < now):
            self.until = {s: t for s, t in self.until.items() if t >= now}
            while len(self.until) > _SEEN_LIMIT:
                self.until.pop(next(iter(self.until)))
        if signature in self.until:
            return False
        self.until[signature] = now + 2 * WINDOW + 60
        return True


def slack_routers(chat: ReviewedChat) -> list[APIRouter]:
    """The interactivity route of the chat's :class:`~toolguard.Slack` channel, if it has one."""
    for channel in channels_of(chat.notify):
        if isinstance(channel, Slack):
            return [_router(chat, channel)]
    return []


def _router(chat: ReviewedChat, slack: Slack) -> APIRouter:
    router = APIRouter()
    seen = _Seen()
    running: set[asyncio.Task[None]] = set()

    @router.post(ACTIONS_PATH, include_in_schema=False)
    async def slack_actions(request: Request) -> Response:
        raw = await request.body()
        now = time.time()
        problem = verified(slack.signing_secret, raw, request.headers, now)
        if problem is not None:
            peer = request.client.host if request.client is not None else "?"
            _log.warning("refused a Slack request from %s: %s; nothing was decided", peer, problem)
            return JSONResponse(
                {"detail": f"Not a valid Slack request: {problem}."}, status_code=401
            )
        if not seen.first(request.headers["x-slack-signature"], now):
            _log.warning("ignored a Slack request seen before (a replay); nothing was decided")
            return Response(status_code=200)
        payload = _payload(raw)
        if payload is None:
            return JSONResponse({"detail": "The request has no Slack payload."}, status_code=400)
        answer = await _Interaction(chat, slack, payload, running).handle()
        return answer if answer is not None else Response(status_code=200)

    return router


def _payload(raw: bytes) -> dict[str, Any] | None:
    """The JSON ``payload`` field of a form body, or ``None``."""
    try:
        form = parse_qs(raw.decode("utf-8"), max_num_fields=20)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        return None
    return payload if isinstance(payload, dict) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class _Interaction:
    """One verified payload: a button or the reject modal's submission."""

    def __init__(
        self,
        chat: ReviewedChat,
        slack: Slack,
        payload: dict[str, Any],
        running: set[asyncio.Task[None]],
    ) -> None:
        self.chat = chat
        self.slack = slack
        self.payload = payload
        self.running = running
        user = payload.get("user")
        self.user = _text(user.get("id")) if isinstance(user, dict) else None

    async def handle(self) -> Response | None:
        kind = self.payload.get("type")
        if kind == "block_actions":
            await self._button()
            return None
        view = self.payload.get("view")
        if (
            kind == "view_submission"
            and isinstance(view, dict)
            and view.get("callback_id") == REJECT_VIEW
        ):
            return await self._reject_submitted(view)
        return None

    async def _button(self) -> None:
        actions = self.payload.get("actions")
        action = next(
            (
                a
                for a in (actions if isinstance(actions, list) else [])
                if isinstance(a, dict) and a.get("action_id") in (APPROVE, REJECT)
            ),
            None,
        )
        if action is None or self.user is None:
            return  # the page's link button, or something else: nothing to do
        channel = self._channel()
        try:
            target = json.loads(action.get("value") or "")
            thread_id, review_id = str(target["thread_id"]), str(target["review_id"])
        except (ValueError, TypeError, KeyError):
            return
        reviewer = await self._reviewer(channel)
        if reviewer is None:
            return
        if action["action_id"] == APPROVE:
            await self._decide({"type": "approve"}, reviewer, thread_id, review_id, channel)
            return
        await self._open_reject(thread_id, review_id, channel)

    def _channel(self) -> str | None:
        channel = self.payload.get("channel")
        container = self.payload.get("container")
        if isinstance(channel, dict) and _text(channel.get("id")):
            return str(channel["id"])
        if isinstance(container, dict) and _text(container.get("channel_id")):
            return str(container["channel_id"])
        return None

    async def _reviewer(self, channel: str | None) -> str | None:
        """The reviewer this Slack user decides as; else an ephemeral reply and ``None``."""
        assert self.user is not None  # noqa: S101 - checked by the callers
        reviewer = self.slack.reviewer_of(self.user)
        if reviewer is None:
            _log.warning("refused Slack user %s: not in the [slack] table", self.user)
            await self._tell(
                channel,
                "Your Slack user is not in toolguard's [slack] table, so you cannot decide"
                " here: nothing was decided. Ask whoever runs toolguard to add your user id"
                f" ({self.user}) with your reviewer name.",
            )
        return reviewer

    async def _open_reject(self, thread_id: str, review_id: str, channel: str | None) -> None:
        trigger = _text(self.payload.get("trigger_id"))
        if trigger is None:
            return
        metadata = json.dumps({"thread_id": thread_id, "review_id": review_id, "channel": channel})
        view = {
            "type": "modal",
            "callback_id": REJECT_VIEW,
            "private_metadata": metadata,
            "title": {"type": "plain_text", "text": "Reject"},
            "submit": {"type": "plain_text", "text": "Reject"},
            "close": {"type": "plain_text", "text": "Cancel"},
            "blocks": [
                {
                    "type": "input",
                    "block_id": "reason",
                    "label": {"type": "plain_text", "text": "Why? The agent reads this."},
                    "element": {
                        "type": "plain_text_input",
                        "action_id": "reason",
                        "multiline": True,
                        "max_length": 2000,
                    },
                }
            ],
        }
        try:
            await self.slack.call("views.open", trigger_id=trigger, view=view)
        except Exception as exc:
            _log.warning("Slack views.open failed: %s", _why(exc))
            await self._tell(channel, "The reject form could not be opened: nothing was decided.")

    async def _reject_submitted(self, view: dict[str, Any]) -> Response | None:
        try:
            target = json.loads(view.get("private_metadata") or "")
            thread_id, review_id = str(target["thread_id"]), str(target["review_id"])
            channel = _text(target.get("channel"))
        except (ValueError, TypeError, KeyError):
            return None
        if self.user is None:
            return None
        reviewer = self.slack.reviewer_of(self.user)
        if reviewer is None:
            _log.warning("refused Slack user %s: not in the [slack] table", self.user)
            return JSONResponse(
                {
                    "response_action": "errors",
                    "errors": {
                        "reason": "Your Slack user is not in toolguard's [slack] table:"
                        " nothing was decided."
                    },
                }
            )
        values = (view.get("state") or {}).get("values") or {}
        reason = ((values.get("reason") or {}).get("reason") or {}).get("value")
        text = reason.strip() if isinstance(reason, str) and reason.strip() else None
        await self._decide(
            {"type": "reject", **({"message": text} if text else {})},
            reviewer,
            thread_id,
            review_id,
            channel,
        )
        return None

    async def _decide(
        self,
        decision: dict[str, Any],
        reviewer: str,
        thread_id: str,
        review_id: str,
        channel: str | None,
    ) -> None:
        """The decision through the chat's review path; waits at most :data:`ACK_WITHIN`."""
        task = asyncio.ensure_future(
            self._submit(decision, reviewer, thread_id, review_id, channel)
        )
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        await asyncio.wait({task}, timeout=ACK_WITHIN)

    async def _submit(
        self,
        decision: dict[str, Any],
        reviewer: str,
        thread_id: str,
        review_id: str,
        channel: str | None,
    ) -> None:
        chat = self.chat
        link = page_link(self.slack.page_url, thread_id)
        try:
            state = await chat.get_thread(thread_id, actor=reviewer)
            pending = state.pending
            count = len(pending.pending_review.action_requests) if pending is not None else 1
            await chat.submit_review(
                [decision] * count, thread_id, review_id=review_id, reviewer=reviewer
            )
        except InvalidReviewDecisionError as exc:  # the chat's own text, and where to go
            where = f": {link}" if link else ""
            text = f"{exc} Slack approves or rejects a whole review; decide it on the page{where}."
        except (
            AccessDeniedError,
            NoPendingReviewError,  # also stale and expired reviews
            ReviewerNotAllowedError,
            UnknownThreadError,
        ) as exc:
            text = str(exc)  # the chat's own text, as POST /hitl/review answers it
        except ToolguardError as exc:
            _log.warning("a Slack decision of thread %r by %s failed: %s", thread_id, reviewer, exc)
            return
        else:
            _log.info("Slack user %s decided thread %r as %s", self.user, thread_id, reviewer)
            return
        _log.info("refused a Slack decision by %s (%s): %s", self.user, reviewer, text)
        await self._tell(channel, text)

    async def _tell(self, channel: str | None, text: str) -> None:
        """An ephemeral reply to the person who clicked (``chat.postEphemeral``)."""
        if channel is None or self.user is None:
            return
        try:
            await self.slack.call("chat.postEphemeral", channel=channel, user=self.user, text=text)
        except Exception as exc:
            _log.warning("Slack chat.postEphemeral failed: %s", _why(exc))


def _why(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    error = response.get("error") if callable(getattr(response, "get", None)) else None  # type: ignore[union-attr]
    return str(error) if error else f"{type(exc).__name__}"
