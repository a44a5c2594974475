"""Tests for ``toolguard.tool``: names, descriptions, JSON schemas and calling."""

from __future__ import annotations

import enum
import inspect
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

import toolguard
from toolguard import Tool, tool


class Priority(enum.Enum):
    """How urgent a message is."""

    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = "Jakarta"


def send_email(
    to: str,
    subject: str,
    body: str,
    cc: Optional[list[str]] = None,  # noqa: UP045 - Optional is what this test is about
    priority: Priority = Priority.LOW,
) -> str:
    """Send an email.

    The message goes out immediately.

    Args:
        to: recipient address.
        subject: subject line.
        body: message text.
        cc: extra recipients.
        priority: how urgent.
    """
    return f"sent to {to}"


def ship(
    address: Address,
    mode: Literal["air", "sea"] = "air",
    tags: list[str] | None = None,
) -> str:
    """Ship a parcel.

    Parameters
    ----------
    address : Address
        where to.
    mode : str
        transport.
    tags : list of str
        labels.
    """
    return f"{mode}:{address.street}:{tags}"


def transfer(
    amount: Annotated[int, Field(description="cents to move")],
    to: str,
    /,
    note: str = "",
) -> str:
    """Transfer money.

    :param amount: docstring amount.
    :param to: the account.
    :param note: memo.
    """
    return f"{amount}->{to} ({note})"


GOOGLE_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Priority": {
            "description": "How urgent a message is.",
            "enum": ["low", "high"],
            "title": "Priority",
            "type": "string",
        },
    },
    "additionalProperties": False,
    "properties": {
        "to": {"description": "recipient address.", "type": "string"},
        "subject": {"description": "subject line.", "type": "string"},
        "body": {"description": "message text.", "type": "string"},
        "cc": {
            "anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}],
            "default": None,
            "description": "extra recipients.",
        },
        "priority": {"$ref": "#/$defs/Priority", "default": "low", "description": "how urgent."},
    },
    "required": ["to", "subject", "body"],
    "type": "object",
}

NUMPY_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Address": {
            "description": "A postal address.",
            "properties": {
                "street": {"title": "Street", "type": "string"},
                "city": {"default": "Jakarta", "title": "City", "type": "string"},
            },
            "required": ["street"],
            "title": "Address",
            "type": "object",
        },
    },
    "additionalProperties": False,
    "properties": {
        "address": {"$ref": "#/$defs/Address", "description": "where to."},
        "mode": {
            "default": "air",
            "description": "transport.",
            "enum": ["air", "sea"],
            "type": "string",
        },
        "tags": {
            "anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}],
            "default": None,
            "description": "labels.",
        },
    },
    "required": ["address"],
    "type": "object",
}

REST_SCHEMA: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "amount": {"description": "cents to move", "type": "integer"},
        "to": {"description": "the account.", "type": "string"},
        "note": {"default": "", "description": "memo.", "type": "string"},
    },
    "required": ["amount", "to"],
    "type": "object",
}


# --- decorating --------------------------------------------------------------------------


def test_bare_decorator_uses_function_name_and_docstring_prose() -> None:
    """Bare @tool takes the function's name and the docstring's prose as the description."""
    t = tool(send_email)
    assert isinstance(t, Tool)
    assert t.name == "send_email"
    assert t.description == "Send an email.\n\nThe message goes out immediately."
    assert t.func is send_email
    assert t.is_async is False
    assert t.guarded is False
    assert t.approval is None


def test_decorator_with_name_and_description_overrides() -> None:
    """@tool(name=..., description=...) overrides both; the schema still comes from the function."""
    t = tool(name="mail", description="Send a message to someone.")(send_email)
    assert t.name == "mail"
    assert t.description == "Send a message to someone."
    assert t.parameters == GOOGLE_SCHEMA


def test_empty_description_override_is_kept() -> None:
    """description="" is an explicit override and is not replaced by the docstring."""
    t = tool(description="")(send_email)
    assert t.description == ""


def test_called_with_no_options_returns_a_decorator() -> None:
    """@tool() with parentheses and no options behaves like bare @tool."""
    t = tool()(ship)
    assert t.name == "ship"
    assert t.description == "Ship a parcel."


