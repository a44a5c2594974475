"""Tests for Runner: running a model turn, pausing for review and resuming with decisions."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    SEED_VERBS,
    AlreadyResumedError,
    ApproveDecision,
    Classifier,
    EditDecision,
    EditedAction,
    InvalidReviewDecisionError,
    NoPendingReviewError,
    PendingTurn,
    RejectDecision,
    Runner,
    Step,
    ToolCall,
    ToolResult,
    requires_approval,
    validate_decisions,
)
from toolguard.records import ResultOutcome
from toolguard.text import set_language

AVAILABLE = "search_events, send_email, delete_event, explode, transfer, get_weather"


@dataclass
class World:
    """A set of tools that record what ran (and in which thread) and a Runner over them."""

    log: list[tuple[str, Any]] = field(default_factory=list)
    threads: dict[str, int] = field(default_factory=dict)

    def tools(self) -> list[Any]:
        """The tools, in registry order; send_email and delete_event are guarded by their verb."""
        log, threads = self.log, self.threads

        def search_events(day: str) -> list[str]:
            """Find the events of a day."""
            threads["search_events"] = threading.get_ident()
            log.append(("search_events", day))
            return [f"standup {day}"]

        def send_email(to: str, subject: str = "") -> str:
            """Send an email."""
            threads["send_email"] = threading.get_ident()
            log.append(("send_email", {"to": to, "subject": subject}))
            return f"sent to {to}"

        async def delete_event(event_id: int) -> dict[str, Any]:
            """Delete an event."""
            threads["delete_event"] = threading.get_ident()
            log.append(("delete_event", event_id))
            return {"deleted": event_id}

        def explode(reason: str) -> str:
            """Always fails."""
            log.append(("explode", reason))
            raise ValueError(reason)

        @requires_approval(when=lambda args: args["amount"] > 1000)
        def transfer(amount: float, to: str) -> str:
            """Transfer money."""
            log.append(("transfer", {"amount": amount, "to": to}))
            return f"transferred {amount} to {to}"

        async def get_weather(city: str) -> str:
            """Today's weather."""
            threads["get_weather"] = threading.get_ident()
            log.append(("get_weather", city))
            return f"sunny in {city}"

        return [search_events, send_email, delete_event, explode, transfer, get_weather]

    def runner(self, **options: Any) -> Runner:
        """A Runner over the tools, classified by the original 13 verbs unless told otherwise."""
        options.setdefault("classifier", Classifier(verbs=SEED_VERBS))
        return Runner(self.tools(), **options)


@pytest.fixture
def world() -> World:
    """A fresh world with an empty log."""
    return World()


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    """A flat tool call dict."""
    return {"id": call_id, "name": name, "args": args}


def ok(call_id: str, name: str, value: Any, content: str | None = None) -> ToolResult:
    """A success result."""
    return ToolResult(
        call_id=call_id,
        name=name,
        status="success",
        content=content if content is not None else value,
        value=value,
    )


def err(call_id: str, name: str, content: str, outcome: ResultOutcome) -> ToolResult:
    """An error result."""
    return ToolResult(call_id=call_id, name=name, status="error", content=content, outcome=outcome)


