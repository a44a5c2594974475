"""``POST /hitl/ai-sdk/chat``: a :class:`~toolguard.ReviewedChat` behind the Vercel AI SDK's
``useChat`` (:func:`create_ai_sdk_router`; ``toolguard serve`` mounts it too).

A thin translation, both ways: the request's last message is either the user's text
(:meth:`~toolguard.ReviewedChat.send_message`) or the assistant message whose tool parts
carry the person's approval responses (``addToolApprovalResponse``: ``approval: {id,
approved, reason}``), which become the decisions of
:meth:`~toolguard.ReviewedChat.submit_review` for the review they answer, with its checks
(once only, deadlines, reviewers, quorum, rules). The answer is the turn as a UI message
stream (:mod:`~toolguard._http.ui_stream`): a call awaiting review is a
``tool-approval-request`` whose ``approvalId`` names its review and its action.

Whatever a request cannot do is refused with an ``error`` part and changes nothing. Answers
to the review awaiting decisions must name its calls (an unknown or forged approval id, a
call answered twice or not at all, approvals of two reviews at once are refused here);
answers to any other review (answered already, being applied, of another thread) go to the
chat bound to that review, which refuses them with its own text, as ``POST /hitl/review``
does. The protocol has no edits and no standing grants: those are made on the approval page,
whose address each approval request carries (``reviewUrl``).
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route's annotations.

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from toolguard._chat.chat import ReviewedChat
from toolguard._chat.turns import ChatTurn
from toolguard._http.answers import ECHO_LIMIT, Refusal, answer, shorten
from toolguard._http.auth import Authenticator, check_auth, identity_dependency
from toolguard._http.guards import Guard, route_class
from toolguard._http.parsing import DEFAULT_MAX_BODY_BYTES
from toolguard._http.routes import _reviewer_dependency, check_chat
from toolguard._http.ui_stream import (
    METADATA_KEY,
    STREAM_HEADERS,
    Link,
    Part,
    approval_id,
    error_parts,
    sse,
    turn_parts,
)
from toolguard._policy.redact import shown_messages
from toolguard._stores.protocol import ThreadState

PATH: Final = "/ai-sdk/chat"
"""The route's path under the router's prefix: ``POST /hitl/ai-sdk/chat``."""

LOST: Final = "The conversation could not be read back after the turn."
NO_TEXT: Final = "The last message has no text: send the user's message as a text part."
NO_ANSWER: Final = (
    "The last message answers no approval: send the user's next message, or the assistant"
    " message after addToolApprovalResponse."
)
NO_THREAD: Final = (
    "The assistant message does not name its conversation (metadata.toolguard.threadId):"
    " send the messages as this server streamed them."
)
BAD_THREAD: Final = (
    "metadata.toolguard.threadId must be a conversation id (text of at most 128 characters)."
)
REGENERATE: Final = (
    "Regenerating a message is not supported: the conversation is kept on the server. Send a"
    " new message instead."
)
MALFORMED: Final = (
    "The approval response of the tool call {call} is malformed: it needs approval.id (text)"
    " and approval.approved (true or false), and approval.reason must be text if given."
)
UNKNOWN: Final = (
    "The approval {approval} is not a call awaiting review in this conversation. Nothing was"
    " changed."
)
OTHER_CALL: Final = (
    "The approval {approval} belongs to another tool call than {call}. Nothing was changed."
)
NOT_CARRIED: Final = (
    "An approval response carries approved and a reason only: edits and standing grants are"
    " made on the approval page (approvalDescriptor.reviewUrl). Nothing was changed."
)
TWO_REVIEWS: Final = (
    "The approvals answer two different reviews; answer the calls of one review at a time."
    " Nothing was changed."
)
TWICE: Final = "The approval {approval} is answered twice. Nothing was changed."
UNANSWERED: Final = (
    "Every call awaiting review needs an answer in the same request; {names} has none."
    " Nothing was changed."
)

_TOOL_PARTS: Final = ("tool-", "dynamic-tool")
_NOT_CARRIED: Final = frozenset({"grant", "edit", "edited_action", "editedArgs", "editedInput"})
"""Fields of an approval that would ask for what the protocol cannot carry: refused."""
_ID_LIMIT: Final = 128  # the longest thread, review or action id (as the HTTP API's ids)


class _UnanswerableError(Exception):
    """A request this route cannot turn into a turn of the chat (its text is the error part)."""


class UIMessageBody(BaseModel):
    """One message of ``useChat``'s request (only the last one is read)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    """Who wrote it."""
    parts: list[Any] = Field(default_factory=list)
    """Its parts: ``{"type": "text", "text": ...}``, tool parts, ..."""
    metadata: Any = None
    """The message's metadata; this server's assistant messages carry
    ``{"toolguard": {"threadId": ..., "reviewId": ...}}``."""


