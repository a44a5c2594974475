"""Scale: the cost of a turn as one conversation grows, and the memory of paused threads.

Two measurements, side by side in one run:

* **Thread length.** One conversation on each store (memory, SQLite and,
  when ``TOOLGUARD_POSTGRES_DSN`` is set, PostgreSQL) goes through N approval
  cycles (message -> ``send_email`` proposed -> pause -> approve -> tool
  runs -> reply). The time of each cycle is recorded; the report gives the
  median of the first cycles and of the cycles around turn N, and their
  ratio (target: turn 1,000 costs at most 1.5x turn 1). Bytes written by
  SQLite (the file plus its WAL) are reported too.
* **Memory.** N threads are paused (each with one pending ``send_email``)
  in one ``MemoryStore``; the report gives the bytes traced by
  ``tracemalloc`` per paused thread and the total for 10,000 threads
  (target: at most 30 MiB).

Run from the repository root::

    .venv/bin/python benchmarks/bench_scale.py             # 1,000 turns, 10,000 threads
    .venv/bin/python benchmarks/bench_scale.py --quick     # 40 turns, 500 threads (smoke test)
    .venv/bin/python benchmarks/bench_scale.py --json      # machine-readable output

The model is scripted, so only toolguard's own work is measured. Every
cycle is checked: it paused before the tool ran, ran the tool once after
the approval and returned the reply.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import anyio

import toolguard

EMAIL_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
USER_TEXT = "Mail Alice that the meeting is at 10."
APPROVE = [{"type": "approve"}]

LENGTH_TARGET = 1.5
"""Most (cost of the last turns) / (cost of the first turns) wanted."""
MEMORY_TARGET_MIB = 30.0
"""Most MiB wanted for 10,000 paused threads in a MemoryStore."""


@dataclass(frozen=True)
class Settings:
    """How much to measure."""

    turns: int
    """Approval cycles in the one long conversation, per store."""
    window: int
    """Cycles whose median is taken at the start and at the end."""
    threads: int
    """Paused threads for the memory measurement."""


FULL = Settings(turns=1_000, window=50, threads=10_000)
QUICK = Settings(turns=40, window=10, threads=500)


def _fail(what: str) -> NoReturn:
    msg = f"bench_scale: the cycle is broken: {what}"
    raise SystemExit(msg)


class _Model:
    """Proposes ``send_email`` to a user message; answers a tool result with text."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any) -> toolguard.ModelResponse:
        self.calls += 1
        last = messages[-1]
        if last["role"] == "tool":
            return toolguard.ModelResponse(text=f"Done: {last['content']}")
        call = toolguard.ToolCall(id=f"call_{self.calls}", name="send_email", args=EMAIL_ARGS)
        return toolguard.ModelResponse(tool_calls=[call])


def _tools(runs: list[int]) -> list[Any]:
    @toolguard.requires_approval
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        runs[0] += 1
        return f"sent to {to}"

    return [send_email]


def _stores(folder: Path) -> dict[str, Any]:
    stores: dict[str, Any] = {
        "memory": toolguard.MemoryStore,
        "sqlite": lambda: toolguard.SQLiteStore(folder / "scale.db"),
    }
    dsn = os.environ.get("TOOLGUARD_POSTGRES_DSN")
    if dsn:

        def postgres() -> Any:
            from toolguard.postgres import PostgresStore

            return PostgresStore(dsn, table=f"bench_scale_{os.getpid()}")

        stores["postgres"] = postgres
    return stores


async def _cycle(
    chat: toolguard.ReviewedChat, runs: list[int], thread_id: str | None, turn: int
) -> tuple[str, float]:
    """One verified approval cycle; returns the thread id and its µs."""
    gc.collect()
    gc.disable()
    start = time.perf_counter_ns()
    paused = await chat.send_message(USER_TEXT, thread_id)
    before = runs[0]
    done = await chat.submit_review(APPROVE, paused.thread_id, review_id=paused.review_id)
    elapsed = time.perf_counter_ns() - start
    gc.enable()
    if paused.pending_review is None or done.reply != "Done: sent to alice@example.com":
        _fail(f"turn {turn}: did not pause and reply")
    if runs[0] != before + 1:
        _fail(f"turn {turn}: the tool ran {runs[0] - before} times")
    return paused.thread_id, elapsed / 1_000