def review(*actions: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The expected pending_review dict for (name, args) actions."""
    return {
        "action_requests": [
            {"name": n, "args": a, "description": f"Tool `{n}` is awaiting approval"}
            for n, a in actions
        ],
        "review_configs": [
            {"action_name": n, "allowed_decisions": ["approve", "edit", "reject"]}
            for n, _ in actions
        ],
    }


def paused(step: Step) -> PendingTurn:
    """The paused turn of ``step`` (fails the test when the step is complete)."""
    assert step.pending is not None
    return step.pending


EMAIL = call("c2", "send_email", to="a@x")
SEARCH_RESULT = ok("c1", "search_events", ["standup d1"], '["standup d1"]')


async def pause_on_email(world: World, **options: Any) -> tuple[Runner, PendingTurn]:
    """Run [search_events, send_email] and return the runner and the paused turn."""
    runner = world.runner(**options)
    step = await runner.run([call("c1", "search_events", day="d1"), EMAIL])
    return runner, paused(step)


# --------------------------------------------------------------------------- run


async def test_unguarded_calls_all_run_in_order(world: World) -> None:
    """A turn without guarded calls runs them all and returns one result per call in order."""
    step = await world.runner().run(
        [
            call("c1", "search_events", day="d1"),
            call("c2", "get_weather", city="Jakarta"),
            call("c3", "search_events", day="d2"),
        ]
    )
    assert step.pending is None
    assert step.paused is False
    assert step.pending_review is None
    assert step.results == [
        SEARCH_RESULT,
        ok("c2", "get_weather", "sunny in Jakarta"),
        ok("c3", "search_events", ["standup d2"], '["standup d2"]'),
    ]
    assert step.actions == []
    assert step.replaced_calls == []
    assert sorted(world.log) == [
        ("get_weather", "Jakarta"),
        ("search_events", "d1"),
        ("search_events", "d2"),
    ]


async def test_empty_turn(world: World) -> None:
    """A turn without calls is complete and empty."""
    step = await world.runner().run([])
    assert step == Step(calls=[], results=[])


async def test_mixed_turn_runs_unguarded_and_pauses_guarded(world: World) -> None:
    """Unguarded calls run now; the payload lists only guarded calls, in call order."""
    step = await world.runner().run(
        [
            call("c1", "search_events", day="d1"),
            call("c2", "delete_event", event_id=7),
            call("c3", "get_weather", city="Bandung"),
            call("c4", "send_email", to="a@x", subject="Hi"),
        ]
    )
    pending = paused(step)
    assert step.paused is True
    assert pending.pending_review.model_dump() == review(
        ("delete_event", {"event_id": 7}), ("send_email", {"to": "a@x", "subject": "Hi"})
    )
    assert step.pending_review == pending.pending_review
    assert step.results == [SEARCH_RESULT, ok("c3", "get_weather", "sunny in Bandung")]
    assert pending.results == step.results
    assert step.calls == [
        ToolCall(id="c1", name="search_events", args={"day": "d1"}),
        ToolCall(id="c2", name="delete_event", args={"event_id": 7}),
        ToolCall(id="c3", name="get_weather", args={"city": "Bandung"}),
        ToolCall(id="c4", name="send_email", args={"to": "a@x", "subject": "Hi"}),
    ]
    assert pending.calls == step.calls
    assert [(a.call_id, a.name, a.args, a.status) for a in pending.actions] == [
        ("c2", "delete_event", {"event_id": 7}, "requested"),
        ("c4", "send_email", {"to": "a@x", "subject": "Hi"}, "requested"),
    ]
    assert step.actions == pending.actions
    assert sorted(world.log) == [("get_weather", "Bandung"), ("search_events", "d1")]


async def test_payload_description_in_indonesian(world: World) -> None:
    """With set_language("id") the payload description is the seed's Indonesian text."""
    set_language("id")
    step = await world.runner().run([EMAIL])
    assert paused(step).pending_review.model_dump()["action_requests"] == [
        {
            "name": "send_email",
            "args": {"to": "a@x"},
            "description": "Tool `send_email` menunggu persetujuan",
        }
    ]


async def test_action_ids_are_unique(world: World) -> None:
    """Every approval request gets its own id."""
    step = await world.runner().run([call(f"c{i}", "send_email", to=f"{i}@x") for i in range(5)])
    ids = [a.id for a in paused(step).actions]
    assert len(set(ids)) == 5


async def test_tool_that_raises_gives_error_result(world: World) -> None:
    """A tool that raises becomes an error result naming the tool and the exception."""
    step = await world.runner().run(
        [call("c1", "explode", reason="boom"), call("c2", "search_events", day="d1")]
    )
    assert step.results == [
        err("c1", "explode", "Tool `explode` failed: ValueError: boom", "failed"),
        ok("c2", "search_events", ["standup d1"], '["standup d1"]'),
    ]


@pytest.mark.parametrize(
    ("args", "content"),
    [
        ({}, "Invalid arguments for tool `send_email`: 'to': Field required"),
        (
            {"to": 5},
            "Invalid arguments for tool `send_email`: 'to': Input should be a valid string",
        ),
        (
            {"to": "a@x", "cc": "b@x"},
            "Invalid arguments for tool `send_email`: 'cc': Extra inputs are not permitted",
        ),
    ],
)
async def test_model_args_breaking_the_schema_give_error_without_review(
    world: World, args: dict[str, Any], content: str
) -> None:
    """Model-proposed args that break the schema give an error result and no pending review."""
    step = await world.runner().run([{"id": "c1", "name": "send_email", "args": args}])
    assert step.pending is None
    assert step.results == [err("c1", "send_email", content, "invalid_arguments")]
    assert world.log == []


async def test_unknown_tool_from_the_model(world: World) -> None:
    """A call to a tool that does not exist gives an error result listing the tools."""
    step = await world.runner().run(
        [call("c1", "nope", x=1), call("c2", "search_events", day="d1")]
    )
    assert step.pending is None
    assert step.results == [
        err(
            "c1",
            "nope",
            f"Tool `nope` does not exist. Available tools: {AVAILABLE}",
            "unknown_tool",
        ),
        ok("c2", "search_events", ["standup d1"], '["standup d1"]'),
    ]


@pytest.mark.parametrize(
    ("arguments", "content"),
    [
        (
            "{not json",
            "Invalid arguments for tool `send_email`: expected a JSON object, got {not json",
        ),
        ("[1, 2]", "Invalid arguments for tool `send_email`: expected a JSON object, got [1, 2]"),
        ('"text"', 'Invalid arguments for tool `send_email`: expected a JSON object, got "text"'),
        ([1, 2], "Invalid arguments for tool `send_email`: expected a JSON object, got [1, 2]"),
    ],
)
async def test_arguments_that_are_not_a_json_object(
    world: World, arguments: Any, content: str
) -> None:
    """Arguments that are invalid JSON text or not an object give an error result, no review."""
    step = await world.runner().run([{"id": "c1", "name": "send_email", "arguments": arguments}])
    assert step.pending is None
    assert step.results == [err("c1", "send_email", content, "invalid_arguments")]
    assert world.log == []


async def test_openai_shaped_calls_are_parsed(world: World) -> None:
    """OpenAI tool calls (dicts and client-like objects) with JSON text arguments are parsed."""
    step = await world.runner().run(
        [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "search_events", "arguments": '{"day": "d1"}'},
            },
            SimpleNamespace(
                id="call_b",
                type="function",
                function=SimpleNamespace(name="send_email", arguments='{"to": "a@x"}'),
            ),
            {"id": "call_c", "name": "get_weather", "arguments": '{"city": "Medan"}'},
            ToolCall(id="call_d", name="search_events", args={"day": "d2"}),
        ]
    )
    assert step.calls == [
        ToolCall(id="call_a", name="search_events", args={"day": "d1"}),
        ToolCall(id="call_b", name="send_email", args={"to": "a@x"}),
        ToolCall(id="call_c", name="get_weather", args={"city": "Medan"}),
        ToolCall(id="call_d", name="search_events", args={"day": "d2"}),
    ]
    assert paused(step).pending_review.model_dump() == review(("send_email", {"to": "a@x"}))