class UIChatRequest(BaseModel):
    """The body ``useChat``'s ``DefaultChatTransport`` sends."""

    model_config = ConfigDict(extra="ignore")

    messages: list[UIMessageBody] = Field(min_length=1)
    """The conversation as the page holds it; the server reads the last message only."""
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    """Why the page sends it; ``regenerate-message`` is refused (an ``error`` part)."""


# --------------------------------------------------------------------------- reading a request


def _thread_of(messages: Sequence[UIMessageBody]) -> str | None:
    """The thread named by the latest message's metadata that names one (``None``: none)."""
    for message in reversed(messages):
        meta = message.metadata
        ours = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
        if isinstance(ours, dict) and "threadId" in ours:
            thread_id = ours["threadId"]
            if not isinstance(thread_id, str) or not 0 < len(thread_id) <= _ID_LIMIT:
                raise _UnanswerableError(BAD_THREAD)
            return thread_id
    return None


def _text_of(message: UIMessageBody) -> str:
    """The text parts of a user message, one after the other."""
    texts = [
        part["text"]
        for part in message.parts
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    text = "\n".join(t for t in texts if t)
    if not text:
        raise _UnanswerableError(NO_TEXT)
    return text


def _answers(message: UIMessageBody) -> dict[str, tuple[str, bool, str | None]]:
    """``approval id -> (tool call id, approved, reason)`` of the message's answered approvals."""
    found: dict[str, tuple[str, bool, str | None]] = {}
    for part in message.parts:
        if not isinstance(part, dict) or part.get("state") != "approval-responded":
            continue
        kind = part.get("type")
        if not isinstance(kind, str) or not kind.startswith(_TOOL_PARTS):
            continue
        call = part.get("toolCallId")
        approval = part.get("approval")
        shown_call = shorten(repr(call), ECHO_LIMIT)
        if not isinstance(call, str) or not isinstance(approval, dict):
            raise _UnanswerableError(MALFORMED.format(call=shown_call))
        approval_id, approved = approval.get("id"), approval.get("approved")
        reason = approval.get("reason")
        if (
            not isinstance(approval_id, str)
            or not isinstance(approved, bool)
            or not (reason is None or isinstance(reason, str))
        ):
            raise _UnanswerableError(MALFORMED.format(call=shown_call))
        if _NOT_CARRIED & approval.keys():
            raise _UnanswerableError(NOT_CARRIED)
        if approval_id in found:
            raise _UnanswerableError(TWICE.format(approval=shorten(repr(approval_id), ECHO_LIMIT)))
        found[approval_id] = (call, approved, reason)
    if not found:
        raise _UnanswerableError(NO_ANSWER)
    return found


def _decision(answer: tuple[str, bool, str | None]) -> dict[str, Any]:
    _, approved, reason = answer
    if approved:
        return {"type": "approve"}
    return {"type": "reject", **({"message": reason} if reason else {})}


def _review_of(answers: Mapping[str, Any]) -> str:
    """The one review the answers' approval ids name."""
    reviews = set()
    for answered in answers:
        review_id, dot, action_id = answered.partition(".")
        if not (dot and 0 < len(review_id) <= _ID_LIMIT and 0 < len(action_id) <= _ID_LIMIT):
            raise _UnanswerableError(UNKNOWN.format(approval=shorten(repr(answered), ECHO_LIMIT)))
        reviews.add(review_id)
    if len(reviews) > 1:
        raise _UnanswerableError(TWO_REVIEWS)
    return reviews.pop()


def decisions_for(
    state: ThreadState, answers: Mapping[str, tuple[str, bool, str | None]]
) -> tuple[list[dict[str, Any]], str]:
    """The decisions of ``answers`` and the id of the review they answer.

    For the review awaiting decisions: one decision per action awaiting review, in the
    review's order (``approve``, or ``reject`` with the reason as its message); every
    answer must name one of them, with its tool call, and each needs one. For any other
    review (answered already, being applied, of another thread, never made), the
    decisions as sent, bound to that review: the chat refuses them, with its own text.

    Raises:
        _UnanswerableError: an answer does not fit the review awaiting decisions.
    """
    review_id = _review_of(answers)
    pending = state.pending
    if pending is None or pending.review_id != review_id or state.status != "awaiting_review":
        return [_decision(answer) for answer in answers.values()], review_id
    waiting = {approval_id(review_id, a): a for a in pending.actions if a.status == "requested"}
    for answered, (call_id, _, _) in answers.items():
        shown = shorten(repr(answered), ECHO_LIMIT)
        action = waiting.get(answered)
        if action is None:
            raise _UnanswerableError(UNKNOWN.format(approval=shown))
        if action.call_id != call_id:
            raise _UnanswerableError(
                OTHER_CALL.format(approval=shown, call=shorten(repr(call_id), ECHO_LIMIT))
            )
    missing = [action.name for key, action in waiting.items() if key not in answers]
    if missing:
        names = ", ".join(f"`{name}`" for name in missing)
        raise _UnanswerableError(UNANSWERED.format(names=names))
    return [_decision(answers[key]) for key in waiting], review_id


# --------------------------------------------------------------------------- one request


def _seen(before: ThreadState | None) -> tuple[int, frozenset[str]]:
    """Where the turn's messages will start in the thread, and the calls whose output an
    earlier response already streamed (those that ran in the step before it paused)."""
    if before is None:
        return 0, frozenset()
    ran = before.pending.results if before.pending is not None else []
    return len(before.messages), frozenset(result.call_id for result in ran)


async def respond(
    chat: ReviewedChat,
    body: UIChatRequest,
    who: str | None,
    *,
    prefix: str,
    link: Link | None,
) -> list[Part]:
    """The parts answering one request: the turn it makes, or one ``error`` part."""
    route = f"{prefix}/ai-sdk"  # an unknown thread's text names this route
    try:
        if body.trigger == "regenerate-message":
            raise _UnanswerableError(REGENERATE)
        last = body.messages[-1]
        thread_id = _thread_of(body.messages)
        if last.role == "assistant":
            answers = _answers(last)
            if thread_id is None:
                raise _UnanswerableError(NO_THREAD)
            before = await answer(chat.get_thread(thread_id, actor=who), route)
            start, done = _seen(before)
            decisions, review_id = decisions_for(before, answers)
            turn: ChatTurn = await answer(
                chat.submit_review(decisions, thread_id, review_id=review_id, reviewer=who),
                route,
            )
        elif last.role == "user":
            text = _text_of(last)
            # Only counted (where this turn's messages start): send_message asks the access hook.
            stored = await chat.store.load(thread_id) if thread_id is not None else None
            start, done = _seen(stored)
            turn = await answer(chat.send_message(text, thread_id, actor=who), route)
        else:
            raise _UnanswerableError(NO_TEXT)
        # What this request's own turn wrote (the caller may post or decide here, which the
        # chat's hooks checked): its messages only are streamed.
        after = await chat.store.load(turn.thread_id)
    except _UnanswerableError as exc:
        return error_parts(str(exc))
    except Refusal as exc:
        return error_parts(str(exc.detail))
    if after is None:  # pragma: no cover - the turn just saved it
        return error_parts(LOST)
    shown = shown_messages(chat, after.messages)
    return turn_parts(after, shown, start=start, done=done, link=link)


# --------------------------------------------------------------------------- the router


def ai_sdk_routes(
    chat: ReviewedChat,
    checked: type[APIRoute],
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
    auth: Authenticator | None = None,
    link: Callable[[Request, str], str | None] | None = None,
) -> APIRouter:
    """The router of ``POST {prefix}/ai-sdk/chat``, whose routes are ``checked`` (a
    :func:`~toolguard._http.guards.route_class`); ``link(request, thread_id)`` is the address
    of a thread's review on an approval page (``None``: none)."""
    signed_in = identity_dependency(auth) if auth is not None else None
    who_asks = _reviewer_dependency(signed_in or reviewer)
    router = APIRouter(prefix=prefix, tags=["toolguard"], route_class=checked)

    @router.post(
        PATH,
        response_class=Response,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": (
                    "The Vercel AI SDK's UI message stream (v1): the turn's parts, or one"
                    " `error` part when the request is refused."
                ),
            }
        },
    )
    async def post_ai_sdk_chat(
        body: UIChatRequest,
        request: Request,
        who: Annotated[str | None, Depends(who_asks)],
    ) -> Response:
        """A turn of the chat for ``useChat`` (the Vercel AI SDK): a user message, or the
        person's answers to the calls awaiting review (``addToolApprovalResponse``)."""

        def shown_link(thread_id: str) -> str | None:
            return link(request, thread_id) if link is not None else None

        parts = await respond(chat, body, who, prefix=prefix, link=shown_link)
        return Response(sse(parts), media_type="text/event-stream", headers=STREAM_HEADERS)

    return router


