"""Refused reviewers change nothing: they neither block an authorized reviewer nor bloat a thread.

Attack class: someone the ``authorize`` hook turns away keeps submitting —
to race an authorized reviewer (in 0.1.0 a refusal's audit save bumped the
thread version, so the authorized claim saved concurrently failed with
``NoPendingReviewError``), or to grow the stored thread without bound with
refusal events (under one name or many). A refusal is audited, but a claim,
cancellation or expiry saved concurrently is made again on top of it, and at
most ``ReviewedChat.max_recorded_refusals`` refusals are recorded per review.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from tests.adversarial.strategies import odd_ids
from toolguard import (
    Message,
    ModelResponse,
    NoPendingReviewError,
    ReviewedChat,
    ReviewerNotAllowedError,
    ScriptedModel,
    SQLiteStore,
    ThreadState,
    ToolCall,
)
from toolguard._chat.access import REFUSED_DETAIL
from toolguard._stores.memory import MemoryStore
from toolguard.records import Action, AuditEvent

DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN", "")
ALICE = {"to": "alice@example.com", "body": "At 10."}
APPROVE = {"type": "approve"}
ALLOWED = ("alice", "bob")
CAPPED = REFUSED_DETAIL + "; later refusals for this review are not recorded"
CANCELLED = "The review of this action was cancelled: not needed. It was not executed."

AnyStore = MemoryStore | SQLiteStore


@pytest.fixture(params=["memory", "sqlite", "sqlite-two-connections", "postgres-two-connections"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """The store of the authorized chat and of the attacker's chat (another connection)."""
    if request.param == "postgres-two-connections":
        if not DSN:
            pytest.skip("set TOOLGUARD_POSTGRES_DSN (scripts/start-postgres)")
        import psycopg
        from psycopg import sql

        from toolguard.postgres import PostgresStore

        table = f"tg_refusals_{uuid.uuid4().hex[:16]}"
        try:
            async with (
                PostgresStore(DSN, table=table) as first,
                PostgresStore(DSN, table=table) as second,
            ):
                yield first, second
        finally:
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        return
    if request.param == "memory":
        shared = MemoryStore()
        yield shared, shared
        return
    async with SQLiteStore(tmp_path / "refusals.db") as first:
        if request.param == "sqlite":
            yield first, first
            return
        async with SQLiteStore(tmp_path / "refusals.db") as second:
            yield first, second


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def kinds(state: ThreadState) -> list[tuple[str, str | None]]:
    """The audit trail as (kind, actor) pairs."""
    return [(e.kind, e.actor) for e in state.audit]


class Scene:
    """An authorized chat and an attacker's chat over the same stored threads.

    When ``attacks`` is set, the first authorized call of the hook lets the
    attacker submit (and be refused) that many times before it answers: the
    authorized reviewer's thread is then stale when it claims.
    """

    def __init__(self, store: AnyStore, other_store: AnyStore) -> None:
        self.log: list[dict[str, Any]] = []
        self.attacks: list[str] = []
        self.rival: str | None = None
        self.refused: list[str] = []
        self.rival_error: Exception | None = None

        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.log.append({"to": to, "body": body})
            return f"Email sent to {to}"

        proposal = ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE)])
        self.chat = ReviewedChat(
            ScriptedModel([proposal, echo, echo]),
            [send_email],
            store=store,
            authorize=self.authorize,
        )
        self.other = ReviewedChat(
            ScriptedModel([echo]), [send_email], store=other_store, authorize=self.plain
        )

    @staticmethod
    def plain(reviewer: str | None, thread: ThreadState, actions: list[Action]) -> bool:
        """Allow alice and bob."""
        return reviewer in ALLOWED

    async def authorize(
        self, reviewer: str | None, thread: ThreadState, actions: list[Action]
    ) -> bool:
        """Allow alice and bob; meanwhile let the attacker (or a rival) act once."""
        attacks, self.attacks = self.attacks, []
        for name in attacks:
            try:
                await self.other.submit_review([APPROVE], thread.thread_id, reviewer=name)
            except ReviewerNotAllowedError:  # noqa: PERF203 - one refusal per attacker
                self.refused.append(name)
        rival, self.rival = self.rival, None
        if rival is not None:
            await self.other.submit_review([APPROVE], thread.thread_id, reviewer=rival)
        return self.plain(reviewer, thread, actions)


