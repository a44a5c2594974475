"""The demo workspace: a mailbox, a calendar and a task list in memory, and their tools.

* :class:`DemoWorkspace` keeps them, seeded with a few items. Its methods are
  the tools, typed and documented like real ones (the docstrings become the
  JSON schemas).
* :func:`demo_toolset` guards them with the default classifier: the reads
  (``search_mail``, ``read_email``, ``list_events``, ``list_tasks``) run at
  once, the writes (``send_email``, ``create_event``, ``delete_event``,
  ``add_task``, ``complete_task``) wait for a human.
* :func:`demo_system_prompt` tells a real model the date, the contacts and
  how reviews work.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from types import MappingProxyType
from typing import Any, Final

from toolguard._tools.toolset import Toolset, guard

__all__ = [
    "DEMO_CONTACTS",
    "DEMO_TODAY",
    "EMAIL_RE",
    "WEEKDAYS",
    "DemoWorkspace",
    "demo_system_prompt",
    "demo_toolset",
    "iso_minutes",
    "weekday",
]


DEMO_TODAY: Final = date(2025, 6, 2)
"""The demo's fixed "today" (a Monday), so that every run shows the same dates."""

DEMO_CONTACTS: Final[Mapping[str, str]] = MappingProxyType(
    {"alice": "alice@example.com", "bob": "bob@example.com", "carol": "carol@example.com"}
)
"""The demo user's contacts: first name (lowercase) to address."""

WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
"""The days of the week, lowercase, Monday first (as ``date.weekday()`` counts)."""

EMAIL_RE: Final = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
"""An email address, as the workspace accepts it and the model finds it in a message."""


def weekday(day: date) -> str:
    """The English name of the day of the week (\"Monday\"), whatever the locale."""
    return WEEKDAYS[day.weekday()].capitalize()


def iso_minutes(moment: datetime) -> str:
    """``moment`` as ISO text to the minute (``2025-06-02T10:00``), as the tools show times."""
    return moment.isoformat(timespec="minutes")


# ---------------------------------------------------------------------------- the workspace


@dataclass(slots=True, kw_only=True)
class Email:
    """One email of the demo mailbox."""

    id: str
    sender: str
    to: str
    subject: str
    body: str
    day: date

    def summary(self) -> dict[str, str]:
        """What a search shows: id, sender, subject and date."""
        return {
            "id": self.id,
            "from": self.sender,
            "subject": self.subject,
            "date": self.day.isoformat(),
        }


@dataclass(slots=True, kw_only=True)
class Event:
    """One calendar event."""

    id: str
    title: str
    start: datetime
    end: datetime
    attendees: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON data (times to the minute)."""
        return {
            "id": self.id,
            "title": self.title,
            "start": iso_minutes(self.start),
            "end": iso_minutes(self.end),
            "attendees": list(self.attendees),
        }


@dataclass(slots=True, kw_only=True)
class Task:
    """One entry of the task list."""

    id: str
    title: str
    due: date | None = None
    done: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The task as JSON data."""
        return {
            "id": self.id,
            "title": self.title,
            "due": self.due.isoformat() if self.due is not None else None,
            "done": self.done,
        }


