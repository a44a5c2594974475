"""Core micro-benchmarks of toolguard: guard overhead, review payloads, resume, classifier.

Run from the repository root::

    .venv/bin/python benchmarks/bench_core.py            # full run (about 20 seconds)
    .venv/bin/python benchmarks/bench_core.py --quick    # a few repetitions (smoke test)
    .venv/bin/python benchmarks/bench_core.py --json     # machine-readable output

The ``median`` column is the median over several batches of the time per
operation in a batch; ``best`` is the fastest batch, a hint of what the
machine does when nothing else competes for it. Targets are judged on the
median. Related rows are measured side by side in the same run, with their
batches interleaved so that drift of the machine hits all of them alike.
Like :mod:`timeit`, the garbage collector is disabled while a batch is
timed. The pause+resume rows run their batch of cycles inside one
``anyio.run`` each (one warm-up cycle first). Only the public API
(``import toolguard``) is used.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import platform
import random
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

import anyio

import toolguard

# ----------------------------------------------------------------------------- row labels

RAW_CALL = "raw function call"
GUARDED_ALLOWED = "guarded call, allowed by when= (amount=5)"
GUARD_OVERHEAD = "guard overhead per allowed call"
PENDING_REVIEW = "guarded call raising ApprovalRequiredError"
VALIDATE_1 = "validate_decisions, 1 action"
VALIDATE_3 = "validate_decisions, 3 actions"
CYCLE_ASYNC = "pause+resume, async tool"
CYCLE_SYNC_THREAD = "pause+resume, sync tool in worker thread"
CYCLE_SYNC_INLINE = "pause+resume, sync tool, sync_in_thread=False"
CYCLE_JSON = "pause+resume, async tool, JSON round trip of state"
THREAD_HOP = "reference: anyio.to_thread.run_sync(no-op)"
CLASSIFY_COLD = "classify 10,000 names, fresh Classifier"
CLASSIFY_WARM = "classify 10,000 names again, same Classifier"
CLASSIFY_CACHED = "classify 10,000 lookups of 2,000 cached names"

ROW_LABELS = (
    RAW_CALL,
    GUARDED_ALLOWED,
    GUARD_OVERHEAD,
    PENDING_REVIEW,
    VALIDATE_1,
    VALIDATE_3,
    CYCLE_ASYNC,
    CYCLE_SYNC_THREAD,
    CYCLE_SYNC_INLINE,
    CYCLE_JSON,
    THREAD_HOP,
    CLASSIFY_COLD,
    CLASSIFY_WARM,
    CLASSIFY_CACHED,
)

# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """How long to measure."""

    batches: int
    """Batches per row; the median is taken over them."""
    batch_ns: int
    """Target duration of one batch of a micro-benchmark (calibrated)."""
    cycles: int
    """Pause+resume cycles per batch (one event loop per batch)."""
    classify_batches: int
    """Batches of 10,000 classifications."""


FULL = Settings(batches=51, batch_ns=10_000_000, cycles=100, classify_batches=31)
QUICK = Settings(batches=3, batch_ns=1_000_000, cycles=10, classify_batches=1)

# ----------------------------------------------------------------------------- results


@dataclass
class Row:
    """One line of the report: a median and, when there is one, its target."""

    label: str
    median: float
    best: float
    unit: str
    target: float | None = None

    @property
    def status(self) -> str | None:
        """``"PASS"`` when the median meets the target, ``"MISS"`` when not, else ``None``."""
        if self.target is None:
            return None
        return "PASS" if self.median <= self.target else "MISS"


_UNIT_NS = {"ns": 1.0, "µs": 1_000.0, "ms": 1_000_000.0}


def _row(label: str, samples: list[float], unit: str, target: float | None = None) -> Row:
    """A row from per-batch samples in ns: their median and their minimum."""
    scale = _UNIT_NS[unit]
    return Row(
        label=label,
        median=statistics.median(samples) / scale,
        best=min(samples) / scale,
        unit=unit,
        target=target,
    )


# ----------------------------------------------------------------------------- timing helpers


def _calibrate(timer: timeit.Timer, batch_ns: int) -> int:
    """A loop count for which one ``timer.timeit`` lasts about ``batch_ns``."""
    number = 1
    while True:
        elapsed = timer.timeit(number) * 1e9
        if elapsed >= batch_ns / 10 or number >= 10_000_000:
            return max(1, int(number * batch_ns / max(elapsed, 1.0)))
        number *= 10


def _interleaved(timers: dict[str, timeit.Timer], settings: Settings) -> dict[str, list[float]]:
    """Per-batch ns per loop of each timer, their batches taken in turn."""
    numbers = {key: _calibrate(timer, settings.batch_ns) for key, timer in timers.items()}
    samples: dict[str, list[float]] = {key: [] for key in timers}
    for _ in range(settings.batches):
        for key, timer in timers.items():
            samples[key].append(timer.timeit(numbers[key]) * 1e9 / numbers[key])
    return samples


def _fail(what: str) -> NoReturn:
    """Stop: the code under test did not do what the benchmark assumes."""
    msg = f"bench_core: sanity check failed: {what}"
    raise SystemExit(msg)


def _timer(stmt: str, namespace: dict[str, Any]) -> timeit.Timer:
    return timeit.Timer(stmt, globals=namespace)


# ----------------------------------------------------------------------------- the subjects


def transfer(amount: float, to: str) -> str:
    """Move money to someone.

    Args:
        amount: how much.
        to: who receives it.
    """
    return to


@toolguard.requires_approval(when=lambda a: a["amount"] > 1000)
def guarded_transfer(amount: float, to: str) -> str:
    """Move money to someone; large amounts need approval.

    Args:
        amount: how much.
        to: who receives it.
    """
    return to


@toolguard.requires_approval
async def pay_async(amount: float, to: str) -> str:
    """Pay someone (async).

    Args:
        amount: how much.
        to: who receives it.
    """
    return f"paid {amount} to {to}"


@toolguard.requires_approval
def pay_sync(amount: float, to: str) -> str:
    """Pay someone (sync).

    Args:
        amount: how much.
        to: who receives it.
    """
    return f"paid {amount} to {to}"


def _openai_call(name: str) -> dict[str, Any]:
    """One tool call as the OpenAI SDK returns it (arguments as JSON text)."""
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": '{"amount": 5000, "to": "bob"}'},
    }


# ----------------------------------------------------------------------------- 1. guard overhead


def bench_guard(settings: Settings) -> list[Row]:
    """Raw call vs an allowed guarded call, and a call that builds a pending review."""
    if guarded_transfer(5, "bob") != "bob":
        _fail("the allowed guarded call did not run the body")
    try:
        guarded_transfer(5000, "bob")
    except toolguard.ApprovalRequiredError as exc:
        if exc.pending_review.action_requests[0].name != "guarded_transfer":
            _fail("unexpected pending review")
    else:
        _fail("the large transfer did not need approval")

    namespace = {
        "raw": transfer,
        "guarded": guarded_transfer,
        "ApprovalRequiredError": toolguard.ApprovalRequiredError,
    }
    medians = _interleaved(
        {
            "raw": _timer("raw(5, 'bob')", namespace),
            "allowed": _timer("guarded(5, 'bob')", namespace),
        },
        settings,
    )
    pending = _interleaved(
        {
            "pending": _timer(
                "try:\n    guarded(5000, 'bob')\nexcept ApprovalRequiredError:\n    pass",
                namespace,
            )
        },
        settings,
    )
    raw, allowed = (
        _row(RAW_CALL, medians["raw"], "ns"),
        _row(GUARDED_ALLOWED, medians["allowed"], "ns"),
    )
    overhead = Row(
        label=GUARD_OVERHEAD,
        median=(allowed.median - raw.median) / 1_000,
        best=(allowed.best - raw.best) / 1_000,
        unit="µs",
        target=2.0,
    )
    return [raw, allowed, overhead, _row(PENDING_REVIEW, pending["pending"], "µs")]


# ----------------------------------------------------------------------------- 3. validation


def _payload(names: list[str]) -> dict[str, Any]:
    return toolguard.PendingReview.for_actions(
        [(name, {"amount": 5000, "to": "bob"}, None) for name in names]
    ).model_dump()


def bench_validate(settings: Settings) -> list[Row]:
    """validate_decisions on the wire format (dicts), 1 and 3 actions."""
    one = _payload(["pay"])
    three = _payload(["pay", "pay", "pay"])
    decisions_one = [{"type": "approve"}]
    decisions_three = [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "pay", "args": {"amount": 10, "to": "bob"}}},
        {"type": "reject", "message": "Too much."},
    ]
    checked = toolguard.validate_decisions(three, decisions_three)
    if [d.type for d in checked] != ["approve", "edit", "reject"]:
        _fail(f"unexpected validation result {checked!r}")
    namespace = {
        "validate": toolguard.validate_decisions,
        "one": one,
        "three": three,
        "d1": decisions_one,
        "d3": decisions_three,
    }
    medians = _interleaved(
        {
            "one": _timer("validate(one, d1)", namespace),
            "three": _timer("validate(three, d3)", namespace),
        },
        settings,
    )
    return [_row(VALIDATE_1, medians["one"], "µs"), _row(VALIDATE_3, medians["three"], "µs")]


# ----------------------------------------------------------------------------- 4. pause + resume

APPROVE = [{"type": "approve"}]


async def _cycle(runner: toolguard.Runner, call: dict[str, Any]) -> toolguard.Step:
    step = await runner.run([call])
    assert step.pending is not None
    return await runner.resume(step.pending, APPROVE)


async def _cycle_json(runner: toolguard.Runner, call: dict[str, Any]) -> toolguard.Step:
    step = await runner.run([call])
    assert step.pending is not None
    restored = toolguard.PendingTurn.model_validate_json(step.pending.model_dump_json())
    return await runner.resume(restored, APPROVE)


def _no_op() -> None:
    return None


async def _thread_hop(runner: toolguard.Runner, call: dict[str, Any]) -> None:
    """What a sync tool pays on top of the inline run: one round trip to a worker thread."""
    await anyio.to_thread.run_sync(_no_op)


CycleFn = Callable[[toolguard.Runner, dict[str, Any]], Any]


async def _timed_cycles(runner: toolguard.Runner, call: dict[str, Any], fn: CycleFn, n: int) -> int:
    """Run one warm-up cycle, then ``n`` timed cycles in this event loop; return total ns."""
    done = await fn(runner, call)
    if done is not None and (done.paused or [r.status for r in done.results] != ["success"]):
        _fail(f"the cycle did not complete: {done!r}")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(n):
            await fn(runner, call)
        return time.perf_counter_ns() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def bench_cycles(settings: Settings) -> list[Row]:
    """One run (pauses) + one resume (approve, runs the tool) per cycle, in-memory state."""
    cases: dict[str, tuple[toolguard.Runner, dict[str, Any], CycleFn]] = {
        CYCLE_ASYNC: (toolguard.Runner([pay_async]), _openai_call("pay_async"), _cycle),
        CYCLE_SYNC_THREAD: (toolguard.Runner([pay_sync]), _openai_call("pay_sync"), _cycle),
        CYCLE_SYNC_INLINE: (
            toolguard.Runner([pay_sync], sync_in_thread=False),
            _openai_call("pay_sync"),
            _cycle,
        ),
        CYCLE_JSON: (toolguard.Runner([pay_async]), _openai_call("pay_async"), _cycle_json),
        THREAD_HOP: (toolguard.Runner([pay_async]), _openai_call("pay_async"), _thread_hop),
    }
    samples: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(settings.batches):
        for label, (runner, call, fn) in cases.items():
            total = anyio.run(_timed_cycles, runner, call, fn, settings.cycles)
            samples[label].append(total / settings.cycles)
    targets = {CYCLE_ASYNC: 100.0, CYCLE_SYNC_THREAD: 100.0, CYCLE_SYNC_INLINE: 100.0}
    return [
        _row(label, values, "µs", target=targets.get(label)) for label, values in samples.items()
    ]


# ----------------------------------------------------------------------------- 5. classifier

_VERBS = (*toolguard.DEFAULT_VERBS, "get", "list", "find", "fetch", "search", "read", "check")
_NOUNS = (
    "email",
    "calendar",
    "event",
    "file",
    "user",
    "invoice",
    "payment",
    "sender",
    "address",
    "url",
    "http",
    "record",
)
_QUALIFIERS = ("", "by_id", "batch", "draft", "stats", "v2", "lookup", "for_team")
_NAMESPACES = ("", "gmail", "github", "fs", "crm")


def _compose(parts: list[str], style: int) -> str:
    words = [w for part in parts for w in part.split("_") if w]
    if style == 0:  # camelCase
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == 1:  # snake_case
        return "_".join(words)
    if style == 2:  # kebab-case
        return "-".join(words)
    return "".join(w.capitalize() for w in words)  # PascalCase


def make_names(count: int = 10_000) -> list[str]:
    """``count`` distinct tool names, always the same ones, in a fixed shuffled order.

    They mix camelCase, snake_case, kebab-case and PascalCase, approval verbs
    and read-only verbs, nouns that contain a verb as a substring
    (``sender``, ``address``), and namespaces (``gmail__``, ``github/``, ...).
    """
    names: list[str] = []
    separators = ("__", "/", ".", ":")
    for index, (verb, noun, qualifier, namespace, style) in enumerate(
        itertools.product(_VERBS, _NOUNS, _QUALIFIERS, _NAMESPACES, range(4))
    ):
        name = _compose([verb, noun, qualifier], style)
        if namespace:
            name = namespace + separators[index % len(separators)] + name
        names.append(name)
    unique = sorted(set(names))
    random.Random(20240601).shuffle(unique)
    if len(unique) < count:
        _fail(f"only {len(unique)} distinct names")
    return unique[:count]


def bench_classifier(settings: Settings) -> list[Row]:
    """Bulk classification of 10,000 distinct names: fresh classifier, then the same one again.

    The third row repeats 2,000 names five times on a classifier that has
    already seen them, to show the cost of a lookup the cache answers.
    """
    names = make_names()
    results = toolguard.Classifier().classify(names)
    if len(results) != len(names):
        _fail("classify() lost names")
    namespace = {"Classifier": toolguard.Classifier, "names": names, "few": names[:2000] * 5}
    timers = {
        "cold": timeit.Timer("c.classify(names)", setup="c = Classifier()", globals=namespace),
        "warm": timeit.Timer(
            "c.classify(names)", setup="c = Classifier(); c.classify(names)", globals=namespace
        ),
        "cached": timeit.Timer(
            "c.classify(few)", setup="c = Classifier(); c.classify(few)", globals=namespace
        ),
    }
    samples: dict[str, list[float]] = {key: [] for key in timers}
    for _ in range(settings.classify_batches):
        for key, timer in timers.items():
            samples[key].append(timer.timeit(1) * 1e9)
    return [
        _row(CLASSIFY_COLD, samples["cold"], "ms", target=50.0),
        _row(CLASSIFY_WARM, samples["warm"], "ms", target=50.0),
        _row(CLASSIFY_CACHED, samples["cached"], "ms"),
    ]


# ----------------------------------------------------------------------------- report


def environment() -> dict[str, str]:
    """Python version, platform and toolguard version."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "toolguard": toolguard.__version__,
    }


