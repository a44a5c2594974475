"""Shadow mode and a candidate policy: watch what the policy would do, without it stopping calls.

The runner makes the one decision here for every path (``ReviewedChat``,
``toolguard serve``, the MCP gateway): in shadow mode a call that would wait
for a person runs at once (:func:`would_ask`), and with ``shadow="all"`` a
call a deny rule refuses runs too (:func:`would_deny`); each becomes a
:class:`~toolguard._core.shadowing.Shadowed` record, which ``ReviewedChat``
writes as a ``shadow`` audit event. Bodies still run only through
:mod:`toolguard._enforce.execute`.

A :class:`Candidate` (other rules and/or another judge) is evaluated on every
call next to the enforced policy (:func:`evaluate`); its verdicts are
recorded, never enforced, and a candidate judge that fails only records why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolguard._core import telemetry
from toolguard._core.checks import kind
from toolguard._core.errors import UnsupportedPolicyError
from toolguard._core.judgement import Judgement
from toolguard._core.llm import Message
from toolguard._core.records import ToolCall
from toolguard._core.shadowing import CandidateOutcome, CandidateVerdict, Shadowed
from toolguard._enforce.decide import Verdict, decide
from toolguard._enforce.execute import Job
from toolguard._enforce.judge import Judge
from toolguard._policy.rules import Rules
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset

ShadowMode = bool | Literal["all"]
"""``False``: enforce; ``True``: run what would ask, record it; ``"all"``: deny rules too."""

SHADOW_BANNER = (
    "SHADOW MODE: nothing waits for a person; calls that would be asked run at once and are"
    " recorded"
)
"""How a command says loudly that shadow mode is on (``--shadow``)."""

SHADOW_ALL_BANNER = (
    "SHADOW MODE (all): nothing waits for a person and deny rules do not refuse; every call"
    " runs at once and what would have happened is recorded"
)
"""How a command says loudly that ``--shadow-all`` is on."""


def shadow_banner(shadow: ShadowMode) -> str | None:
    """The line saying loudly that shadow mode is on, or ``None`` when it is off."""
    if shadow == "all":
        return SHADOW_ALL_BANNER
    return SHADOW_BANNER if shadow else None


def watch_part(shadow: ShadowMode, candidate: Candidate | None) -> str:
    """`` | SHADOW MODE ...`` and `` | candidate ...`` for a command's startup line, or nothing."""
    banner = shadow_banner(shadow)
    text = f" | {banner}" if banner is not None else ""
    if candidate is not None:
        parts = ["rules"] if candidate.rules is not None else []
        if candidate.judge is not None:
            parts.append(f"judge {candidate.judge.model_name}")
        text += f" | candidate (recorded only): {', '.join(parts)}"
    return text


def check_shadow(value: object) -> ShadowMode:
    """``shadow=`` as given: ``True``, ``False`` or ``"all"``.

    Raises:
        ValueError: anything else (a string such as ``"yes"`` is refused, not read as true).
    """
    if value is True or value is False or value == "all":
        return value
    msg = f"shadow must be True, False or 'all', got {kind(value)}"
    raise ValueError(msg)


def refuse_shadow(shadow: object, where: str, *, hint: str | None = None) -> None:
    """Refuse ``shadow=`` on a path that keeps no audit trail to record what would have happened.

    ``hint``: what to do instead (default: the paths that record shadow mode).

    Raises:
        ValueError: ``shadow`` is not ``True``, ``False`` or ``"all"``.
        UnsupportedPolicyError: shadow mode was asked for (``True`` or ``"all"``).
    """
    if check_shadow(shadow) is False:
        return
    instead = hint or (
        "Run the tools with toolguard.ReviewedChat(shadow=True), `toolguard serve --shadow` or"
        " `toolguard mcp-proxy --shadow`."
    )
    msg = (
        f"{where} cannot run in shadow mode: the framework runs the turn and toolguard keeps no"
        f" audit trail there, so what would have been asked could not be recorded. {instead}"
    )
    raise UnsupportedPolicyError(msg)


