"""How tool results read to a model in message formats without a status field.

OpenAI Chat Completions and Responses have no ``status`` on a tool result,
so an error result would read exactly like a tool's return value. When a
result becomes a model message, a template per
:data:`~toolguard.records.ResultOutcome` marks it (``Rejected by the
reviewer, not executed: <reason>``); the result's own ``content`` (its exact
text) is kept verbatim inside, and ``ToolResult.content`` itself never
changes. A rejection without a reason reads as ``REJECTED_BY_USER_MESSAGE``
alone, which already says that the call was rejected and not run.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, fields
from typing import Any

from toolguard._core.records import REJECTED_BY_USER_MESSAGE, ToolResult

_FIELDS = frozenset({"text", "name"})


def _check_template(field: str, template: object) -> None:
    if not isinstance(template, str):
        msg = f"ResultTemplates.{field} must be text, got {type(template).__name__}"
        raise TypeError(msg)
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        msg = f"ResultTemplates.{field} is not a valid format string: {exc}"
        raise ValueError(msg) from None
    if "text" not in names:
        msg = (
            f"ResultTemplates.{field} must contain {{text}} (the result's own text, kept"
            f" verbatim), got {template!r}"
        )
        raise ValueError(msg)
    unknown = sorted(names - _FIELDS)
    if unknown:
        msg = (
            f"ResultTemplates.{field} may only use {{text}} and {{name}}, got"
            f" {{{unknown[0]}}} in {template!r}"
        )
        raise ValueError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultTemplates:
    """The text a model reads for each kind of tool result that is not a plain success.

    Each field is a format string with ``{text}`` (the result's content: the
    reject reason or ``REJECTED_BY_USER_MESSAGE``, ``NO_DECISION``, the error
    text, ...; required, so the results' exact texts always reach the model
    verbatim) and optionally ``{name}`` (the tool's name). A success result
    (``outcome`` ``None``) is always sent as its content, unchanged.

    Pass an instance as ``result_templates=`` to :class:`~toolguard.ReviewedChat`
    (its stored tool messages then hold the marked text, which any model
    adapter sends as it is), or as ``templates=`` to
    :meth:`~toolguard.Step.openai_messages` / :meth:`~toolguard.Step.tool_messages`
    in a hand-written loop. :meth:`verbatim` sends every content as it is,
    unmarked.

    Attributes:
        rejected: a reviewer rejected the call, giving a reason.
        rejected_without_reason: a reviewer rejected the call without a
            reason: ``{text}`` is ``REJECTED_BY_USER_MESSAGE`` (``User rejected
            this action. It was not executed.``), which says it all, so by
            default it is sent as it is.
        no_decision: the call was left without a decision (lenient resume).
        expired: the review passed its deadline.
        cancelled: the review was cancelled.
        failed: the tool ran and raised.
        invalid_arguments: the arguments broke the tool's schema.
        unknown_tool: the model (or an edit) named a tool that does not exist.
        tampered: the stored call no longer matched what the reviewer saw.
        interrupted: the process stopped while the tool ran; not run again.
        denied: a ``deny`` rule (:class:`~toolguard.Rules`) refused the call.
        responded: the reviewer answered in place of the tool (LangChain's
            ``respond``: a success, so the answer is sent as it is by default).
        error: any other result with status ``"error"`` (no ``outcome``, or
            one without a template here), so no error ever reads as a success.

    Raises:
        TypeError: a template is not text.
        ValueError: a template lacks ``{text}``, uses another field, or does
            not parse.
    """

    rejected: str = "Rejected by the reviewer, not executed: {text}"
    rejected_without_reason: str = "{text}"
    no_decision: str = "No decision from the reviewer, not executed: {text}"
    expired: str = "Review expired, not executed: {text}"
    cancelled: str = "Review cancelled, not executed: {text}"
    failed: str = "Error, the tool failed: {text}"
    invalid_arguments: str = "Error, not executed: {text}"
    unknown_tool: str = "Error, not executed: {text}"
    tampered: str = "Refused, not executed: {text}"
    interrupted: str = "Error, outcome unknown, not run again: {text}"
    responded: str = "{text}"
    denied: str = "Denied by a rule, not executed: {text}"
    error: str = "Error: {text}"

    def __post_init__(self) -> None:
        for item in fields(self):
            _check_template(item.name, getattr(self, item.name))

    @classmethod
    def verbatim(cls) -> ResultTemplates:
        """Templates that send every result's content unchanged (no marking)."""
        return cls(**{item.name: "{text}" for item in fields(cls)})

    def render(self, result: ToolResult) -> str:
        """The text a model reads for ``result``.

        A success without an outcome is its content, unchanged; an error
        without an outcome (or with one that has no template here) uses
        :attr:`error`; a rejection whose content is ``REJECTED_BY_USER_MESSAGE``
        uses :attr:`rejected_without_reason`.
        """
        template = getattr(self, result.outcome, None) if result.outcome is not None else None
        if result.outcome == "rejected" and result.content == REJECTED_BY_USER_MESSAGE:
            template = self.rejected_without_reason
        if not isinstance(template, str):
            if result.status != "error":
                return result.content
            template = self.error
        return template.format(text=result.content, name=result.name)


def unmark(content: str, templates: ResultTemplates | None = None) -> str:
    """The result's own text inside a message ``content`` marked by ``templates``.

    For code that reads tool messages back (e.g. the demo's offline model):
    returns ``content`` unchanged when no template (with ``{text}`` only)
    matches it.
    """
    chosen = templates if templates is not None else DEFAULT_TEMPLATES
    for item in fields(chosen):
        template: str = getattr(chosen, item.name)
        parts = list(string.Formatter().parse(template))
        names = [name for _, name, _, _ in parts if name is not None]
        if names != ["text"]:
            continue
        prefix = "".join(literal for literal, _, _, _ in parts[:1])
        suffix = "".join(literal for literal, _, _, _ in parts[1:])
        if (prefix or suffix) and content.startswith(prefix) and content.endswith(suffix):
            inner = content[len(prefix) : len(content) - len(suffix)]
            if template.format(text=inner) == content:
                return inner
    return content


DEFAULT_TEMPLATES = ResultTemplates()
"""The templates used when none are given."""


def result_text(result: ToolResult, templates: ResultTemplates | None = None) -> str:
    """``result`` as a model reads it, with ``templates`` (default :data:`DEFAULT_TEMPLATES`)."""
    return (templates if templates is not None else DEFAULT_TEMPLATES).render(result)


def check_templates(templates: Any, argument: str = "result_templates") -> ResultTemplates | None:
    """``templates`` when it is ``None`` or a :class:`ResultTemplates`, else a clear TypeError."""
    if templates is None or isinstance(templates, ResultTemplates):
        return templates
    msg = f"{argument} must be a ResultTemplates, got {type(templates).__name__}"
    raise TypeError(msg)
