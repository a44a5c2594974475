"""Hostile arguments and hostile MCP listings against tools built from a JSON Schema.

Threat model: a model (or an MCP server) sends arguments nested 1,000 levels
deep, with thousands of keys, NaN/Infinity, lone surrogates or bidi controls,
to a tool whose parameters are a JSON Schema; or an MCP server lists tools with
odd names and hint values that only look true. Whatever comes, the call either
validates or gets a bounded ``Invalid arguments ...`` error, the body never
runs with arguments that break the schema, and no hint but the JSON value
``true`` exempts a tool from review.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial import strategies as hs
from toolguard import SEED_VERBS, Classifier, Runner, Tool, ToolCall

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 50},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
    },
    "required": ["name"],
    "additionalProperties": False,
    "$defs": {"Tag": {"type": "object", "properties": {"label": {"type": "string"}}}},
}

RAN: list[dict[str, Any]] = []


def _body(**args: Any) -> str:
    RAN.append(args)
    return "ok"


TOOL = Tool.from_schema("label_item", "Label an item.", SCHEMA, _body)
RUNNER = Runner([TOOL], classifier=Classifier(verbs=SEED_VERBS))  # label_item runs at once


@settings(max_examples=60, deadline=None)
@given(
    value=st.one_of(hs.hostile_json, hs.deep_json, hs.wide_object),
    key=st.sampled_from(["name", "tags", "extra"]),
)
def test_hostile_arguments_validate_or_get_a_bounded_error(value: Any, key: str) -> None:
    RAN.clear()
    step = RUNNER.run_sync([ToolCall(id="c1", name="label_item", args={key: value})])
    [result] = step.results
    if result.status == "error":
        assert result.content.startswith("Invalid arguments for tool `label_item`: ")
        assert len(result.content) < 8_000
        assert RAN == []
    else:
        assert key == "name"
        assert [list(args) for args in RAN] == [["name"]]
        assert isinstance(RAN[0]["name"], str)


@settings(max_examples=40, deadline=None)
@given(
    read_only=st.one_of(hs.hostile_leaf, st.sampled_from(["true", 1, "yes", [True], {"v": True}])),
    name=st.sampled_from(["fetch_page", "sendPage", "page-delete"]),
)
def test_only_the_json_value_true_marks_a_tool_read_only(read_only: Any, name: str) -> None:
    result = Classifier().explain(name, annotations={"readOnlyHint": read_only})
    assert result.needs_approval


@settings(max_examples=40, deadline=None)
@given(name=hs.odd_names)
def test_odd_tool_names_are_kept_exactly_or_refused_clearly(name: str) -> None:
    if not name.strip():
        with pytest.raises(ValueError, match="non-empty string") as info:
            Tool.from_schema(name, "Odd.", {"type": "object"}, _body)
        assert str(info.value) == f"Tool.from_schema: name must be a non-empty string, got {name!r}"
        return
    tool = Tool.from_schema(name, "Odd.", {"type": "object"}, _body)
    assert (tool.name, tool.parameters) == (name, {"type": "object"})
