"""Smoke test of benchmarks/load_http.py: a tiny real-TCP run verifies every conversation.

No timing checks: timings are only required to be positive numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolguard

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "load_http.py"
POSTGRES_DSN = os.environ.get("TOOLGUARD_POSTGRES_DSN") or None
STORES = ["sqlite", *(["postgres"] if POSTGRES_DSN else [])]
QUICK = {"concurrency": 4, "conversations": 12, "warmup_conversations": 4}
TIMING_KEYS = (
    "wall_s",
    "conversations_per_s",
    "requests_per_s",
    "server_cpu_s",
    "server_cpu_per_request_ms",
    "server_cpu_share",
    "client_cpu_s",
    "client_cpu_per_request_ms",
    "client_cpu_share",
)
REFERENCE_TIMING_KEYS = (
    "wall_s",
    "requests_per_s",
    "server_cpu_per_request_ms",
    "server_cpu_share",
    "client_cpu_per_request_ms",
    "client_cpu_share",
)
LATENCY_KEYS = ["count", "max_ms", "mean_ms", "p50_ms", "p90_ms", "p99_ms"]


def _run(*options: str) -> subprocess.CompletedProcess[str]:
    """Run the load test with ``options`` (the environment's PostgreSQL DSN included, if any)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def _latencies(summary: dict[str, Any], count: int) -> None:
    """A latency summary of ``count`` requests with ordered, positive figures."""
    assert sorted(summary) == LATENCY_KEYS
    assert summary["count"] == count
    assert 0 < summary["p50_ms"] <= summary["p90_ms"] <= summary["p99_ms"] <= summary["max_ms"]
    assert summary["mean_ms"] > 0


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick JSON run shared by the tests of this module."""
    done = _run("--quick", "--json", "--timeout", "100")
    assert (done.returncode, done.stderr) == (0, "")
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_quick_run_verifies_every_conversation_in_every_store(report: dict[str, Any]) -> None:
    """`--quick --json`: one verified row per store; every tool ran exactly once."""
    assert sorted(report) == [
        "benchmark",
        "command",
        "date",
        "environment",
        "error",
        "reference",
        "rows",
        "settings",
        "verified",
    ]
    assert (
        report["benchmark"],
        report["command"],
        report["settings"],
        report["error"],
        report["verified"],
    ) == (
        "load_http",
        "python benchmarks/load_http.py --quick --json --timeout 100",
        {**QUICK, "timeout_s": 100.0, "quick": True, "stores": STORES, "workers": 1},
        None,
        True,
    )
    assert report["environment"]["toolguard"] == toolguard.__version__
    rows = []
    for row in report["rows"]:
        assert all(row[key] > 0 for key in TIMING_KEYS), row
        assert sorted(row["latency"]) == ["chat", "conversation", "review", "thread"]
        for summary in row["latency"].values():
            _latencies(summary, 12)
        rows.append({k: v for k, v in row.items() if k not in (*TIMING_KEYS, "latency")})
    assert rows == [
        {
            "store": store,
            **QUICK,
            "requests": 36,
            "verified_conversations": 16,
            "tool_runs": 16,
            "tool_runs_exactly_once": True,
            "failure_count": 0,
            "failures": [],
            "verified": True,
        }
        for store in STORES
    ]


def test_quick_run_measures_the_reference_request(report: dict[str, Any]) -> None:
    """The reference (GET /bench/ping, no toolguard code) gets as many requests, none failing."""
    reference = dict(report["reference"])
    _latencies(reference.pop("latency"), 36)
    timings = [reference.pop(key) for key in REFERENCE_TIMING_KEYS]
    assert all(t > 0 for t in timings), timings
    assert reference == {"request": "GET /bench/ping", "requests": 36, "failures": 0}


def test_two_worker_processes_share_the_store_and_run_each_tool_once() -> None:
    """`--workers 2`: two server processes on one socket and store; every tool ran once."""
    done = _run("--quick", "--json", "--timeout", "100", "--workers", "2")
    assert (done.returncode, done.stderr) == (0, "")
    report = json.loads(done.stdout)
    assert (report["settings"]["workers"], report["verified"]) == (2, True)
    assert [
        (r["store"], r["verified_conversations"], r["tool_runs"], r["tool_runs_exactly_once"])
        for r in report["rows"]
    ] == [(store, 16, 16, True) for store in STORES]
    assert all(r["server_cpu_s"] >= 0 for r in report["rows"])


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("--workers=0", "--workers must be between 1 and 16"),
        ("--concurrency=0", "--concurrency must be between 1 and 512"),
        ("--conversations=100001", "--conversations must be between 1 and 100000"),
        ("--timeout=0", "--timeout must be more than 0 and at most 3600 seconds"),
    ],
)
def test_out_of_bounds_options_are_refused_before_anything_starts(option: str, error: str) -> None:
    """Unbounded settings are a usage error (exit status 2), and nothing runs."""
    done = _run(option)
    assert (done.returncode, done.stdout, done.stderr.splitlines()[-1]) == (
        2,
        "",
        f"load_http.py: error: {error}",
    )
