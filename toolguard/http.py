"""Serve a :class:`~toolguard.ReviewedChat` over HTTP with FastAPI.

Install the ``http`` extra (``pip install "toolguard-hitl[http]"``). This
module imports ``fastapi``; ``import toolguard`` never imports it.

Eight routes, under ``/hitl`` by default:

* ``POST /hitl/chat`` ``{message, thread_id?}`` sends a user message;
* ``POST /hitl/review`` ``{thread_id, decisions, review_id?}`` answers the
  pending review (send the ``review_id`` you were shown: a decision for an
  older review then never approves a newer one);
* ``POST /hitl/cancel`` ``{thread_id, review_id?, reason?}`` cancels it;
* ``GET /hitl/threads/{thread_id}`` returns the stored history, the pending
  review and every action's status, so a page can reload;
* ``GET /hitl/threads/{thread_id}/audit`` returns the audit trail as JSON lines;
* ``GET /hitl/tools`` lists the chat's tools with their JSON schemas;
* ``GET /hitl/reviews`` lists every pending review, oldest thread first;
* ``GET /hitl/events`` streams server-sent events as reviews arrive and
  threads change (the approval page's live list).

The ``POST`` routes answer ``{thread_id, reply, pending_review, review_id}``:
a reply, or the review payload in LangChain's human-in-the-loop format.
Errors follow one table: a body of the wrong shape (an empty
``decisions`` list, an unknown decision ``type``, a decision that is not an
object, an ``edited_action`` without a string ``name`` or an object ``args``)
is a 422; decisions that do not answer the review (wrong count, an ``edit``
without ``edited_action``), a review with nothing pending (or no longer
current, or expired), and a message while a review is pending are a 400
whose ``detail`` is the error's text (in the language of
``TOOLGUARD_LANG``). A reviewer the chat's ``authorize`` hook refuses gets a
403, an unknown thread a 404, a thread changed by a simultaneous request a
409, a model that keeps calling tools a 500 and a failed model call a 502,
each with the text in ``detail``.

The routes defend themselves, whatever FastAPI version runs them: a
``POST`` from a page of another origin is a 403, a body that is not
``application/json`` a 415, one over ``max_body_bytes`` (1 MiB) a 413
before it is read, hostile JSON (nested over 64 levels, ``NaN``, duplicate
keys) a 422 before it is parsed; error answers echo only a short prefix of
the input; every answer carries a strict Content-Security-Policy and the
other security headers. The chat's ``access`` hook guards reads and
messages (403). :func:`create_app` can also check the ``Host`` header
(``allowed_hosts``, 421) against DNS rebinding. See docs/http.md.

A whole app, with the approval page at ``/``::

    from toolguard import ReviewedChat, SQLiteStore
    from toolguard.http import create_app
    from toolguard.openai import OpenAIChatModel

    chat = ReviewedChat(
        OpenAIChatModel(model="gpt-4o-mini"), [send_email, search_contacts],
        store=SQLiteStore("toolguard.sqlite3"),
    )
    app = create_app(chat)  # uvicorn myapp:app

Or the routes only, mounted into an existing FastAPI app (the router maps
toolguard's errors to status codes itself, so no exception handler is
needed), with your login as the reviewer's identity::

    from fastapi import Depends, FastAPI
    from toolguard.http import create_router

    app = FastAPI()
    app.include_router(
        create_router(chat, prefix="/agent", reviewer=current_user_id),
        dependencies=[Depends(require_login)],
    )  # POST /agent/chat, POST /agent/review, ...

A ``useChat`` front end (the Vercel AI SDK) talks to the chat through
:func:`create_ai_sdk_router` (``POST /hitl/ai-sdk/chat``, the AI SDK's UI message stream;
``toolguard serve`` serves it too): a call awaiting review is a ``tool-approval-request``
and ``addToolApprovalResponse`` answers it. See docs/own-ui.md.

The chat reaches the routes through a dependency, so a test can swap it with
``app.dependency_overrides``. Put authentication in front of these routes in
production: whoever may call them may approve the tools (the ``reviewer``
dependency's value, as text, is the actor of the ``authorize`` and
``access`` hooks). ``auth=`` does it for you: :class:`HeaderAuth` (an
authenticating reverse proxy names the user in a header) or :class:`TokenAuth`
(reviewers' tokens, as bearer tokens or a signed session cookie); and
:class:`Reviewers` (the ``[reviewers]`` table of a rules file) is an
``authorize`` hook saying who may decide which tool.
"""

from toolguard._http.ag_ui import create_ag_ui_app, create_ag_ui_router
from toolguard._http.ai_sdk import create_ai_sdk_router
from toolguard._http.answers import CONTENT_SECURITY_POLICY
from toolguard._http.app import create_app
from toolguard._http.auth import HeaderAuth, TokenAuth, new_token
from toolguard._http.live import pending_reviews
from toolguard._http.parsing import DEFAULT_MAX_BODY_BYTES, MAX_BODY_DEPTH
from toolguard._http.routes import create_router
from toolguard._http.schemas import (
    CancelRequest,
    ChatRequest,
    ChatResponse,
    EditedActionBody,
    ErrorResponse,
    GrantResponse,
    ReviewDecision,
    ReviewRequest,
    ThreadResponse,
)
from toolguard._policy.reviewers import Reviewers

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_BODY_DEPTH",
    "CancelRequest",
    "ChatRequest",
    "ChatResponse",
    "EditedActionBody",
    "ErrorResponse",
    "GrantResponse",
    "HeaderAuth",
    "ReviewDecision",
    "ReviewRequest",
    "Reviewers",
    "ThreadResponse",
    "TokenAuth",
    "create_ag_ui_app",
    "create_ag_ui_router",
    "create_ai_sdk_router",
    "create_app",
    "create_router",
    "new_token",
    "pending_reviews",
]
