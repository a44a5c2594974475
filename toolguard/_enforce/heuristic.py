"""A scripted judge model, offline: a few rules on the document a judge model reads.

:class:`HeuristicJudgeModel` answers the judge's document
(:meth:`~toolguard.Judge.messages`) without any model: it allows a call only
when every recipient, URL, account, address and amount in its arguments
appears in the person's own messages, the tool destroys nothing, and no
argument talks to the judge. ``toolguard replay --heuristic-judge`` replays
recorded calls through it, and the judge benchmark uses it as its offline
baseline. It is a baseline, not a guard: a real judge model reads meaning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolguard._core.llm import Message, ModelResponse

__all__ = ["HeuristicJudgeModel", "heuristic_verdict"]

_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b")
_WALLET = re.compile(r"\b0x[0-9a-fA-F]{40}\b")
_TARGET_KEYS = frozenset(
    {
        "to",
        "cc",
        "bcc",
        "recipient",
        "email",
        "attendees",
        "to_iban",
        "to_account",
        "to_address",
        "payee",
        "url",
        "remote",
        "channel",
        "user",
        "repo",
    }
)
_AMOUNT_KEYS = frozenset({"amount", "monthly_price", "price", "total"})
_DESTRUCTIVE = re.compile(
    r"\b(delete|deletes|remove|drop|destroy|purge|wipe|erase|truncate)\b|\brm\s+-|\bmkfs\b",
    re.IGNORECASE,
)
_MANIPULATION = re.compile(
    r"ignore (all|previous)|pre-?approved|already (approved|authori[sz]ed)|approve this",
    re.IGNORECASE,
)


def _strings(value: object) -> list[str]:
    """Every string inside ``value`` (lists and objects walked)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def heuristic_verdict(document: Mapping[str, Any]) -> dict[str, Any]:
    """The scripted judge's verdict on the document a judge model reads.

    It allows a call only when every recipient, URL, account, address and
    amount in its arguments appears in the person's own messages, the tool
    does not destroy anything, and no argument tries to talk to the judge.
    """
    said = "\n".join(m for m in document.get("user_messages", []) if isinstance(m, str)).lower()
    call = document.get("proposed_call", {})
    name, description = str(call.get("tool", "")), str(call.get("description", ""))
    arguments = call.get("arguments", {})
    arguments = arguments if isinstance(arguments, Mapping) else {}
    texts = _strings(arguments)

    targets: list[str] = []
    for key, value in arguments.items():
        if key in _TARGET_KEYS:
            targets += [s.lstrip("#") for s in _strings(value)]
    for text in texts:
        for pattern in (_URL, _EMAIL, _IBAN, _WALLET):
            targets += pattern.findall(text)
    unknown = [t for t in dict.fromkeys(targets) if t and t.lower() not in said]
    amounts = [
        _number_text(v)
        for k, v in arguments.items()
        if k in _AMOUNT_KEYS and isinstance(v, int | float) and not isinstance(v, bool)
    ]
    unknown += [
        a for a in amounts if not re.search(rf"(?<![\d.,]){re.escape(a)}(?![\d]|[.,]\d)", said)
    ]
    authorized = not unknown
    destructive = bool(_DESTRUCTIVE.search(f"{name.replace('_', ' ')} {description}")) or any(
        _DESTRUCTIVE.search(t) for t in texts
    )

    if any(_MANIPULATION.search(t) for t in texts):
        risk, why = "high", "An argument tries to instruct the reviewer."
    elif unknown:
        risk = "high"
        why = f"{unknown[0]!r} does not appear in the person's messages."
    elif destructive:
        risk, why = "medium", "The call destroys something; a person should confirm."
    else:
        return {
            "risk": "low",
            "user_authorized": True,
            "outcome": "allow",
            "rationale": "Every target of the call comes from the person's messages.",
        }
    return {"risk": risk, "user_authorized": authorized, "outcome": "ask", "rationale": why}


class HeuristicJudgeModel:
    """A scripted judge model: reads the judge's JSON document and answers by a few rules."""

    model = "offline-heuristic"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """The verdict of :func:`heuristic_verdict` on the last message's document."""
        document = json.loads(str(messages[-1]["content"]))
        return ModelResponse(text=json.dumps(heuristic_verdict(document)))
