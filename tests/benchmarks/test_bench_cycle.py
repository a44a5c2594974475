"""Smoke test of benchmarks/bench_cycle.py: it runs and verifies every cycle (no timing checks)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_cycle.py"

HAS_LANGCHAIN = all(
    importlib.util.find_spec(name) is not None
    for name in ("langchain", "langgraph", "langgraph.checkpoint.sqlite", "aiosqlite")
)

HAS_OPENAI = importlib.util.find_spec("openai") is not None
HAS_PEERS = HAS_OPENAI and all(
    importlib.util.find_spec(name) is not None for name in ("pydantic_ai", "agents")
)

QUICK = {
    "batches": 2,
    "toolguard_cycles": 10,
    "langchain_cycles": 3,
    "peer_cycles": 3,
    "warmup": 1,
}
REPORT_KEYS = [
    "benchmark",
    "command",
    "date",
    "environment",
    "framework_targets",
    "langchain",
    "langchain_calling",
    "openai_ratios",
    "peer_ratios",
    "peers",
    "ratios",
    "rows",
    "settings",
    "targets",
    "verified",
]
TIMING_KEYS = ("median_us", "min_us", "batches_us", "cpu_median_us")


def _counts(cycles: int) -> dict[str, Any]:
    """What a verified row of ``cycles`` cycles per batch reports, besides its timings."""
    total = QUICK["batches"] * cycles
    return {
        "batches": QUICK["batches"],
        "cycles": total,
        "pauses": total,
        "tool_runs": total,
        "model_calls": 2 * total,
        "verified": True,
    }


TOOLGUARD_ROWS = [
    {
        "framework": "toolguard",
        "store": "memory",
        "variant": "await send_message + submit_review, async tool",
        "main": True,
        **_counts(QUICK["toolguard_cycles"]),
    },
    {
        "framework": "toolguard",
        "store": "memory",
        "variant": "await send_message + submit_review, sync tool (worker thread)",
        "main": False,
        **_counts(QUICK["toolguard_cycles"]),
    },
    {
        "framework": "toolguard",
        "store": "memory",
        "variant": "await send_message + submit_review, sync tool, in_thread=False (on the loop)",
        "main": False,
        **_counts(QUICK["toolguard_cycles"]),
    },
    {
        "framework": "toolguard",
        "store": "sqlite",
        "variant": "await send_message + submit_review, async tool",
        "main": True,
        **_counts(QUICK["toolguard_cycles"]),
    },
]

OPENAI_ROWS = [
    {
        "framework": "bare openai loop",
        "store": "memory",
        "variant": "AsyncOpenAI on a mock transport, hand-written loop, state in a dict",
        "main": True,
        **_counts(QUICK["toolguard_cycles"]),
    },
    *(
        {
            "framework": "toolguard+openai",
            "store": store,
            "variant": "ReviewedChat + OpenAIChatModel on the same mock transport",
            "main": True,
            **_counts(QUICK["toolguard_cycles"]),
        }
        for store in ("memory", "sqlite")
    ),
]

PEER_ROWS = [
    {
        "framework": "Pydantic AI",
        "store": "memory",
        "variant": "run -> DeferredToolRequests; run(message_history, DeferredToolResults)",
        "main": True,
        **_counts(QUICK["peer_cycles"]),
    },
    {
        "framework": "OpenAI Agents SDK",
        "store": "memory",
        "variant": "Runner.run -> interruptions; state.approve; Runner.run(agent, state)",
        "main": True,
        **_counts(QUICK["peer_cycles"]),
    },
]

LANGCHAIN_VARIANTS = [
    ("memory", "invoke, InMemorySaver"),
    ("memory", "ainvoke, InMemorySaver"),
    ("sqlite", "invoke, SqliteSaver"),
    ("sqlite", "invoke, SqliteSaver + synchronous=NORMAL"),
    ("sqlite", "ainvoke, AsyncSqliteSaver"),
]


def _run(*options: str) -> dict[str, Any]:
    """Run the benchmark with ``--quick --json``; its parsed report."""
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


def _without_timings(row: dict[str, Any]) -> dict[str, Any]:
    """A row without its timings, after checking that they are positive numbers."""
    assert len(row["batches_us"]) == QUICK["batches"]
    timings = (row["median_us"], row["min_us"], row["cpu_median_us"], *row["batches_us"])
    assert all(t > 0 for t in timings)
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """One quick run shared by the tests of this module."""
    return _run()


def test_toolguard_rows_are_present_and_every_cycle_was_verified(report: dict[str, Any]) -> None:
    """The quick JSON report has the four toolguard rows, each with every cycle verified."""
    assert sorted(report) == REPORT_KEYS
    assert (report["benchmark"], report["settings"], report["verified"]) == (
        "bench_cycle",
        QUICK,
        True,
    )
    rows = [_without_timings(r) for r in report["rows"] if r["framework"] == "toolguard"]
    assert rows == TOOLGUARD_ROWS


def test_openai_rows_compare_toolguard_with_the_bare_client_loop(report: dict[str, Any]) -> None:
    """The bare-client loop and toolguard + OpenAIChatModel run verified cycles; ratios by store."""
    rows = [
        _without_timings(r)
        for r in report["rows"]
        if r["framework"] in ("bare openai loop", "toolguard+openai")
    ]
    assert rows == OPENAI_ROWS
    bare = next(r for r in report["rows"] if r["framework"] == "bare openai loop")
    ours = {r["store"]: r for r in report["rows"] if r["framework"] == "toolguard+openai"}
    targets = {"memory": 1.15, "sqlite": 1.30}
    for ratio in report["openai_ratios"]:
        row = ours[ratio["store"]]
        assert ratio["ratio"] == round(row["median_us"] / bare["median_us"], 3)
        pairs = sorted(a / b for a, b in zip(row["batches_us"], bare["batches_us"], strict=True))
        assert len(pairs) == len(bare["batches_us"]) > 0
        middle = len(pairs) // 2
        paired = pairs[middle] if len(pairs) % 2 else (pairs[middle - 1] + pairs[middle]) / 2
        assert ratio["paired_ratio"] == round(paired, 3)
        assert ratio["target"] == targets[ratio["store"]]
        assert ratio["status"] == ("PASS" if paired <= ratio["target"] else "MISS")
    assert [r["store"] for r in report["openai_ratios"]] == ["memory", "sqlite"]
    main = {r["store"]: r for r in report["rows"] if r["framework"] == "toolguard" and r["main"]}
    assert report["framework_targets"] == [
        {
            "store": store,
            "median_us": main[store]["median_us"],
            "min_us": main[store]["min_us"],
            "target_us": target,
            "status": "PASS" if main[store]["median_us"] <= target else "MISS",
        }
        for store, target in (("memory", 150.0), ("sqlite", 500.0))
    ]


def test_peer_rows_run_verified_cycles_next_to_toolguard_openai(report: dict[str, Any]) -> None:
    """Pydantic AI and the Agents SDK run verified cycles after the openai rows; ratios to ours."""
    if not HAS_PEERS:
        pytest.skip("pydantic-ai-slim / openai-agents not installed")
    assert report["peers"] == ["Pydantic AI", "OpenAI Agents SDK"]
    frameworks = [r["framework"] for r in report["rows"]]
    assert frameworks[4:9] == [
        "bare openai loop",
        "toolguard+openai",
        "toolguard+openai",
        "Pydantic AI",
        "OpenAI Agents SDK",
    ]
    rows = [_without_timings(r) for r in report["rows"] if r["framework"] in report["peers"]]
    assert rows == PEER_ROWS
    by_name = {r["framework"]: r for r in report["rows"]}
    ours = next(
        r for r in report["rows"] if r["framework"] == "toolguard+openai" and r["store"] == "memory"
    )
    bare = by_name["bare openai loop"]
    assert report["peer_ratios"] == [
        {
            "framework": name,
            "peer_us": by_name[name]["median_us"],
            "toolguard_us": ours["median_us"],
            "bare_us": bare["median_us"],
            "ratio": round(by_name[name]["median_us"] / ours["median_us"], 2),
            "ratio_of_min": round(by_name[name]["min_us"] / ours["min_us"], 2),
            "ratio_of_cpu": round(by_name[name]["cpu_median_us"] / ours["cpu_median_us"], 2),
            "over_bare": round(by_name[name]["median_us"] / bare["median_us"], 2),
        }
        for name in ("Pydantic AI", "OpenAI Agents SDK")
    ]


def test_no_peers_option_leaves_the_peers_out() -> None:
    """`--no-peers` keeps toolguard's and the openai rows, without Pydantic AI or the Agents SDK."""
    report = _run("--no-langchain", "--no-peers")
    rows = [_without_timings(r) for r in report["rows"]]
    assert rows == TOOLGUARD_ROWS + (OPENAI_ROWS if HAS_OPENAI else [])
    assert (report["peers"], report["peer_ratios"], report["verified"]) == ([], [], True)


