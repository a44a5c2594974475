"""The documentation: its examples run offline, print what it shows, and its links resolve.

Every ```python block of README.md and docs/*.md runs in a fresh module with
stdout captured, unless the line before it is ``<!-- not-run -->`` (a
fragment, or code that needs a real model or server). When the next fenced
block is a ```text block preceded by ``<!-- output -->``, the captured output
must equal it exactly. Blocks run in a temporary working directory, with the
network closed (loopback only) and ``input()`` answering ``y``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NOT_RUN = "<!-- not-run -->"
OUTPUT = "<!-- output -->"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<lang>[\w+-]*)[ \t]*$")
_LINK = re.compile(r"!?\[[^\]\n]*\]\((?P<target><[^>\n]+>|[^)\s]+)(?:[ \t]+\"[^\"\n]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One fenced code block of a Markdown file."""

    path: Path
    line: int
    """Line number of the opening fence (1-based)."""
    lang: str
    code: str
    marker: str | None
    """The HTML comment on the last non-blank line before the fence, if any."""

    @property
    def ident(self) -> str:
        """``README.md:LINE`` or ``docs/guide.md:LINE``."""
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        before = [text.strip() for text in lines[:index] if text.strip()]
        marker = before[-1] if before and before[-1].startswith("<!--") else None
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != ticks:
            text = lines[end]
            body.append(text[len(indent) :] if text.startswith(indent) else text.lstrip())
            end += 1
        blocks.append(
            Block(
                path=path,
                line=index + 1,
                lang=opening["lang"],
                code="\n".join(body) + "\n",
                marker=marker,
            )
        )
        index = end + 1
    return blocks


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines of ``path`` outside fenced code blocks, with their line numbers."""
    inside: set[int] = set()
    for block in parse_blocks(path):
        inside.update(range(block.line, block.line + block.code.count("\n") + 2))
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(number, text) for number, text in enumerate(lines, 1) if number not in inside]


def runnable_blocks() -> list[tuple[Block, str | None]]:
    """Every python block to run, with the output the docs show after it (or ``None``)."""
    found: list[tuple[Block, str | None]] = []
    for path in DOCS:
        blocks = parse_blocks(path)
        for position, block in enumerate(blocks):
            if block.lang != "python" or block.marker == NOT_RUN:
                continue
            following = blocks[position + 1] if position + 1 < len(blocks) else None
            expected = None
            if following is not None and following.marker == OUTPUT:
                expected = following.code
            found.append((block, expected))
    return found


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of every heading of ``path`` (repeats get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, text in prose(path):
        heading = _HEADING.match(text)
        if heading is None:
            continue
        base = slug(heading["text"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links() -> list[tuple[str, Path, str]]:
    """``(where, document, target)`` for every link that is not a URL or an e-mail address."""
    found: list[tuple[str, Path, str]] = []
    for path in DOCS:
        for number, text in prose(path):
            for link in _LINK.finditer(text):
                target = link["target"].strip("<>")
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                    continue
                where = f"{path.relative_to(ROOT).as_posix()}:{number}"
                found.append((where, path, target))
    return found


# ------------------------------------------------------------------------------ running a block


def _loopback_only(original: Any) -> Any:
    """Wrap ``socket.connect``/``connect_ex`` so that only loopback and Unix sockets connect."""

    def connect(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            loopback = host == "localhost"
            if not loopback:
                try:
                    loopback = ipaddress.ip_address(host).is_loopback
                except ValueError:
                    loopback = False
            if not loopback:
                msg = f"a documentation example tried to reach the network: {address!r}"
                raise ConnectionRefusedError(msg)
        return original(sock, address)

    return connect


def _answer_yes(prompt: object = "") -> str:
    """``input()`` for the examples: shows the prompt and answers ``y``."""
    sys.stdout.write(f"{prompt}y\n")
    return "y"


def run_block(block: Block, monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
    """Run ``block`` in a fresh module, in ``workdir``, without network access."""
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(socket.socket, "connect", _loopback_only(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _loopback_only(socket.socket.connect_ex))
    module = types.ModuleType("toolguard_docs_example")
    module.__dict__["input"] = _answer_yes
    # A real module, so that pydantic, dataclasses and typing resolve the block's names.
    monkeypatch.setitem(sys.modules, module.__name__, module)
    # Padding with newlines makes tracebacks point at the line in the Markdown file.
    code = compile("\n" * block.line + block.code, str(block.path), "exec")
    environment = dict(os.environ)
    tracing = _tracing()
    try:
        exec(code, module.__dict__)  # noqa: S102 - running the docs' own examples is the test
    finally:
        os.environ.clear()
        os.environ.update(environment)
        _restore_tracing(tracing)


def _tracing() -> tuple[Any, Any] | None:
    """OpenTelemetry's global tracer provider state, if OpenTelemetry is loaded."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    return trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER


