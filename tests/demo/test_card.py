"""The terminal card of ``toolguard demo``: quit at the approval prompt, Ctrl-C and the end of
the input anywhere (no traceback, nothing run), and edits asked field by field, prefilled,
checked against the tool's schema before they are sent.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from datetime import date
from typing import Any, Literal

import pytest

from tests.helpers import DEMO_CARD_ALICE, DEMO_SENT_ALICE, offline_env
from toolguard import Tool
from toolguard._cli.demo import INTERRUPTED, INTERRUPTED_IN_REVIEW, LEFT_IN_REVIEW, run_demo
from toolguard._cli.terminal import FIELDS_HINT, Terminal, ask_decisions
from toolguard._core.records import ActionRequest, PendingReview, ReviewConfig
from toolguard.demo import DemoWorkspace, build_demo_chat

MAIL_ALICE = "email alice that the meeting moved to 11"
STORE_LINE = "Store: in memory"


class Interrupting(io.StringIO):
    """Answers that end with Ctrl-C: ``readline`` raises KeyboardInterrupt after the lines."""

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        line = super().readline()
        if not line:
            raise KeyboardInterrupt
        return line


def demo(answers: io.StringIO) -> tuple[int, list[str], DemoWorkspace]:
    """Run the demo loop in process; return its exit code and the lines after the banner."""
    workspace = DemoWorkspace()
    out = io.StringIO()
    code = run_demo(
        build_demo_chat(workspace=workspace),
        Terminal(out, answers=answers),
        store_line=STORE_LINE,
        workspace=workspace,
    )
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Try: ")) + 1
    return code, lines[start:], workspace


# --- leaving -----------------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["quit", "exit", "q", " QUIT "])
def test_quit_at_the_approval_prompt_leaves_without_running_anything(word: str) -> None:
    """The banner's 'Type quit to leave' holds at the approval prompt too: status 0."""
    code, lines, workspace = demo(io.StringIO(f"{MAIL_ALICE}\n{word}\nnever read\n"))
    assert code == 0
    assert lines == [
        f"> {MAIL_ALICE}",
        "assistant: I will email alice@example.com.",
        *DEMO_CARD_ALICE,
        f"> {word}",
        LEFT_IN_REVIEW,
        "Bye.",
    ]
    assert workspace.sent == []


def test_an_unknown_answer_mentions_quit() -> None:
    """The approval prompt's help names every way out."""
    code, lines, _ = demo(io.StringIO(f"{MAIL_ALICE}\nmaybe\na\n"))
    assert code == 0
    assert lines[len(DEMO_CARD_ALICE) + 2 : len(DEMO_CARD_ALICE) + 6] == [
        "> maybe",
        "Please answer a, e or r, or quit.",
        "> a",
        DEMO_SENT_ALICE,
    ]


def test_the_end_of_the_input_at_the_reject_question_runs_nothing() -> None:
    """EOF after 'r' (before the reason): nothing was run, status 0."""
    code, lines, workspace = demo(io.StringIO(f"{MAIL_ALICE}\nr\n"))
    assert code == 0
    assert lines[-4:] == [
        "> r",
        "Why are you rejecting this tool?",
        "The input ended while actions waited for your approval: nothing was run.",
        "Bye.",
    ]
    assert workspace.sent == []


@pytest.mark.parametrize(
    "answers",
    [f"{MAIL_ALICE}\n", f"{MAIL_ALICE}\nr\n", f"{MAIL_ALICE}\ne\n\n"],
    ids=["approval-prompt", "reject-question", "edit-field"],
)
def test_ctrl_c_while_actions_wait_runs_nothing(answers: str) -> None:
    """Ctrl-C at any prompt of a review: status 130, the text says nothing was run."""
    code, lines, workspace = demo(Interrupting(answers))
    assert code == 130
    assert lines[-2:] == ["", INTERRUPTED_IN_REVIEW]
    assert workspace.sent == []


def test_ctrl_c_at_the_message_prompt() -> None:
    """Ctrl-C where the user types a message: status 130, nothing was run."""
    code, lines, _ = demo(Interrupting(""))
    assert (code, lines) == (130, ["", INTERRUPTED])


