"""The demo: its workspace tools, the offline DemoModel, and the `toolguard` command line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import toolguard
from tests.helpers import DEMO_CARD_ALICE, DEMO_SENT_ALICE
from toolguard import Classifier, ModelResponse, ReviewedChat, ToolCall, ToolResult
from toolguard._cli.demo import describe_model
from toolguard._cli.main import main
from toolguard._cli.terminal import render_card, render_outcome
from toolguard.demo import DemoModel, DemoWorkspace, build_demo_chat, demo_toolset
from toolguard.records import Action, ActionRequest

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------- subprocess sessions

ENV = {
    key: value
    for key, value in os.environ.items()
    if key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOOLGUARD_MODEL", "TOOLGUARD_LANG")
}
ENV["PYTHONIOENCODING"] = "utf-8"

APPROVE = "email alice that the meeting moved to 11\na\n"
REJECT_THEN_APPROVE = (
    "email alice that the meeting moved to 11\nr\nNo, send it to alice.smith@corp.example\na\n"
)
EDIT_ARGS = '{"to": "alice@example.com", "subject": "Meeting", "body": "It is at 11 now."}'
EDIT = "email alice that the meeting moved to 11\ne\n\nMeeting\nIt is at 11 now.\ns\n"
EDIT_INVALID = "email alice that the meeting moved to 11\ne\n\n\n\nx\nb\na\n"
APPROVE_ALL = "mail alice and bob that lunch is at 12:30\nA\n"
REJECT_ALL = "mail alice and bob that lunch is at 12:30\nx\nR\nnot today\n"
REJECT_NO_REASON = "email bob that the report is ready\nr\n\n"
EOF_IN_REVIEW = "email bob that the report is ready\n"
QUIT = "what's on my calendar tomorrow\nquit\nemail alice that this is never read\n"

SUBPROCESS_SESSIONS: dict[str, str] = {
    "approve": APPROVE,
    "reject_then_approve": REJECT_THEN_APPROVE,
    "edit": EDIT,
    "edit_invalid": EDIT_INVALID,
    "approve_all": APPROVE_ALL,
    "eof_at_start": "",
}
"""The sessions run as `python -m toolguard demo --non-interactive` processes: name -> stdin."""

APPROVE_DIALOGUE = [
    "> email alice that the meeting moved to 11",
    "assistant: I will email alice@example.com.",
    *DEMO_CARD_ALICE,
    "> a",
    DEMO_SENT_ALICE,
    'assistant: Sent "The meeting moved to 11" to alice@example.com.',
    "Bye.",
]
LUNCH_CARD_ALICE = [
    "== Approval 1/2: send_email ==",
    "Tool `send_email` is awaiting approval",
    "Why it asks: the word 'send' is an approval verb (messaging and publishing)",
    "Arguments:",
    "{",
    '  "to": "alice@example.com",',
    '  "subject": "Lunch is at 12:30",',
    '  "body": "Hi Alice, lunch is at 12:30."',
    "}",
]


@dataclass(frozen=True)
class Session:
    """What one `toolguard demo` process printed."""

    returncode: int
    lines: list[str]
    stderr: str

    @property
    def banner(self) -> list[str]:
        """The lines up to the "Try: ..." line."""
        end = next(i for i, line in enumerate(self.lines) if line.startswith("Try: "))
        return self.lines[: end + 1]

    @property
    def dialogue(self) -> list[str]:
        """The lines after the banner."""
        return self.lines[len(self.banner) :]


@pytest.fixture(scope="module")
def sessions() -> dict[str, Session]:
    """Every subprocess session, run at the same time (each takes a second to start)."""
    processes: dict[str, subprocess.Popen[str]] = {}
    try:
        for name in SUBPROCESS_SESSIONS:
            processes[name] = subprocess.Popen(
                [sys.executable, "-m", "toolguard", "demo", "--non-interactive"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                env=ENV,
            )
        results = {}
        for name, process in processes.items():
            out, err = process.communicate(SUBPROCESS_SESSIONS[name], timeout=60)
            results[name] = Session(process.returncode, out.splitlines(), err)
        return results
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def run_demo(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Session]:
    """Run `toolguard demo ARGS` in this process with ``stdin`` as its input, offline."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOOLGUARD_MODEL"):
        monkeypatch.delenv(name, raising=False)

    def run(stdin: str, *args: str) -> Session:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["demo", *args])
        out, err = capsys.readouterr()
        return Session(code, out.splitlines(), err)

    return run


