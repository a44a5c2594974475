"""``toolguard review``: decide the pending reviews of a running server in a terminal.

``toolguard review --url URL`` follows the reviews of a ``toolguard serve`` or ``toolguard
mcp-proxy`` (or any app of :func:`~toolguard.http.create_app`) live, through its HTTP API: ``GET
/hitl/events`` (``GET /hitl/reviews`` every second when the server has no stream left), and shows
each waiting review, oldest first, with the approval cards of ``toolguard demo``
(:mod:`toolguard._cli.terminal`). The reviewer's decisions go to ``POST /hitl/review`` as they
are: the server decides what they do, so its rules, reviewers table, quorum, grants and audit
trail apply as on the page. Nothing here decides anything.

Sign-in: ``--token-env NAME`` sends the token in the environment variable NAME (a server started
with ``--tokens``); ``--url`` may be the sign-in link itself; without either, a server that signs
in with its link is looked up in this user's runtime files (as ``toolguard link`` does) and its
current link opened, so the person at the machine needs nothing more.

A review decided elsewhere while its card is shown (on the page, through the API, by another
terminal, expiry or cancellation) ends the card at once, says so and sends nothing: the server
would refuse the decision anyway (a decision names its ``review_id``). The HTTP side (sign-in,
requests, the live listing) is :mod:`toolguard._cli.review_api`, on the standard library only, so
the command works with toolguard's core install.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any
from urllib.parse import quote

from pydantic import ValidationError

from toolguard._cli.review_api import (
    DECISION_TIMEOUT,
    GoneError,
    Live,
    ReviewError,
    Server,
    check_url,
    connect,
    failure_reason,
    refused,
    token_from_env,
)
from toolguard._cli.terminal import (
    InputEndedError,
    QuitError,
    Terminal,
    ask_decisions,
    prose,
    render_outcome,
)
from toolguard._core.records import Action, PendingReview
from toolguard._core.reveal import reveal_text
from toolguard._tools.tool import Tool

__all__ = ["add_parser", "review_loop"]

_SETTLE_SECONDS = 5.0
"""How long the outcome of an approved call still under way is waited for."""


class _InterruptedError(Exception):
    """Ctrl-C while a review was shown."""


# ---------------------------------------------------------------------------- one review


def _no_body(**args: Any) -> None:
    """The body of a tool seen from a terminal: it never runs here."""
    msg = "toolguard review never runs a tool"
    raise RuntimeError(msg)


def _tools(server: Server) -> tuple[dict[str, Tool[..., Any]] | None, dict[str, str]]:
    """The server's tools (``GET /hitl/tools``), to check edits against their schemas, and why
    each needs approval. Without the ``schema`` extra, edits are typed as one line of JSON."""
    listed = server.call("GET", "/hitl/tools").body
    items = listed.get("tools") if isinstance(listed, dict) else None
    tools: dict[str, Tool[..., Any]] | None = {}
    reasons: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        approval = item.get("approval")
        if isinstance(approval, dict) and approval.get("needs_approval") is True:
            reasons[name] = str(approval.get("reason") or "")
        if tools is None:
            continue
        try:
            tools[name] = Tool.from_schema(
                name, str(item.get("description") or ""), item.get("parameters") or {}, _no_body
            )
        except ImportError:  # no jsonschema: every edit is one line of JSON
            tools = None
        except (TypeError, ValueError):
            continue  # a schema the checker cannot read: this tool's edit is one line of JSON
    return tools, reasons


def _thread_actions(server: Server, thread_id: str) -> list[Action]:
    """The actions of a thread (``[]`` when it cannot be read)."""
    found = server.call("GET", f"/hitl/threads/{quote(thread_id, safe='')}")
    listed = found.body.get("actions") if isinstance(found.body, dict) else None
    actions: list[Action] = []
    for item in listed if found.status == 200 and isinstance(listed, list) else []:
        with contextlib.suppress(ValidationError):
            actions.append(Action.model_validate(item))
    return actions


def _outcomes(term: Terminal, server: Server, thread_id: str, ids: Sequence[str]) -> list[Action]:
    """Show the outcome of the actions ``ids`` of the thread; the actions.

    An approved call still under way (a gateway forwards it once the decision is taken) is
    waited for, at most :data:`_SETTLE_SECONDS`.
    """
    deadline = time.monotonic() + _SETTLE_SECONDS
    while True:
        mine = [a for a in _thread_actions(server, thread_id) if a.id in ids]
        running = any(a.status == "approved" and a.result is None for a in mine)
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for action in mine:
        if action.status == "requested":  # a quorum's approval counted: it still waits
            continue
        by = f" (by {prose(action.reviewer)})" if action.reviewer else ""
        term.say(render_outcome(action) + by)
    return mine


def _gone(term: Terminal, server: Server, review: Mapping[str, Any], ids: Sequence[str]) -> None:
    """Say that the review ended elsewhere, and how."""
    statuses = {a.status for a in _thread_actions(server, review["thread_id"]) if a.id in ids}
    if statuses == {"expired"}:
        head = "This review expired meanwhile: your decision was not sent."
    elif statuses == {"cancelled"}:
        head = "This review was cancelled meanwhile: your decision was not sent."
    else:
        head = "This review was decided elsewhere meanwhile: your decision was not sent."
    term.say(term.strong(head))
    _outcomes(term, server, review["thread_id"], ids)


def _drop_typed_ahead() -> None:
    """Forget what was typed before a review is shown: keys meant for an earlier card (or
    typed while nothing was asked) must not decide this one."""
    if sys.platform == "win32" or not sys.stdin.isatty():
        return
    import termios  # noqa: PLC0415 - POSIX only

    with contextlib.suppress(OSError, termios.error):
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


def _heading(review: Mapping[str, Any]) -> str:
    """The line above a review's cards: its thread, when it was asked, its deadline, its call."""
    line = f"Review in thread {reveal_text(review['thread_id'], single_line=True)}"
    if isinstance(review.get("requested_at"), str):
        line += f", asked {prose(review['requested_at'])}"
    if isinstance(review.get("expires_at"), str):
        line += f", expires {prose(review['expires_at'])}"
    call = review.get("call")
    if isinstance(call, dict):
        client = call.get("client")
        server = call.get("server")
        name = client.get("name") if isinstance(client, dict) else None
        target = server.get("name") or server.get("target") if isinstance(server, dict) else None
        if isinstance(name, str):
            line += f"; from {prose(name)}"
        if isinstance(target, str):
            line += f" to {prose(target)}"
    return line


