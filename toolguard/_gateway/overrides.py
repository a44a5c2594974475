"""The operator's word on single tools: ``mcp-proxy --ask TOOL`` and ``--allow TOOL``.

An MCP server's annotations are its own claims: a tool that reads secrets may
be marked ``readOnlyHint: true`` and would run at once. ``--ask TOOL`` makes
every call to TOOL wait for a person, ``--allow TOOL`` forwards it without
review. Both become :class:`~toolguard.Rules` (``ask`` and ``allow`` rules on
the exact tool name) merged with the ``--rules`` file's, so the enforcement
core applies them like any rule, with the same precedence: deny > ask > allow.
The most restrictive word wins: a deny or ask rule of the file still refuses
or asks for a tool given to ``--allow``, and a tool given to both ``--ask``
and ``--allow`` is asked.

The classification (``GET /hitl/tools``, :meth:`~toolguard.Toolset.explain`)
says the operator decided, instead of repeating the server's hints.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolguard._core.errors import RuleSyntaxError
from toolguard._gateway.starting import StartUpError
from toolguard._policy.rules import Rules
from toolguard._tools.classify import Classification, Classifier

__all__ = ["OperatorClassifier", "allow_reason", "ask_reason", "operator_policy"]

_SHOWN_NAMES = 20


def ask_reason(name: str) -> str:
    """The classification reason of a tool given to ``--ask``."""
    return f"--ask {name}: a person decides every call, whatever the server's annotations say"


def allow_reason(name: str) -> str:
    """The classification reason of a tool given to ``--allow``."""
    return (
        f"--allow {name}: runs without review, whatever the server's annotations say"
        " (a deny or ask rule of --rules still applies)"
    )


class OperatorClassifier(Classifier):
    """The default classifier, except for the tools the operator named (``--ask``, ``--allow``).

    A tool in ``ask`` needs approval (rule ``always``), a tool only in
    ``allow`` does not (rule ``never``), each with a reason naming the option.
    """

    def __init__(self, *, ask: Iterable[str] = (), allow: Iterable[str] = ()) -> None:
        asked = frozenset(ask)
        allowed = frozenset(allow) - asked
        super().__init__(always=asked, never=allowed)
        self.asked = asked
        self.allowed = allowed

    def explain(self, name: str, *, annotations: Mapping[str, Any] | None = None) -> Classification:
        if name in self.asked:
            return Classification(
                name=name,
                needs_approval=True,
                rule="always",
                matched_word=None,
                matched_verb=None,
                reason=ask_reason(name),
            )
        if name in self.allowed:
            return Classification(
                name=name,
                needs_approval=False,
                rule="never",
                matched_word=None,
                matched_verb=None,
                reason=allow_reason(name),
            )
        return super().explain(name, annotations=annotations)


def _exact(name: str) -> str:
    """A rule pattern matching exactly the tool ``name`` (glob characters taken literally)."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)


def _unknown_name(option: str, name: str, listed: Sequence[str]) -> str:
    """The one-line error for ``--ask``/``--allow`` naming a tool the upstream does not list."""
    close = difflib.get_close_matches(name, listed, n=3, cutoff=0.6)
    guess = f"; did you mean {' or '.join(close)}?" if close else ""
    shown = ", ".join(listed[:_SHOWN_NAMES]) or "no tools"
    more = f" and {len(listed) - _SHOWN_NAMES} more" if len(listed) > _SHOWN_NAMES else ""
    return (
        f"{option} {name}: the upstream MCP server lists no tool of that name{guess}"
        f" (it lists {shown}{more})"
    )


def operator_policy(
    listed: Sequence[Mapping[str, Any]],
    rules: Rules | None,
    *,
    ask: Sequence[str] = (),
    allow: Sequence[str] = (),
) -> tuple[Rules | None, Classifier | None]:
    """The rules and classifier of the gateway with the operator's ``--ask`` and ``--allow``.

    ``listed``: the upstream's tools (``tools/list`` items); ``rules``: the
    ``--rules`` file's. Without ``ask`` and ``allow``, ``(rules, None)``.

    Raises:
        StartUpError: a name the upstream does not list (the text is the error
            line, naming close matches and the listed tools).
    """
    if not ask and not allow:
        return rules, None
    names = [str(item.get("name")) for item in listed]
    for option, given in (("--ask", ask), ("--allow", allow)):
        for name in given:
            if name not in names:
                raise StartUpError(_unknown_name(option, name, names))
            if "(" in name or ")" in name:
                msg = f"{option} {name}: a tool name with a parenthesis cannot be given to {option}"
                raise StartUpError(msg)
    base = rules.rules if rules is not None else ()
    try:
        merged = Rules(
            deny=[rule.pattern for rule in base if rule.effect == "deny"],
            ask=[*(rule.pattern for rule in base if rule.effect == "ask"), *map(_exact, ask)],
            allow=[*(rule.pattern for rule in base if rule.effect == "allow"), *map(_exact, allow)],
        )
    except RuleSyntaxError as exc:  # a listed name the rule syntax cannot hold
        raise StartUpError(str(exc)) from None
    return merged, OperatorClassifier(ask=ask, allow=allow)
