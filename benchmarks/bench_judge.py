"""The latency a judge adds to a turn of guarded calls, with a scripted judge model.

Run from the repository root::

    .venv/bin/python benchmarks/bench_judge.py              # full run (about 15 seconds)
    .venv/bin/python benchmarks/bench_judge.py --quick      # a few rounds (smoke test)
    .venv/bin/python benchmarks/bench_judge.py --delay-ms 50
    .venv/bin/python benchmarks/bench_judge.py --json       # machine-readable output

One turn is ``await runner.run(calls, thread_id=..., conversation=...)`` of
1 or 4 guarded calls, until it pauses for a person: the same ``Runner``
without a judge, with a judge whose model answers at once, with that judge
answering from its cache (the same calls again in the same thread), and with
a judge whose model takes a fixed simulated delay (20 ms by default, like a
fast hosted model). The judge informs (``auto_approve=False``), so every
variant ends in the same pending review. A turn of 4 calls asks the model 4
times concurrently, so its delay row should be near one delay, not four.

Each round times every variant in turn, inside one event loop, with the
garbage collector off; a variant's figure for the round is the mean turn of
its batch. ``median`` is the median over rounds, ``added`` its difference to
the no-judge row with the same calls, ``x no judge`` the ratio of the two.
Only the public API (``import toolguard``) is used.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

import anyio

import toolguard

VERDICT = json.dumps(
    {
        "risk": "low",
        "user_authorized": True,
        "outcome": "allow",
        "rationale": "The person asked to email this recipient.",
    }
)
CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Email bob@example.org, ann@example.org, kim@example.org and"},
    {"role": "user", "content": "lee@example.org that the meeting moved to 15:00."},
]
RECIPIENTS = ("bob@example.org", "ann@example.org", "kim@example.org", "lee@example.org")

# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """How long to measure."""

    rounds: int
    """Rounds; the median is taken over them."""
    turns: int
    """Turns per batch of a variant whose model answers at once."""
    slow_turns: int
    """Turns per batch of a variant whose model waits ``delay_ms``."""
    delay_ms: float
    """The simulated delay of the slow judge model."""


def full(delay_ms: float, rounds: int | None) -> Settings:
    """The full run (about 15 seconds with the default delay)."""
    return Settings(rounds=rounds or 31, turns=50, slow_turns=5, delay_ms=delay_ms)


def quick(delay_ms: float, rounds: int | None) -> Settings:
    """A few rounds, for the smoke test."""
    return Settings(rounds=rounds or 3, turns=2, slow_turns=1, delay_ms=delay_ms)


# ----------------------------------------------------------------------------- the judge models


class InstantModel:
    """A judge model that answers at once; it counts its calls."""

    model = "scripted-instant"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(
        self, messages: Sequence[toolguard.Message], tools: Sequence[dict[str, Any]]
    ) -> toolguard.ModelResponse:
        """The same well-formed verdict, every time."""
        self.calls += 1
        return toolguard.ModelResponse(text=VERDICT)


class DelayedModel(InstantModel):
    """A judge model that waits a fixed time before it answers (a simulated network call)."""

    model = "scripted-delayed"

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def complete(
        self, messages: Sequence[toolguard.Message], tools: Sequence[dict[str, Any]]
    ) -> toolguard.ModelResponse:
        """The verdict, after the delay."""
        await anyio.sleep(self.seconds)
        return await super().complete(messages, tools)


# ----------------------------------------------------------------------------- the subject


@toolguard.requires_approval
async def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the recipient's address.
        body: the text.
    """
    return f"sent to {to}"


def calls(count: int) -> list[dict[str, Any]]:
    """``count`` distinct guarded calls of one turn."""
    return [
        {"id": f"call_{n}", "name": "send_email", "args": {"to": to, "body": "Moved to 15:00."}}
        for n, to in enumerate(RECIPIENTS[:count])
    ]


@dataclass
class Variant:
    """One row: a runner, its turn's calls and whether the judge's cache answers."""

    label: str
    calls: int
    runner: toolguard.Runner
    model: InstantModel | None
    cached: bool
    slow: bool
    used: int = 0
    """Thread ids handed out so far (a fresh thread per turn misses the cache)."""

    def thread_id(self) -> str:
        if self.cached:
            return "bench-cached"
        self.used += 1
        return f"bench-{self.used}"


def variants(delay_ms: float) -> list[Variant]:
    """The rows of the report, in order."""
    rows: list[Variant] = []
    for count in (1, 4):
        noun = "call" if count == 1 else "calls"
        instant, cached, delayed = InstantModel(), InstantModel(), DelayedModel(delay_ms / 1000)
        rows += [
            Variant(
                f"{count} guarded {noun}, no judge",
                count,
                toolguard.Runner([send_email]),
                None,
                cached=False,
                slow=False,
            ),
            Variant(
                f"{count} guarded {noun}, instant judge",
                count,
                toolguard.Runner([send_email], judge=toolguard.Judge(instant)),
                instant,
                cached=False,
                slow=False,
            ),
            Variant(
                f"{count} guarded {noun}, instant judge, cached verdicts",
                count,
                toolguard.Runner([send_email], judge=toolguard.Judge(cached)),
                cached,
                cached=True,
                slow=False,
            ),
            Variant(
                f"{count} guarded {noun}, {delay_ms:g} ms judge",
                count,
                toolguard.Runner([send_email], judge=toolguard.Judge(delayed)),
                delayed,
                cached=False,
                slow=True,
            ),
        ]
    return rows


