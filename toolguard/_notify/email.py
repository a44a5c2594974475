"""Email: one message per review, and one per reminder, with a link to the page (:class:`Email`).

Sent with aiosmtplib (the ``email`` extra) through the durable outbox. A message decides
nothing: its only link leads to the review on the approval page, which needs sign-in (mail
scanners open every link they find).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from email.message import EmailMessage
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

import anyio

from toolguard._notify.channels import Retrying, Sent
from toolguard._notify.facts import ReviewFacts, shown_args
from toolguard._policy.reviewers import Reviewers

if TYPE_CHECKING:
    from toolguard._stores.outbox import OutboxItem
    from toolguard._stores.protocol import ThreadState

__all__ = ["PASSWORD_ENV", "Email", "SmtpServer", "parse_smtp_url"]

PASSWORD_ENV: Final = "TOOLGUARD_SMTP_PASSWORD"  # noqa: S105 - a variable's name
"""The environment variable ``toolguard serve`` and ``mcp-proxy`` read the SMTP password from."""
_EVENTS: Final = frozenset({"review.requested", "review.reminder"})


class SmtpServer:
    """The parts of an ``smtp[s]://[user[:password]@]host[:port]`` URL."""

    def __init__(self, url: str) -> None:
        given: object = url
        if not isinstance(given, str):
            msg = f"smtp_url must be text, got {type(url).__name__}"
            raise TypeError(msg)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            msg = f"smtp_url is not a valid URL: {exc}"
            raise ValueError(msg) from None
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            msg = "smtp_url must look like smtp://host:port or smtps://user@host:port"
            raise ValueError(msg)
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            msg = "smtp_url takes no path, query or fragment: smtp[s]://[user@]host[:port]"
            raise ValueError(msg)
        self.tls = parts.scheme == "smtps"
        self.host = parts.hostname
        self.port = port if port is not None else (465 if self.tls else 25)
        self.user = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password is not None else None

    def __repr__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        return f"{'smtps' if self.tls else 'smtp'}://{user}{self.host}:{self.port}"


def parse_smtp_url(url: str) -> SmtpServer:
    """The parts of an SMTP URL (see :class:`SmtpServer`); ``ValueError`` when it is not one."""
    return SmtpServer(url)


def _addresses(values: Iterable[object], label: str) -> list[str]:
    found: list[str] = []
    for value in values:
        if not isinstance(value, str) or "@" not in value or any(c in value for c in "\r\n,<>"):
            msg = f"{label} must be email addresses (name@host), got {value!r}"
            raise ValueError(msg)
        found.append(value.strip())
    return found


