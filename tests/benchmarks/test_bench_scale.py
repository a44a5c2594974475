"""Smoke test of benchmarks/bench_scale.py: it runs, checks its cycles and reports (no timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_scale.py"


def test_quick_run_reports_every_store_and_the_memory_per_thread() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLGUARD_POSTGRES_DSN"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
        env=env,
    )
    assert (done.returncode, done.stderr) == (0, "")
    report: dict[str, Any] = json.loads(done.stdout)
    assert sorted(report) == ["benchmark", "date", "environment", "length", "memory", "settings"]
    assert report["settings"] == {"turns": 40, "window": 10, "threads": 500}
    assert [row["store"] for row in report["length"]] == ["memory", "sqlite"]
    for row in report["length"]:
        assert row["turns"] == 40
        assert row["first_us"] > 0
        assert row["last_us"] > 0
        assert row["ratio"] == round(row["last_us"] / row["first_us"], 2)
        assert row["paired_ratio"] > 0
        assert row["status"] == ("PASS" if row["paired_ratio"] <= 1.5 else "MISS")
    assert report["length"][0]["sqlite_bytes"] is None
    assert report["length"][1]["sqlite_bytes"] > 0
    memory = report["memory"]
    assert memory["threads"] == 500
    assert memory["bytes_per_thread"] > 0
    assert memory["mib_for_10000"] == round(memory["bytes_per_thread"] * 10_000 / 2**20, 1)
    assert memory["status"] == ("PASS" if memory["mib_for_10000"] <= 30 else "MISS")
