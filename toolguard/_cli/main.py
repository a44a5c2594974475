"""The ``toolguard`` command line: ``demo``, ``serve`` and ``tools``.

``toolguard demo`` is a terminal assistant over the demo workspace (see
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

An edit asks the arguments field by field, each prefilled with its current
value (shown escaped; Enter keeps it), checks the result against the tool's
schema (``Tool.validate_args``) and asks again for the fields that fail,
with the error, before anything is sent.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TextIO

from toolguard._chat.chat import BlockingChat, ReviewedChat
from toolguard._chat.turns import ChatTurn
from toolguard._core.errors import ToolguardError
from toolguard._core.records import Action, ActionRequest, PendingReview
from toolguard._core.reveal import (
    Segment,
    reveal_action,
    reveal_json,
    reveal_text,
    segments_text,
    warning_lines,
)
from toolguard._stores.memory import Store
from toolguard._tools.arguments import ToolArgumentsError
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset, guard
from toolguard._version import __version__
from toolguard.demo import DemoModel, DemoWorkspace, build_demo_chat
from toolguard.demo.workspace import weekday

__all__ = ["describe_model", "main", "render_card", "render_outcome"]

DECISION_PROMPT = "[a]pprove / [e]dit / [r]eject"
"""The question under a card when one action waits."""
BATCH_PROMPT = "[a]pprove / [e]dit / [r]eject / [A]pprove all / [R]eject all"
"""The question under each card when several actions wait."""
REJECT_QUESTION = "Why are you rejecting this tool?"
"""Asked after a reject; the answer is the reason the model reads (empty: none)."""
REJECT_ALL_QUESTION = "Why are you rejecting these tools?"
"""Asked after a reject-all; the reason goes with every remaining action."""
FIELDS_HINT = (
    "Edit the arguments field by field. Enter keeps the value shown; text is taken as"
    ' typed (or as a "JSON string"), other values as JSON (3, true, null, ["a"]).'
)
"""Shown when an edit starts (tools with a known schema)."""
CONFIRM_EDIT_PROMPT = "[s]end / [b]ack"
"""Asked once the edited arguments fit the tool's schema."""
LEFT_IN_REVIEW = "You left while actions waited for your approval: nothing was run."
INTERRUPTED_IN_REVIEW = "Interrupted while actions waited for your approval: nothing was run."
INTERRUPTED = "Interrupted: nothing was run."
INTERRUPTED_WORKING = (
    "Interrupted while the assistant was working: load the thread to see what ran."
)
_QUIT_WORDS = ("quit", "exit", "q")

_EXAMPLES = (
    "email alice that the meeting moved to 11",
    "mail alice and bob that lunch is at 12:30",
    "what's on my calendar tomorrow",
    "add a task to renew my passport by friday",
)


# ---------------------------------------------------------------------------- rendering


def render_card(
    request: ActionRequest,
    *,
    index: int = 1,
    total: int = 1,
    mark: Callable[[str], str] | None = None,
    why: str | None = None,
) -> str:
    """The approval card of one action: header, description and the FULL arguments.

    Args:
        request: the action, from ``pending_review.action_requests``.
        index: its position, from 1.
        total: how many actions wait in this review.
        mark: applied to each escaped character (e.g. reverse video on a
            colour terminal); by default it is shown as it is.
        why: why the tool needs approval (the classifier's reason), shown
            under the description as ``Why it asks: ...``.

    Returns:
        Plain text without a trailing newline; the arguments are indented
        JSON, so they can be copied into an edit. Invisible and look-alike
        characters (bidi controls, zero-width characters, control characters
        such as ``ESC``, a Cyrillic letter in a Latin word; see
        :mod:`toolguard._core.reveal`) are shown escaped as ``\\uXXXX`` and listed in
        a warning above the arguments, so nothing the model sent can hide
        text or act on the terminal; the escaped JSON still parses back to
        exactly the arguments.
    """
    shown = reveal_action(request.name, request.args, request.description)
    warning = warning_lines(shown.findings)

    def text(segments: list[Segment]) -> str:
        if mark is None:
            return segments_text(segments)
        return "".join(part if what is None else mark(part) for part, what in segments)

    return "\n".join(
        [
            f"== Approval {index}/{total}: {text(shown.name)} ==",
            text(shown.description),
            *([f"Why it asks: {_prose(why)}"] if why else []),
            *warning[:1],
            *(f"  - {item}" for item in warning[1:]),
            "Arguments:",
            text(shown.args),
        ]
    )


