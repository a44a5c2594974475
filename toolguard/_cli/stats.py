"""``toolguard stats``: per tool, how its calls were decided, how fast, by whom, and suggestions.

The numbers are :func:`toolguard._chat.stats.compute_stats` of the recorded
database, the same as ``GET /hitl/stats`` and the page's panel give.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio

from toolguard._chat.stats import compute_stats, format_stats
from toolguard._cli.records import (
    RecordsError,
    add_records_options,
    fail,
    period_of,
    read_records,
)

__all__ = ["add_parser", "run_stats"]


def add_parser(commands: Any) -> None:
    """The ``stats`` command, on the ``toolguard`` parser's subcommands."""
    stats = commands.add_parser(
        "stats",
        help="approval statistics per tool, with suggestions",
        description=(
            "Per tool: calls, asks, how people decided (approved unedited, edited, rejected,"
            " expired, cancelled), the calls that ran without a person (by a standing grant,"
            " the judge or shadow mode), the median and 90th percentile time to decide, who"
            " decided how often, and what the numbers suggest."
        ),
    )
    add_records_options(stats)
    stats.set_defaults(handler=run_stats)


def run_stats(args: argparse.Namespace) -> int:
    """Print the statistics of ``--db`` (``--json``: one JSON object); 2 on a setup error."""
    try:
        since, until = period_of(args)
        states = anyio.run(read_records, args.db)
    except RecordsError as exc:
        return fail(exc)
    report = compute_stats(states, since=since, now=until)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(format_stats(report))
    return 0
