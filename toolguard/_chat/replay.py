"""Replay: past decisions of people, put to candidate rules and/or a judge.

:func:`decided_calls` reads, from the audit trails, every call a person
decided: its tool, its arguments as the reviewer saw them (secrets already
redacted: the real values were never recorded) and the person's own
messages before it (what a judge may read), with the decision. :func:`replay`
puts each to the candidate: the rules first (``rule_for``, the one evaluator:
``deny`` refuses, ``allow`` runs, ``ask`` asks), then, for a call no rule
decided, the judge (it runs the call only on an ``allow`` verdict of low risk
that the person asked for, as ``Judge(auto_approve=True)`` would; a judge that
cannot decide asks). Without a judge, a call no rule decides asks, as it did.

Compared with what the person decided:

* a **false auto-approval**: the candidate would have run a call the person
  rejected, edited or answered instead;
* a **needless ask**: it would have asked about a call the person approved
  unedited;
* a **false denial**: it would have refused a call the person approved
  unedited;
* anything else **agrees**.

A rule that names a redacted argument sees ``[redacted]``, as the reviewer did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from toolguard._chat.stats import iso, utc
from toolguard._core.records import ToolCall
from toolguard._enforce.judge import Judge, user_messages
from toolguard._policy.rules import Rules, rule_for
from toolguard._stores.protocol import ThreadState
from toolguard._tools.schema_tool import SchemaTool

__all__ = ["DecidedCall", "decided_calls", "format_replay", "replay"]

Outcome = Literal["run", "ask", "deny"]
Verdict = Literal["agreed", "false_auto_approval", "needless_ask", "false_denial"]

WORST: Final = 10
"""Worst cases listed by default."""

_KINDS: Final = ("false_auto_approvals", "needless_asks", "false_denials")


@dataclass(frozen=True)
class DecidedCall:
    """One call a person decided, as the audit trail and the thread recorded it."""

    thread_id: str
    action_id: str
    call_id: str
    tool: str
    args: Mapping[str, Any]
    """As the reviewer saw them: secret values redacted."""
    requested_at: datetime
    decision: str
    """``approve`` (unedited), ``edit``, ``reject`` or ``respond``."""
    actor: str | None
    detail: str | None
    """The reject reason or the answer given instead."""
    said: tuple[str, ...]
    """The person's own messages before the call, as a judge would read them."""


def decided_calls(
    states: Iterable[ThreadState], *, since: datetime | None = None, until: datetime
) -> list[DecidedCall]:
    """Every call a person decided whose request is in the period, oldest first."""
    found: list[DecidedCall] = []
    for state in states:
        requested = {e.action_id: e for e in state.audit if e.kind == "requested"}
        calls = {a.id: a.call_id for a in state.actions}
        for event in state.audit:
            asked = requested.get(event.action_id)
            if event.kind != "decided" or asked is None or asked.tool is None:
                continue
            at = utc(asked.at)
            if (since is not None and at < since) or at > until:
                continue
            call_id = calls.get(asked.action_id or "", "")
            found.append(
                DecidedCall(
                    thread_id=state.thread_id,
                    action_id=asked.action_id or "",
                    call_id=call_id,
                    tool=asked.tool,
                    args=dict(asked.args or {}),
                    requested_at=at,
                    decision=event.decision or "",
                    actor=event.actor,
                    detail=event.detail,
                    said=tuple(user_messages(_before(state.messages, call_id))),
                )
            )
    found.sort(key=lambda c: (c.requested_at, c.thread_id, c.action_id))
    return found


def _before(messages: Sequence[Mapping[str, Any]], call_id: str) -> list[Any]:
    """The messages before the assistant message that proposed ``call_id`` (all, if not found)."""
    for index, message in enumerate(messages):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if isinstance(calls, list) and any(
            isinstance(c, Mapping) and c.get("id") == call_id for c in calls
        ):
            return list(messages[:index])
    return list(messages)


def _nothing(**_: Any) -> None:
    """The body of the stand-in tool a replayed call is judged with: never run."""


async def _candidate(
    call: DecidedCall, rules: Rules | None, judge: Judge | None
) -> tuple[Outcome, str, bool]:
    """What the candidate does with ``call``: the outcome, why, and whether its judge failed."""
    rule = rule_for(rules, call.tool, call.args)
    if rule is not None and rule.effect != "ask":
        return ("deny" if rule.effect == "deny" else "run"), f"the rule {rule}", False
    if rule is not None:
        return "ask", f"the rule {rule}", False
    if judge is None:
        return "ask", "no candidate rule matches; the tool asks", False
    tool = SchemaTool(call.tool, "", {"type": "object"}, _nothing)
    probe = ToolCall(id=call.call_id or call.action_id, name=call.tool, args=dict(call.args))
    conversation = [{"role": "user", "content": text} for text in call.said]
    verdict = await judge.judge(probe, tool, thread_id=call.thread_id, conversation=conversation)
    runs = (
        verdict.decided
        and verdict.outcome == "allow"
        and verdict.risk == "low"
        and verdict.user_authorized is True
    )
    why = f"the judge ({verdict.model}): {verdict.rationale}"
    return ("run" if runs else "ask"), why, not verdict.decided


