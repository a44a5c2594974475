"""The package's layers: no import circles, no import running back up, modules of a readable size.

docs/architecture.md draws the layers; this test holds the code to that picture.
Every import counts, also one made inside a function or under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "toolguard"

LAYERS = [
    "_core",
    "_policy",
    "_tools",
    "_enforce",
    "_stores",
    "_notify",
    "_chat",
    "_http",
    "_gateway",
    "_cli",
]
"""The private layers, from the ground up: each imports only the ones before it."""

TOP = {"_gateway", "_cli"}
"""The layers above the public faces: they may import a public module (the others may not)."""

MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 500
LONGER_ON_PURPOSE = {
    "toolguard._chat.chat.ReviewedChat": "the public chat class: most of its lines are the "
    "documentation of its public methods; the work is done by the _chat modules",
}
"""Classes allowed past the size limit, each with its reason."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The toolguard modules ``name`` imports (a package's submodule when one is named)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_the_layer_list_names_every_private_package() -> None:
    packages = {p.parent.name for p in PACKAGE.glob("_*/__init__.py")}
    assert packages == set(LAYERS)


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for name, targets in GRAPH.items():
        here = layer_of(name)
        if here is None:
            continue
        for target in sorted(targets):
            there = layer_of(target)
            if there is None:
                if target != "toolguard._version" and here not in TOP:
                    upward.append(f"{name} -> {target} (a public module)")
            elif LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_no_import_circles() -> None:
    # Tarjan's strongly connected components over every import, function-level ones too.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in GRAPH[name]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == name:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    # A package's __init__ that re-exports its submodules is not a circle of meaning:
    # the faces (toolguard, toolguard.integrations) only hand names on.
    assert circles == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_and_classes_stay_readable(name: str) -> None:
    text = MODULES[name].read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{name} is over {MAX_MODULE_LINES} lines"
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
            lines = node.end_lineno - node.lineno + 1
            qualified = f"{name}.{node.name}"
            if qualified not in LONGER_ON_PURPOSE:
                assert lines <= MAX_CLASS_LINES, f"{qualified} is {lines} lines"