def _prose(text: str) -> str:
    """Untrusted text for the terminal: control, bidi and invisible characters escaped."""
    return reveal_text(text, letters=False)


def render_outcome(action: Action) -> str:
    """One line about a decided action: its tool, final status and what the model read."""
    line = f"[{action.status}] {reveal_text(action.name, single_line=True)}"
    if action.result is not None:
        line += f": {_prose(action.result.content)}"
    elif action.status == "edited":
        line += ": the edited call waits for its own approval"
    return line


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


# ---------------------------------------------------------------------------- terminal I/O


class _InputEndedError(Exception):
    """The input ended (EOF): the program stops."""


class _QuitError(Exception):
    """The reviewer typed quit at an approval prompt: the program stops, nothing runs."""


class _InterruptedError(Exception):
    """Ctrl-C, already reported: the program stops with status 130."""


class Terminal:
    """Questions and answers on a terminal, or from a script without prompts.

    Args:
        out: where everything is written.
        answers: ``None`` to ask with :func:`input`; else a stream whose lines
            are the answers (non-interactive: no prompt is shown and each
            answer is echoed as ``> answer``).
        color: emphasise headers with ANSI codes.
    """

    def __init__(self, out: TextIO, *, answers: TextIO | None = None, color: bool = False) -> None:
        self.out = out
        self.answers = answers
        self.color = color

    def say(self, text: str = "") -> None:
        """Write ``text`` and a newline."""
        self.out.write(f"{text}\n")
        self.out.flush()

    def strong(self, text: str) -> str:
        """``text`` in bold when colours are on."""
        return f"\033[1m{text}\033[0m" if self.color else text

    def mark(self, text: str) -> str:
        """``text`` in reverse video when colours are on: an escaped character on a card."""
        return f"\033[7m{text}\033[27m" if self.color else text

    def ask(self, prompt: str, *, question: bool = False) -> str:
        """The next answer, without its line ending.

        Args:
            prompt: shown before the answer on a terminal.
            question: the prompt is a question worth keeping in a transcript:
                without a terminal it is printed on its own line.

        Raises:
            _InputEndedError: the input ended.
        """
        if self.answers is None:
            try:
                return input(f"{prompt} > ")
            except EOFError:
                self.say()
                raise _InputEndedError from None
        if question:
            self.say(prompt)
        line = self.answers.readline()
        if not line:
            raise _InputEndedError
        answer = line.rstrip("\r\n")
        self.say(f"> {answer}" if answer else ">")
        return answer


# ---------------------------------------------------------------------------- the review


_Choice = Literal["approve", "edit", "reject", "approve_all", "reject_all"]
_CHOICES: dict[str, _Choice] = {
    "a": "approve",
    "approve": "approve",
    "e": "edit",
    "edit": "edit",
    "r": "reject",
    "reject": "reject",
    "A": "approve_all",
    "approve all": "approve_all",
    "R": "reject_all",
    "reject all": "reject_all",
}


def _choice(answer: str) -> _Choice | None:
    answer = answer.strip()
    if answer in ("A", "R"):
        return _CHOICES[answer]
    return _CHOICES.get(" ".join(answer.lower().split()))


def _reject(reason: str) -> dict[str, Any]:
    reason = reason.strip()
    return {"type": "reject", "message": reason} if reason else {"type": "reject"}


def _ask_args(term: Terminal, request: ActionRequest) -> dict[str, Any] | None:
    """New arguments for an edit, as a JSON object; ``None`` when the user gives up (empty line)."""
    term.say(
        "Type ALL the arguments as one line of JSON (an empty line goes back). Now:"
        f" {reveal_json(request.args, indent=None)}"
    )
    while True:
        answer = term.ask("args")
        if not answer.strip():
            return None
        try:
            value = json.loads(answer)
        except json.JSONDecodeError as exc:
            term.say(f"Invalid JSON: {exc}. Try again.")
            continue
        if not isinstance(value, dict):
            term.say(f"The arguments must be a JSON object, got {type(value).__name__}. Try again.")
            continue
        return value