@pytest.mark.parametrize("arguments", [None, ""])
async def test_empty_arguments_mean_no_arguments(world: World, arguments: Any) -> None:
    """Missing or empty arguments text is an empty object (the schema then decides)."""
    step = await world.runner().run(
        [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "search_events", "arguments": arguments},
            }
        ]
    )
    assert step.calls == [ToolCall(id="c1", name="search_events", args={})]
    assert step.results == [
        err(
            "c1",
            "search_events",
            "Invalid arguments for tool `search_events`: 'day': Field required",
            "invalid_arguments",
        )
    ]


async def test_duplicate_and_missing_call_ids_are_made_unique(world: World) -> None:
    """Repeated ids get the call's index appended and missing ids become call_<index>."""
    step = await world.runner().run(
        [
            call("x", "search_events", day="d1"),
            call("x", "search_events", day="d2"),
            {"name": "search_events", "args": {"day": "d3"}},
            {"id": "", "name": "search_events", "args": {"day": "d4"}},
        ]
    )
    assert [c.id for c in step.calls] == ["x", "x_1", "call_2", "call_3"]
    assert [(r.call_id, r.content) for r in step.results] == [
        ("x", '["standup d1"]'),
        ("x_1", '["standup d2"]'),
        ("call_2", '["standup d3"]'),
        ("call_3", '["standup d4"]'),
    ]


async def test_renamed_duplicate_id_does_not_collide_with_a_later_id(world: World) -> None:
    """Ids stay unique even when the renamed id equals another call's id."""
    step = await world.runner().run(
        [
            call("x", "search_events", day="d1"),
            call("x_2", "search_events", day="d2"),
            call("x", "search_events", day="d3"),
        ]
    )
    ids = [c.id for c in step.calls]
    assert len(set(ids)) == 3
    assert [r.content for r in step.results] == [
        '["standup d1"]',
        '["standup d2"]',
        '["standup d3"]',
    ]


async def test_dynamic_approval_depends_on_the_arguments(world: World) -> None:
    """A when= policy (amount > 1000) runs small transfers and pauses big ones."""
    step = await world.runner().run(
        [call("c1", "transfer", amount=50, to="bob"), call("c2", "transfer", amount=5000, to="eve")]
    )
    pending = paused(step)
    assert pending.pending_review.model_dump() == review(
        ("transfer", {"amount": 5000, "to": "eve"})
    )
    assert step.results == [ok("c1", "transfer", "transferred 50.0 to bob")]
    assert world.log == [("transfer", {"amount": 50.0, "to": "bob"})]
    done = await world.runner().resume(pending, [{"type": "approve"}])
    assert done.results == [
        ok("c1", "transfer", "transferred 50.0 to bob"),
        ok("c2", "transfer", "transferred 5000.0 to eve"),
    ]


