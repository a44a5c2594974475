"""LangChain's own unit tests of ``HumanInTheLoopMiddleware``, run against toolguard's drop-in.

The test fetches the source distribution of the installed ``langchain`` from
PyPI (``pip download``; cached in the temporary directory, never copied into
this repository), takes LangChain's test module of the middleware and the fake
chat model it imports, points the module's class at
``toolguard.integrations.langchain.HumanInTheLoopMiddleware``, and runs it
with pytest in a subprocess: every test must pass, except the ones listed in
:data:`PRIVATE_STATE`, which are deselected by name with the reason
(:data:`PRIVATE_BUT_RUN` lists the ones that touch LangChain's private names
and still run and pass).

The rewrite changes the class import and the targets of the module's
``patch(...)`` calls: LangChain's tests replace the ``interrupt`` and
``get_config`` that LangChain's class calls, and the drop-in calls the ones
of its own module. Every other line runs as LangChain wrote it (the expected
texts, such as the edit notice, still come from LangChain's module).

Without network the test is skipped, except in CI (``CI=true``), where a
failed download fails it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")

VERSION = importlib.metadata.version("langchain")
TEST_MODULE = "tests/unit_tests/agents/middleware/implementations/test_human_in_the_loop.py"
FILES = [
    "tests/__init__.py",
    "tests/unit_tests/__init__.py",
    "tests/unit_tests/agents/__init__.py",
    "tests/unit_tests/agents/model.py",
    "tests/unit_tests/agents/middleware/__init__.py",
    "tests/unit_tests/agents/middleware/implementations/__init__.py",
    TEST_MODULE,
]
"""What is taken from the source distribution: the test module and what it imports."""

LANGCHAIN_MODULE = "langchain.agents.middleware.human_in_the_loop"
PATCHED = {
    "interrupt": "toolguard.integrations.langchain_hitl",
    "get_config": "toolguard.integrations.langchain_review",
}
"""What LangChain's tests patch in LangChain's module, and where the drop-in looks it up."""

INJECTS_AN_EDIT = (
    "builds a request whose state holds an edit written straight into LangChain's private"
    " state (`hitl_edited_tool_calls`), with no review behind it; the drop-in runs only what"
    " its own review recorded, so it refuses such a call unrun (NOT_REVIEWED), which"
    " test_langchain_dropin.py checks"
)
PRIVATE_STATE: dict[str, str] = {
    "test_human_in_the_loop_middleware_edit_annotates_list_content[text-block]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_annotates_list_content[mixed-blocks]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_annotates_list_content[plain-strings]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_annotates_list_content[empty]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_annotates_command_result": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_notice_is_not_duplicated": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_annotates_async": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_notice_is_customizable": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_notice_can_be_disabled[string]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_notice_can_be_disabled[blocks]": INJECTS_AN_EDIT,
    "test_human_in_the_loop_middleware_edit_to_unknown_tool_raises": INJECTS_AN_EDIT,
    "test_recorded_edit_survives_a_later_tightening_of_allowed_decisions": INJECTS_AN_EDIT,
}
"""LangChain's tests that read or inject LangChain's private state, deselected, with why."""

PRIVATE_BUT_RUN: dict[str, str] = {
    "test_decision_schema_with_one_decision_is_a_plain_object": (
        "tests LangChain's private `_decision_schema` function itself, not the middleware"
    ),
    "test_decision_schema_rejects_a_bad_answer_with_one_error_at_the_problem": (
        "tests LangChain's private `_decision_schema` function itself, not the middleware"
    ),
    "test_edit_args_without_a_pydantic_schema_are_shown_but_not_enforced": (
        "tests LangChain's private `_decision_schema` function itself, not the middleware"
    ),
    "test_return_direct_routing_keeps_calls_with_unnamed_results": (
        "tests LangChain's agent factory; it never builds the middleware"
    ),
    "test_a_turn_that_resolves_no_decisions_clears_the_previous_turns_edits": (
        "puts an edit into LangChain's private state key, which the drop-in keeps (and clears)"
        " in LangChain's shape"
    ),
    "test_async_turn_that_resolves_no_decisions_clears_the_previous_turns_edits": (
        "puts an edit into LangChain's private state key, which the drop-in keeps (and clears)"
        " in LangChain's shape"
    ),
}
"""LangChain's tests that touch its private names yet run and pass: they measure LangChain's
own functions, or the state key the drop-in shares with LangChain's class."""