class Candidate:
    """A policy evaluated on every call next to the enforced one; recorded, never enforced.

    ::

        candidate = toolguard.Candidate(
            rules=toolguard.Rules(allow=["send_email"]),
            judge=toolguard.Judge(model, auto_approve=True),
        )
        chat = toolguard.ReviewedChat(model, tools, candidate=candidate)

    Each call gets a ``candidate`` audit event with what the candidate would
    have done (``run``, ``ask`` or ``deny``) and why, next to what really
    happened. ``rules`` replace the enforced rules for the candidate (the
    tools' own policies stay); without them the enforced rules stand. A
    candidate ``judge`` judges the calls the candidate would ask about (every
    call with ``scope="all"``); with ``auto_approve=True`` its approval makes
    the candidate's outcome ``run``. It never counts toward the enforced
    judge's limits, and a judge that fails or cannot decide is recorded as
    such: the call goes on as the enforced policy says.

    Args:
        rules: the candidate rules (:class:`~toolguard.Rules`).
        judge: the candidate judge (:class:`~toolguard.Judge`).

    Raises:
        TypeError: a setting of the wrong type.
        ValueError: neither ``rules`` nor ``judge`` given.
    """

    __slots__ = ("judge", "rules")

    def __init__(self, *, rules: Rules | None = None, judge: Judge | None = None) -> None:
        given: object = rules
        if given is not None and not isinstance(given, Rules):
            msg = f"rules must be a toolguard.Rules or None, got {kind(given)}"
            raise TypeError(msg)
        other: object = judge
        if other is not None and not isinstance(other, Judge):
            msg = f"judge must be a toolguard.Judge or None, got {kind(other)}"
            raise TypeError(msg)
        if rules is None and judge is None:
            msg = "A Candidate needs rules=, judge= or both"
            raise ValueError(msg)
        self.rules = rules
        self.judge = judge

    def __repr__(self) -> str:
        return f"Candidate(rules={self.rules!r}, judge={self.judge!r})"


def check_candidate(value: object) -> Candidate | None:
    """``candidate=`` as given: a :class:`Candidate` or ``None``.

    Raises:
        TypeError: anything else.
    """
    if value is not None and not isinstance(value, Candidate):
        msg = f"candidate must be a toolguard.Candidate or None, got {kind(value)}"
        raise TypeError(msg)
    return value


# --------------------------------------------------------------------------- shadow mode


def would_deny(call: ToolCall, verdict: Verdict) -> tuple[Job, Shadowed] | None:
    """A call a deny rule refused, as a job that runs with ``shadow="all"``, and its record.

    ``None`` when the refusal was not a deny rule's (an unknown tool, arguments
    beyond the limits or breaking the schema cannot run in any mode).
    """
    tool, rule = verdict.tool, verdict.rule
    if verdict.refusal_kind != "denied" or tool is None or rule is None:
        return None
    try:
        validated = tool.validate_args(call.args)
    except (ToolArgumentsError, RecursionError):
        return None
    record = Shadowed(
        call_id=call.id, tool=call.name, would="deny", reason=verdict.reason, rule=rule.pattern
    )
    return (call, tool, validated), record


def would_ask(call: ToolCall, verdict: Verdict, judgement: Judgement | None) -> Shadowed:
    """The record of a call that would have waited for a person and runs at once instead.

    A call the policy lets run goes to a person only when a judge of ``scope="all"`` asks.
    """
    rule = verdict.rule.pattern if verdict.rule is not None else None
    asked = verdict.outcome == "ask"
    return Shadowed(
        call_id=call.id,
        tool=call.name,
        would="ask",
        reason=verdict.reason if asked else "the judge asks a person about this call",
        rule=rule,
        judgement=judgement,
    )


def decided(record: Shadowed) -> telemetry.Decided:
    """Who let a shadowed call run, for its span (``decided_by`` ``shadow``)."""
    return telemetry.Decided(by=telemetry.BY_SHADOW, would=record.would)


Review = tuple[ToolCall, Tool[Any, Any], dict[str, Any], bool]
"""A call up for review (the runner's): the call, its tool, the validated arguments, asked by
a rule."""


