"""The review on a terminal: approval cards, questions and answers, decisions.

:func:`render_card` shows one action with its FULL arguments, invisible and
look-alike characters escaped; :func:`ask_decisions` asks one decision per
card (approve, edit, reject, or all at once). An edit asks the arguments
field by field, each prefilled with its current value (shown escaped; Enter
keeps it), checks the result against the tool's schema
(``Tool.validate_args``) and asks again for the fields that fail, with the
error, before anything is sent.

Numbers are shown and read exactly: an integer keeps every digit (``json``
reads it as a Python ``int``), NaN and the infinities are marked on the card,
and an edit that types a number JSON cannot hold (``1e400``, ``NaN``) is asked
again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TextIO

from toolguard._core.judgement import JUDGEMENT_SEPARATOR, Judgement
from toolguard._core.records import Action, ActionRequest, PendingReview
from toolguard._core.reveal import (
    Segment,
    reveal_action,
    reveal_json,
    reveal_text,
    segments_text,
    warning_lines,
)
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset

__all__ = [
    "BATCH_PROMPT",
    "CONFIRM_EDIT_PROMPT",
    "DECISION_PROMPT",
    "FIELDS_HINT",
    "QUIT_WORDS",
    "REJECT_ALL_QUESTION",
    "REJECT_QUESTION",
    "InputEndedError",
    "QuitError",
    "Terminal",
    "ask_decisions",
    "prose",
    "render_card",
    "render_outcome",
]

DECISION_PROMPT = "[a]pprove / [e]dit / [r]eject"
"""The question under a card when one action waits."""
BATCH_PROMPT = "[a]pprove / [e]dit / [r]eject / [A]pprove all / [R]eject all"
"""The question under each card when several actions wait."""
REJECT_QUESTION = "Why are you rejecting this tool?"
"""Asked after a reject; the answer is the reason the model reads (empty: none)."""
REJECT_ALL_QUESTION = "Why are you rejecting these tools?"
"""Asked after a reject-all; the reason goes with every remaining action."""
FIELDS_HINT = (
    "Edit the arguments field by field. Enter keeps the value shown; text is taken as"
    ' typed (or as a "JSON string"), other values as JSON (3, true, null, ["a"]).'
)
"""Shown when an edit starts (tools with a known schema)."""
CONFIRM_EDIT_PROMPT = "[s]end / [b]ack"
"""Asked once the edited arguments fit the tool's schema."""
QUIT_WORDS = ("quit", "exit", "q")
"""Typed at a prompt, each leaves the program."""


# ---------------------------------------------------------------------------- rendering


def render_card(
    request: ActionRequest,
    *,
    index: int = 1,
    total: int = 1,
    mark: Callable[[str], str] | None = None,
    why: str | None = None,
    judgement: Judgement | None = None,
) -> str:
    """The approval card of one action: header, description and the FULL arguments.

    Args:
        request: the action, from ``pending_review.action_requests``.
        index: its position, from 1.
        total: how many actions wait in this review.
        mark: applied to each escaped character (e.g. reverse video on a
            colour terminal); by default it is shown as it is.
        why: why the tool needs approval (the classifier's reason), shown
            under the description as ``Why it asks: ...``.
        judgement: what a :class:`~toolguard.Judge` said about the call (the
            action's ``judgement``), shown on its own line under that as
            ``Judge (MODEL): RISK risk, ...``; the description's copy of it
            is left out, so it shows once.

    Returns:
        Plain text without a trailing newline; the arguments are indented
        JSON, so they can be copied into an edit. Invisible and look-alike
        characters (bidi controls, zero-width characters, control characters
        such as ``ESC``, a Cyrillic letter in a Latin word; see
        :mod:`toolguard._core.reveal`) are shown escaped as ``\\uXXXX`` and listed in
        a warning above the arguments, so nothing the model sent can hide
        text or act on the terminal; the escaped JSON still parses back to
        exactly the arguments.
    """
    description = request.description
    verdict: list[str] = []
    if judgement is not None:
        summary = judgement.summary()
        description = description.removesuffix(f"{JUDGEMENT_SEPARATOR}{summary}")
        verdict.append(prose(summary))
    shown = reveal_action(request.name, request.args, description)
    warning = warning_lines(shown.findings)

    def text(segments: list[Segment]) -> str:
        if mark is None:
            return segments_text(segments)
        return "".join(part if what is None else mark(part) for part, what in segments)

    return "\n".join(
        [
            f"== Approval {index}/{total}: {text(shown.name)} ==",
            text(shown.description),
            *([f"Why it asks: {prose(why)}"] if why else []),
            *verdict,
            *warning[:1],
            *(f"  - {item}" for item in warning[1:]),
            "Arguments:",
            text(shown.args),
        ]
    )


