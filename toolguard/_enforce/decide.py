"""What the policy says about one proposed call: run it now, ask a person, or refuse it.

One function, :func:`decide`, answers for a call the model proposed, in the
order every entry point must follow:

1. an unknown tool is refused (the text lists the available tools);
2. arguments refused while reading the call (beyond the limits, NaN, not a
   JSON object) are refused;
3. a ``deny`` rule refuses the call whatever its arguments' shape, and nobody
   is asked (:func:`~toolguard._policy.rules.denied_text`);
4. arguments that break the tool's schema are refused, naming the field;
5. an ``ask`` rule requires a review; an ``allow`` rule runs the call; with
   no matching rule the tool's own policy decides (decorator, classifier,
   ``when=`` on the validated arguments, failing closed).

Precedence: deny > ask > allow > the tool's policy. A verdict to ask says
whether a standing grant may stand in for the review (not when an ``ask``
rule asked) and how many distinct reviewers must approve (a quorum).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolguard._core.records import ALLOWED_DECISIONS, ResultOutcome, ToolCall
from toolguard._policy.redact import REDACTED, scrub
from toolguard._policy.rules import Rule, denied_text, rule_for
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset

Outcome = Literal["run", "ask", "deny"]
"""Run the call now, ask a person first, or refuse it (the model reads why)."""


@dataclass(slots=True, kw_only=True)  # not frozen: built once per call, on the hot path
class Verdict:
    """The policy's answer for one proposed call (read it; never change it).

    Attributes:
        outcome: ``"run"``, ``"ask"`` or ``"deny"``.
        reason: a sentence saying why, for logs and explanations.
        tool: the tool called (``None`` for an unknown tool).
        validated: the validated arguments (``run`` and ``ask`` only).
        refusal: what the model reads for a refused call (``deny`` only).
        refusal_kind: the tool result's ``outcome`` for a refused call:
            ``unknown_tool``, ``invalid_arguments`` or ``denied``.
        rule: the allow/ask/deny rule that decided, if one did.
        approvals: how many distinct reviewers must approve (``ask`` only;
            above 1: a quorum).
    """

    outcome: Outcome
    reason: str
    tool: Tool[Any, Any] | None = None
    validated: dict[str, Any] | None = None
    refusal: str | None = None
    refusal_kind: ResultOutcome | None = None
    rule: Rule | None = None
    approvals: int = 1

    @property
    def allowed_decisions(self) -> tuple[str, ...]:
        """The decisions a reviewer may take on this call (see :func:`decisions_for`)."""
        return decisions_for(self.tool)

    @property
    def grantable(self) -> bool:
        """Whether a standing grant may stand in for the review (never when a rule asked)."""
        return self.outcome == "ask" and (self.rule is None or self.rule.effect != "ask")


def decisions_for(tool: Tool[Any, Any] | None) -> tuple[str, ...]:
    """The decisions a reviewer may take on calls of ``tool``: its policy's, or all three.

    The one definition every path shows in its review payload (a tool asked
    by a rule or a judge, without a policy of its own, allows the usual three).
    """
    if tool is None or tool.approval is None:
        return tuple(ALLOWED_DECISIONS)
    return tuple(tool.approval.allowed_decisions)


def _refused(
    reason: str,
    text: str,
    kind: ResultOutcome,
    tool: Tool[Any, Any] | None = None,
    rule: Rule | None = None,
) -> Verdict:
    return Verdict(
        outcome="deny", reason=reason, tool=tool, refusal=text, refusal_kind=kind, rule=rule
    )


def _denied(name: str, tool: Tool[Any, Any], rule: Rule) -> Verdict:
    return _refused(
        f"matched the deny rule {rule.pattern!r}", denied_text(name, rule), "denied", tool, rule
    )


def unknown_tool_text(toolset: Toolset, name: str) -> str:
    """What the model reads for a call of a tool that is not in ``toolset``."""
    available = ", ".join(toolset) or "(none)"
    return f"Tool `{name}` does not exist. Available tools: {available}"


def decide(toolset: Toolset, call: ToolCall) -> Verdict:
    """What ``toolset``'s rules and the tool's policy say about ``call`` (see the module doc).

    ``call`` is read with :func:`toolguard.records.parse_tool_call` first, so its
    ``error`` and ``arguments_error`` hold what reading it refused. Never
    raises for anything in the call.
    """
    tool: Tool[Any, Any] | None = toolset.get(call.name)
    if tool is None:
        return _refused(
            "the tool does not exist", unknown_tool_text(toolset, call.name), "unknown_tool"
        )
    if call.error is not None:
        return _refused(
            "the arguments are beyond the limits", call.error, "invalid_arguments", tool
        )
    if call.arguments_error is not None:
        sent = REDACTED if tool.redacted else call.arguments_error[:200]
        text = f"Invalid arguments for tool `{call.name}`: expected a JSON object, got {sent}"
        return _refused("the arguments are not a JSON object", text, "invalid_arguments", tool)
    rules = toolset.rules
    rule = rule_for(rules, call.name, call.args)
    if rule is not None and rule.effect == "deny":
        return _denied(call.name, tool, rule)
    try:
        validated = tool.validate_args(call.args)
    except ToolArgumentsError as exc:
        return _refused("the arguments break the schema", str(exc), "invalid_arguments", tool)
    except RecursionError:
        text = f"Invalid arguments for tool `{call.name}`: nested too deeply"
        return _refused("the arguments are nested too deeply", text, "invalid_arguments", tool)
    rule = rule_for(rules, call.name, call.args, validated)
    if rule is not None and rule.effect == "deny":
        return _denied(call.name, tool, rule)
    if rule is not None and rule.effect == "ask":
        return Verdict(
            outcome="ask",
            reason=f"matched the ask rule {rule.pattern!r}",
            tool=tool,
            validated=validated,
            rule=rule,
            approvals=tool.approvals,
        )
    if rule is not None:
        return Verdict(
            outcome="run",
            reason=f"matched the allow rule {rule.pattern!r}",
            tool=tool,
            validated=validated,
            rule=rule,
        )
    if tool.needs_approval(validated):  # fails closed: a predicate that raises asks
        return Verdict(
            outcome="ask",
            reason="the tool's policy asks for a review of this call",
            tool=tool,
            validated=validated,
            approvals=tool.approvals,
        )
    return Verdict(
        outcome="run", reason="the tool's policy lets this call run", tool=tool, validated=validated
    )


# --------------------------------------------------------------------------- outcomes


def failure_text(tool: Tool[Any, Any], exc: BaseException, *argsets: Mapping[str, Any]) -> str:
    """What the model reads when the tool raised, on every path.

    A secret argument the exception quotes (in any spelling) is scrubbed;
    ``argsets`` are the argument mappings whose secrets to look for (the
    validated ones and the ones the model sent).
    """
    text = f"Tool `{tool.name}` failed: {type(exc).__name__}: {exc}"
    if not tool.redacted:
        return text
    secrets: list[str] = []
    for args in argsets:
        secrets += tool.secret_texts(args)
    return scrub(text, secrets)
