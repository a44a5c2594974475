"""The demo's offline stand-in for an LLM: :class:`DemoModel`.

A deterministic, rule-based "assistant" implementing
:class:`~toolguard.ChatModel`. It reads the last user message and proposes
tool calls of the demo workspace, summarises tool results, and reacts to a
rejection: a reason naming another address (or contact, or time) makes it
propose the call again with that change; any other reason makes it say what
it did not do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final

from toolguard._core.llm import Message, ModelResponse
from toolguard._core.records import NO_DECISION, REJECTED_BY_USER_MESSAGE, ToolCall
from toolguard._core.results import unmark
from toolguard.demo.workspace import (
    DEMO_CONTACTS,
    DEMO_TODAY,
    EMAIL_RE,
    WEEKDAYS,
    iso_minutes,
    weekday,
)

__all__ = ["DemoModel"]

# ---------------------------------------------------------------------------- reading requests

_POLITE: Final = r"^(?:(?:please|ok|okay|hey|can\s+you|could\s+you|would\s+you)[\s,]+)*"
_SEND_RE: Final = re.compile(
    _POLITE + r"(?:send\s+(?:an?\s+)?(?:e-?mail|mail|message|note)\s+to|send|e-?mail|mail|message"
    r"|write\s+(?:an?\s+(?:e-?mail|mail|note)\s+)?to|(?P<tell>tell|let))\s+"
    r"(?!(?:from|about|for|with|in)\b)(?P<rest>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_CONTENT_SEP: Final = re.compile(r"\s+(?:that|saying|to\s+say)\s+|:\s+", re.IGNORECASE)
_MAIL_ID_RE: Final = re.compile(r"\bm-\d+\b", re.IGNORECASE)
_EVENT_ID_RE: Final = re.compile(r"\bevt-\d+\b", re.IGNORECASE)
_TASK_ID_RE: Final = re.compile(r"\btask-\d+\b", re.IGNORECASE)
_MAIL_WORDS: Final = re.compile(r"\b(?:e-?mails?|mails?|inbox|messages?)\b", re.IGNORECASE)
_QUERY_RE: Final = re.compile(
    r"\b(?:from|about|mentioning|regarding|for|with|on)\s+(?P<query>.+?)[\s?.!]*$", re.IGNORECASE
)
_EVENT_NOUN: Final = re.compile(
    r"\b(meeting|call|lunch|dinner|event|appointment|review|sync)\b", re.IGNORECASE
)
_CREATE_RE: Final = re.compile(
    _POLITE + r"(?:schedule|book|create|set\s+up|arrange|plan|add|put)\b", re.IGNORECASE
)
_DELETE_RE: Final = re.compile(r"\b(?:cancel|delete|remove|drop)\b", re.IGNORECASE)
_CALENDAR_RE: Final = re.compile(
    r"\b(?:calendar|schedule|agenda|events?|meetings?|appointments?)\b|\bwhat'?s\s+on\b",
    re.IGNORECASE,
)
_ADD_TASK_RE: Final = re.compile(
    _POLITE + r"(?:(?:add|create|new|make)\s+(?:a\s+|an\s+|new\s+)*(?:task|to-?do|reminder)\b"
    r"(?:\s*:|\s+to\b)?|remind\s+me\s+to\b)\s*(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_COMPLETE_RE: Final = re.compile(
    r"\b(?:complete|finish|finished|done|mark|tick|close|check)\b", re.IGNORECASE
)
_TASKS_RE: Final = re.compile(r"\b(?:tasks?|to-?dos?)\b", re.IGNORECASE)
_GREETING_RE: Final = re.compile(r"^\s*(?:hi|hello|hey|help|what can you do)\b|^\s*\?", re.I)
_DAY_WORDS: Final = (
    r"today|tomorrow|\d{4}-\d{2}-\d{2}|(?:next\s+|this\s+)?(?:" + "|".join(WEEKDAYS) + r")"
)
_DUE_RE: Final = re.compile(
    r"[\s,]*\b(?:(?:by|due|on|before|for)\s+)?(?P<day>" + _DAY_WORDS + r")\s*[.!]*$",
    re.IGNORECASE,
)
_TIME_RE: Final = re.compile(
    r"\b(?P<h1>\d{1,2})(?::(?P<m1>\d{2}))?\s*(?P<ap>am|pm)\b"
    r"|\b(?P<h2>\d{1,2}):(?P<m2>\d{2})\b"
    r"|\b(?:at|from|to|until|till)\s+(?P<h3>\d{1,2})\b(?![:\d])(?!\s*(?:am|pm)\b)",
    re.IGNORECASE,
)
_DURATION_RE: Final = re.compile(
    r"\bfor\s+(?P<n>\d+)\s*(?P<unit>minutes?|mins?|hours?|h)\b", re.IGNORECASE
)
_TITLE_RE: Final = re.compile(
    r"\b(?:called|titled|named|about)\s+(?P<title>.+?)"
    r"(?=\s+(?:with|on|at|from|for|tomorrow|today|next)\b|[\s.,!?]*$)",
    re.IGNORECASE,
)
_QUOTED_RE: Final = re.compile(r"[\"\u201c](?P<title>[^\"\u201d]+)[\"\u201d]")

_HELP: Final = (
    "I am the toolguard demo assistant, a scripted stand-in for an LLM. I can:\n"
    '- search and read your mail: "any emails from bob?", "read m-2"\n'
    '- send emails: "email alice that the meeting moved to 11",'
    ' "mail alice and bob that lunch is at 12:30"\n'
    '- look at and change your calendar: "what\'s on my calendar tomorrow",'
    ' "schedule a meeting with carol tomorrow at 3pm", "cancel evt-3"\n'
    '- manage your tasks: "list my tasks", "add a task to renew my passport by friday",'
    ' "complete task-2"\n'
    "Reading runs at once; sending, creating, deleting, adding and completing wait for"
    " your approval."
)

_WHICH_EVENT: Final = (
    'Which event? Tell me its id, e.g. "cancel evt-3"'
    ' (ask "what\'s on my calendar tomorrow" to see the ids).'
)
_WHICH_TASK: Final = (
    'Which task? Tell me its id, e.g. "complete task-2" (say "list my tasks" to see the ids).'
)

Plan = tuple[str, list[tuple[str, dict[str, Any]]]]
"""A reply text and the tool calls (name, args) to propose with it."""


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _subject(content: str) -> str:
    subject = content.strip().rstrip(".!?").strip()
    subject = subject[:1].upper() + subject[1:]
    if len(subject) > 60:
        subject = subject[:57].rsplit(" ", 1)[0] + "..."
    return subject


def _join(items: Sequence[str], conjunction: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def _parse_day(text: str, today: date) -> date | None:
    """A day named in ``text``: ISO date, today, tomorrow or a weekday (the next one)."""
    lower = text.lower()
    iso = re.search(r"\b(\d{4}-\d{2}-\d{2})\b", lower)
    if iso is not None:
        try:
            return date.fromisoformat(iso.group(1))
        except ValueError:
            return None
    if re.search(r"\bday after tomorrow\b", lower):
        return today + timedelta(days=2)
    if re.search(r"\btomorrow\b", lower):
        return today + timedelta(days=1)
    if re.search(r"\btoday\b|\btonight\b", lower):
        return today
    for index, name in enumerate(WEEKDAYS):
        if re.search(rf"\b{name}\b", lower):
            ahead = (index - today.weekday()) % 7 or 7
            return today + timedelta(days=ahead)
    return None


def _parse_times(text: str) -> list[tuple[int, int]]:
    """Clock times named in ``text``, in order ("3pm", "14:30", "at 11"; 1-7 alone mean pm)."""
    times = []
    for match in _TIME_RE.finditer(text):
        hour_text = match.group("h1") or match.group("h2") or match.group("h3")
        minute = int(match.group("m1") or match.group("m2") or 0)
        hour = int(hour_text)
        suffix = (match.group("ap") or "").lower()
        if suffix == "pm" and hour < 12:
            hour += 12
        elif suffix == "am" and hour == 12:
            hour = 0
        elif not suffix and 1 <= hour <= 7:
            hour += 12
        if hour < 24 and minute < 60:
            times.append((hour, minute))
    return times


class DemoModel:
    """A deterministic, rule-based stand-in for an LLM: the demo works offline.

    It implements :class:`~toolguard.ChatModel` and decides from the
    conversation only (no state, no network), so the same history always
    gets the same answer:

    * after a user message, it proposes tool calls for the request it
      recognises ("email alice that ...", "what's on my calendar tomorrow",
      "add a task ...", "mail alice and bob ..." gives two parallel calls),
      or answers with what it can do;
    * after tool results, it summarises them;
    * after a rejection, it reads the reason: one that names another email
      address or contact (or, for an event, another time or day) makes it
      propose the call again with that change; otherwise it says what it did
      not do, and why.

    Tool call ids are ``call_1``, ``call_2``, ... counted over the history.
    It only proposes tools that are in the ``tools`` it is given.

    Args:
        today: the day "today" and "tomorrow" refer to.
        contacts: first name (lowercase) to address, for "email alice".
    """

    def __init__(
        self, *, today: date = DEMO_TODAY, contacts: Mapping[str, str] = DEMO_CONTACTS
    ) -> None:
        self.today = today
        self.contacts = {name.lower(): address for name, address in contacts.items()}

    def __repr__(self) -> str:
        return f"DemoModel(today={self.today.isoformat()!r})"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Answer the conversation (see :meth:`respond`)."""
        return self.respond(messages, tools)

    def respond(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]
    ) -> ModelResponse:
        """The next assistant turn for ``messages``, proposing only tools from ``tools``."""
        available = {str(t.get("function", {}).get("name")) for t in tools}
        first_id = 1 + sum(
            len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant"
        )
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            text, calls = self._after_tools(messages)
        elif last.get("role") == "user":
            text, calls = self._plan(_content_text(last.get("content")))
        else:
            text, calls = _HELP, []
        missing = [name for name, _ in calls if name not in available]
        if missing:
            return ModelResponse(
                text=f"I cannot do that here: this assistant has no `{missing[0]}` tool."
            )
        return ModelResponse(
            text=text,
            tool_calls=[
                ToolCall(id=f"call_{first_id + i}", name=name, args=args)
                for i, (name, args) in enumerate(calls)
            ],
        )

    # ------------------------------------------------------------------ helpers

    def _recipients(self, text: str) -> list[str]:
        """Addresses and contacts named in ``text``, in order, without duplicates."""
        found: list[tuple[int, str]] = [(m.start(), m.group(0)) for m in EMAIL_RE.finditer(text)]
        without_addresses = EMAIL_RE.sub(lambda m: " " * len(m.group(0)), text)
        for name, address in self.contacts.items():
            found.extend(
                (m.start(), address)
                for m in re.finditer(rf"\b{re.escape(name)}\b", without_addresses, re.IGNORECASE)
            )
        addresses: list[str] = []
        for _, address in sorted(found):
            if address not in addresses:
                addresses.append(address)
        return addresses

    def _name(self, address: str) -> str | None:
        for name, known in self.contacts.items():
            if known.lower() == address.lower():
                return name.capitalize()
        return None

    def _greeting(self, address: str) -> str:
        name = self._name(address)
        return f"Hi {name}," if name else "Hello,"

    # ------------------------------------------------------------------ user requests

    def _plan(self, text: str) -> Plan:
        text = text.strip()
        if not text:
            return _HELP, []
        if _GREETING_RE.search(text):
            return f"Hello! {_HELP}", []
        planners: tuple[Callable[[str], Plan | None], ...] = (
            self._plan_send,
            self._plan_add_task,
            self._plan_mail,
            self._plan_tasks,
            self._plan_delete_event,
            self._plan_create_event,
            self._plan_list_events,
        )
        for planner in planners:
            plan = planner(text)
            if plan is not None:
                return plan
        return f"Sorry, I did not understand that. {_HELP}", []

    def _plan_send(self, text: str) -> Plan | None:
        match = _SEND_RE.match(text)
        if match is None:
            return None
        rest = match.group("rest").strip()
        separator = _CONTENT_SEP.search(rest)
        if separator is not None:
            head, content = rest[: separator.start()], rest[separator.end() :]
        else:
            head, content = rest, self._strip_recipients(rest)
        recipients = self._recipients(head)
        if not recipients and match.group("tell"):
            return None  # "tell me ...", "let me know ...": not an email
        known = _join(sorted(self.contacts), "or")
        if not recipients:
            return (
                f"Who should get this email? Name a contact ({known}) or give an email address.",
                [],
            )
        content = content.strip()
        if not content:
            return (
                "What should the email say? For example: email alice that the meeting moved to 11."
            ), []
        calls = [
            (
                "send_email",
                {
                    "to": address,
                    "subject": _subject(content),
                    "body": f"{self._greeting(address)} {_sentence(content)}",
                },
            )
            for address in recipients
        ]
        if len(calls) == 1:
            return f"I will email {recipients[0]}.", calls
        return f"I will send {len(calls)} emails: to {_join(recipients)}.", calls

    def _strip_recipients(self, rest: str) -> str:
        """The words after the leading recipients ("bob the report is ready" -> "the report...")."""
        words = rest.split()
        fillers = {"and", "&", ",", "to", "know", "an", "a", "email", "mail", "message", "note"}
        while words:
            word = words[0].strip(",").lower()
            if word in fillers or word in self.contacts or EMAIL_RE.fullmatch(word):
                words.pop(0)
                continue
            break
        return " ".join(words)

    def _plan_mail(self, text: str) -> Plan | None:
        ids = [m.group(0).lower() for m in _MAIL_ID_RE.finditer(text)]
        if ids:
            return "Let me open it.", [("read_email", {"email_id": i}) for i in ids]
        if not _MAIL_WORDS.search(text):
            return None
        match = _QUERY_RE.search(text)
        query = match.group("query").strip("\"' ") if match is not None else ""
        query = re.sub(r"^(?:my|the)\s+(?:e-?mails?|mails?|inbox)\b\s*", "", query, flags=re.I)
        return "Let me search your mail.", [("search_mail", {"query": query})]

    def _plan_tasks(self, text: str) -> Plan | None:
        ids = [m.group(0).lower() for m in _TASK_ID_RE.finditer(text)]
        if ids and _COMPLETE_RE.search(text):
            calls = [("complete_task", {"task_id": i}) for i in ids]
            return f"I will mark {_join(ids)} as done.", calls
        if _TASKS_RE.search(text) and _COMPLETE_RE.search(text):
            return (
                _WHICH_TASK,
                [],
            )
        if _TASKS_RE.search(text):
            return "Let me look at your tasks.", [("list_tasks", {})]
        return None

    def _plan_add_task(self, text: str) -> Plan | None:
        match = _ADD_TASK_RE.match(text)
        if match is None:
            return None
        rest = match.group("rest").strip()
        due: date | None = None
        due_match = _DUE_RE.search(rest)
        if due_match is not None:
            due = _parse_day(due_match.group("day"), self.today)
            rest = rest[: due_match.start()]
        title = rest.strip(" ,.!:")
        if not title:
            return (
                "What is the task? For example: add a task to renew my passport by friday.",
                [],
            )
        title = title[:1].upper() + title[1:]
        args: dict[str, Any] = {"title": title}
        if due is not None:
            args["due"] = due.isoformat()
        return f'I will add the task "{title}".', [("add_task", args)]

    def _plan_delete_event(self, text: str) -> Plan | None:
        if not _DELETE_RE.search(text):
            return None
        ids = [m.group(0).lower() for m in _EVENT_ID_RE.finditer(text)]
        if ids:
            return f"I will delete {_join(ids)}.", [("delete_event", {"event_id": i}) for i in ids]
        if _EVENT_NOUN.search(text) or _CALENDAR_RE.search(text):
            return (
                _WHICH_EVENT,
                [],
            )
        return None

    def _plan_create_event(self, text: str) -> Plan | None:
        noun = _EVENT_NOUN.search(text)
        if not _CREATE_RE.match(text) or noun is None:
            return None
        attendees = self._recipients(text)
        quoted = _QUOTED_RE.search(text)
        named = _TITLE_RE.search(text)
        if quoted is not None:
            title = quoted.group("title").strip()
        elif named is not None:
            title = named.group("title").strip()
            title = title[:1].upper() + title[1:]
        else:
            kind = noun.group(1).lower()
            title = "Meeting" if kind == "event" else kind.capitalize()
            names = [self._name(a) or a for a in attendees]
            if names:
                title = f"{title} with {_join(names)}"
        day = _parse_day(text, self.today) or self.today
        times = _parse_times(text)
        hour, minute = times[0] if times else (9, 0)
        start = datetime.combine(day, datetime.min.time()).replace(hour=hour, minute=minute)
        if len(times) > 1:
            end = start.replace(hour=times[1][0], minute=times[1][1])
        else:
            end = start + _duration(text)
        args: dict[str, Any] = {
            "title": title,
            "start": iso_minutes(start),
            "end": iso_minutes(end),
            "attendees": attendees,
        }
        return f'I will create the event "{title}".', [("create_event", args)]

    def _plan_list_events(self, text: str) -> Plan | None:
        if not _CALENDAR_RE.search(text):
            return None
        day = _parse_day(text, self.today) or self.today
        return "Let me look at your calendar.", [("list_events", {"day": day.isoformat()})]

    # ------------------------------------------------------------------ tool results

    def _after_tools(self, messages: Sequence[Message]) -> Plan:
        start = len(messages)
        while start > 0 and messages[start - 1].get("role") == "tool":
            start -= 1
        proposed: dict[str, tuple[str, dict[str, Any]]] = {}
        if start > 0:
            for raw in messages[start - 1].get("tool_calls") or []:
                call = _read_call(raw)
                if call is not None:
                    proposed[call[0]] = (call[1], call[2])
        lines: list[str] = []
        again: list[tuple[str, dict[str, Any]]] = []
        for message in messages[start:]:
            name, args = proposed.get(str(message.get("tool_call_id")), ("a tool", {}))
            content = unmark(_content_text(message.get("content")))
            kind = _result_kind(message, content)
            if kind == "success":
                lines.append(_summary(name, args, content))
            elif kind == "failure":
                lines.append(f"I could not {_what(name, args)}: {content}")
            else:
                retry = self._retry(name, args, content)
                if retry is not None:
                    lines.append(retry[0])
                    again.append((name, retry[1]))
                elif content in (REJECTED_BY_USER_MESSAGE, NO_DECISION):
                    lines.append(f"OK, I did not {_what(name, args)}.")
                else:
                    lines.append(f"OK, I did not {_what(name, args)}. Your reason: {content}")
        if again:
            lines.append("This needs your approval again.")
        return "\n".join(lines) or "Done.", again

    def _retry(
        self, name: str, args: Mapping[str, Any], reason: str
    ) -> tuple[str, dict[str, Any]] | None:
        """The changed call a rejection reason asks for, with a line saying so, if any."""
        if name == "send_email":
            current = str(args.get("to", ""))
            others = [a for a in self._recipients(reason) if a.lower() != current.lower()]
            if not others:
                return None
            to = others[0]
            body = str(args.get("body", ""))
            old, new = self._greeting(current), self._greeting(to)
            if body.startswith(old):
                body = new + body[len(old) :]
            return f"Understood: I will send it to {to} instead.", {**args, "to": to, "body": body}
        if name == "create_event":
            return self._retry_event(args, reason)
        return None

    def _retry_event(
        self, args: Mapping[str, Any], reason: str
    ) -> tuple[str, dict[str, Any]] | None:
        try:
            start = datetime.fromisoformat(str(args["start"]))
            end = datetime.fromisoformat(str(args["end"]))
        except (KeyError, ValueError):
            return None
        attendees = [str(a) for a in args.get("attendees") or []]
        added = [a for a in self._recipients(reason) if a not in attendees]
        day = _parse_day(reason, start.date())
        times = _parse_times(reason)
        new_start = datetime.combine(day or start.date(), start.time())
        if times:
            new_start = new_start.replace(hour=times[0][0], minute=times[0][1])
        changes = []
        if new_start != start:
            changes.append(f"move it to {new_start.strftime('%Y-%m-%d %H:%M')}")
        if added:
            changes.append(f"invite {_join(added)}")
        if not changes:
            return None
        changed = {
            **args,
            "start": iso_minutes(new_start),
            "end": iso_minutes(new_start + (end - start)),
            "attendees": attendees + added,
        }
        return f"Understood: I will {_join(changes)}.", changed