def prose(text: str) -> str:
    """Untrusted text for the terminal: control, bidi and invisible characters escaped."""
    return reveal_text(text, letters=False)


def render_outcome(action: Action) -> str:
    """One line about a decided action: its tool, final status and what the model read."""
    line = f"[{action.status}] {reveal_text(action.name, single_line=True)}"
    if action.result is not None:
        line += f": {prose(action.result.content)}"
    elif action.status == "edited":
        line += ": the edited call waits for its own approval"
    return line


# ---------------------------------------------------------------------------- terminal I/O


class InputEndedError(Exception):
    """The input ended (EOF): the program stops."""


class QuitError(Exception):
    """The reviewer typed quit at an approval prompt: the program stops, nothing runs."""


class Terminal:
    """Questions and answers on a terminal, or from a script without prompts.

    Args:
        out: where everything is written.
        answers: ``None`` to ask with :func:`input`; else a stream whose lines
            are the answers (non-interactive: no prompt is shown and each
            answer is echoed as ``> answer``).
        color: emphasise headers with ANSI codes.
    """

    def __init__(self, out: TextIO, *, answers: TextIO | None = None, color: bool = False) -> None:
        self.out = out
        self.answers = answers
        self.color = color

    def say(self, text: str = "") -> None:
        """Write ``text`` and a newline."""
        self.out.write(f"{text}\n")
        self.out.flush()

    def strong(self, text: str) -> str:
        """``text`` in bold when colours are on."""
        return f"\033[1m{text}\033[0m" if self.color else text

    def mark(self, text: str) -> str:
        """``text`` in reverse video when colours are on: an escaped character on a card."""
        return f"\033[7m{text}\033[27m" if self.color else text

    def ask(self, prompt: str, *, question: bool = False) -> str:
        """The next answer, without its line ending.

        Args:
            prompt: shown before the answer on a terminal.
            question: the prompt is a question worth keeping in a transcript:
                without a terminal it is printed on its own line.

        Raises:
            InputEndedError: the input ended.
        """
        if self.answers is None:
            try:
                return input(f"{prompt} > ")
            except EOFError:
                self.say()
                raise InputEndedError from None
        if question:
            self.say(prompt)
        line = self.answers.readline()
        if not line:
            raise InputEndedError
        answer = line.rstrip("\r\n")
        self.say(f"> {answer}" if answer else ">")
        return answer


# ---------------------------------------------------------------------------- the review


_Choice = Literal["approve", "edit", "reject", "approve_all", "reject_all"]
_CHOICES: dict[str, _Choice] = {
    "a": "approve",
    "approve": "approve",
    "e": "edit",
    "edit": "edit",
    "r": "reject",
    "reject": "reject",
    "A": "approve_all",
    "approve all": "approve_all",
    "R": "reject_all",
    "reject all": "reject_all",
}


def _choice(answer: str) -> _Choice | None:
    answer = answer.strip()
    if answer in ("A", "R"):
        return _CHOICES[answer]
    return _CHOICES.get(" ".join(answer.lower().split()))


