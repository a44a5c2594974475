"""Fail closed: a guarded call the guard cannot bind or judge never runs the body.

Attack class: arguments or predicates that make the ``when=`` check give a wrong "no approval
needed" — NaN or ±Infinity anywhere in the arguments (``nan > 1000`` is False), a predicate that
raises or answers something other than ``False``, objects whose comparison raises, arguments
that do not bind to the signature the guard sees (a ``functools.wraps`` wrapper adding
``retries=``), and signatures that lie (``__wrapped__`` / ``__signature__``). Every path is
attacked: the inlined sync wrapper, the async wrapper, ``Tool.__call__`` and the runner.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import types
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.adversarial.strategies import finite_json, non_finite, with_non_finite
from toolguard import (
    ApprovalPolicy,
    ApprovalRequiredError,
    Runner,
    Tool,
    ToolCall,
    requires_approval,
    tool,
)

Predicate = Callable[[dict[str, Any]], Any]


def _guarded_paths(when: Predicate) -> dict[str, tuple[Callable[..., Any], list[Any]]]:
    """The same guarded transfer through every direct-call path, each recording its runs."""
    paths: dict[str, tuple[Callable[..., Any], list[Any]]] = {}

    def sync_fn() -> tuple[Callable[..., Any], list[Any]]:
        ran: list[Any] = []

        def pay(amount: Any, to: str = "bob") -> str:
            ran.append(amount)
            return "paid"

        return requires_approval(when=when)(pay), ran

    def async_fn() -> tuple[Callable[..., Any], list[Any]]:
        ran: list[Any] = []

        async def pay(amount: Any, to: str = "bob") -> str:
            ran.append(amount)
            return "paid"

        return requires_approval(when=when)(pay), ran

    def sync_tool() -> tuple[Callable[..., Any], list[Any]]:
        fn, ran = sync_fn()
        return requires_approval(when=when)(tool(fn.__wrapped__)), ran  # type: ignore[attr-defined]

    def async_tool() -> tuple[Callable[..., Any], list[Any]]:
        fn, ran = async_fn()
        return requires_approval(when=when)(tool(fn.__wrapped__)), ran  # type: ignore[attr-defined]

    for name, build in [
        ("sync function", sync_fn),
        ("async function", async_fn),
        ("sync Tool", sync_tool),
        ("async Tool", async_tool),
    ]:
        paths[name] = build()
    return paths


PATHS = ["sync function", "async function", "sync Tool", "async Tool"]


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """``"ran"``, ``"approval"``, ``"TypeError: <text>"`` or ``"refused: <error>"``."""
    try:
        result = fn(*args, **kwargs)
        if inspect.iscoroutine(result):
            coro = result

            async def wait() -> Any:
                return await coro

            result = anyio.run(wait)
    except ApprovalRequiredError:
        return "approval"
    except TypeError as exc:
        return f"TypeError: {exc}"
    except Exception as exc:  # e.g. a payload that cannot be built: still nothing ran
        return f"refused: {type(exc).__name__}"
    assert result == "paid"
    return "ran"


def attempt(path: str, when: Predicate, *args: Any, **kwargs: Any) -> tuple[str, list[Any]]:
    fn, ran = _guarded_paths(when)[path]
    return outcome(fn, *args, **kwargs), ran


# ----------------------------------------------------------------------------- controls


@pytest.mark.parametrize("path", PATHS)
def test_an_allowed_call_runs_and_a_large_one_needs_approval(path: str) -> None:
    """Control: the ordinary predicate still lets small calls run and stops large ones."""
    assert attempt(path, lambda a: a["amount"] > 1000, 5) == ("ran", [5])
    assert attempt(path, lambda a: a["amount"] > 1000, 5.5) == ("ran", [5.5])
    assert attempt(path, lambda a: a["amount"] > 1000, [1, 2.0, {"x": 3.5}]) == (
        "approval",  # list > int raises TypeError: cannot judge
        [],
    )
    assert attempt(path, lambda a: False, [1, 2.0, {"x": 3.5}]) == ("ran", [[1, 2.0, {"x": 3.5}]])
    assert attempt(path, lambda a: a["amount"] > 1000, 5000) == ("approval", [])


# ----------------------------------------------------------------------------- predicates


class BoomError(Exception):
    """A predicate's own exception."""


def _raise_boom(args: dict[str, Any]) -> bool:
    raise BoomError


class Unorderable:
    """An object whose comparison raises."""

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")


