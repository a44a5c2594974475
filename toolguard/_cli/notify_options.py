"""The options of ``serve`` and ``mcp-proxy`` that reach reviewers: Slack, email, reminders.

``--slack-channel`` (with ``SLACK_BOT_TOKEN`` and ``SLACK_SIGNING_SECRET`` in the
environment, and the ``[slack]`` table of ``--rules``), ``--slack-api-url``, ``--smtp-url``
(the password in ``TOOLGUARD_SMTP_PASSWORD``, never on the command line), ``--email-from``,
``--email-to`` (or the ``[email]`` table), ``--remind-after`` and ``--page-url``.
:func:`notify_settings` checks them into a JSON object (``serve --workers`` hands it to each
worker); :func:`build_channels` makes the channels of a chat from it.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any, Final

from toolguard._core.errors import RuleSyntaxError
from toolguard._notify.email import PASSWORD_ENV, Email, SmtpServer
from toolguard._notify.slack import Slack
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.rules import load_toml

__all__ = [
    "SIGNING_SECRET_ENV",
    "TOKEN_ENV",
    "add_notify_options",
    "build_channels",
    "notify_arguments",
    "notify_settings",
]

TOKEN_ENV: Final = "SLACK_BOT_TOKEN"  # noqa: S105 - a variable's name
"""The environment variable of the Slack bot token (as Slack's own tooling names it)."""
SIGNING_SECRET_ENV: Final = "SLACK_SIGNING_SECRET"  # noqa: S105 - a variable's name
"""The environment variable of the Slack app's signing secret."""


def add_notify_options(parser: argparse.ArgumentParser) -> None:
    """``--slack-channel``, ``--slack-api-url``, ``--smtp-url``, ``--email-from``,
    ``--email-to``, ``--remind-after`` and ``--page-url``."""
    parser.add_argument(
        "--slack-channel",
        metavar="CHANNEL_ID",
        help=(
            "post each review to this Slack channel with Approve / Reject buttons; needs"
            f" {TOKEN_ENV}, {SIGNING_SECRET_ENV} and a [slack] table in --rules (default: none)"
        ),
    )
    parser.add_argument(
        "--slack-api-url",
        metavar="URL",
        help="another Slack-compatible Web API (default: https://slack.com/api/)",
    )
    parser.add_argument(
        "--smtp-url",
        metavar="URL",
        help=(
            "mail each review through smtp://[user@]host[:port] or smtps://...; the password"
            f" comes from {PASSWORD_ENV} (default: none)"
        ),
    )
    parser.add_argument("--email-from", metavar="ADDRESS", help="the From address of the mails")
    parser.add_argument(
        "--email-to",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="mail every review to ADDRESS (repeatable; or an [email] table in --rules)",
    )
    parser.add_argument(
        "--remind-after",
        type=float,
        metavar="SECONDS",
        help="remind every channel of a review still waiting, once per SECONDS (default: never)",
    )
    parser.add_argument(
        "--page-url",
        metavar="URL",
        help="the approval page's address in messages (default: the address served)",
    )


def notify_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The options as given (``None`` left out): what :func:`notify_settings` checks."""
    given = {
        "slack_channel": getattr(args, "slack_channel", None),
        "slack_api_url": getattr(args, "slack_api_url", None),
        "smtp_url": getattr(args, "smtp_url", None),
        "email_from": getattr(args, "email_from", None),
        "email_to": list(getattr(args, "email_to", None) or []) or None,
        "remind_after": getattr(args, "remind_after", None),
        "page_url": getattr(args, "page_url", None),
    }
    return {name: value for name, value in given.items() if value is not None}


def notify_settings(given: dict[str, Any], *, rules: str | None, webhook: bool) -> dict[str, Any]:
    """The checked settings (JSON) of the options in ``given`` (see :func:`notify_arguments`).

    Raises:
        ValueError: an option cannot be used; the text is the error line.
    """
    settings = dict(given)
    if "slack_channel" in settings:
        missing = [n for n in (TOKEN_ENV, SIGNING_SECRET_ENV) if not os.environ.get(n)]
        if missing:
            msg = f"--slack-channel needs {' and '.join(missing)} set in the environment"
            raise ValueError(msg)
        if not _tables(rules).get("slack"):
            msg = (
                "--slack-channel needs a [slack] table in --rules mapping Slack user ids to"
                ' reviewer names, e.g. "U024BE7LH" = "alice"'
            )
            raise ValueError(msg)
    elif "slack_api_url" in settings:
        msg = "--slack-api-url goes with --slack-channel"
        raise ValueError(msg)
    if "smtp_url" in settings:
        try:
            server = SmtpServer(settings["smtp_url"])
        except ValueError as exc:
            msg = f"--smtp-url: {exc}"
            raise ValueError(msg) from None
        if server.password is not None:
            msg = (
                f"--smtp-url: put the password in {PASSWORD_ENV}, not in the URL (the command"
                " line is visible to other users of the machine)"
            )
            raise ValueError(msg)
        if "email_from" not in settings:
            msg = "--smtp-url needs --email-from ADDRESS"
            raise ValueError(msg)
        if "email_to" not in settings and not _tables(rules).get("email"):
            msg = "--smtp-url needs --email-to ADDRESS or an [email] table in --rules"
            raise ValueError(msg)
    elif "email_from" in settings or "email_to" in settings:
        msg = "--email-from and --email-to go with --smtp-url"
        raise ValueError(msg)
    every = settings.get("remind_after")
    if every is not None:
        if not (math.isfinite(every) and every > 0):
            msg = f"--remind-after must be a positive number of seconds, got {every:g}"
            raise ValueError(msg)
        if not (webhook or "slack_channel" in settings or "smtp_url" in settings):
            msg = "--remind-after needs a channel: --slack-channel, --smtp-url or --notify-url"
            raise ValueError(msg)
    build_channels(settings, rules=rules, page_url=None, reviewers=None)  # every other check
    return settings


def build_channels(
    settings: dict[str, Any],
    *,
    rules: str | None,
    page_url: str | None,
    reviewers: Reviewers | None,
    take_secrets: bool = False,
) -> list[Slack | Email]:
    """The Slack and email channels of checked ``settings`` (see :func:`notify_settings`).

    ``take_secrets``: remove the Slack token, signing secret and SMTP password from this
    process's environment once read (``mcp-proxy``: its upstream server inherits the rest).

    Raises:
        ValueError: a channel cannot be made; the text is the error line.
    """
    tables = _tables(rules)
    page = settings.get("page_url") or page_url
    channels: list[Slack | Email] = []
    if "slack_channel" in settings:
        try:
            channels.append(
                Slack(
                    settings["slack_channel"],
                    token=os.environ.get(TOKEN_ENV, ""),
                    signing_secret=os.environ.get(SIGNING_SECRET_ENV, ""),
                    users=tables.get("slack") or {},
                    api_url=settings.get("slack_api_url"),
                    page_url=page,
                    reviewers=reviewers,
                )
            )
        except (TypeError, ValueError) as exc:
            msg = (
                f"--slack-channel: {exc}"
                if "users" not in str(exc)
                else f"--rules {rules}: [slack] {exc}"
            )
            raise ValueError(msg) from None
    if "smtp_url" in settings:
        try:
            channels.append(
                Email(
                    settings["smtp_url"],
                    sender=settings["email_from"],
                    to=settings.get("email_to") or (),
                    per_tool=tables.get("email") or None,
                    password=os.environ.get(PASSWORD_ENV) or None,
                    page_url=page,
                    reviewers=reviewers,
                )
            )
        except (TypeError, ValueError, RuleSyntaxError) as exc:
            msg = f"--smtp-url/--email-from/--email-to: {exc}"
            raise ValueError(msg) from None
    if take_secrets and channels:
        for name in (TOKEN_ENV, SIGNING_SECRET_ENV, PASSWORD_ENV):
            os.environ.pop(name, None)
    return channels


def _tables(rules: str | None) -> dict[str, Any]:
    """The ``[slack]`` and ``[email]`` tables of the rules file (either may be missing)."""
    if rules is None:
        return {}
    try:
        data = load_toml(Path(rules).read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"--rules {rules}: cannot read the file: {exc.strerror or exc}"
        raise ValueError(msg) from None
    except RuleSyntaxError as exc:
        msg = f"--rules {rules}: {exc}"
        raise ValueError(msg) from None
    found: dict[str, Any] = {}
    for name in ("slack", "email"):
        table = data.get(name)
        if table is not None and not isinstance(table, dict):
            msg = f"--rules {rules}: [{name}] must be a table"
            raise ValueError(msg)
        if table is not None:
            found[name] = table
    return found


def served_channels(
    given: dict[str, Any] | None, rules: str | None, notify_url: str | None, page_url: str
) -> dict[str, Any] | None:
    """``toolguard serve``'s checked settings (the page's address filled in), or ``None``.

    Raises:
        ServeError: an option cannot be used.
    """
    from toolguard._cli.serve_db import ServeError  # noqa: PLC0415

    if not given:
        return None
    try:
        settings = notify_settings(given, rules=rules, webhook=notify_url is not None)
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    return {"page_url": page_url, **settings}


def attach_channels(chat: Any, settings: dict[str, Any] | None, rules: str | None) -> None:
    """Give ``chat`` the channels of ``settings`` beside its webhook, and its reminders.

    Raises:
        ServeError: a channel cannot be made.
    """
    from toolguard._cli.serve_db import ServeError  # noqa: PLC0415

    if not settings:
        return
    reviewers = chat.authorize if isinstance(chat.authorize, Reviewers) else None
    try:
        channels = build_channels(settings, rules=rules, page_url=None, reviewers=reviewers)
    except ValueError as exc:
        raise ServeError(str(exc)) from None
    webhook = [chat.notify] if chat.notify is not None else []
    chat.notify = [*webhook, *channels] or None
    chat.remind_after = settings.get("remind_after")
