"""What one run or resume of a turn produced: the :class:`Step` record and its results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolguard._core.judgement import Judgement
from toolguard._core.records import (
    Action,
    PendingReview,
    PendingTurn,
    ResultOutcome,
    ToolCall,
    ToolResult,
    args_json,
)
from toolguard._core.results import ResultTemplates, check_templates, result_text
from toolguard._core.shadowing import CandidateVerdict, Shadowed


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What one run or resume of a turn produced.

    Attributes:
        calls: the turn's tool calls as they stand now: an edited call
            replaces the proposed one (same id), so record these in the
            assistant message.
        results: one result per call in ``calls`` order when the turn is
            complete; when paused, the results known so far, in call order.
        pending: the paused turn (store it, resume it later), or ``None``.
        replaced_calls: the calls rewritten by edit decisions.
        actions: the approval requests this step touched, with their status.
        judgements: what a :class:`~toolguard.Judge` said about this step's
            calls, in call order (empty without a judge).
        shadowed: the calls shadow mode ran at once that the policy would
            have stopped (asked a person, or with ``shadow="all"`` refused by a
            deny rule), in call order (empty outside shadow mode).
        candidates: what a candidate policy said about each of this step's
            calls, in call order (empty without a candidate); never enforced.
    """

    calls: list[ToolCall]
    results: list[ToolResult]
    pending: PendingTurn | None = None
    replaced_calls: list[ToolCall] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    judgements: list[Judgement] = field(default_factory=list)
    shadowed: list[Shadowed] = field(default_factory=list)
    candidates: list[CandidateVerdict] = field(default_factory=list)

    @property
    def paused(self) -> bool:
        """Whether the turn waits for decisions."""
        return self.pending is not None

    @property
    def pending_review(self) -> PendingReview | None:
        """The review payload while paused, else ``None``."""
        return self.pending.pending_review if self.pending is not None else None

    def tool_messages(self, templates: ResultTemplates | None = None) -> list[dict[str, Any]]:
        """The results as OpenAI Chat Completions tool messages, in call order.

        Each is ``{"role": "tool", "tool_call_id", "content"}``; the content of
        a result that is not a plain success is marked with ``templates``
        (default :class:`~toolguard.text.ResultTemplates`), since the format has no
        status field.

        Raises:
            ValueError: the turn is still paused (not every call has a result).
        """
        templates = check_templates(templates, "templates")
        if self.pending is not None:
            msg = "The turn is paused: resume it with the decisions before sending its results"
            raise ValueError(msg)
        return [
            {"role": "tool", "tool_call_id": r.call_id, "content": result_text(r, templates)}
            for r in self.results
        ]

    def openai_messages(
        self, text: str | None = None, templates: ResultTemplates | None = None
    ) -> list[dict[str, Any]]:
        """The finished turn in OpenAI Chat Completions format, ready to append to the history.

        ``[assistant message, tool message per call]``: the assistant message
        carries ``text`` (the model's content, ``None`` when it had none) and
        the tool calls as they stand (edits applied, arguments as JSON
        text), then one tool message per call in call order (see
        :meth:`tool_messages`). A hand-written loop sends these instead of
        toolguard's own :class:`~toolguard.ToolCall` shape.

        Raises:
            ValueError: the turn is still paused.
        """
        tools = self.tool_messages(templates)
        assistant: dict[str, Any] = {"role": "assistant", "content": text}
        if self.calls:
            assistant["tool_calls"] = [openai_tool_call(c) for c in self.calls]
        return [assistant, *tools]


def openai_tool_call(call: ToolCall) -> dict[str, Any]:
    """One call in the OpenAI Chat Completions shape (``arguments`` as JSON text)."""
    arguments = call.arguments_error if call.arguments_error is not None else args_json(call.args)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def error_result(
    call: ToolCall, content: str, outcome: ResultOutcome, name: str | None = None
) -> ToolResult:
    """The error result of ``call`` (the model reads ``content``); ``name``: the tool's name."""
    return ToolResult(
        call_id=call.id, name=name or call.name, status="error", content=content, outcome=outcome
    )
