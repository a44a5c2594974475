"""What shadow mode and a candidate policy recorded about a call, beside the enforced outcome.

Shadow mode runs the calls that would have waited for a person (and, with
``shadow="all"``, the ones a deny rule refuses) at once; each such call is a
:class:`Shadowed` record: what would have happened and why. A candidate
policy (other rules and/or another judge, evaluated next to the enforced
one) leaves a :class:`CandidateVerdict` per call; neither ever changes what
happens to the call.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from toolguard._core.judgement import Judgement

Would = Literal["ask", "deny"]
"""What the enforced policy would have done with a call that ran in shadow mode."""

CandidateOutcome = Literal["run", "ask", "deny"]
"""What a candidate policy would have done with a call."""


class Shadowed(BaseModel):
    """One call that ran at once in shadow mode instead of waiting for a person (or a refusal)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    """The tool call."""
    tool: str
    """The tool's name."""
    would: Would
    """``ask``: a person would have been asked; ``deny``: a deny rule would have refused it."""
    reason: str
    """The rule or the tool's policy that would have decided, as a sentence."""
    rule: str | None = None
    """The pattern of the rule that would have decided, if a rule did."""
    judgement: Judgement | None = None
    """The judge's verdict on the call, when a judge is configured (``None``: no judge)."""


class CandidateVerdict(BaseModel):
    """What a candidate policy said about one call; recorded only, never enforced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    """The tool call."""
    tool: str
    """The tool's name."""
    outcome: CandidateOutcome
    """``run``, ``ask`` or ``deny``: what the candidate would have done."""
    reason: str
    """Why, as a sentence (the candidate's rule, the tool's policy, or its judge)."""
    rule: str | None = None
    """The pattern of the candidate rule that decided, if one did."""
    judgement: Judgement | None = None
    """The candidate judge's verdict, when it has a judge and judged the call."""
    error: str | None = None
    """Why the candidate could not be evaluated (its judge failed); the call went on as enforced."""
