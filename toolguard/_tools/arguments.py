"""A tool's arguments: the model built from a function's signature, its JSON schema, its errors.

:func:`build_args_model` turns a signature (type hints, defaults, the
docstring's per-parameter text) into a pydantic model; its JSON schema is
what the model sees, and validating a model's arguments against it gives
either the Python values or a :class:`ToolArgumentsError` naming each field.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from toolguard._policy.redact import scrub


class ToolArgumentsError(ValueError):
    """Arguments that do not fit a tool's schema (internal: becomes an error tool result)."""


_ALLOWED_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


def _resolve_hints(
    func: Callable[..., Any], signature: inspect.Signature, localns: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Type hints by parameter; one unresolvable annotation only loses its own type."""
    local = dict(localns or {})
    try:
        return typing.get_type_hints(func, localns=local, include_extras=True)
    except (NameError, TypeError, AttributeError, SyntaxError):
        pass
    hints: dict[str, Any] = {}
    globalns = getattr(inspect.unwrap(func), "__globals__", {})
    for param in signature.parameters.values():
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                # What get_type_hints does for one string annotation, in the function's scope.
                annotation = eval(annotation, globalns, local)  # noqa: S307
            except Exception:
                annotation = Any
        hints[param.name] = Any if annotation is param.empty else annotation
    return hints


def build_args_model(
    func: Callable[..., Any],
    name: str,
    signature: inspect.Signature,
    docs: Mapping[str, str],
    localns: Mapping[str, Any] | None = None,
) -> tuple[type[BaseModel], dict[str, str]]:
    hints = _resolve_hints(func, signature, localns)
    fields: dict[str, Any] = {}
    field_names: dict[str, str] = {}
    for index, param in enumerate(signature.parameters.values()):
        if param.kind not in _ALLOWED_KINDS:
            msg = (
                f"The tool {name!r} has the parameter {param}: a model can only pass named"
                " arguments. Replace *args/**kwargs with named parameters."
            )
            raise TypeError(msg)
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        description = docs.get(param.name)
        info = Field(default, alias=param.name, description=description)
        if typing.get_origin(annotation) is typing.Annotated:
            # An explicit Field(description=...) in Annotated wins over the docstring.
            for extra in typing.get_args(annotation)[1:]:
                if isinstance(extra, FieldInfo) and extra.description:
                    info = Field(default, alias=param.name)
        field = f"p{index}"
        fields[field] = (annotation, info)
        field_names[field] = param.name
    model: type[BaseModel] = create_model(
        f"{name}_args",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
        **fields,
    )
    return model, field_names


def strip_titles(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def describe_validation_error(
    name: str,
    exc: ValidationError,
    redacted: frozenset[str] = frozenset(),
    secrets: Iterable[str] = (),
) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        text = error["msg"]
        if error["loc"] and error["loc"][0] in redacted:
            # A validator's message may quote the value, and the location the keys inside it:
            # only the parameter and the error's kind are shown.
            location = str(error["loc"][0])
            text = f"invalid value ({error['type']}; the message is hidden: the value is secret)"
        problem = f"'{location}': {text}"
        if problem not in problems:
            problems.append(problem)
    return scrub(f"Invalid arguments for tool `{name}`: " + "; ".join(problems), secrets)
