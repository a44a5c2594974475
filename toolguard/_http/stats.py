"""``GET /hitl/stats``: the approval statistics of the threads the caller may read.

The body is :func:`toolguard._chat.stats.compute_stats` (the same as
``toolguard stats --json``) over every stored thread the chat's ``access``
hook lets the caller read (operation ``"read"``, as ``GET /hitl/reviews``
lists them); the route sits behind the router's sign-in like every other.
``?since=`` and ``?until=`` take a date (``2026-11-01``), a time
(``2026-11-01T09:00:00Z``) or a number of days (``30d``); anything else is a
400 naming the parameter.
"""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations at run time.

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, status

from toolguard._chat.chat import ReviewedChat
from toolguard._chat.stats import SinceError, compute_stats, parse_since
from toolguard._http.answers import Refusal
from toolguard._http.live import _readable_threads
from toolguard._http.schemas import ErrorResponse

__all__ = ["add_stats_route"]

_PERIOD_LIMIT = 40
"""Characters of ``since``/``until`` read (a longer one is no date)."""


def add_stats_route(
    router: APIRouter, get_chat: Callable[..., Any], who_asks: Callable[..., Any]
) -> None:
    """``GET /stats`` on ``router`` (the chat's routes, with their guard and sign-in)."""

    @router.get(
        "/stats",
        responses={
            400: {"model": ErrorResponse, "description": "since or until is not a date."},
        },
    )
    async def get_stats(
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
        since: Annotated[str | None, Query(max_length=_PERIOD_LIMIT)] = None,
        until: Annotated[str | None, Query(max_length=_PERIOD_LIMIT)] = None,
    ) -> dict[str, Any]:
        """Per tool: calls, asks, decisions, calls run without a person, time to decide, who
        decided, and suggestions, over the threads the caller may read."""
        now = reviewed_chat.clock()
        try:
            end = parse_since(until, now=now) if until is not None else now
        except SinceError as exc:
            raise Refusal(status_code=status.HTTP_400_BAD_REQUEST, detail=f"until: {exc}") from None
        try:
            start = parse_since(since, now=end) if since is not None else None
        except SinceError as exc:
            raise Refusal(status_code=status.HTTP_400_BAD_REQUEST, detail=f"since: {exc}") from None
        states = await _readable_threads(reviewed_chat, who)
        return compute_stats(states, since=start, now=end)
