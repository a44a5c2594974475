"""Tests for the public surface of the ``toolguard`` package."""

from __future__ import annotations

import re
import subprocess
import sys
import types

import toolguard


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
    """`import toolguard` imports none of openai, fastapi, uvicorn, httpx or psycopg."""
    code = (
        "import toolguard, sys; print(sorted(m for m in"
        " ('openai','fastapi','uvicorn','httpx','psycopg') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout == "[]\n"
    assert result.stderr == ""
