"""Ids of any type: reviewer, thread and review ids that are not plain text.

Attack class: a login layer (or a hostile caller) hands ``submit_review`` /
``cancel_review`` a reviewer id that is an ``int``, a ``UUID``, ``True``, a
dict…, or a thread / review id of the wrong type, hoping for a pydantic error
from deep inside (a 500) or a half-applied review. ``str``, ``int`` and
``UUID`` reviewer ids are normalised to text; anything else is a
``TypeError`` naming the argument, raised before anything changes. An
``authorize`` hook that raises or answers something other than a bool fails
closed: nothing is decided, run or recorded.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import odd_ids
from toolguard import (
    Message,
    ModelResponse,
    QuorumReviewerError,
    ReviewedChat,
    ScriptedModel,
    SQLiteStore,
    StaleReviewError,
    ThreadState,
    ToolCall,
    UnknownThreadError,
    requires_approval,
)
from toolguard._stores.memory import MemoryStore
from toolguard.records import Action

ALICE = {"to": "alice@example.com", "body": "At 10."}
APPROVE = {"type": "approve"}
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")

AnyStore = MemoryStore | SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AnyStore]:
    """A MemoryStore or a fresh SQLiteStore file."""
    if request.param == "memory":
        yield MemoryStore()
    else:
        async with SQLiteStore(tmp_path / "ids.db") as sqlite_store:
            yield sqlite_store


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def make_chat(store: AnyStore, log: list[Any], **options: Any) -> ReviewedChat:
    """A chat proposing one guarded email, then echoing."""

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        log.append(to)
        return f"Email sent to {to}"

    proposal = ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE)])
    return ReviewedChat(ScriptedModel([proposal, echo]), [send_email], store=store, **options)


async def snapshot(store: AnyStore, thread_id: str) -> dict[str, Any]:
    """The stored thread as a dict."""
    state = await store.load(thread_id)
    assert state is not None
    return state.model_dump()


# --- reviewer ids that are not text ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reviewer", "text"),
    [(123, "123"), (-7, "-7"), (2**70, str(2**70)), (ID, str(ID)), ("alice", "alice")],
)
async def test_int_and_uuid_reviewers_become_text(
    store: AnyStore, reviewer: Any, text: str
) -> None:
    """The hook, the action and the audit trail all get the reviewer as text."""
    log: list[Any] = []
    seen: list[Any] = []

    def hook(who: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        seen.append(who)
        return True

    chat = make_chat(store, log, authorize=hook)
    paused = await chat.send_message("Mail Alice")

    turn = await chat.submit_review([APPROVE], paused.thread_id, reviewer=reviewer)

    assert seen == [text]
    assert turn.reply == "Read: Email sent to alice@example.com"
    assert [(a.status, a.reviewer) for a in turn.actions] == [("executed", text)]
    state = await chat.get_thread(paused.thread_id)
    assert [(e.kind, e.actor) for e in state.audit] == [
        ("requested", None),
        ("decided", text),
        ("executed", text),
    ]


async def test_cancel_review_normalises_the_reviewer(store: AnyStore) -> None:
    """cancel_review(reviewer=UUID) records the UUID as text."""
    chat = make_chat(store, [])
    paused = await chat.send_message("Mail Alice")

    turn = await chat.cancel_review(paused.thread_id, reviewer=ID)

    assert [(a.status, a.reviewer) for a in turn.actions] == [("cancelled", str(ID))]


BAD_REVIEWERS = [
    (True, "bool"),
    (False, "bool"),
    (1.5, "float"),
    (b"alice", "bytes"),
    ({"id": 1}, "dict"),
    (["alice"], "list"),
    (object(), "object"),
]


@pytest.mark.parametrize(("reviewer", "kind"), BAD_REVIEWERS)
async def test_other_reviewer_types_are_refused_before_anything(
    store: AnyStore, reviewer: Any, kind: str
) -> None:
    """bool, float, bytes, dict, list, object: TypeError naming the argument; nothing changes."""
    log: list[Any] = []
    asked: list[Any] = []

    def hook(who: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        asked.append(who)
        return True

    chat = make_chat(store, log, authorize=hook)
    paused = await chat.send_message("Mail Alice")
    before = await snapshot(store, paused.thread_id)
    text = f"reviewer must be text, an int, a UUID or None, got {kind}"

    with pytest.raises(TypeError) as submitted:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer=reviewer)
    with pytest.raises(TypeError) as cancelled:
        await chat.cancel_review(paused.thread_id, reviewer=reviewer)

    assert (str(submitted.value), str(cancelled.value)) == (text, text)
    assert (log, asked) == ([], [])
    assert await snapshot(store, paused.thread_id) == before


@settings(max_examples=25, deadline=None)
@given(name=odd_ids)
def test_any_text_reviewer_is_stored(name: str) -> None:
    """Empty, huge, surrogate or deceptive reviewer ids decide and are stored (cleaned)."""

    async def go() -> list[str | None]:
        async with SQLiteStore(":memory:") as sqlite_store:
            chat = make_chat(sqlite_store, [])
            paused = await chat.send_message("Mail Alice")
            await chat.submit_review([APPROVE], paused.thread_id, reviewer=name)
            state = await chat.get_thread(paused.thread_id)
            return [a.reviewer for a in state.actions]

    cleaned = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in name)
    assert anyio.run(go) == [cleaned]


# --- thread and review ids of the wrong type ------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda chat, t: chat.submit_review([APPROVE], 42), "thread_id must be text, got int"),
        (
            lambda chat, t: chat.submit_review([APPROVE], None),
            "thread_id must be text, got NoneType",
        ),
        (
            lambda chat, t: chat.submit_review([APPROVE], t, review_id=7),
            "review_id must be text or None, got int",
        ),
        (
            lambda chat, t: chat.submit_review([APPROVE], t, review_id=b"r"),
            "review_id must be text or None, got bytes",
        ),
        (lambda chat, t: chat.cancel_review(uuid.UUID(int=1)), "thread_id must be text, got UUID"),
        (
            lambda chat, t: chat.cancel_review(t, review_id=["r"]),
            "review_id must be text or None, got list",
        ),
        (
            lambda chat, t: chat.cancel_review(t, reason=404),
            "reason must be text or None, got int",
        ),
        (lambda chat, t: chat.get_thread(1), "thread_id must be text, got int"),
        (lambda chat, t: chat.audit_trail(1.0), "thread_id must be text, got float"),
        (lambda chat, t: chat.expire_overdue(b"t"), "thread_id must be text, got bytes"),
        (lambda chat, t: chat.recover(["t"]), "thread_id must be text, got list"),
        (lambda chat, t: chat.send_message("hi", 5), "thread_id must be text or None, got int"),
    ],
)
async def test_wrong_id_types_are_type_errors(store: AnyStore, call: Any, text: str) -> None:
    """Every public method taking a thread or review id names the argument; nothing changes."""
    log: list[Any] = []
    chat = make_chat(store, log)
    paused = await chat.send_message("Mail Alice")
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(TypeError) as caught:
        await call(chat, paused.thread_id)

    assert str(caught.value) == text
    assert log == []
    assert await snapshot(store, paused.thread_id) == before


@settings(max_examples=25, deadline=None)
@given(thread_id=odd_ids, review_id=odd_ids)
def test_any_text_as_thread_or_review_id_gets_a_documented_error(
    thread_id: str, review_id: str
) -> None:
    """Unknown (even unstorable) thread ids and review ids: documented, printable errors."""

    async def go() -> tuple[str, str]:
        async with SQLiteStore(":memory:") as sqlite_store:
            chat = make_chat(sqlite_store, [])
            paused = await chat.send_message("Mail Alice")
            with pytest.raises(UnknownThreadError) as unknown:
                await chat.submit_review([APPROVE], thread_id)
            with pytest.raises(StaleReviewError) as stale:
                await chat.submit_review([APPROVE], paused.thread_id, review_id=review_id)
            return str(unknown.value), str(stale.value)

    unknown, stale = anyio.run(go)
    assert unknown == f"Unknown thread_id {thread_id!r}: start a conversation with send_message"
    cleaned = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in review_id)
    assert stale == (
        f"The review {cleaned} is unknown in this conversation: it was never one of its"
        " reviews. Load the thread and decide on its current review."
    )
    (unknown + stale).encode("utf-8")  # printable in any UTF-8 response


# --- an authorize hook that cannot judge ----------------------------------------------------------


class HookDownError(Exception):
    """The hook's own backend failed."""


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_hook_propagates_and_changes_nothing(store: AnyStore, kind: str) -> None:
    """The hook's exception reaches the caller unchanged; nothing decided, run or audited."""
    log: list[Any] = []

    def broken(who: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        msg = "directory offline"
        raise HookDownError(msg)

    async def broken_async(who: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        return broken(who, thread, actions)

    chat = make_chat(store, log, authorize=broken if kind == "sync" else broken_async)
    paused = await chat.send_message("Mail Alice")
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(HookDownError, match="directory offline"):
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")
    with pytest.raises(HookDownError, match="directory offline"):
        await chat.cancel_review(paused.thread_id, reviewer="alice")

    assert log == []
    assert await snapshot(store, paused.thread_id) == before


@pytest.mark.parametrize(
    ("verdict", "kind"), [(None, "NoneType"), ("yes", "str"), (1, "int"), ([True], "list")]
)
async def test_a_hook_answering_a_non_bool_fails_closed(
    store: AnyStore, verdict: Any, kind: str
) -> None:
    """Truthy or falsy non-bools are not answers: TypeError, nothing decided, run or audited."""
    log: list[Any] = []
    chat = make_chat(store, log, authorize=lambda *args: verdict)
    paused = await chat.send_message("Mail Alice")
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(TypeError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    assert str(caught.value) == f"the authorize hook must return True or False, got {kind}"
    assert log == []
    assert await snapshot(store, paused.thread_id) == before


# --- quorum: ids that differ only by characters the page draws as nothing ----------------------

INVISIBLE_EXTRAS = [
    "\u034f",  # COMBINING GRAPHEME JOINER
    "\u3164",  # HANGUL FILLER
    "\u2800",  # BRAILLE PATTERN BLANK
    "\ufe0f",  # VARIATION SELECTOR-16
    "\u200b",  # ZERO WIDTH SPACE
    "\u200c",  # ZERO WIDTH NON-JOINER
    "\u200d",  # ZERO WIDTH JOINER
    "\u2060",  # WORD JOINER
    "\ufeff",  # ZERO WIDTH NO-BREAK SPACE
    "\u115f",  # HANGUL CHOSEONG FILLER
    "\uffa0",  # HALFWIDTH HANGUL FILLER
    "\u180e",  # MONGOLIAN VOWEL SEPARATOR
    "\U000e0061",  # TAG LATIN SMALL LETTER A
    "\U000e0100",  # VARIATION SELECTOR-17
    "\x7f",  # DELETE
]


def quorum_chat(store: AnyStore, log: list[Any]) -> ReviewedChat:
    """A chat proposing one transfer that needs two distinct reviewers."""

    @requires_approval(approvals=2)
    def transfer(amount: int, to: str) -> str:
        """Move money."""
        log.append((amount, to))
        return f"moved {amount} to {to}"

    proposal = ModelResponse(
        tool_calls=[ToolCall(id="c1", name="transfer", args={"amount": 5, "to": "bob"})]
    )
    return ReviewedChat(ScriptedModel([proposal, echo]), [transfer], store=store)


@pytest.mark.parametrize("extra", INVISIBLE_EXTRAS, ids=lambda ch: f"U+{ord(ch):04X}")
@pytest.mark.parametrize("where", ["end", "middle", "start"])
async def test_an_invisible_character_does_not_make_a_second_reviewer(
    store: AnyStore, extra: str, where: str
) -> None:
    """``alice`` and ``alice`` with an invisible character are one reviewer: refused, unchanged."""
    log: list[Any] = []
    chat = quorum_chat(store, log)
    paused = await chat.send_message("Pay Bob")
    await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")
    before = await snapshot(store, paused.thread_id)
    again = {"end": "alice" + extra, "middle": "al" + extra + "ice", "start": extra + "Alice"}[
        where
    ]

    with pytest.raises(QuorumReviewerError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer=again)

    assert str(caught.value) == (
        f"Reviewer {again!r} already approved action 'transfer' (1 of 2 approvals);"
        " another reviewer must approve it. Nothing was changed."
    )
    assert log == []
    assert await snapshot(store, paused.thread_id) == before


@pytest.mark.parametrize(
    "nobody",
    ["\u3164", "\u2800\u2800", "\u034f", "\ufe0f", "\u3164 \u200b", "\U000e0061\U000e0062"],
)
async def test_an_id_of_invisible_characters_only_is_refused(store: AnyStore, nobody: str) -> None:
    """An id the page draws as nothing names nobody: it cannot approve a quorum action."""
    log: list[Any] = []
    chat = quorum_chat(store, log)
    paused = await chat.send_message("Pay Bob")
    before = await snapshot(store, paused.thread_id)

    with pytest.raises(QuorumReviewerError) as caught:
        await chat.submit_review([APPROVE], paused.thread_id, reviewer=nobody)

    assert str(caught.value) == (
        "Action 'transfer' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    assert caught.value.reviewer is None
    assert log == []
    assert await snapshot(store, paused.thread_id) == before


async def test_two_real_reviewers_still_complete_the_quorum(store: AnyStore) -> None:
    """Distinct visible ids still count: alice and bob (with invisible padding) run it once."""
    log: list[Any] = []
    chat = quorum_chat(store, log)
    paused = await chat.send_message("Pay Bob")
    await chat.submit_review([APPROVE], paused.thread_id, reviewer="alice\u200b")
    turn = await chat.submit_review([APPROVE], paused.thread_id, reviewer="\u3164bob")

    assert turn.reply == "Read: moved 5 to bob"
    assert log == [(5, "bob")]
    state = await chat.get_thread(paused.thread_id)
    assert state.actions[0].approved_by == ["alice\u200b", "\u3164bob"]


def test_the_key_uses_the_pages_list_of_invisible_characters() -> None:
    """Every code point the page draws as nothing (bar whitespace) vanishes from a key."""
    from toolguard._core.reveal import INVISIBLE
    from toolguard._enforce.quorum import reviewer_key

    kept = []
    for start, end in INVISIBLE:
        for cp in range(start, end + 1):
            ch = chr(cp)
            if ch.isspace() or 0xD800 <= cp <= 0xDFFF:
                continue
            if reviewer_key(f"al{ch}ice") != "alice":
                kept.append(f"U+{cp:04X}")
    assert kept == []


@settings(max_examples=200, deadline=None)
@given(name=odd_ids, extra=st.sampled_from(INVISIBLE_EXTRAS), at=st.integers(min_value=0))
def test_the_key_is_stable_and_blind_to_invisible_characters(
    name: str, extra: str, at: int
) -> None:
    """A key is its own key, and inserting an invisible character never changes it."""
    from toolguard._enforce.quorum import reviewer_key

    key = reviewer_key(name)
    assert reviewer_key(key) == key
    cut = at % (len(name) + 1)
    assert reviewer_key(name[:cut] + extra + name[cut:]) == key