RAISING_PREDICATES: dict[str, Predicate] = {
    "KeyError": lambda a: a["amonut"] > 1000,
    "ZeroDivisionError": lambda a: 1 / 0 > 1,
    "comparing str with int": lambda a: a["to"] > 1000,
    "own exception": _raise_boom,
    "RecursionError": lambda a: (_ for _ in ()).throw(RecursionError()),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", list(RAISING_PREDICATES))
def test_a_predicate_that_raises_means_approval(path: str, kind: str) -> None:
    """Whatever a predicate raises, the call needs approval and the body does not run."""
    assert attempt(path, RAISING_PREDICATES[kind], 5) == ("approval", [])


@pytest.mark.parametrize("path", PATHS)
def test_an_object_whose_comparison_raises_means_approval(path: str) -> None:
    """``amount > 1000`` raising inside the predicate: approval, nothing runs."""
    assert attempt(path, lambda a: a["amount"] > 1000, Unorderable()) == ("approval", [])


class BadBool:
    """A verdict whose truth value raises."""

    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


class FalseLike:
    """A verdict that claims to be false."""

    def __bool__(self) -> bool:
        return False


NOT_FALSE: dict[str, Any] = {
    "None": None,
    "0": 0,
    "0.0": 0.0,
    "empty string": "",
    "empty list": [],
    "True": True,
    "a string": "no",
    "bool raises": BadBool(),
    "falsy object": FalseLike(),
    "nan": math.nan,
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("verdict", list(NOT_FALSE))
def test_only_false_itself_lets_a_call_skip_approval(path: str, verdict: str) -> None:
    """Any answer but ``False`` itself (None, 0, objects, a raising __bool__) means approval."""
    value = NOT_FALSE[verdict]
    assert attempt(path, lambda a: value, 5) == ("approval", [])


def test_an_async_predicate_is_refused_when_decorating() -> None:
    """``when=`` with a coroutine function is refused: a sync call cannot await it."""

    async def later(args: dict[str, Any]) -> bool:
        return False

    with pytest.raises(TypeError) as info:
        requires_approval(when=later)  # type: ignore[arg-type]
    assert str(info.value) == (
        "when= must be a plain function returning True or False: an async predicate"
        " cannot be awaited by a sync call"
    )


@pytest.mark.filterwarnings("error")
def test_a_policy_whose_predicate_returns_a_coroutine_needs_approval() -> None:
    """A sync predicate that hands back a coroutine: approval, and the coroutine is closed."""

    async def later(args: dict[str, Any]) -> bool:
        return False

    def sneaky(args: dict[str, Any]) -> Any:
        return later(args)  # not a coroutine function, but it returns a coroutine

    assert ApprovalPolicy(when=sneaky).needs_approval({"amount": 5}) is True
    assert attempt("sync function", sneaky, 5) == ("approval", [])


# ----------------------------------------------------------------------------- NaN and infinity


@dataclasses.dataclass
class Box:
    """A dataclass holding a value."""

    value: Any


class Model(BaseModel):
    """A pydantic model holding a value."""

    value: Any


class MyFloat(float):
    """A float subclass."""


NON_FINITE_VALUES: dict[str, Any] = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "float subclass": MyFloat("nan"),
    "in a list": [1, 2, math.nan],
    "in a tuple": (1, (2, -math.inf)),
    "dict value": {"a": {"b": [math.inf]}},
    "dict key": {math.nan: 1},
    "in a set": {1.0, math.inf},
    "in a frozenset": frozenset({math.nan}),
    "in a deque": deque([math.inf]),
    "in a mapping proxy": types.MappingProxyType({"a": math.nan}),
    "Decimal NaN": Decimal("NaN"),
    "Decimal sNaN": Decimal("sNaN"),
    "Decimal Infinity": Decimal("-Infinity"),
    "complex": complex(math.inf, 0),
    "complex nan": complex(0, math.nan),
    "dataclass": Box([Box(math.nan)]),
    "pydantic model": Model(value={"x": math.inf}),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("where", list(NON_FINITE_VALUES))
def test_a_non_finite_number_anywhere_means_approval(path: str, where: str) -> None:
    """Even a predicate that says "never needs approval" cannot wave a NaN or infinity through."""
    assert attempt(path, lambda a: False, NON_FINITE_VALUES[where]) == ("approval", [])
    assert attempt(path, lambda a: a["amount"] > 1000, NON_FINITE_VALUES[where]) == (
        "approval",
        [],
    )


@pytest.mark.parametrize("path", ["sync function", "sync Tool"])
def test_a_non_finite_keyword_argument_means_approval(path: str) -> None:
    """A NaN passed by keyword, in a parameter the predicate does not even look at."""
    assert attempt(path, lambda a: a["amount"] > 1000, 5, to=math.nan) == ("approval", [])


def test_a_cyclic_argument_is_scanned_once() -> None:
    """A list that contains itself is scanned (finite: runs; with a NaN: approval)."""
    loop: list[Any] = [1]
    loop.append(loop)
    assert attempt("sync function", lambda a: False, loop) == ("ran", [loop])
    loop.append(math.nan)
    result, ran = attempt("sync function", lambda a: False, loop)
    assert result != "ran"  # the payload of a cyclic value cannot be built: it raises
    assert ran == []


def test_deeply_nested_arguments_are_scanned_without_recursion() -> None:
    """A NaN 100,000 levels deep is found (the scan is iterative); nothing runs."""
    value: Any = math.nan
    for _ in range(100_000):
        value = [value]
    result, ran = attempt("sync function", lambda a: False, value)
    assert result != "ran"  # approval, or a payload too deep to build: never a run
    assert ran == []


@settings(max_examples=60, deadline=None)
@given(value=with_non_finite, path=st.sampled_from(PATHS))
def test_hostile_json_with_a_non_finite_number_always_needs_approval(value: Any, path: str) -> None:
    """Any JSON-like data hiding a NaN or infinity, at any depth: approval, never a run."""
    assert attempt(path, lambda a: False, value) == ("approval", [])


@settings(max_examples=60, deadline=None)
@given(value=finite_json)
def test_plain_json_still_runs(value: Any) -> None:
    """Control for the property above: finite JSON data with a "no" predicate runs."""
    assert attempt("sync function", lambda a: False, value) == ("ran", [value])


# ----------------------------------------------------------------------------- the runner


def _runner_with(when: Predicate) -> tuple[Runner, list[Any]]:
    ran: list[Any] = []

    @requires_approval(when=when)
    def pay(amount: float, to: str = "bob") -> str:
        """Pay someone."""
        ran.append(amount)
        return "paid"

    return Runner([pay], sync_in_thread=False), ran


@pytest.mark.parametrize(
    "when",
    [*RAISING_PREDICATES.values(), *(lambda a, v=v: v for v in NOT_FALSE.values())],
)
async def test_the_runner_pauses_a_call_the_predicate_cannot_judge(when: Predicate) -> None:
    """In the runner, a raising or non-False predicate pauses the call; the turn does not crash."""
    runner, ran = _runner_with(when)
    step = await runner.run([ToolCall(id="c1", name="pay", args={"amount": 5})])
    assert step.pending is not None
    assert [(a.name, a.args, a.status) for a in step.pending.actions] == [
        ("pay", {"amount": 5}, "requested")
    ]
    assert step.results == []
    assert ran == []


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
async def test_the_runner_refuses_a_call_with_a_non_finite_number(value: float) -> None:
    """NaN/Infinity from a model: never run, never shown for review, an error naming the field.

    The policy itself is closed for them too (needs_approval is True), but the runner
    refuses such arguments before asking it (they are not JSON numbers).
    """
    runner, ran = _runner_with(lambda a: a["amount"] > 1000)
    assert runner.toolset["pay"].needs_approval({"amount": value, "to": "bob"}) is True
    step = await runner.run([ToolCall(id="c1", name="pay", args={"amount": value})])
    assert step.pending is None
    assert [(r.status, r.outcome, r.content) for r in step.results] == [
        (
            "error",
            "invalid_arguments",
            (
                "Invalid arguments for tool `pay`: 'amount': NaN and Infinity are not valid"
                " JSON numbers"
            ),
        )
    ]
    assert ran == []


@given(value=non_finite)
def test_approval_policy_needs_approval_for_non_finite_numbers(value: float) -> None:
    """ApprovalPolicy.needs_approval, the runner's check, is closed for NaN and ±Infinity."""
    assert ApprovalPolicy(when=lambda a: False).needs_approval({"amount": value}) is True
    assert ApprovalPolicy(when=lambda a: False).needs_approval({"amount": 5.0}) is False


# ----------------------------------------------------------------------------- binding


def transfer(amount: float, to: str) -> str:
    """Move money."""
    return "paid"


def _retrying(func: Callable[..., Any], ran: list[Any]) -> Callable[..., Any]:
    """A decorator that adds its own ``retries=`` parameter (functools.wraps hides it)."""

    @functools.wraps(func)
    def wrapper(*args: Any, retries: int = 3, **kwargs: Any) -> Any:
        ran.append((args, kwargs, retries))
        return func(*args, **kwargs)

    return wrapper


RETRIES_ERROR = (
    "The guarded tool `transfer` did not run: got an unexpected keyword argument 'retries'"
    " (the guard judges a call by the signature the function reports,"
    " transfer(amount, to)). A decorator under @requires_approval that adds"
    " parameters must declare them in __signature__."
)


@pytest.mark.parametrize("when", [lambda a: a["amount"] > 1000, lambda a: False, None])
def test_a_wrapper_parameter_the_guard_cannot_see_never_runs(when: Predicate | None) -> None:
    """0.1.0 ran the body of @requires_approval(when=...) over a wrapper taking ``retries=``."""
    ran: list[Any] = []
    guarded = requires_approval(when=when)(_retrying(transfer, ran))
    assert outcome(guarded, 5, "bob", retries=1) == f"TypeError: {RETRIES_ERROR}"
    assert outcome(guarded, amount=5, to="bob", retries=1) == f"TypeError: {RETRIES_ERROR}"
    assert ran == []
    if when is not None and when({"amount": 5}) is False:
        assert outcome(guarded, 5, "bob") == "ran"
        assert ran == [((5, "bob"), {}, 3)]


async def test_an_async_wrapper_parameter_the_guard_cannot_see_never_runs() -> None:
    """The same over an async wrapper."""
    ran: list[Any] = []

    async def send(amount: float, to: str) -> str:
        return "paid"

    @functools.wraps(send)
    async def wrapper(*args: Any, retries: int = 3, **kwargs: Any) -> Any:
        ran.append(retries)
        return await send(*args, **kwargs)

    guarded = requires_approval(when=lambda a: False)(wrapper)
    with pytest.raises(TypeError) as info:
        await guarded(5, "bob", retries=1)
    assert str(info.value) == RETRIES_ERROR.replace("transfer", "send")
    assert ran == []
    assert await guarded(5, "bob") == "paid"
    assert ran == [3]


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((5, "bob", "extra"), {}, "takes 2 positional arguments but 3 were given"),
        ((5,), {}, "missing 1 required positional argument: 'to'"),
        ((5,), {"amount": 6, "to": "bob"}, "got multiple values for argument 'amount'"),
        ((), {"amount": 5, "to": "bob", "memo": "x"}, "got an unexpected keyword argument 'memo'"),
    ],
)
@pytest.mark.parametrize("when", [lambda a: False, None])
def test_a_call_that_does_not_bind_raises_the_functions_own_type_error(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: str, when: Predicate | None
) -> None:
    """An honest function: the TypeError Python would raise, from the guard, body not run."""
    ran: list[Any] = []

    def pay(amount: float, to: str) -> str:
        ran.append(amount)
        return "paid"

    guarded = requires_approval(when=when)(pay)
    qualname = pay.__qualname__
    assert outcome(guarded, *args, **kwargs) == f"TypeError: {qualname}() {error}"
    assert ran == []