# --------------------------------------------------------------------------- resume


async def test_approve_runs_the_proposed_call(world: World) -> None:
    """Approve runs the call with the model's args; unguarded calls are not run again."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(pending, [{"type": "approve"}])
    assert step.pending is None
    assert step.results == [SEARCH_RESULT, ok("c2", "send_email", "sent to a@x")]
    assert world.log == [("search_events", "d1"), ("send_email", {"to": "a@x", "subject": ""})]
    assert step.calls == pending.calls
    assert step.replaced_calls == []
    [action] = step.actions
    assert (action.id, action.status, action.decision, action.result) == (
        pending.actions[0].id,
        "executed",
        ApproveDecision(),
        ok("c2", "send_email", "sent to a@x"),
    )
    assert action.decided_at is not None
    assert action.finished_at is not None


async def test_resume_leaves_the_stored_turn_unchanged(world: World) -> None:
    """Resuming does not modify the PendingTurn it was given."""
    runner, pending = await pause_on_email(world)
    before = pending.model_dump()
    await runner.resume(pending, [{"type": "reject"}])
    assert pending.model_dump() == before


async def test_edit_runs_the_edited_call_and_replaces_it(world: World) -> None:
    """Edit runs edited_action's args; the call keeps its id and is listed as replaced."""
    runner, pending = await pause_on_email(world)
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "b@x", "subject": "S"}},
    }
    step = await runner.resume(pending, [edit])
    edited_call = ToolCall(id="c2", name="send_email", args={"to": "b@x", "subject": "S"})
    assert step.calls == [ToolCall(id="c1", name="search_events", args={"day": "d1"}), edited_call]
    assert step.replaced_calls == [edited_call]
    assert step.results == [SEARCH_RESULT, ok("c2", "send_email", "sent to b@x")]
    assert world.log == [("search_events", "d1"), ("send_email", {"to": "b@x", "subject": "S"})]
    [action] = step.actions
    assert (action.status, action.decision, action.args) == (
        "executed",
        EditDecision(
            edited_action=EditedAction(name="send_email", args={"to": "b@x", "subject": "S"})
        ),
        {"to": "a@x"},
    )


async def test_edit_to_an_unknown_tool(world: World) -> None:
    """An edit naming a tool that does not exist runs nothing and gives the exact error."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(
        pending, [{"type": "edit", "edited_action": {"name": "nope", "args": {}}}]
    )
    assert step.pending is None
    assert step.results == [
        SEARCH_RESULT,
        err(
            "c2",
            "nope",
            f"Tool `nope` does not exist. Available tools: {AVAILABLE}",
            "unknown_tool",
        ),
    ]
    assert world.log == [("search_events", "d1")]
    assert [a.status for a in step.actions] == ["failed"]


@pytest.mark.parametrize(
    ("args", "content"),
    [
        (
            {"to": None},
            "Invalid arguments for tool `send_email`: 'to': Input should be a valid string",
        ),
        ({"subject": "S"}, "Invalid arguments for tool `send_email`: 'to': Field required"),
        (
            {"to": "a@x", "bcc": "x"},
            "Invalid arguments for tool `send_email`: 'bcc': Extra inputs are not permitted",
        ),
    ],
)
async def test_edit_with_args_breaking_the_schema(
    world: World, args: dict[str, Any], content: str
) -> None:
    """Edited args that break the schema give an error naming the field; the tool does not run."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(
        pending, [{"type": "edit", "edited_action": {"name": "send_email", "args": args}}]
    )
    assert step.pending is None
    assert step.results == [SEARCH_RESULT, err("c2", "send_email", content, "invalid_arguments")]
    assert world.log == [("search_events", "d1")]
    assert [a.status for a in step.actions] == ["failed"]


