"""A judge model's verdict on one proposed call, as the audit trail and the reviewer see it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Risk = Literal["low", "medium", "high"]
"""How much harm the judge thinks the call could do."""

JUDGEMENT_SEPARATOR = " | "
"""Between an approval request's own description and the judge's summary (one line)."""

JudgeOutcome = Literal["allow", "ask"]
"""``allow``: the judge sees no reason to ask a person; ``ask``: a person should decide."""


class Judgement(BaseModel):
    """What the judge said about one proposed call, or why it could not say.

    A judgement never rejects a call: ``ask`` (and a judge that could not
    decide) sends the call to a person; ``allow`` lets the call run without a
    person only when the judge may approve (``Judge(auto_approve=True)``) and
    every other condition holds (``auto_approved`` says whether it did).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    """The tool call judged."""
    tool: str
    """The tool's name."""
    risk: Risk | None
    """The judge's risk, or ``None`` when it could not decide."""
    user_authorized: bool | None
    """Whether the person's own messages ask for this call (``None``: could not decide)."""
    outcome: JudgeOutcome
    """``allow`` or ``ask``; ``ask`` when the judge could not decide."""
    rationale: str
    """The judge's reason in a sentence or two, or why it could not decide."""
    model: str
    """Which model judged."""
    latency_ms: float
    """How long the judge took, in milliseconds (0 for a verdict from the cache)."""
    decided: bool = True
    """``False`` when the judge could not decide (bad reply, error, timeout)."""
    auto_approved: bool = False
    """Whether the call ran on this verdict, without a person."""

    def summary(self) -> str:
        """One line for a reviewer: the risk, the person's authorization and the rationale."""
        if not self.decided:
            return f"Judge ({self.model}) could not decide: {self.rationale}"
        authorized = (
            "the user asked for it" if self.user_authorized else "the user did not ask for it"
        )
        return f"Judge ({self.model}): {self.risk} risk, {authorized}. {self.rationale}"
