"""Tools described by a JSON Schema instead of a Python signature (``Tool.from_schema``).

An MCP server, an OpenAPI spec or a plugin registry describes its tools with a
JSON Schema and a callable that takes the arguments by name. :class:`SchemaTool`
keeps that schema exactly as given (enums, nested objects, descriptions,
``$ref`` / ``$defs``) as the tool's ``parameters`` and validates a model's
arguments against it with the ``jsonschema`` package, an optional dependency
(``pip install "toolguard-hitl[schema]"``) imported only when such a tool is
built, so the core keeps needing pydantic and anyio alone.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolguard._core.jsonable import clean_text, to_json_data
from toolguard._policy.redact import check_redact, redact_args, scrub, secret_names
from toolguard._tools.approval import ApprovalPolicy
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.binding import is_async_callable
from toolguard._tools.tool import Tool

INSTALL_HINT = 'Tool.from_schema needs the jsonschema package: pip install "toolguard-hitl[schema]"'

_MAX_PROBLEMS = 20
"""At most this many problems are listed in one error (the rest are counted)."""
_MAX_PROBLEM_CHARS = 300
"""Each problem's text is cut to this many characters (it may quote the input)."""


def _load_jsonschema() -> Any:
    try:
        return importlib.import_module("jsonschema")  # optional: imported on first use
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc


def _check_inputs(name: object, description: object, parameters: object, func: object) -> None:
    if not isinstance(name, str) or not name.strip():
        msg = f"Tool.from_schema: name must be a non-empty string, got {name!r}"
        raise ValueError(msg) if isinstance(name, str) else TypeError(msg)
    if not isinstance(description, str):
        msg = (
            f"Tool.from_schema: description of {name!r} must be a string,"
            f" got {type(description).__name__}"
        )
        raise TypeError(msg)
    if not isinstance(parameters, Mapping):
        msg = (
            f"Tool.from_schema: parameters of {name!r} must be a JSON Schema dict"
            f' ({{"type": "object", ...}}), got {type(parameters).__name__}'
        )
        raise TypeError(msg)
    if parameters.get("type") != "object":
        msg = (
            f"Tool.from_schema: parameters of {name!r} must be a JSON Schema with"
            f' "type": "object" (a model passes named arguments), got type'
            f" {parameters.get('type')!r}"
        )
        raise ValueError(msg)
    if not callable(func) or inspect.isclass(func):
        msg = (
            f"Tool.from_schema: func of {name!r} must be a function taking the arguments"
            f" as keyword arguments, got {type(func).__name__}"
        )
        raise TypeError(msg)
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        msg = (
            f"Tool.from_schema: func of {name!r} is a generator: a tool must return its"
            " whole result. Collect the items into a list and return it."
        )
        raise TypeError(msg)


def _compile_validator(name: str, parameters: dict[str, Any]) -> Any:
    jsonschema = _load_jsonschema()
    cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(parameters)
    except jsonschema.SchemaError as exc:
        msg = f"Tool.from_schema: parameters of {name!r} is not a valid JSON Schema: {exc.message}"
        raise ValueError(msg) from None
    return cls(parameters)


MAX_SCHEMA_WORK = 100_000
"""The most subschemas one check of a value may visit (``$ref`` followed, each ``anyOf``,
``oneOf`` and ``allOf`` branch counted): a schema past it is refused its check, so a hostile
schema whose shared ``$defs`` double at each level cannot make the check take minutes."""