def test_banner_names_the_offline_model_and_shows_the_classification(
    sessions: dict[str, Session],
) -> None:
    """At start the demo says which model and store it uses and prints the classification table."""
    session = sessions["eof_at_start"]
    table = demo_toolset(DemoWorkspace()).table().splitlines()
    assert session.banner == [
        "toolguard demo: an assistant whose risky tools wait for your approval.",
        (
            "Model: built-in scripted demo model (offline; no OPENAI_API_KEY set)."
            " Set OPENAI_API_KEY (or OPENAI_BASE_URL) to use a real model."
        ),
        "Store: in memory (use --db PATH to keep the conversation in SQLite)",
        "Workspace: a demo mailbox, calendar and task list in memory; today is Monday 2025-06-02.",
        "",
        "Tools (the ones marked 'required' wait for your approval):",
        *table,
        "",
        (
            "Try: email alice that the meeting moved to 11 | mail alice and bob that lunch is at"
            " 12:30 | what's on my calendar tomorrow | add a task to renew my passport by friday."
            " Type quit to leave."
        ),
    ]


def test_eof_at_start_exits_0(sessions: dict[str, Session]) -> None:
    """Empty input ends the demo at once with status 0, without waiting."""
    session = sessions["eof_at_start"]
    assert (session.returncode, session.dialogue, session.stderr) == (0, ["Bye."], "")


def test_approve_sends_the_email_and_prints_the_reply(sessions: dict[str, Session]) -> None:
    """Approving the card runs send_email; the outcome and the model's reply follow."""
    session = sessions["approve"]
    assert (session.returncode, session.stderr) == (0, "")
    assert session.dialogue == APPROVE_DIALOGUE


def test_reject_with_a_new_address_makes_the_model_propose_again(
    sessions: dict[str, Session],
) -> None:
    """A rejection reason naming another address reaches the model, which re-proposes with it."""
    session = sessions["reject_then_approve"]
    assert session.returncode == 0
    assert session.dialogue == [
        "> email alice that the meeting moved to 11",
        "assistant: I will email alice@example.com.",
        *DEMO_CARD_ALICE,
        "> r",
        "Why are you rejecting this tool?",
        "> No, send it to alice.smith@corp.example",
        "[rejected] send_email: No, send it to alice.smith@corp.example",
        "assistant: Understood: I will send it to alice.smith@corp.example instead.",
        "This needs your approval again.",
        "== Approval 1/1: send_email ==",
        "Tool `send_email` is awaiting approval",
        "Why it asks: the word 'send' is an approval verb (messaging and publishing)",
        "Arguments:",
        "{",
        '  "to": "alice.smith@corp.example",',
        '  "subject": "The meeting moved to 11",',
        '  "body": "Hello, the meeting moved to 11."',
        "}",
        "> a",
        (
            '[executed] send_email: {"id": "sent-1", "status": "sent",'
            ' "to": "alice.smith@corp.example", "subject": "The meeting moved to 11"}'
        ),
        'assistant: Sent "The meeting moved to 11" to alice.smith@corp.example.',
        "Bye.",
    ]


EDIT_HINT = (
    "Edit the arguments field by field. Enter keeps the value shown; text is taken as"
    ' typed (or as a "JSON string"), other values as JSON (3, true, null, ["a"]).'
)
EDIT_FIELDS_KEPT = [
    'to: "alice@example.com"',
    ">",
    'subject: "The meeting moved to 11"',
]
EDIT_OUTCOME = [
    (
        '[executed] send_email: {"id": "sent-1", "status": "sent", "to": "alice@example.com",'
        ' "subject": "Meeting"}'
    ),
    'assistant: Sent "Meeting" to alice@example.com.',
    "Bye.",
]


def test_edit_runs_the_tool_with_the_new_arguments(sessions: dict[str, Session]) -> None:
    """An edit asks field by field (Enter keeps a value) and sends the edited arguments."""
    session = sessions["edit"]
    assert session.returncode == 0
    assert session.dialogue == [
        "> email alice that the meeting moved to 11",
        "assistant: I will email alice@example.com.",
        *DEMO_CARD_ALICE,
        "> e",
        EDIT_HINT,
        *EDIT_FIELDS_KEPT,
        "> Meeting",
        'body: "Hi Alice, the meeting moved to 11."',
        "> It is at 11 now.",
        f"Edited arguments: {EDIT_ARGS}",
        "> s",
        *EDIT_OUTCOME,
    ]