def read_until(process: subprocess.Popen[str], end: str) -> list[str]:
    """Lines of the process's stdout up to and including ``end`` (bounded by the stream)."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if lines[-1] == end:
            return lines
    pytest.fail(f"the demo ended before printing {end!r}: {lines}")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process")
def test_sigint_at_the_approval_prompt_leaves_without_a_traceback() -> None:
    """A real Ctrl-C (SIGINT) to `toolguard demo` waiting at a card: 130, no traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "toolguard", "demo", "--non-interactive"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=offline_env(),
    )
    try:
        assert process.stdin is not None
        process.stdin.write(f"{MAIL_ALICE}\n")
        process.stdin.flush()
        read_until(process, DEMO_CARD_ALICE[-1])
        os.kill(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130
    assert out.splitlines() == ["", INTERRUPTED_IN_REVIEW]
    assert "Traceback" not in err


# --- editing field by field --------------------------------------------------------------------


def add_task(title: str, due: date | None = None) -> str:
    """Add a task.

    Args:
        title: what needs doing.
        due: the day it is due.
    """
    return title


def set_priority(ticket: int, level: Literal["low", "high"], note: str = "") -> str:
    """Set a ticket's priority.

    Args:
        ticket: the ticket number.
        level: how urgent.
        note: why.
    """
    return level


def edit(tool: Tool[..., Any], args: dict[str, Any], answers: str) -> tuple[Any, list[str]]:
    """Ask the decisions of a one-action review of ``tool``; return them and the transcript."""
    review = PendingReview(
        action_requests=[ActionRequest(name=tool.name, args=args, description="d")],
        review_configs=[ReviewConfig(action_name=tool.name)],
    )
    out = io.StringIO()
    decisions = ask_decisions(
        Terminal(out, answers=io.StringIO(answers)), review, {tool.name: tool}
    )
    lines = out.getvalue().splitlines()
    return decisions, lines[lines.index("> e") + 1 :]


def edited(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The decisions of one edit."""
    return [{"type": "edit", "edited_action": {"name": name, "args": args}}]


def test_fields_are_prefilled_and_a_failing_field_is_asked_again() -> None:
    """Enter keeps a value; a value the schema refuses shows the error and is asked again."""
    task = {"title": "Renew passport", "due": "2026-12-04"}
    decisions, lines = edit(Tool(add_task), task, "e\n\nsomeday\nnull\ns\n")
    assert decisions == edited("add_task", {"title": "Renew passport", "due": None})
    assert lines == [
        FIELDS_HINT,
        'title: "Renew passport"',
        ">",
        'due: "2026-12-04"',
        "> someday",
        (
            "The edit does not fit the tool: Invalid arguments for tool `add_task`: 'due': Input"
            " should be a valid date or datetime, input is too short"
        ),
        'due: "someday"',
        "> null",
        'Edited arguments: {"title": "Renew passport", "due": null}',
        "> s",
    ]


def test_only_the_fields_that_fail_are_asked_again() -> None:
    """Two bad fields are asked again; the good one is not; JSON values and quoted text."""
    decisions, lines = edit(
        Tool(set_priority),
        {"ticket": 7, "level": "low", "note": ""},
        'e\nseven\nurgent\n"  spaced  "\n8\nhigh\ns\n',
    )
    assert decisions == edited("set_priority", {"ticket": 8, "level": "high", "note": "  spaced  "})
    assert lines == [
        FIELDS_HINT,
        "ticket: 7",
        "> seven",
        'level: "low"',
        "> urgent",
        'note: ""',
        '> "  spaced  "',
        (
            "The edit does not fit the tool: Invalid arguments for tool `set_priority`: 'ticket':"
            " Input should be a valid integer, unable to parse string as an integer; 'level':"
            " Input should be 'low' or 'high'"
        ),
        'ticket: "seven"',
        "> 8",
        'level: "urgent"',
        "> high",
        'Edited arguments: {"ticket": 8, "level": "high", "note": "  spaced  "}',
        "> s",
    ]


def test_a_schema_tool_is_checked_by_its_own_schema() -> None:
    """A Tool.from_schema tool: the jsonschema error, then the corrected value."""
    schema = {
        "type": "object",
        "properties": {"level": {"type": "string", "enum": ["low", "high"]}},
        "required": ["level"],
    }
    tool = Tool.from_schema("set_level", "Set the level.", schema, lambda **_: "ok")
    decisions, lines = edit(tool, {"level": "low"}, "e\nurgent\nhigh\nsend\n")
    assert decisions == edited("set_level", {"level": "high"})
    assert lines == [
        FIELDS_HINT,
        'level: "low"',
        "> urgent",
        (
            "The edit does not fit the tool: Invalid arguments for tool `set_level`: 'level':"
            " 'urgent' is not one of ['low', 'high']"
        ),
        'level: "urgent"',
        "> high",
        'Edited arguments: {"level": "high"}',
        "> send",
    ]


def test_hidden_characters_are_shown_escaped_and_kept_exactly() -> None:
    """Current values are shown revealed; Enter keeps the original characters exactly."""
    task = {"title": "pay bob@p\u0430ypal.com\u202e", "due": None}
    decisions, lines = edit(Tool(add_task), task, "e\n\n\ns\n")
    assert decisions == edited("add_task", task)
    assert lines[1] == 'title: "pay bob@p\\u0430ypal.com\\u202e"'
    assert lines[3] == "due: null"
    assert all("\u202e" not in line and "\u0430" not in line for line in lines)


def test_back_after_the_fields_returns_to_the_decision() -> None:
    """b goes back to the card's question; nothing of the edit is sent."""
    decisions, lines = edit(Tool(add_task), {"title": "x"}, "e\ny\n\nb\nr\nno\n")
    assert decisions == [{"type": "reject", "message": "no"}]
    assert lines[-5:] == [
        'Edited arguments: {"title": "y"}',
        "> b",
        "> r",
        "Why are you rejecting this tool?",
        "> no",
    ]
