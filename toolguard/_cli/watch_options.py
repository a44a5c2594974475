"""The shadow and candidate options of ``toolguard serve`` and ``toolguard mcp-proxy``.

``--shadow`` runs at once every call that would wait for a person and records
what would have happened (``--shadow-all``: calls a deny rule refuses run
too); ``--candidate-rules FILE`` and ``--candidate-judge-model NAME`` evaluate
another policy on every call next to the enforced one and record its
verdicts, never enforcing them (see "Shadow mode" and "A candidate policy"
in docs/policies.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from toolguard._cli.judge import JudgeOptionError, build_judge
from toolguard._core.errors import RuleSyntaxError
from toolguard._enforce.runner import Runner
from toolguard._enforce.shadow import Candidate, ShadowMode, shadow_banner
from toolguard._policy.rules import Rules


class WatchOptionError(ValueError):
    """A shadow or candidate option cannot be used; the text (one line) says which and why."""


def add_shadow_options(parser: argparse.ArgumentParser) -> None:
    """``--shadow`` and ``--shadow-all`` on a command's parser."""
    parser.add_argument(
        "--shadow",
        action="store_true",
        help=(
            "shadow mode: calls that would wait for a person run at once, and each is recorded"
            " (audit event 'shadow', webhook review.shadow) with what would have happened;"
            " deny rules still refuse (default: off, decisions are enforced)"
        ),
    )
    parser.add_argument(
        "--shadow-all",
        action="store_true",
        help="shadow mode in which deny rules do not refuse either: every call runs, recorded",
    )


def add_watch_options(parser: argparse.ArgumentParser) -> None:
    """The shadow options, ``--candidate-rules`` and ``--candidate-judge-model`` on a parser."""
    add_shadow_options(parser)
    parser.add_argument(
        "--candidate-rules",
        metavar="FILE",
        help=(
            "evaluate these allow/ask/deny rules (TOML) on every call next to the enforced ones"
            " and record what they would have done, without enforcing them"
        ),
    )
    parser.add_argument(
        "--candidate-judge-model",
        metavar="NAME",
        help=(
            "let model NAME judge every call that would be asked, as a candidate: its verdict"
            " and whether it would have approved the call on its own are recorded, never"
            " enforced (OpenAI-compatible, as --judge-model)"
        ),
    )


def watch_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The options given, as the keyword arguments :func:`build_watch` takes, or ``None``."""
    shadow = "all" if getattr(args, "shadow_all", False) else getattr(args, "shadow", False)
    settings = {
        "shadow": shadow or None,
        "candidate_rules": getattr(args, "candidate_rules", None),
        "candidate_judge_model": getattr(args, "candidate_judge_model", None),
    }
    given = {name: value for name, value in settings.items() if value is not None}
    return given or None


def build_watch(
    shadow: ShadowMode | None = None,
    candidate_rules: str | None = None,
    candidate_judge_model: str | None = None,
) -> tuple[ShadowMode, Candidate | None]:
    """The shadow mode and the :class:`~toolguard.Candidate` of the options.

    ``shadow``: ``True``, ``"all"`` or ``None`` (off).

    Raises:
        WatchOptionError: a candidate rules file that cannot be read, or a
            candidate judge that cannot be made (see
            :func:`toolguard._cli.judge.build_judge`).
    """
    mode: ShadowMode = "all" if shadow == "all" else shadow is True
    rules = None
    if candidate_rules is not None:
        try:
            rules = Rules.from_toml(Path(candidate_rules))
        except OSError as exc:
            msg = f"--candidate-rules {candidate_rules}: cannot read the file: {exc.strerror}"
            raise WatchOptionError(msg) from None
        except RuleSyntaxError as exc:
            msg = f"--candidate-rules {candidate_rules}: {exc}"
            raise WatchOptionError(msg) from None
    judge = None
    if candidate_judge_model is not None:
        try:
            judge = build_judge(candidate_judge_model, auto_approve=True)
        except JudgeOptionError as exc:
            text = str(exc).replace("--judge-model", "--candidate-judge-model")
            raise WatchOptionError(text) from None
    candidate = Candidate(rules=rules, judge=judge) if rules or judge else None
    return mode, candidate


def watch_runner(runner: Runner, settings: dict[str, Any] | None) -> None:
    """Put ``runner`` in the shadow mode and give it the candidate of ``settings``.

    Raises:
        WatchOptionError: an option cannot be used (see :func:`build_watch`).
    """
    if not settings:
        return
    runner.shadow, runner.candidate = build_watch(**settings)


def attach_watch(chat: Any, settings: dict[str, Any] | None) -> None:
    """:func:`watch_runner` for ``toolguard serve``'s chat.

    Raises:
        ServeError: an option cannot be used.
    """
    from toolguard._cli.serve_db import ServeError  # noqa: PLC0415

    try:
        watch_runner(chat.runner, settings)
    except WatchOptionError as exc:
        raise ServeError(str(exc)) from None


def shadow_lines(args: argparse.Namespace, guarded: list[str]) -> str:
    """What ``toolguard tools --shadow`` prints above the table (nothing without the option).

    ``guarded``: the tools whose calls need approval (they run at once in shadow mode).
    """
    shadow: ShadowMode = "all" if getattr(args, "shadow_all", False) else bool(args.shadow)
    banner = shadow_banner(shadow)
    if banner is None:
        return ""
    named = ", ".join(guarded) or "(none)"
    return f"{banner}.\nRun at once in shadow mode instead of asking: {named}\n\n"
