"""A schema tool's check has a work budget: a hostile schema is refused at once, never minutes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from toolguard import Tool
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.schema_tool import MAX_SCHEMA_WORK, schema_work


def nested_any_of(levels: int) -> dict[str, Any]:
    """``levels`` of anyOf, two references to the level below (linear size, exponential work)."""
    defs: dict[str, Any] = {"L0": {"type": "string"}}
    for level in range(1, levels + 1):
        below = {"$ref": f"#/$defs/L{level - 1}"}
        defs[f"L{level}"] = {"anyOf": [below, dict(below)]}
    return {
        "type": "object",
        "properties": {"x": {"$ref": f"#/$defs/L{levels}"}},
        "required": ["x"],
        "$defs": defs,
    }


def test_the_work_of_a_schema_is_counted_through_its_references() -> None:
    assert schema_work({"type": "object", "properties": {"a": {"type": "string"}}}) == 2
    assert schema_work(nested_any_of(3)) == 31
    assert schema_work(nested_any_of(10)) == 4095
    assert schema_work(nested_any_of(26)) > MAX_SCHEMA_WORK  # stops counting past the budget
    recursive = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/N"}},
        "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
    }
    assert schema_work(recursive) == 4  # a recursive reference counts once


def test_a_schema_past_the_budget_refuses_every_call_at_once() -> None:
    ran: list[Any] = []
    tool = Tool.from_schema("deep", "A hostile tool.", nested_any_of(26), ran.append)
    started = time.monotonic()
    with pytest.raises(ToolArgumentsError) as caught:
        tool.validate_args({"x": 1})
    assert time.monotonic() - started < 5  # a generous bound: the unbudgeted check takes minutes
    assert str(caught.value) == (
        "Invalid arguments for tool `deep`: its parameters' schema is too complex to check (one"
        " check would visit more than 100,000 subschemas), so no call of it runs"
    )
    with pytest.raises(ToolArgumentsError):
        tool.validate_args({"x": "fits"})  # fails closed even for a value that would fit
    assert ran == []


def test_a_schema_within_the_budget_checks_as_before() -> None:
    tool = Tool.from_schema("shallow", "Fine.", nested_any_of(10), lambda **kw: kw)
    assert tool.validate_args({"x": "fits"}) == {"x": "fits"}
    with pytest.raises(ToolArgumentsError):
        tool.validate_args({"x": 1})
