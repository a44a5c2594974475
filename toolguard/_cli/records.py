"""What ``toolguard stats`` and ``toolguard replay`` share: the recorded database they read.

``--db`` names the database of ``toolguard serve`` or ``toolguard mcp-proxy``
(a SQLite file or a ``postgresql://`` URL) and ``--since`` the start of the
period. Both commands change nothing recorded: a SQLite file that does not exist is an
error, never created.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from toolguard._chat.stats import SinceError, parse_since, stored_states
from toolguard._cli.serve_db import DEFAULT_DB, ServeError, open_store, shown_db
from toolguard._cli.startup import one_line
from toolguard._core.records import utcnow
from toolguard._stores.protocol import Store, ThreadState

__all__ = ["RecordsError", "add_records_options", "fail", "period_of", "read_records"]

_POSTGRES = ("postgresql://", "postgres://")


class RecordsError(Exception):
    """The recorded database cannot be read; the text (one line) says which option and why."""


def add_records_options(parser: argparse.ArgumentParser) -> None:
    """``--db``, ``--since`` and ``--json`` on a command's parser."""
    parser.add_argument(
        "--db",
        metavar="PATH|URL",
        help=(
            "the database of toolguard serve or mcp-proxy: a SQLite file, or PostgreSQL at a"
            f" postgresql:// URL (default: {DEFAULT_DB})"
        ),
    )
    parser.add_argument(
        "--since",
        metavar="DATE",
        help=(
            "only the calls from DATE on: 2026-11-01, 2026-11-01T09:00:00Z or 30d (30 days ago);"
            " default: every recorded call"
        ),
    )
    parser.add_argument(
        "--until",
        metavar="DATE",
        help="only the calls up to DATE (as --since; default: now)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def period_of(args: argparse.Namespace) -> tuple[datetime | None, datetime]:
    """``--since`` (``None`` without it) and ``--until`` (now without it) as times.

    Raises:
        RecordsError: either is not a date, a time or a number of days.
    """
    until = utcnow()
    try:
        if args.until is not None:
            until = parse_since(args.until, now=until)
    except SinceError as exc:
        msg = f"--until: {exc}"
        raise RecordsError(msg) from None
    try:
        since = parse_since(args.since, now=until) if args.since is not None else None
    except SinceError as exc:
        msg = f"--since: {exc}"
        raise RecordsError(msg) from None
    return since, until


def _store(db: str | None) -> Store:
    """The store of ``--db``, refusing a SQLite file that does not exist."""
    path = db or DEFAULT_DB
    if not path.startswith(_POSTGRES) and not Path(path).is_file():
        msg = f"--db {path}: no such database file; give the --db of toolguard serve or mcp-proxy"
        raise RecordsError(msg)
    try:
        return open_store(db)
    except ServeError as exc:
        raise RecordsError(str(exc)) from None


async def read_records(db: str | None) -> list[ThreadState]:
    """Every thread of ``--db``, oldest first (one that cannot be read back is skipped).

    Raises:
        RecordsError: the database cannot be opened or read (its password masked).
    """
    store = _store(db)
    try:
        return await stored_states(store)
    except Exception as exc:  # a database that cannot be read: one line, no traceback
        problem = one_line(exc)
        password = _password_of(db or "")
        if password:
            problem = problem.replace(password, "***")
        msg = f"--db {shown_db(db)}: cannot read the database: {problem}"
        raise RecordsError(msg) from exc
    finally:
        closing = getattr(store, "aclose", None)
        if closing is not None:
            await closing()


def _password_of(db: str) -> str | None:
    """The password in a ``postgresql://user:password@host/...`` URL, or ``None``."""
    userinfo, at, _ = db.partition("://")[2].rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.partition(":")[2] or None


def fail(exc: Exception) -> int:
    """Print ``error: ...`` for ``exc`` and give exit code 2."""
    sys.stderr.write(f"error: {exc}\n")
    return 2
