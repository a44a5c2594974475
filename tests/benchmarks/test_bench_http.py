"""Smoke test of benchmarks/bench_http.py: every row runs and is checked (no timing checks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_http.py"
QUICK = {"batches": 2, "requests": 5, "warmup": 1}
HTTP_ROWS = [
    ("bare ping", "bare FastAPI", "GET /bare/ping -> {ok: true}"),
    ("toolguard ping", "toolguard", "GET /hitl/ping -> {ok: true} (create_app's middleware)"),
    ("bare chat", "bare FastAPI", "POST /bare/chat {message} -> pydantic model"),
    ("toolguard chat", "toolguard", "POST /hitl/chat {message} -> reply (MemoryStore)"),
    ("bare thread", "bare FastAPI", "GET /bare/threads/{id} -> the same JSON, ready-made"),
    ("toolguard thread", "toolguard", "GET /hitl/threads/{id}, a paused thread"),
]
DIRECT_ROWS = [
    ("direct chat", "direct", "await chat.send_message(text), no HTTP"),
    ("direct thread", "direct", "(await chat.get_thread(id)).model_dump_json(), no HTTP"),
]


def _run(*options: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick run (ASGI and TCP) shared by the tests of this module."""
    return _run()


def _shape(row: dict[str, Any]) -> tuple[str, str, str, str, bool]:
    timings = [row["median_us"], row["min_us"], *row["batches_us"]]
    assert len(row["batches_us"]) == QUICK["batches"]
    assert all(t > 0 for t in timings), row
    has_cpu = row["server_cpu_median_us"] is not None
    return row["transport"], row["row"], row["framework"], row["what"], has_cpu


def test_quick_run_has_every_row_over_asgi_tcp_and_in_process(report: dict[str, Any]) -> None:
    """ASGI rows, the direct calls, then the TCP rows (with the server's CPU time)."""
    assert sorted(report) == [
        "benchmark",
        "command",
        "date",
        "environment",
        "overheads",
        "rows",
        "settings",
        "verified",
    ]
    assert (report["benchmark"], report["settings"], report["verified"]) == (
        "bench_http",
        QUICK,
        True,
    )
    assert [_shape(r) for r in report["rows"]] == [
        *(("ASGI", *row, False) for row in HTTP_ROWS),
        *(("in process", *row, False) for row in DIRECT_ROWS),
        *(("TCP", *row, True) for row in HTTP_ROWS),
    ]


def test_overhead_is_toolguard_minus_bare_minus_direct(report: dict[str, Any]) -> None:
    """Each overhead row is computed from the medians of the rows it names."""
    by = {(r["transport"], r["row"]): r for r in report["rows"]}
    expected = []
    for transport in ("ASGI", "TCP"):
        for route in ("ping", "chat", "thread"):
            ours, bare = by[transport, f"toolguard {route}"], by[transport, f"bare {route}"]
            inner = by.get(("in process", f"direct {route}"))
            direct = inner["median_us"] if inner else 0.0
            entry = {
                "transport": transport,
                "route": route,
                "toolguard_us": ours["median_us"],
                "bare_us": bare["median_us"],
                "direct_us": direct,
                "overhead_us": round(ours["median_us"] - bare["median_us"] - direct, 1),
                "overhead_of_best_us": round(
                    ours["min_us"] - bare["min_us"] - (inner["min_us"] if inner else 0.0), 1
                ),
            }
            if transport == "TCP":
                entry["server_cpu_overhead_us"] = round(
                    ours["server_cpu_median_us"] - bare["server_cpu_median_us"] - direct, 1
                )
            expected.append(entry)
    assert report["overheads"] == expected


def test_no_tcp_option_measures_in_this_process_only() -> None:
    """`--no-tcp` starts no server: ASGI and direct rows only."""
    rows = _run("--no-tcp")["rows"]
    assert [(r["transport"], r["row"]) for r in rows] == [
        *(("ASGI", row[0]) for row in HTTP_ROWS),
        *(("in process", row[0]) for row in DIRECT_ROWS),
    ]