def _accepts(schema: Mapping[str, Any], kind: str) -> bool:
    """Whether a field's schema says it takes values of JSON type ``kind``."""
    kinds = schema.get("type")
    if kinds == kind or (isinstance(kinds, list) and kind in kinds):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    return isinstance(branches, list) and any(
        isinstance(branch, Mapping) and _accepts(branch, kind) for branch in branches
    )


def _field_value(answer: str, schema: Mapping[str, Any]) -> Any:
    """A typed answer as a field's value: text as typed for text fields, else JSON."""
    if answer == "null" and _accepts(schema, "null"):
        return None
    if _accepts(schema, "string"):
        if answer.startswith('"'):
            try:
                value = json.loads(answer)
            except json.JSONDecodeError:
                return answer
            return value if isinstance(value, str) else answer
        return answer
    try:
        return json.loads(answer)
    except json.JSONDecodeError:
        return answer  # the schema check names the field and says what it needs


def _failing_fields(error: str, fields: Sequence[str]) -> list[str]:
    """The fields a ``ToolArgumentsError`` names (all of them when it names none)."""
    failing = [f for f in fields if f"'{f}'" in error or f"'{f}." in error]
    return failing or list(fields)


def _edit_fields(
    term: Terminal, request: ActionRequest, tool: Tool[..., Any]
) -> dict[str, Any] | None:
    """The edited arguments, asked field by field and checked against the tool's schema.

    ``None`` when the reviewer goes back to the decision prompt.
    """
    properties = tool.parameters.get("properties")
    schemas: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    fields = [*schemas, *(name for name in request.args if name not in schemas)]
    values = dict(request.args)
    term.say(FIELDS_HINT)
    todo = fields
    while True:
        for field in todo:
            shown = reveal_text(field, single_line=True)
            now = reveal_json(values[field], indent=None) if field in values else "(not set)"
            term.say(f"{shown}: {now}")
            answer = term.ask(shown)
            if answer:
                schema = schemas.get(field)
                values[field] = _field_value(answer, schema if isinstance(schema, Mapping) else {})
        try:
            tool.validate_args(values)
        except ToolArgumentsError as exc:
            term.say(f"The edit does not fit the tool: {_prose(str(exc))}")
            todo = _failing_fields(str(exc), fields)
            continue
        term.say(f"Edited arguments: {reveal_json(values, indent=None)}")
        while True:
            answer = " ".join(term.ask(CONFIRM_EDIT_PROMPT).lower().split())
            if answer in ("s", "send"):
                return values
            if answer in ("b", "back"):
                return None
            if answer in _QUIT_WORDS:
                raise _QuitError
            term.say("Please answer s (send) or b (back).")


def _why(tools: Mapping[str, Tool[..., Any]] | None, name: str) -> str | None:
    """Why the classifier asks about tool ``name``, when ``tools`` is a toolset that knows it."""
    if not isinstance(tools, Toolset) or name not in tools:
        return None
    found = tools.explain(name)
    return found.reason if found.needs_approval else None


