"""A registry of tools, auto-classified: the ones that need approval are guarded."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Union, cast

from toolguard._core.checks import kind
from toolguard._policy.rules import Rules
from toolguard._tools.approval import ApprovalPolicy
from toolguard._tools.classify import Classification, Classifier, format_table
from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.tool import Tool, as_tool

ToolLike = Callable[..., Any] | Tool[Any, Any]
Tools = Union["Toolset", Mapping[str, ToolLike], Iterable[ToolLike]]


class Toolset(Mapping[str, Tool[Any, Any]]):
    """Tools by name, each one guarded when it needs a human's approval.

    Build it with :func:`guard`. It is a read-only mapping from tool name to
    :class:`~toolguard.Tool`; every tool keeps its name, description and
    schema, and the ones that need approval raise
    :class:`~toolguard.ApprovalRequiredError` when called directly.
    """

    __slots__ = ("_classifications", "_tools", "rules")

    def __init__(
        self, tools: Tools, *, classifier: Classifier | None = None, rules: Rules | None = None
    ) -> None:
        given_rules: object = rules  # checked at run time for untyped callers
        if given_rules is not None and not isinstance(given_rules, Rules):
            msg = f"rules must be a toolguard.Rules or None, got {kind(given_rules)}"
            raise TypeError(msg)
        self.rules: Rules | None = rules
        """Allow/ask/deny rules applied before each tool's own policy (``None``: none)."""
        if isinstance(tools, Toolset) and classifier is None:
            if rules is None:
                self.rules = tools.rules
            self._tools: dict[str, Tool[Any, Any]] = {
                name: tool._with_rules(self.rules) for name, tool in tools._tools.items()
            }
            self._classifications: dict[str, Classification] = dict(tools._classifications)
            return
        given_classifier: object = classifier  # checked at run time for untyped callers
        if given_classifier is not None and not isinstance(given_classifier, Classifier):
            msg = f"classifier must be a toolguard.Classifier or None, got {kind(given_classifier)}"
            raise TypeError(msg)
        classifier = classifier or Classifier()
        items: Iterable[tuple[str | None, ToolLike]]
        if isinstance(tools, Mapping):
            items = tools.items()
        elif isinstance(given := cast("object", tools), (str, bytes)) or not isinstance(
            given, Iterable
        ):
            msg = f"guard() takes a list or a mapping of tools, got {type(given).__name__}"
            raise TypeError(msg)
        else:
            items = ((None, t) for t in tools)
        self._tools = {}
        self._classifications = {}
        for key, obj in items:
            tool = as_tool(obj, name=key)
            if tool.name in self._tools:
                msg = f"Two tools are named {tool.name!r}: tool names must be unique."
                raise ValueError(msg)
            if tool.approval is not None:
                classification = Classification(
                    name=tool.name,
                    needs_approval=True,
                    rule="decorator",
                    matched_word=None,
                    matched_verb=None,
                    reason=(
                        "guarded with @requires_approval(when=...): depends on the arguments"
                        if tool.approval.when is not None
                        else "guarded with @requires_approval"
                    ),
                )
            else:
                # A tool from an MCP server carries the server's annotations.
                annotations = tool.annotations if isinstance(tool, SchemaTool) else None
                classification = classifier.explain(tool.name, annotations=annotations)
                if classification.needs_approval:
                    tool = as_tool(tool, approval=ApprovalPolicy())
            # A direct call of a tool taken from this toolset follows its rules too.
            self._tools[tool.name] = tool._with_rules(rules)
            self._classifications[tool.name] = classification

    def __getitem__(self, name: str) -> Tool[Any, Any]:
        return self._tools[name]

    def get(self, name: str, default: Any = None) -> Any:
        """The tool called ``name``, or ``default``."""
        return self._tools.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        guarded = [n for n, t in self._tools.items() if t.guarded]
        return f"<Toolset {len(self)} tools, guarded: {guarded}>"

    def explain(self, name: str) -> Classification:
        """Why the tool ``name`` needs approval or not."""
        return self._classifications[name]

    @property
    def classifications(self) -> list[Classification]:
        """The classification of every tool, in registry order."""
        return list(self._classifications.values())

    @property
    def guarded(self) -> list[str]:
        """Names of the tools whose calls may need approval."""
        return [name for name, t in self._tools.items() if t.guarded]

    def table(self) -> str:
        """The classification as a plain-text table with reasons."""
        return format_table(self.classifications)

    def openai_tools(self) -> list[dict[str, Any]]:
        """Every tool as an OpenAI Chat Completions function tool, in order."""
        return [t.openai_schema for t in self._tools.values()]


def guard(
    tools: Tools, classifier: Classifier | None = None, *, rules: Rules | None = None
) -> Toolset:
    """Classify a whole registry and guard the tools that need approval.

    Args:
        tools: a list of functions and tools, or a mapping from the name the
            model should see to a function or tool. Functions already
            decorated with :func:`requires_approval` stay guarded with their
            own policy, whatever the classifier says.
        classifier: the rules; defaults to ``Classifier()`` (see :class:`~toolguard.Classifier`).
        rules: argument rules (:class:`~toolguard.Rules`) applied to every
            call the runner sees, before the tool's own policy: ``deny``
            refuses without asking anyone, ``ask`` requires a review, ``allow``
            runs at once. Precedence: deny > ask > allow > the tool's policy.

    Returns:
        A :class:`Toolset`; ``print(toolset.table())`` shows why each tool
        was classified the way it was.
    """
    return Toolset(tools, classifier=classifier, rules=rules)
