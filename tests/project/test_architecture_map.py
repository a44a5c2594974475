"""docs/architecture.md is true: every path it cites exists, every name it gives a module is there.

The page is read, not listed here: whatever it says (today's or a rewritten
one), each backticked path (``toolguard/_x/y.py``, ``_x/y.py``, ``tests/...``,
a directory) must exist, and each backticked name must be found where the
page puts it. A name's modules are the ones its clause cites (a clause: a
sentence or the part of one between semicolons; in a drawing, one line): the
name must be defined there (a function, a class, a constant, a method or
attribute of a class there, or a name imported there), ``Class.method`` a
member of that class (its bases included), ``name(param, key=...)`` a callable
taking those parameters. A plain lowercase word (``review_id``) may also be a
parameter, a keyword or an attribute the module uses. A name in a clause that
cites no module must be defined somewhere in the package. Modules are parsed
with :mod:`ast`, never imported (no optional extra is needed).

The same file holds the check that no module or page cites the documents
toolguard was built from (the references are replaced by what they mean).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "toolguard"
PAGE = ROOT / "docs" / "architecture.md"

_IDENTIFIER = r"[A-Za-z_]\w*"
_NAME = re.compile(rf"^(?P<name>{_IDENTIFIER}(?:\.{_IDENTIFIER})*)(?:\((?P<params>[^()]*)\))?$")
_PATH = re.compile(r"^[\w.-]*(?:/[\w.*<>-]*)+$|^[\w-]+\.(?:py|js|css|html|md|toml|yml)$")
_PLAIN = re.compile(r"^[a-z][a-z0-9_]*$")
"""A plain lowercase word: may also be a parameter, keyword or attribute the module uses."""
_CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
"""A type's name (``PendingTurn``): in a drawing, data passing by, defined anywhere."""

# In a drawing (a code block): paths, public modules (``.http``) and names.
_DRAWN_PATH = re.compile(r"(?<![\w./])(?:toolguard/)?_?[A-Za-z][\w-]*/(?:[\w.-]+/?)*")
_DRAWN_MODULE = re.compile(r"(?<!\S)\.([a-z]\w*)(?:\.\*)?(?!\S)")
_DRAWN_NAME = re.compile(
    rf"\b{_IDENTIFIER}(?:\.{_IDENTIFIER})+\b"  # Class.method, module.function
    rf"|\b{_IDENTIFIER}\((?:{_IDENTIFIER})?\)"  # decide(call)
    r"|\b[a-z]\w*_\w+\b"  # snake_case with an underscore
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # CamelCase
)


# ---------------------------------------------------------------------------- reading the page


@dataclass
class Clause:
    """A sentence, or part of one between semicolons, or a line of a drawing."""

    line: int
    """Where it starts on the page (1-based)."""
    paths: list[str] = field(default_factory=list)
    """The paths it cites, as written."""
    names: list[str] = field(default_factory=list)
    """The names it cites, as written (``Class.method``, ``function(params)``)."""
    drawn: bool = False
    """A line of a drawing."""


def _split_outside_backticks(text: str) -> Iterator[tuple[int, str]]:
    """``text`` cut at ``;`` and at a sentence's end (``.`` then a space), never in backticks.

    Yields each piece with its offset in ``text``.
    """
    start, quoted = 0, False
    for i, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif not quoted and (
            char == ";" or (char == "." and (i + 1 == len(text) or text[i + 1].isspace()))
        ):
            yield start, text[start : i + 1]
            start = i + 1
    yield start, text[start:]


def _blocks(markdown: str) -> Iterator[tuple[int, str, bool]]:
    """Paragraphs and list items (joined lines), and each line of a code block as its own."""
    lines = markdown.splitlines()
    fenced = False
    current: list[str] = []
    first = 0

    def flush() -> Iterator[tuple[int, str, bool]]:
        if current:
            yield first, "\n".join(current), False
            current.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            yield from flush()
            fenced = not fenced
            continue
        if fenced:
            yield number, line, True
            continue
        starts_item = re.match(r"^\s*(?:[-*+]|\d+\.)\s", line) is not None
        if not line.strip() or line.startswith("#") or starts_item:
            yield from flush()
        if line.startswith("#"):
            yield number, line, False
            continue
        if line.strip():
            if not current:
                first = number
            current.append(line)
    yield from flush()


