"""Argument rules: allow, ask or deny calls by tool name and argument patterns.

A rule is ``tool_glob`` or ``tool_glob(arg="glob", ...)``. The tool glob and
every argument glob are matched anchored and case-sensitive, with
:func:`fnmatch.fnmatchcase` (``*`` any text, ``?`` one character, ``[abc]``
a set). An argument glob matches only a string argument of that name: a
missing argument, a number, a list or an object never matches a string
pattern. Precedence: ``deny`` > ``ask`` > ``allow`` > the tool's own policy
(decorator, classifier, ``when=``).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from toolguard._core.errors import RuleSyntaxError
from toolguard._core.jsonable import to_json_data

Effect = Literal["allow", "ask", "deny"]
"""What a matching rule does: run at once, require a review, or refuse."""

_EFFECTS: Final[tuple[Effect, ...]] = ("deny", "ask", "allow")
_ARG_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_PATTERN: Final = 4_096


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule.

    Attributes:
        effect: ``"allow"``, ``"ask"`` or ``"deny"``.
        pattern: the rule as written, e.g. ``send_email(to="*@example.com")``.
        tool: the glob for the tool name.
        args: ``(argument name, glob)`` pairs; all must match.
    """

    effect: Effect
    pattern: str
    tool: str
    args: tuple[tuple[str, str], ...] = ()

    def matches(self, name: str, args: Mapping[str, Any]) -> bool:
        """Whether a call of tool ``name`` with ``args`` matches this rule."""
        if not fnmatch.fnmatchcase(name, self.tool):
            return False
        for arg, glob in self.args:
            value = args.get(arg)
            if not isinstance(value, str) or not fnmatch.fnmatchcase(value, glob):
                return False
        return True

    def __str__(self) -> str:
        return f"{self.effect} {self.pattern}"


@dataclass(frozen=True, slots=True)
class RuleDecision:
    """Which rule decided a call, and what it said.

    Attributes:
        effect: ``"allow"``, ``"ask"``, ``"deny"``, or ``None`` when no rule
            matched (the tool's own policy decides).
        rule: the rule that decided, or ``None``.
        reason: a sentence saying why, for logs and ``explain``.
    """

    effect: Effect | None
    rule: Rule | None
    reason: str


def parse_rule(pattern: str, effect: Effect) -> Rule:
    """Parse ``tool_glob`` or ``tool_glob(arg="glob", ...)``.

    Raises:
        RuleSyntaxError: for a pattern that is empty, too long, has an
            unbalanced parenthesis, or arguments that are not ``name="glob"``.
        TypeError: for a pattern that is not text.
    """
    text: object = pattern
    if not isinstance(text, str):
        msg = (
            f"A {effect} rule must be text like 'send_email(to=\"*@example.com\")',"
            f" got {type(text).__name__}"
        )
        raise TypeError(msg)
    source = pattern.strip()
    if not source:
        msg = f"An empty {effect} rule: write a tool name glob such as 'search_*'"
        raise RuleSyntaxError(msg)
    if len(source) > _MAX_PATTERN:
        msg = f"A {effect} rule is {len(source)} characters long; the most is {_MAX_PATTERN}"
        raise RuleSyntaxError(msg)
    if "(" not in source:
        if ")" in source:
            msg = f"The {effect} rule {pattern!r} has ')' without '('"
            raise RuleSyntaxError(msg)
        return Rule(effect=effect, pattern=source, tool=source)
    tool, _, rest = source.partition("(")
    tool = tool.strip()
    if not tool:
        msg = f"The {effect} rule {pattern!r} has no tool name glob before '('"
        raise RuleSyntaxError(msg)
    if not rest.endswith(")"):
        msg = f"The {effect} rule {pattern!r} must end with ')'"
        raise RuleSyntaxError(msg)
    return Rule(
        effect=effect, pattern=source, tool=tool, args=_parse_args(rest[:-1], pattern, effect)
    )