def test_edit_can_go_back_to_the_decision(sessions: dict[str, Session]) -> None:
    """After the fields, b goes back to the card's question (another answer asks again)."""
    session = sessions["edit_invalid"]
    assert session.returncode == 0
    assert session.dialogue == [
        "> email alice that the meeting moved to 11",
        "assistant: I will email alice@example.com.",
        *DEMO_CARD_ALICE,
        "> e",
        EDIT_HINT,
        *EDIT_FIELDS_KEPT,
        ">",
        'body: "Hi Alice, the meeting moved to 11."',
        ">",
        (
            'Edited arguments: {"to": "alice@example.com", "subject": "The meeting moved to 11",'
            ' "body": "Hi Alice, the meeting moved to 11."}'
        ),
        "> x",
        "Please answer s (send) or b (back).",
        "> b",
        "> a",
        DEMO_SENT_ALICE,
        'assistant: Sent "The meeting moved to 11" to alice@example.com.',
        "Bye.",
    ]


def test_approve_all_runs_both_parallel_emails(sessions: dict[str, Session]) -> None:
    """With two actions, A approves both at once; both emails are sent and summarised."""
    session = sessions["approve_all"]
    assert session.returncode == 0
    assert session.dialogue == [
        "> mail alice and bob that lunch is at 12:30",
        "assistant: I will send 2 emails: to alice@example.com and bob@example.com.",
        "2 actions wait for your approval.",
        *LUNCH_CARD_ALICE,
        "> A",
        (
            '[executed] send_email: {"id": "sent-1", "status": "sent", "to": "alice@example.com",'
            ' "subject": "Lunch is at 12:30"}'
        ),
        (
            '[executed] send_email: {"id": "sent-2", "status": "sent", "to": "bob@example.com",'
            ' "subject": "Lunch is at 12:30"}'
        ),
        'assistant: Sent "Lunch is at 12:30" to alice@example.com.',
        'Sent "Lunch is at 12:30" to bob@example.com.',
        "Bye.",
    ]


