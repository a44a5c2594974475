"""Tests for guarding tools: ``requires_approval``, ``allow_once`` and ``guard`` / ``Toolset``."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import inspect
import pickle
import typing
import uuid
from typing import Any

import anyio.to_thread
import pytest
from pydantic import BaseModel

from toolguard import (
    ApprovalRequiredError,
    Classifier,
    EditDecision,
    EditedAction,
    PendingReview,
    Tool,
    Toolset,
    allow_once,
    guard,
    requires_approval,
    tool,
)
from toolguard._policy.stand_in import set_stand_in
from toolguard.classify import Classification
from toolguard.text import set_language

SPEC_ARGS = {"to": "alice@example.com", "subject": "Meeting", "body": "The meeting is at 10."}


def spec_payload(description: str, name: str = "send_email", args: Any = None) -> dict[str, Any]:
    """The whole pending_review dict of SPEC section 1 for one action."""
    return {
        "action_requests": [
            {"name": name, "args": SPEC_ARGS if args is None else args, "description": description}
        ],
        "review_configs": [
            {"action_name": name, "allowed_decisions": ["approve", "edit", "reject"]}
        ],
    }


def make_send_email(ran: list[dict[str, str]]) -> Any:
    """A guarded send_email that records every real run in ``ran``."""

    @requires_approval
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: recipient address.
            subject: subject line.
            body: message text.
        """
        ran.append({"to": to, "subject": subject, "body": body})
        return f"sent to {to}"

    return send_email


def catch(func: Any, *args: Any, **kwargs: Any) -> ApprovalRequiredError:
    """Call ``func`` and return the ApprovalRequiredError it must raise."""
    with pytest.raises(ApprovalRequiredError) as info:
        func(*args, **kwargs)
    return info.value


# --- requires_approval: the wrapper looks like the function ------------------------------


def _plain(to: str, count: int = 1) -> list[str]:
    """Repeat a recipient."""
    return [to] * count


async def _plain_async(to: str, count: int = 1) -> list[str]:
    """Repeat a recipient, later."""
    return [to] * count


@pytest.mark.parametrize("func", [_plain, _plain_async])
def test_wrapper_keeps_function_identity(func: Any) -> None:
    """The guarded function keeps name, qualname, module, doc, signature, hints and sync/async."""
    guarded = requires_approval(func)
    assert guarded.__name__ == func.__name__
    assert guarded.__qualname__ == func.__qualname__
    assert guarded.__module__ == func.__module__
    assert guarded.__doc__ == func.__doc__
    assert inspect.signature(guarded) == inspect.signature(func)
    assert typing.get_type_hints(guarded) == {"to": str, "count": int, "return": list[str]}
    assert inspect.iscoroutinefunction(guarded) is inspect.iscoroutinefunction(func)


def test_wrapper_with_options_keeps_function_identity() -> None:
    """requires_approval(when=..., description=...) also keeps the function's identity."""
    guarded = requires_approval(when=lambda args: True, description="Check this")(_plain_async)
    assert guarded.__name__ == "_plain_async"
    assert guarded.__doc__ == "Repeat a recipient, later."
    assert inspect.signature(guarded) == inspect.signature(_plain_async)
    assert inspect.iscoroutinefunction(guarded) is True


# --- requires_approval: calling ----------------------------------------------------------