def _duration(text: str) -> timedelta:
    match = _DURATION_RE.search(text)
    if match is None:
        return timedelta(minutes=30)
    amount = int(match.group("n"))
    if match.group("unit").lower().startswith("h"):
        return timedelta(hours=amount)
    return timedelta(minutes=amount)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _read_call(raw: Any) -> tuple[str, str, dict[str, Any]] | None:
    """``(id, name, args)`` of an OpenAI tool call dict in the history."""
    if not isinstance(raw, Mapping):
        return None
    function = raw.get("function")
    if not isinstance(function, Mapping):
        return None
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments else {}
        except ValueError:
            arguments = {}
    args = dict(arguments) if isinstance(arguments, Mapping) else {}
    return str(raw.get("id")), str(function.get("name")), args


def _result_kind(message: Mapping[str, Any], content: str) -> str:
    """``success``, ``failure`` (the tool broke or was never valid) or ``rejection``."""
    failed = content.startswith("Invalid arguments for tool `") or (
        content.startswith("Tool `") and (" failed: " in content or "does not exist" in content)
    )
    if failed:
        return "failure"
    if message.get("status", "success") == "error" or content in (
        REJECTED_BY_USER_MESSAGE,
        NO_DECISION,
    ):
        return "rejection"
    return "success"