def ask_decisions(
    term: Terminal,
    review: PendingReview,
    tools: Mapping[str, Tool[..., Any]] | None = None,
) -> list[dict[str, Any]]:
    """One decision per action, asked card by card (wire-format dicts, in order).

    Args:
        term: where to ask.
        review: the pending review.
        tools: the chat's tools by name: an edit of a known tool is asked
            field by field and checked against its schema; without it, as
            one line of JSON.

    Raises:
        _InputEndedError: the input ended before every action was decided.
        _QuitError: the reviewer typed quit at the approval prompt.
    """
    requests = review.action_requests
    total = len(requests)
    if total > 1:
        term.say(f"{total} actions wait for your approval.")
    prompt = BATCH_PROMPT if total > 1 else DECISION_PROMPT
    decisions: list[dict[str, Any]] = []
    while len(decisions) < total:
        index = len(decisions)
        request = requests[index]
        card = render_card(
            request, index=index + 1, total=total, mark=term.mark, why=_why(tools, request.name)
        )
        term.say(term.strong(card))
        while True:
            answer = term.ask(prompt)
            if " ".join(answer.lower().split()) in _QUIT_WORDS:
                raise _QuitError
            choice = _choice(answer)
            if choice == "approve":
                decisions.append({"type": "approve"})
            elif choice == "approve_all":
                decisions.extend({"type": "approve"} for _ in requests[index:])
            elif choice == "reject":
                decisions.append(_reject(term.ask(REJECT_QUESTION, question=True)))
            elif choice == "reject_all":
                reason = term.ask(REJECT_ALL_QUESTION, question=True)
                decisions.extend(_reject(reason) for _ in requests[index:])
            elif choice == "edit":
                tool = tools.get(request.name) if tools is not None else None
                args = (
                    _edit_fields(term, request, tool)
                    if tool is not None
                    else _ask_args(term, request)
                )
                if args is None:
                    continue
                decisions.append(
                    {"type": "edit", "edited_action": {"name": request.name, "args": args}}
                )
            else:
                term.say(
                    "Please answer a, e or r (or A / R for all), or quit."
                    if total > 1
                    else "Please answer a, e or r, or quit."
                )
                continue
            break
    return decisions


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
            term.say(f"assistant: {_prose(text)}")
        try:
            decisions = ask_decisions(term, turn.pending_review, tools)
        except _InputEndedError:
            term.say("The input ended while actions waited for your approval: nothing was run.")
            raise
        except _QuitError:
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
        term.say(f"assistant: {_prose(turn.reply)}")


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
                    term.say(f"error: {_prose(str(exc))}")
        except (_InputEndedError, _QuitError):
            pass
        except _InterruptedError:
            return 130
        except KeyboardInterrupt:
            term.say()
            term.say(INTERRUPTED_WORKING)
            return 130
    term.say("Bye.")
    return 0


def _demo(args: argparse.Namespace) -> int:
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
            with open(args.script, encoding="utf-8") as script:
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


# ---------------------------------------------------------------------------- serve and tools