def test_a_concrete_wrapper_with_other_parameters_is_refused_when_decorating() -> None:
    """functools.wraps over a wrapper with its own concrete parameters: judged ≠ run, refused."""

    def with_retries(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(amount: float, to: str, retries: int = 3) -> Any:
            return func(amount, to)

        return wrapper

    with pytest.raises(TypeError) as info:
        requires_approval(when=lambda a: False)(with_retries(transfer))
    assert str(info.value) == (
        "@requires_approval cannot guard transfer: it reports the signature"
        " (amount, to) but is called with (amount, to, retries=3)"
        " (functools.wraps or __signature__ copied another function's), so a call could be"
        " judged as one call and run as another. Make __signature__ match the real parameters,"
        " or guard the inner function."
    )


def test_a_lying_signature_default_is_refused_when_decorating() -> None:
    """__signature__ claims amount=0 while the code defaults to a million: refused."""

    def pay(to: str, amount: float = 1_000_000) -> str:
        return "paid"

    pay.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("to", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
            inspect.Parameter(
                "amount", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=0, annotation=float
            ),
        ]
    )
    with pytest.raises(TypeError) as info:
        requires_approval(when=lambda a: a["amount"] > 1000)(pay)
    assert str(info.value).startswith(
        "@requires_approval cannot guard"
        " test_a_lying_signature_default_is_refused_when_decorating.<locals>.pay: it reports the"
        " signature (to, amount=0) but is called with (to, amount=1000000)"
    )


