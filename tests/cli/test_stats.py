"""``toolguard stats`` and ``GET /hitl/stats`` on a scripted day of decisions (tests/cli/day.py),
recorded in SQLite and in PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.day import postgres_day, sqlite_day
from tests.helpers import serve_in_thread
from toolguard import ReviewedChat, ScriptedModel, SQLiteStore
from toolguard._cli.main import main
from toolguard._gateway.routes import build_app as gateway_app
from toolguard.http import HeaderAuth, create_app

__all__ = ["postgres_day", "sqlite_day"]  # fixtures, used by name

UNTIL = "2026-03-02T18:00:00Z"
SEND_EMAIL_HINT = (
    "send_email: approved 5 of 5 unedited in 1 day: an allow rule or a standing grant would"
    " save 5 asks"
)
DELETE_FILE_HINT = "delete_file: rejected 5 of 5 in 1 day: a deny rule"


def row(**given: Any) -> dict[str, Any]:
    """A tool's row: the counts given, every other count 0, no decision time, nobody deciding."""
    counts = ["calls", "asked", "approved", "edited", "rejected", "responded", "expired"]
    counts += ["cancelled", "interrupted", "denied", "auto"]
    base: dict[str, Any] = dict.fromkeys(counts, 0)
    base["auto_by"] = {"grant": 0, "judge": 0, "shadow": 0}
    base["shadow_would"] = {"ask": 0, "deny": 0}
    base.update(median_decision_s=None, p90_decision_s=None, deciders={}, suggestions=[])
    return {**base, **given}


DAY = {
    "since": None,
    "until": UNTIL,
    "tools": {
        "delete_file": row(
            calls=7,
            asked=5,
            rejected=5,
            auto=2,
            auto_by={"grant": 0, "judge": 0, "shadow": 2},
            shadow_would={"ask": 2, "deny": 0},
            median_decision_s=25.0,
            p90_decision_s=45.0,
            deciders={"carol": 5},
            suggestions=[DELETE_FILE_HINT],
        ),
        "pay_invoice": row(calls=2, auto=2, auto_by={"grant": 0, "judge": 2, "shadow": 0}),
        "send_email": row(
            calls=5,
            asked=5,
            approved=5,
            median_decision_s=30.0,
            p90_decision_s=300.0,
            deciders={"alice": 3, "bob": 2},
            suggestions=[SEND_EMAIL_HINT],
        ),
        "send_sms": row(
            calls=3,
            asked=1,
            approved=1,
            auto=2,
            auto_by={"grant": 2, "judge": 0, "shadow": 0},
            median_decision_s=5.0,
            p90_decision_s=5.0,
            deciders={"alice": 1},
        ),
        "transfer": row(
            calls=4,
            asked=4,
            approved=1,
            edited=1,
            expired=1,
            cancelled=1,
            median_decision_s=10.0,
            p90_decision_s=12.0,
            deciders={"alice": 1, "bob": 1},
        ),
        "wipe_disk": row(
            calls=2,
            denied=1,
            auto=1,
            auto_by={"grant": 0, "judge": 0, "shadow": 1},
            shadow_would={"ask": 0, "deny": 1},
        ),
    },
    "suggestions": [DELETE_FILE_HINT, SEND_EMAIL_HINT],
}
"""The statistics of the whole day."""


