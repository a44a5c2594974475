"""Redaction: secret arguments are shown as a placeholder, never as their value.

A tool names its secret parameters with ``requires_approval(redact=[...])``
or ``tool(redact=[...])``; a parameter annotated ``pydantic.SecretStr`` is
secret without being named. Everything a person or a log sees (the review
payload, the approval request's ``args``, audit events, the thread's
messages over HTTP, error texts made by toolguard) shows :data:`REDACTED`
instead of the value. The tool itself gets the real value, and the review's
digest covers the real value.

Only top-level parameters are redacted, by name: a secret inside an object
argument is redacted by redacting the whole argument.
"""

from __future__ import annotations

import contextlib
import json
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pydantic import SecretBytes, SecretStr

from toolguard._core.records import (
    EditDecision,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ToolCall,
)

__all__ = [
    "REDACTED",
    "SECRET_GONE",
    "SecretVault",
    "check_redact",
    "keep_redacted",
    "redact_args",
    "redact_messages",
    "scrub",
    "scrub_data",
    "scrub_notes",
    "secret_names",
    "secret_texts",
    "shown_call_args",
    "shown_decision",
    "shown_edit",
    "shown_messages",
    "spellings",
    "tool_redaction",
]

REDACTED = "[redacted]"
"""The placeholder shown instead of a redacted value (exported as ``toolguard.REDACTED``)."""

SECRET_GONE = (
    "The secret arguments of this call are no longer available (they were kept in memory"  # noqa: S105
    " only, and the process that held them has ended). It was not executed: ask for the"
    " call again."
)
"""The result of an approved or edited call whose redacted real value is gone."""

_SECRET_TYPES = (SecretStr, SecretBytes)


def check_redact(redact: object) -> tuple[str, ...]:
    """Check the ``redact=`` option: a list or tuple of parameter names.

    Raises:
        TypeError: not a collection of texts (a single text is refused too:
            ``redact="password"`` would be read letter by letter).
        ValueError: an empty name or a dotted path (only top-level names).
    """
    if isinstance(redact, (str, bytes, Mapping)) or not isinstance(redact, Iterable):
        msg = (
            "redact must be a list of parameter names such as ['password'],"
            f" got {type(redact).__name__}"
        )
        raise TypeError(msg)
    names: list[str] = []
    for name in redact:
        if not isinstance(name, str):
            msg = f"redact must hold parameter names (texts), got {type(name).__name__}: {name!r}"
            raise TypeError(msg)
        if not name or "." in name:
            msg = (
                f"redact takes top-level parameter names, got {name!r}: to hide a value inside"
                " an object argument, redact the whole argument"
            )
            raise ValueError(msg)
        if name not in names:
            names.append(name)
    return tuple(names)


