"""Keep toolguard's threads in PostgreSQL: several API processes can share one database.

Install the ``postgres`` extra (``pip install "toolguard-hitl[postgres]"``,
which brings ``psycopg[binary]``) and pass a :class:`PostgresStore` to
:class:`~toolguard.ReviewedChat`::

    from toolguard import ReviewedChat
    from toolguard.postgres import PostgresStore

    async with PostgresStore("postgresql://app@db.internal/app") as store:
        chat = ReviewedChat(model, tools, store=store)
        turn = await chat.send_message("Mail Alice that the meeting moved to 10")

Saves are compare-and-set in the database, so when two processes race to
apply the same review, exactly one runs the approved tools and the other
gets :class:`~toolguard.NoPendingReviewError`. The store uses psycopg's
async API, which runs on asyncio (anyio's asyncio backend included); trio
is not supported.

This module imports ``psycopg``; ``import toolguard`` never imports it.
"""

from __future__ import annotations

try:
    import psycopg  # noqa: F401  (fail here, with a hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.postgres needs psycopg: pip install "toolguard-hitl[postgres]"'
    raise ImportError(msg) from exc

from toolguard._core.errors import SchemaVersionError
from toolguard._stores.postgres import SCHEMA_VERSION, PostgresStore

__all__ = ["SCHEMA_VERSION", "PostgresStore", "SchemaVersionError"]