def _restore_tracing(saved: tuple[Any, Any] | None) -> None:
    """Undo an example's global tracer provider, so it does not trace the tests after it."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    if saved is None or saved[1] is None:
        # No provider was set: a fresh Once (the saved one is marked done once an example sets one).
        from opentelemetry.util._once import Once

        saved = (Once(), None)
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = saved


RUNNABLE = runnable_blocks()


@pytest.mark.parametrize(
    ("block", "expected"), RUNNABLE, ids=[block.ident for block, _ in RUNNABLE]
)
def test_example_runs_and_prints_what_the_docs_show(
    block: Block,
    expected: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """The example runs offline; its stdout equals the ``<!-- output -->`` block after it."""
    capsys.readouterr()
    run_block(block, monkeypatch, tmp_path)
    printed = capsys.readouterr().out
    if expected is not None:
        assert printed == expected


def test_the_docs_have_runnable_examples_with_outputs() -> None:
    """Each of docs/guide.md, docs/http.md and README.md has runnable python examples."""
    counted = {path.name: 0 for path in DOCS}
    for block, _ in RUNNABLE:
        counted[block.path.name] += 1
    assert {name for name in ("README.md", "guide.md", "http.md") if counted.get(name, 0) == 0} == (
        set()
    )
    assert any(expected is not None for _, expected in RUNNABLE)


def test_output_blocks_follow_a_python_block() -> None:
    """Every ``<!-- output -->`` block is a text block right after a runnable python block."""
    misplaced: list[str] = []
    for path in DOCS:
        blocks = parse_blocks(path)
        for position, block in enumerate(blocks):
            if block.marker != OUTPUT:
                continue
            previous = blocks[position - 1] if position > 0 else None
            if (
                block.lang != "text"
                or previous is None
                or previous.lang != "python"
                or previous.marker == NOT_RUN
            ):
                misplaced.append(block.ident)
    assert misplaced == []


LINKS = relative_links()


@pytest.mark.parametrize(
    ("where", "document", "target"), LINKS, ids=[f"{w}->{t}" for w, _, t in LINKS]
)
def test_relative_link_points_to_an_existing_file(where: str, document: Path, target: str) -> None:
    """A relative link names a file of the repository, and its #anchor a heading there."""
    file_part, _, anchor = target.partition("#")
    destination = (document.parent / file_part).resolve() if file_part else document
    assert (where, destination.exists()) == (where, True)
    if anchor and destination.suffix == ".md":
        assert (where, anchor in anchors(destination)) == (where, True)


def test_parser_reads_markers_indentation_and_outputs(tmp_path: Path) -> None:
    """The block parser keeps the marker, strips list indentation and pairs the output."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Title\n"
        "\n"
        "<!-- not-run -->\n"
        "```python\n"
        "fragment(...)\n"
        "```\n"
        "\n"
        "1. step\n"
        "\n"
        "   ```python\n"
        "   print('hi')\n"
        "   ```\n"
        "\n"
        "<!-- output -->\n"
        "```text\n"
        "hi\n"
        "```\n",
        encoding="utf-8",
    )
    assert [(b.line, b.lang, b.code, b.marker) for b in parse_blocks(doc)] == [
        (4, "python", "fragment(...)\n", NOT_RUN),
        (10, "python", "print('hi')\n", None),
        (15, "text", "hi\n", OUTPUT),
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("1. Guard one function", "1-guard-one-function"),
        ("`@tool` and schemas", "tool-and-schemas"),
        ("The `Runner` in any agent loop", "the-runner-in-any-agent-loop"),
        ("What toolguard does NOT do", "what-toolguard-does-not-do"),
    ],
)
def test_slug_follows_github(heading: str, anchor: str) -> None:
    """Heading anchors are built the way GitHub builds them."""
    assert slug(heading) == anchor


def test_examples_cannot_reach_the_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A block that connects to a non-loopback address fails; the environment is restored."""
    block = Block(
        path=ROOT / "docs" / "guide.md",
        line=1,
        lang="python",
        code=(
            "import os, socket\n"
            "os.environ['TOOLGUARD_DOCS_PROBE'] = input('approve? ')\n"
            "socket.create_connection(('192.0.2.1', 80), timeout=1)\n"
        ),
        marker=None,
    )
    with pytest.raises(ConnectionRefusedError) as caught:
        run_block(block, monkeypatch, tmp_path)
    assert str(caught.value) == (
        "a documentation example tried to reach the network: ('192.0.2.1', 80)"
    )
    assert "TOOLGUARD_DOCS_PROBE" not in os.environ
