"""One pipeline: policy is decided in one place and decisions are applied in one place.

These tests read the package's source (``ast``, nothing imported) and pin where
the pipeline's parts live, so a second copy of policy code fails here even when
its own tests pass:

* a rule set is evaluated in one module (``_policy/rules.py``: ``rule_for``);
* tool bodies run from one module (``_enforce/execute.py``: ``run_body``);
  only the tool itself calls its function;
* votes are counted in one module (``_enforce/quorum.py``);
* decisions are submitted and applied through ``_enforce/pipeline.py``;
* the framework integrations import the pipeline and public names only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "toolguard"


def sources() -> dict[str, ast.Module]:
    return {
        path.relative_to(PACKAGE.parent).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


SOURCES = sources()


def calls_of(attribute: str) -> dict[str, list[str]]:
    """Where ``<something>.attribute(...)`` is called: file -> the receivers' source."""
    found: dict[str, list[str]] = {}
    for name, tree in SOURCES.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == attribute
            ):
                found.setdefault(name, []).append(ast.unparse(node.func.value))
    return found


def calls_of_function(function: str) -> set[str]:
    """The files that call ``function(...)`` by its bare name."""
    return {
        name
        for name, tree in SOURCES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == function
    }


def test_a_rule_set_is_evaluated_in_one_module() -> None:
    evaluated = {
        name: receivers
        for name, receivers in calls_of("decide").items()
        if any(r.endswith("rules") or r == "self" for r in receivers)
    }
    # Rules.explain and rule_for (sent and validated arguments) are its only callers.
    assert evaluated == {"toolguard/_policy/rules.py": ["self", "rules", "rules"]}
    askers = calls_of_function("rule_for")
    assert askers == {
        "toolguard/_chat/replay.py",  # toolguard replay: candidate rules on past decisions
        "toolguard/_enforce/actions.py",
        "toolguard/_enforce/decide.py",
        "toolguard/_enforce/grant_use.py",
        "toolguard/_gateway/proxy.py",
        "toolguard/_tools/tool.py",
    }


def test_tool_bodies_run_from_one_module() -> None:
    executed = {
        name: receivers
        for name, receivers in calls_of("execute").items()
        if not name.startswith("toolguard/_stores/")  # SQL, not tool bodies
    }
    assert executed == {"toolguard/_enforce/execute.py": ["tool"]}
    called = {name for name, receivers in calls_of("func").items()}
    assert called == {"toolguard/_tools/tool.py"}  # a direct call of the guarded function
    assert calls_of_function("run_body") == {
        "toolguard/_enforce/execute.py",
        "toolguard/_enforce/resume.py",
        "toolguard/integrations/langchain.py",
        "toolguard/integrations/openai_agents.py",
        "toolguard/integrations/pydantic_ai.py",
    }


def test_votes_are_counted_in_one_module() -> None:
    assert calls_of_function("reviewer_key") == {"toolguard/_enforce/quorum.py"}
    writers = set()
    for name, tree in SOURCES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "approved_by" for k in node.keys
            ):
                writers.add(name)
    # The request starts with no votes (actions.py); only the quorum module adds them.
    assert writers == {"toolguard/_enforce/actions.py", "toolguard/_enforce/quorum.py"}


def test_decisions_are_submitted_and_applied_through_the_pipeline() -> None:
    assert calls_of_function("apply_decisions") == {"toolguard/_enforce/pipeline.py"}
    assert calls_of_function("validate_decisions") - {"toolguard/_enforce/pipeline.py"} == {
        "toolguard/_enforce/frameworks.py",  # the frameworks' payload (checked_decisions)
        "toolguard/integrations/langchain.py",
        "toolguard/integrations/langchain_review.py",  # the drop-in HumanInTheLoopMiddleware
    }
    plans = {name for name, receivers in calls_of("plan").items() if "quorum" in receivers}
    assert plans == {"toolguard/_enforce/pipeline.py", "toolguard/_enforce/resume.py"}


def test_the_integrations_import_the_pipeline_and_public_names_only() -> None:
    imported: dict[str, set[str]] = {}
    for name, tree in SOURCES.items():
        if not name.startswith("toolguard/integrations/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolguard"):
                imported.setdefault(name, set()).add(node.module or "")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("toolguard"):
                        imported.setdefault(name, set()).add(alias.name)
    private = {
        name: sorted(m for m in modules if "._" in m and m != "toolguard._enforce.pipeline")
        for name, modules in imported.items()
    }
    assert {name: found for name, found in private.items() if found} == {}
    assert sorted(imported) == [
        "toolguard/integrations/ag_ui.py",  # re-exports toolguard.http's AG-UI router and app
        "toolguard/integrations/ai_sdk.py",  # re-exports toolguard.http's router for useChat
        "toolguard/integrations/langchain.py",
        "toolguard/integrations/langchain_hitl.py",
        "toolguard/integrations/langchain_review.py",
        "toolguard/integrations/mcp.py",
        "toolguard/integrations/openai_agents.py",
        "toolguard/integrations/pydantic_ai.py",
    ]


def test_the_review_payload_and_the_allowed_decisions_have_one_definition() -> None:
    built = set()
    for name, tree in SOURCES.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = ast.unparse(node.func)
            first = ast.unparse(node.args[0]) if node.args else ""
            if callee == "PendingReview" or (callee == "trusted" and first == "PendingReview"):
                built.add(name)
    assert built == {"toolguard/_core/records.py"}  # review_payload, for every path
    readers = {
        name
        for name, tree in SOURCES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "allowed_decisions"
        and ast.unparse(node.value).endswith("approval")
    }
    # A tool's policy is read in decide.decisions_for, and checked again at submission.
    assert readers == {"toolguard/_enforce/decide.py", "toolguard/_enforce/actions.py"}