def page_link(request: Request, thread_id: str) -> str:
    """The thread on the approval page of the server that answers ``request``."""
    return f"{request.base_url}?thread={quote(thread_id, safe='')}"


def served_ai_sdk_routes(
    chat: ReviewedChat, auth: Authenticator | None
) -> Callable[[type[APIRoute]], APIRouter]:
    """``POST /hitl/ai-sdk/chat`` for an app of :func:`~toolguard._http.app.protected_app`
    (``routers=``), linking each review to that app's approval page."""

    def make(checked: type[APIRoute]) -> APIRouter:
        return ai_sdk_routes(chat, checked, auth=auth, link=page_link)

    return make


def _template_link(review_url: str | None) -> Callable[[Request, str], str | None] | None:
    if review_url is None:
        return None
    if "{thread_id}" not in review_url:
        msg = (
            "review_url must be text holding {thread_id}, e.g."
            f" 'https://reviews.example.com/?thread={{thread_id}}'; got {review_url!r}"
        )
        raise ValueError(msg)

    def link(_: Request, thread_id: str) -> str:
        return review_url.replace("{thread_id}", quote(thread_id, safe=""))

    return link


def create_ai_sdk_router(
    chat: ReviewedChat,
    *,
    prefix: str = "/hitl",
    review_url: str | None = None,
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    auth: Authenticator | None = None,
) -> APIRouter:
    """``POST {prefix}/ai-sdk/chat`` for a ``useChat`` front end, to mount into any FastAPI app.

    Point the page's ``DefaultChatTransport`` at it (``api: "/hitl/ai-sdk/chat"``). A call
    awaiting review streams as a ``tool-approval-request``; the person's
    ``addToolApprovalResponse`` (approve, or deny with a reason), sent back with the
    messages, decides it through :meth:`~toolguard.ReviewedChat.submit_review`. See
    docs/own-ui.md.

    Args:
        chat: the chat to serve.
        prefix: the path in front of ``/ai-sdk/chat``.
        review_url: the address of a thread on your approval page, holding
            ``{thread_id}`` (e.g. ``"https://reviews.example.com/?thread={thread_id}"``):
            each approval request carries it as ``approvalDescriptor.reviewUrl``, for
            the decisions the protocol cannot carry (edits, standing grants). ``None``:
            no link.
        reviewer: a FastAPI dependency returning who asks (see
            :func:`toolguard.http.create_router`): the reviewer of the approvals
            and the actor of the messages.
        max_body_bytes: the largest body read (default 1 MiB; larger: 413).
        allowed_origins: other origins whose pages may post (else 403).
        auth: a :class:`~toolguard.http.HeaderAuth` or :class:`~toolguard.http.TokenAuth`:
            the route requires a signed-in reviewer, who is the reviewer.

    Returns:
        A router whose route refuses what :func:`toolguard.http.create_router`'s routes
        refuse (403, 413, 415, 422) and answers everything else as a UI message stream.

    Raises:
        TypeError, ValueError: an option is invalid.
    """
    check_chat(chat)
    auth = check_auth(auth, reviewer)
    link = _template_link(review_url)
    checked = route_class(Guard(max_body_bytes, allowed_origins))
    return ai_sdk_routes(chat, checked, prefix=prefix, reviewer=reviewer, auth=auth, link=link)
