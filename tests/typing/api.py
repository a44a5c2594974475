"""Static typing checks for the decorators (checked by mypy, never executed).

Each function below is only type-checked: ``assert_type`` fails mypy when the
inferred type differs from the one written down, and a ``type: ignore`` that
is not needed fails mypy too (strict mode warns about unused ignores), which
proves that a wrong call is refused. The functions take positional-only
parameters so that their types can be spelled with ``Callable[[...], ...]``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from typing_extensions import assert_type

import toolguard
from toolguard import Tool, Toolset, requires_approval, tool


def send_email(to: str, count: int, /) -> str:
    """Send an email."""
    return to * count


async def fetch(url: str, /) -> bytes:
    """Fetch a URL."""
    return url.encode()


def search(query: str, limit: int = 10) -> list[str]:
    """Search, with named parameters."""
    return [query] * limit


def check_tool_bare() -> None:
    """Bare @tool gives Tool[[params], return]; calling it returns the function's type."""
    t = tool(send_email)
    assert_type(t, Tool[[str, int], str])
    assert_type(t("a", 2), str)
    assert_type(t.name, str)
    assert_type(t.description, str)
    assert_type(t.parameters, dict[str, Any])
    assert_type(t.openai_schema, dict[str, Any])
    assert_type(t.func, Callable[[str, int], str])
    t("a", "b")  # type: ignore[arg-type]


def check_tool_keeps_parameter_names() -> None:
    """A Tool is called with the function's parameter names and defaults."""
    t = tool(search)
    assert_type(t(query="q"), list[str])
    assert_type(t("q", limit=3), list[str])
    t(text="q")  # type: ignore[call-arg]


def check_tool_with_options() -> None:
    """@tool(name=..., description=...) gives the same Tool type."""
    t = tool(name="mail", description="Send.")(send_email)
    assert_type(t, Tool[[str, int], str])


async def check_tool_async() -> None:
    """An async function gives a Tool whose call returns a coroutine of its result."""
    t = tool(fetch)
    assert_type(t, Tool[[str], Coroutine[Any, Any, bytes]])
    assert_type(await t("https://example.com"), bytes)


def check_requires_approval_bare() -> None:
    """Bare @requires_approval keeps the function's exact type."""
    guarded = requires_approval(send_email)
    assert_type(guarded, Callable[[str, int], str])
    assert_type(guarded("a", 2), str)


def check_requires_approval_keeps_parameter_names() -> None:
    """@requires_approval keeps parameter names and defaults for callers."""
    guarded = requires_approval(search)
    assert_type(guarded(query="q"), list[str])
    guarded(text="q")  # type: ignore[call-arg]


def check_requires_approval_with_options() -> None:
    """@requires_approval(when=..., description=...) keeps the function's exact type."""
    guarded = requires_approval(when=lambda args: args["count"] > 3, description="Check")(
        send_email
    )
    assert_type(guarded, Callable[[str, int], str])
    assert_type(requires_approval()(send_email), Callable[[str, int], str])


async def check_requires_approval_async() -> None:
    """An async function stays async under @requires_approval, bare and with options."""
    guarded = requires_approval(fetch)
    assert_type(guarded, Callable[[str], Coroutine[Any, Any, bytes]])
    assert_type(await guarded("https://example.com"), bytes)
    options = requires_approval(description="Check")(fetch)
    assert_type(options, Callable[[str], Coroutine[Any, Any, bytes]])


def check_requires_approval_on_tool() -> None:
    """requires_approval on a Tool gives a Tool of the same type."""
    assert_type(requires_approval(tool(send_email)), Tool[[str, int], str])
    assert_type(requires_approval(description="x")(tool(send_email)), Tool[[str, int], str])


def check_tool_over_guarded_function() -> None:
    """@tool over @requires_approval gives the Tool type of the original function."""
    assert_type(tool(requires_approval(send_email)), Tool[[str, int], str])


def check_when_must_be_a_predicate() -> None:
    """when= takes a predicate on the arguments dict, nothing else."""
    requires_approval(when=5)  # type: ignore[call-overload]


@requires_approval
def delete_path(path: str, /) -> None:
    """Delete a path."""


@requires_approval(when=lambda args: bool(args["force"]))
async def delete_later(path: str, /) -> int:
    """Delete a path, later."""
    return 0


@tool
def decorated_tool(query: str, limit: int, /) -> list[str]:
    """Search."""
    return [query] * limit


async def check_decorator_syntax() -> None:
    """Decorator syntax gives the same types as calling the decorators."""
    assert_type(delete_path, Callable[[str], None])
    assert_type(delete_later, Callable[[str], Coroutine[Any, Any, int]])
    assert_type(await delete_later("x"), int)
    assert_type(decorated_tool, Tool[[str, int], list[str]])
    assert_type(decorated_tool("q", 1), list[str])


def check_guard() -> None:
    """guard() gives a Toolset mapping names to Tools."""
    toolset = toolguard.guard([send_email, decorated_tool])
    assert_type(toolset, Toolset)
    assert_type(toolset["send_email"], Tool[Any, Any])
    assert_type(toolset.openai_tools(), list[dict[str, Any]])
    assert_type(toolset.guarded, list[str])
    assert_type(toolguard.guard({"mail": send_email}), Toolset)


def check_tool_from_schema() -> None:
    """Tool.from_schema gives a Tool taking keyword arguments; it guards like any other."""
    t = Tool.from_schema("lookup", "Look up.", {"type": "object"}, search)
    assert_type(t, Tool[..., Any])
    assert_type(requires_approval(t), Tool[..., Any])
    Tool.from_schema("lookup", "Look up.", "not a dict", search)  # type: ignore[arg-type]
