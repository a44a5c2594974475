"""``toolguard replay``: past decisions of people, put to candidate rules and/or a judge.

The recorded calls a person decided (their redacted arguments and the
person's own messages) go through ``--rules FILE`` and/or a judge
(``--judge-model NAME``, OpenAI-compatible with the settings of
``toolguard serve --judge-model``, or ``--heuristic-judge``, offline); the
report is :func:`toolguard._chat.replay.replay`: false auto-approvals, needless
asks and false denials per tool, and the worst cases. Nothing is changed in
the database and no tool runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from toolguard._chat.replay import WORST, decided_calls, format_replay, replay
from toolguard._cli.judge import JudgeOptionError, build_judge
from toolguard._cli.records import (
    RecordsError,
    add_records_options,
    fail,
    period_of,
    read_records,
)
from toolguard._cli.startup import one_line
from toolguard._core.errors import RuleSyntaxError
from toolguard._core.llm import close_client
from toolguard._enforce.heuristic import HeuristicJudgeModel
from toolguard._enforce.judge import Judge
from toolguard._policy.rules import Rules

__all__ = ["add_parser", "run_replay"]


def _worst(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"expected a number of cases (0 or more), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_parser(commands: Any) -> None:
    """The ``replay`` command, on the ``toolguard`` parser's subcommands."""
    command = commands.add_parser(
        "replay",
        help="replay past decisions through candidate rules or a judge",
        description=(
            "Put the calls people decided to candidate rules and/or a judge, and report where"
            " they would have disagreed: false auto-approvals (would have run what a person"
            " rejected or edited), needless asks (would have asked what a person approved"
            " unedited) and false denials, per tool, with the worst cases. Only the arguments as"
            " reviewers saw them (secrets redacted) and the person's own messages are used;"
            " nothing runs and nothing is changed."
        ),
    )
    add_records_options(command)
    command.add_argument(
        "--rules",
        metavar="FILE",
        help="candidate allow/ask/deny rules (TOML, as toolguard serve --rules)",
    )
    command.add_argument(
        "--judge-model",
        metavar="NAME",
        help=(
            "a candidate judge: model NAME, OpenAI-compatible, at OPENAI_BASE_URL with"
            " OPENAI_API_KEY; it runs a call it finds low-risk and asked for"
        ),
    )
    command.add_argument(
        "--heuristic-judge",
        action="store_true",
        help="a candidate judge offline: a few fixed rules instead of a model (a baseline)",
    )
    command.add_argument(
        "--worst",
        type=_worst,
        default=WORST,
        metavar="N",
        help=f"list at most N worst cases (default: {WORST})",
    )
    command.set_defaults(handler=run_replay)


def _candidate(args: argparse.Namespace) -> tuple[Rules | None, Judge | None, dict[str, str]]:
    """The candidate rules and judge of the options, and how the report names them.

    Raises:
        RecordsError: no candidate, both judges, or a rules file or judge that cannot be used.
    """
    if args.judge_model is not None and args.heuristic_judge:
        msg = "--judge-model and --heuristic-judge exclude each other"
        raise RecordsError(msg)
    if args.rules is None and args.judge_model is None and not args.heuristic_judge:
        msg = "give a candidate: --rules FILE, --judge-model NAME or --heuristic-judge"
        raise RecordsError(msg)
    named: dict[str, str] = {}
    rules = None
    if args.rules is not None:
        try:
            rules = Rules.from_toml(Path(args.rules))
        except (OSError, RuleSyntaxError) as exc:
            msg = f"--rules {args.rules}: {one_line(exc)}"
            raise RecordsError(msg) from None
        named["rules"] = args.rules
    judge = None
    if args.heuristic_judge:
        judge = Judge(HeuristicJudgeModel(), auto_approve=True)
    elif args.judge_model is not None:
        try:
            judge = build_judge(args.judge_model, auto_approve=True)
        except JudgeOptionError as exc:
            raise RecordsError(str(exc)) from None
    if judge is not None:
        named["judge"] = judge.model_name
    return rules, judge, named


async def _replay(args: argparse.Namespace) -> dict[str, Any]:
    since, until = period_of(args)
    rules, judge, named = _candidate(args)
    try:
        calls = decided_calls(await read_records(args.db), since=since, until=until)
        return await replay(
            calls,
            rules=rules,
            judge=judge,
            since=since,
            until=until,
            worst=args.worst,
            candidate=named,
        )
    finally:
        if judge is not None:
            await close_client(judge.model)


def run_replay(args: argparse.Namespace) -> int:
    """Print the replay of ``--db`` (``--json``: one JSON object); 2 on a setup error."""
    try:
        report = anyio.run(_replay, args)
    except RecordsError as exc:
        return fail(exc)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(format_replay(report))
    return 0