def test_parallel_emails_keep_the_models_order_when_threads_are_slow(
    run_demo: Callable[..., Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load a worker thread may start late; the demo's tools never use one.

    The flaky cause of ``test_approve_all_runs_both_parallel_emails``: each
    ``send_email`` ran in its own worker thread and took the next ``sent-N`` id
    when its thread got the CPU, so a busy machine gave Bob "sent-1". Here
    every thread hop is made slow (the first one slowest), which reproduced
    that order every time before the demo ran its in-memory tools on the loop.
    """
    hops: list[str] = []
    original = anyio.to_thread.run_sync

    async def slow_hop(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__name__", repr(func)))
        await anyio.sleep(0.3 if len(hops) == 1 else 0.0)
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", slow_hop)
    session = run_demo(APPROVE_ALL, "--non-interactive")
    assert session.returncode == 0
    executed = [line for line in session.dialogue if line.startswith("[executed]")]
    assert executed == [
        (
            '[executed] send_email: {"id": "sent-1", "status": "sent", "to": "alice@example.com",'
            ' "subject": "Lunch is at 12:30"}'
        ),
        (
            '[executed] send_email: {"id": "sent-2", "status": "sent", "to": "bob@example.com",'
            ' "subject": "Lunch is at 12:30"}'
        ),
    ]
    assert hops == []


def test_reject_all_sends_one_reason_for_every_action(run_demo: Callable[..., Session]) -> None:
    """R rejects every remaining action with one reason; an unknown answer is asked again."""
    session = run_demo(REJECT_ALL, "--non-interactive")
    assert session.returncode == 0
    assert session.dialogue == [
        "> mail alice and bob that lunch is at 12:30",
        "assistant: I will send 2 emails: to alice@example.com and bob@example.com.",
        "2 actions wait for your approval.",
        *LUNCH_CARD_ALICE,
        "> x",
        "Please answer a, e or r (or A / R for all), or quit.",
        "> R",
        "Why are you rejecting these tools?",
        "> not today",
        "[rejected] send_email: not today",
        "[rejected] send_email: not today",
        "assistant: OK, I did not send the email to alice@example.com. Your reason: not today",
        "OK, I did not send the email to bob@example.com. Your reason: not today",
        "Bye.",
    ]


def test_reject_without_a_reason_sends_the_default_message(
    run_demo: Callable[..., Session],
) -> None:
    """An empty reason rejects with REJECTED_BY_USER_MESSAGE; the model says it did not send."""
    session = run_demo(REJECT_NO_REASON, "--non-interactive")
    assert session.returncode == 0
    assert session.dialogue[-5:] == [
        "Why are you rejecting this tool?",
        ">",
        f"[rejected] send_email: {toolguard.REJECTED_BY_USER_MESSAGE}",
        "assistant: OK, I did not send the email to bob@example.com.",
        "Bye.",
    ]


def test_eof_during_a_review_runs_nothing_and_exits_0(run_demo: Callable[..., Session]) -> None:
    """Input ending while a card waits leaves the action undecided and exits with status 0."""
    session = run_demo(EOF_IN_REVIEW, "--non-interactive")
    assert session.returncode == 0
    assert session.dialogue[-3:] == [
        "}",
        "The input ended while actions waited for your approval: nothing was run.",
        "Bye.",
    ]


def test_quit_stops_reading(run_demo: Callable[..., Session]) -> None:
    """`quit` ends the demo; the lines after it are not read. Reads run without a card."""
    session = run_demo(QUIT, "--non-interactive")
    assert session.returncode == 0
    assert session.dialogue == [
        "> what's on my calendar tomorrow",
        "assistant: Your calendar on Tuesday 2025-06-03:",
        "- 10:00-11:00 Project kickoff (evt-2), with alice@example.com and carol@example.com",
        "- 16:00-16:45 Dentist (evt-3)",
        "> quit",
        "Bye.",
    ]


def test_script_file_gives_the_answers(run_demo: Callable[..., Session], tmp_path: Path) -> None:
    """--script FILE reads the answers from the file exactly like --non-interactive."""
    (tmp_path / "answers.txt").write_text(APPROVE, encoding="utf-8")
    session = run_demo("never read\n", "--script", str(tmp_path / "answers.txt"))
    assert session.returncode == 0
    assert session.dialogue == APPROVE_DIALOGUE


def test_db_keeps_the_conversation_in_sqlite(
    run_demo: Callable[..., Session], tmp_path: Path
) -> None:
    """--db PATH stores the thread in SQLite; it is idle and ends with the reply."""
    db = tmp_path / "demo.db"
    session = run_demo(APPROVE, "--non-interactive", "--db", str(db))
    assert session.returncode == 0
    assert session.banner[2] == f"Store: SQLite file {db}"
    assert session.dialogue[0] == APPROVE_DIALOGUE[0]
    assert session.dialogue[1].startswith("Thread: ")
    assert session.dialogue[2:] == APPROVE_DIALOGUE[1:]
    thread_id = session.dialogue[1].removeprefix("Thread: ")
    store = toolguard.SQLiteStore(db)
    try:
        state = anyio.run(store.load, thread_id)
    finally:
        store.close()
    assert state is not None
    assert (state.status, state.messages[-1]) == (
        "idle",
        {
            "role": "assistant",
            "content": 'Sent "The meeting moved to 11" to alice@example.com.',
        },
    )
    assert [(a.name, a.status) for a in state.actions] == [("send_email", "executed")]


# ---------------------------------------------------------------------------- rendering


def test_render_card_shows_the_tool_and_its_full_arguments() -> None:
    """The card has a header, the description and the arguments as indented JSON."""
    request = ActionRequest(
        name="create_event",
        args={"title": "Review", "attendees": ["a@example.com", "b@example.com"], "note": "ü"},
        description="Tool `create_event` is awaiting approval",
    )
    assert render_card(request, index=2, total=3) == (
        "== Approval 2/3: create_event ==\n"
        "Tool `create_event` is awaiting approval\n"
        "Arguments:\n"
        "{\n"
        '  "title": "Review",\n'
        '  "attendees": [\n'
        '    "a@example.com",\n'
        '    "b@example.com"\n'
        "  ],\n"
        '  "note": "ü"\n'
        "}"
    )


def test_render_card_says_why_the_tool_asks() -> None:
    """With the classifier's reason, the card says why under the description, escaped."""
    request = ActionRequest(
        name="transfer_funds",
        args={"amount": 5},
        description="Tool `transfer_funds` is awaiting approval",
    )
    reason = Classifier().explain("transfer_funds").reason
    assert render_card(request, why=reason) == (
        "== Approval 1/1: transfer_funds ==\n"
        "Tool `transfer_funds` is awaiting approval\n"
        "Why it asks: the word 'transfer' is an approval verb (money)\n"
        "Arguments:\n"
        "{\n"
        '  "amount": 5\n'
        "}"
    )
    assert render_card(request, why="odd\x1b[31m").splitlines()[2] == "Why it asks: odd\\u001b[31m"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("frobnicate_widget", "no known verb in ['frobnicate', 'widget']: unknown=\"ask\""),
        (
            "find_and_delete",
            (
                "the word 'delete' is a destructive verb: the read verb 'find' before it does not"
                " exempt it"
            ),
        ),
        (
            "del\u200bete_file",
            (
                "the name holds U+200B ZERO WIDTH SPACE, which is not printable ASCII: its words"
                " cannot be read, so it needs approval"
            ),
        ),
    ],
)
def test_render_card_gives_the_classifiers_new_reasons(name: str, why: str) -> None:
    """The card's "Why it asks" line is the classifier's reason, word for word."""
    reason = Classifier().explain(name).reason
    assert reason == why
    request = ActionRequest(name=name, args={}, description=f"Tool `{name}` is awaiting approval")
    assert render_card(request, why=reason).splitlines()[2] == f"Why it asks: {why}"


