"""Approval statistics: per tool, how its calls were decided, how fast, by whom, and what to change.

One computation (:func:`compute_stats`) answers ``toolguard stats``, ``GET
/hitl/stats`` and the page's statistics panel. It reads the audit trail only:

* a call that asked a person is a ``requested`` event; its ``decided`` event
  says how (``approve``, ``edit``, ``reject``, ``respond``), who and when (the
  time to decide is from the request to the decision); one closed without a
  decision ends ``expired`` or ``cancelled`` (or ``interrupted``);
* a call that ran without a person is a ``granted`` event (a standing grant),
  a ``judged`` event whose ``actor`` is ``"judge"`` (the judge approved it on
  its own) or a ``shadow`` event (shadow mode ran it where a person would
  have been asked, or a deny rule would have refused it);
* a call a deny rule refused is a ``denied`` event without an approval request.

A call that ran at once because no approval was needed (an ``allow`` rule, a
tool that needs none) leaves no audit event, so it is not counted here; the
metrics count it (``decided_by="rule"``).

A call belongs to the period of its first event (the request, the grant's
use, the judge's approval, the refusal); its decision is counted with it even
when made later.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Final

from toolguard._core.audit import AuditEvent
from toolguard._core.errors import CorruptThreadError
from toolguard._stores.protocol import Store, ThreadState

__all__ = [
    "MIN_SAMPLE",
    "SinceError",
    "compute_stats",
    "format_stats",
    "iso",
    "parse_since",
    "stored_states",
    "utc",
]

MIN_SAMPLE: Final = 5
"""Decisions on a tool needed before a suggestion is drawn from them."""

AUTO_KINDS: Final = ("grant", "judge", "shadow")
"""Who ran a call without a person, as ``auto_by`` counts them."""

UNNAMED: Final = "(unnamed)"
"""The decider's name in ``deciders`` for a decision by a reviewer nobody named (no sign-in)."""

_DECISIONS: Final = {"approve": "approved", "edit": "edited", "reject": "rejected"}
_CLOSED: Final = {"expired": "expired", "cancelled": "cancelled", "interrupted": "interrupted"}
_RELATIVE = re.compile(r"(\d{1,5})d")
_log = logging.getLogger("toolguard")


class SinceError(ValueError):
    """A ``since`` that is neither an ISO 8601 date or time nor ``Nd`` (N days ago)."""


def parse_since(text: str, *, now: datetime) -> datetime:
    """The start of the period ``text`` names: ``2026-11-01``, ``2026-11-01T09:00:00Z`` or ``30d``.

    A date is its midnight (UTC), a time without offset is UTC, ``Nd`` is N
    days before ``now``.

    Raises:
        SinceError: ``text`` is none of those; the text says what is expected.
    """
    value = text.strip()
    relative = _RELATIVE.fullmatch(value)
    if relative is not None:
        return now - timedelta(days=int(relative[1]))
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
        if value.endswith(("Z", "z")):  # Python 3.10 reads no "Z": the same offset, spelled out
            value = value[:-1] + "+00:00"
        moment = datetime.fromisoformat(value)
    except ValueError:
        msg = (
            f"expected a date (2026-11-01), a time (2026-11-01T09:00:00Z) or a number of days"
            f" (30d), got {text[:40]!r}"
        )
        raise SinceError(msg) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


@dataclass
class _Tool:
    """The counts of one tool while they are gathered."""

    calls: int = 0
    asked: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    auto: Counter[str] = field(default_factory=Counter)
    would: Counter[str] = field(default_factory=Counter)
    waits: list[float] = field(default_factory=list)
    deciders: Counter[str] = field(default_factory=Counter)


def utc(moment: datetime) -> datetime:
    """``moment`` with a time zone (a naive one is read as UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _gather(
    states: Iterable[ThreadState], since: datetime | None, until: datetime
) -> dict[str, _Tool]:
    """Each tool's counts from the audit trails of ``states``."""
    tools: dict[str, _Tool] = {}

    def of(name: str | None) -> _Tool:
        return tools.setdefault(name or "", _Tool())

    for state in states:
        asked: dict[str, tuple[str, datetime]] = {}  # action id -> (tool, requested at)
        settled: set[str] = set()
        for event in state.audit:
            kind: str = event.kind
            at = utc(event.at)
            if at > until:
                continue
            if kind == "requested" and event.action_id is not None:
                if since is not None and at < since:
                    continue
                asked[event.action_id] = (event.tool or "", at)
                entry = of(event.tool)
                entry.calls += 1
                entry.asked += 1
            elif kind in ("decided", *_CLOSED) and event.action_id in asked:
                _settle(event, kind, asked, settled, of)
            elif since is not None and at < since:
                continue
            elif _ran_without_person(event, kind):
                entry = of(event.tool)
                entry.calls += 1
                entry.auto[_auto_kind(kind)] += 1
                if kind == "shadow":
                    entry.would[event.would or "ask"] += 1
            elif kind == "denied" and event.action_id is None:
                entry = of(event.tool)
                entry.calls += 1
                entry.outcomes["denied"] += 1
    tools.pop("", None)  # an event without a tool's name: nothing to say about it
    return tools


