"""Before and after: toolguard at another commit against this checkout, interleaved in ONE process.

On a shared machine the speed of the CPU drifts by tens of percent from one
minute to the next, so two runs of a benchmark taken one after the other
cannot show a change of 10%. This script loads both versions into one
process: the other commit's ``toolguard`` package is extracted with
``git archive`` into a temporary folder and renamed ``toolguard_base``
(its own imports rewritten), next to this checkout's ``toolguard``. Then
short batches of the same approval cycle alternate between the two (base,
new, base, new, ...), and the verdict is the median of the per-round ratios
new / base: a slow spell hits both batches of a round alike.

The cycle is ``bench_cycle.py``'s: a user message, the scripted model
proposes ``send_email``, the run pauses, an approve, the tool runs, the
model answers. Every cycle is checked (paused first, ran once, right reply).

With ``--openai`` the model is ``OpenAIChatModel`` on an ``AsyncOpenAI``
client whose mock transport answers like a Chat Completions server
(``bench_cycle.py``'s), and a third subject joins each round: the
hand-written loop on the bare client. The report then adds each version's
per-round ratio to the bare loop (the overhead toolguard adds over a
hand-written loop on the same client), with the versions side by side.

Run from the repository root::

    .venv/bin/python benchmarks/bench_versus.py 703f996            # memory and SQLite
    .venv/bin/python benchmarks/bench_versus.py HEAD~3 --stores memory --rounds 201
    .venv/bin/python benchmarks/bench_versus.py 703f996 --json
    .venv/bin/python benchmarks/bench_versus.py HEAD~1 --openai --rounds 61

The commit must contain the package as ``toolguard/`` (every commit of this
repository does).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gc
import importlib
import importlib.util
import io
import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
BASE_PACKAGE = "toolguard_base"
USER_TEXT = "Mail Alice that the meeting is at 10."
EMAIL_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}
REPLY = "Done: sent to alice@example.com"
STORES = ("memory", "sqlite", "postgres")
"""``postgres`` needs ``TOOLGUARD_POSTGRES_DSN`` (tables of their own, dropped at the end)."""

_IMPORTS = (
    (re.compile(r"\bfrom toolguard\b"), f"from {BASE_PACKAGE}"),
    (re.compile(r"\bimport toolguard\b"), f"import {BASE_PACKAGE}"),
    (re.compile(r"([\"'])toolguard\."), rf"\1{BASE_PACKAGE}."),
)


def extract_base(revision: str, folder: Path) -> str:
    """Put ``revision``'s package into ``folder`` as ``toolguard_base``; return its full commit.

    Raises:
        ValueError: ``revision`` starts with ``-`` (git would read it as an option).
    """
    if revision.startswith("-"):
        msg = f"a revision cannot start with '-': {revision!r}"
        raise ValueError(msg)
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "toolguard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    package = folder / BASE_PACKAGE
    (folder / "toolguard").rename(package)
    for source in package.rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for pattern, replacement in _IMPORTS:
            text = pattern.sub(replacement, text)
        source.write_text(text, encoding="utf-8")
    return commit


def make_store(package: str, store_kind: str, folder: Path) -> Any:
    """A fresh store of ``package`` (PostgreSQL: in tables named after the package and process)."""
    tg: Any = importlib.import_module(package)
    if store_kind == "sqlite":
        return tg.SQLiteStore(folder / f"{package}.db")
    if store_kind == "postgres":
        postgres: Any = importlib.import_module(f"{package}.postgres")
        dsn = os.environ["TOOLGUARD_POSTGRES_DSN"]
        return postgres.PostgresStore(dsn, table=f"bench_versus_{package}_{os.getpid()}")
    return tg.MemoryStore()


async def drop_tables(store: Any) -> None:
    """Close ``store`` and, for PostgreSQL, drop the tables it made."""
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()
    if type(store).__name__ != "PostgresStore":
        return
    import psycopg
    import psycopg.sql

    table: str = store._table
    # The list tables: the table's name, cut to PostgreSQL's 63 characters, plus a suffix.
    names = [table, store._claims_table] + [
        table[: 63 - len(suffix)] + suffix for suffix in ("_messages", "_actions", "_audit")
    ]
    async with await psycopg.AsyncConnection.connect(store._dsn, autocommit=True) as conn:
        for name in names:
            await conn.execute(
                psycopg.sql.SQL("DROP TABLE IF EXISTS {}").format(psycopg.sql.Identifier(name))
            )


BARE = "bare"
"""The subject key of the hand-written loop on the bare openai client (``--openai``)."""


def _bench_cycle() -> Any:
    """``benchmarks/bench_cycle.py`` (its mock transport and bare loop)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("bench_cycle")