async def test_reject_with_a_message(world: World) -> None:
    """Reject does not run the tool; the model reads the reason as an error result."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(pending, [{"type": "reject", "message": "wrong address"}])
    assert step.results == [SEARCH_RESULT, err("c2", "send_email", "wrong address", "rejected")]
    assert world.log == [("search_events", "d1")]
    [action] = step.actions
    assert (action.status, action.decision) == ("rejected", RejectDecision(message="wrong address"))


@pytest.mark.parametrize(
    "decision",
    [{"type": "reject"}, {"type": "reject", "message": ""}, {"type": "reject", "message": None}],
)
async def test_reject_without_message(world: World, decision: dict[str, Any]) -> None:
    """A reject without (or with an empty) message gives REJECTED_BY_USER_MESSAGE."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(pending, [decision])
    assert step.results == [
        SEARCH_RESULT,
        err("c2", "send_email", REJECTED_BY_USER_MESSAGE, "rejected"),
    ]
    assert REJECTED_BY_USER_MESSAGE == "User rejected this action. It was not executed."


async def test_all_rejected_runs_nothing(world: World) -> None:
    """When every action is rejected nothing runs and every call still has a result."""
    runner = world.runner()
    step = await runner.run(
        [
            call("c1", "send_email", to="a@x"),
            call("c2", "get_weather", city="Bogor"),
            call("c3", "delete_event", event_id=1),
        ]
    )
    world.log.clear()
    done = await runner.resume(
        paused(step), [{"type": "reject", "message": "no"}, {"type": "reject"}]
    )
    assert done.results == [
        err("c1", "send_email", "no", "rejected"),
        ok("c2", "get_weather", "sunny in Bogor"),
        err("c3", "delete_event", REJECTED_BY_USER_MESSAGE, "rejected"),
    ]
    assert world.log == []
    assert [a.status for a in done.actions] == ["rejected", "rejected"]


@pytest.mark.parametrize("decisions", [[], [{"type": "approve"}]])
async def test_fewer_decisions_reject_the_rest_with_no_decision(
    world: World, decisions: list[dict[str, Any]]
) -> None:
    """Actions left without a decision get NO_DECISION and do not run (lenient path)."""
    runner = world.runner()
    step = await runner.run(
        [call("c1", "send_email", to="a@x"), call("c2", "delete_event", event_id=1)]
    )
    done = await runner.resume(paused(step), decisions)
    first = (
        ok("c1", "send_email", "sent to a@x")
        if decisions
        else err("c1", "send_email", NO_DECISION, "no_decision")
    )
    assert done.results == [first, err("c2", "delete_event", NO_DECISION, "no_decision")]
    assert NO_DECISION == "No decision was given for this action. It was not executed."
    assert done.actions[-1].status == "rejected"
    assert done.actions[-1].decision is None
    assert ("delete_event", 1) not in world.log