def stats(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["stats", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_numbers_of_a_scripted_day(
    kind: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    db = request.getfixturevalue(f"{kind}_day")
    code, out, err = stats(capsys, "--db", db, "--until", UNTIL, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == DAY


def test_since_counts_the_calls_from_then_on(
    sqlite_day: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = stats(
        capsys, "--db", sqlite_day, "--since", "2026-03-02T12:25:00Z", "--until", UNTIL, "--json"
    )
    assert code == 0
    assert json.loads(out) == {
        "since": "2026-03-02T12:25:00Z",
        "until": UNTIL,
        "tools": {
            "delete_file": row(
                calls=2,
                auto=2,
                auto_by={"grant": 0, "judge": 0, "shadow": 2},
                shadow_would={"ask": 2, "deny": 0},
            ),
            "pay_invoice": DAY["tools"]["pay_invoice"],  # type: ignore[index]
            "send_sms": row(calls=2, auto=2, auto_by={"grant": 2, "judge": 0, "shadow": 0}),
            "wipe_disk": DAY["tools"]["wipe_disk"],  # type: ignore[index]
        },
        "suggestions": [],
    }


def test_the_text_report(sqlite_day: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = stats(capsys, "--db", sqlite_day, "--until", UNTIL)
    assert code == 0
    assert out == (
        "Every recorded call up to 2026-03-02T18:00:00Z\n"
        "\n"
        "tool         calls  asked  approved  edited  rejected  expired  cancelled  denied  auto"
        "  median   p90\n"
        "delete_file      7      5         0       0         5        0          0       0     2"
        "     25s   45s\n"
        "pay_invoice      2      0         0       0         0        0          0       0     2"
        "       -     -\n"
        "send_email       5      5         5       0         0        0          0       0     0"
        "     30s  300s\n"
        "send_sms         3      1         1       0         0        0          0       0     2"
        "      5s    5s\n"
        "transfer         4      4         1       1         0        1          1       0     0"
        "     10s   12s\n"
        "wipe_disk        2      0         0       0         0        0          0       1     1"
        "       -     -\n"
        "\n"
        "Who decided:\n"
        "  delete_file  carol 5\n"
        "  send_email   alice 3, bob 2\n"
        "  send_sms     alice 1\n"
        "  transfer     alice 1, bob 1\n"
        "\n"
        "Ran without a person:\n"
        "  delete_file  shadow 2 (would ask 2)\n"
        "  pay_invoice  judge 2\n"
        "  send_sms     grant 2\n"
        "  wipe_disk    shadow 1 (would deny 1)\n"
        "\n"
        "Suggestions:\n"
        f"  {DELETE_FILE_HINT}\n"
        f"  {SEND_EMAIL_HINT}\n"
    )


def test_mistakes_are_one_line_and_change_nothing(
    tmp_path: Path, sqlite_day: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.sqlite3"
    assert stats(capsys, "--db", str(missing)) == (
        2,
        "",
        (
            f"error: --db {missing}: no such database file; give the --db of toolguard serve or"
            " mcp-proxy\n"
        ),
    )
    assert not missing.exists()
    assert stats(capsys, "--db", sqlite_day, "--since", "yesterday") == (
        2,
        "",
        (
            "error: --since: expected a date (2026-11-01), a time (2026-11-01T09:00:00Z) or a"
            " number of days (30d), got 'yesterday'\n"
        ),
    )
    assert stats(capsys, "--db", str(tmp_path)) == (
        2,
        "",
        (
            f"error: --db {tmp_path}: no such database file; give the --db of toolguard serve or"
            " mcp-proxy\n"
        ),
    )


def day_app(db: str, *, gateway: bool = False) -> Any:
    """The day's database served as ``toolguard serve`` (or the gateway) serves it, with sign-in."""
    chat = ReviewedChat(ScriptedModel([]), [], store=SQLiteStore(db))
    auth = HeaderAuth("X-Forwarded-User")
    if gateway:
        return gateway_app(chat, auth=auth, allow_hosts=["*"])
    return create_app(chat, auth=auth)


@pytest.mark.parametrize("gateway", [False, True])
def test_the_route_needs_sign_in_and_answers_the_same_numbers(
    sqlite_day: str, *, gateway: bool
) -> None:
    with serve_in_thread(day_app(sqlite_day, gateway=gateway)) as url:
        anonymous = httpx.get(f"{url}/hitl/stats", timeout=5)
        assert anonymous.status_code == 401
        signed_in = {"X-Forwarded-User": "alice"}
        answer = httpx.get(f"{url}/hitl/stats?until={UNTIL}", headers=signed_in, timeout=5)
        assert (answer.status_code, answer.json()) == (200, DAY)
        wrong = httpx.get(f"{url}/hitl/stats?since=soon", headers=signed_in, timeout=5)
        assert (wrong.status_code, wrong.json()) == (
            400,
            {
                "detail": "since: expected a date (2026-11-01), a time (2026-11-01T09:00:00Z) or a"
                " number of days (30d), got 'soon'"
            },
        )


def test_the_route_counts_only_the_threads_the_reader_may_read(sqlite_day: str) -> None:
    """The chat's access hook ("read") keeps a reviewer's statistics to the threads they may
    read: bob may not read the threads of deletions, so their numbers are not his to see."""

    def access(actor: str | None, state: Any, operation: str) -> bool:
        return actor != "bob" or not any(e.tool == "delete_file" for e in state.audit)

    chat = ReviewedChat(ScriptedModel([]), [], store=SQLiteStore(sqlite_day), access=access)
    app = create_app(chat, auth=HeaderAuth("X-Forwarded-User"))
    with serve_in_thread(app) as url:
        answers = {
            who: httpx.get(
                f"{url}/hitl/stats?until={UNTIL}", headers={"X-Forwarded-User": who}, timeout=5
            ).json()
            for who in ("alice", "bob")
        }
    assert answers["alice"] == DAY
    tools = dict(DAY["tools"])  # type: ignore[call-overload]
    del tools["delete_file"]
    assert answers["bob"] == {**DAY, "tools": tools, "suggestions": [SEND_EMAIL_HINT]}