class DemoWorkspace:
    """A mailbox, a calendar and a task list in memory, seeded with a few items.

    The public methods are the demo's tools. Dates are relative to
    ``today`` (by default the fixed :data:`DEMO_TODAY`), so a run always
    shows the same data.

    Args:
        today: the workspace's "today".
        owner: the user's own address (the sender of sent mail).
        contacts: first name (lowercase) to address.

    Attributes:
        inbox: received emails, oldest first.
        sent: emails sent through :meth:`send_email`, in order.
        events: calendar events by id.
        tasks: tasks by id.
    """

    def __init__(
        self,
        *,
        today: date = DEMO_TODAY,
        owner: str = "you@example.com",
        contacts: Mapping[str, str] = DEMO_CONTACTS,
    ) -> None:
        self.today = today
        self.owner = owner
        self.contacts = dict(contacts)

        def day(offset: int) -> date:
            return today + timedelta(days=offset)

        def at(offset: int, hour: int, minute: int = 0) -> datetime:
            d = day(offset)
            return datetime(d.year, d.month, d.day, hour, minute)

        alice, bob, carol = (self.contacts.get(n, f"{n}@example.com") for n in DEMO_CONTACTS)
        self.inbox: list[Email] = [
            Email(
                id="m-1",
                sender=alice,
                to=owner,
                subject="Project kickoff",
                body="Hi! Can we keep the kickoff at 10 tomorrow? I will bring the slides. Alice",
                day=day(-3),
            ),
            Email(
                id="m-2",
                sender=bob,
                to=owner,
                subject="Q3 budget draft",
                body="Here is the Q3 budget draft. Please review it by Friday. Bob",
                day=day(-2),
            ),
            Email(
                id="m-3",
                sender=carol,
                to=owner,
                subject="Lunch on Wednesday?",
                body="Are you free for lunch on Wednesday at 12:30? Carol",
                day=day(-1),
            ),
        ]
        self.sent: list[Email] = []
        self.events: dict[str, Event] = {
            e.id: e
            for e in (
                Event(
                    id="evt-1",
                    title="Team standup",
                    start=at(0, 9, 30),
                    end=at(0, 9, 45),
                    attendees=[alice, bob],
                ),
                Event(
                    id="evt-2",
                    title="Project kickoff",
                    start=at(1, 10),
                    end=at(1, 11),
                    attendees=[alice, carol],
                ),
                Event(
                    id="evt-3", title="Dentist", start=at(1, 16), end=at(1, 16, 45), attendees=[]
                ),
                Event(
                    id="evt-4",
                    title="1:1 with Bob",
                    start=at(2, 14),
                    end=at(2, 14, 30),
                    attendees=[bob],
                ),
            )
        }
        self.tasks: dict[str, Task] = {
            t.id: t
            for t in (
                Task(id="task-1", title="Review the Q3 budget draft", due=day(4)),
                Task(id="task-2", title="Book flights for the offsite"),
                Task(id="task-3", title="Renew passport", due=day(28), done=True),
            )
        }
        self._next_ids = {"sent": 1, "evt": len(self.events) + 1, "task": len(self.tasks) + 1}

    def _new_id(self, kind: str) -> str:
        number = self._next_ids[kind]
        self._next_ids[kind] = number + 1
        return f"{kind}-{number}"

    def tools(self) -> list[Callable[..., Any]]:
        """The tools, reads and writes, in the order the model sees them."""
        return [
            self.search_mail,
            self.read_email,
            self.send_email,
            self.list_events,
            self.create_event,
            self.delete_event,
            self.list_tasks,
            self.add_task,
            self.complete_task,
        ]

    # ------------------------------------------------------------------ mail

    def search_mail(self, query: str) -> list[dict[str, str]]:
        """Search the mailbox: emails whose sender, subject or text hold every word of the query.

        Args:
            query: Words to look for, such as a name or a topic. An empty query lists every email.
        """
        words = query.lower().split()
        found = []
        for email in self.inbox:
            text = f"{email.sender} {email.subject} {email.body}".lower()
            if all(word in text for word in words):
                found.append(email.summary())
        return found

    def read_email(self, email_id: str) -> dict[str, str]:
        """Read one email in full.

        Args:
            email_id: The email's id, as given by search_mail (e.g. "m-2").
        """
        for email in [*self.inbox, *self.sent]:
            if email.id == email_id:
                return {**email.summary(), "to": email.to, "body": email.body}
        msg = f"There is no email with the id {email_id!r}"
        raise ValueError(msg)

    def send_email(self, to: str, subject: str, body: str) -> dict[str, str]:
        """Send an email from the user's address.

        Args:
            to: The recipient's email address.
            subject: The subject line.
            body: The text of the email.
        """
        if not EMAIL_RE.fullmatch(to):
            msg = f"{to!r} is not an email address"
            raise ValueError(msg)
        email = Email(
            id=self._new_id("sent"),
            sender=self.owner,
            to=to,
            subject=subject,
            body=body,
            day=self.today,
        )
        self.sent.append(email)
        return {"id": email.id, "status": "sent", "to": to, "subject": subject}

    # ------------------------------------------------------------------ calendar

    def list_events(self, day: date) -> list[dict[str, Any]]:
        """List the calendar events of one day, earliest first.

        Args:
            day: The day, as YYYY-MM-DD.
        """
        events = sorted(
            (e for e in self.events.values() if e.start.date() == day), key=lambda e: e.start
        )
        return [e.to_dict() for e in events]

    def create_event(
        self, title: str, start: datetime, end: datetime, attendees: list[str] | None = None
    ) -> dict[str, Any]:
        """Create a calendar event and invite the attendees.

        Args:
            title: A short title for the event.
            start: When it starts, as YYYY-MM-DDTHH:MM.
            end: When it ends, as YYYY-MM-DDTHH:MM.
            attendees: Email addresses of the people to invite.
        """
        if end <= start:
            msg = (
                f"The event must end after it starts"
                f" (start {iso_minutes(start)}, end {iso_minutes(end)})"
            )
            raise ValueError(msg)
        event = Event(
            id=self._new_id("evt"),
            title=title,
            start=start,
            end=end,
            attendees=list(attendees or []),
        )
        self.events[event.id] = event
        return event.to_dict()

    def delete_event(self, event_id: str) -> dict[str, str]:
        """Delete a calendar event.

        Args:
            event_id: The event's id, as given by list_events (e.g. "evt-2").
        """
        event = self.events.pop(event_id, None)
        if event is None:
            msg = f"There is no event with the id {event_id!r}"
            raise ValueError(msg)
        return {"id": event.id, "title": event.title, "status": "deleted"}

    # ------------------------------------------------------------------ tasks

    def list_tasks(self) -> list[dict[str, Any]]:
        """List every task, open or done."""
        return [t.to_dict() for t in self.tasks.values()]

    def add_task(self, title: str, due: date | None = None) -> dict[str, Any]:
        """Add a task to the task list.

        Args:
            title: What needs doing.
            due: The day it is due, as YYYY-MM-DD, if any.
        """
        task = Task(id=self._new_id("task"), title=title, due=due)
        self.tasks[task.id] = task
        return task.to_dict()

    def complete_task(self, task_id: str) -> dict[str, Any]:
        """Mark a task as done.

        Args:
            task_id: The task's id, as given by list_tasks (e.g. "task-2").
        """
        task = self.tasks.get(task_id)
        if task is None:
            msg = f"There is no task with the id {task_id!r}"
            raise ValueError(msg)
        task.done = True
        return task.to_dict()


def demo_toolset(workspace: DemoWorkspace | None = None) -> Toolset:
    """The workspace's tools, guarded by the default classifier.

    The reads run at once; ``send_email``, ``create_event``,
    ``delete_event``, ``add_task`` and ``complete_task`` wait for approval.

    Args:
        workspace: the backend; a fresh :class:`DemoWorkspace` by default.
    """
    return guard((workspace or DemoWorkspace()).tools())


def demo_system_prompt(workspace: DemoWorkspace) -> str:
    """The system prompt of the demo chat: the date, the contacts and how reviews work."""
    contacts = ", ".join(f"{name} ({address})" for name, address in workspace.contacts.items())
    return (
        "You are a helpful assistant with access to the user's mailbox, calendar and task list."
        f" Today is {weekday(workspace.today)} {workspace.today.isoformat()}."
        f" The user's contacts: {contacts}."
        " Tools that change something wait for the user's approval. When the user rejects"
        " a call, read the reason and adjust: propose the call again with the change, or say"
        " that you did not do it."
    )
