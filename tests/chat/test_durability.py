"""A paused chat survives its process: resume it from another process over one SQLite file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio

from toolguard._stores.sqlite import SQLiteStore

TIMEOUT = 60

# The agent, as every process builds it: same tools, same store file. Argument 1 says
# what this process does; the tools append one JSON line per run to the effects file.
AGENT = textwrap.dedent(
    '''
    import json
    import sys
    import time
    from pathlib import Path

    import anyio

    from toolguard import (
        ModelResponse,
        NoPendingReviewError,
        ReviewedChat,
        ScriptedModel,
        SQLiteStore,
        ToolCall,
    )

    role, db, effects = sys.argv[1], sys.argv[2], Path(sys.argv[3])


    def record(tool, args):
        with effects.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"process": role, "tool": tool, "args": args}) + "\\n")


    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email."""
        if role.startswith("racer"):
            time.sleep(0.2)  # widen the window in which the other racers try
        record("send_email", {"to": to, "subject": subject, "body": body})
        return f"Email sent to {to}"


    def search(query: str) -> list[str]:
        """Search the documents."""
        record("search", {"query": query})
        return [f"result for {query}"]


    def answer(messages):
        return ModelResponse(text="Done: " + messages[-1]["content"])


    ALICE = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
    SCRIPT = [
        ModelResponse(
            tool_calls=[
                ToolCall(id="call_1", name="search", args={"query": "meeting"}),
                ToolCall(id="call_2", name="send_email", args=ALICE),
            ]
        ),
        answer,
    ]


    async def main():
        async with SQLiteStore(db) as store:
            if role == "pause":
                chat = ReviewedChat(ScriptedModel(SCRIPT), [send_email, search], store=store)
                turn = await chat.send_message("Tell Alice the meeting is at 10.")
                print(json.dumps(turn.to_dict()))
                return
            thread_id = sys.argv[4]
            # The script goes on where the pausing process stopped.
            chat = ReviewedChat(ScriptedModel(SCRIPT[1:]), [send_email, search], store=store)
            if role.startswith("racer"):
                go = Path(sys.argv[5])
                Path(str(go) + "." + role).touch()
                while not go.exists():
                    await anyio.sleep(0.005)
            try:
                turn = await chat.submit_review([{"type": "approve"}], thread_id)
            except NoPendingReviewError as exc:
                print(json.dumps({"outcome": "NoPendingReviewError", "text": str(exc)}))
            else:
                print(json.dumps({"outcome": "OK", "reply": turn.reply}))


    anyio.run(main)
    '''
)

ALICE = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
ALICE_JSON = '{"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}'


def write_agent(tmp_path: Path) -> Path:
    """The agent script in tmp_path."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    return script


def run_agent(script: Path, *args: str) -> Any:
    """Run the agent in a new process and return the JSON it printed."""
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


def effects_of(path: Path) -> list[dict[str, Any]]:
    """The side effects the tools wrote, one dict per run."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def pause(script: Path, db: Path, effects: Path) -> dict[str, Any]:
    """Process 1: send the message, pause on send_email, print the turn, exit."""
    paused: dict[str, Any] = run_agent(script, "pause", str(db), str(effects))
    return paused


def load(db: Path, thread_id: str) -> Any:
    """The stored thread, read from this (third) process."""

    async def read() -> Any:
        async with SQLiteStore(db) as store:
            return await store.load(thread_id)

    return anyio.run(read)


def test_pause_in_one_process_resume_in_another(tmp_path: Path) -> None:
    """Process 1 pauses and exits; process 2 approves: the tool runs once, in process 2."""
    script = write_agent(tmp_path)
    db, effects = tmp_path / "chat.db", tmp_path / "effects.jsonl"

    paused = pause(script, db, effects)

    thread_id = paused["thread_id"]
    assert isinstance(thread_id, str)
    assert isinstance(paused["review_id"], str)
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
        "review_id": paused["review_id"],
    }
    assert effects_of(effects) == [
        {"process": "pause", "tool": "search", "args": {"query": "meeting"}}
    ]

    resumed = run_agent(script, "resume", str(db), str(effects), thread_id)

    assert resumed == {"outcome": "OK", "reply": "Done: Email sent to alice@example.com"}
    assert effects_of(effects) == [
        {"process": "pause", "tool": "search", "args": {"query": "meeting"}},
        {"process": "resume", "tool": "send_email", "args": ALICE},
    ]
    state = load(db, thread_id)
    assert (state.status, state.pending, state.version) == ("idle", None, 4)
    assert [(a.call_id, a.status) for a in state.actions] == [("call_2", "executed")]
    assert state.messages == [
        {"role": "user", "content": "Tell Alice the meeting is at 10."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "meeting"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "send_email", "arguments": ALICE_JSON},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": '["result for meeting"]',
            "status": "success",
        },
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "Email sent to alice@example.com",
            "status": "success",
        },
        {"role": "assistant", "content": "Done: Email sent to alice@example.com"},
    ]

    again = run_agent(script, "resume", str(db), str(effects), thread_id)

    assert again == {
        "outcome": "NoPendingReviewError",
        "text": "There is no action awaiting approval in this conversation",
    }
    assert len(effects_of(effects)) == 2


def test_processes_racing_to_submit_run_the_tool_once(tmp_path: Path) -> None:
    """Four processes submit the same approve at once: one prints OK, the tool runs once."""
    script = write_agent(tmp_path)
    db, effects, go = tmp_path / "chat.db", tmp_path / "effects.jsonl", tmp_path / "go"
    thread_id = pause(script, db, effects)["thread_id"]
    racers = [f"racer{i}" for i in range(4)]

    procs = [
        subprocess.Popen(
            [sys.executable, str(script), role, str(db), str(effects), thread_id, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in racers
    ]
    try:
        # Start them together: wait until every racer is ready, then open the gate.
        deadline = time.monotonic() + TIMEOUT
        while not all(Path(f"{go}.{role}").exists() for role in racers):
            assert time.monotonic() < deadline, "the racers did not get ready"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.01)
        go.touch()
        outputs = [p.communicate(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()

    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in outputs]
    outcomes = sorted((json.loads(out) for out, _ in outputs), key=lambda o: o["outcome"])
    no_pending = {
        "outcome": "NoPendingReviewError",
        "text": "There is no action awaiting approval in this conversation",
    }
    assert outcomes == [
        no_pending,
        no_pending,
        no_pending,
        {"outcome": "OK", "reply": "Done: Email sent to alice@example.com"},
    ]
    runs = effects_of(effects)
    assert [(r["tool"], r["args"]) for r in runs] == [
        ("search", {"query": "meeting"}),
        ("send_email", ALICE),
    ]
    assert runs[0]["process"] == "pause"
    assert runs[1]["process"] in racers
    state = load(db, thread_id)
    assert (state.status, [a.status for a in state.actions]) == ("idle", ["executed"])
