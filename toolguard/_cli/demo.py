"""``toolguard demo``: a terminal assistant whose risky tools wait for your approval.

A terminal assistant over the demo workspace (see
:mod:`toolguard.demo`): every guarded call stops at an approval card where
you approve, edit or reject it, with a reason the model reads. It works
offline with a scripted model, or with a real one when ``OPENAI_API_KEY``
(or ``OPENAI_BASE_URL``) is set. ``--non-interactive`` reads the same
answers from stdin (``--script FILE``: from a file), one per line: it shows
no prompts (only the reject question, on its own line) and echoes every
answer as ``> answer``, so a session can be scripted and tested. The end of
the input ends the program with status 0, as ``quit`` does (also at an
approval prompt); Ctrl-C ends it with status 130. Either way, without a
traceback, and when actions were waiting for approval it says that nothing
was run (they stay pending in the thread).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from toolguard._chat.chat import BlockingChat, ReviewedChat
from toolguard._chat.turns import ChatTurn
from toolguard._cli.startup import sqlite_problem
from toolguard._cli.terminal import (
    InputEndedError,
    QuitError,
    Terminal,
    ask_decisions,
    prose,
    render_outcome,
)
from toolguard._core.errors import ToolguardError
from toolguard._stores.protocol import Store
from toolguard._tools.tool import Tool
from toolguard.demo import DemoModel, DemoWorkspace, build_demo_chat
from toolguard.demo.workspace import weekday

__all__ = [
    "INTERRUPTED",
    "INTERRUPTED_IN_REVIEW",
    "INTERRUPTED_WORKING",
    "LEFT_IN_REVIEW",
    "add_parser",
    "describe_model",
    "run_demo",
]

LEFT_IN_REVIEW = "You left while actions waited for your approval: nothing was run."
INTERRUPTED_IN_REVIEW = "Interrupted while actions waited for your approval: nothing was run."
INTERRUPTED = "Interrupted: nothing was run."
INTERRUPTED_WORKING = (
    "Interrupted while the assistant was working: load the thread to see what ran."
)

_EXAMPLES = (
    "email alice that the meeting moved to 11",
    "mail alice and bob that lunch is at 12:30",
    "what's on my calendar tomorrow",
    "add a task to renew my passport by friday",
)


def describe_model(model: object) -> str:
    """The startup line naming the model a chat uses."""
    if isinstance(model, DemoModel):
        return (
            "Model: built-in scripted demo model (offline; no OPENAI_API_KEY set)."
            " Set OPENAI_API_KEY (or OPENAI_BASE_URL) to use a real model."
        )
    name = getattr(model, "model", None)
    client = getattr(model, "client", None)
    base_url = getattr(client, "base_url", None)
    if isinstance(name, str) and base_url is not None:
        return f"Model: {name} at {base_url}"
    return f"Model: {model!r}"


class _InterruptedError(Exception):
    """Ctrl-C, already reported: the program stops with status 130."""


# ---------------------------------------------------------------------------- the demo loop


def _paused_text(session: BlockingChat, thread_id: str) -> str | None:
    """What the model said alongside the calls it proposed, if anything."""
    for message in reversed(session.get_thread(thread_id).messages):
        if message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) and content else None
    return None


def _converse(
    term: Terminal,
    session: BlockingChat,
    turn: ChatTurn,
    tools: Mapping[str, Tool[..., Any]] | None = None,
) -> None:
    """Review until the model answers; show every outcome and the reply."""
    while turn.pending_review is not None:
        text = _paused_text(session, turn.thread_id)
        if text:
            term.say(f"assistant: {prose(text)}")
        try:
            decisions = ask_decisions(term, turn.pending_review, tools, turn.actions)
        except InputEndedError:
            term.say("The input ended while actions waited for your approval: nothing was run.")
            raise
        except QuitError:
            term.say(LEFT_IN_REVIEW)
            raise
        except KeyboardInterrupt:
            term.say()
            term.say(INTERRUPTED_IN_REVIEW)
            raise _InterruptedError from None
        turn = session.submit_review(decisions, turn.thread_id)
        for action in turn.actions:
            if action.status != "requested":
                term.say(render_outcome(action))
    if turn.reply is not None:
        term.say(f"assistant: {prose(turn.reply)}")


def run_demo(
    chat: ReviewedChat,
    term: Terminal,
    *,
    store_line: str,
    workspace: DemoWorkspace | None = None,
) -> int:
    """The demo's read-act loop; returns the exit code."""
    term.say(term.strong("toolguard demo: an assistant whose risky tools wait for your approval."))
    term.say(describe_model(chat.model))
    term.say(store_line)
    if workspace is not None:
        term.say(
            "Workspace: a demo mailbox, calendar and task list in memory;"
            f" today is {weekday(workspace.today)} {workspace.today.isoformat()}."
        )
    term.say()
    term.say("Tools (the ones marked 'required' wait for your approval):")
    term.say(chat.toolset.table())
    term.say()
    term.say("Try: " + " | ".join(_EXAMPLES) + ". Type quit to leave.")
    thread_id: str | None = None
    with chat.blocking() as session:
        try:
            while True:
                try:
                    text = term.ask("you").strip()
                except KeyboardInterrupt:
                    term.say()
                    term.say(INTERRUPTED)
                    return 130
                if text.lower() in ("quit", "exit", "q"):
                    break
                if not text:
                    continue
                try:
                    turn = session.send_message(text, thread_id)
                    if thread_id is None and store_line.startswith("Store: SQLite"):
                        term.say(f"Thread: {turn.thread_id}")
                    thread_id = turn.thread_id
                    _converse(term, session, turn, chat.toolset)
                except ToolguardError as exc:
                    term.say(f"error: {prose(str(exc))}")
        except (InputEndedError, QuitError):
            pass
        except _InterruptedError:
            return 130
        except KeyboardInterrupt:
            term.say()
            term.say(INTERRUPTED_WORKING)
            return 130
    term.say("Bye.")
    return 0


