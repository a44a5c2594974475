"""Approvals in a Vercel AI SDK chat UI: ``useChat`` talks to a :class:`~toolguard.ReviewedChat`.

Install the ``http`` extra (``pip install "toolguard-hitl[http]"``). :func:`create_router`
is one route, ``POST /hitl/ai-sdk/chat``, speaking the AI SDK's UI message stream (the
protocol of ``useChat`` and its ``DefaultChatTransport``; ``toolguard serve`` serves it
too)::

    from fastapi import FastAPI
    from toolguard.integrations.ai_sdk import create_router

    app = FastAPI()
    app.include_router(
        create_router(chat, review_url="https://reviews.example.com/?thread={thread_id}")
    )

The page sends the user's message; the answer streams the model's text, its tool calls
and their results. A call awaiting review arrives as a ``tool-approval-request`` part
(``approvalId``, ``toolCallId``, the review's description as ``reason``, and
``approvalDescriptor``: ``threadId``, ``reviewId``, ``toolName``, ``allowedDecisions``,
``approvals`` of a quorum tool, ``expiresAt``, ``reviewUrl``). The person's
``addToolApprovalResponse({id, approved, reason})``, sent back with the messages (e.g.
``sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses``), approves
the call or rejects it with the reason, through the same checks as ``POST /hitl/review``:
every call of the review answered at once, once only, deadlines, reviewers and quorum,
rules. A request that cannot be applied (an unknown, forged or already answered approval
id, a review answered in part, a message while a review waits) is answered with an
``error`` part and changes nothing.

The protocol carries approve and deny only: edits and standing grants are made on the
approval page, whose address each request carries as ``approvalDescriptor.reviewUrl``.
See docs/own-ui.md.
"""

from toolguard.http import create_ai_sdk_router as create_router

__all__ = ["create_router"]
