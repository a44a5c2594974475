# ruff: noqa: S106 - the channels' secrets here are test values
"""The Slack, email and reminder options of ``serve`` and ``mcp-proxy``: each mistake is one
error line and exit code 2; the channels' own checks; the signature check's edge cases."""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from pathlib import Path

import pytest

pytest.importorskip("slack_sdk")
pytest.importorskip("fastapi")

from toolguard import Rules
from toolguard._cli.main import main
from toolguard._http.slack import verified
from toolguard._notify.slack import escape
from toolguard.notify import Email, Slack

RULES = (
    '[rules]\nask = ["send_*"]\n\n[slack]\nU0ALICE = "alice"\n\n[email]\n"*" = ["a@example.com"]\n'
)
SLACK_ENV = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")


@pytest.fixture
def rules(tmp_path: Path) -> str:
    path = tmp_path / "rules.toml"
    path.write_text(RULES, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("command", ["serve", "mcp-proxy"])
@pytest.mark.parametrize(
    ("options", "env", "line"),
    [
        (
            ["--smtp-url", "smtp://mailer:hunter2@mail.example.com", "--email-from", "t@x.io"],
            {},
            (
                "--smtp-url: put the password in TOOLGUARD_SMTP_PASSWORD, not in the URL (the"
                " command line is visible to other users of the machine)"
            ),
        ),
        (
            ["--smtp-url", "http://mail.example.com"],
            {},
            "--smtp-url: smtp_url must look like smtp://host:port or smtps://user@host:port",
        ),
        (
            ["--smtp-url", "smtp://mail.example.com"],
            {},
            "--smtp-url needs --email-from ADDRESS",
        ),
        (["--email-to", "a@example.com"], {}, "--email-from and --email-to go with --smtp-url"),
        (
            ["--slack-channel", "C1"],
            {},
            "--slack-channel needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET set in the environment",
        ),
        (
            ["--slack-channel", "C1"],
            {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"},
            (
                "--slack-channel needs a [slack] table in --rules mapping Slack user ids to"
                ' reviewer names, e.g. "U024BE7LH" = "alice"'
            ),
        ),
        (
            ["--slack-api-url", "http://127.0.0.1:9/"],
            {},
            "--slack-api-url goes with --slack-channel",
        ),
        (
            ["--remind-after", "60"],
            {},
            "--remind-after needs a channel: --slack-channel, --smtp-url or --notify-url",
        ),
        (
            ["--remind-after", "-1", "--notify-url", "http://127.0.0.1:9/", "--notify-secret", "s"],
            {},
            "--remind-after must be a positive number of seconds, got -1",
        ),
    ],
)
def test_a_mistake_is_one_error_line(  # noqa: PLR0917 - parameters and fixtures
    command: str,
    options: list[str],
    env: dict[str, str],
    line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in SLACK_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    argv = [command, "--port", "0", "--db", str(tmp_path / "db.sqlite3"), *options]
    if command == "mcp-proxy":
        argv += ["--", "true"]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"error: {line}\n"
    assert not (tmp_path / "db.sqlite3").exists()


def test_the_rules_file_keeps_its_slack_and_email_tables_apart(rules: str) -> None:
    assert Rules.from_toml(Path(rules)) == Rules(ask=["send_*"])


def test_the_channels_check_their_arguments() -> None:
    with pytest.raises(TypeError) as caught:
        Slack("C1", token="t", signing_secret="s", users={"U1": ""})
    assert str(caught.value) == (
        'users must map Slack user ids to reviewer names, e.g. {"U024BE7LH": "alice"}'
    )
    with pytest.raises(ValueError, match=r"^signing_secret must be non-empty text$"):
        Slack("C1", token="t", signing_secret=" ", users={})
    with pytest.raises(ValueError, match="once") as refused:
        Email("smtp://u:p@h", sender="t@x.io", to=["a@x.io"], password="q")
    assert str(refused.value) == "give the SMTP password once: in smtp_url or as password, not both"
    with pytest.raises(ValueError, match="addresses") as refused:
        Email("smtp://h", sender="t@x.io", to=["a@x.io\r\nBcc: e@x.io"])
    assert str(refused.value) == (
        "to must be email addresses (name@host), got 'a@x.io\\r\\nBcc: e@x.io'"
    )
    assert repr(Slack("C1", token="xoxb-secret", signing_secret="s2", users={})) == (
        "Slack('C1', token='***', signing_secret='***', users={})"
    )
    assert "hunter2" not in repr(Email("smtps://u:hunter2@h", sender="t@x.io", to=["a@x.io"]))


def test_mrkdwn_from_the_model_cannot_mention_or_link() -> None:
    assert escape("<!channel> <https://evil.example|click> & co") == (
        "&lt;!channel&gt; &lt;https://evil.example|click&gt; &amp; co"
    )


def _signature(secret: str, stamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256)
    return f"v0={mac.hexdigest()}"


@pytest.mark.parametrize(
    ("stamp", "signature", "body", "why"),
    [
        ("now", "good", b"payload=%7B%7D", None),
        ("now", "good", b"\xff\xfe", "a signature that does not match"),
        ("12a", "good", b"x", "no valid X-Slack-Request-Timestamp"),
        ("-1", "good", b"x", "no valid X-Slack-Request-Timestamp"),
        ("9" * 40, "good", b"x", "no valid X-Slack-Request-Timestamp"),
        ("old", "good", b"x", "a timestamp more than 5 minutes away"),
        ("future", "good", b"x", "a timestamp more than 5 minutes away"),
        ("now", "v1=abc", b"x", "no valid X-Slack-Signature"),
        ("now", "", b"x", "no valid X-Slack-Signature"),
        ("now", "other", b"x", "a signature that does not match"),
    ],
)
def test_the_signature_check_fails_closed(
    stamp: str, signature: str, body: bytes, why: str | None
) -> None:
    now = time.time()
    stamps = {"now": str(int(now)), "old": str(int(now) - 301), "future": str(int(now) + 301)}
    stamp = stamps.get(stamp, stamp)
    signatures = {
        "good": _signature("secret", stamp, body),
        "other": _signature("another", stamp, body),
    }
    headers = {
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signatures.get(signature, signature),
    }
    assert verified("secret", body, headers, now) == why


def test_the_gateway_keeps_its_slack_secrets_from_the_upstream(
    monkeypatch: pytest.MonkeyPatch, rules: str
) -> None:
    from toolguard._cli.notify_options import build_channels
    from toolguard._gateway.starting import upstream_environment

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    monkeypatch.setenv("TOOLGUARD_SMTP_PASSWORD", "p")
    settings = {"slack_channel": "C1"}
    (slack,) = build_channels(
        settings, rules=rules, page_url=None, reviewers=None, take_secrets=True
    )
    assert isinstance(slack, Slack)
    assert (slack.token, slack.signing_secret) == ("xoxb-1", "s")
    passed = upstream_environment(dict(os.environ))
    assert {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "TOOLGUARD_SMTP_PASSWORD"} & set(
        passed
    ) == set()
