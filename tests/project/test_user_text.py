"""The text users read speaks to them, not to the people who built toolguard.

README.md, CHANGELOG.md, the user pages of docs/, the examples and benchmarks/README.md never
cite the documents toolguard was built from, issue numbers, work sessions, test
files or private modules (``toolguard._anything``); they tell no history of versions never
released (only CHANGELOG.md names versions), say nothing of toolguard's own tests or machine,
and number the guarantees one way only (docs/security.md's numbers, never the letters of an
older matrix). docs/architecture.md is for contributors and names private modules on purpose,
so it is not scanned.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolguard import __version__

ROOT = Path(__file__).resolve().parents[2]
CONTRIBUTOR_PAGES = frozenset({"architecture.md"})
"""Pages of docs/ written for contributors: they may name private modules and tests."""

_PRIVATE = "core|policy|tools|enforce|stores|chat|http|gateway|cli|demo|models|runner|redact|store"

PATTERNS: dict[str, re.Pattern[str]] = {
    "the source documents": re.compile(
        r"\bSPEC(?:\.md)?\b"
        r"|\b(?:the|this|our)\s+specification\b|\bspecification's\b"
        r"|\bsource\s+documents?\b|\bseed\s+(?:document|text)s?\b|\bthe\s+seed\b",
        re.IGNORECASE,
    ),
    "an issue": re.compile(
        r"\bissue\s+#?\d+|\bissues\s+#\d+|(?<![\w&/(#])#\d+(?![\w-])", re.IGNORECASE
    ),
    "a session": re.compile(
        r"\b(?:this|that|previous|earlier|first|second|third|fourth|fifth|sixth)\s+session\b"
        r"|\bsession\s+of\s+\d{4}-\d\d-\d\d",
        re.IGNORECASE,
    ),
    "a test file": re.compile(r"(?<![\w./-])tests/|\btest_\w+\.py\b|::test_\w+"),
    "a private module": re.compile(
        rf"\btoolguard[./]_\w+|(?<![\w./-])_(?:{_PRIVATE})(?:/|\.py\b|\.\w|\b(?![\w-]))"
    ),
    "history": re.compile(
        r"\boriginal\s+design\b|\bthe\s+original\s+(?:rule|\d+(?:-verb)?\s+(?:verbs?|rule))"
        r"|\bStatus:\s+all\b|\bearlier\s+versions?\b"
        rf"|(?<![\w.])v?{re.escape(__version__)}(?![\w.]*\d)",
        re.IGNORECASE,
    ),
    "our own tests": re.compile(
        r"\bA\s+test\s+(?:keeps|checks)\b|\bthe\s+tests\s+run\b|\bchecked\s+by\s+the\s+test\s+suite\b"
        r"|\bproject's\s+machine\b",
        re.IGNORECASE,
    ),
    "another numbering": re.compile(
        r"\bguarantees?\s+\([a-j]\)|\([a-j]\)\s*[\u2013-]\s*\([a-j]\)|^\s*\|\s*path\s*\|\s*\([a-j]\)"
    ),
}
"""What user text must not contain, by name. Kept tight: each one is a citation, not a word."""

RELEASE_NOTES = "CHANGELOG.md"
"""The one user text that names versions: the "history" kind does not apply to it."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One citation found in a user text."""

    where: str
    """``FILE:LINE``."""
    kind: str
    """A key of :data:`PATTERNS`."""
    text: str
    """What matched."""


def scan(text: str, name: str) -> list[Finding]:
    """Every citation of :data:`PATTERNS` in ``text`` (a file called ``name``), in line order."""
    found: list[Finding] = []
    kinds = {k: p for k, p in PATTERNS.items() if not (k == "history" and name == RELEASE_NOTES)}
    for number, line in enumerate(text.splitlines(), 1):
        for kind, pattern in kinds.items():
            where = f"{name}:{number}"
            found.extend(Finding(where, kind, m.group()) for m in pattern.finditer(line))
    return found


def user_texts() -> list[Path]:
    """README.md, CHANGELOG.md, docs/*.md but the contributor pages, examples/*.py,
    benchmarks/README.md."""
    docs = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in CONTRIBUTOR_PAGES]
    return [
        ROOT / "README.md",
        ROOT / RELEASE_NOTES,
        *docs,
        *sorted((ROOT / "examples").glob("*.py")),
        ROOT / "benchmarks" / "README.md",
    ]


TEXTS = user_texts()


@pytest.mark.parametrize("path", TEXTS, ids=[p.relative_to(ROOT).as_posix() for p in TEXTS])
def test_user_text_cites_no_sources_issues_sessions_tests_or_private_modules(path: Path) -> None:
    """Each user text is free of citations; a failure names FILE:LINE and what it cites."""
    name = path.relative_to(ROOT).as_posix()
    assert scan(path.read_text(encoding="utf-8"), name) == []


def test_the_scanned_texts_exist_and_leave_out_only_the_contributor_pages() -> None:
    """The scan covers real files, every docs page but architecture.md among them."""
    names = {p.relative_to(ROOT).as_posix() for p in TEXTS}
    assert all(p.is_file() for p in TEXTS)
    assert {
        "README.md",
        "CHANGELOG.md",
        "docs/guide.md",
        "docs/security.md",
        "benchmarks/README.md",
    } <= names
    assert "docs/architecture.md" not in names
    every_page = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert every_page - names == {"docs/architecture.md"}


