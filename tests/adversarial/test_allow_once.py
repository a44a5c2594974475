"""``allow_once`` grants exactly one call, of exactly that function, inside the block.

Attack class: stretching a one-shot human approval into more than was approved — using the
grant after its block exited through a copied context (``contextvars.copy_context()``, anyio
task groups, threads, executors), spending it on another function that has the same name,
on arguments that only look equal (``{1: x}`` vs ``{"1": x}``, ``True`` vs ``1``, ``1.0`` vs
``1``, a tuple vs a list, a list changed in place after the approval), or twice by racing
threads.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import copy
import pickle
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import finite_json, with_non_finite
from toolguard import ApprovalRequiredError, allow_once, requires_approval, tool


def make_send(ran: list[Any]) -> Any:
    """A guarded ``send`` recording its runs."""

    @requires_approval
    def send(to: str, body: str = "hi") -> str:
        ran.append((to, body))
        return "sent"

    return send


def refused(fn: Any, *args: Any, **kwargs: Any) -> ApprovalRequiredError:
    with pytest.raises(ApprovalRequiredError) as info:
        fn(*args, **kwargs)
    return info.value


# ----------------------------------------------------------------------------- the block's end


def test_a_context_copied_in_the_block_is_dead_after_it() -> None:
    """copy_context() inside the block, run after it: the grant is closed, nothing runs."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    with allow_once(exc.call):
        copied = contextvars.copy_context()
    refused(copied.run, send, "alice")
    assert ran == []


def test_a_context_copied_in_the_block_works_inside_it_once() -> None:
    """Control: the same copy used inside the block runs the call, exactly once."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    with allow_once(exc.call):
        copied = contextvars.copy_context()
        assert copied.run(send, "alice") == "sent"
        refused(send, "alice")
        refused(copied.run, send, "alice")
    assert ran == [("alice", "hi")]


def test_a_thread_started_in_the_block_cannot_use_the_grant_after_it() -> None:
    """A thread with a copied context that calls after the block exited gets no grant."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    go = threading.Event()
    outcome: list[str] = []

    def later() -> None:
        go.wait(10)
        try:
            send("alice")
        except ApprovalRequiredError:
            outcome.append("approval")
        else:
            outcome.append("ran")

    with allow_once(exc.call):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(later,))
        thread.start()
    go.set()
    thread.join(10)
    assert outcome == ["approval"]
    assert ran == []


def test_an_executor_job_submitted_in_the_block_cannot_use_the_grant_after_it() -> None:
    """run_in_executor-style: a job carrying the block's context, run after it: refused."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    go = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with allow_once(exc.call):
            context = contextvars.copy_context()
            future = pool.submit(lambda: (go.wait(10), context.run(send, "alice")))
        go.set()
        with pytest.raises(ApprovalRequiredError):
            future.result(10)
    assert ran == []


async def test_a_task_started_in_the_block_cannot_use_the_grant_after_it() -> None:
    """An anyio task started inside the block that calls after it exited: refused."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    go = anyio.Event()
    outcome: list[str] = []

    async def later() -> None:
        await go.wait()
        try:
            send("alice")
        except ApprovalRequiredError:
            outcome.append("approval")
        else:
            outcome.append("ran")

    async with anyio.create_task_group() as tg:
        with allow_once(exc.call):
            tg.start_soon(later)
            await anyio.lowlevel.checkpoint()
        go.set()
    assert outcome == ["approval"]
    assert ran == []


async def test_a_worker_thread_inside_the_block_still_sees_the_grant() -> None:
    """Control: anyio.to_thread.run_sync inside the block sees the grant (and uses it once)."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    with allow_once(exc.call):
        assert await anyio.to_thread.run_sync(send, "alice") == "sent"
        with pytest.raises(ApprovalRequiredError):
            await anyio.to_thread.run_sync(send, "alice")
    assert ran == [("alice", "hi")]


def test_a_grant_scope_is_good_for_one_block() -> None:
    """Entering the same allow_once() object again is refused; its grant is gone."""
    ran: list[Any] = []
    send = make_send(ran)
    scope = allow_once("send", {"to": "alice"})
    with scope:
        pass
    with pytest.raises(RuntimeError) as info, scope:
        send("alice")
    assert str(info.value) == (
        "an allow_once() grant is good for one with block: call allow_once() again"
    )
    assert ran == []


# ----------------------------------------------------------------------------- racing threads


def test_threads_racing_inside_the_block_run_the_call_once() -> None:
    """Sixteen threads sharing the block's context call at once: exactly one runs."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    barrier = threading.Barrier(16)
    outcomes: list[str] = []
    lock = threading.Lock()

    def race() -> None:
        barrier.wait(10)
        try:
            send("alice")
        except ApprovalRequiredError:
            result = "approval"
        else:
            result = "ran"
        with lock:
            outcomes.append(result)

    with allow_once(exc.call):
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(race,)) for _ in range(16)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert sorted(outcomes) == ["approval"] * 15 + ["ran"]
    assert ran == [("alice", "hi")]


