"""Every exported error sits under ToolguardError, as the tree in the docs draws it."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import toolguard
from toolguard._core import errors as _errors

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^(?P<indent>(?:[│ ]   )*)(?:[├└]── )?(?P<name>\w+)\s*(?P<doc>.*)$")


def drawn_tree(text: str) -> dict[str, str | None]:
    """Each error of a drawn tree -> its parent in the drawing (None for the root)."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in text.strip().splitlines():
        row = _ROW.match(line)
        assert row is not None, line
        depth = len(row["indent"]) // 4 + (0 if line.startswith("ToolguardError") else 1)
        del stack[depth:]
        parents[row["name"]] = stack[-1] if stack else None
        stack.append(row["name"])
    return parents


def _docstring_tree() -> str:
    doc = _errors.__doc__ or ""
    body = doc[doc.index("    ToolguardError") : doc.index("\nAll errors pickle")]
    return "\n".join(line[4:] for line in body.rstrip().splitlines())


def test_every_exported_error_is_a_toolguard_error() -> None:
    exported = [
        value
        for name in toolguard.__all__
        if isinstance(value := getattr(toolguard, name), type) and issubclass(value, Exception)
    ]
    assert exported
    assert [e.__name__ for e in exported if not issubclass(e, toolguard.ToolguardError)] == []
    assert {e.__module__ for e in exported} == {"toolguard._core.errors"}


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    parents = drawn_tree(_docstring_tree())
    for name, parent in parents.items():
        cls = getattr(toolguard, name)
        assert cls.__bases__[0].__name__ == (parent or "Exception"), name
    exported = {
        name
        for name in toolguard.__all__
        if isinstance(value := getattr(toolguard, name), type)
        and issubclass(value, toolguard.ToolguardError)
    }
    assert set(parents) == exported


def test_the_docs_show_the_same_tree() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert f"```text\n{_docstring_tree()}\n```" in text


def test_the_moved_errors_keep_their_behaviour() -> None:
    assert issubclass(toolguard.RuleSyntaxError, ValueError)
    assert issubclass(toolguard.ConcurrentUpdateError, RuntimeError)
    error = toolguard.CorruptThreadError("t1", "bad JSON")
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert (type(copy), str(copy), copy.thread_id) == (type(error), str(error), "t1")
    with pytest.raises(toolguard.ToolguardError) as info:
        toolguard.Rules(deny=["("])
    assert type(info.value) is toolguard.RuleSyntaxError