def _what(name: str, args: Mapping[str, Any]) -> str:
    """What a call does, as a verb phrase ("send the email to alice@example.com")."""
    phrases: dict[str, Callable[[], str]] = {
        "send_email": lambda: f"send the email to {args.get('to')}",
        "create_event": lambda: f'create the event "{args.get("title")}"',
        "delete_event": lambda: f"delete the event {args.get('event_id')}",
        "add_task": lambda: f'add the task "{args.get("title")}"',
        "complete_task": lambda: f"complete the task {args.get('task_id')}",
        "search_mail": lambda: f'search your mail for "{args.get("query")}"',
        "read_email": lambda: f"read the email {args.get('email_id')}",
        "list_events": lambda: f"list the events of {args.get('day')}",
        "list_tasks": lambda: "list your tasks",
    }
    phrase = phrases.get(name)
    return phrase() if phrase is not None else f"run {name}"


def _clock(moment: str) -> str:
    return moment[11:16] if len(moment) >= 16 else moment


def _summary(name: str, args: Mapping[str, Any], content: str) -> str:
    """A sentence about a successful result, from the value the tool returned."""
    try:
        value = json.loads(content)
        return _SUMMARIES[name](args, value)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return f"{name} returned: {content}"


def _sum_search(args: Mapping[str, Any], value: Any) -> str:
    query = str(args.get("query", ""))
    if not value:
        return f'No email matches "{query}".' if query else "Your inbox is empty."
    head = f'Found {len(value)} email(s) matching "{query}":' if query else "Your inbox:"
    lines = [f'- {e["id"]} from {e["from"]}: "{e["subject"]}" ({e["date"]})' for e in value]
    return "\n".join([head, *lines])


