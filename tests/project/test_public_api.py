"""Tests for the public surface of the ``toolguard`` package."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import types

import pytest

import toolguard
from toolguard._core import errors as _errors

PUBLIC_MODULES = (
    "toolguard.classify",
    "toolguard.hooks",
    "toolguard.notify",
    "toolguard.records",
    "toolguard.text",
)
"""The small public modules that hold what is not at the top level."""

TOP_LEVEL = [
    "ALLOWED_DECISIONS",
    "DEFAULT_VERBS",
    "NO_DECISION",
    "REDACTED",
    "REJECTED_BY_USER_MESSAGE",
    "SEED_VERBS",
    "AccessDeniedError",
    "ActionRejectedError",
    "AlreadyResumedError",
    "ApprovalPolicy",
    "ApprovalRequiredError",
    "ApproveDecision",
    "BlockingChat",
    "CallDeniedError",
    "Candidate",
    "ChatModel",
    "ChatTurn",
    "Classifier",
    "ConcurrentUpdateError",
    "CorruptThreadError",
    "Decision",
    "EditDecision",
    "EditedAction",
    "InvalidReviewDecisionError",
    "Judge",
    "Limits",
    "MemoryStore",
    "Message",
    "ModelError",
    "ModelResponse",
    "NoPendingReviewError",
    "PendingReview",
    "PendingTurn",
    "QuorumReviewerError",
    "RejectDecision",
    "RespondDecision",
    "ReviewExpiredError",
    "ReviewPendingError",
    "ReviewStateError",
    "ReviewedChat",
    "ReviewedChatUseCase",
    "ReviewerNotAllowedError",
    "RuleSyntaxError",
    "Rules",
    "Runner",
    "SQLiteStore",
    "SchemaVersionError",
    "ScriptedModel",
    "StaleReviewError",
    "Step",
    "StepLimitError",
    "Store",
    "ThreadBusyError",
    "ThreadState",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolguardError",
    "Toolset",
    "UnknownGrantError",
    "UnknownReviewError",
    "UnknownThreadError",
    "UnsupportedPolicyError",
    "Webhook",
    "__version__",
    "allow_once",
    "guard",
    "requires_approval",
    "tool",
    "validate_decisions",
]

MODULE_NAMES = {
    "toolguard.classify": ["READ_VERBS", "Classification", "split_words"],
    "toolguard.hooks": ["AccessHook", "AccessOperation", "Authorizer", "Claims", "EditPolicy"],
    "toolguard.notify": ["Email", "Slack"],
    "toolguard.records": [
        "DECISION_TYPES",
        "Action",
        "ActionRequest",
        "ActionStatus",
        "AuditEvent",
        "AuditKind",
        "CandidateVerdict",
        "DecisionType",
        "GrantTerms",
        "JudgeOutcome",
        "Judgement",
        "QuorumProgress",
        "ResultOutcome",
        "ReviewConfig",
        "Risk",
        "Rule",
        "RuleDecision",
        "Shadowed",
        "StandingGrant",
        "ThreadStatus",
        "parse_tool_call",
    ],
    "toolguard.text": [
        "ResultTemplates",
        "describe_decision",
        "describe_request",
        "describe_result",
        "get_language",
        "render_action",
        "render_history",
        "set_language",
    ],
}


def _isort_key(name: str) -> tuple[int, list[int | str]]:
    """Ruff's RUF022 order: SCREAMING_CASE, then CamelCase, then the rest, each naturally."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    natural: list[int | str] = [
        int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)
    ]
    return (group, natural)


def test_all_is_sorted() -> None:
    """toolguard.__all__ is sorted the way ruff's RUF022 sorts it (constants, classes, rest)."""
    assert toolguard.__all__ == sorted(toolguard.__all__, key=_isort_key)


def test_the_top_level_names_are_pinned() -> None:
    """toolguard.__all__ is exactly the documented surface: a change to it is deliberate."""
    assert toolguard.__all__ == TOP_LEVEL


def test_the_top_level_holds_at_most_seventy_names() -> None:
    """The top level stays small: the essential API and the errors, nothing else."""
    assert len(toolguard.__all__) <= 70


def test_every_error_is_importable_from_the_top_level() -> None:
    """Every ToolguardError subclass defined in the errors module is in toolguard.__all__."""
    defined = {
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, toolguard.ToolguardError)
    }
    assert len(defined) == 25
    assert sorted(defined - set(toolguard.__all__)) == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_each_public_module_pins_its_names(module_name: str) -> None:
    """Each public module's __all__ is its pinned list, sorted as ruff sorts it."""
    module = importlib.import_module(module_name)
    assert module.__all__ == MODULE_NAMES[module_name]
    assert module.__all__ == sorted(module.__all__, key=_isort_key)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_name_of_a_public_module_resolves(module_name: str) -> None:
    """Every name in a public module's __all__ is an attribute defined inside toolguard."""
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
    foreign = [
        name
        for name in module.__all__
        if (inspect.isclass(value := getattr(module, name)) or inspect.isfunction(value))
        and not value.__module__.startswith("toolguard.")
    ]
    assert foreign == []


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_a_public_module_exports_every_public_name_it_holds(module_name: str) -> None:
    """A public module holds no public name outside its __all__, and has a docstring."""
    module = importlib.import_module(module_name)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and type(value).__module__ != "__future__"
    }
    assert sorted(public - set(module.__all__)) == []
    assert (module.__doc__ or "").strip() != ""


def test_each_name_has_one_public_home() -> None:
    """No name is both at the top level and in a public module, nor in two modules."""
    homes: dict[str, list[str]] = {name: ["toolguard"] for name in toolguard.__all__}
    for module_name in PUBLIC_MODULES:
        for name in importlib.import_module(module_name).__all__:
            homes.setdefault(name, []).append(module_name)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


def test_all_has_no_duplicates() -> None:
    """Every name appears once in toolguard.__all__."""
    assert len(toolguard.__all__) == len(set(toolguard.__all__))


def test_every_name_in_all_exists() -> None:
    """Every name listed in toolguard.__all__ is an attribute of the package."""
    missing = [name for name in toolguard.__all__ if not hasattr(toolguard, name)]
    assert missing == []


def test_every_public_name_is_exported() -> None:
    """Every public, non-module name defined in toolguard/__init__ is listed in __all__."""
    public = {
        name
        for name, value in vars(toolguard).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and type(value).__module__ != "__future__"  # `from __future__ import annotations`
    }
    assert sorted(public - set(toolguard.__all__)) == []


def test_exported_members_say_they_come_from_toolguard_or_its_modules() -> None:
    """Exported classes and functions are defined inside the toolguard package."""
    foreign = [
        name
        for name in toolguard.__all__
        # Type aliases such as ``Message = dict[str, Any]`` pass isinstance(..., type) on 3.10.
        if isinstance(getattr(toolguard, name), (type, types.FunctionType))
        and not isinstance(getattr(toolguard, name), types.GenericAlias)
        and not getattr(toolguard, name).__module__.startswith("toolguard")
    ]
    assert foreign == []


def test_version_is_a_string() -> None:
    """toolguard.__version__ is a non-empty version string."""
    assert isinstance(toolguard.__version__, str)
    assert toolguard.__version__.split(".")[0].isdigit()


def test_import_does_not_pull_in_optional_dependencies() -> None:
    """`import toolguard` and its small public modules import no optional dependency."""
    code = (
        f"import toolguard, sys, {', '.join(PUBLIC_MODULES)}; print(sorted(m for m in"
        " ('openai','fastapi','uvicorn','httpx','psycopg') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == "[]\n"
    assert result.stderr == ""
