"""``toolguard replay`` on the scripted day (tests/cli/day.py), recorded in SQLite and PostgreSQL:
a judge that approves everything, candidate rules, and the mistakes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.cli.day import postgres_day, sqlite_day
from tests.openai_server import (
    MODEL,
    ScriptedOpenAIServer,
    reply_error,
    reply_text,
    scripted_openai,
)
from toolguard._chat.stats import stored_states
from toolguard._cli.main import main
from toolguard._cli.serve_db import open_store

__all__ = ["postgres_day", "scripted_openai", "sqlite_day"]  # fixtures, used by name

UNTIL = "2026-03-02T18:00:00Z"
ALLOW = {
    "risk": "low",
    "user_authorized": True,
    "outcome": "allow",
    "rationale": "Looks fine.",
}


async def _threads(db: str) -> dict[str, str]:
    """The thread id of each decided call, by its tool and request time (``HH:MM``)."""
    store = open_store(db)
    try:
        states = await stored_states(store)
    finally:
        await store.aclose()  # type: ignore[attr-defined]
    return {
        f"{event.tool} {event.at:%H:%M}": state.thread_id
        for state in states
        for event in state.audit
        if event.kind == "requested"
    }


def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["replay", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_judge_that_approves_everything_would_have_run_every_rejected_call(
    kind: str,
    request: pytest.FixtureRequest,
    scripted_openai: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = request.getfixturevalue(f"{kind}_day")
    threads = anyio.run(_threads, db)
    scripted_openai.add(*[lambda _: reply_text(json.dumps(ALLOW))] * 13)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = replay(capsys, "--db", db, "--until", UNTIL, "--judge-model", MODEL)
    assert (code, err) == (0, "")
    why = f"the candidate would have run it: the judge ({MODEL}): Looks fine."
    assert out == (
        "Replayed 13 decisions by people up to 2026-03-02T18:00:00Z\n"
        f"Candidate: judge {MODEL}\n"
        "\n"
        "tool         decided  agreed  false auto-approvals  needless asks  false denials\n"
        "delete_file        5       0                     5              0              0\n"
        "send_email         5       5                     0              0              0\n"
        "send_sms           1       1                     0              0              0\n"
        "transfer           2       1                     1              0              0\n"
        "\n"
        "Agreed with the people: 7 of 13 (53.8%)\n"
        "False auto-approvals (would have run what a person rejected or edited): 6\n"
        "Needless asks (would have asked what a person approved unedited): 0\n"
        "False denials (would have refused what a person approved): 0\n"
        "\n"
        "Worst cases:\n"
        + "".join(
            f"  2026-03-02T{hour}:00Z delete_file (path='report-{i}.txt'): rejected by carol"
            f" (No.); {why}\n    thread {threads[f'delete_file {hour}']}\n"
            for i, hour in enumerate(["10:00", "10:10", "10:20", "10:30", "10:40"])
        )
        + f"  2026-03-02T11:10:00Z transfer (to='DE02', amount=20): edited by bob; {why}\n"
        f"    thread {threads['transfer 11:10']}\n"
    )
    # The judge read each call as a reviewer saw it, with the person's own messages only.
    [first, *_] = scripted_openai.requests
    document = json.loads(first["messages"][-1]["content"])
    assert document == {
        "user_messages": ['{"name": "send_email", "args": {"to": "p0@example.com", "body": "Hi"}}'],
        "proposed_call": {
            "tool": "send_email",
            "description": "",
            "arguments": {"to": "p0@example.com", "body": "Hi"},
        },
    }


def test_candidate_rules(
    sqlite_day: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    threads = anyio.run(_threads, sqlite_day)
    rules = tmp_path / "candidate.toml"
    rules.write_text(
        '[rules]\nallow = ["send_email", "delete_file(path=\\"report-0*\\")"]\n'
        'ask = ["send_sms"]\ndeny = ["transfer(to=\\"DE01\\")"]\n',
        encoding="utf-8",
    )
    code, out, err = replay(
        capsys, "--db", sqlite_day, "--until", UNTIL, "--rules", str(rules), "--json"
    )
    assert (code, err) == (0, "")

    def counts(**given: int) -> dict[str, int]:
        base = dict.fromkeys(["compared", "agreed", "false_auto_approvals", "needless_asks"], 0)
        return {**base, "false_denials": 0, "judge_failures": 0, **given}

    assert json.loads(out) == {
        "since": None,
        "until": UNTIL,
        "candidate": {"rules": str(rules)},
        "totals": counts(
            compared=13, agreed=10, false_auto_approvals=1, needless_asks=1, false_denials=1
        ),
        "tools": {
            "delete_file": counts(compared=5, agreed=4, false_auto_approvals=1),
            "send_email": counts(compared=5, agreed=5),
            "send_sms": counts(compared=1, needless_asks=1),
            "transfer": counts(compared=2, agreed=1, false_denials=1),
        },
        "worst": [
            {
                "thread_id": threads["delete_file 10:00"],
                "action_id": json.loads(out)["worst"][0]["action_id"],
                "requested_at": "2026-03-02T10:00:00Z",
                "tool": "delete_file",
                "args": {"path": "report-0.txt"},
                "person": {"decision": "reject", "by": "carol", "detail": "No."},
                "candidate": {
                    "outcome": "run",
                    "why": 'the rule allow delete_file(path="report-0*")',
                },
            },
            {
                "thread_id": threads["transfer 11:00"],
                "action_id": json.loads(out)["worst"][1]["action_id"],
                "requested_at": "2026-03-02T11:00:00Z",
                "tool": "transfer",
                "args": {"to": "DE01", "amount": 10},
                "person": {"decision": "approve", "by": "alice", "detail": None},
                "candidate": {"outcome": "deny", "why": 'the rule deny transfer(to="DE01")'},
            },
        ],
    }


def test_mistakes_are_one_line(
    sqlite_day: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('[rules]\nallow = ["send_email("]\n', encoding="utf-8")
    cases: list[tuple[list[str], str]] = [
        ([], "give a candidate: --rules FILE, --judge-model NAME or --heuristic-judge"),
        (
            ["--judge-model", "m", "--heuristic-judge"],
            "--judge-model and --heuristic-judge exclude each other",
        ),
        (
            ["--rules", str(tmp_path / "none.toml")],
            (
                f"--rules {tmp_path / 'none.toml'}: [Errno 2] No such file or directory:"
                f" '{tmp_path / 'none.toml'}'"
            ),
        ),
    ]
    for argv, error in cases:
        assert replay(capsys, "--db", sqlite_day, *argv) == (2, "", f"error: {error}\n")
    assert replay(capsys, "--db", sqlite_day, "--rules", str(broken)) == (
        2,
        "",
        f"error: --rules {broken}: The allow rule 'send_email(' must end with ')'\n",
    )
    assert replay(capsys, "--db", sqlite_day, "--heuristic-judge", "--until", "later") == (
        2,
        "",
        (
            "error: --until: expected a date (2026-11-01), a time (2026-11-01T09:00:00Z) or a"
            " number of days (30d), got 'later'\n"
        ),
    )


def test_a_judge_that_cannot_decide_asks_and_is_counted(
    sqlite_day: str,
    scripted_openai: ScriptedOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted_openai.add(*[reply_error(400, "no such model")] * 13)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    argv = ["--db", sqlite_day, "--until", UNTIL, "--judge-model", MODEL, "--worst", "0"]
    code, out, err = replay(capsys, *argv, "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert (report["totals"], report["worst"]) == (
        {
            "compared": 13,
            "agreed": 6,
            "false_auto_approvals": 0,
            "needless_asks": 7,
            "false_denials": 0,
            "judge_failures": 13,
        },
        [],
    )