def _parse_args(inner: str, pattern: str, effect: Effect) -> tuple[tuple[str, str], ...]:
    how = 'arguments must be written name="glob", separated by commas'
    if not inner.strip():
        return ()
    try:
        tree = ast.parse(f"_({inner})", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        msg = f"The {effect} rule {pattern!r} cannot be read: {how}"
        raise RuleSyntaxError(msg) from None
    call = tree.body
    if not isinstance(call, ast.Call) or call.args:
        msg = f"The {effect} rule {pattern!r} cannot be read: {how}"
        raise RuleSyntaxError(msg)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for keyword in call.keywords:
        value = keyword.value
        if (
            keyword.arg is None
            or not isinstance(value, ast.Constant)
            or not isinstance(value.value, str)
        ):
            msg = f"The {effect} rule {pattern!r} cannot be read: {how}"
            raise RuleSyntaxError(msg)
        if keyword.arg in seen:
            msg = f"The {effect} rule {pattern!r} names the argument {keyword.arg!r} twice"
            raise RuleSyntaxError(msg)
        seen.add(keyword.arg)
        pairs.append((keyword.arg, value.value))
    return tuple(pairs)


class Rules:
    """Allow, ask or deny tool calls by name and argument patterns.

    ::

        rules = toolguard.Rules(
            allow=['send_email(to="*@example.com")'],  # our own domain: no review
            ask=["search_contacts"],                   # a read that exposes people
            deny=["delete_*", 'run_shell(command="rm *")'],
        )
        tools = toolguard.guard([send_email, search_contacts, delete_file], rules=rules)

    A call matching a ``deny`` rule never runs and nobody is asked: the model
    reads an error result naming the rule. ``ask`` requires a review even for
    a tool the classifier lets through; ``allow`` lets a matching call run at
    once. When no rule matches, the tool's own policy decides. Precedence:
    deny > ask > allow > the tool's policy.

    Args:
        allow: patterns of calls that run without a review.
        ask: patterns of calls that always need a review.
        deny: patterns of calls that are refused.

    Raises:
        RuleSyntaxError: a pattern cannot be read (the text says which).
        TypeError: a list is not a list of strings.
    """

    __slots__ = ("_rules",)

    def __init__(
        self,
        *,
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        deny: Iterable[str] = (),
    ) -> None:
        given = {"allow": allow, "ask": ask, "deny": deny}
        rules: list[Rule] = []
        for effect in _EFFECTS:
            patterns: object = given[effect]
            if isinstance(patterns, (str, bytes)) or not isinstance(patterns, Iterable):
                msg = f"{effect}= takes a list of patterns, got {type(patterns).__name__}"
                raise TypeError(msg)
            rules.extend(parse_rule(p, effect) for p in patterns)
        self._rules: tuple[Rule, ...] = tuple(rules)

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule, deny first, then ask, then allow (the order they are tried in)."""
        return self._rules

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __repr__(self) -> str:
        parts = []
        for effect in ("allow", "ask", "deny"):
            patterns = [r.pattern for r in self._rules if r.effect == effect]
            if patterns:
                parts.append(f"{effect}={patterns!r}")
        return f"Rules({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rules) and self._rules == other._rules

    def __hash__(self) -> int:
        return hash(self._rules)

    def decide(self, name: str, args: Mapping[str, Any]) -> RuleDecision:
        """The first matching rule in precedence order, or a decision with ``effect=None``."""
        for rule in self._rules:
            if rule.matches(name, args):
                return RuleDecision(
                    effect=rule.effect,
                    rule=rule,
                    reason=f"matched the {rule.effect} rule {rule.pattern!r}",
                )
        return RuleDecision(effect=None, rule=None, reason="no rule matched")

    def explain(self, name: str, args: Mapping[str, Any] | None = None) -> RuleDecision:
        """Which rule decides a call of ``name`` with ``args``, and why (see :meth:`decide`)."""
        return self.decide(name, args or {})

    @classmethod
    def from_toml(cls, source: str | Path) -> Rules:
        """Read rules from a TOML file (a path) or TOML text.

        The file has a ``[rules]`` table (or the keys at the top level) with
        ``allow``, ``ask`` and ``deny`` lists of patterns::

            [rules]
            allow = ['send_email(to="*@example.com")']
            ask = ["search_contacts"]
            deny = ["delete_*"]

        A ``[reviewers]`` table in the same file (who may decide which tool) is
        read by :meth:`toolguard.http.Reviewers.from_toml`, not here.

        Raises:
            RuleSyntaxError: invalid TOML, unknown keys, or a bad pattern.
            OSError: the file cannot be read.
        """
        text: object = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
        if not isinstance(text, str):
            msg = f"from_toml takes a Path or TOML text, got {type(source).__name__}"
            raise TypeError(msg)
        data = load_toml(text)
        table = data.get("rules", {k: v for k, v in data.items() if k not in _OTHER_TABLES})
        if not isinstance(table, dict):
            msg = "The [rules] entry of the TOML must be a table with allow, ask and deny lists"
            raise RuleSyntaxError(msg)
        unknown = sorted(set(table) - {"allow", "ask", "deny"})
        if unknown:
            msg = f"Unknown keys in the rules TOML: {unknown}. Use allow, ask and deny."
            raise RuleSyntaxError(msg)
        lists: dict[str, list[str]] = {}
        for effect in ("allow", "ask", "deny"):
            value = table.get(effect, [])
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                msg = f"'{effect}' in the rules TOML must be a list of strings"
                raise RuleSyntaxError(msg)
            lists[effect] = value
        return cls(allow=lists["allow"], ask=lists["ask"], deny=lists["deny"])


_OTHER_TABLES = ("reviewers", "slack", "email")
"""The tables of a rules file read elsewhere: who decides, Slack users, email addresses."""


def load_toml(text: str) -> dict[str, Any]:
    # tomllib is in the standard library from Python 3.11; 3.10 needs the tomli package.
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    try:
        toml: Any = importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - Python 3.10 without tomli
        msg = "Reading TOML rules on Python 3.10 needs the tomli package: pip install tomli"
        raise ImportError(msg) from exc
    try:
        data: dict[str, Any] = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        msg = f"The rules TOML cannot be read: {exc}"
        raise RuleSyntaxError(msg) from None
    return data


def denied_text(name: str, rule: Rule) -> str:
    """What the model reads for a call refused by a deny rule."""
    return f"The call to `{name}` is denied by the rule `{rule}`. It was not executed."


def rule_for(
    rules: Rules | None,
    name: str,
    sent: Mapping[str, Any],
    validated: Mapping[str, Any] | None = None,
) -> Rule | None:
    """The rule that decides a call of ``name``, or ``None``: the one place rules are evaluated.

    ``sent`` are the arguments as the model (or an editor) sent them,
    ``validated`` the same arguments after the tool's schema (``None``: not
    validated yet). A ``deny`` rule matching either wins, then an ``ask``
    rule matching either; an ``allow`` rule counts only when it matches the
    validated arguments (the ones that run), or the sent ones before
    validation. Every path asks this function, so a rule means the same
    wherever a call comes from.
    """
    if not rules:
        return None
    first = rules.decide(name, sent).rule
    if validated is None:
        return first
    try:
        shaped = to_json_data(dict(validated))
    except (ValueError, TypeError, RecursionError):
        shaped = sent
    second = first if shaped == sent else rules.decide(name, shaped).rule
    for effect in ("deny", "ask"):
        for rule in (first, second):
            if rule is not None and rule.effect == effect:
                return rule
    return second