@pytest.mark.parametrize(
    ("status", "result", "expected"),
    [
        ("executed", "done", "[executed] add_task: done"),
        ("rejected", "too early", "[rejected] add_task: too early"),
        ("edited", None, "[edited] add_task: the edited call waits for its own approval"),
    ],
)
def test_render_outcome(status: Any, result: str | None, expected: str) -> None:
    """An outcome line names the status, the tool and what the model read."""
    action = Action(
        id="a1",
        call_id="call_1",
        name="add_task",
        args={"title": "x"},
        description="Tool `add_task` is awaiting approval",
        status=status,
        result=(
            ToolResult(call_id="call_1", name="add_task", status="success", content=result)
            if result is not None
            else None
        ),
    )
    assert render_outcome(action) == expected


# ---------------------------------------------------------------------------- the DemoModel

TOOLS = demo_toolset(DemoWorkspace()).openai_tools()


def respond(*messages: dict[str, Any]) -> ModelResponse:
    """The DemoModel's answer to ``messages`` with every demo tool available."""
    return DemoModel().respond(list(messages), TOOLS)


def user(text: str) -> dict[str, Any]:
    """A user message."""
    return {"role": "user", "content": text}


def assistant_calls(*calls: ToolCall) -> dict[str, Any]:
    """An assistant message proposing ``calls``."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args)},
            }
            for c in calls
        ],
    }


def tool(call_id: str, content: str, status: str = "success") -> dict[str, Any]:
    """A tool result message."""
    return {"role": "tool", "tool_call_id": call_id, "content": content, "status": status}


SEND_ALICE = ToolCall(
    id="call_1",
    name="send_email",
    args={
        "to": "alice@example.com",
        "subject": "The meeting moved to 11",
        "body": "Hi Alice, the meeting moved to 11.",
    },
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "email alice that the meeting moved to 11",
            ModelResponse(text="I will email alice@example.com.", tool_calls=[SEND_ALICE]),
        ),
        (
            "mail alice and bob that lunch is at 12:30",
            ModelResponse(
                text="I will send 2 emails: to alice@example.com and bob@example.com.",
                tool_calls=[
                    ToolCall(
                        id="call_1",
                        name="send_email",
                        args={
                            "to": "alice@example.com",
                            "subject": "Lunch is at 12:30",
                            "body": "Hi Alice, lunch is at 12:30.",
                        },
                    ),
                    ToolCall(
                        id="call_2",
                        name="send_email",
                        args={
                            "to": "bob@example.com",
                            "subject": "Lunch is at 12:30",
                            "body": "Hi Bob, lunch is at 12:30.",
                        },
                    ),
                ],
            ),
        ),
        (
            "what's on my calendar tomorrow",
            ModelResponse(
                text="Let me look at your calendar.",
                tool_calls=[ToolCall(id="call_1", name="list_events", args={"day": "2025-06-03"})],
            ),
        ),
        (
            "add a task to renew my passport by friday",
            ModelResponse(
                text='I will add the task "Renew my passport".',
                tool_calls=[
                    ToolCall(
                        id="call_1",
                        name="add_task",
                        args={"title": "Renew my passport", "due": "2025-06-06"},
                    )
                ],
            ),
        ),
        (
            "schedule a meeting with carol tomorrow at 3pm",
            ModelResponse(
                text='I will create the event "Meeting with Carol".',
                tool_calls=[
                    ToolCall(
                        id="call_1",
                        name="create_event",
                        args={
                            "title": "Meeting with Carol",
                            "start": "2025-06-03T15:00",
                            "end": "2025-06-03T15:30",
                            "attendees": ["carol@example.com"],
                        },
                    )
                ],
            ),
        ),
        (
            "complete task-2",
            ModelResponse(
                text="I will mark task-2 as done.",
                tool_calls=[
                    ToolCall(id="call_1", name="complete_task", args={"task_id": "task-2"})
                ],
            ),
        ),
        (
            "any emails from bob?",
            ModelResponse(
                text="Let me search your mail.",
                tool_calls=[ToolCall(id="call_1", name="search_mail", args={"query": "bob"})],
            ),
        ),
        (
            "email dave that hi",
            ModelResponse(
                text="Who should get this email? Name a contact (alice, bob or carol) or give an"
                " email address."
            ),
        ),
    ],
)
def test_demo_model_turns_requests_into_tool_calls(text: str, expected: ModelResponse) -> None:
    """A recognised request becomes the matching tool calls; ids count from call_1."""
    assert respond(user(text)) == expected


def test_demo_model_lists_what_it_can_do_for_unknown_requests() -> None:
    """An unknown request gets a text answer listing the requests it understands, and no call."""
    response = respond(user("what is the weather like?"))
    assert response.tool_calls == []
    assert response.text is not None
    assert response.text.splitlines()[0] == (
        "Sorry, I did not understand that. I am the toolguard demo assistant,"
        " a scripted stand-in for an LLM. I can:"
    )


def test_demo_model_counts_call_ids_over_the_history() -> None:
    """Call ids continue after the calls already in the conversation."""
    response = respond(
        user("email alice that the meeting moved to 11"),
        assistant_calls(SEND_ALICE),
        tool(SEND_ALICE.id, '{"id": "sent-1", "status": "sent"}'),
        {"role": "assistant", "content": "Sent."},
        user("list my tasks"),
    )
    assert response == ModelResponse(
        text="Let me look at your tasks.",
        tool_calls=[ToolCall(id="call_2", name="list_tasks", args={})],
    )


def test_demo_model_summarises_a_result() -> None:
    """After a successful tool result the model answers with a summary of the returned value."""
    result = {"id": "sent-1", "status": "sent", "to": "alice@example.com", "subject": "Hi"}
    response = respond(
        user("email alice that hi"), assistant_calls(SEND_ALICE), tool("call_1", json.dumps(result))
    )
    assert response == ModelResponse(text='Sent "Hi" to alice@example.com.')


def test_demo_model_re_proposes_with_the_address_from_the_reason() -> None:
    """A rejection whose reason names another address gives the same call with that address."""
    response = respond(
        user("email alice that the meeting moved to 11"),
        assistant_calls(SEND_ALICE),
        tool("call_1", "No, send it to alice.smith@corp.example", "error"),
    )
    assert response == ModelResponse(
        text="Understood: I will send it to alice.smith@corp.example instead.\n"
        "This needs your approval again.",
        tool_calls=[
            ToolCall(
                id="call_2",
                name="send_email",
                args={
                    "to": "alice.smith@corp.example",
                    "subject": "The meeting moved to 11",
                    "body": "Hello, the meeting moved to 11.",
                },
            )
        ],
    )


def test_demo_model_re_proposes_to_a_contact_named_in_the_reason() -> None:
    """A reason naming another contact switches the address and the greeting."""
    response = respond(
        user("email alice that the meeting moved to 11"),
        assistant_calls(SEND_ALICE),
        tool("call_1", "wrong person, send it to bob", "error"),
    )
    assert response.tool_calls == [
        ToolCall(
            id="call_2",
            name="send_email",
            args={
                "to": "bob@example.com",
                "subject": "The meeting moved to 11",
                "body": "Hi Bob, the meeting moved to 11.",
            },
        )
    ]


def test_demo_model_moves_an_event_as_the_reason_asks() -> None:
    """A rejected event whose reason names a time and a contact is proposed again, changed."""
    event = ToolCall(
        id="call_1",
        name="create_event",
        args={
            "title": "Sync",
            "start": "2025-06-03T15:00",
            "end": "2025-06-03T15:30",
            "attendees": ["carol@example.com"],
        },
    )
    response = respond(
        user("schedule a sync"),
        assistant_calls(event),
        tool("call_1", "make it 4pm and invite bob", "error"),
    )
    assert response == ModelResponse(
        text="Understood: I will move it to 2025-06-03 16:00 and invite bob@example.com.\n"
        "This needs your approval again.",
        tool_calls=[
            ToolCall(
                id="call_2",
                name="create_event",
                args={
                    "title": "Sync",
                    "start": "2025-06-03T16:00",
                    "end": "2025-06-03T16:30",
                    "attendees": ["carol@example.com", "bob@example.com"],
                },
            )
        ],
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "not now, she already knows",
            (
                "OK, I did not send the email to alice@example.com."
                " Your reason: not now, she already knows"
            ),
        ),
        (toolguard.REJECTED_BY_USER_MESSAGE, "OK, I did not send the email to alice@example.com."),
        (toolguard.NO_DECISION, "OK, I did not send the email to alice@example.com."),
        (
            "Tool `send_email` failed: ValueError: 'alice' is not an email address",
            (
                "I could not send the email to alice@example.com:"
                " Tool `send_email` failed: ValueError: 'alice' is not an email address"
            ),
        ),
    ],
)
def test_demo_model_explains_what_it_did_not_do(content: str, expected: str) -> None:
    """A rejection without a new address, or a failure, gets a text answer and no call."""
    response = respond(
        user("email alice that hi"), assistant_calls(SEND_ALICE), tool("call_1", content, "error")
    )
    assert response == ModelResponse(text=expected)


def test_demo_model_proposes_only_available_tools() -> None:
    """When the tool it would call is not in the toolset, it says so instead of calling it."""
    response = DemoModel().respond([user("email alice that hi")], [])
    assert response == ModelResponse(
        text="I cannot do that here: this assistant has no `send_email` tool."
    )


# ---------------------------------------------------------------------------- workspace and chat


def test_demo_toolset_guards_the_writes_only() -> None:
    """The default classifier guards the five write tools and leaves the reads free."""
    toolset = demo_toolset(DemoWorkspace())
    assert list(toolset) == [
        "search_mail",
        "read_email",
        "send_email",
        "list_events",
        "create_event",
        "delete_event",
        "list_tasks",
        "add_task",
        "complete_task",
    ]
    assert toolset.guarded == [
        "send_email",
        "create_event",
        "delete_event",
        "add_task",
        "complete_task",
    ]


def test_demo_tool_schema_comes_from_the_docstring() -> None:
    """The send_email schema has the typed parameters and their docstring descriptions."""
    assert demo_toolset(DemoWorkspace())["send_email"].openai_schema == {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email from the user's address.",
            "parameters": {
                "additionalProperties": False,
                "properties": {
                    "to": {"description": "The recipient's email address.", "type": "string"},
                    "subject": {"description": "The subject line.", "type": "string"},
                    "body": {"description": "The text of the email.", "type": "string"},
                },
                "required": ["to", "subject", "body"],
                "type": "object",
            },
        },
    }


def test_send_email_refuses_a_bare_name() -> None:
    """send_email raises for a recipient that is not an address, and sends nothing."""
    workspace = DemoWorkspace()
    with pytest.raises(ValueError, match=r"^'alice' is not an email address$"):
        workspace.send_email("alice", "Hi", "Hello")
    assert workspace.sent == []


def test_build_demo_chat_without_a_key_uses_the_demo_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """With neither OPENAI_API_KEY nor OPENAI_BASE_URL the chat runs on the DemoModel."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    chat = build_demo_chat()
    assert isinstance(chat, ReviewedChat)
    assert isinstance(chat.model, DemoModel)


