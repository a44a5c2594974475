"""An SMTP server on 127.0.0.1 (aiosmtpd) that keeps every message it is given."""

from __future__ import annotations

import email
import email.policy
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import pytest

from tests.helpers import free_port


@dataclass
class Mailbox:
    """What the server took: ``(envelope sender, recipients, message)``."""

    host: str = "127.0.0.1"
    port: int = 0
    mails: list[tuple[str, list[str], EmailMessage]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.lock:
            self.mails.append((envelope.mail_from, list(envelope.rcpt_tos), message))  # type: ignore[arg-type]
        return "250 Message accepted for delivery"

    def about(self, thread_id: str) -> list[EmailMessage]:
        """The messages that name ``thread_id``."""
        with self.lock:
            return [m for _, _, m in self.mails if thread_id in m.get_content()]

    def wait_for(self, thread_id: str, count: int = 1, timeout: float = 10.0) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.about(thread_id)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        pytest.fail(f"{len(self.about(thread_id))} mails about {thread_id}, not {count}")


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """An SMTP server on a free loopback port."""
    from aiosmtpd.controller import Controller

    box = Mailbox(port=free_port())
    controller = Controller(box, hostname="127.0.0.1", port=box.port)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
