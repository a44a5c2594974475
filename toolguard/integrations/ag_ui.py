"""Approvals in an AG-UI front end (CopilotKit, ``@ag-ui/client``): a
:class:`~toolguard.ReviewedChat` as an AG-UI agent.

Install the extras: ``pip install "toolguard-hitl[http,ag-ui]"``. :func:`create_router` is one
route, ``POST /hitl/ag-ui``, taking AG-UI's ``RunAgentInput`` and streaming the run's events
(``toolguard serve`` serves it too); :func:`create_app` is the same route as an ASGI app of
its own, to mount into a Starlette or FastAPI app::

    from fastapi import FastAPI
    from toolguard.integrations.ag_ui import create_router

    app = FastAPI()
    app.include_router(create_router(chat))  # POST /hitl/ag-ui

A run sends the user's last message; the answer streams ``RUN_STARTED``, the model's text,
its tool calls and their results, and ``RUN_FINISHED``. A call awaiting review ends the run
with an interrupt (``outcome: {type: "interrupt", interrupts: [...]}``): one per call, with
the review's description as ``message``, the tool call's id, a ``responseSchema`` (whose
``editedArgs`` is the tool's arguments' schema), the deadline as ``expiresAt`` and
``metadata.toolguard`` (``threadId``, ``reviewId``, ``toolName``, ``allowedDecisions``, the
``approvals`` of a quorum tool). The next run's ``resume`` answers every interrupt:
``{approved: true}`` approves, ``{approved: true, editedArgs}`` edits, ``{approved: false,
reason}`` and ``status: "cancelled"`` reject, through the same checks as ``POST
/hitl/review`` (every call answered at once, once only, deadlines, reviewers, quorum, rules,
edits against the schema). A run that cannot be applied (an unknown, stale or replayed
interrupt, a resume answering part of a review, a standing grant in a payload) ends with
``RUN_ERROR`` and changes nothing.

The conversation lives on the server: the run's ``state`` carries its id
(``{"toolguard": {"threadId": ...}}``, sent in a ``STATE_SNAPSHOT`` when it starts) and only
the last message of the client's history is read. See docs/own-ui.md.
"""

try:
    import ag_ui.core  # noqa: F401 (fail here, with a hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.integrations.ag_ui needs ag-ui-protocol: pip install "toolguard-hitl[ag-ui]"'
    raise ImportError(msg) from exc

from toolguard.http import create_ag_ui_app as create_app
from toolguard.http import create_ag_ui_router as create_router

__all__ = ["create_app", "create_router"]
