"""A scripted day of decisions, recorded by a real ReviewedChat on a real store (fixed clock).

``record_day(store)`` plays it; the statistics, replay and docs tests read what it recorded.
Each user message is a JSON call the model proposes (``{"name", "args"}``); any other message
is answered with text. The day, 2026-03-02 from 09:00 UTC:

* send_email: 5 asks, all approved unedited (alice 3, bob 2) after 10, 20, 30, 40, 300 s;
* delete_file: 5 asks, all rejected by carol after 5, 15, 25, 35, 45 s;
* transfer (reviews expire after 60 s): approved by alice after 12 s, edited by bob after
  8 s, one expired, one cancelled by alice;
* send_sms: approved by alice after 5 s with a grant of 2 uses; the next 2 calls in the
  thread run under it;
* pay_invoice: the judge approves 2 calls on its own (it allows pay_invoice only);
* wipe_disk: refused by a deny rule once, nobody asked;
* then, in shadow mode (``with_shadow``): 2 delete_file calls run at once where a person would
  have been asked, and with ``shadow="all"`` 1 wipe_disk call a deny rule would have refused.

The ``sqlite_day`` and ``postgres_day`` fixtures record it once per module.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import admin_execute, postgres_dsn
from toolguard import (
    Judge,
    ModelResponse,
    ReviewedChat,
    Rules,
    SQLiteStore,
    ToolCall,
    guard,
    requires_approval,
)

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=timezone.utc)
END = datetime(2026, 3, 2, 18, 0, 0, tzinfo=timezone.utc)


class DayModel:
    """Proposes the call a user message spells as JSON; answers anything else with text."""

    def __init__(self) -> None:
        self.count = 0

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        last = messages[-1]
        if last["role"] == "user":
            try:
                call = json.loads(last["content"])
            except ValueError:
                return ModelResponse(text="Hello.")
            self.count += 1
            return ModelResponse(
                tool_calls=[ToolCall(id=f"c{self.count}", name=call["name"], args=call["args"])]
            )
        return ModelResponse(text="Done.")


class PaysOnlyInvoices:
    """A judge model: allows pay_invoice (low risk, asked for), asks for anything else."""

    model = "pays-only-invoices"

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        document = json.loads(messages[-1]["content"])
        allow = document["proposed_call"]["tool"] == "pay_invoice"
        verdict = {
            "risk": "low" if allow else "medium",
            "user_authorized": allow,
            "outcome": "allow" if allow else "ask",
            "rationale": "An invoice the user asked to pay." if allow else "A person decides.",
        }
        return ModelResponse(text=json.dumps(verdict))


@requires_approval
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the recipient.
        body: the text.
    """
    return f"sent to {to}"


@requires_approval
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    return f"deleted {path}"


@requires_approval(ttl=60)
def transfer(to: str, amount: int) -> str:
    """Transfer money.

    Args:
        to: the account.
        amount: euros.
    """
    return f"sent {amount} to {to}"


@requires_approval
def send_sms(to: str, text: str) -> str:
    """Send a text message.

    Args:
        to: the phone number.
        text: the message.
    """
    return f"texted {to}"


@requires_approval
def pay_invoice(invoice: str) -> str:
    """Pay an invoice.

    Args:
        invoice: its number.
    """
    return f"paid {invoice}"


def wipe_disk(disk: str) -> str:
    """Wipe a disk.

    Args:
        disk: the device.
    """
    return f"wiped {disk}"


def day_chat(store: Any, clock: list[datetime], shadow: bool | str = False) -> ReviewedChat:
    """The chat of the day on ``store``, its time read from ``clock[0]``."""
    tools = guard(
        [send_email, delete_file, transfer, send_sms, pay_invoice, wipe_disk],
        rules=Rules(deny=["wipe_disk"]),
    )
    return ReviewedChat(
        DayModel(),
        tools,
        store=store,
        clock=lambda: clock[0],
        judge=Judge(PaysOnlyInvoices(), auto_approve=True),
        shadow=shadow,  # type: ignore[arg-type]
    )


def says(name: str, **args: Any) -> str:
    """The user message that makes the model propose ``name(**args)``."""
    return json.dumps({"name": name, "args": args})