async def test_extra_decisions_are_ignored(world: World) -> None:
    """Decisions beyond the number of actions are ignored, even malformed ones."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(
        pending, [{"type": "approve"}, {"type": "reject"}, {"type": "postpone"}, 5]
    )
    assert step.results == [SEARCH_RESULT, ok("c2", "send_email", "sent to a@x")]


async def test_approved_tool_that_raises_fails(world: World) -> None:
    """An approved call whose tool raises gives an error result and the action 'failed'."""
    runner = Runner({"delete_everything": World().tools()[3]})
    step = await runner.run([call("c1", "delete_everything", reason="disk full")])
    done = await runner.resume(paused(step), [{"type": "approve"}])
    assert done.results == [
        err(
            "c1",
            "delete_everything",
            "Tool `delete_everything` failed: ValueError: disk full",
            "failed",
        )
    ]
    assert [a.status for a in done.actions] == ["failed"]


async def test_every_call_ends_with_exactly_one_result(world: World) -> None:
    """A turn mixing every outcome ends with one result per call, in call order."""
    runner = world.runner()
    step = await runner.run(
        [
            call("c1", "search_events", day="d1"),
            call("c2", "send_email", to="a@x"),
            call("c3", "nope"),
            call("c4", "delete_event", event_id=4),
            call("c5", "explode", reason="boom"),
            call("c6", "send_email", to=6),
            call("c7", "transfer", amount=2000, to="eve"),
            call("c8", "send_email", to="h@x"),
            call("c9", "delete_event", event_id=9),
        ]
    )
    pending = paused(step)
    assert [r.call_id for r in pending.results] == ["c1", "c3", "c5", "c6"]
    done = await runner.resume(
        pending,
        [
            {"type": "approve"},
            {"type": "reject", "message": "keep it"},
            {
                "type": "edit",
                "edited_action": {"name": "transfer", "args": {"amount": 20, "to": "bob"}},
            },
            {"type": "edit", "edited_action": {"name": "nope", "args": {}}},
        ],
    )
    assert done.pending is None
    assert [r.call_id for r in done.results] == [f"c{i}" for i in range(1, 10)]
    assert [(r.call_id, r.status) for r in done.results] == [
        ("c1", "success"),
        ("c2", "success"),
        ("c3", "error"),
        ("c4", "error"),
        ("c5", "error"),
        ("c6", "error"),
        ("c7", "success"),
        ("c8", "error"),
        ("c9", "error"),
    ]
    assert [r.content for r in done.results][6:] == [
        "transferred 20.0 to bob",
        f"Tool `nope` does not exist. Available tools: {AVAILABLE}",
        NO_DECISION,
    ]
    assert [a.status for a in done.actions] == [
        "executed",
        "rejected",
        "executed",
        "failed",
        "rejected",
    ]
    assert [c.id for c in done.calls] == [f"c{i}" for i in range(1, 10)]


async def test_paused_turn_survives_json_round_trip(world: World) -> None:
    """A paused turn dumped to JSON and read back equals the original and resumes the same way."""
    _, pending = await pause_on_email(world)
    restored = PendingTurn.model_validate_json(pending.model_dump_json())
    assert restored == pending
    assert restored.pending_review == pending.pending_review
    decisions = [{"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}}]
    other = World()
    from_restored = await other.runner().resume(restored, decisions)
    edited = ToolCall(id="c2", name="send_email", args={"to": "b@x"})
    assert from_restored.calls == [pending.calls[0], edited]
    assert from_restored.replaced_calls == [edited]
    assert [(r.call_id, r.status) for r in from_restored.results] == [
        ("c1", "success"),
        ("c2", "success"),
    ]
    assert [(a.id, a.status, a.decision) for a in from_restored.actions] == [
        (
            pending.actions[0].id,
            "executed",
            EditDecision(edited_action=EditedAction(name="send_email", args={"to": "b@x"})),
        )
    ]
    assert other.log == [("send_email", {"to": "b@x", "subject": ""})]
    # The original is the same turn: it was resumed already, so it runs nothing.
    with pytest.raises(AlreadyResumedError):
        await world.runner().resume(pending, decisions)
    assert world.log == [("search_events", "d1")]  # from the run only


async def test_edit_to_another_guarded_tool_pauses_again(world: World) -> None:
    """An edit switching to another guarded tool does not run it but asks for a new review."""
    runner, pending = await pause_on_email(world)
    edit = {"type": "edit", "edited_action": {"name": "delete_event", "args": {"event_id": 3}}}
    again = await runner.resume(pending, [edit])
    second = paused(again)
    assert second.review_id != pending.review_id
    assert second.pending_review.model_dump() == review(("delete_event", {"event_id": 3}))
    assert again.results == [SEARCH_RESULT]
    new_call = ToolCall(id="c2", name="delete_event", args={"event_id": 3})
    assert again.calls == [ToolCall(id="c1", name="search_events", args={"day": "d1"}), new_call]
    assert again.replaced_calls == [new_call]
    assert [(a.name, a.status) for a in again.actions] == [
        ("send_email", "edited"),
        ("delete_event", "requested"),
    ]
    assert again.actions[1].id != pending.actions[0].id
    assert world.log == [("search_events", "d1")]
    restored = PendingTurn.model_validate_json(second.model_dump_json())
    done = await runner.resume(restored, [{"type": "approve"}])
    assert done.pending is None
    assert done.results == [
        SEARCH_RESULT,
        ok("c2", "delete_event", {"deleted": 3}, '{"deleted": 3}'),
    ]
    assert done.replaced_calls == [new_call]
    assert world.log == [("search_events", "d1"), ("delete_event", 3)]
    assert [(a.name, a.status) for a in done.actions] == [("delete_event", "executed")]


async def test_edit_to_an_unguarded_tool_runs_it(world: World) -> None:
    """An edit switching to a tool that needs no approval runs it at once."""
    runner, pending = await pause_on_email(world)
    step = await runner.resume(
        pending,
        [{"type": "edit", "edited_action": {"name": "get_weather", "args": {"city": "Solo"}}}],
    )
    assert step.pending is None
    assert step.results == [SEARCH_RESULT, ok("c2", "get_weather", "sunny in Solo")]
    assert world.log == [("search_events", "d1"), ("get_weather", "Solo")]


async def test_edit_policy_run_runs_an_edit_that_still_needs_approval(world: World) -> None:
    """With the default edit_policy="run" an edited big transfer runs: the reviewer wrote it."""
    runner = world.runner()
    step = await runner.run([call("c1", "transfer", amount=5000, to="eve")])
    edit = {
        "type": "edit",
        "edited_action": {"name": "transfer", "args": {"amount": 2000, "to": "eve"}},
    }
    done = await runner.resume(paused(step), [edit])
    assert done.results == [ok("c1", "transfer", "transferred 2000.0 to eve")]


async def test_edit_policy_recheck(world: World) -> None:
    """edit_policy="recheck": an edit the policy flags is reviewed again, a harmless one runs."""
    runner = world.runner(edit_policy="recheck")
    step = await runner.run([call("c1", "transfer", amount=5000, to="eve")])
    first = paused(step)
    edit = {
        "type": "edit",
        "edited_action": {"name": "transfer", "args": {"amount": 2000, "to": "eve"}},
    }
    again = await runner.resume(first, [edit])
    second = paused(again)
    assert second.review_id != first.review_id
    assert second.pending_review.model_dump() == review(("transfer", {"amount": 2000, "to": "eve"}))
    assert world.log == []
    small = {
        "type": "edit",
        "edited_action": {"name": "transfer", "args": {"amount": 900, "to": "eve"}},
    }
    done = await runner.resume(second, [small])
    assert done.pending is None
    assert done.results == [ok("c1", "transfer", "transferred 900.0 to eve")]
    assert world.log == [("transfer", {"amount": 900.0, "to": "eve"})]


def test_unknown_edit_policy_is_refused(world: World) -> None:
    """An edit_policy other than "run" or "recheck" raises ValueError with the exact text."""
    with pytest.raises(ValueError, match="edit_policy") as info:
        world.runner(edit_policy="ask")
    assert str(info.value) == "edit_policy must be 'run' or 'recheck', got 'ask'"


async def test_resume_without_a_waiting_action(world: World) -> None:
    """Resuming a turn whose actions are all decided raises NoPendingReviewError."""
    _, pending = await pause_on_email(world)
    done = pending.model_copy(
        update={"actions": [a.model_copy(update={"status": "executed"}) for a in pending.actions]}
    )
    with pytest.raises(NoPendingReviewError) as info:
        await world.runner().resume(done, [{"type": "approve"}])
    assert str(info.value) == "There is no action awaiting approval in this conversation"
    assert world.log == [("search_events", "d1")]


@pytest.mark.parametrize(
    ("decisions", "text"),
    [
        ("approve", "'decisions' must be a list of decision objects, got str"),
        ({"type": "approve"}, "'decisions' must be a list of decision objects, got dict"),
        (5, "'decisions' must be a list of decision objects, got int"),
        ({"approve"}, "'decisions' must be a list of decision objects, got set"),
        (
            [{"type": "postpone"}],
            "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
        ),
        ([{"type": "edit"}], "An 'edit' decision must include 'edited_action'"),
    ],
)
async def test_resume_with_bad_decisions_runs_nothing(
    world: World, decisions: Any, text: str
) -> None:
    """A non-list or a malformed decision raises InvalidReviewDecisionError and nothing runs."""
    runner, pending = await pause_on_email(world)
    with pytest.raises(InvalidReviewDecisionError) as info:
        await runner.resume(pending, decisions)
    assert str(info.value) == text
    assert world.log == [("search_events", "d1")]


async def test_malformed_second_decision_stops_the_first_from_running(world: World) -> None:
    """When decision 2 is malformed, the approved decision 1 does not run either."""
    runner = world.runner()
    step = await runner.run(
        [call("c1", "send_email", to="a@x"), call("c2", "delete_event", event_id=1)]
    )
    with pytest.raises(InvalidReviewDecisionError):
        await runner.resume(
            paused(step), [{"type": "approve"}, {"type": "edit", "edited_action": {}}]
        )
    assert world.log == []


async def test_resume_with_none_uses_the_same_text_as_validation(world: World) -> None:
    """resume(pending, None) is refused with the same text as validate_decisions(pending, None)."""
    runner, pending = await pause_on_email(world)
    with pytest.raises(InvalidReviewDecisionError) as expected:
        validate_decisions(pending, None)
    with pytest.raises(InvalidReviewDecisionError) as info:
        await runner.resume(pending, None)  # type: ignore[arg-type]
    assert str(info.value) == str(expected.value)


async def test_validated_decisions_resume_the_turn(world: World) -> None:
    """The models returned by validate_decisions can be given to resume."""
    runner, pending = await pause_on_email(world)
    decisions = validate_decisions(pending.pending_review.model_dump(), [{"type": "approve"}])
    step = await runner.resume(pending, decisions)
    assert step.results == [SEARCH_RESULT, ok("c2", "send_email", "sent to a@x")]


# --------------------------------------------------------------------------- threads


async def test_sync_tools_run_in_a_worker_thread(world: World) -> None:
    """Sync tools run outside the event loop's thread; async tools run in it."""
    loop_thread = threading.get_ident()
    runner = world.runner()
    step = await runner.run(
        [call("c1", "search_events", day="d1"), call("c2", "get_weather", city="Kupang"), EMAIL]
    )
    await runner.resume(paused(step), [{"type": "approve"}])
    assert world.threads["search_events"] != loop_thread
    assert world.threads["send_email"] != loop_thread
    assert world.threads["get_weather"] == loop_thread