def _sum_read(_args: Mapping[str, Any], value: Any) -> str:
    return (
        f"Email {value['id']} from {value['from']} ({value['date']}),"
        f' subject "{value["subject"]}":\n{value["body"]}'
    )


def _sum_send(_args: Mapping[str, Any], value: Any) -> str:
    return f'Sent "{value["subject"]}" to {value["to"]}.'


def _day_label(day: str) -> str:
    return f"{weekday(date.fromisoformat(day))} {day}"


def _event_line(event: Mapping[str, Any]) -> str:
    line = f"- {_clock(event['start'])}-{_clock(event['end'])} {event['title']} ({event['id']})"
    if event.get("attendees"):
        line += f", with {_join(list(event['attendees']))}"
    return line


def _sum_events(args: Mapping[str, Any], value: Any) -> str:
    label = _day_label(str(args["day"]))
    if not value:
        return f"Nothing on your calendar on {label}."
    return "\n".join([f"Your calendar on {label}:", *(_event_line(e) for e in value)])


def _sum_create(_args: Mapping[str, Any], value: Any) -> str:
    line = (
        f'Created "{value["title"]}" on {_day_label(value["start"][:10])} from'
        f" {_clock(value['start'])} to {_clock(value['end'])} ({value['id']})"
    )
    if value.get("attendees"):
        line += f", inviting {_join(list(value['attendees']))}"
    return f"{line}."


