"""How the gateway asks its MCP client about a call that needs a person: a form, or a URL.

**The form** (``elicitation/create`` in form mode, protocols before
2026-07-28): the question and :data:`~toolguard._gateway.question.APPROVAL_SCHEMA`;
the answer decides the review (:meth:`~toolguard._gateway.proxy.MCPProxy._decide`).

**The review's URL** (URL-mode elicitation, protocol 2025-11-25): the client is
asked to open the review on the approval page (``PAGE/?thread=THREAD_ID``,
where the reviewer signs in and may also edit the arguments or grant), with the
call's thread id as the ``elicitationId``. It is asked so when it declared URL
elicitation but not the form, when the form cannot show the call faithfully,
or, with ``--ask-by-url``, whenever it declared URL elicitation
(:func:`asks_by_url`). This is only a translation: the decision is made on the
page, through its own review API, and the call waiting in its request answers
as with any decision made there. The client's answer only says whether its
user agreed to open the page: ``decline`` or ``cancel`` cancel the review as
the form's do (nothing runs); ``accept`` leaves it to the page. Once the review
is decided (or expired, or cancelled), the client is sent
``notifications/elicitation/complete`` with that ``elicitationId``, before the
call's answer.

A client that cannot be asked leaves the call to the page until its deadline
(one line on stderr).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Final

import anyio

from toolguard._gateway.question import APPROVAL_SCHEMA

__all__ = ["URL_QUESTION", "ask_form", "ask_to_open", "asks_by_url", "review_url"]

URL_QUESTION: Final = (
    "A person must approve the call to `{name}` before it runs: open its review (review"
    " {review_id}) on the approval page to approve, edit or reject it."
)
"""The message of the URL-mode ``elicitation/create``."""


def asks_by_url(proxy: Any, capabilities: Any, *, form_fits: bool) -> bool:
    """Whether ``proxy`` (which knows its page's address) asks a client with ``capabilities``
    by URL: it declared URL elicitation, and it declared no form, or the form cannot show the
    call (``form_fits`` false), or the gateway prefers the URL (``proxy.ask_by_url``)."""
    elicitation = getattr(capabilities, "elicitation", None)
    if proxy.page_url is None or getattr(elicitation, "url", None) is None:
        return False
    return bool(proxy.ask_by_url) or not form_fits or getattr(elicitation, "form", None) is None


def review_url(page_url: str, thread_id: str) -> str:
    """The review of ``thread_id`` on the approval page at ``page_url``."""
    from toolguard._notify.facts import page_link  # noqa: PLC0415

    return str(page_link(page_url, thread_id))


def _failed(exc: Exception) -> None:
    sys.stderr.write(
        f"toolguard mcp-proxy: asking the client failed ({exc}); the call waits for"
        " the approval page\n"
    )


async def ask_form(  # noqa: PLR0917 - one question
    proxy: Any, ctx: Any, name: str, question: str, thread_id: str, review_id: str
) -> None:
    """Ask the client of ``ctx`` with the form; its answer decides the review."""
    try:
        answer = await ctx.session.elicit_form(
            question,
            APPROVAL_SCHEMA,
            related_request_id=getattr(ctx, "request_id", None),
        )
    except Exception as exc:  # the page can still decide until the deadline
        _failed(exc)
        return
    await proxy._decide(thread_id, review_id, name, answer)


async def ask_to_open(proxy: Any, ctx: Any, name: str, thread_id: str, review_id: str) -> None:
    """Ask the client of ``ctx`` to open the review and apply a refusal; runs until the call's
    review is over (the caller cancels it then), and tells the client its question is done."""
    try:
        try:
            answer = await ctx.session.elicit_url(
                URL_QUESTION.format(name=name, review_id=review_id),
                review_url(proxy.page_url, thread_id),
                thread_id,
                related_request_id=getattr(ctx, "request_id", None),
            )
        except Exception as exc:  # the page can still decide until the deadline
            _failed(exc)
        else:
            if getattr(answer, "action", None) != "accept":  # the user would not open it
                await proxy._decide(thread_id, review_id, name, answer)
        await anyio.sleep_forever()  # until the review is over
    finally:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):  # the client left
            await ctx.session.send_elicit_complete(
                thread_id, related_request_id=getattr(ctx, "request_id", None)
            )
