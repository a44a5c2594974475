"""Crash safety with real processes killed by SIGKILL over one SQLite file.

A process killed while an approved tool runs leaves its thread ``running``:
the thread refuses new messages until ``recover()`` ends the action
``failed`` (outcome unknown) without running it again. A process killed
while a review is pending loses nothing: another process approves it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolguard import (
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    SQLiteStore,
    ThreadBusyError,
    ThreadState,
    ToolCall,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

TIMEOUT = 60  # seconds: the bound of every wait

ASK = "Tell Alice the meeting is at 10."
ALICE = {"to": "alice@example.com", "body": "The meeting is at 10."}
ALICE_JSON = '{"to": "alice@example.com", "body": "The meeting is at 10."}'
INTERRUPTED_TEXT = (
    "The process stopped while this approved tool was running, so its outcome is unknown."
    " It was not run again."
)

# The agent, as every process builds it. argv: role, database, effects file, then
# thread_id and review_id for the roles that answer a review.
AGENT = textwrap.dedent(
    '''
    import json
    import sys
    import time
    from pathlib import Path

    import anyio

    from toolguard import ModelResponse, ReviewedChat, ScriptedModel, SQLiteStore, ToolCall

    role, db, effects = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ALICE = {"to": "alice@example.com", "body": "The meeting is at 10."}


    def send_email(to: str, body: str) -> str:
        """Send an email."""
        with effects.open("a", encoding="utf-8") as f:
            f.write("started\\n")
        if role == "approve-and-hang":
            time.sleep(60)  # killed long before this ends
        return f"Email sent to {to}"


    def echo(messages):
        return ModelResponse(text="Read: " + messages[-1]["content"])


    async def main():
        async with SQLiteStore(db) as store:
            if role == "pause-and-hang":
                call = ToolCall(id="c1", name="send_email", args=ALICE)
                script = [ModelResponse(tool_calls=[call])]
                chat = ReviewedChat(ScriptedModel(script), [send_email], store=store)
                turn = await chat.send_message("Tell Alice the meeting is at 10.")
                print(json.dumps(turn.to_dict()), flush=True)
                await anyio.sleep(60)  # killed while paused
                return
            thread_id, review_id = sys.argv[4], sys.argv[5]
            chat = ReviewedChat(ScriptedModel([echo]), [send_email], store=store)
            turn = await chat.submit_review(
                [{"type": "approve"}], thread_id, review_id=review_id, reviewer="alice"
            )
            print(json.dumps({"reply": turn.reply}), flush=True)


    anyio.run(main)
    '''
)


# --- helpers ------------------------------------------------------------------------------------


def send_email(to: str, body: str) -> str:
    """Send an email (never runs in the test process: it only pauses and recovers)."""
    msg = f"send_email ran in the test process for {to}: {body}"
    raise AssertionError(msg)


def echo(messages: Sequence[Message]) -> ModelResponse:
    """A model step that answers with what it read last."""
    return ModelResponse(text=f"Read: {messages[-1]['content']}")


def proposal() -> ModelResponse:
    """The model turn proposing the email to Alice."""
    return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE)])


def email_turn() -> Message:
    """The assistant message of that proposal, as stored."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "send_email", "arguments": ALICE_JSON},
            }
        ],
    }


def start(script: Path, *args: str) -> subprocess.Popen[str]:
    """Start the agent in a new process."""
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill the process if it still runs and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=TIMEOUT)


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process and check it died of it."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=TIMEOUT)
    assert proc.returncode == -signal.SIGKILL


def first_line(proc: subprocess.Popen[str]) -> str:
    """The first line the process prints (bounded wait)."""
    box: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(TIMEOUT)
    assert box, "the process printed nothing in time"
    assert box[0], f"the process ended without output: {proc.poll()}"
    return box[0]