def make_bare_cycle() -> Callable[[], Awaitable[None]]:
    """One verified cycle of the hand-written loop on the bare openai client."""
    bench_cycle = _bench_cycle()
    probe = bench_cycle.Probe()
    loop = bench_cycle._BareLoop(bench_cycle._openai_client(probe), probe)

    async def cycle() -> None:
        before = probe.tool_runs
        thread_id, waiting = await loop.send_message(USER_TEXT)
        if waiting != ["send_email"] or probe.tool_runs != before:
            msg = "bare loop: the cycle did not pause before the tool ran"
            raise RuntimeError(msg)
        if await loop.approve(thread_id) != REPLY or probe.tool_runs != before + 1:
            msg = "bare loop: the approved tool did not run once with the reply"
            raise RuntimeError(msg)

    return cycle


def make_cycle(
    package: str, store: Any, *, openai: bool = False, long: bool = False
) -> Callable[[], Awaitable[None]]:
    """One verified approval cycle through ``package`` (``toolguard`` or ``toolguard_base``).

    ``openai``: the model is ``OpenAIChatModel`` on the mock transport.
    ``long``: every cycle goes on in the same thread (a new thread per cycle otherwise).
    """
    tg: Any = importlib.import_module(package)
    runs = [0]

    class Model:
        def __init__(self) -> None:
            self.ids = itertools.count()

        async def complete(self, messages: Any, tools: Any) -> Any:
            last = messages[-1]
            if last["role"] == "tool":
                return tg.ModelResponse(text=f"Done: {last['content']}")
            call = tg.ToolCall(
                id=f"call_{next(self.ids)}", name="send_email", args=dict(EMAIL_ARGS)
            )
            return tg.ModelResponse(tool_calls=[call])

    @tg.requires_approval
    async def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            subject: the subject line.
            body: the text.
        """
        runs[0] += 1
        return f"sent to {to}"

    model: Any = Model()
    if openai:
        adapter: Any = importlib.import_module(f"{package}.openai")
        bench_cycle = _bench_cycle()
        client = bench_cycle._openai_client(bench_cycle.Probe())
        model = adapter.OpenAIChatModel(client, model="bench")
    chat = tg.ReviewedChat(model, {"send_email": send_email}, store=store)
    thread: list[str | None] = [None]

    async def cycle() -> None:
        before = runs[0]
        turn = await chat.send_message(USER_TEXT, thread[0])
        if long:
            thread[0] = turn.thread_id
        if turn.pending_review is None or runs[0] != before:
            msg = f"{package}: the cycle did not pause before the tool ran"
            raise RuntimeError(msg)
        done = await chat.submit_review([{"type": "approve"}], turn.thread_id)
        if done.reply != REPLY or runs[0] != before + 1:
            msg = f"{package}: the approved tool did not run once with the reply"
            raise RuntimeError(msg)

    return cycle


async def measure(
    stores: list[str],
    cycles: int,
    rounds: int,
    folder: Path,
    *,
    openai: bool = False,
    turns: int = 0,
) -> dict[str, Any]:
    """Alternate batches of base and new per store; per-round ratios new / base.

    ``openai``: through ``OpenAIChatModel``, with the bare loop as a third subject.
    ``turns``: every subject's cycles go on in one thread that holds ``turns`` cycles first.
    """
    stores_made = {
        (store, package): make_store(package, store, folder)
        for store in stores
        for package in (BASE_PACKAGE, "toolguard")
    }
    subjects = {
        key: make_cycle(key[1], made, openai=openai, long=turns > 0)
        for key, made in stores_made.items()
    }
    for cycle in subjects.values():
        for _ in range(turns):
            await cycle()
    if openai:
        subjects[(BARE, BARE)] = make_bare_cycle()
    try:
        return await _alternate(stores, subjects, cycles, rounds)
    finally:
        for made in stores_made.values():
            await drop_tables(made)


async def _alternate(
    stores: list[str],
    subjects: dict[tuple[str, str], Callable[[], Awaitable[None]]],
    cycles: int,
    rounds: int,
) -> dict[str, Any]:
    for cycle in subjects.values():
        for _ in range(10):
            await cycle()
    times: dict[tuple[str, str], list[float]] = {key: [] for key in subjects}
    for _ in range(rounds):
        for key, cycle in subjects.items():
            gc.collect()
            gc.disable()
            try:
                start = time.perf_counter_ns()
                for _ in range(cycles):
                    await cycle()
                times[key].append((time.perf_counter_ns() - start) / cycles / 1_000)
            finally:
                gc.enable()
    rows = []
    bare = times.get((BARE, BARE))
    for store in stores:
        base, new = times[(store, BASE_PACKAGE)], times[(store, "toolguard")]
        row: dict[str, Any] = {
            "store": store,
            "base_median_us": round(statistics.median(base), 1),
            "base_min_us": round(min(base), 1),
            "new_median_us": round(statistics.median(new), 1),
            "new_min_us": round(min(new), 1),
            "ratio": _paired(new, base),
        }
        if bare is not None:
            row.update(
                bare_median_us=round(statistics.median(bare), 1),
                base_over_bare=_paired(base, bare),
                new_over_bare=_paired(new, bare),
            )
        rows.append(row)
    return {"rows": rows}


def _paired(ours: list[float], theirs: list[float]) -> float:
    """The median of the per-round ratios ``ours / theirs``."""
    return round(statistics.median(o / t for o, t in zip(ours, theirs, strict=True)), 3)


def report(data: dict[str, Any]) -> str:
    """The result as text."""
    lines = [
        (
            f"toolguard at {data['base_commit'][:12]} (base) against this checkout (new),"
            f" interleaved in one process: {data['rounds']} rounds of {data['cycles']} cycles"
            + (
                f", each cycle in one thread that held {data['turns']} cycles first"
                if data.get("turns")
                else ""
            )
        ),
        data["environment"],
        "",
        "store   base median µs  base min µs  new median µs  new min µs  new/base (rounds)",
        "------  --------------  -----------  -------------  ----------  -----------------",
    ]
    lines += [
        f"{r['store']:6}  {r['base_median_us']:14,.0f}  {r['base_min_us']:11,.0f}"
        f"  {r['new_median_us']:13,.0f}  {r['new_min_us']:10,.0f}  {r['ratio']:.3f}"
        for r in data["rows"]
    ]
    if data.get("openai"):
        lines += [
            "",
            "Through OpenAIChatModel on the mock transport; the bare loop in the same rounds:",
            "store   bare median µs  base/bare (rounds)  new/bare (rounds)",
            "------  --------------  ------------------  -----------------",
        ]
        lines += [
            f"{r['store']:6}  {r['bare_median_us']:14,.0f}  {r['base_over_bare']:18.3f}"
            f"  {r['new_over_bare']:17.3f}"
            for r in data["rows"]
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the commit to compare with (any git revision)")
    parser.add_argument(
        "--stores",
        default=None,
        help="memory,sqlite,postgres (default: memory,sqlite, and postgres with a DSN)",
    )
    parser.add_argument("--cycles", type=int, default=50, help="cycles per batch (default 50)")
    parser.add_argument("--rounds", type=int, default=101, help="rounds (default 101)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--turns",
        type=int,
        default=0,
        help="thread length: cycles go on in one thread of this many cycles (default: new threads)",
    )
    parser.add_argument(
        "--openai",
        action="store_true",
        help="through OpenAIChatModel on a mock transport, with the bare openai loop",
    )
    args = parser.parse_args(argv)
    if args.openai and importlib.util.find_spec("openai") is None:
        parser.error("--openai needs the openai package (pip install -e '.[openai]')")
    dsn = os.environ.get("TOOLGUARD_POSTGRES_DSN")
    default = "memory,sqlite,postgres" if dsn else "memory,sqlite"
    stores = [s for s in (args.stores or default).split(",") if s]
    if not stores or any(s not in STORES for s in stores):
        parser.error(f"--stores takes a comma-separated list of {', '.join(STORES)}")
    if "postgres" in stores and not dsn:
        parser.error("--stores postgres needs TOOLGUARD_POSTGRES_DSN")
    if args.cycles < 1 or args.rounds < 1:
        parser.error("--cycles and --rounds must be at least 1")
    if args.turns < 0:
        parser.error("--turns must be at least 0")
    with tempfile.TemporaryDirectory(prefix="bench_versus_") as temp:
        folder = Path(temp)
        try:
            commit = extract_base(args.revision, folder)
        except ValueError as exc:
            parser.error(str(exc))
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or b"").decode() if isinstance(exc.stderr, bytes) else exc.stderr
            parser.error(f"cannot read toolguard at {args.revision!r}: {(detail or '').strip()}")
        sys.path.insert(0, str(folder))
        data = anyio.run(
            functools.partial(measure, openai=args.openai, turns=args.turns),
            stores,
            args.cycles,
            args.rounds,
            folder,
        )
    data.update(
        benchmark="bench_versus",
        openai=args.openai,
        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        base_commit=commit,
        cycles=args.cycles,
        rounds=args.rounds,
        turns=args.turns,
        environment=(
            f"Python {platform.python_version()}, {platform.platform()},"
            f" sqlite {__import__('sqlite3').sqlite_version}"
        ),
    )
    print(json.dumps(data, indent=2) if args.json else report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
