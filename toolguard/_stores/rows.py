"""How the SQL stores split a thread: its head, and one row per message, action and audit event.

Shared by :class:`~toolguard.SQLiteStore` and ``PostgresStore``: a save
writes the head (the state without its three append-only lists, as JSON)
and only the rows :class:`Changes` names; a load joins them back into the
whole state's JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel
from pydantic_core import to_json

from toolguard._stores.protocol import Changes, ThreadState

LISTS: Final[set[str]] = {"messages", "actions", "audit"}
"""The append-only parts of a :class:`ThreadState`; everything else is its "head"."""

SPLIT: Final = 2
"""``layout`` of a thread row whose state is its head and whose lists are rows (1: whole)."""

ItemRows = tuple[list[tuple[int, str]], list[tuple[int, str]], list[str]]
"""A save's new rows: ``(seq, body)`` of messages and of actions, bodies of audit events."""


def head_json(state: ThreadState) -> str:
    """The state without its append-only lists, as JSON (every other field, new ones too)."""
    # model_dump_json(exclude=LISTS), straight from the serializer (the same text, cheaper).
    return state.__pydantic_serializer__.to_json(state, exclude=LISTS).decode()


def item_json(item: dict[str, Any] | BaseModel) -> str:
    """One message, action or audit event as JSON, as ``model_dump_json`` writes it in a state."""
    if isinstance(item, BaseModel):
        return item.__pydantic_serializer__.to_json(item).decode()
    return to_json(item).decode()


def item_rows(changes: Changes) -> ItemRows:
    """The rows ``changes`` write: messages numbered from ``keep_messages``, actions by position."""
    keep = changes.keep_messages
    return (
        [(keep + i, item_json(m)) for i, m in enumerate(changes.messages)],
        [(i, item_json(a)) for i, a in changes.actions],
        [item_json(e) for e in changes.audit],
    )


def assemble(
    head: str, messages: Sequence[str], actions: Sequence[str], audit: Sequence[str]
) -> str:
    """The whole state's JSON from its head and its lists' items.

    The head's keys come last, so a row that still holds a whole state (written
    under schema 1 or by a whole-state ``save``) wins over empty lists, and
    a damaged one stays damaged (``CorruptThreadError``, never silently empty).
    """
    if not (messages or actions or audit):
        return head
    return (
        f'{{"messages":[{",".join(messages)}],"actions":[{",".join(actions)}],'
        f'"audit":[{",".join(audit)}],{head[1:]}'
    )


def with_version(state: ThreadState, version: int) -> ThreadState:
    """``state`` with the version its row's ``version`` column holds (that column wins)."""
    return state if state.version == version else state.model_copy(update={"version": version})
