"""The ``--db`` of ``toolguard serve``: which store it names, checked once before the server
starts, and shown with a PostgreSQL password masked."""

from __future__ import annotations

from toolguard._cli.startup import STORE_CHECK_SECONDS, open_problem, sqlite_problem
from toolguard._stores.protocol import Store
from toolguard._stores.sqlite import SQLiteStore

__all__ = ["DEFAULT_DB", "ServeError", "check_store", "open_store", "shown_db"]

DEFAULT_DB = "toolguard.sqlite3"
"""The SQLite file used when no ``--db`` is given (in the current directory)."""

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class ServeError(Exception):
    """A setting of ``toolguard serve`` cannot be used; the text says which and why."""


def open_store(db: str | None) -> Store:
    """The store for ``--db``: PostgreSQL for a ``postgresql://`` URL, else a SQLite file.

    Args:
        db: ``postgresql://...`` or ``postgres://...`` (a libpq URL; needs the
            ``postgres`` extra), a SQLite file's path, or ``None`` for
            :data:`DEFAULT_DB`.

    Raises:
        ServeError: the ``postgres`` extra is missing, or the URL is not a
            valid connection string.
    """
    if db is None or not db.startswith(_POSTGRES_SCHEMES):
        return SQLiteStore(db or DEFAULT_DB)
    try:
        from toolguard.postgres import PostgresStore  # noqa: PLC0415 - the extra is optional
    except ImportError as exc:
        msg = (
            f"--db {shown_db(db)} needs the 'postgres' extra:"
            " pip install 'toolguard-hitl[postgres]'"
        )
        raise ServeError(msg) from exc
    try:
        return PostgresStore(db)
    except Exception as exc:  # psycopg.ProgrammingError: a malformed connection string
        msg = f"--db {shown_db(db)} is not a valid PostgreSQL connection string: {exc}"
        raise ServeError(msg) from exc


def check_store(db: str | None, *, timeout: float = STORE_CHECK_SECONDS) -> None:
    """Open the store of ``--db`` once (creating its tables) and close it.

    A SQLite path is checked first (its folder must exist); the database must
    answer within ``timeout`` seconds. The store checked is one of its own,
    so the chat's store is left as it is.

    Raises:
        ServeError: the store cannot be opened; one line naming ``--db`` (its
            password masked), why, and what to do.
    """
    shown = shown_db(db)
    if db is None or not db.startswith(_POSTGRES_SCHEMES):
        problem = sqlite_problem(db or DEFAULT_DB, timeout=timeout)
        if problem is not None:
            msg = f"--db {shown}: {problem}"
            raise ServeError(msg)
        return
    problem = open_problem(open_store(db), timeout=timeout)
    if problem is None:
        return
    password = _password_of(db)
    if password:
        problem = problem.replace(password, "***")
    msg = (
        f"--db {shown}: cannot open the database: {problem}; check that PostgreSQL runs at that"
        " address and the URL is right"
    )
    raise ServeError(msg)


def _password_of(db: str) -> str | None:
    """The password in a ``postgresql://user:password@host/...`` URL, or ``None``."""
    userinfo, at, _ = db.partition("://")[2].rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.partition(":")[2] or None


def shown_db(db: str | None) -> str:
    """``--db`` as ``toolguard serve`` prints it: a PostgreSQL URL's password is masked.

    ``shown_db("postgresql://app:secret@db/app")`` is
    ``"postgresql://app:***@db/app"``; ``shown_db(None)`` is :data:`DEFAULT_DB`.
    """
    if db is None:
        return DEFAULT_DB
    if not db.startswith(_POSTGRES_SCHEMES):
        return db
    scheme, _, rest = db.partition("://")
    userinfo, at, where = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return db
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{where}"
