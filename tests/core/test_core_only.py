"""The core package works with pydantic and anyio alone (no optional extra importable)."""

from __future__ import annotations

import subprocess
import sys

BLOCK_EXTRAS = """
import importlib.abc, sys
BLOCKED = {"openai", "fastapi", "starlette", "uvicorn", "httpx", "psycopg", "langchain",
           "langchain_core", "langgraph", "mcp", "jsonschema"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked for this test")
        return None
sys.meta_path.insert(0, Block())
"""

USE_THE_CORE = """
import importlib, anyio, toolguard
from toolguard import ModelResponse, ScriptedModel, ToolCall

def send_email(to: str) -> str:
    return f"sent to {to}"

async def main() -> None:
    model = ScriptedModel([ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email",
                                                             args={"to": "a@example.com"})]),
                           "Done."])
    chat = toolguard.ReviewedChat(model, [send_email], store=toolguard.SQLiteStore(":memory:"))
    turn = await chat.send_message("mail a")
    done = await chat.submit_review([{"type": "approve"}], turn.thread_id, review_id=turn.review_id)
    print(turn.pending_review.action_requests[0].name, done.reply)
    for extra in ("openai", "http", "postgres", "integrations.mcp", "integrations.langchain"):
        try:
            importlib.import_module(f"toolguard.{extra}")
        except ImportError as exc:
            print(exc)
    try:
        toolguard.Tool.from_schema("t", "T.", {"type": "object"}, send_email)
    except ImportError as exc:
        print(exc)

anyio.run(main)
"""


def test_the_core_runs_without_any_optional_dependency() -> None:
    """Guard, pause, approve and reply with openai/fastapi/httpx/psycopg unimportable."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_EXTRAS + USE_THE_CORE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "send_email Done.",
        'toolguard.openai needs the openai package: pip install "toolguard-hitl[openai]"',
        'toolguard.http needs FastAPI: pip install "toolguard-hitl[http]"',
        'toolguard.postgres needs psycopg: pip install "toolguard-hitl[postgres]"',
        'toolguard.integrations.mcp needs the mcp package: pip install "toolguard-hitl[mcp]"',
        (
            "toolguard.integrations.langchain needs LangChain and LangGraph:"
            ' pip install "toolguard-hitl[langchain]"'
        ),
        'Tool.from_schema needs the jsonschema package: pip install "toolguard-hitl[schema]"',
    ]