class Email(Retrying):
    """Mail each review (and each reminder) to reviewers through SMTP (``notify=``).

    Args:
        smtp_url: ``smtp://host[:port]`` (STARTTLS when the server offers it) or
            ``smtps://host[:port]`` (TLS from the start), with ``user@`` when the server
            wants a login.
        sender: the ``From`` address.
        to: who gets every review.
        per_tool: tool-name glob → addresses (the ``[email]`` table of a rules file); a
            tool's most specific key counts, as in ``[reviewers]``.
        password: the SMTP password (``toolguard serve`` reads ``TOOLGUARD_SMTP_PASSWORD``).
        page_url: the approval page's address, linked from each message.
        reviewers: who may decide which tool (shown in the message).
        timeout: seconds one delivery may take.
        backoff: seconds before the first retry of a failed send.
        max_backoff: the longest wait between retries.

    Raises:
        TypeError, ValueError: an argument is not valid (the text says which).
    """

    name = "email"

    def __init__(
        self,
        smtp_url: str,
        *,
        sender: str,
        to: Sequence[str] = (),
        per_tool: Mapping[str, Sequence[str]] | None = None,
        password: str | None = None,
        page_url: str | None = None,
        reviewers: Reviewers | None = None,
        timeout: float = 30.0,
        backoff: float = 5.0,
        max_backoff: float = 600.0,
    ) -> None:
        self.server = SmtpServer(smtp_url)
        if self.server.password is not None and password is not None:
            msg = "give the SMTP password once: in smtp_url or as password, not both"
            raise ValueError(msg)
        self.password = password if password is not None else self.server.password
        (self.sender,) = _addresses([sender], "sender")
        self.to = _addresses(list(to), "to")
        self.per_tool = Reviewers(per_tool) if per_tool else None
        if self.per_tool is not None:
            for names in self.per_tool.table.values():
                _addresses(names, "the [email] table's lists")
        if not self.to and self.per_tool is None:
            msg = "an email channel needs recipients: to=[...] or per_tool={...}"
            raise ValueError(msg)
        self._retrying(timeout, backoff, max_backoff)
        self.page_url = page_url
        self.reviewers = reviewers

    def __repr__(self) -> str:
        return f"Email({self.server!r}, sender={self.sender!r}, to={self.to!r})"

    def wants(self, event: str) -> bool:
        """A review's request and its reminders."""
        return event in _EVENTS

    def recipients(self, tools: Iterable[str]) -> list[str]:
        """``to`` and the ``per_tool`` addresses of each tool, each once."""
        found = list(self.to)
        if self.per_tool is not None:
            for tool in tools:
                found.extend(self.per_tool.names_for(tool))
        return list(dict.fromkeys(found))

    def message(self, item: OutboxItem, state: ThreadState) -> EmailMessage:
        """The message of ``item``: the review's facts and the link to the page."""
        facts = ReviewFacts.of(item.body, state, page_url=self.page_url, who=self._who)
        reminder = item.body.get("event") == "review.reminder"
        subject = f"Approval needed: {facts.tools}"
        if reminder:
            subject = f"Reminder {item.body.get('reminder', 1)}: {subject}"
        lines = [
            f"{'Still waiting' if reminder else 'Waiting'} for a decision: {facts.tools}.",
            "",
        ]
        for call in facts.calls:
            lines.append(f"{call.tool}: {call.why}")
            if call.progress is not None:
                lines.append(f"Approvals: {call.progress[0]} of {call.progress[1]}")
            lines.extend(f"    {line}" for line in shown_args(call.args).splitlines())
            lines.append("")
        lines.extend(facts.verdicts)
        lines.append(f"Who may decide: {facts.deciders_text()}")
        lines.append(f"Deadline: {facts.deadline_text()}")
        lines.append(f"Thread: {facts.thread_id}")
        lines.append("")
        if facts.link is not None:
            lines.append(f"Decide on the approval page (sign-in needed): {facts.link}")
        lines.append("Opening this message or its link decides nothing.")
        mail = EmailMessage()
        mail["From"] = self.sender
        mail["To"] = ", ".join(self.recipients(c.tool for c in facts.calls))
        mail["Subject"] = subject.replace("\r", " ").replace("\n", " ")[:200]
        mail["Message-ID"] = f"<{item.id}@toolguard>"
        mail.set_content("\n".join(lines))
        return mail

    async def send(self, item: OutboxItem, state: ThreadState) -> Sent:
        """Deliver ``item``'s message; ``Sent(None)`` once the server took it."""
        import aiosmtplib  # noqa: PLC0415 - the email extra

        mail = self.message(item, state)
        if not mail["To"]:
            return Sent(None)  # nobody to tell about these tools
        server = self.server
        try:
            with anyio.CancelScope(shield=True):
                await aiosmtplib.send(
                    mail,
                    hostname=server.host,
                    port=server.port,
                    username=server.user,
                    password=self.password if server.user else None,
                    use_tls=server.tls,
                    timeout=self.timeout,
                )
        except (aiosmtplib.SMTPException, OSError) as exc:
            return Sent(f"{type(exc).__name__}: {exc}"[:200])
        return Sent(None)

    def _who(self, tool: str) -> Sequence[str]:
        return self.reviewers.names_for(tool) if self.reviewers is not None else ()