def _settle(
    event: AuditEvent,
    kind: str,
    asked: Mapping[str, tuple[str, datetime]],
    settled: set[str],
    of: Any,
) -> None:
    """Count the decision (or the undecided end) of a request, once."""
    action_id = event.action_id or ""
    if action_id in settled:
        return  # a decided call that then expired before it started: its decision counts
    settled.add(action_id)
    tool, requested_at = asked[action_id]
    entry: _Tool = of(tool)
    if kind != "decided":
        entry.outcomes[_CLOSED[kind]] += 1
        return
    entry.outcomes[_DECISIONS.get(event.decision or "", "responded")] += 1
    entry.waits.append(max(0.0, (utc(event.at) - requested_at).total_seconds()))
    entry.deciders[event.actor if event.actor is not None else UNNAMED] += 1


def _ran_without_person(event: AuditEvent, kind: str) -> bool:
    """Whether ``event`` records a call that ran without a person."""
    if kind in ("granted", "shadow"):
        return True
    # A judge's own approval; the gateway's bare ``judged`` events (no verdict) only count them.
    return kind == "judged" and event.actor == "judge" and event.judgement is not None


def _auto_kind(kind: str) -> str:
    return {"granted": "grant", "judged": "judge"}.get(kind, kind)


def _seconds(value: float) -> float:
    return round(value, 3)