@pytest.mark.parametrize("attackers", [1, 3, 25])
async def test_refusals_during_an_authorized_claim_do_not_fail_it(
    stores: tuple[AnyStore, AnyStore], attackers: int
) -> None:
    """Refused submissions saved while alice's claim is under way: alice's approval runs once."""
    scene = Scene(*stores)
    paused = await scene.chat.send_message("Mail Alice")
    scene.attacks = [f"mallory{i}" for i in range(attackers)]

    turn = await scene.chat.submit_review(
        [APPROVE], paused.thread_id, review_id=paused.review_id, reviewer="alice"
    )

    assert scene.refused == [f"mallory{i}" for i in range(attackers)]
    assert turn.reply == "Read: Email sent to alice@example.com"
    assert scene.log == [ALICE]
    state = await scene.chat.get_thread(paused.thread_id)
    recorded = min(attackers, ReviewedChat.max_recorded_refusals)
    assert kinds(state) == [
        ("requested", None),
        *[("refused", f"mallory{i}") for i in range(recorded)],
        ("decided", "alice"),
        ("executed", "alice"),
    ]
    assert [e.detail for e in state.audit if e.kind == "refused"] == (
        [REFUSED_DETAIL] * (recorded - 1) + [CAPPED if attackers >= 20 else REFUSED_DETAIL]
    )


async def test_a_refusal_during_an_authorized_cancel_does_not_fail_it(
    stores: tuple[AnyStore, AnyStore],
) -> None:
    """cancel_review by an authorized reviewer goes through a concurrent refusal too."""
    scene = Scene(*stores)
    paused = await scene.chat.send_message("Mail Alice")
    scene.attacks = ["mallory"]

    turn = await scene.chat.cancel_review(
        paused.thread_id, review_id=paused.review_id, reviewer="alice", reason="not needed"
    )

    assert [(a.status, a.reviewer) for a in turn.actions] == [("cancelled", "alice")]
    assert scene.log == []
    state = await scene.chat.get_thread(paused.thread_id)
    assert kinds(state) == [("requested", None), ("refused", "mallory"), ("cancelled", "alice")]
    assert state.messages[-1]["content"] == f"Review cancelled, not executed: {CANCELLED}"


async def test_an_authorized_rival_still_wins_the_race(stores: tuple[AnyStore, AnyStore]) -> None:
    """A concurrent AUTHORIZED claim is a real change: the slower reviewer gets the error."""
    scene = Scene(*stores)
    paused = await scene.chat.send_message("Mail Alice")
    scene.rival = "bob"

    with pytest.raises(NoPendingReviewError):
        await scene.chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    assert scene.log == [ALICE]
    state = await scene.chat.get_thread(paused.thread_id)
    assert kinds(state) == [("requested", None), ("decided", "bob"), ("executed", "bob")]


async def test_refusals_are_capped_per_review(stores: tuple[AnyStore, AnyStore]) -> None:
    """100 refusals under 100 names: 20 are recorded, the rest write nothing at all."""
    scene = Scene(*stores)
    paused = await scene.chat.send_message("Mail Alice")

    for i in range(100):
        if i == 20:
            frozen = (await scene.chat.get_thread(paused.thread_id)).model_dump()
        with pytest.raises(ReviewerNotAllowedError):
            await scene.other.submit_review([APPROVE], paused.thread_id, reviewer=f"m{i}")

    state = await scene.chat.get_thread(paused.thread_id)
    assert state.model_dump() == frozen
    refused = [e for e in state.audit if e.kind == "refused"]
    assert [(e.actor, e.review_id, e.detail) for e in refused] == [
        (f"m{i}", paused.review_id, REFUSED_DETAIL) for i in range(19)
    ] + [("m19", paused.review_id, CAPPED)]
    assert state.version == 21  # the pause, then one save per recorded refusal

    turn = await scene.chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")

    assert turn.reply == "Read: Email sent to alice@example.com"
    assert scene.log == [ALICE]