@pytest.mark.parametrize("api_key", ["sk-test", None])
def test_build_demo_chat_with_a_key_or_url_uses_openai(
    monkeypatch: pytest.MonkeyPatch, api_key: str | None
) -> None:
    """OPENAI_API_KEY or OPENAI_BASE_URL selects OpenAIChatModel.from_env(); the banner names it."""
    from toolguard.openai import OpenAIChatModel

    if api_key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", api_key)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TOOLGUARD_MODEL", "local-model")
    chat = build_demo_chat()
    assert isinstance(chat.model, OpenAIChatModel)
    assert describe_model(chat.model) == "Model: local-model at http://127.0.0.1:9/v1/"


def test_build_demo_chat_falls_back_without_the_openai_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key without the openai package prints why and falls back to the DemoModel."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, "toolguard.openai", None)
    chat = build_demo_chat()
    assert isinstance(chat.model, DemoModel)
    assert capsys.readouterr().err == (
        "OPENAI_API_KEY or OPENAI_BASE_URL is set, but the openai package is not installed"
        " (import of toolguard.openai halted; None in sys.modules). Install it with:"
        " pip install 'toolguard-hitl[openai]'. Using the built-in scripted demo model instead.\n"
    )


# ---------------------------------------------------------------------------- other commands


def send_note(to: str) -> str:
    """Send a note."""
    return to