def wait_for_start(proc: subprocess.Popen[str], effects: Path) -> None:
    """Wait (bounded) until the tool wrote 'started'; fail if the process died first."""
    deadline = time.monotonic() + TIMEOUT
    while not (effects.exists() and effects.read_text(encoding="utf-8")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the tool did not start in time"
        time.sleep(0.01)


def run_to_end(script: Path, *args: str) -> Any:
    """Run the agent in a new process to its end and return the JSON it printed."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def load(db: Path, thread_id: str) -> ThreadState:
    """The stored thread, read in the test process."""

    async def read() -> ThreadState | None:
        async with SQLiteStore(db) as store:
            return await store.load(thread_id)

    state = anyio.run(read)
    assert state is not None
    return state


def pause_here(db: Path) -> tuple[str, str]:
    """Pause the email in the test process; return (thread_id, review_id)."""

    async def go() -> tuple[str, str]:
        async with SQLiteStore(db) as store:
            chat = ReviewedChat(ScriptedModel([proposal()]), [send_email], store=store)
            turn = await chat.send_message(ASK)
            assert turn.review_id is not None
            return turn.thread_id, turn.review_id

    return anyio.run(go)


# --- tests --------------------------------------------------------------------------------------


def test_killed_while_the_tool_runs_is_recovered_once(tmp_path: Path) -> None:
    """SIGKILL mid-tool: the thread is busy until recover() fails it; the tool ran exactly once."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    db, effects = tmp_path / "chat.db", tmp_path / "effects.txt"
    thread_id, review_id = pause_here(db)

    proc = start(script, "approve-and-hang", str(db), str(effects), thread_id, review_id)
    try:
        wait_for_start(proc, effects)
        kill(proc)
    finally:
        stop(proc)

    async def after_the_crash() -> dict[str, Any]:
        async with SQLiteStore(db) as store:
            model = ScriptedModel([echo])
            chat = ReviewedChat(model, [send_email], store=store)
            running = await chat.running_threads()
            with pytest.raises(ThreadBusyError) as busy:
                await chat.send_message("Did it go out?", thread_id)
            recovered = await chat.recover(thread_id)
            again = await chat.recover(thread_id)
            recovered_state = await chat.get_thread(thread_id)
            turn = await chat.send_message("Did it go out?", thread_id)
            return {
                "running": running,
                "busy": str(busy.value),
                "recovered": (recovered, again),
                "state": recovered_state,
                "reply": turn.reply,
                "model_saw": model.calls,
                "running_after": await chat.running_threads(),
            }

    out = anyio.run(after_the_crash)

    assert out["running"] == [thread_id]
    assert out["busy"] == (
        f"Decisions are being applied in conversation '{thread_id}'. Try again shortly;"
        " if the process applying them stopped, run recover() for this thread."
    )
    assert out["recovered"] == (True, False)
    assert out["running_after"] == []
    state: ThreadState = out["state"]
    assert (state.status, state.pending, state.decisions) == ("idle", None, None)
    assert [(a.name, a.status, a.result and a.result.content) for a in state.actions] == [
        ("send_email", "failed", INTERRUPTED_TEXT)
    ]
    assert [(e.kind, e.review_id) for e in state.audit] == [
        ("requested", review_id),
        ("decided", review_id),
        ("interrupted", review_id),
    ]
    assert (state.audit[1].actor, state.audit[2].detail) == ("alice", INTERRUPTED_TEXT)
    history = [
        {"role": "user", "content": ASK},
        email_turn(),
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"Error, outcome unknown, not run again: {INTERRUPTED_TEXT}",
            "status": "error",
        },
    ]
    assert state.messages == history
    assert out["reply"] == "Read: Did it go out?"
    assert out["model_saw"] == [[*history, {"role": "user", "content": "Did it go out?"}]]
    assert effects.read_text(encoding="utf-8") == "started\n"


def test_killed_while_paused_loses_nothing(tmp_path: Path) -> None:
    """SIGKILL after the pause: a new process approves the stored review and the tool runs once."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    db, effects = tmp_path / "chat.db", tmp_path / "effects.txt"

    proc = start(script, "pause-and-hang", str(db), str(effects))
    try:
        paused = json.loads(first_line(proc))
        kill(proc)
    finally:
        stop(proc)

    thread_id, review_id = paused["thread_id"], paused["review_id"]
    assert paused == {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": {
            "action_requests": [
                {
                    "name": "send_email",
                    "args": ALICE,
                    "description": "Tool `send_email` is awaiting approval",
                }
            ],
            "review_configs": [
                {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        },
        "review_id": review_id,
    }
    assert not effects.exists()
    stored = load(db, thread_id)
    assert (stored.status, stored.review_id) == ("awaiting_review", review_id)
    assert [(a.name, a.args, a.status) for a in stored.actions] == [
        ("send_email", ALICE, "requested")
    ]

    answer = run_to_end(script, "approve", str(db), str(effects), thread_id, review_id)

    assert answer == {"reply": "Read: Email sent to alice@example.com"}
    assert effects.read_text(encoding="utf-8") == "started\n"
    state = load(db, thread_id)
    assert (state.status, state.pending) == ("idle", None)
    assert [(a.status, a.reviewer) for a in state.actions] == [("executed", "alice")]
    assert [e.kind for e in state.audit] == ["requested", "decided", "executed"]