def _reject(reason: str) -> dict[str, Any]:
    reason = reason.strip()
    return {"type": "reject", "message": reason} if reason else {"type": "reject"}


def _read_json(text: str) -> Any:
    """JSON text as Python values, every integer exact; a number JSON cannot hold refused.

    Raises:
        ValueError: not JSON (a ``json.JSONDecodeError``), a number beyond a 64-bit float
            (``1e400``: Python would read Infinity), or ``NaN`` / ``Infinity``.
    """

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            msg = f"the number {number} is beyond a 64-bit float"
            raise ValueError(msg)
        return value

    def constant(name: str) -> Any:
        msg = f"{name} is not a JSON number"
        raise ValueError(msg)

    return json.loads(text, parse_float=finite, parse_constant=constant)


def _ask_args(term: Terminal, request: ActionRequest) -> dict[str, Any] | None:
    """New arguments for an edit, as a JSON object; ``None`` when the user gives up (empty line)."""
    term.say(
        "Type ALL the arguments as one line of JSON (an empty line goes back). Now:"
        f" {reveal_json(request.args, indent=None)}"
    )
    while True:
        answer = term.ask("args")
        if not answer.strip():
            return None
        try:
            value = _read_json(answer)
        except ValueError as exc:  # not JSON, or a number JSON cannot hold
            term.say(f"Invalid JSON: {exc}. Try again.")
            continue
        if not isinstance(value, dict):
            term.say(f"The arguments must be a JSON object, got {type(value).__name__}. Try again.")
            continue
        return value


def _accepts(schema: Mapping[str, Any], kind: str) -> bool:
    """Whether a field's schema says it takes values of JSON type ``kind``."""
    kinds = schema.get("type")
    if kinds == kind or (isinstance(kinds, list) and kind in kinds):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    return isinstance(branches, list) and any(
        isinstance(branch, Mapping) and _accepts(branch, kind) for branch in branches
    )


def _field_value(answer: str, schema: Mapping[str, Any]) -> Any:
    """A typed answer as a field's value: text as typed for text fields, else JSON."""
    if answer == "null" and _accepts(schema, "null"):
        return None
    if _accepts(schema, "string"):
        if answer.startswith('"'):
            try:
                value = json.loads(answer)
            except json.JSONDecodeError:
                return answer
            return value if isinstance(value, str) else answer
        return answer
    try:
        return _read_json(answer)
    except ValueError:  # not JSON, or a number JSON cannot hold (1e400)
        return answer  # the schema check names the field and says what it needs


def _failing_fields(error: str, fields: Sequence[str]) -> list[str]:
    """The fields a ``ToolArgumentsError`` names (all of them when it names none)."""
    failing = [f for f in fields if f"'{f}'" in error or f"'{f}." in error]
    return failing or list(fields)


def _edit_fields(
    term: Terminal, request: ActionRequest, tool: Tool[..., Any]
) -> dict[str, Any] | None:
    """The edited arguments, asked field by field and checked against the tool's schema.

    ``None`` when the reviewer goes back to the decision prompt.
    """
    properties = tool.parameters.get("properties")
    schemas: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    fields = [*schemas, *(name for name in request.args if name not in schemas)]
    values = dict(request.args)
    term.say(FIELDS_HINT)
    todo = fields
    while True:
        for field in todo:
            shown = reveal_text(field, single_line=True)
            now = reveal_json(values[field], indent=None) if field in values else "(not set)"
            term.say(f"{shown}: {now}")
            answer = term.ask(shown)
            if answer:
                schema = schemas.get(field)
                values[field] = _field_value(answer, schema if isinstance(schema, Mapping) else {})
        try:
            tool.validate_args(values)
        except ToolArgumentsError as exc:
            term.say(f"The edit does not fit the tool: {prose(str(exc))}")
            todo = _failing_fields(str(exc), fields)
            continue
        term.say(f"Edited arguments: {reveal_json(values, indent=None)}")
        while True:
            answer = " ".join(term.ask(CONFIRM_EDIT_PROMPT).lower().split())
            if answer in ("s", "send"):
                return values
            if answer in ("b", "back"):
                return None
            if answer in QUIT_WORDS:
                raise QuitError
            term.say("Please answer s (send) or b (back).")