class Watch:
    """What shadow mode let run in one turn that the policy would have stopped."""

    __slots__ = ("mode", "shadowed")

    def __init__(self, mode: ShadowMode) -> None:
        self.mode = mode
        self.shadowed: list[Shadowed] = []

    def denied(
        self,
        call: ToolCall,
        verdict: Verdict,
        jobs: list[Job],
        by: dict[str, telemetry.Decided],
    ) -> bool:
        """With ``shadow="all"``: queue a call a deny rule refused to run; whether it was."""
        ran = would_deny(call, verdict) if self.mode == "all" else None
        if ran is None:
            return False
        jobs.append(ran[0])
        self.shadowed.append(ran[1])
        by[call.id] = decided(ran[1])
        return True

    def asked(
        self,
        reviews: list[Review],
        verdicts: Mapping[str, Verdict],
        judgements: Mapping[str, Judgement],
        jobs: list[Job],
        by: dict[str, telemetry.Decided],
    ) -> list[Review]:
        """In shadow mode: queue the calls up for review to run now; the reviews left."""
        if not self.mode:
            return reviews
        for call, tool, validated, _ in reviews:
            record = would_ask(call, verdicts[call.id], judgements.get(call.id))
            self.shadowed.append(record)
            by[call.id] = decided(record)
            jobs.append((call, tool, validated))
        return []

    def records(self, calls: Sequence[ToolCall]) -> list[Shadowed]:
        """The records, in call order."""
        order = {c.id: i for i, c in enumerate(calls)}
        return sorted(self.shadowed, key=lambda r: order[r.call_id])


# --------------------------------------------------------------------------- candidate


def candidate_toolset(candidate: Candidate, toolset: Toolset) -> Toolset:
    """The toolset the candidate decides with: its rules in place of the enforced ones."""
    if candidate.rules is None:
        return toolset
    return Toolset(toolset, rules=candidate.rules)


async def evaluate(  # noqa: PLR0917 - one turn's calls and their context
    candidate: Candidate | None,
    enforced_tools: Toolset,
    calls: Sequence[ToolCall],
    enforced: Mapping[str, Verdict],
    thread_id: str,
    conversation: Sequence[Message],
) -> list[CandidateVerdict]:
    """What ``candidate`` says about each call, in call order (never raises for its judge).

    ``enforced_tools`` and ``enforced``: the enforced toolset and verdicts (by
    call id), which the candidate's rules replace; empty without a candidate.
    """
    if candidate is None:
        return []
    toolset = candidate_toolset(candidate, enforced_tools)
    verdicts = {
        c.id: enforced[c.id] if candidate.rules is None else decide(toolset, c) for c in calls
    }
    judge = candidate.judge
    judgements: dict[str, Judgement] = {}
    error: str | None = None
    items: list[tuple[ToolCall, Any]] = []
    if judge is not None:
        outcomes = ("ask", "run") if judge.scope == "all" else ("ask",)
        items = [
            (c, verdicts[c.id].tool)
            for c in calls
            if verdicts[c.id].outcome in outcomes and verdicts[c.id].tool is not None
        ]
        try:
            judged = await judge.judge_all(
                [(c, t) for c, t in items if t is not None],
                thread_id=thread_id,
                conversation=conversation,
            )
            judgements = {j.call_id: j for j in judged}
        except Exception as exc:  # a candidate never changes or blocks the enforced outcome
            error = f"the candidate judge failed ({type(exc).__name__})"
    asked = {c.id for c, _ in items} if judge is not None else set()
    return [
        _verdict(c, verdicts[c.id], judge, judgements.get(c.id), error if c.id in asked else None)
        for c in calls
    ]


def _verdict(
    call: ToolCall,
    verdict: Verdict,
    judge: Judge | None,
    judgement: Judgement | None,
    error: str | None,
) -> CandidateVerdict:
    outcome: CandidateOutcome = verdict.outcome
    reason = verdict.reason
    if judge is not None and judgement is not None and verdict.tool is not None:
        asked_by_rule = verdict.rule is not None and verdict.rule.effect == "ask"
        if outcome == "ask" and judge.may_approve(
            judgement.model_copy(update={"auto_approved": False}),
            verdict.tool,
            asked_by_rule=asked_by_rule,
        ):
            outcome, reason = "run", "its judge would approve the call"
        elif outcome == "run" and judgement.outcome != "allow":
            outcome, reason = "ask", "its judge would ask a person"
        if not judgement.decided:
            error = f"its judge could not decide: {judgement.rationale}"
    rule = verdict.rule.pattern if verdict.rule is not None else None
    return CandidateVerdict(
        call_id=call.id,
        tool=call.name,
        outcome=outcome,
        reason=reason,
        rule=rule,
        judgement=judgement,
        error=error,
    )