async def _long_conversation(store: Any, settings: Settings) -> tuple[list[float], list[float]]:
    """µs per cycle for ``settings.turns`` cycles of one thread, then paired ratios.

    The pairs: ``settings.window`` times, one more cycle of the long thread
    and the first cycle of a new thread, back to back (in alternating order),
    so both see the machine at the same moment; each pair gives long / new.
    """
    runs = [0]
    chat = toolguard.ReviewedChat(_Model(), _tools(runs), store=store)
    thread_id: str | None = None
    times: list[float] = []
    for turn in range(settings.turns):
        found, elapsed = await _cycle(chat, runs, thread_id, turn)
        thread_id = found
        times.append(elapsed)
    ratios: list[float] = []
    for pair in range(settings.window):
        turn = settings.turns + pair
        if pair % 2:
            _, new = await _cycle(chat, runs, None, 0)
            _, long = await _cycle(chat, runs, thread_id, turn)
        else:
            _, long = await _cycle(chat, runs, thread_id, turn)
            _, new = await _cycle(chat, runs, None, 0)
        ratios.append(long / new)
    return times, ratios


def _bytes_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def measure_length(settings: Settings) -> list[dict[str, Any]]:
    """One long conversation per store: first vs last cycles."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as name:
        folder = Path(name)
        for kind, make in _stores(folder).items():
            store = make()
            times, ratios = anyio.run(_long_conversation, store, settings)
            closer = getattr(store, "aclose", None)
            if closer is not None:
                anyio.run(closer)
            first = round(statistics.median(times[: settings.window]), 1)
            last = round(statistics.median(times[-settings.window :]), 1)
            ratio = round(last / first, 2)
            paired = round(statistics.median(ratios), 2)
            rows.append(
                {
                    "store": kind,
                    "turns": settings.turns,
                    "first_us": first,
                    "last_us": last,
                    "ratio": ratio,
                    "paired_ratio": paired,
                    "target": LENGTH_TARGET,
                    "status": "PASS" if paired <= LENGTH_TARGET else "MISS",
                    "sqlite_bytes": _bytes_on_disk(folder) if kind == "sqlite" else None,
                }
            )
    return rows


async def _pause_threads(chat: toolguard.ReviewedChat, count: int) -> None:
    for _ in range(count):
        turn = await chat.send_message(USER_TEXT)
        if turn.pending_review is None:
            _fail("a thread did not pause")


def measure_memory(settings: Settings) -> dict[str, Any]:
    """Bytes traced per paused thread in a MemoryStore."""
    runs = [0]
    store = toolguard.MemoryStore()
    chat = toolguard.ReviewedChat(_Model(), _tools(runs), store=store)
    anyio.run(_pause_threads, chat, 10)  # warm caches before tracing
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    anyio.run(_pause_threads, chat, settings.threads)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    if runs[0] != 0:
        _fail("a paused thread ran its tool")
    per_thread = round((after - before) / settings.threads)
    for_10k = round(per_thread * 10_000 / 2**20, 1)
    return {
        "threads": settings.threads,
        "bytes_per_thread": per_thread,
        "mib_for_10000": for_10k,
        "target_mib": MEMORY_TARGET_MIB,
        "status": "PASS" if for_10k <= MEMORY_TARGET_MIB else "MISS",
    }


def report(data: dict[str, Any]) -> str:
    """The human-readable report."""
    env = data["environment"]
    lines = [
        "Scale: one conversation of many approval cycles, and many paused threads",
        (
            f"Python {env['python']}, {env['platform']}, {env['cpus']} CPUs,"
            f" load average {env['load_average']}, toolguard {toolguard.__version__}"
        ),
        f"Settings: {data['settings']}",
        "",
        "Thread length: a cycle of the long thread over the first cycle of a new one, back to",
        "back in pairs after the last turn (the verdict: the median of the pairs' ratios); and",
        "the median µs of the first and of the last cycles of the run, which the machine's",
        "drift during the run moves:",
    ]
    for row in data["length"]:
        disk = f", SQLite files {row['sqlite_bytes']:,} bytes" if row["sqlite_bytes"] else ""
        lines.append(
            f"  {row['store']}: {row['paired_ratio']:.2f}x paired (target <= {row['target']}x):"
            f" {row['status']}; first {row['first_us']:,.0f} µs, at turn {row['turns']}"
            f" {row['last_us']:,.0f} µs = {row['ratio']:.2f}x{disk}"
        )
    memory = data["memory"]
    lines += [
        "",
        (
            f"Memory: {memory['bytes_per_thread']:,} bytes per paused thread in a MemoryStore"
            f" ({memory['threads']:,} threads traced);"
            f" 10,000 threads = {memory['mib_for_10000']} MiB"
            f" (target <= {memory['target_mib']:.0f} MiB): {memory['status']}"
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, verify, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a short run (smoke test)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the report")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    started = dt.datetime.now(dt.timezone.utc)
    data = {
        "benchmark": "bench_scale",
        "date": started.isoformat(timespec="seconds"),
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": settings.__dict__,
        "length": measure_length(settings),
        "memory": measure_memory(settings),
    }
    print(json.dumps(data, indent=2) if args.json else report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
