"""Digests that bind an approval to the call the reviewer was shown."""

from __future__ import annotations

import hashlib
import hmac
import json

import toolguard
from toolguard import Runner, ToolCall
from toolguard._core.records import call_digest
from toolguard._enforce.actions import TAMPERED

ARGS = {"to": "alice@example.com", "body": "hi"}


def make_runner(log: list[dict[str, str]], key: bytes | None = None) -> Runner:
    """A runner with one guarded tool that records its calls."""

    @toolguard.requires_approval
    def send_email(to: str, body: str) -> str:
        log.append({"to": to, "body": body})
        return "sent"

    return Runner([send_email], signing_key=key)


def canonical(name: str, args: dict[str, str], thread_id: str = "", review_id: str = "") -> bytes:
    """The bytes the digest covers: the call and the ids of its thread and review."""
    return json.dumps(
        {"name": name, "args": args, "thread_id": thread_id, "review_id": review_id},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def test_with_a_key_the_digest_is_an_hmac() -> None:
    """call_digest with a key is HMAC-SHA-256 of the canonical call; without, plain SHA-256."""
    key = b"server-secret"
    assert call_digest("send_email", ARGS, key, thread_id="t1", review_id="r1") == (
        hmac.new(key, canonical("send_email", ARGS, "t1", "r1"), hashlib.sha256).hexdigest()
    )
    assert call_digest("send_email", ARGS, thread_id="t1", review_id="r1") == (
        hashlib.sha256(canonical("send_email", ARGS, "t1", "r1")).hexdigest()
    )
    assert call_digest("send_email", ARGS) == (
        hashlib.sha256(canonical("send_email", ARGS)).hexdigest()
    )


async def test_a_runner_digest_covers_the_turns_review_id() -> None:
    """Runner.run digests each action with its thread id and the new turn's review id."""
    runner = make_runner([])
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ARGS)], thread_id="t1")
    assert step.pending is not None
    rid = step.pending.review_id

    assert [a.digest for a in step.pending.actions] == [
        hashlib.sha256(canonical("send_email", ARGS, "t1", rid)).hexdigest()
    ]


async def test_a_recomputed_plain_digest_does_not_pass_a_keyed_runner() -> None:
    """Rewriting args and their SHA-256 in the store does not get a keyed approval through."""
    log: list[dict[str, str]] = []
    runner = make_runner(log, key=b"server-secret")
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ARGS)])
    assert step.pending is not None
    evil = {"to": "mallory@example.com", "body": "hi"}
    rid = step.pending.review_id
    action = step.pending.actions[0].model_copy(
        update={"args": evil, "digest": call_digest("send_email", evil, review_id=rid)}
    )
    tampered = step.pending.model_copy(update={"actions": [action]})

    done = await runner.resume(tampered, [{"type": "approve"}])

    assert log == []
    assert [(r.status, r.content) for r in done.results] == [("error", TAMPERED)]
    assert [a.status for a in done.actions] == ["failed"]


async def test_an_emptied_digest_does_not_switch_the_check_off() -> None:
    """A stored action whose digest was blanked is refused, not run."""
    log: list[dict[str, str]] = []
    runner = make_runner(log)
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ARGS)])
    assert step.pending is not None
    action = step.pending.actions[0].model_copy(update={"digest": ""})

    done = await runner.resume(
        step.pending.model_copy(update={"actions": [action]}), [{"type": "approve"}]
    )

    assert log == []
    assert [(r.status, r.content) for r in done.results] == [("error", TAMPERED)]


async def test_the_same_key_approves_the_untouched_call() -> None:
    """With a key, an untouched review runs the approved call once."""
    log: list[dict[str, str]] = []
    runner = make_runner(log, key=b"server-secret")
    step = await runner.run([ToolCall(id="c1", name="send_email", args=ARGS)])
    assert step.pending is not None

    done = await runner.resume(step.pending, [{"type": "approve"}])

    assert log == [ARGS]
    assert [(r.status, r.content) for r in done.results] == [("success", "sent")]
