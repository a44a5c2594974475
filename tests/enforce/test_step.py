"""Step.openai_messages / Step.tool_messages: a finished turn in OpenAI Chat Completions format."""

from __future__ import annotations

from typing import Any

from toolguard import Runner, ToolCall, requires_approval


def make_runner(log: list[str]) -> Runner:
    """send_email (guarded) and search (not)."""

    @requires_approval
    def send_email(to: str) -> str:
        """Send an email."""
        log.append(to)
        return f"sent to {to}"

    def search(query: str) -> list[str]:
        """Search."""
        return [query]

    return Runner([send_email, search])


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One tool call in the OpenAI shape."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_edited_calls_and_results_in_call_order() -> None:
    """The assistant message carries the edited call (same id); tool messages follow in order."""
    log: list[str] = []
    runner = make_runner(log)
    step = await runner.run(
        [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "send_email", "arguments": '{"to": "a@x"}'},
            },
            ToolCall(id="c2", name="search", args={"query": "é"}),
            ToolCall(id="c3", name="search", arguments_error="[1]"),
        ]
    )
    assert step.pending is not None
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}}
    done = await runner.resume(step.pending, [edit])
    assert done.openai_messages("On it.") == [
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [
                function_call("c1", "send_email", '{"to": "b@x"}'),
                function_call("c2", "search", '{"query": "é"}'),
                function_call("c3", "search", "[1]"),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sent to b@x"},
        {"role": "tool", "tool_call_id": "c2", "content": '["é"]'},
        {
            "role": "tool",
            "tool_call_id": "c3",
            "content": (
                "Error, not executed: Invalid arguments for tool `search`:"
                " expected a JSON object, got [1]"
            ),
        },
    ]
    assert log == ["b@x"]


def test_a_turn_without_calls_is_only_the_assistant_message() -> None:
    """No calls: one assistant message without a tool_calls key (the API refuses an empty list)."""
    step = make_runner([]).run_sync([])
    assert step.openai_messages() == [{"role": "assistant", "content": None}]
