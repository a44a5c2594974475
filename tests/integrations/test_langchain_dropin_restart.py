"""A review of toolguard's drop-in HumanInTheLoopMiddleware survives process restarts on SQLite.

Each step runs in a new Python process on the same two files: LangGraph's SqliteSaver (the
graph's checkpoints) and toolguard's SQLiteStore (claims, the digest key, the audit trail).
One process pauses, two others each add a reviewer's vote (the second runs the call), and a
fourth replays the last resume from its paused checkpoint: the tool ran once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph.checkpoint.sqlite")

from toolguard import SQLiteStore

SCRIPT = '''
import json, sqlite3, sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from toolguard import AlreadyResumedError, SQLiteStore
from toolguard.integrations.langchain import HumanInTheLoopMiddleware

step, folder = sys.argv[1], Path(sys.argv[2])


class FakeModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def wire(amount: int, to: str, pin: str) -> str:
    """Send money."""
    with (folder / "ran.txt").open("a", encoding="utf-8") as ran:
        ran.write(f"{amount} {to} {pin}\\n")
    return f"sent {amount} to {to} (pin {pin})"


store = SQLiteStore(folder / "toolguard.sqlite3")
connection = sqlite3.connect(folder / "graph.sqlite3", check_same_thread=False)
entry = {"allowed_decisions": ["approve", "reject"], "approvals": 2, "redact": ["pin"]}
middleware = HumanInTheLoopMiddleware({"wire": entry}, store=store)
config = {"configurable": {"thread_id": "t1"}}
call = {"id": "c1", "name": "wire", "args": {"amount": 900, "to": "ACME", "pin": "4321"}}


def agent(*turns: AIMessage) -> Any:
    model = FakeModel(messages=iter([*turns, AIMessage("Done.")]))
    saver = SqliteSaver(connection)
    return create_agent(model, tools=[wire], middleware=[middleware], checkpointer=saver)


def show(result: Any) -> None:
    tools = [[m.status, m.content] for m in result["messages"] if isinstance(m, ToolMessage)]
    paused = [i.value for i in result.get("__interrupt__", [])]
    print(json.dumps({"paused": paused, "tools": tools}, sort_keys=True))


if step == "pause":
    first = agent(AIMessage("", tool_calls=[call]))
    show(first.invoke({"messages": [HumanMessage("pay")]}, config))
elif step == "replay":
    paused = json.loads((folder / "paused.json").read_text(encoding="utf-8"))
    try:
        answer = {"decisions": [{"type": "approve"}], "reviewer": "bob"}
        agent().invoke(Command(resume=answer), paused)
    except AlreadyResumedError as exc:
        print(type(exc).__name__)
else:
    paused = agent().get_state(config).config
    (folder / "paused.json").write_text(json.dumps(paused), encoding="utf-8")
    answer = {"decisions": [{"type": "approve"}], "reviewer": step}
    show(agent().invoke(Command(resume=answer), config))
store.close()
connection.close()
'''


def step(folder: Path, name: str) -> Any:
    script = folder / "step.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), name, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    return line if name == "replay" else json.loads(line)


def paused_value(given: int, by: list[str]) -> dict[str, Any]:
    shown = {"amount": 900, "to": "ACME", "pin": "[redacted]"}
    return {
        "action_requests": [
            {
                "name": "wire",
                "args": shown,
                "description": f"Tool execution requires approval\n\nTool: wire\nArgs: {shown}",
            }
        ],
        "review_configs": [
            {
                "action_name": "wire",
                "allowed_decisions": ["approve", "reject"],
                "approvals": {"required": 2, "given": given, "by": by},
            }
        ],
    }


def test_a_review_survives_restarts_and_a_replayed_resume_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    assert step(tmp_path, "pause") == {"paused": [paused_value(0, [])], "tools": []}
    assert step(tmp_path, "alice") == {"paused": [paused_value(1, ["alice"])], "tools": []}
    assert not (tmp_path / "ran.txt").exists()
    assert step(tmp_path, "bob") == {
        "paused": [],
        "tools": [["success", "sent 900 to ACME (pin [redacted])"]],
    }
    assert step(tmp_path, "replay") == "AlreadyResumedError"
    assert (tmp_path / "ran.txt").read_text(encoding="utf-8") == "900 ACME 4321\n"

    store = SQLiteStore(tmp_path / "toolguard.sqlite3")
    try:
        state = anyio.run(store.load, "langgraph:t1")
    finally:
        store.close()
    assert state is not None
    shown = {"amount": 900, "to": "ACME", "pin": "[redacted]"}
    assert [(e.kind, e.args, e.actor, e.decision, e.detail) for e in state.audit] == [
        ("requested", shown, None, None, None),
        ("vote", None, "alice", "approve", "1 of 2 approvals"),
        ("vote", None, "bob", "approve", "2 of 2 approvals"),
        ("decided", shown, "bob", "approve", None),
        ("executed", None, None, None, "sent 900 to ACME (pin [redacted])"),
    ]
    assert "4321" not in state.model_dump_json()
