"""A judge's limits in a ReviewedChat: the same call is the same VALIDATED call.

A judge with ``auto_approve=True`` never approves the same call twice in a
thread. "The same call" is the tool and its arguments as the tool validates
them, so one payment written as ``100``, ``100.0``, ``"100"`` or ``" 100 "``
is one call: the first runs on the judge's word, every other spelling goes
to a person. The rule reads the thread's audit trail, so it holds after a
restart on the same SQLite file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolguard import (
    Judge,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    requires_approval,
)

ASK = "Pay Eve's invoice of 100."
ALLOW = json.dumps(
    {
        "risk": "low",
        "user_authorized": True,
        "outcome": "allow",
        "rationale": "The person asked to pay Eve 100.",
    }
)
SPELLINGS: list[Any] = [100, 100.0, "100", " 100 "]
"""One amount, four ways a model may write it; the tool validates each to the int 100."""


def payments(paid: list[tuple[str, int]]) -> list[Any]:
    @requires_approval
    def pay_invoice(to: str, amount: int) -> str:
        """Pay an invoice."""
        paid.append((to, amount))
        return f"paid {amount} to {to}"

    return [pay_invoice]


def pays(*amounts: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=[
            ToolCall(id=f"c{n}", name="pay_invoice", args={"to": "eve", "amount": amount})
            for n, amount in enumerate(amounts)
        ]
    )


def judge(limit: int = 20) -> Judge:
    return Judge(ScriptedModel([ALLOW], repeat=True), auto_approve=True, max_auto_approvals=limit)


def waiting_amounts(turn: Any) -> list[Any]:
    assert turn.pending_review is not None
    return [a.args["amount"] for a in turn.pending_review.action_requests]


async def test_four_spellings_of_one_payment_in_one_turn_run_once() -> None:
    paid: list[tuple[str, int]] = []
    chat = ReviewedChat(ScriptedModel([pays(*SPELLINGS), "Paid."]), payments(paid), judge=judge())
    turn = await chat.send_message(ASK)
    assert paid == [("eve", 100)]
    assert waiting_amounts(turn) == [100.0, "100", " 100 "]  # as the model wrote them
    audit = await chat.audit_trail(turn.thread_id)
    assert [(e.kind, e.actor, e.decision) for e in audit] == [
        ("judged", "judge", "approve"),
        ("judged", None, None),
        ("judged", None, None),
        ("judged", None, None),
        ("requested", None, None),
        ("requested", None, None),
        ("requested", None, None),
    ]
    # The same call: its judged events carry one digest.
    assert len({e.digest for e in audit if e.kind == "judged"}) == 1


async def test_another_spelling_in_a_later_turn_goes_to_a_person() -> None:
    paid: list[tuple[str, int]] = []
    script = [pays(100), "Paid.", pays(" 100 "), "Asked."]
    chat = ReviewedChat(ScriptedModel(script), payments(paid), judge=judge())
    first = await chat.send_message(ASK)
    assert (first.reply, paid) == ("Paid.", [("eve", 100)])
    again = await chat.send_message("Do it again.", first.thread_id)
    assert waiting_amounts(again) == [" 100 "]
    assert paid == [("eve", 100)]


async def test_the_repeat_rule_outlives_a_restart_on_the_same_sqlite_file(tmp_path: Path) -> None:
    paid: list[tuple[str, int]] = []
    db = tmp_path / "chat.db"
    async with SQLiteStore(db) as store:
        chat = ReviewedChat(
            ScriptedModel([pays(100), "Paid."]), payments(paid), store=store, judge=judge()
        )
        first = await chat.send_message(ASK)
    assert (first.reply, paid) == ("Paid.", [("eve", 100)])
    async with SQLiteStore(db) as store:  # a new process: a new judge, an empty memory
        chat = ReviewedChat(
            ScriptedModel([pays("100"), "Asked."]), payments(paid), store=store, judge=judge()
        )
        again = await chat.send_message("Pay it once more.", first.thread_id)
        assert waiting_amounts(again) == ["100"]
        # A person may still approve it: the key the approval is bound to is the store's.
        done = await chat.submit_review([{"type": "reject"}], again.thread_id)
    assert done.reply == "Asked."
    assert paid == [("eve", 100)]


async def test_max_auto_approvals_counts_the_distinct_calls_of_the_thread() -> None:
    paid: list[tuple[str, int]] = []
    chat = ReviewedChat(
        ScriptedModel([pays(100, 101.0, "102", 103), "Paid."]), payments(paid), judge=judge(2)
    )
    turn = await chat.send_message(ASK)
    assert sorted(paid) == [("eve", 100), ("eve", 101)]  # the two ran concurrently
    assert waiting_amounts(turn) == ["102", 103]