async def test_the_cap_is_per_review_and_configurable() -> None:
    """max_recorded_refusals set on an instance; a new review starts a new count."""
    scene = Scene(MemoryStore(), MemoryStore())
    scene.other = scene.chat
    scene.chat.max_recorded_refusals = 2
    paused = await scene.chat.send_message("Mail Alice")

    for name in ["m1", "m2", "m3"]:
        with pytest.raises(ReviewerNotAllowedError):
            await scene.chat.submit_review([APPROVE], paused.thread_id, reviewer=name)

    state = await scene.chat.get_thread(paused.thread_id)
    assert [(e.actor, e.detail) for e in state.audit if e.kind == "refused"] == [
        ("m1", REFUSED_DETAIL),
        ("m2", CAPPED),
    ]
    assert ReviewedChat.max_recorded_refusals == 20


@settings(max_examples=20, deadline=None)
@given(name=odd_ids)
def test_any_refused_name_is_recorded_and_the_thread_still_loads(name: str) -> None:
    """Empty, huge, surrogate or deceptive reviewer ids are refused, recorded and loadable."""
    import anyio

    async def go() -> tuple[ThreadState, str]:
        async with SQLiteStore(":memory:") as store:
            scene = Scene(store, store)
            paused = await scene.chat.send_message("Mail Alice")
            with pytest.raises(ReviewerNotAllowedError):
                await scene.other.submit_review([APPROVE], paused.thread_id, reviewer=name)
            turn = await scene.chat.submit_review([APPROVE], paused.thread_id, reviewer="bob")
            assert turn.reply == "Read: Email sent to alice@example.com"
            return await scene.chat.get_thread(paused.thread_id), paused.review_id or ""

    state, review_id = anyio.run(go)
    refused = [e for e in state.audit if e.kind == "refused"]
    assert [(e.review_id, e.detail) for e in refused] == [(review_id, REFUSED_DETAIL)]
    actor = refused[0].actor
    assert actor is not None
    assert actor == "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in name)
    actor.encode("utf-8")  # storable: lone surrogates were replaced


async def test_record_refusal_is_reusable_for_other_refusals() -> None:
    """record_refusal (for other access checks too) files a refused event under the review."""
    scene = Scene(MemoryStore(), MemoryStore())
    paused = await scene.chat.send_message("Mail Alice")
    state = await scene.chat.get_thread(paused.thread_id)
    event = AuditEvent(
        at=datetime(2025, 1, 1, tzinfo=timezone.utc),
        kind="refused",
        thread_id=paused.thread_id,
        actor="eve",
        detail="the access hook refused reading this thread",
    )

    await scene.chat._gate.record_refusal(state, event)

    after = await scene.chat.get_thread(paused.thread_id)
    assert after.audit[-1].model_dump(exclude={"id"}) == {
        "at": datetime(2025, 1, 1, tzinfo=timezone.utc),
        "kind": "refused",
        "thread_id": paused.thread_id,
        "review_id": paused.review_id,
        "action_id": None,
        "tool": None,
        "args": None,
        "actor": "eve",
        "decision": None,
        "detail": "the access hook refused reading this thread",
        "digest": None,
    }
    turn = await scene.chat.submit_review([APPROVE], paused.thread_id, reviewer="alice")
    assert turn.reply == "Read: Email sent to alice@example.com"