def _serve(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module("toolguard._cli.serve")
    except ModuleNotFoundError as exc:
        if exc.name in ("toolguard._cli.serve", "toolguard"):
            sys.stderr.write(
                "error: this installation of toolguard has no HTTP server"
                " (the module toolguard._cli.serve is missing).\n"
            )
        else:
            sys.stderr.write(
                f"error: toolguard serve needs the 'http' extra ({exc.name} is not installed):"
                " pip install 'toolguard-hitl[http]'\n"
            )
        return 2
    serve: Callable[..., Any] = module.serve
    result = serve(
        tools=args.tools,
        model=args.model,
        base_url=args.base_url,
        db=args.db,
        host=args.host,
        port=args.port,
        max_body_bytes=args.max_body_bytes,
        allow_origins=args.allow_origin,
        allow_hosts=args.allow_host,
        **({"workers": args.workers} if args.workers != 1 else {}),
        **({"rules": args.rules} if args.rules is not None else {}),
        **({"notify_url": args.notify_url} if args.notify_url is not None else {}),
        **({"notify_secret": args.notify_secret} if args.notify_secret is not None else {}),
    )
    return result if isinstance(result, int) else 0


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a positive number of processes, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a positive number of bytes, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _mcp_proxy(args: argparse.Namespace) -> int:
    from toolguard._gateway.proxy import main as proxy_main  # noqa: PLC0415 - needs the extras

    return proxy_main(args)


def load_object(spec: str) -> object:
    """Import ``MODULE:ATTR`` (ATTR may be dotted), looking in the current directory too.

    Raises:
        ValueError: ``spec`` is not ``MODULE:ATTR``, or the attribute does not exist.
        ImportError: the module cannot be imported.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        msg = f"expected MODULE:ATTR (e.g. myapp.tools:registry), got {spec!r}"
        raise ValueError(msg)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            msg = f"{module_name!r} has no attribute {attr!r}"
            raise ValueError(msg)
        obj = getattr(obj, part)
    return obj


def _tools(args: argparse.Namespace) -> int:
    try:
        registry: Any = load_object(args.registry)
        toolset = registry if isinstance(registry, Toolset) else guard(registry)
    except (ImportError, ValueError, TypeError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(toolset.table() + "\n")
    return 0


# ---------------------------------------------------------------------------- parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolguard",
        description="Human-in-the-loop approval for LLM agent tools.",
    )
    parser.add_argument("--version", action="version", version=f"toolguard {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

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

    serve = commands.add_parser(
        "serve",
        help="serve a chat with human review over HTTP",
        description="Serve the reviewed chat over HTTP (needs the 'http' extra).",
    )
    serve.add_argument(
        "--tools", metavar="MODULE:ATTR", help="the tool registry (default: the demo tools)"
    )
    serve.add_argument("--model", metavar="NAME", help="the model name (default: TOOLGUARD_MODEL)")
    serve.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server's URL")
    serve.add_argument(
        "--db",
        metavar="PATH",
        help="keep conversations in this SQLite file, or in PostgreSQL at a postgresql:// URL",
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on")
    serve.add_argument(
        "--max-body-bytes",
        type=_positive_int,
        default=1024 * 1024,
        metavar="N",
        help="refuse request bodies larger than N bytes with a 413 (default: 1048576)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of ORIGIN (scheme://host[:port]) send requests (repeatable)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help=(
            "also answer requests for HOST or HOST:PORT, e.g. the server's name when"
            " listening on 0.0.0.0; '*' answers any Host (repeatable)"
        ),
    )
    serve.add_argument(
        "--rules",
        metavar="FILE",
        help="a TOML file of allow/ask/deny rules applied before each tool's own policy",
    )
    serve.add_argument(
        "--notify-url",
        metavar="URL",
        help="POST review.* webhooks (requested, decided, expired, cancelled) to URL",
    )
    serve.add_argument(
        "--notify-secret",
        metavar="S",
        help="the secret that signs the webhooks (X-Toolguard-Signature: sha256=HMAC)",
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="run N server processes on the one --db (default: 1)",
    )
    serve.set_defaults(handler=_serve)

    proxy = commands.add_parser(
        "mcp-proxy",
        help="put human approval in front of any MCP server (an MCP gateway)",
        description=(
            "Serve the tools of the MCP server started by UPSTREAM_COMMAND on stdin/stdout;"
            " calls that need approval ask the client's user (elicitation) or wait for the"
            " approval page. Needs the 'mcp' and 'http' extras."
        ),
        usage=(
            "toolguard mcp-proxy [options] -- UPSTREAM_COMMAND [ARGS...]"
            " | toolguard mcp-proxy [options] --upstream-url URL"
        ),
    )
    proxy.add_argument(
        "--db",
        metavar="PATH",
        help="the SQLite file of the reviews (default: toolguard-mcp.sqlite3)",
    )
    proxy.add_argument("--host", default="127.0.0.1", help="the approval page's address")
    proxy.add_argument("--port", type=int, default=8765, help="the approval page's port")
    proxy.add_argument(
        "--ttl", type=float, default=300.0, help="seconds a call waits for a decision (default 300)"
    )
    proxy.add_argument(
        "--max-body-bytes",
        type=_positive_int,
        default=1024 * 1024,
        metavar="N",
        help="refuse request bodies larger than N bytes with a 413 (default: 1048576)",
    )
    proxy.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of ORIGIN (scheme://host[:port]) send requests (repeatable)",
    )
    proxy.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help=(
            "also answer requests for HOST or HOST:PORT besides the bound address and"
            " loopback; '*' answers any Host (repeatable)"
        ),
    )
    proxy.add_argument(
        "--upstream-url", metavar="URL", help="a streamable-HTTP upstream instead of a command"
    )
    proxy.add_argument(
        "--rules",
        metavar="FILE",
        help="a TOML file of allow/ask/deny rules applied before the classifier and annotations",
    )
    proxy.add_argument(
        "--notify-url",
        metavar="URL",
        help="POST review.* webhooks (requested, decided, expired, cancelled) to URL",
    )
    proxy.add_argument(
        "--notify-secret",
        metavar="S",
        help="the secret of the X-Toolguard-Signature HMAC of each webhook body",
    )
    proxy.add_argument("upstream", nargs=argparse.REMAINDER, help="the upstream server's command")
    proxy.set_defaults(handler=_mcp_proxy)

    tools = commands.add_parser(
        "tools",
        help="show which tools of a registry need approval, and why",
        description="Print the classification table of a tool registry.",
    )
    tools.add_argument("registry", metavar="MODULE:ATTR", help="a list, mapping or toolset")
    tools.set_defaults(handler=_tools)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` by default.

    Returns:
        The exit code: 0 on success, 2 on a usage or setup error.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)
