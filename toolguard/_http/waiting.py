"""What an agent UI is told of an action awaiting review (AG-UI, the AI SDK stream).

One description for every UI protocol, so each shows the same facts: the
conversation and review it belongs to, the tool, the decisions it allows and,
for a quorum tool, the approvals required and given so far.
"""

from __future__ import annotations

from typing import Any

from toolguard._core.records import Action

__all__ = ["waiting_facts"]


def waiting_facts(thread_id: str, review_id: str, action: Action) -> dict[str, Any]:
    """``threadId``, ``reviewId``, ``toolName``, ``allowedDecisions`` and, for a quorum
    tool, ``approvals`` (``required``, ``given``, ``by``), as the UIs' JSON spells them."""
    facts: dict[str, Any] = {
        "threadId": thread_id,
        "reviewId": review_id,
        "toolName": action.name,
        "allowedDecisions": list(action.allowed_decisions),
    }
    if action.approvals_required > 1:
        facts["approvals"] = {
            "required": action.approvals_required,
            "given": len(action.approved_by),
            "by": list(action.approved_by),
        }
    return facts