# ----------------------------------------------------------------------------- the function


def test_another_function_with_the_same_name_is_not_covered_by_exc_call() -> None:
    """Two different functions named ``send``: the error's grant covers only the one that raised."""
    ran_a: list[Any] = []
    ran_b: list[Any] = []
    send_a, send_b = make_send(ran_a), make_send(ran_b)
    exc = refused(send_a, "alice")
    with allow_once(exc.call):
        refused(send_b, "alice")
        assert send_a("alice") == "sent"
    assert ran_a == [("alice", "hi")]
    assert ran_b == []


def test_a_guarded_function_form_covers_only_that_function() -> None:
    """allow_once(send_a, args) binds to send_a; send_b of the same name needs approval."""
    ran_a: list[Any] = []
    ran_b: list[Any] = []
    send_a, send_b = make_send(ran_a), make_send(ran_b)
    with allow_once(send_a, {"to": "alice"}):
        refused(send_b, "alice")
        assert send_a(to="alice") == "sent"
        refused(send_a, "alice")
    assert ran_a == [("alice", "hi")]
    assert ran_b == []


def test_a_tool_form_covers_that_tool() -> None:
    """allow_once(tool, args) with a guarded Tool."""
    ran: list[Any] = []

    def mail(to: str) -> str:
        ran.append(to)
        return "sent"

    guarded = requires_approval(tool(mail))
    with allow_once(guarded, {"to": "a"}):
        assert guarded("a") == "sent"
    refused(guarded, "a")
    assert ran == ["a"]


def test_the_name_form_covers_one_call_of_any_function_of_that_name() -> None:
    """Documented: allow_once(name, args) matches any guarded function of that name, once."""
    ran_a: list[Any] = []
    ran_b: list[Any] = []
    send_a, send_b = make_send(ran_a), make_send(ran_b)
    with allow_once("send", {"to": "alice"}):
        assert send_b("alice") == "sent"
        refused(send_a, "alice")
    assert (ran_a, ran_b) == ([], [("alice", "hi")])


def test_an_unpickled_call_matches_like_its_name() -> None:
    """A ToolCall from another process has no function attached: it matches by name and args."""
    ran: list[Any] = []
    send = make_send(ran)
    exc = refused(send, "alice")
    call = pickle.loads(pickle.dumps(exc)).call  # noqa: S301 - our own data
    with allow_once(call):
        assert send("alice") == "sent"
    assert ran == [("alice", "hi")]


# ----------------------------------------------------------------------------- the arguments


def make_take(ran: list[Any]) -> Any:
    @requires_approval
    def take(value: Any) -> str:
        ran.append(value)
        return "taken"

    return take


DIFFERENT: dict[str, tuple[Any, Any]] = {
    "int key vs str key": ({1: "x"}, {"1": "x"}),
    "str key vs int key": ({"1": "x"}, {1: "x"}),
    "True vs 1": (True, 1),
    "1 vs True": (1, True),
    "1.0 vs 1": (1.0, 1),
    "1 vs 1.0": (1, 1.0),
    "0.0 vs -0.0": (0.0, -0.0),
    "tuple vs list": ((1, 2), [1, 2]),
    "list vs tuple": ([1, 2], (1, 2)),
    "nested float vs int": ({"a": [1]}, {"a": [1.0]}),
    "nested bool vs int": ({"a": {"b": True}}, {"a": {"b": 1}}),
    "True key vs 1 key": ({True: 1}, {1: 1}),
    "float key vs int key": ({1.0: 1}, {1: 1}),
    "tuple key types": ({(1, 2): 0}, {(1.0, 2): 0}),
    "set items": ({1, 2}, {1.0, 2}),
    "frozenset vs set": (frozenset({1}), {1}),
    "None vs missing": (None, "None"),
    "str vs bytes": ("a", b"a"),
    "longer list": ([1], [1, 1]),
}