def read_page(markdown: str) -> list[Clause]:
    """The clauses of ``markdown`` that cite a path or a name."""
    clauses: list[Clause] = []
    for line, text, drawn in _blocks(markdown):
        if drawn:
            clause = _drawn(line, text)
            if clause.paths or clause.names:
                clauses.append(clause)
            continue
        for offset, piece in _split_outside_backticks(text):
            start = offset + len(piece) - len(piece.lstrip())
            clause = Clause(line + text[:start].count("\n"))
            for quoted in re.findall(r"`([^`]+)`", piece):
                cited = " ".join(quoted.split())  # a span may run over two lines
                kind = _kind(cited)
                if kind == "path":
                    clause.paths.append(cited)
                elif kind == "name":
                    clause.names.append(cited)
            if clause.paths or clause.names:
                clauses.append(clause)
    return clauses


def _kind(quoted: str) -> str | None:
    """``"path"``, ``"name"`` or ``None`` (a value, a command, an expression)."""
    if _call(quoted) is not None:
        return "name"
    if " " in quoted:
        return None
    if _PATH.match(quoted) and _looks_like_a_path(quoted):
        return "path"
    return "name" if _NAME.match(quoted) else None


def _looks_like_a_path(quoted: str) -> bool:
    """A file name, a folder (``x/``), or a path whose first part is a folder of the
    repository or the package; not ``tools/call`` (an MCP method) or ``/hitl/...``."""
    if quoted.startswith("/"):
        return False
    if quoted.endswith("/") or "." in quoted.rsplit("/", 1)[-1]:
        return True
    first = quoted.split("/", 1)[0]
    return (ROOT / first).is_dir() or (PACKAGE / first).is_dir()


def _call(quoted: str) -> tuple[str, str] | None:
    """``name(params)`` with any text for the parameters (``f(..., key=...)``), or ``None``."""
    found = re.match(rf"^({_IDENTIFIER}(?:\.{_IDENTIFIER})*)\((.*)\)$", quoted)
    return (found[1], found[2]) if found else None


def _drawn(line: int, text: str) -> Clause:
    """A line of a drawing: its paths, public modules (``.http``) and names."""
    clause = Clause(line, drawn=True)
    for found in _DRAWN_PATH.finditer(text):
        clause.paths.append(found.group())
    rest = _DRAWN_PATH.sub(" ", text)
    clause.paths.extend(f"toolguard/{m[1]}" for m in _DRAWN_MODULE.finditer(rest))
    rest = _DRAWN_MODULE.sub(" ", rest)
    clause.names.extend(found.group() for found in _DRAWN_NAME.finditer(rest))
    return clause


# ---------------------------------------------------------------------------- paths


def resolve_path(cited: str) -> Path | None:
    """The file or directory ``cited`` names: from the repository root, from the package, or
    (a bare file name) anywhere in the package; ``None`` when there is none."""
    cited = cited.rstrip(".,:")
    for base in (ROOT, PACKAGE):
        candidate = base / cited
        if candidate.exists():
            return candidate
        if not candidate.suffix and candidate.with_suffix(".py").is_file():
            return candidate.with_suffix(".py")  # a module drawn as a name: `.http`
    if "/" not in cited:
        return next(iter(sorted(PACKAGE.rglob(cited))), None)
    return None


def module_of(cited: str) -> Path | None:
    """The package module ``cited`` names (a ``.py`` file; a folder is no module), if any."""
    found = resolve_path(cited)
    if found is None or PACKAGE not in found.parents:
        return None
    return found if found.suffix == ".py" and found.is_file() else None


def module_file(dotted: str) -> Path | None:
    """The file of the toolguard module ``dotted`` (``toolguard._x.y``), if there is one."""
    parts = dotted.split(".")
    if parts[0] != "toolguard":
        return None
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------------------- the modules


@dataclass
class Module:
    """What one module defines, imports and uses (from its syntax tree)."""

    path: Path
    defined: dict[str, ast.AST]
    """Module-level functions, classes and assigned names."""
    imported: dict[str, tuple[str, str | None]]
    """Local name → (module, attribute); ``None``: the module itself."""
    used: set[str]
    """Every identifier its code mentions: names, definitions, attributes, parameters,
    keywords and the words of its strings (docstrings left out)."""


def _dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, those under a top-level ``if``/``try``/``with`` included."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.With)):
            yield from _top_level(node.body)
            if isinstance(node, ast.If):
                yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for part in (node.body, node.orelse, node.finalbody):
                yield from _top_level(part)
            for handler in node.handlers:
                yield from _top_level(handler.body)