def _start_up_problem(args: argparse.Namespace) -> str | None:
    """Why the demo cannot start with these options (one line with the fix), or ``None``."""
    if args.script:
        try:
            with open(args.script, encoding="utf-8"):
                pass
        except OSError as exc:
            return (
                f"--script {args.script}: cannot read the file: {exc.strerror or exc};"
                " check the path"
            )
    if args.db:
        problem = sqlite_problem(args.db, keep=False)  # made again at the first message
        if problem is not None:
            return f"--db {args.db}: {problem}"
    return None


def _demo(args: argparse.Namespace) -> int:
    problem = _start_up_problem(args)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        return 2
    store: Store | None = None
    store_line = "Store: in memory (use --db PATH to keep the conversation in SQLite)"
    if args.db:
        from toolguard._stores.sqlite import SQLiteStore  # noqa: PLC0415 - only when asked for

        store = SQLiteStore(args.db)
        store_line = f"Store: SQLite file {args.db}"
    workspace = DemoWorkspace()
    chat = build_demo_chat(store=store, workspace=workspace)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    try:
        if args.script:
            with open(args.script, encoding="utf-8", errors="replace") as script:
                term = Terminal(sys.stdout, answers=script, color=color)
                return run_demo(chat, term, store_line=store_line, workspace=workspace)
        term = Terminal(
            sys.stdout, answers=sys.stdin if args.non_interactive else None, color=color
        )
        return run_demo(chat, term, store_line=store_line, workspace=workspace)
    except KeyboardInterrupt:  # outside the loop's prompts (e.g. while starting): nothing ran
        sys.stdout.write(f"\n{INTERRUPTED}\n")
        return 130
    finally:
        close: Callable[[], None] | None = getattr(store, "close", None)
        if close is not None:
            close()


def add_parser(commands: Any) -> None:
    """The ``demo`` command, on the ``toolguard`` parser's subcommands."""
    demo = commands.add_parser(
        "demo",
        help="chat with a demo assistant whose risky tools wait for your approval",
        description=(
            "A terminal assistant over a demo mailbox, calendar and task list. Offline with a"
            " scripted model; with OPENAI_API_KEY (or OPENAI_BASE_URL, TOOLGUARD_MODEL) it"
            " uses a real model."
        ),
    )
    demo.add_argument("--db", metavar="PATH", help="keep the conversation in this SQLite file")
    source = demo.add_mutually_exclusive_group()
    source.add_argument(
        "--script", metavar="FILE", help="read the answers from FILE, one per line (no prompts)"
    )
    source.add_argument(
        "--non-interactive",
        action="store_true",
        help="read the answers from stdin, one per line (no prompts; answers are echoed)",
    )
    demo.set_defaults(handler=_demo)