def test_a_swapped_parameter_order_is_refused_when_decorating() -> None:
    """__wrapped__ pointing at a function with the same names in another order: refused."""

    def inner(amount: float, to: str) -> str:
        return "paid"

    def outer(to: str, amount: float) -> str:
        return "paid"

    outer.__wrapped__ = inner  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"reports the signature \(amount, to\) but is called"):
        requires_approval(outer)


# ----------------------------------------------------------------------------- other callables


class Bank:
    """Methods of every kind."""

    def __init__(self) -> None:
        self.ran: list[float] = []

    @requires_approval(when=lambda a: a["amount"] > 1000)
    def pay(self, amount: float, to: str) -> str:
        """Pay from this bank."""
        self.ran.append(amount)
        return "paid"

    @classmethod
    @requires_approval(when=lambda a: a["amount"] > 1000)
    def pay_cls(cls, amount: float, to: str) -> str:
        """Pay from the class."""
        CLASS_RAN.append(amount)
        return "paid"

    def plain(self, amount: float, to: str) -> str:
        """A method guarded after binding."""
        self.ran.append(amount)
        return "paid"


CLASS_RAN: list[float] = []


class Payer:
    """A callable object."""

    def __init__(self) -> None:
        self.ran: list[float] = []

    def __call__(self, amount: float, to: str) -> str:
        self.ran.append(amount)
        return "paid"