async def record_day(store: Any, *, with_shadow: bool = True) -> None:
    """Play the day on ``store`` (``with_shadow``: and its shadow-mode calls)."""
    clock = [START]
    chat = day_chat(store, clock)

    def at(minutes: float) -> None:
        clock[0] = START + timedelta(minutes=minutes)

    async def ask(minute: float, message: str, thread_id: str | None = None) -> Any:
        at(minute)
        return await chat.send_message(message, thread_id)

    async def decide(turn: Any, seconds: float, reviewer: str, decision: dict[str, Any]) -> Any:
        clock[0] += timedelta(seconds=seconds)
        return await chat.submit_review([decision], turn.thread_id, reviewer=reviewer)

    approve = {"type": "approve"}
    edited = {"name": "transfer", "args": {"to": "DE02", "amount": 2}}
    for i, (wait, who) in enumerate(
        [(10, "alice"), (20, "bob"), (30, "alice"), (40, "bob"), (300, "alice")]
    ):
        turn = await ask(10 * i, says("send_email", to=f"p{i}@example.com", body="Hi"))
        await decide(turn, wait, who, approve)
    for i, wait in enumerate([5, 15, 25, 35, 45]):
        turn = await ask(60 + 10 * i, says("delete_file", path=f"report-{i}.txt"))
        await decide(turn, wait, "carol", {"type": "reject", "message": "No."})
    turn = await ask(120, says("transfer", to="DE01", amount=10))
    await decide(turn, 12, "alice", approve)
    turn = await ask(130, says("transfer", to="DE02", amount=20))
    await decide(
        turn,
        8,
        "bob",
        {"type": "edit", "edited_action": edited},
    )
    expiring = await ask(140, says("transfer", to="DE03", amount=30))
    at(150)
    assert await chat.expire_overdue(expiring.thread_id)
    cancelled = await ask(160, says("transfer", to="DE04", amount=40))
    at(160.5)
    await chat.cancel_review(cancelled.thread_id, reviewer="alice")
    turn = await ask(200, says("send_sms", to="+100", text="Hi"))
    grant = {"scope": "thread", "match": "tool", "uses": 2}
    await decide(turn, 5, "alice", {"type": "approve", "grant": grant})
    for minute in (210, 220):
        ran = await ask(minute, says("send_sms", to="+100", text="Again"), turn.thread_id)
        assert ran.pending_review is None
    for minute in (300, 310):
        paid = await ask(minute, says("pay_invoice", invoice=f"INV-{minute}"))
        assert paid.pending_review is None
    refused = await ask(400, says("wipe_disk", disk="/dev/sda"))
    assert refused.pending_review is None
    if not with_shadow:
        return
    watched = day_chat(store, clock, shadow=True)
    for minute in (420, 430):
        at(minute)
        ran = await watched.send_message(says("delete_file", path=f"cache-{minute}.tmp"))
        assert ran.pending_review is None
    at(440)
    ran = await day_chat(store, clock, shadow="all").send_message(
        says("wipe_disk", disk="/dev/sdb")
    )
    assert ran.pending_review is None


async def _record_in_sqlite(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await record_day(store)


@pytest.fixture(scope="module")
def sqlite_day(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The day recorded in a SQLite file (once for the module)."""
    path = tmp_path_factory.mktemp("day") / "toolguard.sqlite3"
    anyio.run(_record_in_sqlite, path)
    return str(path)


async def _record_in_postgres(dsn: str) -> None:
    from toolguard.postgres import PostgresStore

    async with PostgresStore(dsn) as store:
        await record_day(store)


@pytest.fixture(scope="module")
def postgres_day() -> Iterator[str]:
    """The day recorded in a fresh PostgreSQL database (the store's default table)."""
    admin = postgres_dsn()
    name = f"tg_stats_{uuid.uuid4().hex[:12]}"
    anyio.run(admin_execute, f"CREATE DATABASE {name}")
    base, _, _ = admin.rpartition("/")
    dsn = f"{base}/{name}"
    try:
        anyio.run(_record_in_postgres, dsn)
        yield dsn
    finally:
        anyio.run(admin_execute, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