_APPROVED: Final[dict[Outcome, Verdict]] = {
    "run": "agreed",
    "ask": "needless_ask",
    "deny": "false_denial",
}


def _verdict(decision: str, outcome: Outcome) -> Verdict:
    """How the candidate's ``outcome`` compares with the person's ``decision``."""
    if decision == "approve":
        return _APPROVED[outcome]
    return "false_auto_approval" if outcome == "run" else "agreed"


def _count() -> dict[str, int]:
    return {"compared": 0, "agreed": 0, **dict.fromkeys(_KINDS, 0), "judge_failures": 0}


async def replay(
    calls: Sequence[DecidedCall],
    *,
    rules: Rules | None = None,
    judge: Judge | None = None,
    since: datetime | None = None,
    until: datetime,
    worst: int = WORST,
    candidate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Put ``calls`` to the candidate (``rules`` and/or ``judge``) and compare with the people.

    Returns:
        ``{"since", "until", "candidate", "totals", "tools", "worst"}``: the
        totals and each tool's ``compared``, ``agreed``,
        ``false_auto_approvals``, ``needless_asks``, ``false_denials`` and
        ``judge_failures``; ``worst``: at most ``worst`` cases, the false
        auto-approvals of rejected calls first, then of edited ones, then
        the false denials, each oldest first.
    """
    totals = _count()
    tools: dict[str, dict[str, int]] = {}
    cases: list[tuple[int, DecidedCall, Outcome, str]] = []
    for call in calls:
        outcome, why, failed = await _candidate(call, rules, judge)
        verdict = _verdict(call.decision, outcome)
        key = verdict if verdict == "agreed" else f"{verdict}s"
        row = tools.setdefault(call.tool, _count())
        for counts in (totals, row):
            counts["compared"] += 1
            counts[key] += 1
            counts["judge_failures"] += failed
        if verdict == "false_auto_approval":
            cases.append((0 if call.decision == "reject" else 1, call, outcome, why))
        elif verdict == "false_denial":
            cases.append((2, call, outcome, why))
    cases.sort(key=lambda case: (case[0], case[1].requested_at))
    return {
        "since": iso(since) if since is not None else None,
        "until": iso(until),
        "candidate": dict(candidate or {}),
        "totals": totals,
        "tools": {name: tools[name] for name in sorted(tools)},
        "worst": [_case(call, outcome, why) for _, call, outcome, why in cases[:worst]],
    }


def _case(call: DecidedCall, outcome: Outcome, why: str) -> dict[str, Any]:
    return {
        "thread_id": call.thread_id,
        "action_id": call.action_id,
        "requested_at": iso(call.requested_at),
        "tool": call.tool,
        "args": dict(call.args),
        "person": {"decision": call.decision, "by": call.actor, "detail": call.detail},
        "candidate": {"outcome": outcome, "why": why},
    }


_PAST: Final = {
    "approve": "approved",
    "edit": "edited",
    "reject": "rejected",
    "respond": "answered",
}


def format_replay(report: Mapping[str, Any]) -> str:
    """The replay as text: a table per tool, the totals and the worst cases."""
    totals = report["totals"]
    named = ", ".join(f"{key} {value}" for key, value in report["candidate"].items())
    period = f"from {report['since']} " if report["since"] else ""
    lines = [f"Replayed {totals['compared']} decisions by people {period}up to {report['until']}"]
    lines.append(f"Candidate: {named or 'none'}")
    if not totals["compared"]:
        return "\n".join(lines) + "\n"
    header = ["tool", "decided", "agreed", "false auto-approvals", "needless asks", "false denials"]
    keys = ["compared", "agreed", *_KINDS]
    table = [header] + [
        [name, *(str(row[key]) for key in keys)] for name, row in report["tools"].items()
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines.append("")
    for line in table:
        cells = [line[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    share = 100 * totals["agreed"] / totals["compared"]
    lines += [
        "",
        f"Agreed with the people: {totals['agreed']} of {totals['compared']} ({share:.1f}%)",
        (
            "False auto-approvals (would have run what a person rejected or edited):"
            f" {totals['false_auto_approvals']}"
        ),
        (
            "Needless asks (would have asked what a person approved unedited):"
            f" {totals['needless_asks']}"
        ),
        f"False denials (would have refused what a person approved): {totals['false_denials']}",
    ]
    if totals["judge_failures"]:
        lines.append(f"The judge could not decide {totals['judge_failures']} times (it asked)")
    if report["worst"]:
        lines += ["", "Worst cases:"]
    for case in report["worst"]:
        person = case["person"]
        by = f" by {person['by']}" if person["by"] else ""
        because = f" ({person['detail']})" if person["detail"] else ""
        would = "run it" if case["candidate"]["outcome"] == "run" else "refused it"
        lines.append(
            f"  {case['requested_at']} {case['tool']} {_args(case['args'])}:"
            f" {_PAST.get(person['decision'], person['decision'])}{by}{because};"
            f" the candidate would have {would}: {case['candidate']['why']}"
        )
        lines.append(f"    thread {case['thread_id']}")
    return "\n".join(lines) + "\n"


def _args(args: Mapping[str, Any]) -> str:
    text = ", ".join(f"{key}={value!r}" for key, value in args.items())
    return f"({text})" if len(text) <= 120 else f"({text[:119]}…)"
