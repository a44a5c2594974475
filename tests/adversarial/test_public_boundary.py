# mypy: disable-error-code="arg-type, unused-ignore, override, call-overload"
# mypy: disable-error-code="dict-item, list-item, call-arg"
"""Clear errors at the public boundary: wrong types or values fail at the call, named.

Attack class: a caller (or configuration read from the environment, or a model adapter)
handing public constructors and functions values of the wrong type or range — a str where
an int is meant (``"2"``), a bool for a count, a bare string where a list of ids is meant
(a str is a Sequence), an empty secret, a model that answers ``None``. Each must raise
TypeError / ValueError / a ToolguardError whose text names the argument and the fix, at the
call, instead of an AttributeError deep inside or a silently wrong setting (``"no"`` is true).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import openai
import pytest

from toolguard import (
    ApprovalPolicy,
    Classifier,
    MemoryStore,
    ModelError,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    SQLiteStore,
    Tool,
    allow_once,
    guard,
    requires_approval,
    tool,
)
from toolguard.classify import split_words
from toolguard.http import create_app, create_router
from toolguard.openai import OpenAIChatModel
from toolguard.postgres import PostgresStore
from toolguard.text import (
    describe_decision,
    describe_request,
    describe_result,
    render_action,
    render_history,
)


def pay(amount: float) -> str:
    """Pay."""
    return "paid"


async def later(args: dict[str, Any]) -> bool:
    """An async predicate."""
    return False


def model() -> ScriptedModel:
    return ScriptedModel(["hi"])


def client() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="test", base_url="http://127.0.0.1:9/v1")


CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    # Runner
    (
        "Runner max_concurrency=0",
        lambda: Runner([pay], max_concurrency=0),
        ValueError,
        "max_concurrency must be at least 1 or None for no limit, got 0",
    ),
    (
        "Runner max_concurrency=-1",
        lambda: Runner([pay], max_concurrency=-1),
        ValueError,
        "max_concurrency must be at least 1 or None for no limit, got -1",
    ),
    (
        "Runner max_concurrency='2'",
        lambda: Runner([pay], max_concurrency="2"),
        TypeError,
        "max_concurrency must be an int of at least 1 or None for no limit, got str '2'",
    ),
    (
        "Runner max_concurrency=True",
        lambda: Runner([pay], max_concurrency=True),
        TypeError,
        "max_concurrency must be an int of at least 1 or None for no limit, got bool True",
    ),
    (
        "Runner max_concurrency=2.5",
        lambda: Runner([pay], max_concurrency=2.5),
        TypeError,
        "max_concurrency must be an int of at least 1 or None for no limit, got float 2.5",
    ),
    (
        "Runner review_ttl='x'",
        lambda: Runner([pay], review_ttl="x"),
        TypeError,
        "review_ttl must be a number of seconds, a timedelta or None, got str 'x'",
    ),
    (
        "Runner review_ttl=True",
        lambda: Runner([pay], review_ttl=True),
        TypeError,
        "review_ttl must be a number of seconds, a timedelta or None, got bool True",
    ),
    (
        "Runner review_ttl=[]",
        lambda: Runner([pay], review_ttl=[]),
        TypeError,
        "review_ttl must be a number of seconds, a timedelta or None, got list []",
    ),
    (
        "Runner review_ttl=nan",
        lambda: Runner([pay], review_ttl=math.nan),
        ValueError,
        "A review time-to-live must be positive, got nan",
    ),
    (
        "Runner review_ttl=inf",
        lambda: Runner([pay], review_ttl=math.inf),
        ValueError,
        "review_ttl must be finite (None for no deadline), got inf",
    ),
    (
        "Runner review_ttl=timedelta.max",
        lambda: Runner([pay], review_ttl=timedelta(seconds=-1)),
        ValueError,
        "A review time-to-live must be positive, got datetime.timedelta(days=-1, seconds=86399)",
    ),
    (
        "Runner clock=5",
        lambda: Runner([pay], clock=5),
        TypeError,
        "clock must be a function returning the current datetime, got int 5",
    ),
    (
        "Runner signing_key str",
        lambda: Runner([pay], signing_key="secret"),
        TypeError,
        "signing_key must be bytes (a secret such as os.urandom(32)) or None, got str",
    ),
    (
        "Runner signing_key empty",
        lambda: Runner([pay], signing_key=b""),
        ValueError,
        "signing_key must not be empty: use a secret such as os.urandom(32), or None",
    ),
    (
        "Runner edit_policy list",
        lambda: Runner([pay], edit_policy=[]),
        ValueError,
        "edit_policy must be 'run' or 'recheck', got []",
    ),
    (
        "Runner sync_in_thread='no'",
        lambda: Runner([pay], sync_in_thread="no"),
        TypeError,
        "sync_in_thread must be True or False, got str 'no'",
    ),
    (
        "Runner classifier=5",
        lambda: Runner([pay], classifier=5),
        TypeError,
        "classifier must be a toolguard.Classifier or None, got int 5",
    ),
    # ReviewedChat
    (
        "ReviewedChat max_steps='3'",
        lambda: ReviewedChat(model(), [pay], max_steps="3"),
        TypeError,
        "max_steps must be an int of at least 1, got str '3'",
    ),
    (
        "ReviewedChat max_steps=True",
        lambda: ReviewedChat(model(), [pay], max_steps=True),
        TypeError,
        "max_steps must be an int of at least 1, got bool True",
    ),
    (
        "ReviewedChat max_steps=2.5",
        lambda: ReviewedChat(model(), [pay], max_steps=2.5),
        TypeError,
        "max_steps must be an int of at least 1, got float 2.5",
    ),
    (
        "ReviewedChat max_steps=0",
        lambda: ReviewedChat(model(), [pay], max_steps=0),
        ValueError,
        "max_steps must be at least 1, got 0",
    ),
    (
        "ReviewedChat model=None",
        lambda: ReviewedChat(None, [pay]),
        TypeError,
        (
            "model must be a ChatModel: an object with an async complete(messages, tools) method,"
            " such as toolguard.openai.OpenAIChatModel; got None"
        ),
    ),
    (
        "ReviewedChat store=path",
        lambda: ReviewedChat(model(), [pay], store="threads.db"),
        TypeError,
        (
            "store must be a Store (async load() and save()), such as MemoryStore() or"
            " SQLiteStore(path), or None; got str 'threads.db'"
        ),
    ),
    (
        "ReviewedChat system_prompt=5",
        lambda: ReviewedChat(model(), [pay], system_prompt=5),
        TypeError,
        "system_prompt must be a string or None, got int 5",
    ),
    (
        "ReviewedChat authorize=True",
        lambda: ReviewedChat(model(), [pay], authorize=True),
        TypeError,
        "authorize must be a function (reviewer, thread, actions) or None, got bool True",
    ),
    (
        "ReviewedChat clock",
        lambda: ReviewedChat(model(), [pay], clock="now"),
        TypeError,
        "clock must be a function returning the current datetime, got str 'now'",
    ),
    (
        "ReviewedChat signing_key",
        lambda: ReviewedChat(model(), [pay], signing_key="k"),
        TypeError,
        "signing_key must be bytes (a secret such as os.urandom(32)) or None, got str",
    ),
    (
        "ReviewedChat review_ttl",
        lambda: ReviewedChat(model(), [pay], review_ttl="1h"),
        TypeError,
        "review_ttl must be a number of seconds, a timedelta or None, got str '1h'",
    ),
    # stores
    (
        "SQLiteStore path int",
        lambda: SQLiteStore(5),
        TypeError,
        "path must be a str or a pathlib.Path naming the database file, got int 5",
    ),
    (
        "SQLiteStore path None",
        lambda: SQLiteStore(None),
        TypeError,
        "path must be a str or a pathlib.Path naming the database file, got None",
    ),
    (
        "SQLiteStore path bytes",
        lambda: SQLiteStore(b"t.db"),
        TypeError,
        "path must be a str or a pathlib.Path naming the database file, got bytes b't.db'",
    ),
    (
        "SQLiteStore path empty",
        lambda: SQLiteStore(""),
        ValueError,
        "path must name the database file (or ':memory:'), got ''",
    ),
    (
        "SQLiteStore timeout str",
        lambda: SQLiteStore(":memory:", timeout="30"),
        TypeError,
        "timeout must be a number of seconds, got str '30'",
    ),
    (
        "SQLiteStore timeout negative",
        lambda: SQLiteStore(":memory:", timeout=-1),
        ValueError,
        "timeout must be a finite number of seconds above 0, got -1",
    ),
    (
        "SQLiteStore timeout nan",
        lambda: SQLiteStore(":memory:", timeout=math.nan),
        ValueError,
        "timeout must be a finite number of seconds above 0, got nan",
    ),
    (
        "MemoryStore option",
        lambda: MemoryStore(5),
        TypeError,
        "MemoryStore.__init__() takes 1 positional argument but 2 were given",
    ),
    (
        "PostgresStore dsn int",
        lambda: PostgresStore(5),
        TypeError,
        "dsn must be a PostgreSQL connection string (str), got int 5",
    ),
    (
        "PostgresStore dsn None",
        lambda: PostgresStore(None),
        TypeError,
        "dsn must be a PostgreSQL connection string (str), got None",
    ),
    (
        "PostgresStore table",
        lambda: PostgresStore("dbname=x", table="a;drop"),
        ValueError,
        "table must be letters, digits and underscores, not starting with a digit: got 'a;drop'",
    ),
    # OpenAIChatModel
    (
        "OpenAIChatModel model int",
        lambda: OpenAIChatModel(client(), model=5),
        TypeError,
        "model must be a model name (str), got int 5",
    ),
    (
        "OpenAIChatModel sync client",
        lambda: OpenAIChatModel(openai.OpenAI(api_key="x"), model="m"),
        TypeError,
        "client must be an openai.AsyncOpenAI, got the sync openai.OpenAI: use AsyncOpenAI(...)",
    ),
    (
        "OpenAIChatModel client str",
        lambda: OpenAIChatModel("sk-123", model="m"),
        TypeError,
        "client must be an openai.AsyncOpenAI or None, got str 'sk-123'",
    ),
    (
        "OpenAIChatModel temperature",
        lambda: OpenAIChatModel(client(), model="m", temperature="0.2"),
        TypeError,
        "temperature must be a number or None, got str '0.2'",
    ),
    (
        "OpenAIChatModel parallel_tool_calls",
        lambda: OpenAIChatModel(client(), model="m", parallel_tool_calls="yes"),
        TypeError,
        "parallel_tool_calls must be True, False or None, got str 'yes'",
    ),
    (
        "OpenAIChatModel extra_body",
        lambda: OpenAIChatModel(client(), model="m", extra_body=[("top_k", 2)]),
        TypeError,
        "extra_body must be a dict or None, got list [('top_k', 2)]",
    ),
    (
        "OpenAIChatModel request_options",
        lambda: OpenAIChatModel(client(), model="m", request_options="fast"),
        TypeError,
        "request_options must be a dict or None, got str 'fast'",
    ),
    # tools and guards
    (
        "requires_approval ttl str",
        lambda: requires_approval(ttl="10m"),
        TypeError,
        "ttl must be a number of seconds, a timedelta or None, got str '10m'",
    ),
    (
        "requires_approval description",
        lambda: requires_approval(description=5),
        TypeError,
        "description must be a string or None, got int 5",
    ),
    (
        "tool name int",
        lambda: tool(name=5)(pay),
        TypeError,
        "name must be a string or None, got int 5",
    ),
    (
        "tool name empty",
        lambda: tool(name="")(pay),
        ValueError,
        "name must not be empty: give a name or None",
    ),
    (
        "Tool approval",
        lambda: Tool(pay, approval=True),
        TypeError,
        "approval must be an ApprovalPolicy or None, got bool True",
    ),
    (
        "guard classifier",
        lambda: guard([pay], classifier="strict"),
        TypeError,
        "classifier must be a toolguard.Classifier or None, got str 'strict'",
    ),
    (
        "ApprovalPolicy when",
        lambda: ApprovalPolicy(when=True),
        TypeError,
        "when must be a function returning True or False, or None, got bool True",
    ),
    (
        "ApprovalPolicy async when",
        lambda: ApprovalPolicy(when=later),
        TypeError,
        "when must be a function returning True or False, or None, got function " + repr(later),
    ),
    (
        "ApprovalPolicy ttl",
        lambda: ApprovalPolicy(ttl="1h"),
        TypeError,
        "ttl must be a number of seconds, a timedelta or None, got str '1h'",
    ),
    (
        "ApprovalPolicy description",
        lambda: ApprovalPolicy(description=["x"]),
        TypeError,
        "description must be a string or None, got list ['x']",
    ),
    # allow_once
    (
        "allow_once int",
        lambda: allow_once(5),
        TypeError,
        (
            "allow_once() takes the ToolCall from ApprovalRequiredError.call, a tool name, or a"
            " function guarded with @requires_approval; got int"
        ),
    ),
    (
        "allow_once unguarded function",
        lambda: allow_once(pay, {"amount": 1}),
        TypeError,
        (
            "allow_once() takes the ToolCall from ApprovalRequiredError.call, a tool name, or a"
            " function guarded with @requires_approval; got pay, which is not guarded"
        ),
    ),
    (
        "allow_once args list",
        lambda: allow_once("pay", [("amount", 1)]),
        TypeError,
        "allow_once(name, args): args must be a mapping of parameter names to values, got list",
    ),
    (
        "allow_once args int keys",
        lambda: allow_once("pay", {1: 1}),
        TypeError,
        "allow_once(name, args): args must be keyed by parameter name (str), got 1",
    ),
    (
        "allow_once empty name",
        lambda: allow_once("", {}),
        ValueError,
        "allow_once(name, args): name must be a tool's name, got ''",
    ),
    # models and helpers
    (
        "ScriptedModel str",
        lambda: ScriptedModel("hello"),
        TypeError,
        "script must be a list of steps, got str 'hello': write script=['hello']",
    ),
    (
        "ScriptedModel int",
        lambda: ScriptedModel(5),
        TypeError,
        "script must be a list of steps, got int 5: write script=[5]",
    ),
    (
        "ScriptedModel step",
        lambda: ScriptedModel(["hi", None]),
        TypeError,
        "script[1] must be a ModelResponse, a str or a function of the messages, got None",
    ),
    (
        "ScriptedModel repeat",
        lambda: ScriptedModel(["hi"], repeat="yes"),
        TypeError,
        "repeat must be True or False, got str 'yes'",
    ),
    (
        "Classifier verbs int",
        lambda: Classifier(verbs=5),
        TypeError,
        "verbs must be a collection of strings, got int 5",
    ),
    (
        "split_words int",
        lambda: split_words(5),
        TypeError,
        "split_words() takes a tool name (str), got int 5",
    ),
    (
        "split_words bytes",
        lambda: split_words(b"send_mail"),
        TypeError,
        "split_words() takes a tool name (str), got bytes b'send_mail'",
    ),
    (
        "describe_request",
        lambda: describe_request("send", "to=a"),
        TypeError,
        (
            "describe_request(name, args) takes a tool name (str) and its arguments (a dict),"
            " got str 'send' and str 'to=a'"
        ),
    ),
    (
        "describe_decision",
        lambda: describe_decision({"type": "approve"}),
        TypeError,
        "describe_decision() takes a decision model or None, got dict {'type': 'approve'}",
    ),
    (
        "describe_result",
        lambda: describe_result("ok"),
        TypeError,
        "describe_result() takes a ToolResult, got str 'ok'",
    ),
    (
        "render_action",
        lambda: render_action({"name": "x"}),
        TypeError,
        "render_action() takes an Action (e.g. from ThreadState.actions), got dict {'name': 'x'}",
    ),
    (
        "render_history",
        lambda: render_history(5),
        TypeError,
        "render_history() takes a list of Action, got int 5",
    ),
    # HTTP
    (
        "create_app",
        lambda: create_app(None),
        TypeError,
        "chat must be a toolguard.ReviewedChat, got NoneType",
    ),
    (
        "create_router",
        lambda: create_router(ScriptedModel(["hi"])),
        TypeError,
        "chat must be a toolguard.ReviewedChat, got ScriptedModel",
    ),
]


@pytest.mark.parametrize(
    ("build", "error", "text"), [case[1:] for case in CASES], ids=[case[0] for case in CASES]
)
def test_a_wrong_argument_is_refused_at_the_call_with_a_clear_text(
    build: Callable[[], Any], error: type[Exception], text: str
) -> None:
    """Each wrong argument: the documented exception type, the exact text naming it."""
    with pytest.raises(error) as info:
        build()
    assert type(info.value) is error
    assert str(info.value) == text


def test_a_signing_key_is_never_echoed() -> None:
    """A secret passed with the wrong type is not repeated in the error text."""
    with pytest.raises(TypeError) as info:
        Runner([pay], signing_key="hunter2-very-secret")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("good", [1, 4, None])
def test_good_concurrency_values_are_kept(good: int | None) -> None:
    """Control: valid values still build a runner."""
    assert list(Runner([pay], max_concurrency=good).toolset) == ["pay"]


# ----------------------------------------------------------------------------- export_audit


@pytest.mark.parametrize(
    ("thread_ids", "text"),
    [
        ("abc", "thread_ids must be a list of ids, not a single str; write thread_ids=['abc']"),
        (b"abc", "thread_ids must be a list of ids, not a single bytes; write thread_ids=[b'abc']"),
        (5, "thread_ids must be a list of ids, got int 5"),
        ([5], "thread_ids must contain only str ids, got int 5"),
        (["t1", None], "thread_ids must contain only str ids, got None"),
    ],
)
async def test_export_audit_refuses_a_bare_string_and_non_str_ids(
    thread_ids: Any, text: str
) -> None:
    """A str is a Sequence: export_audit("abc") would export threads "a", "b", "c"."""
    chat = ReviewedChat(ScriptedModel(["hi"]), [pay])
    with pytest.raises(TypeError) as info:
        await chat.export_audit(thread_ids)
    assert str(info.value) == text


async def test_export_audit_takes_any_iterable_of_ids() -> None:
    """Control: a tuple or a generator of ids works like a list."""
    chat = ReviewedChat(ScriptedModel(["hi"]), [pay])
    turn = await chat.send_message("hello")
    by_list = await chat.export_audit([turn.thread_id])
    assert await chat.export_audit((turn.thread_id,)) == by_list
    assert await chat.export_audit(t for t in [turn.thread_id]) == by_list


# ----------------------------------------------------------------------------- the model's answer


class Answering:
    """A ChatModel whose complete() returns a fixed (wrong) value."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def complete(self, messages: Sequence[Any], tools: Sequence[Any]) -> Any:
        return self.answer


