"""Smoke test of benchmarks/bench_core.py: it runs, and reports every row (no timing checks)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import toolguard

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_core.py"

# label -> (unit, target text in the table); the target is "" for rows without one.
EXPECTED_ROWS: dict[str, tuple[str, str]] = {
    "raw function call": ("ns", ""),
    "guarded call, allowed by when= (amount=5)": ("ns", ""),
    "guard overhead per allowed call": ("µs", "<= 2 µs"),
    "guarded call raising ApprovalRequiredError": ("µs", ""),
    "validate_decisions, 1 action": ("µs", ""),
    "validate_decisions, 3 actions": ("µs", ""),
    "pause+resume, async tool": ("µs", "<= 100 µs"),
    "pause+resume, sync tool in worker thread": ("µs", "<= 100 µs"),
    "pause+resume, sync tool, sync_in_thread=False": ("µs", "<= 100 µs"),
    "pause+resume, async tool, JSON round trip of state": ("µs", ""),
    "reference: anyio.to_thread.run_sync(no-op)": ("µs", ""),
    "classify 10,000 names, fresh Classifier": ("ms", "<= 50 ms"),
    "classify 10,000 names again, same Classifier": ("ms", "<= 50 ms"),
    "classify 10,000 lookups of 2,000 cached names": ("ms", ""),
}


def _run(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def _table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's data rows, by label; cells are separated by two or more spaces."""
    lines = stdout.splitlines()
    dashes = next(i for i, line in enumerate(lines) if line.startswith("----"))
    rows = {}
    for line in lines[dashes + 1 :]:
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1:]
    return rows


def test_quick_run_prints_every_row_with_its_unit_target_and_verdict() -> None:
    """`bench_core.py --quick` exits 0 and prints every row with its unit, target and verdict."""
    done = _run()
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"toolguard {toolguard.__version__} | CPython ")
    assert lines[0].endswith(" | quick mode")
    assert lines[3].split() == ["benchmark", "median", "best", "unit", "target", "result"]
    rows = _table_rows(done.stdout)
    assert list(rows) == list(EXPECTED_ROWS)
    seen: dict[str, tuple[str, str]] = {}
    for label, cells in rows.items():
        _median, _best, unit, *rest = cells
        if rest:
            target, verdict = rest
            assert verdict in ("PASS", "MISS"), f"{label}: {verdict!r}"
        else:
            target = ""
        seen[label] = (unit, target)
    assert seen == EXPECTED_ROWS


def test_quick_json_output_lists_every_row_with_its_target() -> None:
    """`--quick --json` prints one JSON object: environment, settings and one entry per row."""
    done = _run("--json")
    assert (done.returncode, done.stderr) == (0, "")
    report: dict[str, Any] = json.loads(done.stdout)
    assert sorted(report) == ["environment", "mode", "rows", "settings"]
    assert report["mode"] == "quick"
    assert report["environment"]["toolguard"] == toolguard.__version__
    assert sorted(report["environment"]) == [
        "implementation",
        "machine",
        "platform",
        "python",
        "toolguard",
    ]
    assert report["settings"] == {
        "batches": 3,
        "batch_ns": 1_000_000,
        "cycles": 10,
        "classify_batches": 1,
    }
    shapes = [(row["label"], row["unit"], row["target"], sorted(row)) for row in report["rows"]]
    keys = ["best", "label", "median", "status", "target", "unit"]
    targets = {"<= 2 µs": 2.0, "<= 100 µs": 100.0, "<= 50 ms": 50.0, "": None}
    assert shapes == [
        (label, unit, targets[target], keys) for label, (unit, target) in EXPECTED_ROWS.items()
    ]
    statuses = {row["label"]: row["status"] for row in report["rows"]}
    for label, (_unit, target) in EXPECTED_ROWS.items():
        allowed = (None,) if target == "" else ("PASS", "MISS")
        assert statuses[label] in allowed, f"{label}: {statuses[label]!r}"
