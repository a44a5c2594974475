"""Smoke test of benchmarks/bench_versus.py: another commit's toolguard against this one."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_versus.py"

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_versus  # noqa: E402


def _git_available() -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, check=False, text=True
    )
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _git_available(), reason="needs the git repository")


def test_the_base_package_is_the_commit_s_own_renamed(tmp_path: Path) -> None:
    commit = bench_versus.extract_base("HEAD", tmp_path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert commit == head
    package = tmp_path / "toolguard_base"
    assert not (tmp_path / "toolguard").exists()
    committed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD", "toolguard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(
        str(p.relative_to(tmp_path)) for p in package.rglob("*") if p.is_file()
    ) == sorted(name.replace("toolguard/", "toolguard_base/", 1) for name in committed)
    leftovers = [
        f"{source.name}: {line}"
        for source in package.rglob("*.py")
        for line in source.read_text(encoding="utf-8").splitlines()
        if re.search(r"\b(from|import) toolguard\b(?!_base)", line)
    ]
    assert leftovers == []


def _json_report(*args: str) -> dict[str, Any]:
    """Run the script against HEAD with ``args`` and ``--json``; its report (it must succeed)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "HEAD", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_quick_run_compares_both_stores() -> None:
    report = _json_report("--cycles", "2", "--rounds", "2")
    assert sorted(report) == [
        "base_commit",
        "benchmark",
        "cycles",
        "date",
        "environment",
        "openai",
        "rounds",
        "rows",
        "turns",
    ]
    assert (report["benchmark"], report["cycles"], report["rounds"]) == ("bench_versus", 2, 2)
    assert report["turns"] == 0  # a new thread per cycle
    assert report["openai"] is False
    # PostgreSQL joins by default when a DSN is set (its tables are dropped at the end).
    with_postgres = bool(os.environ.get("TOOLGUARD_POSTGRES_DSN"))
    assert [row["store"] for row in report["rows"]] == ["memory", "sqlite"] + (
        ["postgres"] if with_postgres else []
    )
    for row in report["rows"]:
        assert row["base_min_us"] <= row["base_median_us"]
        assert row["new_min_us"] <= row["new_median_us"]
        assert row["ratio"] > 0


@pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="needs openai")
def test_quick_openai_run_adds_the_bare_loop() -> None:
    report = _json_report("--stores", "memory", "--openai", "--cycles", "2", "--rounds", "3")
    assert report["openai"] is True
    [row] = report["rows"]
    assert sorted(row) == [
        "bare_median_us",
        "base_median_us",
        "base_min_us",
        "base_over_bare",
        "new_median_us",
        "new_min_us",
        "new_over_bare",
        "ratio",
        "store",
    ]
    assert row["store"] == "memory"
    assert row["bare_median_us"] > 0
    assert row["base_over_bare"] > 0
    assert row["new_over_bare"] > 0
    text = bench_versus.report({**report, "base_commit": "0" * 40})
    assert text.splitlines()[-4:-1] == [
        "Through OpenAIChatModel on the mock transport; the bare loop in the same rounds:",
        "store   bare median µs  base/bare (rounds)  new/bare (rounds)",
        "------  --------------  ------------------  -----------------",
    ]


def test_an_unknown_revision_fails_with_git_s_message() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "no-such-revision-xyz", "--cycles", "1", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        "bench_versus.py: error: cannot read toolguard at 'no-such-revision-xyz':"
        " fatal: Needed a single revision"
    )


def test_bad_stores_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_versus.main(["HEAD", "--stores", "memory,redis"])
    assert exc.value.code == 2
    monkeypatch.delenv("TOOLGUARD_POSTGRES_DSN", raising=False)
    with pytest.raises(SystemExit) as exc:
        bench_versus.main(["HEAD", "--stores", "postgres"])
    assert exc.value.code == 2


def test_the_latency_proxy_passes_bytes_both_ways(tmp_path: Path) -> None:
    """benchmarks/latency_proxy.py relays a conversation to its target, unchanged."""
    import socket
    import threading

    def free_port() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    echo = socket.socket()
    echo.bind(("127.0.0.1", 0))
    echo.listen()
    target = echo.getsockname()[1]

    def serve_echo() -> None:
        conn, _ = echo.accept()
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())

    threading.Thread(target=serve_echo, daemon=True).start()
    listen = free_port()
    proxy = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "latency_proxy.py"),
            "--listen",
            str(listen),
            "--target",
            str(target),
            "--delay-ms",
            "1",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proxy.stdout is not None
        assert proxy.stdout.readline() == "ready\n"
        with socket.create_connection(("127.0.0.1", listen), timeout=10) as client:
            client.sendall(b"hello world")
            received = b""
            while len(received) < len(b"hello world"):
                received += client.recv(65536)
        assert received == b"HELLO WORLD"
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        if proxy.stdout is not None:
            proxy.stdout.close()
        echo.close()


def test_a_revision_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    """``--output=...`` and the like never reach git as options."""
    with pytest.raises(ValueError, match="a revision cannot start with '-': '--output=x'"):
        bench_versus.extract_base("--output=x", tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit) as exc:
        bench_versus.main(["--", "-HEAD", "--stores", "memory"])
    assert exc.value.code == 2


def test_turns_measures_cycles_in_one_long_thread() -> None:
    """``--turns N``: every subject's cycles go on in one thread that held N cycles first."""
    report = _json_report("--turns", "3", "--cycles", "1", "--rounds", "1", "--stores", "memory")
    assert (report["turns"], [row["store"] for row in report["rows"]]) == (3, ["memory"])
    assert report["rows"][0]["ratio"] > 0