def test_call_raises_without_running_the_body() -> None:
    """A guarded call raises ApprovalRequiredError with the SPEC payload; the body does not run."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    assert ran == []
    assert isinstance(exc.pending_review, PendingReview)
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` is awaiting approval")
    assert str(exc) == "Tool `send_email` is awaiting approval"


def test_call_records_name_and_args() -> None:
    """exc.call holds the tool name, the JSON args and a fresh 32-hex id."""
    send_email = make_send_email([])
    first = catch(send_email, **SPEC_ARGS).call
    second = catch(send_email, **SPEC_ARGS).call
    assert (first.name, first.args, first.arguments_error) == ("send_email", SPEC_ARGS, None)
    assert len(first.id) == 32
    assert int(first.id, 16) >= 0
    assert first.id != second.id


def test_description_in_indonesian_with_set_language() -> None:
    """After set_language("id") the payload description is the seed's Indonesian text."""
    set_language("id")
    exc = catch(make_send_email([]), **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` menunggu persetujuan")
    assert str(exc) == "Tool `send_email` menunggu persetujuan"


def test_description_in_indonesian_with_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOLGUARD_LANG=id selects the Indonesian description when no language was set in code."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    exc = catch(make_send_email([]), **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` menunggu persetujuan")


def test_description_override() -> None:
    """requires_approval(description=...) replaces the fixed description in the payload."""

    @requires_approval(description="Sends real mail to a customer")
    def send_email(to: str, subject: str, body: str) -> None:
        """Send an email."""

    exc = catch(send_email, **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload("Sends real mail to a customer")
    assert str(exc) == "Sends real mail to a customer"


def test_positional_args_are_named_in_payload() -> None:
    """Positional arguments appear in the payload under their parameter names."""
    exc = catch(make_send_email([]), "alice@example.com", "Meeting", body="The meeting is at 10.")
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` is awaiting approval")


def test_omitted_defaults_are_not_in_payload() -> None:
    """The payload lists the arguments the caller passed; omitted defaults are not added."""

    @requires_approval
    def archive(folder: str, keep_days: int = 30) -> None:
        """Archive a folder."""

    exc = catch(archive, "inbox")
    assert exc.call.args == {"folder": "inbox"}


class Color(enum.Enum):
    """A colour."""

    RED = "red"


class Point(BaseModel):
    """A point."""

    x: int
    y: int


@dataclasses.dataclass
class Label:
    """A label."""

    text: str
    size: int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
        (
            datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
            "2024-01-02T03:04:05Z",
        ),
        (datetime.date(2024, 1, 2), "2024-01-02"),
        (decimal.Decimal("1.50"), "1.50"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Color.RED, "red"),
        ({3}, [3]),
        ((1, 2), [1, 2]),
        (b"hi", "hi"),
        (Point(x=1, y=2), {"x": 1, "y": 2}),
        (Label(text="urgent", size=3), {"text": "urgent", "size": 3}),
    ],
    ids=[
        "datetime",
        "aware-datetime",
        "date",
        "decimal",
        "uuid",
        "enum",
        "set",
        "tuple",
        "bytes",
        "pydantic",
        "dataclass",
    ],
)
def test_payload_args_are_json(value: Any, expected: Any) -> None:
    """Non-JSON argument values are converted to JSON data in the payload and in exc.call."""

    @requires_approval
    def store(value: Any) -> None:
        """Store a value."""

    exc = catch(store, value)
    assert exc.call.args == {"value": expected}
    assert exc.pending_review.action_requests[0].args == {"value": expected}


# --- when= -------------------------------------------------------------------------------


def make_transfer(ran: list[int], seen: list[dict[str, Any]]) -> Any:
    """A transfer guarded only above 1000, recording runs and predicate inputs."""

    def over_limit(args: dict[str, Any]) -> bool:
        seen.append(args)
        return bool(args["amount"] > 1000)

    @requires_approval(when=over_limit)
    def transfer(amount: int, to: str = "savings") -> str:
        """Move money."""
        ran.append(amount)
        return f"moved {amount} to {to}"

    return transfer


def test_when_false_runs_the_body() -> None:
    """A when= predicate returning false lets the call run without approval."""
    ran: list[int] = []
    transfer = make_transfer(ran, [])
    assert transfer(5) == "moved 5 to savings"
    assert ran == [5]


def test_when_true_raises() -> None:
    """A when= predicate returning true makes the call wait for approval."""
    ran: list[int] = []
    transfer = make_transfer(ran, [])
    exc = catch(transfer, 5000, to="bob")
    assert ran == []
    assert exc.pending_review.model_dump() == spec_payload(
        "Tool `transfer` is awaiting approval", name="transfer", args={"amount": 5000, "to": "bob"}
    )


def test_when_gets_defaults_filled_in() -> None:
    """The predicate receives every argument by name, defaults included."""
    seen: list[dict[str, Any]] = []
    transfer = make_transfer([], seen)
    transfer(7)
    transfer(8, "bob")
    assert seen == [{"amount": 7, "to": "savings"}, {"amount": 8, "to": "bob"}]


def test_when_must_be_callable() -> None:
    """requires_approval(when=5) is refused with a TypeError."""
    with pytest.raises(TypeError) as info:
        requires_approval(when=5)  # type: ignore[call-overload]
    assert str(info.value) == "when= must be a callable taking the arguments dict, got int"


def test_needs_approval_of_guarded_tool() -> None:
    """Tool.needs_approval applies the when= predicate to validated arguments."""
    t = tool(make_transfer([], []))
    assert t.needs_approval(t.validate_args({"amount": 5})) is False
    assert t.needs_approval(t.validate_args({"amount": 5000})) is True


# --- pickling ----------------------------------------------------------------------------


def test_error_pickles() -> None:
    """ApprovalRequiredError survives pickling with its pending_review and call."""
    exc = catch(make_send_email([]), **SPEC_ARGS)
    copy = pickle.loads(pickle.dumps(exc))  # noqa: S301 - our own data
    assert type(copy) is ApprovalRequiredError
    assert copy.pending_review == exc.pending_review
    assert copy.call == exc.call
    assert str(copy) == str(exc)


# --- allow_once --------------------------------------------------------------------------


def test_allow_once_runs_exactly_one_identical_call() -> None:
    """allow_once(exc.call) lets one identical call run; a second one raises again."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        assert send_email(**exc.call.args) == "sent to alice@example.com"
        again = catch(send_email, **exc.call.args)
    assert ran == [SPEC_ARGS]
    assert again.pending_review == exc.pending_review


def test_allow_once_matches_positional_form_of_the_same_call() -> None:
    """A grant matches the same call written with positional arguments."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        send_email("alice@example.com", "Meeting", "The meeting is at 10.")
    assert ran == [SPEC_ARGS]


def test_allow_once_matches_by_json_value() -> None:
    """A grant from JSON args matches a call that passes the original Python values."""
    ran: list[datetime.date] = []

    @requires_approval
    def book(day: datetime.date) -> None:
        """Book a day."""
        ran.append(day)

    exc = catch(book, datetime.date(2024, 5, 1))
    assert exc.call.args == {"day": "2024-05-01"}
    with allow_once(exc.call):
        book(datetime.date(2024, 5, 1))
    assert ran == [datetime.date(2024, 5, 1)]


def test_allow_once_does_not_cover_other_args() -> None:
    """A grant does not cover a call with different arguments."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        other = catch(send_email, **{**SPEC_ARGS, "to": "mallory@example.com"})
        assert other.call.args["to"] == "mallory@example.com"
    assert ran == []


def test_allow_once_does_not_cover_other_tools() -> None:
    """A grant for one tool does not let another tool with the same args run."""
    send_email = make_send_email([])

    @requires_approval
    def send_fax(to: str, subject: str, body: str) -> None:
        """Send a fax."""

    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        catch(send_fax, **SPEC_ARGS)


def test_allow_once_grants_end_with_the_block() -> None:
    """An unused grant ends with its with-block."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        pass
    catch(send_email, **SPEC_ARGS)
    assert ran == []


def test_allow_once_by_name_and_args() -> None:
    """allow_once(name, args) grants the call like allow_once(ToolCall) does."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    with allow_once("send_email", SPEC_ARGS):
        send_email(**SPEC_ARGS)
    assert ran == [SPEC_ARGS]


def test_nested_allow_once_grants_add_up() -> None:
    """Two nested grants for the same call let it run twice."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    with allow_once("send_email", SPEC_ARGS), allow_once("send_email", SPEC_ARGS):
        send_email(**SPEC_ARGS)
        send_email(**SPEC_ARGS)
        catch(send_email, **SPEC_ARGS)
    assert ran == [SPEC_ARGS, SPEC_ARGS]


async def test_async_guarded_function() -> None:
    """An async guarded function raises on await, and allow_once lets one call run."""
    ran: list[str] = []

    @requires_approval
    async def send_sms(to: str, text: str) -> str:
        """Send a text message."""
        ran.append(to)
        return f"texted {to}"

    with pytest.raises(ApprovalRequiredError) as info:
        await send_sms("+62811", "hi")
    assert ran == []
    assert info.value.pending_review.model_dump() == spec_payload(
        "Tool `send_sms` is awaiting approval", name="send_sms", args={"to": "+62811", "text": "hi"}
    )
    with allow_once(info.value.call):
        assert await send_sms("+62811", "hi") == "texted +62811"
        with pytest.raises(ApprovalRequiredError):
            await send_sms("+62811", "hi")
    assert ran == ["+62811"]


async def test_grants_are_visible_in_worker_threads() -> None:
    """A sync guarded function run with anyio.to_thread.run_sync inside the block sees the grant."""
    ran: list[dict[str, str]] = []
    send_email = make_send_email(ran)
    exc = catch(send_email, **SPEC_ARGS)
    with allow_once(exc.call):
        result = await anyio.to_thread.run_sync(lambda: send_email(**SPEC_ARGS))
    assert result == "sent to alice@example.com"
    assert ran == [SPEC_ARGS]


# --- requires_approval and Tool together --------------------------------------------------


def _send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: recipient address.
        subject: subject line.
        body: message text.
    """
    return f"sent to {to}"


def test_requires_approval_on_a_tool_returns_a_guarded_tool() -> None:
    """requires_approval(Tool) returns a guarded Tool with the same name, description and schema."""
    plain = tool(name="send_email", description="Mail someone.")(_send_email)
    guarded = requires_approval(plain)
    assert isinstance(guarded, Tool)
    assert guarded.guarded is True
    assert plain.guarded is False
    assert guarded.openai_schema == plain.openai_schema
    assert plain(**SPEC_ARGS) == "sent to alice@example.com"
    exc = catch(guarded, **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` is awaiting approval")


def test_requires_approval_with_options_on_a_tool() -> None:
    """requires_approval(when=..., description=...) applies its policy to a Tool."""
    guarded = requires_approval(when=lambda args: args["to"].endswith("@example.com"))(
        tool(_send_email)
    )
    assert guarded(to="bob@inside.test", subject="s", body="b") == "sent to bob@inside.test"
    catch(guarded, **SPEC_ARGS)


def test_tool_on_a_guarded_function_keeps_the_guard() -> None:
    """@tool over @requires_approval gives a guarded Tool that raises when called."""
    ran: list[dict[str, str]] = []
    t = tool(make_send_email(ran))
    assert isinstance(t, Tool)
    assert t.guarded is True
    assert t.name == "send_email"
    assert t.description == "Send an email."
    exc = catch(t, **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload("Tool `send_email` is awaiting approval")
    assert ran == []


def test_tool_with_new_name_on_a_guarded_function_keeps_the_guard() -> None:
    """@tool(name=...) over a guarded function keeps the guard under the new name."""
    t = tool(name="mail_out")(make_send_email([]))
    assert t.guarded is True
    exc = catch(t, **SPEC_ARGS)
    assert exc.pending_review.model_dump() == spec_payload(
        "Tool `mail_out` is awaiting approval", name="mail_out"
    )


def test_guarded_schema_equals_unguarded_schema() -> None:
    """A guarded function gives the model exactly the schema of the unguarded one."""
    unguarded = tool(name="send_email")(_send_email)
    assert tool(make_send_email([])).openai_schema == unguarded.openai_schema


def test_requires_approval_rejects_class() -> None:
    """requires_approval refuses a class at decoration time."""

    class Mailer:
        """Not a function."""

    with pytest.raises(TypeError) as info:
        requires_approval(Mailer)
    assert str(info.value) == (
        "@requires_approval cannot wrap the class"
        " test_requires_approval_rejects_class.<locals>.Mailer: decorate a function or method"
        " that performs the action instead."
    )


def test_requires_approval_rejects_generator() -> None:
    """requires_approval refuses a generator function at decoration time."""

    def rows() -> Any:
        """Yield rows."""
        yield 1

    with pytest.raises(TypeError) as info:
        requires_approval(rows)
    assert str(info.value) == (
        "@requires_approval cannot wrap the generator"
        " 'test_requires_approval_rejects_generator.<locals>.rows': a tool must return its"
        " whole result. Collect the items into a list and return it."
    )


def test_requires_approval_rejects_var_keyword() -> None:
    """requires_approval refuses **kwargs at decoration time."""

    def configure(**options: str) -> None:
        """Configure."""

    with pytest.raises(TypeError) as info:
        requires_approval(configure)
    assert str(info.value) == (
        "The tool 'configure' has the parameter **options: 'str': a model can only pass named"
        " arguments. Replace *args/**kwargs with named parameters."
    )


def test_stand_in_edit_with_positional_only_parameter() -> None:
    """A stand-in reviewer's edit runs a positional-only tool with the edited arguments."""

    @requires_approval
    def withdraw(amount: int, /) -> int:
        """Withdraw money."""
        return amount

    set_stand_in(
        lambda call: EditDecision(edited_action=EditedAction(name=call.name, args={"amount": 5}))
    )
    assert withdraw(100) == 5


# --- guard / Toolset ---------------------------------------------------------------------


def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: recipient address.
        body: message text.
    """
    return f"sent to {to}"


def search_mail(query: str) -> list[str]:
    """Search the mailbox."""
    return [query]


def findCalendarEvents(day: str) -> list[str]:  # noqa: N802 - a camelCase tool name on purpose
    """Find calendar events."""
    return [day]


@requires_approval
def wipe_disk(path: str) -> None:
    """Erase everything under a path."""


SEND_EMAIL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {
            "additionalProperties": False,
            "properties": {
                "to": {"description": "recipient address.", "type": "string"},
                "body": {"description": "message text.", "type": "string"},
            },
            "required": ["to", "body"],
            "type": "object",
        },
    },
}
SEARCH_MAIL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "search_mail",
        "description": "Search the mailbox.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "type": "object",
        },
    },
}
FIND_EVENTS_SCHEMA = {
    "type": "function",
    "function": {
        "name": "findCalendarEvents",
        "description": "Find calendar events.",
        "parameters": {
            "additionalProperties": False,
            "properties": {"day": {"type": "string"}},
            "required": ["day"],
            "type": "object",
        },
    },
}


def test_guard_list_with_default_classifier() -> None:
    """The default classifier guards send_email but not search_mail or findCalendarEvents."""
    toolset = guard([send_email, search_mail, findCalendarEvents])
    assert isinstance(toolset, Toolset)
    assert list(toolset) == ["send_email", "search_mail", "findCalendarEvents"]
    assert len(toolset) == 3
    assert toolset.guarded == ["send_email"]
    assert [toolset[name].guarded for name in toolset] == [True, False, False]
    assert toolset.explain("send_email") == Classification(
        name="send_email",
        needs_approval=True,
        rule="verb",
        matched_word="send",
        matched_verb="send",
        reason="the word 'send' is an approval verb (messaging and publishing)",
    )
    assert toolset.explain("findCalendarEvents") == Classification(
        name="findCalendarEvents",
        needs_approval=False,
        rule="read",
        matched_word=None,
        matched_verb=None,
        reason="the word 'find' is a read verb",
    )


def test_guard_always_list() -> None:
    """findCalendarEvents is guarded once it is listed in Classifier(always=[...])."""
    toolset = guard(
        [send_email, search_mail, findCalendarEvents],
        Classifier(always=["findCalendarEvents"]),
    )
    assert toolset.guarded == ["send_email", "findCalendarEvents"]
    assert toolset.explain("findCalendarEvents").rule == "always"


def test_guarded_tools_in_toolset_raise_and_others_run() -> None:
    """Calling a guarded tool of the set raises; an unguarded one runs."""
    toolset = guard([send_email, search_mail])
    exc = catch(toolset["send_email"], "alice@example.com", "hi")
    assert exc.pending_review.model_dump() == spec_payload(
        "Tool `send_email` is awaiting approval", args={"to": "alice@example.com", "body": "hi"}
    )
    assert toolset["search_mail"]("invoice") == ["invoice"]


def test_guard_mapping_renames_tools() -> None:
    """A mapping key is the name the model sees, classified and used in the payload."""
    toolset = guard({"mail_out": send_email, "lookup": search_mail})
    assert list(toolset) == ["mail_out", "lookup"]
    # "mail_out" holds no known verb: the default classifier asks; "lookup" reads.
    assert toolset.guarded == ["mail_out"]
    assert toolset["mail_out"].openai_schema == {
        **SEND_EMAIL_SCHEMA,
        "function": {**SEND_EMAIL_SCHEMA["function"], "name": "mail_out"},
    }

    renamed = guard({"email_send": send_email})
    assert renamed.guarded == ["email_send"]
    exc = catch(renamed["email_send"], "a@example.com", "b")
    assert exc.call.name == "email_send"


def test_decorated_tools_stay_guarded_even_in_never() -> None:
    """A @requires_approval tool stays guarded (rule "decorator") even when listed in never."""
    toolset = guard([wipe_disk, send_email], Classifier(never=["wipe_disk", "send_email"]))
    assert toolset.guarded == ["wipe_disk"]
    assert toolset.explain("wipe_disk") == Classification(
        name="wipe_disk",
        needs_approval=True,
        rule="decorator",
        matched_word=None,
        matched_verb=None,
        reason="guarded with @requires_approval",
    )
    assert toolset.explain("send_email").rule == "never"
    catch(toolset["wipe_disk"], "/")


def test_decorated_tool_with_when_keeps_its_policy() -> None:
    """A tool guarded with when= keeps its predicate inside a toolset, and says so."""
    toolset = guard([make_transfer([], [])])
    assert toolset["transfer"](5) == "moved 5 to savings"
    catch(toolset["transfer"], 5000)
    assert toolset.explain("transfer").reason == (
        "guarded with @requires_approval(when=...): depends on the arguments"
    )


def test_table() -> None:
    """table() shows every tool with its approval, rule and reason."""
    toolset = guard([send_email, search_mail, findCalendarEvents, wipe_disk])
    expected = [
        "tool                approval  rule       reason",
        "------------------  --------  ---------  " + "-" * 81,
        (
            "send_email          required  verb       "
            "the word 'send' is an approval verb (messaging and publishing)"
        ),
        (
            "search_mail         no        read       "
            "the read verb 'search' leads the action: 'mail' is read as a thing, not an action"
        ),
        "findCalendarEvents  no        read       the word 'find' is a read verb",
        "wipe_disk           required  decorator  guarded with @requires_approval",
    ]
    assert toolset.table() == "\n".join(expected)


def test_openai_tools() -> None:
    """openai_tools() lists every tool's function-tool dict in registry order."""
    toolset = guard([send_email, search_mail, findCalendarEvents])
    assert toolset.openai_tools() == [SEND_EMAIL_SCHEMA, SEARCH_MAIL_SCHEMA, FIND_EVENTS_SCHEMA]


def test_guarded_schemas_equal_unguarded_ones() -> None:
    """The model sees no difference: guarded and unguarded toolsets give the same schemas."""
    only_search = Classifier(verbs=["search"], reads=(), unknown="allow")
    guarded = guard([send_email, search_mail, findCalendarEvents], only_search)
    nothing = Classifier(verbs=[], reads=(), unknown="allow")
    unguarded = guard([send_email, search_mail, findCalendarEvents], nothing)
    assert guarded.guarded == ["search_mail"]
    assert unguarded.guarded == []
    assert guarded.openai_tools() == unguarded.openai_tools()
    assert guard([send_email]).openai_tools() == [tool(send_email).openai_schema]


def test_duplicate_names_rejected() -> None:
    """Two tools with one name are refused with a ValueError."""
    with pytest.raises(ValueError, match="unique") as info:
        guard([send_email, tool(name="send_email")(search_mail)])
    assert str(info.value) == "Two tools are named 'send_email': tool names must be unique."


@pytest.mark.parametrize(("value", "kind"), [(5, "int"), ("send_email", "str"), (None, "NoneType")])
def test_non_iterable_rejected(value: Any, kind: str) -> None:
    """guard() refuses anything but a list or a mapping of tools with a TypeError."""
    with pytest.raises(TypeError) as info:
        guard(value)
    assert str(info.value) == f"guard() takes a list or a mapping of tools, got {kind}"


def test_toolset_is_a_read_only_mapping() -> None:
    """A Toolset maps names to Tools; unknown names raise KeyError."""
    toolset = guard([send_email, search_mail])
    assert dict(toolset) == {
        "send_email": toolset["send_email"],
        "search_mail": toolset["search_mail"],
    }
    assert "send_email" in toolset
    with pytest.raises(KeyError):
        toolset["delete_everything"]
    assert repr(toolset) == "<Toolset 2 tools, guarded: ['send_email']>"


def test_guard_of_a_toolset_copies_it() -> None:
    """guard(toolset) without a classifier keeps its tools and classifications."""
    toolset = guard([send_email, search_mail])
    again = guard(toolset)
    assert again.guarded == ["send_email"]
    assert again.classifications == toolset.classifications
    assert again["send_email"] is toolset["send_email"]


def test_allow_once_counts_omitted_arguments_with_their_defaults() -> None:
    """A grant for transfer(5000) covers transfer(5000, "savings") when that is the default."""
    ran: list[tuple[int, str]] = []

    @requires_approval
    def transfer(amount: int, account: str = "savings") -> None:
        ran.append((amount, account))

    with pytest.raises(ApprovalRequiredError) as caught:
        transfer(5000)
    assert caught.value.call.args == {"amount": 5000}
    with allow_once(caught.value.call):
        transfer(5000, "savings")
        with pytest.raises(ApprovalRequiredError):
            transfer(5000)
    assert ran == [(5000, "savings")]


def test_when_sees_every_parameter_kind_with_defaults_and_is_asked_once() -> None:
    """The predicate gets positional-only, ordinary and keyword-only values, defaults filled."""
    seen: list[dict[str, object]] = []

    def ask(args: dict[str, object]) -> bool:
        seen.append(args)
        return False

    @requires_approval(when=ask)
    def pay(amount: int, /, to: str = "ACME", *, memo: str = "") -> str:
        return f"{amount}:{to}:{memo}"

    assert pay(5) == "5:ACME:"
    assert pay(7, to="Bob", memo="rent") == "7:Bob:rent"
    assert seen == [
        {"amount": 5, "to": "ACME", "memo": ""},
        {"amount": 7, "to": "Bob", "memo": "rent"},
    ]


def test_a_call_with_wrong_arguments_raises_the_functions_own_type_error() -> None:
    """Binding errors surface as Python's usual TypeError and the body does not run."""
    ran: list[int] = []

    @requires_approval(when=lambda args: False)
    def pay(amount: int) -> None:
        ran.append(amount)

    with pytest.raises(TypeError) as caught:
        pay(1, 2)  # type: ignore[call-arg]
    assert str(caught.value) == (
        "test_a_call_with_wrong_arguments_raises_the_functions_own_type_error.<locals>.pay()"
        " takes 1 positional argument but 2 were given"
    )
    assert ran == []


def test_when_true_raises_with_only_the_arguments_passed_in_the_payload() -> None:
    """When the predicate asks for approval, the payload lists the arguments as passed."""

    @requires_approval(when=lambda args: args["amount"] > 1000)
    def pay(amount: int, to: str = "ACME") -> str:
        return "paid"

    with pytest.raises(ApprovalRequiredError) as caught:
        pay(5000)
    assert caught.value.pending_review.model_dump()["action_requests"] == [
        {"name": "pay", "args": {"amount": 5000}, "description": "Tool `pay` is awaiting approval"}
    ]
    assert pay(10) == "paid"