def list_notes() -> list[str]:
    """List the notes."""
    return []


REGISTRY = [send_note, list_notes]


def test_tools_command_prints_the_classification(capsys: pytest.CaptureFixture[str]) -> None:
    """`toolguard tools MODULE:ATTR` prints the registry's classification table."""
    assert main(["tools", "tests.demo.test_demo:REGISTRY"]) == 0
    assert capsys.readouterr().out == toolguard.guard(REGISTRY).table() + "\n"


def get_order_notes(order: str) -> list[str]:
    """Get the notes of an order."""
    return [order]


def frobnicate_notes() -> None:
    """Frobnicate the notes."""


def search_and_replace_notes(old: str, new: str) -> None:
    """Replace text in every note."""


EVERY_RULE = [send_note, list_notes, get_order_notes, frobnicate_notes, search_and_replace_notes]


def test_tools_command_prints_every_rules_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """`toolguard tools` prints the verb, read, read-first, unknown and destructive reasons."""
    assert main(["tools", "tests.demo.test_demo:EVERY_RULE"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "tool                      approval  rule     reason",
        "------------------------  --------  -------  " + "-" * 93,
        (
            "send_note                 required  verb     "
            "the word 'send' is an approval verb (messaging and publishing)"
        ),
        "list_notes                no        read     the word 'list' is a read verb",
        (
            "get_order_notes           no        read     "
            "the read verb 'get' leads the action: 'order' is read as a thing, not an action"
        ),
        (
            "frobnicate_notes          required  unknown  "
            "no known verb in ['frobnicate', 'notes']: unknown=\"ask\""
        ),
        (
            "search_and_replace_notes  required  verb     "
            "the word 'replace' is a destructive verb: the read verb 'search' before it does not"
            " exempt it"
        ),
    ]


def test_tools_command_reports_a_bad_spec(capsys: pytest.CaptureFixture[str]) -> None:
    """A registry that is not MODULE:ATTR is an error with status 2."""
    assert main(["tools", "tests.test_demo"]) == 2
    assert capsys.readouterr().err == (
        "error: expected MODULE:ATTR (e.g. myapp.tools:registry), got 'tests.test_demo'\n"
    )


def test_serve_passes_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolguard serve` hands every option to toolguard._cli.serve.serve."""
    received: list[dict[str, Any]] = []
    fake = types.ModuleType("toolguard._cli.serve")
    fake.serve = lambda **options: received.append(options)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "toolguard._cli.serve", fake)
    argv = ["serve", "--tools", "app:tools", "--model", "m", "--base-url", "http://x/v1"]
    assert main([*argv, "--db", "t.db", "--host", "localhost", "--port", "9000"]) == 0
    assert main(["serve"]) == 0
    security = ["--max-body-bytes", "5000", "--allow-origin", "https://a.example"]
    assert main(["serve", *security, "--allow-host", "a.lan", "--allow-host", "b.lan:1"]) == 0
    defaults = {"max_body_bytes": 1048576, "allow_origins": [], "allow_hosts": []}
    assert received == [
        {
            "tools": "app:tools",
            "model": "m",
            "base_url": "http://x/v1",
            "db": "t.db",
            "host": "localhost",
            "port": 9000,
            **defaults,
        },
        {
            "tools": None,
            "model": None,
            "base_url": None,
            "db": None,
            "host": "127.0.0.1",
            "port": 8000,
            **defaults,
        },
        {
            "tools": None,
            "model": None,
            "base_url": None,
            "db": None,
            "host": "127.0.0.1",
            "port": 8000,
            "max_body_bytes": 5000,
            "allow_origins": ["https://a.example"],
            "allow_hosts": ["a.lan", "b.lan:1"],
        },
    ]


@pytest.mark.parametrize("value", ["0", "-1", "lots"])
def test_serve_refuses_a_body_limit_that_is_not_a_positive_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-body-bytes must be a positive integer: argparse exits 2 naming it."""
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--max-body-bytes", value])
    assert caught.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "toolguard serve: error: argument --max-body-bytes: expected a positive number of"
        f" bytes, got {value!r}"
    )


def test_serve_without_the_server_module_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """When toolguard._cli.serve is missing, `serve` says so and returns 2."""
    monkeypatch.setitem(sys.modules, "toolguard._cli.serve", None)
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == (
        "error: this installation of toolguard has no HTTP server"
        " (the module toolguard._cli.serve is missing).\n"
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the program name and version, then exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert (exit_info.value.code, capsys.readouterr().out) == (
        0,
        f"toolguard {toolguard.__version__}\n",
    )


def test_no_command_prints_help_and_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a command the help is printed and the status is 2."""
    assert main([]) == 2
    assert capsys.readouterr().out.startswith("usage: toolguard [-h] [--version] COMMAND ...\n")