def _sum_delete(_args: Mapping[str, Any], value: Any) -> str:
    return f'Deleted the event "{value["title"]}" ({value["id"]}).'


def _task_line(task: Mapping[str, Any]) -> str:
    mark = "x" if task.get("done") else " "
    due = f" (due {task['due']})" if task.get("due") else ""
    return f"- [{mark}] {task['id']} {task['title']}{due}"


def _sum_tasks(_args: Mapping[str, Any], value: Any) -> str:
    if not value:
        return "You have no tasks."
    return "\n".join(["Your tasks:", *(_task_line(t) for t in value)])


def _sum_add(_args: Mapping[str, Any], value: Any) -> str:
    due = f", due {value['due']}" if value.get("due") else ""
    return f'Added the task "{value["title"]}" ({value["id"]}){due}.'


def _sum_complete(_args: Mapping[str, Any], value: Any) -> str:
    return f'Marked "{value["title"]}" ({value["id"]}) as done.'


_SUMMARIES: Final[dict[str, Callable[[Mapping[str, Any], Any], str]]] = {
    "search_mail": _sum_search,
    "read_email": _sum_read,
    "send_email": _sum_send,
    "list_events": _sum_events,
    "create_event": _sum_create,
    "delete_event": _sum_delete,
    "list_tasks": _sum_tasks,
    "add_task": _sum_add,
    "complete_task": _sum_complete,
}
