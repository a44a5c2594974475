"""Tool.from_schema: a tool whose parameters are a given JSON Schema, guarded like any other."""

from __future__ import annotations

from typing import Any

import pytest

from toolguard import (
    SEED_VERBS,
    ApprovalRequiredError,
    Classifier,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    Tool,
    ToolCall,
    ToolResult,
    allow_once,
    guard,
    requires_approval,
    validate_decisions,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Recipient address."},
        "priority": {"type": "string", "enum": ["low", "high"], "description": "How urgent."},
        "amount": {"type": "number", "minimum": 0},
        "attachment": {"$ref": "#/$defs/File"},
    },
    "required": ["to"],
    "additionalProperties": False,
    "$defs": {
        "File": {
            "type": "object",
            "description": "A file to attach.",
            "properties": {"path": {"type": "string"}, "size": {"type": "integer"}},
            "required": ["path"],
        }
    },
}


class Recorder:
    """A tool body (sync or async) that records every real execution."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def sync(self, **args: Any) -> dict[str, Any]:
        self.calls.append(args)
        return {"sent": args}

    async def async_(self, **args: Any) -> str:
        self.calls.append(args)
        return f"sent to {args['to']}"


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def test_the_schema_is_kept_exactly(rec: Recorder) -> None:
    tool = Tool.from_schema("send_message", "Send a message.", SCHEMA, rec.sync)
    assert tool.parameters == SCHEMA
    assert tool.parameters is not SCHEMA  # a copy: later edits of the caller's dict do not leak
    assert tool.openai_schema == {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Send a message.",
            "parameters": SCHEMA,
        },
    }
    assert (tool.name, tool.description, tool.guarded, tool.is_async) == (
        "send_message",
        "Send a message.",
        False,
        False,
    )
    assert repr(tool) == "<Tool 'send_message' (JSON Schema)>"
    assert isinstance(tool, Tool)


def test_valid_arguments_come_back_unchanged(rec: Recorder) -> None:
    tool = Tool.from_schema("send_message", "Send.", SCHEMA, rec.sync)
    args = {"to": "a@example.com", "priority": "high", "attachment": {"path": "/r.pdf"}}
    assert tool.validate_args(args) == args


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            {"to": 5},
            "Invalid arguments for tool `send_message`: 'to': 5 is not of type 'string'",
        ),
        ({}, "Invalid arguments for tool `send_message`: 'to': Field required"),
        (
            {"to": "a", "priority": "urgent", "amount": -1},
            (
                "Invalid arguments for tool `send_message`: 'amount': -1 is less than the minimum"
                " of 0; 'priority': 'urgent' is not one of ['low', 'high']"
            ),
        ),
        (
            {"to": "a", "attachment": {"size": "big"}},
            (
                "Invalid arguments for tool `send_message`: 'attachment.path': Field required;"
                " 'attachment.size': 'big' is not of type 'integer'"
            ),
        ),
        (
            {"to": "a", "cc": "b"},
            (
                "Invalid arguments for tool `send_message`: '(arguments)': Additional properties"
                " are not allowed ('cc' was unexpected)"
            ),
        ),
    ],
)
def test_errors_name_the_offending_field(rec: Recorder, args: dict[str, Any], error: str) -> None:
    tool = Tool.from_schema("send_message", "Send.", SCHEMA, rec.sync)
    step = Runner([tool]).run_sync([ToolCall(id="c1", name="send_message", args=args)])
    assert step.results == [
        ToolResult(
            call_id="c1",
            name="send_message",
            status="error",
            content=error,
            outcome="invalid_arguments",
        )
    ]
    assert step.pending is None
    assert rec.calls == []


def test_long_inputs_are_cut_in_the_error_and_problems_are_capped(rec: Recorder) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(25)}}
    tool = Tool.from_schema("many", "Many.", schema, rec.sync)
    with pytest.raises(ValueError, match=r"and 5 more$") as info:
        tool.validate_args({f"p{i}": "x" for i in range(25)})
    assert str(info.value).count("is not of type 'integer'") == 20
    long_tool = Tool.from_schema(
        "one", "One.", {"type": "object", "properties": {"a": {"type": "integer"}}}, rec.sync
    )
    with pytest.raises(ValueError, match=r"…$") as cut:
        long_tool.validate_args({"a": "y" * 10_000})
    assert len(str(cut.value)) < 400


def test_an_unresolvable_ref_fails_closed(rec: Recorder) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}}
    tool = Tool.from_schema("lookup", "Look up.", schema, rec.sync)
    step = Runner([tool]).run_sync([ToolCall(id="c1", name="lookup", args={"a": 1})])
    assert [(r.status, r.content) for r in step.results] == [
        (
            "error",
            (
                "Invalid arguments for tool `lookup`: the schema cannot check them"
                " (Unresolvable: https://example.com/x.json)"
            ),
        )
    ]
    assert rec.calls == []


@pytest.mark.parametrize("use_async", [False, True])
def test_runs_through_the_runner_sync_and_async(rec: Recorder, use_async: bool) -> None:
    func = rec.async_ if use_async else rec.sync
    tool = Tool.from_schema("notify", "Notify.", SCHEMA, func)
    assert tool.is_async is use_async
    step = Runner([tool], classifier=Classifier(verbs=SEED_VERBS)).run_sync(
        [ToolCall(id="c1", name="notify", args={"to": "bob"})]
    )
    content = "sent to bob" if use_async else '{"sent": {"to": "bob"}}'
    assert [(r.status, r.content) for r in step.results] == [("success", content)]
    assert rec.calls == [{"to": "bob"}]


def test_guard_classifies_it_and_approve_runs_it_once(rec: Recorder) -> None:
    tool = Tool.from_schema("send_message", "Send.", SCHEMA, rec.sync)
    toolset = guard([tool])
    assert toolset.guarded == ["send_message"]
    assert toolset.explain("send_message").reason == (
        "the word 'send' is an approval verb (messaging and publishing)"
    )
    runner = Runner(toolset)
    step = runner.run_sync([ToolCall(id="c1", name="send_message", args={"to": "x"})])
    assert step.pending_review is not None
    assert step.pending_review.model_dump() == {
        "action_requests": [
            {
                "name": "send_message",
                "args": {"to": "x"},
                "description": "Tool `send_message` is awaiting approval",
            }
        ],
        "review_configs": [
            {"action_name": "send_message", "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }
    assert rec.calls == []
    assert step.pending is not None
    done = runner.resume_sync(step.pending, validate_decisions(step.pending, [{"type": "approve"}]))
    assert [r.content for r in done.results] == ['{"sent": {"to": "x"}}']
    assert rec.calls == [{"to": "x"}]


def test_an_edit_with_bad_arguments_does_not_run(rec: Recorder) -> None:
    runner = Runner([Tool.from_schema("send_message", "Send.", SCHEMA, rec.sync)])
    step = runner.run_sync([ToolCall(id="c1", name="send_message", args={"to": "x"})])
    assert step.pending is not None
    edit = {"type": "edit", "edited_action": {"name": "send_message", "args": {"to": []}}}
    done = runner.resume_sync(step.pending, [edit])
    assert [(r.status, r.content) for r in done.results] == [
        ("error", "Invalid arguments for tool `send_message`: 'to': [] is not of type 'string'")
    ]
    assert rec.calls == []


def test_requires_approval_when_gets_the_arguments_dict(rec: Recorder) -> None:
    seen: list[dict[str, Any]] = []

    def big(args: dict[str, Any]) -> bool:
        seen.append(args)
        return bool(args.get("amount", 0) > 100)

    tool = requires_approval(when=big, description="Check the amount")(
        Tool.from_schema("pay", "Pay.", SCHEMA, rec.sync)
    )
    assert isinstance(tool, Tool)
    assert tool.parameters == SCHEMA
    runner = Runner([tool])
    small = runner.run_sync([ToolCall(id="c1", name="pay", args={"to": "a", "amount": 5})])
    assert (small.pending, [r.status for r in small.results]) == (None, ["success"])
    large = runner.run_sync([ToolCall(id="c2", name="pay", args={"to": "a", "amount": 500})])
    assert large.pending_review is not None
    assert large.pending_review.action_requests[0].description == "Check the amount"
    assert seen == [{"to": "a", "amount": 5}, {"to": "a", "amount": 500}]
    assert rec.calls == [{"to": "a", "amount": 5}]
    assert guard([tool]).explain("pay").rule == "decorator"


def test_a_direct_call_is_guarded_too(rec: Recorder) -> None:
    tool = requires_approval(Tool.from_schema("remove_file", "Remove.", SCHEMA, rec.sync))
    with pytest.raises(ApprovalRequiredError) as info:
        tool(to="x")
    assert info.value.pending_review.action_requests[0].args == {"to": "x"}
    with allow_once("remove_file", {"to": "x"}):
        assert tool(to="x") == {"sent": {"to": "x"}}
    assert rec.calls == [{"to": "x"}]
    with pytest.raises(TypeError, match="takes its arguments by name only"):
        tool("x")
    unguarded = Tool.from_schema("read", "Read.", SCHEMA, rec.sync)
    assert unguarded(to="y") == {"sent": {"to": "y"}}


def test_renaming_keeps_the_schema(rec: Recorder) -> None:
    toolset = guard({"mail": Tool.from_schema("send_message", "Send.", SCHEMA, rec.sync)})
    assert list(toolset) == ["mail"]
    assert toolset["mail"].parameters == SCHEMA
    assert toolset.explain("mail").rule == "verb"  # the name the model sees is classified
    assert guard(
        [Tool.from_schema("x", "X.", SCHEMA, rec.sync)], Classifier(always=["x"])
    ).guarded == ["x"]


async def test_reviewed_chat_accepts_it(rec: Recorder) -> None:
    tool = Tool.from_schema("send_message", "Send.", SCHEMA, rec.async_)
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ToolCall(id="c1", name="send_message", args={"to": "ann"})]),
            "Done.",
        ]
    )
    chat = ReviewedChat(model, [tool])
    turn = await chat.send_message("mail ann")
    assert turn.pending_review is not None
    assert rec.calls == []
    done = await chat.submit_review([{"type": "approve"}], turn.thread_id)
    assert (done.reply, rec.calls) == ("Done.", [{"to": "ann"}])


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"name": ""}, ValueError, "Tool.from_schema: name must be a non-empty string, got ''"),
        ({"name": 3}, TypeError, "Tool.from_schema: name must be a non-empty string, got 3"),
        (
            {"description": None},
            TypeError,
            "Tool.from_schema: description of 't' must be a string, got NoneType",
        ),
        (
            {"parameters": [1]},
            TypeError,
            (
                "Tool.from_schema: parameters of 't' must be a JSON Schema dict"
                ' ({"type": "object", ...}), got list'
            ),
        ),
        (
            {"parameters": {"type": "string"}},
            ValueError,
            (
                'Tool.from_schema: parameters of \'t\' must be a JSON Schema with "type": "object"'
                " (a model passes named arguments), got type 'string'"
            ),
        ),
        (
            {"parameters": {"type": "object", "properties": {"a": {"type": 5}}}},
            ValueError,
            (
                "Tool.from_schema: parameters of 't' is not a valid JSON Schema:"
                " 5 is not valid under any of the given schemas"
            ),
        ),
        (
            {"func": "nope"},
            TypeError,
            (
                "Tool.from_schema: func of 't' must be a function taking the arguments as keyword"
                " arguments, got str"
            ),
        ),
    ],
)
def test_bad_inputs_get_clear_errors(kwargs: dict[str, Any], error: type, text: str) -> None:
    def body(**args: Any) -> None:
        return None

    given: dict[str, Any] = {
        "name": "t",
        "description": "T.",
        "parameters": {"type": "object"},
        "func": body,
    }
    given.update(kwargs)
    with pytest.raises(error) as info:
        Tool.from_schema(**given)
    assert str(info.value) == text


def test_a_generator_is_refused() -> None:
    def many(**args: Any) -> Any:
        yield 1

    with pytest.raises(TypeError) as info:
        Tool.from_schema("many", "M.", {"type": "object"}, many)
    assert str(info.value) == (
        "Tool.from_schema: func of 'many' is a generator: a tool must return its whole result."
        " Collect the items into a list and return it."
    )