EXPECTED_PASSED = 73
"""How many of LangChain's tests run and pass (all of them but :data:`PRIVATE_STATE`)."""


def _download(folder: Path) -> Path:
    """The sdist of the installed langchain, fetched once into ``folder`` (pip download)."""
    archive = folder / f"langchain-{VERSION}.tar.gz"
    if archive.is_file():
        return archive
    partial = Path(tempfile.mkdtemp(dir=folder))
    try:
        return _fetch(archive, partial)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _fetch(archive: Path, partial: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--disable-pip-version-check", "--quiet", f"langchain=={VERSION}", "-d", str(partial),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    fetched = partial / archive.name
    if done.returncode != 0 or not fetched.is_file():
        reason = f"pip download of langchain=={VERSION} failed: {done.stderr.strip()[-500:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    fetched.replace(archive)  # atomic: a concurrent run sees the whole file or none
    return archive


def rewrite(source: str) -> str:
    """LangChain's test module with the class taken from toolguard (see the module)."""
    imported, count = re.subn(r"\n    HumanInTheLoopMiddleware,\n", "\n", source)
    assert count == 1, "the class import of LangChain's test module changed"
    block_end = imported.index(")\n", imported.index(f"from {LANGCHAIN_MODULE} import ("))
    imported = (
        imported[: block_end + 2]
        + "from toolguard.integrations.langchain import HumanInTheLoopMiddleware\n"
        + imported[block_end + 2 :]
    )
    for name, module in PATCHED.items():
        imported = imported.replace(f'"{LANGCHAIN_MODULE}.{name}"', f'"{module}.{name}"')
    assert f'"{LANGCHAIN_MODULE}.' not in imported, "a patch target was left on LangChain's class"
    return imported


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LangChain's test module (rewritten) and its imports in a folder of their own."""
    cache = Path(tempfile.gettempdir()) / "toolguard-langchain-sdist"
    cache.mkdir(exist_ok=True)
    archive = _download(cache)
    folder = tmp_path_factory.mktemp("langchain-hitl-tests")
    with tarfile.open(archive) as tar:
        for name in FILES:
            member = tar.extractfile(f"langchain-{VERSION}/{name}")
            assert member is not None, f"{name} is missing from the langchain {VERSION} sdist"
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())
    module = folder / TEST_MODULE
    module.write_text(rewrite(module.read_text(encoding="utf-8")), encoding="utf-8")
    (folder / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n",
        encoding="utf-8",
    )
    return folder


def outcomes(report: Path) -> dict[str, str]:
    """Each test's outcome in a JUnit XML report: passed, failed, error or skipped."""
    found: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314 - our own report
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        found[case.attrib["name"]] = (
            {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
        )
    return found


def test_langchain_own_tests_pass_with_the_drop_in(suite: Path) -> None:
    """Every behaviour test of LangChain's middleware passes with toolguard's class."""
    source = (suite / TEST_MODULE).read_text(encoding="utf-8")
    assert "from toolguard.integrations.langchain import HumanInTheLoopMiddleware" in source
    for test in [*PRIVATE_STATE, *PRIVATE_BUT_RUN]:
        assert f"def {test.partition('[')[0]}(" in source, f"{test} is gone: update this module"
    report = suite / "report.xml"
    deselect = [f"--deselect={TEST_MODULE}::{test}" for test in PRIVATE_STATE]
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-c", "pytest.ini", "--rootdir", ".", f"--junitxml={report}", *deselect, TEST_MODULE,
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=suite, capture_output=True, text=True, timeout=600, check=False
    )
    found = outcomes(report)
    failed = sorted(name for name, outcome in found.items() if outcome != "passed")
    assert failed == [], done.stdout[-6000:]
    assert len(found) == EXPECTED_PASSED, done.stdout[-3000:]
    assert done.returncode == 0, done.stdout[-3000:]