@pytest.mark.parametrize("case", list(DIFFERENT))
def test_arguments_that_only_look_equal_are_not_covered(case: str) -> None:
    """Exact comparison, types included; the JSON text of both may well be the same."""
    granted, called = DIFFERENT[case]
    ran: list[Any] = []
    take = make_take(ran)
    with allow_once("take", {"value": granted}):
        refused(take, called)
        assert take(granted) == "taken"
    assert ran == [granted]


@pytest.mark.parametrize("case", list(DIFFERENT))
def test_an_error_call_covers_only_its_own_python_values(case: str) -> None:
    """allow_once(exc.call) compares with the values the refused call really had."""
    original, other = DIFFERENT[case]
    ran: list[Any] = []
    take = make_take(ran)
    exc = refused(take, original)
    with allow_once(exc.call):
        refused(take, other)
        assert take(original) == "taken"
    assert ran == [original]


@pytest.mark.parametrize(
    ("granted", "called"),
    [
        ({"b": 2, "a": 1}, {"a": 1, "b": 2}),
        (float("nan"), float("nan")),
        ([{"x": (1, "y")}], [{"x": (1, "y")}]),
        ({(1, "a"): [None], 2: frozenset({1, 2})}, {2: frozenset({2, 1}), (1, "a"): [None]}),
    ],
)
def test_exactly_equal_arguments_are_covered(granted: Any, called: Any) -> None:
    """Key order does not matter; NaN matches NaN; equal nested values match."""
    ran: list[Any] = []
    take = make_take(ran)
    with allow_once("take", {"value": granted}):
        assert take(called) == "taken"
    assert len(ran) == 1


def test_a_list_changed_in_place_after_the_approval_is_not_covered() -> None:
    """The person approved ["a"]; the caller appends to the same list: not the approved call."""
    ran: list[Any] = []
    take = make_take(ran)
    recipients = ["a"]
    exc = refused(take, recipients)
    with allow_once(exc.call):
        recipients.append("mallory")
        refused(take, recipients)
    assert ran == []


def test_a_list_changed_in_place_inside_the_block_is_not_covered() -> None:
    """The name form keeps a snapshot: the granted list changed later does not widen the grant."""
    ran: list[Any] = []
    take = make_take(ran)
    recipients = ["a"]
    with allow_once("take", {"value": recipients}):
        recipients.append("mallory")
        refused(take, recipients)
        refused(take, ["a", "mallory"])
    assert ran == []


def test_an_uncomparable_argument_is_not_covered() -> None:
    """An object whose == raises never matches a grant (fail closed), and does not crash."""

    class Weird:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no")

        __hash__ = object.__hash__

    ran: list[Any] = []
    take = make_take(ran)
    with allow_once("take", {"value": Weird()}):
        refused(take, Weird())
    assert ran == []


@settings(max_examples=80, deadline=None)
@given(value=st.one_of(finite_json, with_non_finite))
def test_a_grant_covers_an_equal_copy_of_any_json_value(value: Any) -> None:
    """Any JSON-like value (NaN included): a grant for a deep copy covers the value, once."""
    ran: list[Any] = []
    take = make_take(ran)
    with allow_once("take", {"value": copy.deepcopy(value)}):
        assert take(value) == "taken"
        refused(take, value)
    assert len(ran) == 1


def _floats_for_ints(value: Any) -> Any:
    """The same data with every int (not bool) turned into a float: equal as JSON numbers."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_floats_for_ints(v) for v in value]
    if isinstance(value, dict):
        return {k: _floats_for_ints(v) for k, v in value.items()}
    return value


@settings(max_examples=80, deadline=None)
@given(value=finite_json)
def test_a_grant_for_ints_does_not_cover_the_same_numbers_as_floats(value: Any) -> None:
    """1 and 1.0 are different arguments, at any depth."""
    floated = _floats_for_ints(value)
    assume(floated != value or repr(floated) != repr(value))
    ran: list[Any] = []
    take = make_take(ran)
    with allow_once("take", {"value": value}):
        refused(take, floated)
    assert ran == []