def _callables() -> dict[str, tuple[Callable[..., Any], Callable[[], list[Any]]]]:
    bank, payer = Bank(), Payer()
    partial_ran: list[Any] = []

    def partial_target(amount: float, to: str) -> str:
        partial_ran.append(amount)
        return "paid"

    bound = Bank()
    CLASS_RAN.clear()
    guard = requires_approval(when=lambda a: a["amount"] > 1000)
    return {
        "method in class body": (bank.pay, lambda: bank.ran),
        "classmethod over the guard": (Bank.pay_cls, lambda: CLASS_RAN),
        "bound method": (guard(bound.plain), lambda: bound.ran),
        "callable object": (guard(payer), lambda: payer.ran),
        "partial": (guard(functools.partial(partial_target, to="bob")), lambda: partial_ran),
    }


@pytest.mark.parametrize(
    "kind",
    ["method in class body", "classmethod over the guard", "bound method", "callable object"],
)
def test_methods_and_callable_objects_fail_closed(kind: str) -> None:
    """Bound methods, classmethods, callable objects: allowed runs, the rest never does."""
    fn, ran = _callables()[kind]
    assert outcome(fn, 5, "bob") == "ran"
    assert outcome(fn, 5000, "bob") == "approval"
    assert outcome(fn, math.nan, "bob") == "approval"
    assert outcome(fn, Unorderable(), "bob") == "approval"
    assert outcome(fn, 5, "bob", retries=1).startswith("TypeError: ")
    assert ran() == [5]


def test_a_partial_fails_closed() -> None:
    """functools.partial: judged with its bound keyword, fails closed like the others."""
    fn, ran = _callables()["partial"]
    assert outcome(fn, 5) == "ran"
    assert outcome(fn, 5, to="eve") == "ran"
    assert outcome(fn, 5000) == "approval"
    assert outcome(fn, math.inf) == "approval"
    assert outcome(fn, 5, "eve").startswith("TypeError: ")
    assert ran() == [5, 5]


def test_a_guarded_tool_over_a_lying_wrapper_runs_nothing_from_the_runner_either() -> None:
    """Tool.needs_approval (the runner's check) with a raising predicate is True, not an error."""
    guarded = Tool(transfer, approval=ApprovalPolicy(when=_raise_boom))
    assert guarded.needs_approval({"amount": 5.0, "to": "bob"}) is True


class BrokenMapping(Mapping[str, Any]):
    """A mapping that raises when looked into."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("broken")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("broken")

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("path", PATHS)
def test_an_argument_that_raises_when_scanned_means_approval(path: str) -> None:
    """A value the NaN scan cannot look into: approval, not a crash and not a run."""
    assert attempt(path, lambda a: False, BrokenMapping()) == ("approval", [])


def test_the_runner_check_does_not_crash_on_an_argument_it_cannot_scan() -> None:
    """ApprovalPolicy.needs_approval: True instead of an exception escaping into the turn."""
    assert ApprovalPolicy(when=lambda a: False).needs_approval({"x": BrokenMapping()}) is True