def _fail(what: str) -> NoReturn:
    """Stop: the code under test did not do what the benchmark assumes."""
    msg = f"bench_judge: sanity check failed: {what}"
    raise SystemExit(msg)


async def _turn(variant: Variant) -> None:
    step = await variant.runner.run(
        calls(variant.calls),
        thread_id=variant.thread_id(),
        conversation=CONVERSATION,
    )
    judged = 0 if variant.model is None else variant.calls
    if step.pending_review is None or len(step.pending_review.action_requests) != variant.calls:
        _fail(f"{variant.label}: the turn did not pause with {variant.calls} actions")
    if len(step.judgements) != judged or not all(j.decided for j in step.judgements):
        _fail(f"{variant.label}: expected {judged} verdicts, got {step.judgements!r}")


async def _round(rows: Sequence[Variant], settings: Settings) -> list[float]:
    """One batch of each variant, in turn; the mean turn of each, in µs."""
    for row in rows:  # warm-up: first use of each runner (and the cache of the cached rows)
        await _turn(row)
    means: list[float] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for row in rows:
            turns = settings.slow_turns if row.slow else settings.turns
            before = row.model.calls if row.model is not None else 0
            start = time.perf_counter_ns()
            for _ in range(turns):
                await _turn(row)
            means.append((time.perf_counter_ns() - start) / turns / 1000)
            asked = (row.model.calls if row.model is not None else 0) - before
            expected = 0 if row.model is None or row.cached else turns * row.calls
            if asked != expected:
                _fail(f"{row.label}: the model was asked {asked} times, expected {expected}")
    finally:
        if gc_was_enabled:
            gc.enable()
    return means


# ----------------------------------------------------------------------------- report


@dataclass
class Row:
    """One line of the report."""

    label: str
    calls: int
    median_us: float
    best_us: float
    added_us: float
    """The median minus the no-judge median with the same calls."""
    ratio: float
    """The median over the no-judge median with the same calls."""


def run(settings: Settings) -> list[Row]:
    """Every variant over ``settings.rounds`` rounds."""
    rows = variants(settings.delay_ms)
    samples: list[list[float]] = [[] for _ in rows]
    for _ in range(settings.rounds):
        for index, mean in enumerate(anyio.run(_round, rows, settings)):
            samples[index].append(mean)
    medians = [statistics.median(s) for s in samples]
    baseline = {row.calls: medians[i] for i, row in enumerate(rows) if row.model is None}
    return [
        Row(
            label=row.label,
            calls=row.calls,
            median_us=medians[i],
            best_us=min(samples[i]),
            added_us=medians[i] - baseline[row.calls],
            ratio=medians[i] / baseline[row.calls],
        )
        for i, row in enumerate(rows)
    ]


def _value(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"


HEADERS = ("turn", "median µs", "best µs", "added µs", "x no judge")


def format_table(rows: Sequence[Row]) -> str:
    """The rows as an aligned plain-text table."""
    cells = [
        (r.label, _value(r.median_us), _value(r.best_us), _value(r.added_us), f"{r.ratio:,.2f}")
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADERS)]

    def line(values: Sequence[str]) -> str:
        out = [
            v.ljust(w) if i == 0 else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(HEADERS), line(["-" * w for w in widths]), *map(line, cells)])


def environment() -> dict[str, str]:
    """Python version, platform and toolguard version."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "toolguard": toolguard.__version__,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options, run the benchmark, print the report."""
    parser = argparse.ArgumentParser(prog="bench_judge.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few rounds (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds (default 31, 3 with --quick)")
    parser.add_argument(
        "--delay-ms", type=float, default=20.0, help="the slow judge's delay (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args(argv)
    if options.rounds is not None and options.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not 0 < options.delay_ms <= 10_000:
        parser.error("--delay-ms must be more than 0 and at most 10000")
    settings = (quick if options.quick else full)(options.delay_ms, options.rounds)
    env = environment()
    rows = run(settings)
    mode = "quick" if options.quick else "full"
    if options.json:
        report = {
            "mode": mode,
            "environment": env,
            "settings": asdict(settings),
            "rows": [asdict(row) for row in rows],
        }
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(
        f"toolguard {env['toolguard']} | {env['implementation']} {env['python']} | "
        f"{env['platform']} | {mode} mode, {settings.rounds} rounds"
    )
    print(
        f"judge model: scripted, answering at once or after {settings.delay_ms:g} ms;"
        " the judge informs (auto_approve=False)"
    )
    print()
    print(format_table(rows))
    slow = {row.calls: row for row in rows if row.label.endswith(f"{settings.delay_ms:g} ms judge")}
    print()
    print(
        f"4 calls judged concurrently: the {settings.delay_ms:g} ms judge adds"
        f" {slow[4].added_us / 1000:,.1f} ms to a turn of 4 calls,"
        f" {slow[1].added_us / 1000:,.1f} ms to a turn of 1"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