async def test_sync_in_thread_false_runs_in_the_loop_thread(world: World) -> None:
    """With sync_in_thread=False sync tools run in the event loop's thread."""
    loop_thread = threading.get_ident()
    await world.runner(sync_in_thread=False).run([call("c1", "search_events", day="d1")])
    assert world.threads["search_events"] == loop_thread


def barrier_tools(barrier: threading.Barrier) -> list[Any]:
    """An unguarded and a guarded sync tool that both wait for a second caller."""

    def meet(label: str) -> str:
        """Wait for the other call."""
        barrier.wait()
        return label

    def send_signal(label: str) -> str:
        """Wait for the other call (guarded by the verb 'send')."""
        barrier.wait()
        return label

    return [meet, send_signal]


async def test_sync_tools_of_one_turn_run_concurrently() -> None:
    """Two sync tools that wait for each other on a barrier both finish when run in one turn."""
    runner = Runner(
        barrier_tools(threading.Barrier(2, timeout=5)), classifier=Classifier(verbs=SEED_VERBS)
    )
    step = await runner.run([call("c1", "meet", label="a"), call("c2", "meet", label="b")])
    assert step.results == [ok("c1", "meet", "a"), ok("c2", "meet", "b")]


async def test_approved_sync_tools_run_concurrently() -> None:
    """Two approved sync calls that wait for each other both finish on resume."""
    runner = Runner(
        barrier_tools(threading.Barrier(2, timeout=5)), classifier=Classifier(verbs=SEED_VERBS)
    )
    step = await runner.run(
        [call("c1", "send_signal", label="a"), call("c2", "send_signal", label="b")]
    )
    done = await runner.resume(paused(step), [{"type": "approve"}, {"type": "approve"}])
    assert done.results == [ok("c1", "send_signal", "a"), ok("c2", "send_signal", "b")]


