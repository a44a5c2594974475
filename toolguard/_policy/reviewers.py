"""Who may decide which tool: the ``[reviewers]`` table of a rules file (:class:`Reviewers`).

Keys are tool-name globs (:func:`fnmatch.fnmatchcase`: anchored, case-sensitive), values lists
of reviewer names. For a tool, the most specific key that matches decides alone: the tool's
exact name, else the matching glob with the most characters that are not wildcards (``*``,
``?``, ``[...]``), the first in file order on a tie. Lists are never merged, so ``"*" =
["admin"]`` names who decides the tools no other key matches, and a tool no key matches can be
decided by nobody. Names are compared exactly (case matters); an anonymous reviewer is never
on a list.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from toolguard._core.errors import RuleSyntaxError
from toolguard._core.records import Action
from toolguard._policy.rules import load_toml

__all__ = ["Reviewers"]

_WILDCARDS: Final = re.compile(r"\[[^\]]*\]|[*?]")


def _literal_length(glob: str) -> int:
    """How many characters of ``glob`` are not wildcards: its specificity."""
    return len(_WILDCARDS.sub("", glob))


class Reviewers:
    """Who may decide which tool, by tool-name glob: an ``authorize`` hook for ReviewedChat.

    ::

        reviewers = Reviewers({"send_email": ["alice", "bob"], "*": ["admin"]})
        chat = ReviewedChat(model, tools, authorize=reviewers)

    Called as the chat's hook (``reviewers(reviewer, thread, actions)``), it
    allows a reviewer who is on the list of every action's tool; any other
    reviewer is refused (403 over HTTP, audited as ``refused``, nothing
    changes). A quorum counts only allowed reviewers. See the module for which
    key decides a tool.

    Args:
        table: tool-name glob → reviewer names.

    Raises:
        RuleSyntaxError: a key or a list is not valid (the text says which).
    """

    __slots__ = ("_entries",)

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        given: object = table
        if not isinstance(given, Mapping):
            msg = "The [reviewers] table maps tool-name globs to lists of reviewer names"
            raise RuleSyntaxError(msg)
        entries: list[tuple[str, tuple[str, ...]]] = []
        for glob, names in table.items():
            key: object = glob
            if not isinstance(key, str) or not key.strip():
                msg = "A key of the [reviewers] table must be a tool-name glob such as 'send_*'"
                raise RuleSyntaxError(msg)
            value: object = names
            if (
                not isinstance(value, (list, tuple))
                or not value
                or not all(isinstance(n, str) and n.strip() for n in value)
            ):
                msg = (
                    f"[reviewers] {glob!r} must be a non-empty list of reviewer names,"
                    ' e.g. ["alice", "bob"]'
                )
                raise RuleSyntaxError(msg)
            entries.append((glob, tuple(value)))
        self._entries: tuple[tuple[str, tuple[str, ...]], ...] = tuple(entries)

    @classmethod
    def from_toml(cls, source: str | Path) -> Reviewers | None:
        """The ``[reviewers]`` table of a rules file (a ``Path``) or TOML text, or ``None``.

        Raises:
            RuleSyntaxError: invalid TOML, or an invalid table.
            OSError: the file cannot be read.
        """
        text: object = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
        if not isinstance(text, str):
            msg = f"from_toml takes a Path or TOML text, got {type(source).__name__}"
            raise TypeError(msg)
        table = load_toml(text).get("reviewers")
        if table is None:
            return None
        if not isinstance(table, dict):
            msg = "[reviewers] must be a table of tool-name globs to lists of reviewer names"
            raise RuleSyntaxError(msg)
        return cls(table)

    @property
    def table(self) -> dict[str, list[str]]:
        """The table: tool-name glob → reviewer names, in file order."""
        return {glob: list(names) for glob, names in self._entries}

    def __repr__(self) -> str:
        return f"Reviewers({self.table!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reviewers) and self._entries == other._entries

    def __hash__(self) -> int:
        return hash(self._entries)

    def key_for(self, tool: str) -> str | None:
        """The key that decides ``tool``: its exact name, else the most specific glob."""
        best: tuple[int, str] | None = None
        for glob, _ in self._entries:
            if glob == tool:
                return glob
            if fnmatch.fnmatchcase(tool, glob):
                length = _literal_length(glob)
                if best is None or length > best[0]:
                    best = (length, glob)
        return best[1] if best is not None else None

    def names_for(self, tool: str) -> tuple[str, ...]:
        """Who may decide ``tool`` (empty: nobody, no key matches it)."""
        key = self.key_for(tool)
        return dict(self._entries)[key] if key is not None else ()

    def allows(self, reviewer: str | None, tool: str) -> bool:
        """Whether ``reviewer`` may decide calls of ``tool``."""
        return reviewer is not None and reviewer in self.names_for(tool)

    def __call__(self, reviewer: str | None, thread: object, actions: list[Action]) -> bool:
        """The ``authorize`` hook: ``reviewer`` may decide every action's tool."""
        return all(self.allows(reviewer, action.name) for action in actions)
