"""Smoke test of benchmarks/bench_gateway.py: tiny counts, real processes, every call answered.

No timing checks: a timing is only required to be a positive number.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_gateway.py"


def test_a_tiny_run_prints_the_hop_and_the_load_run_with_every_held_call_run_once() -> None:
    tiny = ["--calls", "5", "--clients", "2", "--reads", "3", "--held", "2"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *tiny],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    hop, load = (json.loads(line) for line in done.stdout.splitlines())
    assert sorted(hop["hop"]) == ["calls", "direct_median_ms", "gateway_median_ms", "ratio"]
    assert hop["hop"]["calls"] == 5
    assert all(hop["hop"][key] > 0 for key in ("direct_median_ms", "gateway_median_ms", "ratio"))
    figures = load["load"]
    timings = {key: figures.pop(key) for key in ("read_p50_ms", "read_p99_ms", "seconds")}
    assert all(value > 0 for value in timings.values())
    assert figures == {
        "clients": 2,
        "reads_per_client": 3,
        "read_calls": 6,
        "held_calls": 2,
        "held_answered": 2,
        "held_runs_upstream": 2,
        "every_held_call_once": True,
        "errors": 0,
        "first_error": None,
    }