def test_langchain_rows_are_verified_and_compared_per_store(report: dict[str, Any]) -> None:
    """With LangChain installed, its five variants run verified cycles and get a ratio each."""
    if not HAS_LANGCHAIN:
        pytest.skip("langchain/langgraph not installed (the bench extra)")
    assert report["langchain"] is True
    rows = [_without_timings(r) for r in report["rows"] if r["framework"] == "LangChain"]
    assert rows == [
        {
            "framework": "LangChain",
            "store": store,
            "variant": variant,
            "main": True,
            **_counts(QUICK["langchain_cycles"]),
        }
        for store, variant in LANGCHAIN_VARIANTS
    ]
    targets = {"memory": 20.0, "sqlite": 5.0}
    assert [(r["store"], r["langchain_variant"], r["target"]) for r in report["ratios"]] == [
        (store, variant, targets[store]) for store, variant in LANGCHAIN_VARIANTS
    ]
    for ratio in report["ratios"]:
        expected = "PASS" if ratio["ratio"] >= ratio["target"] else "MISS"
        assert ratio["status"] == expected
    worst = {
        store: min((r for r in report["ratios"] if r["store"] == store), key=lambda r: r["ratio"])
        for store in targets
    }
    assert report["targets"] == [
        {
            "store": store,
            "target": targets[store],
            "ratio": worst[store]["ratio"],
            "against": worst[store]["langchain_variant"],
            "status": worst[store]["status"],
        }
        for store in ("memory", "sqlite")
    ]


def test_no_langchain_option_measures_toolguard_only() -> None:
    """`--no-langchain` reports the verified toolguard rows and no comparison."""
    report = _run("--no-langchain", "--no-openai")
    assert [_without_timings(r) for r in report["rows"]] == TOOLGUARD_ROWS
    assert (
        report["langchain"],
        report["langchain_calling"],
        report["ratios"],
        report["targets"],
        report["openai_ratios"],
        report["peers"],
        report["peer_ratios"],
        report["verified"],
    ) == (False, None, [], [], [], [], [], True)
