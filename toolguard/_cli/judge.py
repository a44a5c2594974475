"""The judge options of ``toolguard serve`` and ``toolguard mcp-proxy``.

``--judge-model NAME`` gives the served chat a :class:`~toolguard.Judge`: a
model's second opinion on the proposed calls (see docs/judge.md). The judge
is an :class:`~toolguard.openai.OpenAIChatModel` named ``NAME`` on the
server of the environment's OpenAI settings: ``OPENAI_BASE_URL`` (else
OpenAI) with ``OPENAI_API_KEY`` (a local server given by
``OPENAI_BASE_URL`` needs no key). ``--judge-auto-approve`` and
``--judge-scope`` are :class:`~toolguard.Judge`'s ``auto_approve`` and
``scope``, with its defaults.
"""

from __future__ import annotations

import argparse
import os
from typing import get_args

from toolguard._enforce.judge import Judge, JudgeScope

__all__ = ["JUDGE_SCOPES", "JudgeOptionError", "add_judge_options", "build_judge", "describe_judge"]

JUDGE_SCOPES: tuple[str, ...] = get_args(JudgeScope)
"""The values of ``--judge-scope``."""

_LOCAL_API_KEY = "not-needed"  # local OpenAI-compatible servers want some key, not a real one


class JudgeOptionError(ValueError):
    """A judge option cannot be used; the text (one line) says which and why."""


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """``--judge-model``, ``--judge-auto-approve`` and ``--judge-scope`` on a command's parser."""
    parser.add_argument(
        "--judge-model",
        metavar="NAME",
        help=(
            "let model NAME give a second opinion on each call that needs approval: its risk"
            " and rationale join the review (OpenAI-compatible, at OPENAI_BASE_URL with"
            " OPENAI_API_KEY; default: no judge)"
        ),
    )
    parser.add_argument(
        "--judge-auto-approve",
        action="store_true",
        help=(
            "let the judge run a call without a person when it finds it low-risk and asked for"
            " by the user (default: off, the verdict only informs the reviewer)"
        ),
    )
    parser.add_argument(
        "--judge-scope",
        metavar="SCOPE",
        help=(
            "guarded: judge the calls that need approval; all: every call, and the judge's"
            " 'ask' sends a call that would run at once to a person (default: guarded)"
        ),
    )


def build_judge(
    model: str | None, *, auto_approve: bool = False, scope: str | None = None
) -> Judge | None:
    """The :class:`~toolguard.Judge` of the options, or ``None`` without ``--judge-model``.

    Args:
        model: ``--judge-model``: the judge model's name.
        auto_approve: ``--judge-auto-approve``.
        scope: ``--judge-scope``: ``guarded`` (when ``None``) or ``all``.

    Raises:
        JudgeOptionError: ``--judge-auto-approve`` or ``--judge-scope``
            without ``--judge-model``, an unknown scope, an empty model name,
            the ``openai`` extra missing, or no OpenAI settings in the
            environment; the text says which.
    """
    if model is None:
        if auto_approve:
            msg = "--judge-auto-approve needs --judge-model NAME"
            raise JudgeOptionError(msg)
        if scope is not None:
            msg = "--judge-scope needs --judge-model NAME"
            raise JudgeOptionError(msg)
        return None
    if scope is not None and scope not in JUDGE_SCOPES:
        msg = f"--judge-scope must be guarded or all, got {scope!r}"
        raise JudgeOptionError(msg)
    if not model.strip():
        msg = f"--judge-model needs a model name, got {model!r}"
        raise JudgeOptionError(msg)
    try:
        import openai  # noqa: PLC0415 - the openai extra is optional

        from toolguard.openai import OpenAIChatModel  # noqa: PLC0415
    except ImportError as exc:
        msg = (
            f"--judge-model needs the 'openai' extra ({exc}): pip install 'toolguard-hitl[openai]'"
        )
        raise JudgeOptionError(msg) from exc
    url = os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get("OPENAI_API_KEY") or (_LOCAL_API_KEY if url is not None else None)
    if api_key is None:
        msg = (
            "--judge-model needs an API key: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local"
            " OpenAI-compatible server"
        )
        raise JudgeOptionError(msg)
    client = openai.AsyncOpenAI(api_key=api_key, base_url=url)
    judge_model = OpenAIChatModel(client, model=model)
    return Judge(
        judge_model, auto_approve=auto_approve, scope="all" if scope == "all" else "guarded"
    )


def describe_judge(judge: Judge) -> str:
    """The judge in a command's startup line, e.g. ``gpt-4o-mini (informs, scope guarded)``."""
    mode = "auto-approves" if judge.auto_approve else "informs"
    return f"{judge.model_name} ({mode}, scope {judge.scope})"