_BRANCHING = ("anyOf", "oneOf", "allOf")
_NESTED = ("not", "if", "then", "else", "items", "contains", "additionalProperties")
_NESTED_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def schema_work(schema: Any, root: Any = None, *, limit: int = MAX_SCHEMA_WORK) -> int:
    """An upper bound of the subschemas one check of a value visits (stops past ``limit``).

    Each ``$ref`` into the same document counts the subschema it names (a
    recursive reference once), so shared definitions count each time they
    are used. Linear-size schemas whose references fan out at each level
    (``anyOf`` of two references to the level below, 26 times) count in the
    millions and are refused, while real tools' schemas count in the tens or
    hundreds.
    """
    root = schema if root is None else root
    memo: dict[str, int] = {}

    def resolve(ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # never fetched: the check itself refuses it
        node: Any = root
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def work(node: Any, active: frozenset[str], depth: int) -> int:
        if not isinstance(node, Mapping):
            return 0  # absent, or a boolean schema: nothing to visit below
        if depth > 256:
            return 1
        total = 1
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in active:
                return total  # recursive: bounded by the value's own size
            if ref not in memo:
                memo[ref] = work(resolve(ref), active | {ref}, depth + 1)
            total += memo[ref]
        for key in _BRANCHING:
            branches = node.get(key)
            if isinstance(branches, list):
                for branch in branches:
                    total += work(branch, active, depth + 1)
                    if total > limit:
                        return total
        for key in _NESTED:
            total += work(node.get(key), active, depth + 1)
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            for item in prefix:
                total += work(item, active, depth + 1)
        for key in _NESTED_MAPS:
            if key in ("$defs", "definitions"):
                continue  # counted where they are used
            children = node.get(key)
            if isinstance(children, Mapping):
                for child in children.values():
                    total += work(child, active, depth + 1)
                    if total > limit:
                        return total
        return total

    return work(schema, frozenset(), 0)


def _short(text: str) -> str:
    text = str(clean_text(text))
    if len(text) <= _MAX_PROBLEM_CHARS:
        return text
    return text[: _MAX_PROBLEM_CHARS - 1] + "…"


def _location(path: Any) -> list[str]:
    return [str(part) for part in path]


def _problems(error: Any, redacted: frozenset[str]) -> list[tuple[list[str], str]]:
    """``(location, message)`` pairs for one jsonschema error, in the core's wording.

    A message about the whole argument object (``maxProperties``, ``not``,
    ``anyOf`` at the top) quotes it with ``repr``: that quote shows the
    redacted parameters as ``REDACTED``.
    """
    path = _location(error.absolute_path)
    if path and path[0] in redacted:
        return [(path[:1], "")]  # the keys inside a secret value are secret too; the text hidden
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [key for key in error.validator_value or () if isinstance(key, str)]
        missing = [key for key in missing if key not in error.instance]
        if missing:
            return [([*path, key], "Field required") for key in missing]
    text = str(error.message)
    instance = error.instance
    if not path and redacted and isinstance(instance, Mapping) and redacted & instance.keys():
        text = text.replace(repr(instance), repr(redact_args(instance, redacted)))
    return [(path, text)]


class _SchemaBinder:
    """The part of the core's argument binder a schema tool needs: keyword arguments only."""

    __slots__ = ("_name",)

    full = None
    full_plain = None
    honest = True
    """Its own TypeError (keyword arguments only) is the one to raise: nothing to rewrite."""

    def __init__(self, name: str) -> None:
        self._name = name

    def explicit(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:
            msg = (
                f"The tool {self._name!r} takes its arguments by name only"
                f" (it was built from a JSON Schema); got {len(args)} positional"
            )
            raise TypeError(msg)
        return dict(kwargs)

    def with_defaults(self, explicit: dict[str, Any]) -> dict[str, Any]:
        return explicit


class SchemaTool(Tool[..., Any]):
    """A :class:`~toolguard.Tool` whose parameters are a given JSON Schema.

    Build one with :meth:`Tool.from_schema`. Calling it (directly, or through
    the runner once validated) calls ``func(**args)``.
    """

    __slots__ = ("_too_complex", "_validator", "annotations")

    annotations: Mapping[str, Any] | None
    """The MCP tool annotations the classifier reads (``None``: not an MCP tool)."""

    def __init__(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        func: Callable[..., Any],
        *,
        approval: ApprovalPolicy | None = None,
        redact: Iterable[str] = (),
        _validator: Any = None,
    ) -> None:
        _check_inputs(name, description, parameters, func)
        schema: dict[str, Any] = copy.deepcopy(dict(parameters))
        self.annotations = None
        self._validator = _validator if _validator is not None else _compile_validator(name, schema)
        work = schema_work(schema)
        self._too_complex = (
            None
            if work <= MAX_SCHEMA_WORK
            else (
                f"Invalid arguments for tool `{name}`: its parameters' schema is too complex to"
                f" check (one check would visit more than {MAX_SCHEMA_WORK:,} subschemas), so no"
                " call of it runs"
            )
        )
        self.func = func
        self.name = name
        self.description = description
        self.parameters = schema
        self.is_async = is_async_callable(func)
        self.approval = approval
        properties = schema.get("properties")
        self.redact = check_redact(redact)
        self.redacted = secret_names(
            name,
            properties if isinstance(properties, dict) else (),
            {},
            (*self.redact, *(approval.redact if approval is not None else ())),
        )
        self._binder = _SchemaBinder(name)  # type: ignore[assignment]  # duck-typed binder
        self._args_model = None  # type: ignore[assignment]  # validated by JSON Schema instead
        self._field_names = {}
        self._positional_only = ()
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = description
        if self.is_async and hasattr(inspect, "markcoroutinefunction"):
            inspect.markcoroutinefunction(self)

    def _derive(
        self,
        *,
        name: str,
        description: str,
        approval: ApprovalPolicy | None,
        in_thread: bool = True,
    ) -> SchemaTool:
        """A copy with another name, description or policy; same schema and function."""
        derived = SchemaTool(
            name,
            description,
            self.parameters,
            self.func,
            approval=approval,
            redact=self.redact,
            _validator=self._validator,
        )
        derived.annotations = self.annotations
        if not (self.in_thread and in_thread):
            derived.in_thread = False
        return derived

    def validate_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate JSON arguments from a model against the JSON Schema.

        Defaults written in the schema are not filled in: ``func`` gets the
        arguments the model sent.

        Returns:
            A copy of the arguments, by name.

        Raises:
            ToolArgumentsError: naming the offending fields (at most 20 listed),
                as ``Invalid arguments for tool `NAME`: 'field': message``; also
                when the arguments cannot be read as JSON data (too deep) or
                the schema cannot be evaluated (e.g. an unresolvable ``$ref``,
                which is never fetched): the call then does not run.
        """
        if self._too_complex is not None:  # fail closed, at once: never minutes of checking
            raise ToolArgumentsError(self._too_complex)
        try:
            data = to_json_data(dict(args))
            errors = list(self._validator.iter_errors(data))
        except Exception as exc:  # an unresolvable $ref, a hostile depth: fail closed
            text = _short(str(exc) or type(exc).__name__)
            msg = f"Invalid arguments for tool `{self.name}`: the schema cannot check them ({text})"
            raise ToolArgumentsError(msg) from None
        if not errors:
            return data  # type: ignore[no-any-return]  # to_json_data built a fresh copy
        problems = sorted(
            {
                (tuple(location), text)
                for error in errors
                for location, text in _problems(error, self.redacted)
            }
        )
        # jsonschema's messages quote values ("'hunter2' is too short", an object's repr):
        # hide secrets first, in each spelling a message may use.
        secrets = self.secret_texts(data)
        shown = [
            f"'{'.'.join(location) or '(arguments)'}':"
            f" {_short(self._hidden(location, text, secrets))}"
            for location, text in problems[:_MAX_PROBLEMS]
        ]
        if len(problems) > _MAX_PROBLEMS:
            shown.append(f"and {len(problems) - _MAX_PROBLEMS} more")
        raise ToolArgumentsError(f"Invalid arguments for tool `{self.name}`: " + "; ".join(shown))

    def _hidden(self, location: tuple[str, ...], text: str, secrets: list[str]) -> str:
        """A problem's text, not quoting a secret value."""
        if location and location[0] in self.redacted:
            return "invalid value (the message is hidden: the value is secret)"
        return scrub(text, secrets)

    def __repr__(self) -> str:
        guard = ", guarded" if self.approval else ""
        return f"<Tool {self.name!r} (JSON Schema){guard}>"