def _quorum_lines(pending: PendingReview) -> list[str]:
    """``send_email: 1 of 2 approvals (approved by alice)`` for each action needing several."""
    lines = []
    for config in pending.model_dump(mode="json")["review_configs"]:
        approvals = config.get("approvals")
        if isinstance(approvals, dict):
            by = ", ".join(str(name) for name in approvals.get("by") or [])
            lines.append(
                f"{reveal_text(str(config.get('action_name')), single_line=True)}:"
                f" {prose(str(approvals.get('given')))} of"
                f" {prose(str(approvals.get('required')))} approvals"
                + (f" (approved by {prose(by)})" if by else "")
            )
    return lines


def _decide(
    term: Terminal,
    server: Server,
    live: Live,
    review: Mapping[str, Any],
    *,
    tools: Mapping[str, Tool[..., Any]] | None,
    reasons: Mapping[str, str],
) -> bool:
    """Ask the decisions of one review and send them; say what came of them.

    Returns whether to ask again: the server refused the decisions (400) and the review waits.
    """
    pending = PendingReview.model_validate(review["pending_review"])
    actions = [a for a in _thread_actions(server, review["thread_id"]) if a.status == "requested"]
    ids = [a.id for a in actions]
    _drop_typed_ahead()
    term.say()
    term.say(_heading(review))
    for line in _quorum_lines(pending):
        term.say(line)
    try:
        with live.watching(review["review_id"]):
            decisions = ask_decisions(term, pending, tools, actions, reasons=reasons)
    except GoneError:
        term.say()
        if live.problem is not None:
            raise ReviewError(live.problem) from None
        _gone(term, server, review, ids)
        return False
    if not live.pending(review["review_id"]):
        _gone(term, server, review, ids)
        return False
    body = {
        "thread_id": review["thread_id"],
        "review_id": review["review_id"],
        "decisions": decisions,
    }
    term.say("Sending...")
    try:
        found, _ = server.request("POST", "/hitl/review", body, timeout=DECISION_TIMEOUT)
    except (OSError, http.client.HTTPException) as exc:
        msg = (
            f"lost the server at {server.url} while it took the decision:"
            f" {failure_reason(exc)}; it may or may not have arrived: look at the thread on the"
            " page"
        )
        raise ReviewError(msg) from None
    refused(found)
    if found.status != 200:
        current = server.call("GET", f"/hitl/threads/{quote(review['thread_id'], safe='')}").body
        if isinstance(current, dict) and current.get("review_id") != review["review_id"]:
            _gone(term, server, review, ids)
            return False
        term.say(f"The server refused the decision (HTTP {found.status}): {found.detail}")
        return found.status == 400
    answer = found.body if isinstance(found.body, dict) else {}
    _outcomes(term, server, review["thread_id"], ids)
    if answer.get("review_id") == review["review_id"] and answer.get("pending_review"):
        term.say("Your decision is counted; the review waits for another reviewer.")
    elif answer.get("pending_review"):
        term.say("The model asked for another action: it waits in the list.")
    reply = answer.get("reply")
    if isinstance(reply, str) and reply:
        term.say(f"assistant: {prose(reply)}")
    return False