def _why(tools: Mapping[str, Tool[..., Any]] | None, name: str) -> str | None:
    """Why the classifier asks about tool ``name``, when ``tools`` is a toolset that knows it."""
    if not isinstance(tools, Toolset) or name not in tools:
        return None
    found = tools.explain(name)
    return found.reason if found.needs_approval else None


def _judgements(
    requests: Sequence[ActionRequest], actions: Sequence[Action]
) -> list[Judgement | None]:
    """The judge's verdict on each waiting request, from the actions of the turn that asked."""
    waiting = [a for a in actions if a.status == "requested"]
    if len(waiting) != len(requests) or any(
        a.name != r.name or a.description != r.description
        for a, r in zip(waiting, requests, strict=True)
    ):
        return [None] * len(requests)
    return [a.judgement for a in waiting]


def ask_decisions(
    term: Terminal,
    review: PendingReview,
    tools: Mapping[str, Tool[..., Any]] | None = None,
    actions: Sequence[Action] = (),
    *,
    reasons: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One decision per action, asked card by card (wire-format dicts, in order).

    Args:
        term: where to ask.
        review: the pending review.
        tools: the chat's tools by name: an edit of a known tool is asked
            field by field and checked against its schema; without it, as
            one line of JSON.
        actions: the actions of the turn that asked (``ChatTurn.actions``):
            a card shows the judge's verdict on its action, if one judged it.
        reasons: why each tool needs approval, by tool name (a server's
            ``GET /hitl/tools``); without it, ``tools`` says when it is a toolset.

    Raises:
        InputEndedError: the input ended before every action was decided.
        QuitError: the reviewer typed quit at the approval prompt.
    """
    requests = review.action_requests
    total = len(requests)
    if total > 1:
        term.say(f"{total} actions wait for your approval.")
    prompt = BATCH_PROMPT if total > 1 else DECISION_PROMPT
    verdicts = _judgements(requests, actions)
    decisions: list[dict[str, Any]] = []
    while len(decisions) < total:
        index = len(decisions)
        request = requests[index]
        card = render_card(
            request,
            index=index + 1,
            total=total,
            mark=term.mark,
            why=reasons.get(request.name) if reasons is not None else _why(tools, request.name),
            judgement=verdicts[index],
        )
        term.say(term.strong(card))
        while True:
            answer = term.ask(prompt)
            if " ".join(answer.lower().split()) in QUIT_WORDS:
                raise QuitError
            choice = _choice(answer)
            if choice == "approve":
                decisions.append({"type": "approve"})
            elif choice == "approve_all":
                decisions.extend({"type": "approve"} for _ in requests[index:])
            elif choice == "reject":
                decisions.append(_reject(term.ask(REJECT_QUESTION, question=True)))
            elif choice == "reject_all":
                reason = term.ask(REJECT_ALL_QUESTION, question=True)
                decisions.extend(_reject(reason) for _ in requests[index:])
            elif choice == "edit":
                tool = tools.get(request.name) if tools is not None else None
                args = (
                    _edit_fields(term, request, tool)
                    if tool is not None
                    else _ask_args(term, request)
                )
                if args is None:
                    continue
                decisions.append(
                    {"type": "edit", "edited_action": {"name": request.name, "args": args}}
                )
            else:
                term.say(
                    "Please answer a, e or r (or A / R for all), or quit."
                    if total > 1
                    else "Please answer a, e or r, or quit."
                )
                continue
            break
    return decisions