def _p90(values: list[float]) -> float:
    """The 90th percentile (nearest rank) of ``values``, which is not empty."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _period(days: float) -> str:
    whole = max(1, math.ceil(days - 1e-9))
    return "in 1 day" if whole == 1 else f"in {whole} days"


def _suggestions(name: str, row: Mapping[str, Any], period: str) -> list[str]:
    """What the numbers of one tool suggest, as sentences."""
    approved, edited, rejected = row["approved"], row["edited"], row["rejected"]
    decided = approved + edited + rejected + row["responded"]
    found: list[str] = []
    if decided >= MIN_SAMPLE and approved == decided:
        found.append(
            f"{name}: approved {approved} of {decided} unedited {period}: an allow rule or a"
            f" standing grant would save {approved} asks"
        )
    elif decided >= MIN_SAMPLE and rejected == decided:
        found.append(f"{name}: rejected {rejected} of {decided} {period}: a deny rule")
    undecided = row["expired"]
    if row["asked"] >= MIN_SAMPLE and undecided * 4 >= row["asked"]:
        found.append(
            f"{name}: {undecided} of {row['asked']} asks expired undecided {period}: more"
            " reviewers, a notification channel or a longer deadline"
        )
    if row["denied"] >= MIN_SAMPLE and row["asked"] == 0 and row["auto"] == 0:
        found.append(
            f"{name}: refused by a deny rule {row['denied']} times {period}: is the agent told"
            " not to call it?"
        )
    return found


def compute_stats(
    states: Iterable[ThreadState], *, since: datetime | None = None, now: datetime
) -> dict[str, Any]:
    """The statistics of the calls recorded in ``states`` (each thread's audit trail).

    Args:
        states: the threads (their audit trails are read).
        since: count only the calls whose first event is at or after it
            (``None``: every recorded call).
        now: the end of the period: later events are left out (the suggestions say how
            many days the period spans).

    Returns:
        ``{"since", "until", "tools": {NAME: {...}}, "suggestions": [...]}``,
        tools by name; each tool has ``calls``, ``asked``, ``approved``
        (unedited), ``edited``, ``rejected``, ``responded``, ``expired``,
        ``cancelled``, ``interrupted``, ``denied`` (by a deny rule, nobody
        asked), ``auto`` (ran without a person) and ``auto_by`` (``grant``,
        ``judge``, ``shadow``), ``shadow_would`` (of the calls shadow mode
        ran, how many would have asked a person, ``ask``, and how many a deny
        rule would have refused, ``deny``), ``median_decision_s`` and ``p90_decision_s``
        (seconds from the request to the decision; ``None`` without a
        decision), ``deciders`` (who decided how often) and ``suggestions``.
    """
    states = list(states)
    start = utc(since) if since is not None else None
    now = utc(now)
    tools = _gather(states, start, now)
    first = min(
        (
            utc(e.at)
            for s in states
            for e in s.audit
            if (start is None or utc(e.at) >= start) and utc(e.at) <= now
        ),
        default=now,
    )
    period = _period(((now - (start or first)).total_seconds()) / 86400)
    rows: dict[str, Any] = {}
    suggestions: list[str] = []
    for name in sorted(tools):
        entry = tools[name]
        waits = entry.waits
        row: dict[str, Any] = {
            "calls": entry.calls,
            "asked": entry.asked,
            **{
                key: entry.outcomes[key]
                for key in (
                    "approved",
                    "edited",
                    "rejected",
                    "responded",
                    "expired",
                    "cancelled",
                    "interrupted",
                    "denied",
                )
            },
            "auto": sum(entry.auto.values()),
            "auto_by": {kind: entry.auto[kind] for kind in AUTO_KINDS},
            "shadow_would": {"ask": entry.would["ask"], "deny": entry.would["deny"]},
            "median_decision_s": _seconds(statistics.median(waits)) if waits else None,
            "p90_decision_s": _seconds(_p90(waits)) if waits else None,
            "deciders": dict(sorted(entry.deciders.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
        row["suggestions"] = _suggestions(name, row, period)
        suggestions += row["suggestions"]
        rows[name] = row
    return {
        "since": iso(start) if start is not None else None,
        "until": iso(now),
        "tools": rows,
        "suggestions": suggestions,
    }


def iso(moment: datetime) -> str:
    """``moment`` in UTC, ISO 8601 with ``Z``."""
    return utc(moment).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


async def stored_states(store: Store) -> list[ThreadState]:
    """Every thread of ``store``, oldest first; a thread that cannot be read back is skipped.

    Raises:
        TypeError: the store cannot list its threads (it has no ``thread_ids()``).
    """
    lister = getattr(store, "thread_ids", None)
    if lister is None:
        msg = f"{type(store).__name__} cannot list its threads (it has no thread_ids())"
        raise TypeError(msg)
    states: list[ThreadState] = []
    for thread_id in await lister():
        try:
            state = await store.load(thread_id)
        except CorruptThreadError as exc:
            _log.warning("toolguard: statistics skipped thread %r: %s", exc.thread_id, exc.reason)
            continue
        if state is not None:
            states.append(state)
    return states


_COLUMNS: Final = (
    ("calls", "calls"),
    ("asked", "asked"),
    ("approved", "approved"),
    ("edited", "edited"),
    ("rejected", "rejected"),
    ("expired", "expired"),
    ("cancelled", "cancelled"),
    ("denied", "denied"),
    ("auto", "auto"),
    ("median_decision_s", "median"),
    ("p90_decision_s", "p90"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}s"
    return str(value)


def _ran(row: Mapping[str, Any]) -> list[str]:
    """How a tool's calls ran without a person: ``grant 2``, ``shadow 3 (would ask 2, deny 1)``."""
    parts = []
    for kind in AUTO_KINDS:
        count = row["auto_by"][kind]
        if not count:
            continue
        if kind == "shadow":
            would = [f"{what} {n}" for what, n in row["shadow_would"].items() if n]
            parts.append(f"shadow {count} (would {', '.join(would)})")
        else:
            parts.append(f"{kind} {count}")
    return parts


def format_stats(report: Mapping[str, Any]) -> str:
    """The statistics as text: a table of the tools, who decided, and the suggestions."""
    if report["since"] is None:
        title = f"Every recorded call up to {report['until']}"
    else:
        title = f"Calls from {report['since']} to {report['until']}"
    tools: Mapping[str, Any] = report["tools"]
    if not tools:
        return title + ": none.\n"
    header = ["tool", *(heading for _, heading in _COLUMNS)]
    table = [header] + [
        [name, *(_cell(row[key]) for key, _ in _COLUMNS)] for name, row in tools.items()
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = [title, ""]
    for line in table:
        cells = [line[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    pad = widths[0]
    decided = [
        f"  {name.ljust(pad)}  " + ", ".join(f"{who} {n}" for who, n in row["deciders"].items())
        for name, row in tools.items()
        if row["deciders"]
    ]
    if decided:
        lines += ["", "Who decided:", *decided]
    ran = [
        f"  {name.ljust(pad)}  " + ", ".join(_ran(row))
        for name, row in tools.items()
        if row["auto"]
    ]
    if ran:
        lines += ["", "Ran without a person:", *ran]
    if report["suggestions"]:
        lines += ["", "Suggestions:", *(f"  {text}" for text in report["suggestions"])]
    return "\n".join(lines) + "\n"
