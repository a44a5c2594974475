"""How many real dangerous tools does a classifier guard, and how many reads does it ask about?

Runs classifiers over a list of real tool names, each labelled ``write`` (the
call changes the world: data, messages, money, code, permissions) or ``read``
(it only looks), and prints, for each classifier side by side:

* **writes guarded**: the share of ``write`` tools that need approval (recall);
* **reads asked**: the share of ``read`` tools that needlessly need approval.

Run from the repository root::

    .venv/bin/python benchmarks/classifier_coverage.py            # the table
    .venv/bin/python benchmarks/classifier_coverage.py --misses   # every miss of the default
    .venv/bin/python benchmarks/classifier_coverage.py --by-source
    .venv/bin/python benchmarks/classifier_coverage.py --json
    .venv/bin/python benchmarks/classifier_coverage.py --names my_tools.csv

The committed list (``benchmarks/data/tool_names.csv``, sources in
``benchmarks/data/SOURCES.md``) holds the complete tool lists of public MCP
servers, agent frameworks' toolkits and public agent benchmarks. A file of
your own needs the same header, ``name,label,source``. Targets: at least 95%
of writes guarded, at most 5% of reads asked.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import toolguard

DEFAULT_NAMES = Path(__file__).resolve().parent / "data" / "tool_names.csv"
WRITES_TARGET = 0.95
READS_TARGET = 0.05

CLASSIFIERS: dict[str, toolguard.Classifier] = {
    "SEED_VERBS": toolguard.Classifier(verbs=toolguard.SEED_VERBS),
    "default": toolguard.Classifier(),
    'default, unknown="allow"': toolguard.Classifier(unknown="allow"),
}
"""The classifiers compared: the 13 seed verbs, the default, the default allowing unknowns."""


@dataclass(frozen=True)
class Tool:
    """One labelled tool name."""

    name: str
    label: str
    source: str


@dataclass
class Coverage:
    """What one classifier does to the list."""

    classifier: str
    writes: int
    reads: int
    writes_guarded: int
    reads_asked: int
    missed_writes: list[str] = field(default_factory=list)
    asked_reads: list[str] = field(default_factory=list)

    @property
    def recall(self) -> float:
        """The share of writes that need approval."""
        return self.writes_guarded / self.writes if self.writes else 1.0

    @property
    def asked(self) -> float:
        """The share of reads that need approval."""
        return self.reads_asked / self.reads if self.reads else 0.0

    @property
    def meets_targets(self) -> bool:
        """Whether both targets hold."""
        return self.recall >= WRITES_TARGET and self.asked <= READS_TARGET


def load(path: Path) -> list[Tool]:
    """Read a ``name,label,source`` CSV file; labels must be ``write`` or ``read``."""
    with path.open(encoding="utf-8", newline="") as file:
        reader = csv.DictReader(file)
        if reader.fieldnames != ["name", "label", "source"]:
            msg = f"{path}: the header must be name,label,source, got {reader.fieldnames}"
            raise SystemExit(msg)
        tools = []
        for number, row in enumerate(reader, start=2):
            if row["label"] not in ("write", "read"):
                msg = f"{path}:{number}: label must be write or read, got {row['label']!r}"
                raise SystemExit(msg)
            tools.append(Tool(row["name"], row["label"], row["source"]))
    return tools


def coverage(name: str, classifier: toolguard.Classifier, tools: Sequence[Tool]) -> Coverage:
    """Classify every tool and count what was guarded and what was asked."""
    result = Coverage(name, 0, 0, 0, 0)
    for tool in tools:
        needs = classifier.requires_approval(tool.name)
        if tool.label == "write":
            result.writes += 1
            if needs:
                result.writes_guarded += 1
            else:
                result.missed_writes.append(tool.name)
        else:
            result.reads += 1
            if needs:
                result.reads_asked += 1
                result.asked_reads.append(tool.name)
    return result


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(results: Sequence[Coverage]) -> str:
    """The side-by-side table."""
    header = ("classifier", "writes guarded", "reads asked", "writes target", "reads target")
    rows = [
        (
            r.classifier,
            f"{_percent(r.recall)} ({r.writes_guarded}/{r.writes})",
            f"{_percent(r.asked)} ({r.reads_asked}/{r.reads})",
            "met" if r.recall >= WRITES_TARGET else "missed",
            "met" if r.asked <= READS_TARGET else "missed",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def by_source(tools: Sequence[Tool]) -> str:
    """The default classifier's figures per source."""
    sources = sorted({tool.source for tool in tools})
    lines = [f"{'source':32} {'writes guarded':>16} {'reads asked':>13}"]
    for source in sources:
        result = coverage(
            "default", CLASSIFIERS["default"], [t for t in tools if t.source == source]
        )
        lines.append(
            f"{source:32} {result.writes_guarded:>6}/{result.writes:<4}    "
            f"{result.reads_asked:>6}/{result.reads:<4}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the coverage of each classifier; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--names", type=Path, default=DEFAULT_NAMES, help="a name,label,source CSV file"
    )
    parser.add_argument(
        "--misses", action="store_true", help="list the default's misses and needless asks"
    )
    parser.add_argument("--by-source", action="store_true", help="the default's figures per source")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    tools = load(args.names)
    results = [coverage(name, classifier, tools) for name, classifier in CLASSIFIERS.items()]
    if args.json:
        payload = [
            {**asdict(r), "recall": r.recall, "asked": r.asked, "meets_targets": r.meets_targets}
            for r in results
        ]
        print(json.dumps({"names": len(tools), "classifiers": payload}, indent=2))
        return 0
    sources = len({tool.source for tool in tools})
    print(f"{len(tools)} tool names from {sources} sources ({args.names.name})")
    print(
        f"targets: writes guarded >= {_percent(WRITES_TARGET)},"
        f" reads asked <= {_percent(READS_TARGET)}"
    )
    print()
    print(table(results))
    if args.by_source:
        print()
        print(by_source(tools))
    if args.misses:
        default = results[1]
        print()
        print(f"writes the default lets run ({len(default.missed_writes)}):")
        for name in default.missed_writes:
            print(f"  {name}: {CLASSIFIERS['default'].explain(name).reason}")
        print(f"reads the default asks about ({len(default.asked_reads)}):")
        for name in default.asked_reads:
            print(f"  {name}: {CLASSIFIERS['default'].explain(name).reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