# ---------------------------------------------------------------------------- the loop


def _listing(reviews: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines of the waiting reviews: count, then one line per review."""
    if not reviews:
        return ["No review waits now. Waiting for reviews... (Ctrl-C to leave)"]
    lines = [f"{len(reviews)} review{'s' if len(reviews) > 1 else ''} waiting:"]
    for number, review in enumerate(reviews, 1):
        requests = review["pending_review"]["action_requests"]
        names = ", ".join(reveal_text(str(r.get("name")), single_line=True) for r in requests)
        thread = reveal_text(review["thread_id"], single_line=True)
        lines.append(f"  {number}. {names} (thread {thread})")
    return lines


def _answer_key(review: Mapping[str, Any]) -> str:
    """A review as the reviewer answered it, not asked again: its id and its calls (a quorum's
    progress aside; an edit elsewhere restarts the count on new arguments, asked again)."""
    requests = review["pending_review"]["action_requests"]
    return json.dumps([review["thread_id"], review["review_id"], requests], sort_keys=True)


def _news(reviews: list[dict[str, Any]], *, shown: list[str] | None, answered: set[str]) -> bool:
    """Whether ``reviews`` list something new: another listing, or a review not answered yet."""
    todo = [r for r in reviews if _answer_key(r) not in answered]
    return bool(todo) or _listing(todo) != shown


def review_loop(term: Terminal, server: Server, live: Live) -> None:
    """Show the waiting reviews and ask each one's decisions, oldest first, until the reviewer
    leaves (:class:`QuitError`, :class:`InputEndedError`, ``KeyboardInterrupt``).

    Raises:
        ReviewError: the server is lost or signs this terminal out.
    """
    tools, reasons = _tools(server)
    answered: set[str] = set()
    shown: list[str] | None = None
    while True:
        reviews = live.wait(partial(_news, shown=shown, answered=answered))
        todo = [r for r in reviews if _answer_key(r) not in answered]
        if _listing(todo) != shown:
            shown = _listing(todo)
            term.say()
            for line in shown:
                term.say(line)
        if not todo:
            continue
        review = todo[0]
        known = tools is None or all(
            r.name in tools
            for r in PendingReview.model_validate(review["pending_review"]).action_requests
        )
        if not known:
            tools, reasons = _tools(server)
        answered.add(_answer_key(review))
        try:
            again = _decide(term, server, live, review, tools=tools, reasons=reasons)
        except KeyboardInterrupt:
            raise _InterruptedError from None
        if again:
            answered.discard(_answer_key(review))
        shown = None  # show the list again after each review


# ---------------------------------------------------------------------------- the command


def _review(args: argparse.Namespace) -> int:
    problem = check_url(args.url)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        return 2
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    term = Terminal(sys.stdout, color=color)
    live: Live | None = None
    try:
        token = token_from_env(args.token_env) if args.token_env is not None else None
        server, about = connect(args.url, token, term.say)
        term.say(term.strong(f"toolguard review: {server.url} | {about}"))
        live = Live(server)
        live.start()
        review_loop(term, server, live)
    except ReviewError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"error: {exc}\n")
        return exc.code
    except (QuitError, InputEndedError):
        term.say("You left: nothing was sent for the review shown; it stays pending.")
        return 0
    except _InterruptedError:
        term.say()
        term.say("Interrupted: nothing was sent for the review shown; it stays pending.")
        return 130
    except KeyboardInterrupt:
        term.say()
        term.say("Bye.")
        return 130
    finally:
        if live is not None:
            live.stop()
    return 0


def add_parser(commands: Any) -> None:
    """The ``review`` command, on the ``toolguard`` parser's subcommands."""
    review = commands.add_parser(
        "review",
        help="approve, edit or reject the pending reviews of a running server in this terminal",
        description=(
            "Follow the pending reviews of a running toolguard serve or toolguard mcp-proxy"
            " and approve, edit or reject each one here. The decisions go to the server's"
            " POST /hitl/review, as on the approval page."
        ),
    )
    review.add_argument(
        "--url",
        required=True,
        metavar="URL",
        help=(
            "the server's address (its approval page), e.g. http://127.0.0.1:8000/, or its"
            " sign-in link"
        ),
    )
    review.add_argument(
        "--token-env",
        metavar="NAME",
        help=(
            "sign in with the token in environment variable NAME (a server with --tokens;"
            " default: the server's sign-in link, found on this machine)"
        ),
    )
    review.set_defaults(handler=_review)