def _is_secret_type(annotation: Any) -> bool:
    """Whether an annotation is ``SecretStr``/``SecretBytes``, possibly optional or Annotated."""
    if annotation in _SECRET_TYPES:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_secret_type(typing.get_args(annotation)[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return bool(members) and all(_is_secret_type(a) for a in members)
    return False


def secret_names(
    tool_name: str,
    parameters: Iterable[str],
    hints: Mapping[str, Any],
    redact: Iterable[str],
) -> frozenset[str]:
    """The redacted parameters of a tool: the named ones and those typed ``SecretStr``.

    Raises:
        ValueError: a name in ``redact`` that is not a parameter of the tool.
    """
    known = list(parameters)
    for name in redact:
        if name not in known:
            msg = (
                f"redact names {name!r}, which is not a parameter of the tool {tool_name!r}."
                f" Its parameters: {known}"
            )
            raise ValueError(msg)
    typed = {name for name in known if _is_secret_type(hints.get(name))}
    return frozenset(redact) | typed


def redact_args(args: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """``args`` with the value of every redacted parameter present replaced by :data:`REDACTED`."""
    if not names:
        return dict(args)
    return {key: REDACTED if key in names else value for key, value in args.items()}


def keep_redacted(
    edited: Mapping[str, Any], original: Mapping[str, Any], names: frozenset[str]
) -> tuple[dict[str, Any], bool]:
    """An edit's arguments with each redacted parameter left as :data:`REDACTED` restored.

    A reviewer who leaves the placeholder keeps the original value of THAT
    parameter of THAT call (absent if the call did not pass it). Other
    parameters are taken literally, placeholder or not.

    Returns:
        The arguments to run and whether any original value was kept.
    """
    merged = dict(edited)
    kept = False
    for name in names:
        if merged.get(name) == REDACTED and isinstance(merged.get(name), str):
            kept = True
            if name in original:
                merged[name] = original[name]
            else:
                del merged[name]
    return merged, kept


def spellings(text: str) -> set[str]:
    """``text`` as a message may quote it: raw, JSON-escaped (UTF-8 or ASCII), ``repr``, ``ascii``.

    Without the quotes around it: ``'a"b'`` gives ``a"b`` and ``a\\"b``; a
    character beyond the BMP also gives its ``\\ud83d\\udd11`` and
    ``\\U0001f511`` escapes, U+2028 its ``\\u2028``, DEL its ``\\x7f``.
    """
    return {
        text,
        json.dumps(text, ensure_ascii=False)[1:-1],
        json.dumps(text)[1:-1],
        repr(text)[1:-1],
        ascii(text)[1:-1],
    }


def _leaf_texts(value: Any, found: set[str], depth: int = 0) -> None:
    """Add the spellings of every text and number inside ``value`` (JSON-like data)."""
    if depth > _SECRET_DEPTH:
        return
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    elif isinstance(value, (SecretBytes, bytes)):
        raw = value.get_secret_value() if isinstance(value, SecretBytes) else value
        value = raw.decode("utf-8", "replace")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        found.add(str(value))
    elif isinstance(value, str):
        if value and value != REDACTED:
            found.update(spellings(value))
    elif isinstance(value, Mapping):
        for item in value.values():
            _leaf_texts(item, found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _leaf_texts(item, found, depth + 1)


_SECRET_DEPTH = 32
"""Texts nested deeper than this inside one secret argument are not searched for."""


def secret_texts(values: Mapping[str, Any], names: frozenset[str]) -> list[str]:
    """The texts to scrub for the redacted values (real values, raw or validated), longest first.

    Each text in a value (the value itself, or every text and number inside
    an object or list value) in each of its :func:`spellings`, and an
    object or list value as a whole, written as JSON (UTF-8 and ASCII) and
    with ``repr``.
    """
    found: set[str] = set()
    for name in names:
        if name not in values:
            continue
        value = values[name]
        _leaf_texts(value, found)
        if isinstance(value, (Mapping, list, tuple)):
            # Unwritable as a whole: its texts are in ``found`` one by one.
            with contextlib.suppress(ValueError, TypeError, RecursionError):
                found.update(
                    (
                        json.dumps(value, ensure_ascii=False, default=str),
                        json.dumps(value, default=str),
                        repr(value),
                    )
                )
    found.discard(REDACTED)
    return sorted(found, key=len, reverse=True)


MIN_SCRUBBED = 4
"""Secret values shorter than this are not searched for in texts (they would match anywhere)."""


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by :data:`REDACTED`."""
    for secret in secrets:
        if len(secret) >= MIN_SCRUBBED:
            text = text.replace(secret, REDACTED)
    return text


def scrub_data(data: Any, secrets: list[str]) -> Any:
    """JSON data with :func:`scrub` applied to every text in it (keys included)."""
    if not secrets:
        return data
    if isinstance(data, str):
        return scrub(data, secrets)
    if isinstance(data, list):
        return [scrub_data(item, secrets) for item in data]
    if isinstance(data, dict):
        return {scrub(str(k), secrets): scrub_data(v, secrets) for k, v in data.items()}
    return data


def redact_messages(
    messages: Iterable[Mapping[str, Any]], names_of: typing.Callable[[str], frozenset[str]]
) -> list[dict[str, Any]]:
    """OpenAI-format messages with the redacted arguments of every tool call replaced.

    ``names_of(tool_name)`` gives a tool's redacted parameters. Arguments that
    are not a JSON object are kept as they are (the model sent text that was
    never run).
    """
    shown: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            shown.append(dict(message))
            continue
        new_calls: list[Any] = []
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            name = function.get("name") if isinstance(function, Mapping) else None
            names = names_of(name) if isinstance(name, str) else frozenset()
            raw = function.get("arguments") if isinstance(function, Mapping) else None
            if not names or not isinstance(raw, str):
                new_calls.append(call)
                continue
            try:
                args = json.loads(raw)
            except ValueError:
                args = None
            hidden = (
                json.dumps(redact_args(args, names), ensure_ascii=False)
                if isinstance(args, dict)
                else REDACTED
            )
            assert isinstance(function, Mapping)  # noqa: S101 - names came from it
            new_calls.append({**call, "function": {**function, "arguments": hidden}})
        shown.append({**message, "tool_calls": new_calls})
    return shown


def shown_edit(decision: EditDecision, shown_args: Mapping[str, Any]) -> EditDecision:
    """An edit decision as it is recorded: its arguments as a person may see them."""
    edited = decision.edited_action.model_copy(update={"args": dict(shown_args)})
    return decision.model_copy(update={"edited_action": edited})


class _Tools(Protocol):
    def get(self, name: str) -> Any: ...


def tool_redaction(tools: _Tools, name: str) -> frozenset[str]:
    """The redacted parameters of the tool ``name`` in ``tools`` (none for an unknown tool)."""
    found = tools.get(name)
    redacted = getattr(found, "redacted", None)
    return redacted if isinstance(redacted, frozenset) else frozenset()


def shown_call_args(call: ToolCall, tools: _Tools) -> dict[str, Any]:
    """A call's arguments as a person may see them."""
    return redact_args(call.args, tool_redaction(tools, call.name))


def shown_decision(decision: Any, tools: _Tools) -> Any:
    """A decision as it is recorded: an edit's secret arguments replaced."""
    if not isinstance(decision, EditDecision):
        return decision
    names = tool_redaction(tools, decision.edited_action.name)
    if not names:
        return decision
    return shown_edit(decision, redact_args(decision.edited_action.args, names))


def scrub_notes(decisions: Iterable[Any], pending: PendingTurn, tools: _Tools) -> list[Any]:
    """The decisions (answering ``pending``'s review) with no reject or respond message quoting
    a secret of the review.

    A reviewer's note is written to the model, the audit trail and webhooks,
    so every secret the review holds is replaced there, whichever call the
    note answers: the real values of the paused turn's
    calls (``pending.calls`` and ``pending.replaced_calls``), of the edits
    already recorded on its actions, and of the edits among ``decisions``.
    """
    decisions = list(decisions)
    if not any(
        isinstance(given, (RejectDecision, RespondDecision)) and given.message
        for given in decisions
    ):
        return decisions  # approvals and edits carry no note
    secrets: set[str] = set()
    for call in (*pending.calls, *pending.replaced_calls):
        names = tool_redaction(tools, call.name)
        if names:
            secrets.update(secret_texts(call.args, names))
    recorded = [getattr(action, "decision", None) for action in pending.actions]
    for decision in (*recorded, *decisions):
        if isinstance(decision, EditDecision):
            names = tool_redaction(tools, decision.edited_action.name)
            if names:
                secrets.update(secret_texts(decision.edited_action.args, names))
    texts = sorted(secrets, key=len, reverse=True)
    out: list[Any] = []
    for given in decisions:
        if isinstance(given, (RejectDecision, RespondDecision)) and given.message and texts:
            clean = scrub(given.message, texts)
            if clean != given.message:
                out.append(given.model_copy(update={"message": clean}))
                continue
        out.append(given)
    return out


def shown_messages(chat: Any, messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A chat's stored messages as a person may see them (the thread view over HTTP)."""
    tools: _Tools = chat.runner.toolset
    return redact_messages(messages, lambda name: tool_redaction(tools, name))


class SecretVault:
    """Real values of redacted arguments, kept in this process's memory only.

    Used by ``ReviewedChat(store_secrets=False)``: the stored thread (paused
    turn, history, audit) holds ``REDACTED``; the vault holds the real
    arguments of a paused turn's calls, and the real edits of its actions
    already settled while a quorum waits, until the turn is resumed or closed.
    A paused turn whose values are gone (another process, a restart) fails
    closed: its approved calls end with ``SECRET_GONE`` and never run.
    """

    __slots__ = ("_edits", "_real", "_tools")

    def __init__(self, tools: _Tools) -> None:
        self._tools = tools
        self._real: dict[str, dict[str, dict[str, Any]]] = {}
        self._edits: dict[str, dict[str, EditDecision]] = {}

    def shown_calls(self, calls: Iterable[ToolCall]) -> list[ToolCall]:
        """The calls with their secret values replaced (for storage)."""
        shown: list[ToolCall] = []
        for call in calls:
            names = tool_redaction(self._tools, call.name)
            hidden = redact_args(call.args, names)
            shown.append(call if hidden == call.args else call.model_copy(update={"args": hidden}))
        return shown

    def stash(self, pending: PendingTurn) -> PendingTurn:
        """Keep the real arguments of ``pending``'s calls here; return it with them replaced.

        The edits of its actions (settled while a quorum waits) are kept and
        replaced the same way.
        """
        real = {c.id: dict(c.args) for c in (*pending.calls, *pending.replaced_calls)}
        self._real[pending.review_id] = real
        edits = {
            a.id: a.decision
            for a in pending.actions
            if isinstance(a.decision, EditDecision)
            and shown_decision(a.decision, self._tools) is not a.decision
        }
        self._edits[pending.review_id] = edits
        return pending.model_copy(
            update={
                "calls": self.shown_calls(pending.calls),
                "replaced_calls": self.shown_calls(pending.replaced_calls),
                "actions": [
                    a.model_copy(update={"decision": shown_decision(a.decision, self._tools)})
                    if a.id in edits
                    else a
                    for a in pending.actions
                ],
            }
        )

    def restore(self, pending: PendingTurn) -> PendingTurn:
        """``pending`` with the real arguments put back (unchanged if they are gone)."""
        real = self._real.get(pending.review_id)
        if real is None:
            return pending

        def back(calls: list[ToolCall]) -> list[ToolCall]:
            return [
                c.model_copy(update={"args": real[c.id]})
                if c.id in real
                and redact_args(real[c.id], tool_redaction(self._tools, c.name)) == c.args
                else c
                for c in calls
            ]

        edits = self._edits.get(pending.review_id, {})
        return pending.model_copy(
            update={
                "calls": back(pending.calls),
                "replaced_calls": back(pending.replaced_calls),
                "actions": [
                    a.model_copy(update={"decision": edits[a.id]})
                    if a.id in edits and shown_decision(edits[a.id], self._tools) == a.decision
                    else a
                    for a in pending.actions
                ],
            }
        )

    def drop(self, review_id: str | None) -> None:
        """Forget the real arguments of a turn that ended (or of a review that was replaced)."""
        if review_id is not None:
            self._real.pop(review_id, None)
            self._edits.pop(review_id, None)

    def __len__(self) -> int:
        return len(self._real)