def test_function_without_docstring_has_empty_description() -> None:
    """A function with no docstring gets an empty description and undocumented properties."""

    @tool
    def count(n: int) -> int:
        return n

    assert count.description == ""
    assert count.parameters == {
        "additionalProperties": False,
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "type": "object",
    }


def test_keeps_function_metadata() -> None:
    """The Tool carries the wrapped function's __name__, __doc__ and __wrapped__."""
    t = tool(send_email)
    assert t.__name__ == "send_email"  # type: ignore[attr-defined]
    assert t.__doc__ == send_email.__doc__
    assert t.__wrapped__ is send_email  # type: ignore[attr-defined]


def test_repr() -> None:
    """repr shows the tool name, and ', guarded' for a guarded tool."""
    assert repr(tool(send_email)) == "<Tool 'send_email'>"
    assert repr(toolguard.requires_approval(tool(send_email))) == "<Tool 'send_email', guarded>"


# --- schemas -----------------------------------------------------------------------------


def test_google_docstring_schema() -> None:
    """Google-style Args, defaults, Optional[list[str]] and an Enum give this exact schema."""
    assert tool(send_email).parameters == GOOGLE_SCHEMA


def test_numpy_docstring_schema() -> None:
    """NumPy-style Parameters, a nested pydantic model, Literal and list[str] | None."""
    assert tool(ship).parameters == NUMPY_SCHEMA


def test_rest_docstring_schema_with_annotated_field_description() -> None:
    """reST :param: lines; Annotated[int, Field(description=...)] wins over the docstring."""
    assert tool(transfer).parameters == REST_SCHEMA


def test_openai_schema() -> None:
    """openai_schema is the whole Chat Completions function-tool dict."""
    assert tool(transfer).openai_schema == {
        "type": "function",
        "function": {
            "name": "transfer",
            "description": "Transfer money.",
            "parameters": REST_SCHEMA,
        },
    }


def test_openai_schema_uses_overridden_name() -> None:
    """openai_schema uses the name given to @tool(name=...)."""
    t = tool(name="move_money")(transfer)
    assert t.openai_schema["function"]["name"] == "move_money"


def test_schema_is_built_once() -> None:
    """parameters is the same object on every access, also inside openai_schema."""
    t = tool(send_email)
    first = t.parameters
    assert t.parameters is first
    assert t.openai_schema["function"]["parameters"] is first


def test_schema_of_async_function() -> None:
    """An async function gets the same kind of schema as a sync one."""

    @tool
    async def lookup(query: str, limit: int = 10) -> list[str]:
        """Look something up.

        Args:
            query: words to look for.
            limit: most results to return.
        """
        return [query] * limit

    assert lookup.is_async is True
    assert lookup.description == "Look something up."
    assert lookup.parameters == {
        "additionalProperties": False,
        "properties": {
            "query": {"description": "words to look for.", "type": "string"},
            "limit": {"default": 10, "description": "most results to return.", "type": "integer"},
        },
        "required": ["query"],
        "type": "object",
    }


def test_one_unresolvable_annotation_keeps_the_other_types() -> None:
    """A local class under postponed annotations must not erase the type of the other params."""

    class Local(enum.Enum):
        A = "a"

    @tool
    def pick(choice: Local, count: int) -> None:
        """Pick."""

    assert pick.parameters["properties"]["count"] == {"type": "integer"}


# --- calling -----------------------------------------------------------------------------


def test_calling_the_tool_calls_the_function() -> None:
    """Calling an unguarded Tool runs the function with the same arguments."""
    t = tool(send_email)
    assert t("alice@example.com", "Hi", body="Hello") == "sent to alice@example.com"


def test_calling_with_nested_model() -> None:
    """A Tool passes a pydantic model argument through unchanged."""
    t = tool(ship)
    assert t(Address(street="Jl. Sudirman 1"), mode="sea") == "sea:Jl. Sudirman 1:None"


async def test_calling_an_async_tool_returns_its_coroutine_result() -> None:
    """Calling an async Tool gives an awaitable with the function's result."""
    calls: list[int] = []

    @tool
    async def double(n: int) -> int:
        """Double a number."""
        calls.append(n)
        return n * 2

    assert await double(21) == 42
    assert calls == [21]