# --------------------------------------------------------------------------- without an event loop


def test_run_sync_and_resume_sync(world: World) -> None:
    """run_sync and resume_sync work from plain synchronous code."""
    runner = world.runner()
    step = runner.run_sync([call("c1", "search_events", day="d1"), EMAIL])
    assert paused(step).pending_review.model_dump() == review(("send_email", {"to": "a@x"}))
    done = runner.resume_sync(paused(step), [{"type": "approve"}])
    assert done.results == [SEARCH_RESULT, ok("c2", "send_email", "sent to a@x")]
    assert world.log == [("search_events", "d1"), ("send_email", {"to": "a@x", "subject": ""})]


# --------------------------------------------------------------------------- fuzzing

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
NEAR_DECISION = st.fixed_dictionaries(
    {"type": st.sampled_from(["approve", "edit", "reject", "postpone"])},
    optional={
        "edited_action": JSON
        | st.fixed_dictionaries(
            {},
            optional={
                "name": st.sampled_from(["send_email", "delete_event", "nope"]) | JSON,
                "args": JSON | st.dictionaries(st.sampled_from(["to", "event_id", "x"]), JSON),
            },
        ),
        "message": JSON,
    },
)


@functools.cache
def fuzz_setup() -> tuple[World, Runner]:
    """One world and runner shared by the fuzz examples (built once, for speed)."""
    world = World()
    return world, world.runner(sync_in_thread=False)


@settings(max_examples=100, deadline=None)
@given(decisions=JSON | st.lists(JSON | NEAR_DECISION, max_size=3))
def test_fuzz_resume_completes_or_refuses(decisions: Any) -> None:
    """Any JSON value as decisions completes the turn, pauses again, or is refused; nothing else."""
    world, runner = fuzz_setup()
    # A fresh paused turn per example: a turn is resumed at most once.
    turn = paused(runner.run_sync([EMAIL, call("c3", "delete_event", event_id=1)]))
    world.log.clear()
    before = turn.model_dump()
    try:
        done = runner.resume_sync(turn, decisions)
    except InvalidReviewDecisionError:
        assert world.log == []
    else:
        if done.pending is None:
            assert [r.call_id for r in done.results] == ["c2", "c3"]
            assert {r.status for r in done.results} <= {"success", "error"}
        else:
            assert done.pending.pending_review.action_requests
    assert turn.model_dump() == before