class SyncAnswering(Answering):
    """A ChatModel whose complete() is not async at all."""

    def complete(self, messages: Sequence[Any], tools: Sequence[Any]) -> Any:  # type: ignore[override]
        return self.answer


BAD_ANSWERS: list[tuple[Any, str]] = [
    (None, "returned None instead of a toolguard.ModelResponse"),
    ("hello", "returned str 'hello' instead of a toolguard.ModelResponse"),
    ({"text": "hi"}, "returned dict {'text': 'hi'} instead of a toolguard.ModelResponse"),
    (ModelResponse(text=5), "returned a ModelResponse whose text is int 5, not a str"),  # type: ignore[arg-type]
    (
        ModelResponse(text="hi", tool_calls=None),  # type: ignore[arg-type]
        "returned a ModelResponse whose tool_calls is None, not a list",
    ),
]


@pytest.mark.parametrize("sync", [False, True])
@pytest.mark.parametrize(("answer", "problem"), BAD_ANSWERS)
async def test_a_model_answering_something_else_is_a_model_error(
    answer: Any, problem: str, sync: bool
) -> None:
    """Not an AttributeError from inside: a ModelError naming the model, the thread unchanged."""
    good = ReviewedChat(ScriptedModel(["first"]), [pay])
    turn = await good.send_message("hello")
    before = await good.get_thread(turn.thread_id)
    model_type = SyncAnswering if sync else Answering
    chat = ReviewedChat(model_type(answer), [pay], store=good.store)
    with pytest.raises(ModelError) as info:
        await chat.send_message("again", turn.thread_id)
    assert str(info.value) == (
        f"{model_type.__name__}.complete {problem}: it must return"
        " ModelResponse(text=..., tool_calls=[...]). The thread is unchanged."
    )
    assert await good.get_thread(turn.thread_id) == before