def _format_value(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"


def format_table(rows: list[Row]) -> str:
    """The rows as an aligned plain-text table."""
    headers = ("benchmark", "median", "best", "unit", "target", "result")
    cells = [
        (
            row.label,
            _format_value(row.median),
            _format_value(row.best),
            row.unit,
            f"<= {row.target:g} {row.unit}" if row.target is not None else "",
            row.status or "",
        )
        for row in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    right = {1, 2}

    def line(values: tuple[str, ...]) -> str:
        out = [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(tuple("-" * w for w in widths)), *map(line, cells)])


def run(settings: Settings) -> list[Row]:
    """Every benchmark, in report order."""
    return [
        *bench_guard(settings),
        *bench_validate(settings),
        *bench_cycles(settings),
        *bench_classifier(settings),
    ]


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the benchmarks, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args(argv)
    settings = QUICK if options.quick else FULL
    env = environment()
    rows = run(settings)
    if options.json:
        report = {
            "mode": "quick" if options.quick else "full",
            "environment": env,
            "settings": asdict(settings),
            "rows": [{**asdict(row), "status": row.status} for row in rows],
        }
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(
        f"toolguard {env['toolguard']} | {env['implementation']} {env['python']} | "
        f"{env['platform']} | {'quick' if options.quick else 'full'} mode"
    )
    print(sys.version.replace("\n", " "))
    print()
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