def test_positional_only_parameters() -> None:
    """Positional-only parameters appear in the schema and are called positionally."""
    t = tool(transfer)
    assert t(500, "bob", note="rent") == "500->bob (rent)"
    assert t.parameters["required"] == ["amount", "to"]


async def test_execute_passes_positional_only_parameters_positionally() -> None:
    """execute() runs a tool with validated args, giving positional-only ones by position."""
    t = tool(transfer)
    validated = t.validate_args({"amount": 500, "to": "bob"})
    assert validated == {"amount": 500, "to": "bob", "note": ""}
    assert await t.execute(validated) == "500->bob ()"
    assert await t.execute(validated, in_thread=False) == "500->bob ()"


# --- rejected at decoration time ---------------------------------------------------------


def _var_positional(a: int, *rest: int) -> None:
    """Take many."""


def _var_keyword(a: int, **options: str) -> None:
    """Take options."""


def _generator() -> Any:
    """Yield."""
    yield 1


async def _async_generator() -> Any:
    """Yield later."""
    yield 1


class _Action:
    """Not a function."""


def test_var_positional_rejected() -> None:
    """A function with *args cannot become a tool: a model only passes named arguments."""
    with pytest.raises(TypeError) as info:
        tool(_var_positional)
    assert str(info.value) == (
        "The tool '_var_positional' has the parameter *rest: 'int': a model can only pass named"
        " arguments. Replace *args/**kwargs with named parameters."
    )


def test_var_keyword_rejected() -> None:
    """A function with **kwargs cannot become a tool: a model only passes named arguments."""
    with pytest.raises(TypeError) as info:
        tool(_var_keyword)
    assert str(info.value) == (
        "The tool '_var_keyword' has the parameter **options: 'str': a model can only pass named"
        " arguments. Replace *args/**kwargs with named parameters."
    )


def test_class_rejected() -> None:
    """A class cannot become a tool."""
    with pytest.raises(TypeError) as info:
        tool(_Action)
    assert str(info.value) == (
        "@tool cannot wrap the class _Action: decorate a function or method that performs the"
        " action instead."
    )


@pytest.mark.parametrize(
    ("func", "qualname"),
    [(_generator, "_generator"), (_async_generator, "_async_generator")],
)
def test_generators_rejected(func: Any, qualname: str) -> None:
    """Generators and async generators cannot become tools: a tool returns its whole result."""
    with pytest.raises(TypeError) as info:
        tool(func)
    assert str(info.value) == (
        f"@tool cannot wrap the generator '{qualname}': a tool must return its whole result."
        " Collect the items into a list and return it."
    )


def test_non_callable_rejected() -> None:
    """Something that is not callable cannot become a tool."""
    with pytest.raises(TypeError) as info:
        tool(5)  # type: ignore[call-overload]
    assert str(info.value) == "@tool needs a function, got int."


def test_signature_check_uses_override_name() -> None:
    """The *args error names the tool by the name given to @tool(name=...)."""
    with pytest.raises(TypeError) as info:
        tool(name="many")(_var_positional)
    assert str(info.value) == (
        "The tool 'many' has the parameter *rest: 'int': a model can only pass named"
        " arguments. Replace *args/**kwargs with named parameters."
    )


def test_inspect_signature_of_tool() -> None:
    """inspect.signature of a Tool is the function's signature."""
    assert inspect.signature(tool(transfer)) == inspect.signature(transfer)


def test_local_class_in_postponed_annotations_is_resolved() -> None:
    """A class defined where the decorator runs resolves, so its schema is exact."""

    class Size(enum.Enum):
        S = "s"
        M = "m"

    @tool
    def order(size: Size, count: int) -> None:
        """Order."""

    assert order.parameters["properties"] == {
        "size": {"$ref": "#/$defs/Size"},
        "count": {"type": "integer"},
    }
    assert order.validate_args({"size": "m", "count": 2}) == {"size": Size.M, "count": 2}


def test_unknown_annotation_name_leaves_only_that_parameter_untyped() -> None:
    """An annotation naming nothing in scope makes that one parameter accept anything."""

    @tool
    def pick(choice: Missing, count: int) -> None:  # type: ignore[name-defined]  # noqa: F821
        """Pick."""

    assert pick.parameters["properties"] == {"choice": {}, "count": {"type": "integer"}}