def test_the_scanner_catches_every_kind_of_citation() -> None:
    """A hostile sample: each citation is found, with its line and what matched."""
    sample = (
        "As SPEC.md says, the payload is the specification's.\n"
        "The Indonesian texts come from the source documents.\n"
        "Fixed in issue 8, point 3 (see #12).\n"
        "Measured in the fourth session; see the session of 2026-12-01.\n"
        "Proven by `tests/chat/test_trust.py::test_cancel_review`.\n"
        "See test_quorum.py for details.\n"
        "The constant `toolguard._enforce.once.REMEMBERED_TURNS` and `toolguard/_http/auth.py`.\n"
        "It lives in `_core/catalog.py`, next to `_gateway`.\n"
        "from toolguard._demo import DemoModel\n"
        "`Classifier(verbs=SEED_VERBS)` is the original design's rule; the original 13 verbs.\n"
        f"Status: all four are available. Upgrading from {__version__}: earlier versions.\n"
        "A test keeps this table equal to the catalog; A test checks all of this.\n"
        "About 2 s on the project's machine; the outputs are checked by the test suite.\n"
        "As guarantee (a) and (f) check, (a)\u2013(j) of the matrix (guarantee 28).\n"
        "| path | (a) | (b) |\n"
    )
    found = [(f.where, f.kind, f.text) for f in scan(sample, "sample.md")]
    assert found == [
        ("sample.md:1", "the source documents", "SPEC.md"),
        ("sample.md:1", "the source documents", "the specification"),
        ("sample.md:2", "the source documents", "source documents"),
        ("sample.md:3", "an issue", "issue 8"),
        ("sample.md:3", "an issue", "#12"),
        ("sample.md:4", "a session", "fourth session"),
        ("sample.md:4", "a session", "session of 2026-12-01"),
        ("sample.md:5", "a test file", "tests/"),
        ("sample.md:5", "a test file", "test_trust.py"),
        ("sample.md:5", "a test file", "::test_cancel_review"),
        ("sample.md:6", "a test file", "test_quorum.py"),
        ("sample.md:7", "a private module", "toolguard._enforce"),
        ("sample.md:7", "a private module", "toolguard/_http"),
        ("sample.md:8", "a private module", "_core/"),
        ("sample.md:8", "a private module", "_gateway"),
        ("sample.md:9", "a private module", "toolguard._demo"),
        ("sample.md:10", "history", "original design"),
        ("sample.md:10", "history", "the original 13 verbs"),
        ("sample.md:11", "history", "Status: all"),
        ("sample.md:11", "history", __version__),
        ("sample.md:11", "history", "earlier versions"),
        ("sample.md:12", "our own tests", "A test keeps"),
        ("sample.md:12", "our own tests", "A test checks"),
        ("sample.md:13", "our own tests", "project's machine"),
        ("sample.md:13", "our own tests", "checked by the test suite"),
        ("sample.md:14", "another numbering", "guarantee (a)"),
        ("sample.md:14", "another numbering", "(a)\u2013(j)"),
        ("sample.md:15", "another numbering", "| path | (a)"),
    ]


def test_the_scanner_leaves_ordinary_text_alone() -> None:
    """Words that merely look like citations are not findings."""
    sample = (
        'Runner(tools, edit_policy="recheck") with langchain_core.messages.\n'
        "`Classifier(verbs=SEED_VERBS)` is the plain 13-verb rule; the original function.\n"
        "Guarantees 1 and 14; guarantee 28 (a quorum); run the tests of your agent.\n"
        "The (a) item and the 0.1 s timeout; a terminal on this machine.\n"
        "The session cookie is HttpOnly; sign in to start a session.\n"
        "[Guard one function](#1-guard-one-function) and &#39; in HTML.\n"
        "toolguard.http.create_app, the OpenAPI document and pytest's tests.\n"
        "It issues 3 requests; a tests_dir option; toolguard.testing.auto_approve().\n"
    )
    assert scan(sample, "sample.md") == []


def test_the_examples_import_only_public_toolguard_names() -> None:
    """No example imports a private toolguard module or a private name."""
    private: list[str] = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules: list[str] = []
            names: list[str] = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                modules = [node.module]
                names = [alias.name for alias in node.names]
            for module in modules:
                parts = module.split(".")
                if parts[0] != "toolguard":
                    continue
                if any(part.startswith("_") for part in parts) or any(
                    name.startswith("_") for name in names
                ):
                    private.append(f"{path.name}:{node.lineno} {module}")
    assert private == []


_GUARANTEE = re.compile(r"^### (?P<n>\d+)\. (?P<title>.+)$", re.MULTILINE)
_TESTED = re.compile(r"^\*\*(?P<n>\d+)\. (?P<title>.+)\*\*$", re.MULTILINE)


def test_security_page_ends_with_how_each_guarantee_is_tested() -> None:
    """docs/security.md's last section lists tested behaviours for every numbered guarantee."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections[-1] == "How it is tested"
    body, appendix = text.split("\n## How it is tested\n")
    guarantees = [(m["n"], m["title"]) for m in _GUARANTEE.finditer(body)]
    tested = [(m["n"], m["title"]) for m in _TESTED.finditer(appendix)]
    assert len(guarantees) >= 20
    assert tested == guarantees
    for number, title in tested:
        entry = appendix.split(f"**{number}. {title}**\n", 1)[1].split("\n**", 1)[0]
        assert (number, entry.count("\n- ") >= 1) == (number, True)
