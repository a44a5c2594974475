"""What the framework integrations share: they take tools, and refuse what carries a judge.

A judge belongs to a :class:`~toolguard.Runner` or a :class:`~toolguard.ReviewedChat`.
A framework runs its own turn, so a Runner, a ReviewedChat or a Judge handed to an
integration is refused with an UnsupportedPolicyError (a ToolguardError and a TypeError)
that names the judge: never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import toolguard
from toolguard import (
    Judge,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolguardError,
    UnsupportedPolicyError,
)

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langchain")

from toolguard.integrations import langchain, openai_agents, pydantic_ai

ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "pydantic_ai.toolset": pydantic_ai.toolset,
    "openai_agents.function_tools": openai_agents.function_tools,
    "langchain.tools": langchain.tools,
    "langchain.middleware": langchain.middleware,
}


@toolguard.requires_approval
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def judge() -> Judge:
    return Judge(ScriptedModel(['{"risk": "low"}']), auto_approve=True)


CARRIERS: dict[str, Callable[[], object]] = {
    "Runner": lambda: Runner([send_email], judge=judge()),
    "ReviewedChat": lambda: ReviewedChat(ScriptedModel(["hi"]), [send_email], judge=judge()),
    "Judge": judge,
}


@pytest.mark.parametrize("carrier", CARRIERS)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_judge_is_refused_never_dropped(entry: str, carrier: str) -> None:
    """Each integration refuses a Runner, a ReviewedChat or a Judge, naming the judge option."""
    given = CARRIERS[carrier]()
    with pytest.raises(UnsupportedPolicyError) as info:
        ENTRY_POINTS[entry](given)
    assert isinstance(info.value, ToolguardError)
    assert isinstance(info.value, TypeError)  # existing `except TypeError` clauses still catch it
    assert str(info.value) == (
        f"toolguard's framework integrations take tools, not a {carrier}: the framework runs"
        " the turn, so a judge (judge=) and the other settings of a Runner or ReviewedChat"
        " would not apply. Pass the tools (a list, a mapping or a Toolset); for a judge, run"
        " them with toolguard.Runner or toolguard.ReviewedChat."
    )
