"""The facts of one review that Slack and email show (:class:`ReviewFacts`).

Read from the outbox item (the review as requested: tools, arguments as shown, with
secrets ``REDACTED``, why each asks, quorum progress) and the thread as stored when the
item is sent (the judge's verdicts, the deadline, a quorum's progress now). A review is
never decided from these: only a link to the page, which needs sign-in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from toolguard._stores.protocol import ThreadState

__all__ = ["ARGS_LIMIT", "ReviewFacts", "Who", "page_link", "shown_args"]

ARGS_LIMIT = 2500
"""The most characters of one call's arguments a message shows (the page shows them all)."""

Who = Callable[[str], Sequence[str]]
"""Who may decide a tool (its reviewer names; empty: anyone signed in)."""


def shown_args(args: Mapping[str, Any]) -> str:
    """The arguments as indented JSON, cut at :data:`ARGS_LIMIT` characters."""
    text = json.dumps(args, ensure_ascii=False, indent=2, sort_keys=True)
    return text if len(text) <= ARGS_LIMIT else f"{text[:ARGS_LIMIT]}\n… (cut; see the page)"


def page_link(page_url: str | None, thread_id: str) -> str | None:
    """The review's address on the page (``?thread=``), or ``None`` without a page URL."""
    if page_url is None:
        return None
    base = page_url if page_url.endswith("/") else f"{page_url}/"
    return f"{base}?thread={quote(thread_id, safe='')}"


@dataclass
class Call:
    """One call waiting in the review."""

    tool: str
    args: dict[str, Any]
    why: str
    progress: tuple[int, int, list[str]] | None = None
    """A quorum's ``(given, required, by)``."""


@dataclass
class ReviewFacts:
    """What a message about a review says."""

    thread_id: str
    review_id: str
    calls: list[Call]
    verdicts: list[str] = field(default_factory=list)
    deadline: datetime | None = None
    deciders: list[str] = field(default_factory=list)
    link: str | None = None

    @classmethod
    def of(
        cls,
        body: Mapping[str, Any],
        state: ThreadState,
        *,
        page_url: str | None,
        who: Who | None,
    ) -> ReviewFacts:
        """The facts of the review an item is about (``body["pending_review"]`` when it has
        one, else the thread's pending review when it is this one)."""
        review_id = str(body.get("review_id"))
        pending = state.pending if state.pending is not None else None
        current = pending is not None and pending.review_id == review_id
        payload: Any = body.get("pending_review")
        if current and pending is not None and body.get("event") != "review.requested":
            payload = pending.pending_review.model_dump(mode="json")
        calls = _calls(payload) if payload is not None else _requested(state, review_id)
        verdicts = [
            e.judgement.summary()
            for e in state.audit
            if e.kind == "judged" and e.review_id == review_id and e.judgement is not None
        ]
        deadline = pending.expires_at if current and pending is not None else None
        deciders: list[str] = []
        if who is not None:
            for call in calls:
                deciders.extend(n for n in who(call.tool) if n not in deciders)
        return cls(
            thread_id=state.thread_id,
            review_id=review_id,
            calls=calls,
            verdicts=verdicts,
            deadline=deadline,
            deciders=deciders,
            link=page_link(page_url, state.thread_id),
        )

    @property
    def tools(self) -> str:
        """The tools' names, comma-separated."""
        return ", ".join(dict.fromkeys(c.tool for c in self.calls)) or "a tool"

    def deadline_text(self) -> str:
        """``until 2026-01-01 10:00 UTC``, or ``no deadline``."""
        if self.deadline is None:
            return "no deadline"
        return f"until {self.deadline.strftime('%Y-%m-%d %H:%M:%S')} UTC"

    def deciders_text(self) -> str:
        """Who may decide, in words."""
        return ", ".join(self.deciders) if self.deciders else "any signed-in reviewer"


def _requested(state: ThreadState, review_id: str) -> list[Call]:
    """The calls a review that no longer waits asked about (from its ``requested`` events)."""
    asked = [e.action_id for e in state.audit if e.kind == "requested" and e.review_id == review_id]
    actions = {a.id: a for a in state.actions}
    return [
        Call(tool=a.name, args=dict(a.args), why=a.description)
        for a in (actions.get(i) for i in asked if i is not None)
        if a is not None
    ]


def _calls(payload: Any) -> list[Call]:
    """The waiting calls of a ``pending_review`` dump."""
    if not isinstance(payload, Mapping):
        return []
    requests = payload.get("action_requests") or []
    configs = payload.get("review_configs") or []
    calls: list[Call] = []
    for index, request in enumerate(requests):
        config = configs[index] if index < len(configs) else {}
        approvals = config.get("approvals") if isinstance(config, Mapping) else None
        progress = None
        if isinstance(approvals, Mapping):
            progress = (
                int(approvals.get("given", 0)),
                int(approvals.get("required", 1)),
                [str(b) for b in approvals.get("by", [])],
            )
        calls.append(
            Call(
                tool=str(request.get("name")),
                args=dict(request.get("args") or {}),
                why=str(request.get("description") or ""),
                progress=progress,
            )
        )
    return calls