def _targets(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


@functools.cache
def module(path: Path) -> Module:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    defined: dict[str, ast.AST] = {}
    imported: dict[str, tuple[str, str | None]] = {}
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        for name in _targets(node):
            defined[name] = node
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imported[alias.asname] = (alias.name, None)
                else:
                    imported[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                imported[alias.asname or alias.name] = (base, alias.name)
    used: set[str] = set()
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            used.add(node.name)
        elif isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            used.add(node.arg)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings  # SQL, values: their words
        ):
            used.update(re.findall(r"\w+", node.value))
    return Module(path, defined, imported, used)


@dataclass(frozen=True)
class Found:
    """What a name turned out to be."""

    kind: str
    """``"module"``, ``"class"``, ``"function"``, ``"value"`` or ``"outside"`` (not toolguard)."""
    path: Path | None = None
    node: ast.AST | None = None


def lookup(path: Path, name: str, depth: int = 0) -> Found | None:
    """``name`` in the module at ``path``: defined there or imported there."""
    if depth > 20:
        return None
    known = module(path)
    node = known.defined.get(name)
    if node is not None:
        if isinstance(node, ast.ClassDef):
            return Found("class", path, node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Found("function", path, node)
        return Found("value", path, node)
    if name not in known.imported:
        return None
    source, attribute = known.imported[name]
    if attribute is None:
        file = module_file(source)
        return Found("module", file) if file else Found("outside")
    submodule = module_file(f"{source}.{attribute}")
    file = module_file(source)
    if file is None:
        return Found("module", submodule) if submodule else Found("outside")
    inner = lookup(file, attribute, depth + 1)
    if inner is None and submodule is not None:
        return Found("module", submodule)
    return inner


def _members(found: Found) -> Iterator[tuple[str, ast.AST]]:
    """A class's methods, class attributes, fields and ``self.x`` attributes."""
    assert isinstance(found.node, ast.ClassDef)
    for node in found.node.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                continue
            for inner in ast.walk(node):
                for target in getattr(inner, "targets", [getattr(inner, "target", None)]):
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        yield target.attr, inner
        for name in _targets(node):
            yield name, node


def member(found: Found, name: str, depth: int = 0) -> Found | None:
    """Attribute ``name`` of a module or a class (through its toolguard bases)."""
    if found.kind == "module" and found.path is not None:
        return lookup(found.path, name)
    if found.kind in {"outside", "value"}:
        return Found("outside")  # not toolguard's, or a value: nothing to check
    if found.kind != "class" or depth > 20:
        return None
    assert found.path is not None
    for member_name, node in _members(found):
        if member_name == name:
            if isinstance(node, ast.ClassDef):
                return Found("class", found.path, node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return Found("function", found.path, node)
            return Found("value", found.path, node)
    assert isinstance(found.node, ast.ClassDef)
    for base in found.node.bases:
        base_name = ast.unparse(base).split("[")[0]
        head, *rest = base_name.split(".")
        parent = lookup(found.path, head)
        for part in rest:
            parent = member(parent, part) if parent is not None else None
        if parent is not None and parent.kind == "class":
            inherited = member(parent, name, depth + 1)
            if inherited is not None:
                return inherited
    return None


def _parameters(found: Found) -> set[str] | None:
    """The parameter names of a function, or of a class's ``__init__`` (else its fields)."""
    node = found.node
    if found.kind == "class":
        init = member(found, "__init__")
        if init is not None and init.kind == "function":
            node = init.node
        else:
            assert isinstance(node, ast.ClassDef)
            return {name for name, _ in _members(found)}
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    names += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in names}


def _resolve(path: Path, dotted: str) -> Found | None:
    """``dotted`` in the module at ``path``; a bare name may be a member of a class there."""
    head, *rest = dotted.split(".")
    found = lookup(path, head)
    if found is None and not rest:
        for node in module(path).defined.values():
            if isinstance(node, ast.ClassDef):
                inside = member(Found("class", path, node), head)
                if inside is not None:
                    return inside
    for part in rest:
        found = member(found, part) if found is not None else None
    return found


def _parameter_problem(cited: str, found: Found, params: str) -> str | None:
    """A parameter ``cited`` gives that the callable does not take, or ``None``."""
    accepted = _parameters(found)
    if accepted is None:
        return None
    for part in (p.strip() for p in params.split(",")):
        key = part.split("=", 1)[0].strip()
        if re.fullmatch(_IDENTIFIER, key) and key not in accepted:
            return f"`{cited}`: takes no parameter {key!r}"
    return None


@functools.cache
def _every_module() -> tuple[Path, ...]:
    return tuple(sorted(PACKAGE.rglob("*.py")))


def name_problem(cited: str, modules: list[Path], *, drawn: bool = False) -> str | None:
    """Why ``cited`` is not where its clause puts it (or nowhere, without modules); ``None``."""
    call = _call(cited)
    dotted, params = call if call else (cited, "")
    if dotted.split(".")[0] == "toolguard":  # a dotted module path, maybe with a name
        parts = dotted.split(".")
        for end in range(len(parts), 0, -1):
            file = module_file(".".join(parts[:end]))
            if file is not None:
                rest = ".".join(parts[end:])
                if not rest or _resolve(file, rest) is not None:
                    return None
                return f"`{cited}` is not in {file.relative_to(ROOT).as_posix()}"
        return f"`{cited}`: no such module"
    if (PACKAGE / dotted).is_dir():
        return None  # a package: `_http`
    searched = modules or list(_every_module())
    if drawn and _CAMEL.match(cited):
        searched = list(_every_module())  # a type drawn passing by: it exists
    for path in searched:
        found = _resolve(path, dotted)
        if found is not None:
            return _parameter_problem(cited, found, params) if params else None
    words = dotted.split(".")
    plain = not params and all(_PLAIN.match(word) for word in words)
    if not modules and plain:
        return None  # plain words no module is cited for: not attributed
    if plain and any(set(words) <= module(p).used for p in modules):
        return None  # a parameter, keyword, attribute or value the module uses
    where = ", ".join(p.relative_to(ROOT).as_posix() for p in modules) or "the package"
    return f"`{cited}` is not in {where}"


def page_problems(markdown: str) -> list[str]:
    """Every cited path that does not exist and every name not where the page puts it."""
    problems: list[str] = []
    for clause in read_page(markdown):
        modules: list[Path] = []
        for cited in clause.paths:
            if resolve_path(cited) is None:
                problems.append(f"line {clause.line}: `{cited}` does not exist")
            elif (found := module_of(cited)) is not None:
                modules.append(found)
        if clause.drawn and not modules:
            continue  # a drawing's line without a module names no code (PostgreSQL, ...)
        for cited in clause.names:
            problem = name_problem(cited, modules, drawn=clause.drawn)
            if problem is not None:
                problems.append(f"line {clause.line}: {problem}")
    return problems


# ---------------------------------------------------------------------------- the tests


def test_every_path_and_name_on_the_architecture_page_is_real() -> None:
    """A failure lists ``line N: what`` for each stale path or name: fix the page."""
    assert page_problems(PAGE.read_text(encoding="utf-8")) == []


def test_the_page_reader_finds_what_a_page_cites_and_what_is_stale() -> None:
    """The reader on a sample: prose, a drawing, attribution by clause, parameters."""
    sample = (
        "# A map\n"
        "\n"
        "- **1. A claim**: `toolguard/_core/audit.py` — `AuditEvent`, `final_event` and\n"
        "  `no_such_function`; `toolguard/_enforce/pipeline_that_is_not_there.py` runs it.\n"
        "- `ReviewedChat.submit_review` in `toolguard/_chat/chat.py`, with `review_id`;\n"
        "  `ReviewedChat.no_such_method` (`toolguard/_chat/chat.py`). `Rules` is public.\n"
        "- `call_digest(name, args, key, *, thread_id, review_id)` and\n"
        "  `call_digest(flavour=...)` in `_core/records.py`, `toolguard.postgres`,\n"
        "  `toolguard._enforce.once.REMEMBERED_TURNS` and `toolguard._core.gone`.\n"
        "\n"
        "```text\n"
        " public   toolguard  .http  .nothing_here\n"
        " _chat/   ReviewedChat: PostgreSQL, threads\n"
        " decisions ► Runner.run .......... _enforce/runner.py, _enforce/gone.py\n"
        "              · review_action ..... _chat/chat.py\n"
        "```\n"
        "Run `tests/conformance/paths.py`, the `store` fixture, `gateway.js`, `_http`.\n"
    )
    assert [(c.line, c.paths, c.names, c.drawn) for c in read_page(sample)] == [
        (3, ["toolguard/_core/audit.py"], ["AuditEvent", "final_event", "no_such_function"], False),
        (4, ["toolguard/_enforce/pipeline_that_is_not_there.py"], [], False),
        (5, ["toolguard/_chat/chat.py"], ["ReviewedChat.submit_review", "review_id"], False),
        (6, ["toolguard/_chat/chat.py"], ["ReviewedChat.no_such_method"], False),
        (6, [], ["Rules"], False),
        (
            7,
            ["_core/records.py"],
            [
                "call_digest(name, args, key, *, thread_id, review_id)",
                "call_digest(flavour=...)",
                "toolguard.postgres",
                "toolguard._enforce.once.REMEMBERED_TURNS",
                "toolguard._core.gone",
            ],
            False,
        ),
        (12, ["toolguard/http", "toolguard/nothing_here"], [], True),
        (13, ["_chat/"], ["ReviewedChat"], True),
        (14, ["_enforce/runner.py", "_enforce/gone.py"], ["Runner.run"], True),
        (15, ["_chat/chat.py"], ["review_action"], True),
        (17, ["tests/conformance/paths.py", "gateway.js"], ["store", "_http"], False),
    ]
    assert page_problems(sample) == [
        "line 3: `no_such_function` is not in toolguard/_core/audit.py",
        "line 4: `toolguard/_enforce/pipeline_that_is_not_there.py` does not exist",
        "line 6: `ReviewedChat.no_such_method` is not in toolguard/_chat/chat.py",
        "line 7: `call_digest(flavour=...)`: takes no parameter 'flavour'",
        "line 7: `toolguard._core.gone` is not in toolguard/_core/__init__.py",
        "line 12: `toolguard/nothing_here` does not exist",
        "line 14: `_enforce/gone.py` does not exist",
        "line 15: `review_action` is not in toolguard/_chat/chat.py",
    ]


def test_the_architecture_page_is_for_contributors_apart_from_the_user_guide() -> None:
    """mkdocs.yml lists it under "Contributing", not among the user pages."""
    yaml = pytest.importorskip("yaml")  # PyYAML comes with mkdocs (the docs extra)

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    top = [page for entry in nav for page in entry.values() if isinstance(page, str)]
    sections = {
        title: [page for item in pages for page in item.values()]
        for entry in nav
        for title, pages in entry.items()
        if isinstance(pages, list)
    }
    assert "architecture.md" not in top
    assert sections == {"Contributing": ["architecture.md"]}


# ---------------------------------------------------------------------------- no sources cited

_SOURCES = re.compile(r"\bSPEC\b|\b[Tt]he specification\b|\b[Ss]pecification's\b")
"""The documents toolguard was built from: ``SPEC`` (``SPEC.md``), "the specification"."""
_SEEDS = re.compile(r"\b[Tt]he seeds?\b|\bseed(?:'s| documents?| texts?)\b|\bseeds'")
"""The same documents called seeds ("the seed's", "the seed documents")."""


def citations(paths: list[Path]) -> list[str]:
    """``FILE:LINE: what`` for each citation of the source documents in ``paths``."""
    found: list[str] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            for pattern in (_SOURCES, _SEEDS):
                found.extend(
                    f"{path.relative_to(ROOT).as_posix()}:{number}: {m.group()}"
                    for m in pattern.finditer(line)
                )
    return found


def _texts() -> list[Path]:
    suffixes = {".py", ".md", ".js", ".css", ".html"}
    return sorted(
        p
        for base in (PACKAGE, ROOT / "docs")
        for p in base.rglob("*")
        if p.suffix in suffixes and p.is_file() and "__pycache__" not in p.parts
    )


def test_the_citation_scanner_catches_each_kind() -> None:
    lines = (
        "As SPEC.md says; SPEC's text; the specification; The specification's order;\n"
        "the seed's Indonesian text, a seed document, seeds' lenient mode.\n"
        'A SPECIAL case, specifications in general, {"seed": 1}, seeded with items.\n'
    )
    found = [
        m.group()
        for line in lines.splitlines()
        for p in (_SOURCES, _SEEDS)
        for m in p.finditer(line)
    ]
    assert found == [
        "SPEC",
        "SPEC",
        "the specification",
        "The specification",
        "the seed",
        "seed document",
        "seeds'",
    ]


def test_no_module_or_page_cites_the_source_documents() -> None:
    """``SPEC``, "the specification" and "the seed" mean nothing to a reader of the repository."""
    assert citations(_texts()) == []
