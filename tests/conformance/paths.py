"""One adapter per path into toolguard, behind one small interface.

Each adapter drives one way of using toolguard (a decorated function called
directly, the runner, the chat, the HTTP API, the MCP gateway, the framework
integrations) with the same four tools, and answers in the same terms:

* ``propose(name, args)``: the model proposes one call; the answer is
  :class:`Paused` (the ``pending_review`` payload), :class:`Ran` (the text
  the model reads, and whether it is an error) or :class:`Refused`;
* ``decide(decisions, reviewer=...)``: a person answers the current review;
* ``reopen(rules=...)``: a second component over the same stored state (a
  restarted process with other rules);
* ``decide_twice(decisions)``: the same approval applied by two components
  sharing the store (or twice in one, where nothing is shared);
* ``decide_foreign(decisions)``: the decisions of the current review sent
  bound to another open review (another thread / review id);
* ``snapshot()``: the stored state and audit, to compare before and after;
* ``texts()``: every text toolguard wrote on that path;
* ``judge_calls()``: how many times the judge model was asked (the paths that
  take a judge: ``session(judge=Judging(...))``).

``effects`` lists every body that really ran, as ``(tool, args)``.
A new path joins by adding an adapter to :data:`ADAPTERS`.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

import anyio

import toolguard
from toolguard import (
    ApprovalRequiredError,
    Judge,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Rules,
    Runner,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
    ToolguardError,
    requires_approval,
    validate_decisions,
)
from toolguard.http import Reviewers

# ---------------------------------------------------------------------------- the shared world

SECRET = 'hunter2"q\\b\x07c\u2028d\U0001f511-tail'  # noqa: S105 - a test value
"""A secret with a quote, a backslash, a control character, U+2028 and an emoji."""

DENY = Rules(deny=['send_email(to="*@evil.example")'])
"""The deny rule of guarantee (b) and (c)."""

TTL = 60.0
"""The review deadline of guarantee (g), in seconds."""

Effects = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class Paused:
    """The call waits for a person; ``review`` is the ``pending_review`` payload."""

    review: dict[str, Any]


@dataclass(frozen=True)
class Ran:
    """The turn went on: ``text`` is what the model reads, ``error`` whether it is an error."""

    error: bool
    text: str


@dataclass(frozen=True)
class Refused:
    """The decisions (or the call) were refused: ``error`` names the error, ``text`` its text."""

    error: str
    text: str


Outcome = Paused | Ran | Refused


def refused(exc: BaseException) -> Refused:
    """A toolguard error as a :class:`Refused` (the error's class name and its text)."""
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id>", str(exc))
    text = re.sub(r"^The paused turn \S+ was", "The paused turn <id> was", text)
    return Refused(type(exc).__name__, text)


def python_tools(effects: Effects, *, ttl: float | None = None) -> list[Callable[..., Any]]:
    """The four tools, as Python functions recording every run in ``effects``."""

    @requires_approval(ttl=ttl)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: the file.
        """
        effects.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    @requires_approval
    def send_email(to: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient.
            body: the text.
        """
        effects.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @requires_approval(approvals=2)
    def wire_transfer(amount: int, to: str) -> str:
        """Send money.

        Args:
            amount: how much.
            to: the payee.
        """
        effects.append(("wire_transfer", {"amount": amount, "to": to}))
        return f"sent {amount} to {to}"

    @requires_approval(redact=["password"])
    def login(user: str, password: str, port: int) -> str:
        """Log in to the mail server.

        Args:
            user: the account.
            password: its password.
            port: the server's port.
        """
        effects.append(("login", {"user": user, "password": password, "port": port}))
        return f"logged in as {user} with {password} on {port}"

    def search_contacts(query: str) -> str:
        """Search the contact list (no policy of its own: an ask rule may ask for it).

        Args:
            query: what to look for.
        """
        effects.append(("search_contacts", {"query": query}))
        return f"contacts for {query}"

    return [delete_file, send_email, wire_transfer, login, search_contacts]


SCHEMAS: dict[str, dict[str, Any]] = {
    "delete_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    "send_email": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
        "required": ["to", "body"],
    },
    "wire_transfer": {
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    },
    "login": {
        "type": "object",
        "properties": {
            "user": {"type": "string"},
            "password": {"type": "string"},
            "port": {"type": "integer"},
        },
        "required": ["user", "password", "port"],
    },
    "search_contacts": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
"""The tools' JSON Schemas, for the paths whose tools come from an MCP server."""


def tool_result(name: str, args: dict[str, Any]) -> str:
    """What each tool returns (the Python tools and the MCP server's answer the same)."""
    if name == "delete_file":
        return f"deleted {args['path']}"
    if name == "send_email":
        return f"sent to {args['to']}"
    if name == "wire_transfer":
        return f"sent {args['amount']} to {args['to']}"
    if name == "search_contacts":
        return f"contacts for {args['query']}"
    return f"logged in as {args['user']} with {args['password']} on {args['port']}"


class Clock:
    """An injectable clock for the paths that take one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass(frozen=True)
class Judging:
    """The judge of guarantee (j): ``answer`` is the judge model's reply text to the document
    it reads (``{"user_messages": [...], "proposed_call": {...}}``)."""

    answer: Callable[[dict[str, Any]], str]
    auto_approve: bool = False


JUDGE_MODEL = "judge-model"
"""The gateway's ``--judge-model NAME`` (the other paths' judge model is a ``ScriptedModel``)."""


def scripted_judge(judging: Judging | None) -> tuple[Judge | None, ScriptedModel | None]:
    """A :class:`Judge` on a ``ScriptedModel`` answering as ``judging`` says, and that model."""
    if judging is None:
        return None, None

    def reply(messages: Sequence[toolguard.Message]) -> ModelResponse:
        return ModelResponse(text=judging.answer(json.loads(str(messages[-1]["content"]))))

    model = ScriptedModel([reply], repeat=True)
    return Judge(model, auto_approve=judging.auto_approve), model


def dumped(value: Any) -> str:
    """A text of any value toolguard wrote (JSON, whatever is inside)."""
    return value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)


@asynccontextmanager
async def two_processes(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """The claims stores of two processes: two ``SQLiteStore`` objects on one file."""
    stores = (SQLiteStore(tmp_path / "claims.sqlite3"), SQLiteStore(tmp_path / "claims.sqlite3"))
    try:
        yield stores
    finally:
        for store in stores:
            store.close()


# ---------------------------------------------------------------------------- the interface


class Adapter:
    """One path into toolguard (see the module docstring)."""

    name: ClassVar[str]
    title: ClassVar[str]
    clock_injectable: ClassVar[bool] = True
    takes_judge: ClassVar[bool] = False

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.effects: Effects = []
        self.written: list[str] = []
        self.clock = Clock()
        self.judging: Judging | None = None
        self.reviewers: Reviewers | None = None

    takes_reviewers: ClassVar[bool] = False
    """Whether the path takes a reviewer list (``[reviewers]``: who may decide which tool)."""

    def session(
        self,
        *,
        rules: Rules | None = None,
        ttl: float | None = None,
        judge: Judging | None = None,
        reviewers: Reviewers | None = None,
    ) -> AbstractAsyncContextManager[Adapter]:
        """Build the component (with these rules, review deadline, judge and reviewer list)."""
        if judge is not None and not self.takes_judge:
            msg = f"the {self.name} path takes no judge"
            raise TypeError(msg)
        if reviewers is not None and not self.takes_reviewers:
            msg = f"the {self.name} path takes no reviewer list"
            raise TypeError(msg)
        self.judging = judge
        self.reviewers = reviewers
        return self._session(rules=rules, ttl=ttl)

    @asynccontextmanager
    async def _session(self, *, rules: Rules | None, ttl: float | None) -> AsyncIterator[Adapter]:
        await self.open(rules=rules, ttl=ttl)
        yield self

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        raise NotImplementedError

    async def reopen(self, *, rules: Rules | None) -> None:
        """A second component over the same state, with ``rules``."""
        raise NotImplementedError

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        raise NotImplementedError

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        raise NotImplementedError

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        raise NotImplementedError

    async def decide_foreign(self, decisions: Any) -> Outcome:
        """Send ``decisions`` bound to the review opened before the current one."""
        raise NotImplementedError

    async def snapshot(self) -> Any:
        raise NotImplementedError

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass for the review deadlines."""
        self.clock.advance(seconds)

    async def texts(self) -> list[str]:
        """Every text toolguard wrote on this path (and the audit, where there is one)."""
        return list(self.written)

    def judge_calls(self) -> int:
        """How many times the judge model was asked."""
        raise NotImplementedError

    def record(self, outcome: Outcome) -> Outcome:
        if isinstance(outcome, Paused):
            self.written.append(dumped(outcome.review))
        else:
            self.written.append(outcome.text)
        return outcome


# ---------------------------------------------------------------------------- (1) the decorator


class DecoratorPath(Adapter):
    """A guarded function called directly; a person's approval is ``allow_once(exc.call)``."""

    name = "decorator"
    title = "`@requires_approval` + `allow_once`"

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        # A direct call's deadline runs on the real clock.
        self.raw_tools = python_tools(self.effects, ttl=REAL_TTL if ttl is not None else None)
        self.tools = toolguard.guard(self.raw_tools, rules=rules)
        self.errors: list[ApprovalRequiredError] = []

    async def advance(self, seconds: float) -> None:
        await anyio.sleep(REAL_TTL * 1.5)

    async def reopen(self, *, rules: Rules | None) -> None:
        self.tools = toolguard.guard(self.raw_tools, rules=rules)

    def _call(self, name: str, args: dict[str, Any]) -> Outcome:
        tool = self.tools.get(name)
        assert tool is not None
        try:
            value = tool(**args)
        except ApprovalRequiredError as exc:
            self.errors.append(exc)
            self.written.extend([str(exc), repr(exc), str(exc.call), repr(exc.call)])
            return self.record(Paused(exc.pending_review.model_dump(mode="json")))
        except toolguard.CallDeniedError as exc:  # a deny rule of the toolset
            return self.record(Ran(error=True, text=str(exc)))
        except TypeError as exc:
            return self.record(Ran(error=True, text=str(exc)))
        return Ran(error=False, text=str(value))  # the tool's own value, not a text of toolguard

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        return self._call(name, args)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        exc = self.errors[-1]
        try:
            [decision] = validate_decisions(exc.pending_review, decisions)
        except ToolguardError as error:
            return self.record(refused(error))
        if decision.type == "reject":
            text = decision.message or toolguard.REJECTED_BY_USER_MESSAGE
            return self.record(Ran(error=True, text=text))
        args = (
            decision.edited_action.args if decision.type == "edit" else exc.call.args
        )  # an edit is a call with other arguments under the approval of this one
        name = decision.edited_action.name if decision.type == "edit" else exc.call.name
        try:
            grant = toolguard.allow_once(exc.call)
        except ToolguardError as error:  # past the deadline, or a quorum one grant cannot make
            return self.record(refused(error))
        with grant:
            if decision.type == "edit":
                return self._call(name, dict(args))
            tool = self.tools.get(name)
            assert tool is not None
            real = exc.call
            try:
                value = tool(**_real_args(real))
            except ApprovalRequiredError as again:
                self.errors.append(again)
                return self.record(Paused(again.pending_review.model_dump(mode="json")))
            except toolguard.CallDeniedError as denied:  # a rule added while it waited
                return self.record(Ran(error=True, text=str(denied)))
            return Ran(error=False, text=str(value))  # the tool's own value

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        exc = self.errors[-1]
        outcomes: list[Outcome] = []
        with toolguard.allow_once(exc.call):
            for _ in range(2):
                tool = self.tools.get(exc.call.name)
                assert tool is not None
                try:
                    outcomes.append(Ran(False, str(tool(**_real_args(exc.call)))))
                except ApprovalRequiredError as again:
                    outcomes.append(self.record(refused(again)))
        return outcomes

    async def snapshot(self) -> Any:
        return [e.pending_review.model_dump(mode="json") for e in self.errors]


def _real_args(call: ToolCall) -> dict[str, Any]:
    """The real arguments of a call that raised (its ``args`` show secrets redacted)."""
    from toolguard._policy.allow_once import _origin

    origin = _origin(call)
    return dict(origin.args) if origin is not None else dict(call.args)


# ---------------------------------------------------------------------------- (2) the Runner


class RunnerPath(Adapter):
    """``toolguard.Runner``: decisions checked with ``validate_decisions``, claims in a store."""

    name = "runner"
    title = "`Runner`"
    takes_judge = True

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        self.ttl = ttl
        self.judge, self.judge_model = scripted_judge(self.judging)
        self.claims: MemoryStore | SQLiteStore = MemoryStore()
        self.raw_tools = python_tools(self.effects)
        self.runner = self._runner(rules)
        self.pendings: list[tuple[str, toolguard.PendingTurn]] = []
        self.count = 0

    def _runner(self, rules: Rules | None) -> Runner:
        return Runner(
            toolguard.guard(self.raw_tools, rules=rules),
            review_ttl=self.ttl,
            clock=self.clock,
            claims=self.claims,
            judge=self.judge,
        )

    async def reopen(self, *, rules: Rules | None) -> None:
        self.runner = self._runner(rules)

    def _step(self, thread_id: str, step: toolguard.Step) -> Outcome:
        if step.pending is not None:
            self.pendings.append((thread_id, step.pending))
            review = step.pending_review
            assert review is not None
            return self.record(Paused(review.model_dump(mode="json")))
        result = step.results[-1]
        self.written.extend(dumped(m) for m in step.tool_messages())
        return self.record(Ran(error=result.status == "error", text=result.content))

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.count += 1
        thread_id = f"t{self.count}"
        call = {"id": f"c{self.count}", "name": name, "args": args}
        return self._step(thread_id, await self.runner.run([call], thread_id=thread_id))

    async def _resume(
        self, runner: Runner, decisions: Any, reviewer: str | None, thread_id: str
    ) -> Outcome:
        _, pending = self.pendings[-1]
        try:
            validate_decisions(pending, decisions)
            step = await runner.resume(pending, decisions, thread_id=thread_id, reviewer=reviewer)
        except ToolguardError as exc:
            return self.record(refused(exc))
        self.pendings.pop()
        return self._step(thread_id, step)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        return await self._resume(self.runner, decisions, reviewer, self.pendings[-1][0])

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        thread_id, pending = self.pendings[-1]
        async with two_processes(self.tmp_path) as stores:
            runners = []
            for self.claims in stores:  # two processes, their claims in one SQLite file
                runners.append(self._runner(None))
            return await self._race(runners, pending, decisions, thread_id)

    async def _race(
        self, runners: list[Runner], pending: Any, decisions: Any, thread_id: str
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []

        async def one(runner: Runner) -> None:
            try:
                step = await runner.resume(pending, decisions, thread_id=thread_id)
            except ToolguardError as exc:
                outcomes.append(self.record(refused(exc)))
                return
            outcomes.append(self._step(thread_id, step))

        async with anyio.create_task_group() as tasks:
            for runner in runners:
                tasks.start_soon(one, runner)
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        # the latest paused turn, resumed under the thread of the one before it
        return await self._resume(self.runner, decisions, None, self.pendings[-2][0])

    async def snapshot(self) -> Any:
        return [(t, p.model_dump(mode="json")) for t, p in self.pendings]

    def judge_calls(self) -> int:
        assert self.judge_model is not None
        return len(self.judge_model.calls)


# ---------------------------------------------------------------------------- (3) ReviewedChat


class EchoModel:
    """Proposes the queued call for each user message, then repeats the tool's result."""

    def __init__(self) -> None:
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.count = 0

    def step(self, messages: Sequence[toolguard.Message]) -> ModelResponse:
        last = messages[-1]
        if last.get("role") == "user":
            name, args = self.queue.pop(0)
            self.count += 1
            return ModelResponse(tool_calls=[ToolCall(id=f"c{self.count}", name=name, args=args)])
        return ModelResponse(text=str(last.get("content")))

    def scripted(self) -> ScriptedModel:
        return ScriptedModel([self.step], repeat=True)


class ChatPath(Adapter):
    """``ReviewedChat`` with a scripted model and a SQLite file; reviews bound by ``review_id``."""

    name = "chat"
    title = "`ReviewedChat` + SQLite"
    takes_judge = True
    takes_reviewers = True

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        self.ttl = ttl
        self.judge, self.judge_model = scripted_judge(self.judging)
        self.model = EchoModel()
        self.raw_tools = python_tools(self.effects)
        self.db = self.tmp_path / "chat.sqlite3"
        self.chat = self._chat(rules)
        self.reviews: list[tuple[str, str]] = []  # (thread_id, review_id) of each pause
        self._last_error: dict[str, bool] = {}

    def _chat(self, rules: Rules | None) -> ReviewedChat:
        return ReviewedChat(
            self.model.scripted(),
            toolguard.guard(self.raw_tools, rules=rules),
            store=SQLiteStore(self.db),
            review_ttl=self.ttl,
            clock=self.clock,
            judge=self.judge,
            authorize=self.reviewers,
        )

    async def reopen(self, *, rules: Rules | None) -> None:
        self.chat = self._chat(rules)

    def _turn(self, turn: toolguard.ChatTurn) -> Outcome:
        if turn.pending_review is not None:
            assert turn.review_id is not None
            self.reviews.append((turn.thread_id, turn.review_id))
            return self.record(Paused(turn.pending_review.model_dump(mode="json")))
        assert turn.reply is not None
        return self.record(Ran(error=self._last_error.get(turn.thread_id, False), text=turn.reply))

    async def _error_of(self, chat: ReviewedChat, thread_id: str) -> None:
        state = await chat.get_thread(thread_id)
        tools = [m for m in state.messages if m.get("role") == "tool"]
        self._last_error[thread_id] = bool(tools) and tools[-1].get("status") == "error"

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.model.queue.append((name, args))
        turn = await self.chat.send_message(f"please {name}")
        await self._error_of(self.chat, turn.thread_id)
        return self._turn(turn)

    async def _submit(
        self,
        chat: ReviewedChat,
        decisions: Any,
        reviewer: str | None,
        thread_id: str,
        review_id: str,
    ) -> Outcome:
        try:
            turn = await chat.submit_review(
                decisions, thread_id, review_id=review_id, reviewer=reviewer
            )
        except ToolguardError as exc:
            return self.record(refused(exc))
        if turn.pending_review is None:
            self.reviews = [r for r in self.reviews if r[0] != thread_id]
        await self._error_of(chat, thread_id)
        return self._turn(turn)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        thread_id, review_id = self.reviews[-1]
        return await self._submit(self.chat, decisions, reviewer, thread_id, review_id)

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        thread_id, review_id = self.reviews[-1]
        chats = [self.chat, self._chat(None)]  # two processes over one SQLite file
        outcomes: list[Outcome] = []

        async def one(chat: ReviewedChat) -> None:
            outcomes.append(await self._submit(chat, decisions, None, thread_id, review_id))

        async with anyio.create_task_group() as tasks:
            for chat in chats:
                tasks.start_soon(one, chat)
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        thread_id, _ = self.reviews[-1]
        _, other_review = self.reviews[-2]
        return await self._submit(self.chat, decisions, None, thread_id, other_review)

    async def snapshot(self) -> Any:
        states = []
        for thread_id in await self.chat.store.thread_ids():  # type: ignore[attr-defined]
            state = await self.chat.store.load(thread_id)
            assert state is not None
            states.append(state.model_dump(mode="json", exclude={"version"}))
        return states

    async def texts(self) -> list[str]:
        texts = list(self.written)
        texts.append(await self.chat.export_audit())
        for thread_id in await self.chat.store.thread_ids():  # type: ignore[attr-defined]
            state = await self.chat.store.load(thread_id)
            assert state is not None
            texts.extend(dumped(m) for m in state.messages if m.get("role") == "tool")
            texts.extend(dumped(a.model_dump(mode="json")) for a in state.actions)
        return texts

    def judge_calls(self) -> int:
        assert self.judge_model is not None
        return len(self.judge_model.calls)


ADAPTERS: dict[str, type[Adapter]] = {
    adapter.name: adapter for adapter in [DecoratorPath, RunnerPath, ChatPath]
}


# ---------------------------------------------------------------------------- (4) the HTTP API


def _who(who: str | None = None) -> str | None:
    """The HTTP routes' reviewer: the ``who`` query parameter (in production: a login)."""
    return who


class DecidedOverHTTP:
    """``decide``, ``decide_twice`` and ``decide_foreign`` for a chat reached over HTTP: each
    decision is one request ``_send`` makes with a client (``_client(chat)``); two workers
    sharing the SQLite file race with two clients."""

    client: Any
    reviews: list[tuple[str, str]]
    _client: Callable[[ReviewedChat], Any]
    _chat: Callable[[Rules | None], ReviewedChat]

    async def _send(
        self, client: Any, decisions: Any, reviewer: str | None, thread_id: str, review_id: str
    ) -> Outcome:
        raise NotImplementedError

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        thread_id, review_id = self.reviews[-1]
        return await self._send(self.client, decisions, reviewer, thread_id, review_id)

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        thread_id, review_id = self.reviews[-1]
        clients = [self.client, self._client(self._chat(None))]  # two workers, one SQLite file
        outcomes: list[Outcome] = []

        async def one(client: Any) -> None:
            outcomes.append(await self._send(client, decisions, None, thread_id, review_id))

        async with anyio.create_task_group() as tasks:
            for client in clients:
                tasks.start_soon(one, client)
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        thread_id, _ = self.reviews[-1]
        _, other_review = self.reviews[-2]
        return await self._send(self.client, decisions, None, thread_id, other_review)


def router_client(router: Any) -> Any:
    """An httpx client of an app holding only ``router`` (in process: the ASGI transport)."""
    import httpx
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(router)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1")


def hide_ids(text: str) -> str:
    """``text`` with every 32-hex-digit id as ``<id>``."""
    return re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)


class HTTPPath(DecidedOverHTTP, ChatPath):
    """``toolguard.http.create_app`` in process (httpx's ASGI transport), SQLite behind it."""

    name = "http"
    title = "HTTP API (`create_app`)"

    def _client(self, chat: ReviewedChat) -> Any:
        import httpx

        from toolguard.http import create_app

        app = create_app(chat, reviewer=_who)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1")

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        await super().open(rules=rules, ttl=ttl)
        self.client = self._client(self.chat)

    async def reopen(self, *, rules: Rules | None) -> None:
        await super().reopen(rules=rules)
        self.client = self._client(self.chat)

    def _answer(self, response: Any) -> Outcome:
        self.written.append(response.text)
        body = response.json()
        if response.status_code != 200:
            detail = body.get("detail")
            text = detail if isinstance(detail, str) else json.dumps(detail)
            return Refused(f"HTTP {response.status_code}", hide_ids(text))
        if body["pending_review"] is not None:
            self.reviews.append((body["thread_id"], body["review_id"]))
            return Paused(body["pending_review"])
        return Ran(error=self._last_error.get(body["thread_id"], False), text=body["reply"])

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.model.queue.append((name, args))
        response = await self.client.post("/hitl/chat", json={"message": f"please {name}"})
        if response.status_code == 200:
            await self._error_of(self.chat, response.json()["thread_id"])
        return self._answer(response)

    async def _send(
        self, client: Any, decisions: Any, reviewer: str | None, thread_id: str, review_id: str
    ) -> Outcome:
        body = {"thread_id": thread_id, "review_id": review_id, "decisions": decisions}
        params = {"who": reviewer} if reviewer is not None else {}
        response = await client.post("/hitl/review", json=body, params=params)
        if response.status_code == 200:
            self.reviews = [r for r in self.reviews if r[0] != thread_id]
            await self._error_of(self.chat, thread_id)
        return self._answer(response)

    async def texts(self) -> list[str]:
        texts = await super().texts()
        for thread_id in await self.chat.store.thread_ids():  # type: ignore[attr-defined]
            for route in (f"/hitl/threads/{thread_id}", f"/hitl/threads/{thread_id}/audit"):
                texts.append((await self.client.get(route)).text)
        texts.append((await self.client.get("/hitl/reviews")).text)
        return texts


ADAPTERS[HTTPPath.name] = HTTPPath


# ---------------------------------------------------------------------------- (7) Pydantic AI


class PydanticAIPath(Adapter):
    """``toolguard.integrations.pydantic_ai``: a FunctionModel agent; pauses stored as JSON."""

    name = "pydantic_ai"
    title = "Pydantic AI toolset"
    clock_injectable = False

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        self.ttl = REAL_TTL if ttl is not None else None
        self.claims: MemoryStore | SQLiteStore = MemoryStore()
        self.raw_tools = python_tools(self.effects, ttl=self.ttl)
        self.rules = rules
        self.queue: list[tuple[str, dict[str, Any]]] = []
        self.pauses: list[tuple[bytes, bytes]] = []  # (history, requests) as stored JSON

    async def reopen(self, *, rules: Rules | None) -> None:
        self.rules = rules

    def _agent(self) -> Any:
        from pydantic_ai import Agent, DeferredToolRequests
        from pydantic_ai.messages import (
            ModelResponse as PydanticResponse,
        )
        from pydantic_ai.messages import TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel

        def scripted(messages: list[Any], info: Any) -> PydanticResponse:
            last = messages[-1].parts[-1]
            if last.part_kind == "user-prompt":
                name, args = self.queue.pop(0)
                return PydanticResponse(parts=[ToolCallPart(name, args, tool_call_id="c1")])
            return PydanticResponse(parts=[TextPart(str(last.content))])

        return Agent(
            FunctionModel(scripted),
            toolsets=[self._toolset()],
            output_type=[str, DeferredToolRequests],
        )

    def _toolset(self) -> Any:
        from toolguard.integrations import pydantic_ai as tg

        return tg.toolset(toolguard.guard(self.raw_tools, rules=self.rules), claims=self.claims)

    def _result(self, result: Any) -> Outcome:
        from pydantic import TypeAdapter
        from pydantic_ai import DeferredToolRequests, ModelMessagesTypeAdapter
        from pydantic_ai.messages import ModelRequest

        from toolguard.integrations import pydantic_ai as tg

        messages = result.all_messages()
        for message in messages:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if part.part_kind in ("tool-return", "retry-prompt"):
                        self.written.append(dumped(part.content))
        if isinstance(result.output, DeferredToolRequests):
            self.written.append(dumped(result.output.metadata))
            history = ModelMessagesTypeAdapter.dump_json(messages)
            requests = TypeAdapter(DeferredToolRequests).dump_json(result.output)
            self.pauses.append((history, requests))
            return self.record(Paused(tg.pending_review(result.output).model_dump(mode="json")))
        parts = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if p.part_kind in ("tool-return", "retry-prompt")
        ]
        error = parts[-1].part_kind == "retry-prompt" or (
            getattr(parts[-1], "outcome", "success") != "success"
        )
        return self.record(Ran(error=error, text=str(result.output)))

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.queue.append((name, args))
        return self._result(await self._agent().run(f"please {name}"))

    async def _resume(
        self, pause: tuple[bytes, bytes], decisions: Any, reviewer: str | None
    ) -> Outcome:
        from pydantic import TypeAdapter
        from pydantic_ai import DeferredToolRequests, ModelMessagesTypeAdapter

        from toolguard.integrations import pydantic_ai as tg

        history, requests = pause
        stored = TypeAdapter(DeferredToolRequests).validate_json(requests)
        try:
            results = tg.deferred_results(stored, decisions, reviewer=reviewer)
            result = await self._agent().run(
                message_history=ModelMessagesTypeAdapter.validate_json(history),
                deferred_tool_results=results,
            )
        except ToolguardError as exc:
            return self.record(refused(exc))
        return self._result(result)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        pause = self.pauses.pop()
        outcome = await self._resume(pause, decisions, reviewer)
        if isinstance(outcome, Refused):
            self.pauses.append(pause)
        return outcome

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        pause = self.pauses.pop()  # two processes load the same stored pause
        outcomes: list[Outcome] = []
        async with two_processes(self.tmp_path) as stores:
            for self.claims in stores:
                outcomes.append(await self._resume(pause, decisions, None))
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        # the latest run resumed with the decisions made on the run before it
        (history, _), (_, other_requests) = self.pauses[-1], self.pauses[-2]
        return await self._resume((history, other_requests), decisions, None)

    async def snapshot(self) -> Any:
        return list(self.pauses)

    async def advance(self, seconds: float) -> None:
        await anyio.sleep(REAL_TTL * 1.5)


REAL_TTL = 0.2
"""The deadline the paths without an injectable clock use for guarantee (g), in real seconds."""

ADAPTERS[PydanticAIPath.name] = PydanticAIPath


# ---------------------------------------------------------------------------- (6) OpenAI Agents SDK


class AgentsPath(Adapter):
    """``toolguard.integrations.openai_agents``: the SDK's ScriptedModel; RunState as text."""

    name = "openai_agents"
    title = "OpenAI Agents SDK tools"
    clock_injectable = False

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        from agents import set_tracing_disabled

        set_tracing_disabled(True)  # the trace exporter would call api.openai.com
        self.ttl = REAL_TTL if ttl is not None else None
        self.claims: MemoryStore | SQLiteStore = MemoryStore()
        self.raw_tools = python_tools(self.effects, ttl=self.ttl)
        self.rules = rules
        self.pauses: list[str] = []  # RunState.to_string() of each pause

    async def reopen(self, *, rules: Rules | None) -> None:
        self.rules = rules

    def _agent(self, *steps: Any) -> Any:
        from agents import Agent
        from agents.testing import ScriptedModel as AgentsModel
        from agents.testing import assistant_message

        from toolguard.integrations import openai_agents as tg

        tools = tg.function_tools(
            toolguard.guard(self.raw_tools, rules=self.rules), claims=self.claims
        )
        model = AgentsModel([*steps, *[[assistant_message("Done.")]] * 3])
        return Agent(name="assistant", model=model, tools=list[Any](tools))

    def _result(self, result: Any, ran_before: int) -> Outcome:
        from toolguard.integrations import openai_agents as tg

        outputs = [
            str(item["output"])
            for item in result.to_input_list()
            if item.get("type") == "function_call_output"
        ]
        self.written.extend(outputs)
        if result.interruptions:
            state = result.to_state()
            self.pauses.append(state.to_string())
            review = tg.pending_review(state)
            return self.record(Paused(review.model_dump(mode="json")))
        return self.record(Ran(error=len(self.effects) == ran_before, text=outputs[-1]))

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        from agents import Runner as AgentsRunner
        from agents.testing import function_call

        agent = self._agent([function_call(name, args, call_id="c1")])
        before = len(self.effects)
        return self._result(await AgentsRunner.run(agent, f"please {name}", context={}), before)

    async def _resume(self, stored: str, decisions: Any, reviewer: str | None) -> Outcome:
        from agents import Runner as AgentsRunner
        from agents import RunState, UserError

        from toolguard.integrations import openai_agents as tg

        agent = self._agent()
        state = await RunState.from_string(agent, stored)
        before = len(self.effects)
        try:
            tg.apply_decisions(state, decisions, reviewer=reviewer)
            result = await AgentsRunner.run(agent, state)
        except ToolguardError as exc:
            return self.record(refused(exc))
        except UserError as exc:  # the SDK wraps what a tool raised
            cause = exc.__cause__
            if not isinstance(cause, ToolguardError):
                raise
            return self.record(refused(cause))
        return self._result(result, before)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        stored = self.pauses.pop()
        outcome = await self._resume(stored, decisions, reviewer)
        if isinstance(outcome, Refused):
            self.pauses.append(stored)
        return outcome

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        stored = self.pauses.pop()  # two processes load the same stored RunState
        outcomes: list[Outcome] = []
        async with two_processes(self.tmp_path) as stores:
            for self.claims in stores:
                outcomes.append(await self._resume(stored, decisions, None))
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        raise NotImplementedError

    async def snapshot(self) -> Any:
        return list(self.pauses)

    async def advance(self, seconds: float) -> None:
        await anyio.sleep(REAL_TTL * 1.5)


ADAPTERS[AgentsPath.name] = AgentsPath


# ---------------------------------------------------------------------------- (8, 9) LangChain


class LangChainToolsPath(Adapter):
    """``toolguard.integrations.langchain`` tools in ``create_agent``, an in-memory checkpointer."""

    name = "langchain_tools"
    title = "LangChain tools (`tg.tools`)"
    clock_injectable = False
    middleware = False

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        self.ttl = REAL_TTL if ttl is not None else None
        self.claims: MemoryStore | SQLiteStore = MemoryStore()
        self.saver = InMemorySaver()
        self.raw_tools = python_tools(self.effects, ttl=self.ttl)
        self.rules = rules
        self.count = 0
        self.pauses: list[dict[str, Any]] = []  # the config of each paused checkpoint

    async def reopen(self, *, rules: Rules | None) -> None:
        self.rules = rules

    def _agent(self, *turns: Any) -> Any:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import (
            GenericFakeChatModel,
        )
        from langchain_core.messages import AIMessage

        from toolguard.integrations import langchain as tg

        class FakeModel(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self

        tools = toolguard.guard(self.raw_tools, rules=self.rules)
        middleware = [tg.middleware(tools, claims=self.claims)] if self.middleware else []
        model = FakeModel(messages=iter([*turns, *[AIMessage(content="Done.")] * 3]))
        return create_agent(
            model,
            tools=tg.tools(tools, claims=self.claims),
            middleware=middleware,
            checkpointer=self.saver,
        )

    async def _result(self, agent: Any, result: dict[str, Any], config: Any) -> Outcome:
        from langchain_core.messages import ToolMessage

        tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
        self.written.extend(dumped(m.content) for m in tool_messages)
        interrupts = result.get("__interrupt__")
        if interrupts:
            self.written.extend(dumped(i.value) for i in interrupts)
            self.pauses.append((await agent.aget_state(config)).config)
            [paused] = interrupts
            return self.record(Paused(paused.value))
        last = tool_messages[-1]
        return self.record(Ran(error=last.status == "error", text=str(last.content)))

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        from langchain_core.messages import AIMessage, HumanMessage

        self.count += 1
        config: Any = {"configurable": {"thread_id": f"t{self.count}"}}
        call = {"id": "c1", "name": name, "args": args, "type": "tool_call"}
        agent = self._agent(AIMessage(content="", tool_calls=[call]))
        result = await agent.ainvoke({"messages": [HumanMessage(f"please {name}")]}, config)
        return await self._result(agent, result, config)

    async def _resume(self, config: Any, decisions: Any, reviewer: str | None) -> Outcome:
        from langgraph.types import Command

        agent = self._agent()
        answer: dict[str, Any] = {"decisions": decisions}
        if reviewer is not None:
            answer["reviewer"] = reviewer
        try:
            result = await agent.ainvoke(Command(resume=answer), config)
        except ToolguardError as exc:
            return self.record(refused(exc))
        return await self._result(agent, result, config)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        config = self.pauses.pop()
        outcome = await self._resume(config, decisions, reviewer)
        if isinstance(outcome, Refused):
            self.pauses.append(config)
        return outcome

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        config = self.pauses.pop()  # two processes resume the same paused checkpoint
        outcomes: list[Outcome] = []
        async with two_processes(self.tmp_path) as stores:
            for self.claims in stores:
                outcomes.append(await self._resume(config, decisions, None))
        return outcomes

    async def decide_foreign(self, decisions: Any) -> Outcome:
        raise NotImplementedError

    async def snapshot(self) -> Any:
        agent = self._agent()
        states = []
        for config in self.pauses:
            state = await agent.aget_state(config)
            interrupts = [i.value for t in state.tasks for i in t.interrupts]
            states.append((repr(state.values), interrupts, state.next))
        return states

    async def advance(self, seconds: float) -> None:
        await anyio.sleep(REAL_TTL * 1.5)


class LangChainMiddlewarePath(LangChainToolsPath):
    """The same agent with toolguard's ``ToolguardMiddleware`` (``tg.middleware``)."""

    name = "langchain_middleware"
    title = "LangChain middleware (`tg.middleware`)"
    middleware = True


ADAPTERS[LangChainToolsPath.name] = LangChainToolsPath
ADAPTERS[LangChainMiddlewarePath.name] = LangChainMiddlewarePath


def langchain_tools(effects: Effects) -> list[Any]:
    """The four tools as plain LangChain tools (no toolguard policy of their own)."""
    from langchain_core.tools import tool

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        effects.append(("delete_file", {"path": path}))
        return f"deleted {path}"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        effects.append(("send_email", {"to": to, "body": body}))
        return f"sent to {to}"

    @tool
    def wire_transfer(amount: int, to: str) -> str:
        """Send money."""
        effects.append(("wire_transfer", {"amount": amount, "to": to}))
        return f"sent {amount} to {to}"

    @tool
    def login(user: str, password: str, port: int) -> str:
        """Log in to the mail server."""
        effects.append(("login", {"user": user, "password": password, "port": port}))
        return f"logged in as {user} with {password} on {port}"

    @tool
    def search_contacts(query: str) -> str:
        """Search the contact list."""
        effects.append(("search_contacts", {"query": query}))
        return f"contacts for {query}"

    return [delete_file, send_email, wire_transfer, login, search_contacts]


class LangChainDropInPath(LangChainToolsPath):
    """LangChain's own tools under toolguard's drop-in ``HumanInTheLoopMiddleware``.

    Its ``interrupt_on`` gives the four tools the policies the other paths give them (the
    description toolguard shows, three decisions, the deadline, the quorum, the secret);
    ``search_contacts`` has no policy of its own (``when`` never asks): only an ask rule asks.
    """

    name = "langchain_hitl"
    title = "LangChain drop-in (`HumanInTheLoopMiddleware`)"
    takes_reviewers = True

    def _agent(self, *turns: Any) -> Any:
        from langchain.agents import create_agent
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        from toolguard.integrations.langchain import HumanInTheLoopMiddleware

        class FakeModel(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self

        def entry(name: str, **policy: Any) -> dict[str, Any]:
            description = f"Tool `{name}` is awaiting approval"
            allowed = ["approve", "edit", "reject"]
            return {"allowed_decisions": allowed, "description": description, **policy}

        interrupt_on = {
            "delete_file": entry("delete_file", **({"ttl": self.ttl} if self.ttl else {})),
            "send_email": entry("send_email"),
            "wire_transfer": entry("wire_transfer", approvals=2),
            "login": entry("login", redact=["password"]),
            "search_contacts": entry("search_contacts", when=lambda request: False),
        }
        middleware = HumanInTheLoopMiddleware(
            interrupt_on,
            rules=self.rules,
            store=self.claims,
            reviewers=self.reviewers.table if self.reviewers is not None else None,
        )
        model = FakeModel(messages=iter([*turns, *[AIMessage(content="Done.")] * 3]))
        return create_agent(
            model,
            tools=langchain_tools(self.effects),
            middleware=[middleware],
            checkpointer=self.saver,
        )


ADAPTERS[LangChainDropInPath.name] = LangChainDropInPath


# ---------------------------------------------------------------------------- (10) the MCP toolset


def mcp_server(effects: Effects) -> Any:
    """A real MCP server (low-level API) with the four tools; each run goes to ``effects``."""
    from mcp import types
    from mcp.server import Server

    listed = [
        {"name": name, "description": f"The {name} tool.", "inputSchema": schema}
        for name, schema in SCHEMAS.items()
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": listed})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        effects.append((params.name, args))
        text = tool_result(params.name, args)
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": text}]})

    return Server("conformance-upstream", on_list_tools=list_tools, on_call_tool=call_tool)


MCP_LIMIT = 20
"""Seconds any MCP session of a test may take."""


async def mcp_tools(client: Any, *, ttl: float | None) -> list[Any]:
    """The MCP server's tools through ``toolguard.integrations.mcp``, with the tools' policies."""
    from toolguard.integrations.mcp import toolset

    tools = await toolset(client)
    policy: dict[str, dict[str, Any]] = {
        "delete_file": {"ttl": ttl},
        "send_email": {},
        "wire_transfer": {"approvals": 2},
        "login": {"redact": ["password"]},
    }
    guarded = []
    for name, options in policy.items():
        tool = tools.get(name)
        assert tool is not None
        guarded.append(requires_approval(**options)(tool))
    search = tools.get("search_contacts")
    assert search is not None
    return [*guarded, search]  # no policy of its own


class MCPToolsetPath(RunnerPath):
    """``toolguard.integrations.mcp.toolset`` over a real MCP client and server, in a Runner."""

    name = "mcp_toolset"
    title = "MCP toolset (`integrations.mcp`)"

    @asynccontextmanager
    async def _session(self, *, rules: Rules | None, ttl: float | None) -> AsyncIterator[Adapter]:
        from mcp import Client

        with anyio.fail_after(MCP_LIMIT):
            async with Client(mcp_server(self.effects), mode="legacy") as client:
                self.client = client
                await self.open(rules=rules, ttl=ttl)
                yield self

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        await super().open(rules=rules, ttl=ttl)
        self.raw_tools = await mcp_tools(self.client, ttl=None)
        self.runner = self._runner(rules)


ADAPTERS[MCPToolsetPath.name] = MCPToolsetPath


class PydanticAIMCPPath(PydanticAIPath):
    """A Pydantic AI ``MCPToolset`` (fastmcp client, in-memory MCP server) guarded by toolguard."""

    name = "pydantic_ai_mcp"
    title = "Pydantic AI MCPToolset"

    def _toolset(self) -> Any:
        from fastmcp.client.transports.base import ClientTransport, TransportOptions
        from mcp.shared.memory import create_client_server_memory_streams
        from pydantic_ai.mcp import MCPToolset

        from toolguard.integrations import pydantic_ai as tg

        server = mcp_server(self.effects)

        class InMemory(ClientTransport):
            @asynccontextmanager
            async def connect_session(
                self, *, transport_options: Any = None, **session_kwargs: Any
            ) -> AsyncIterator[Any]:
                session_class = (transport_options or TransportOptions()).session_class
                async with (
                    create_client_server_memory_streams() as (ours, theirs),
                    anyio.create_task_group() as group,
                ):
                    options = server.create_initialization_options()
                    group.start_soon(lambda: server.run(theirs[0], theirs[1], options))
                    try:
                        async with session_class(
                            read_stream=ours[0], write_stream=ours[1], **session_kwargs
                        ) as session:
                            yield session
                    finally:
                        group.cancel_scope.cancel()

        policies = {
            "delete_file": toolguard.ApprovalPolicy(ttl=self.ttl),
            "send_email": toolguard.ApprovalPolicy(),
            "wire_transfer": toolguard.ApprovalPolicy(approvals=2),
            "login": toolguard.ApprovalPolicy(redact=("password",)),
        }  # search_contacts: no policy, so the classifier reads it (a read verb)
        return tg.toolset(
            MCPToolset(InMemory()), rules=self.rules, policies=policies, claims=self.claims
        )


ADAPTERS[PydanticAIMCPPath.name] = PydanticAIMCPPath


# ---------------------------------------------------------------------------- (5) the MCP gateway


class MCPProxyPath(Adapter):
    """``toolguard mcp-proxy`` in process: real MCP client, gateway and upstream; its HTTP API."""

    name = "mcp_proxy"
    title = "MCP gateway (`toolguard mcp-proxy`)"
    clock_injectable = False
    takes_judge = True
    takes_reviewers = True

    @asynccontextmanager
    async def _session(self, *, rules: Rules | None, ttl: float | None) -> AsyncIterator[Adapter]:
        from mcp import Client

        self.ttl = REAL_TTL if ttl is not None else 60.0
        self.db = self.tmp_path / "proxy.sqlite3"
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.reviews: list[tuple[str, str, Any]] = []  # (thread_id, review_id, the call's box)
        with anyio.fail_after(MCP_LIMIT):
            async with (
                self._judge_of_the_command_line(),
                Client(mcp_server(self.effects), mode="legacy") as upstream,
                anyio.create_task_group() as tasks,
            ):
                self.upstream = upstream
                self.tasks = tasks
                self.proxy, self.http = self._gateway(rules)
                async with (
                    self._connect() as client,
                    anyio.create_task_group() as calls,
                ):
                    self.client = client
                    self.calls = calls
                    yield self
                    calls.cancel_scope.cancel()  # calls still waiting: their client gives up
                tasks.cancel_scope.cancel()

    def _connect(self) -> AbstractAsyncContextManager[Any]:
        """The MCP client of the gateway's server (in memory: stdio's messages, without a pipe)."""
        from mcp import Client

        return Client(self.proxy.server(), mode="legacy")

    @asynccontextmanager
    async def _judge_of_the_command_line(self) -> AsyncIterator[None]:
        """``--judge-model`` (and ``--judge-auto-approve``) on the scripted OpenAI server."""
        self.judge: Judge | None = None
        if self.judging is None:
            yield
            return
        from tests.helpers import MODEL_ENV_VARS
        from tests.openai_server import Reply, ScriptedOpenAIServer, reply_text
        from toolguard._cli import mcp_proxy
        from toolguard._cli.main import _parser

        judging = self.judging

        def reply(body: dict[str, Any]) -> Reply:
            return reply_text(judging.answer(json.loads(body["messages"][-1]["content"])))

        options = ["--judge-model", JUDGE_MODEL]
        if judging.auto_approve:
            options.append("--judge-auto-approve")
        args = _parser().parse_args(["mcp-proxy", *options, "--", "upstream"])
        with ScriptedOpenAIServer([reply] * 50) as server:
            self.openai = server
            with mock.patch.dict(os.environ):  # the environment's OpenAI settings, restored after
                for name in MODEL_ENV_VARS:  # no real key goes anywhere
                    os.environ.pop(name, None)
                os.environ["OPENAI_BASE_URL"] = server.base_url
                self.judge = mcp_proxy.judge_of(args)
            assert self.judge is not None
            async with self.judge.model.client:  # type: ignore[attr-defined]
                yield

    def judge_calls(self) -> int:
        return len(self.openai.requests)

    def _gateway(self, rules: Rules | None) -> tuple[Any, Any]:
        import httpx

        from toolguard._gateway.proxy import MCPProxy
        from toolguard._gateway.routes import DEFAULT_PORT, build_app
        from toolguard.http import HeaderAuth

        async def hook(event: str, payload: dict[str, Any]) -> None:
            self.events.append((event, payload))

        listed = [
            {"name": name, "description": f"The {name} tool.", "inputSchema": schema}
            for name, schema in SCHEMAS.items()
        ]
        proxy = MCPProxy(
            self.upstream,
            listed,
            store=SQLiteStore(self.db),
            ttl=self.ttl,
            on_event=hook,
            rules=rules,
            redact={"login": ["password"]},
            judge=self.judge,
        )
        proxy._tasks = self.tasks
        proxy.chat.authorize = self.reviewers  # as --rules with a [reviewers] table does
        auth = None
        if self.reviewers is not None:  # reviewers sign in (an authenticating proxy's header)
            auth = HeaderAuth("X-Reviewer", trusted_proxies=["127.0.0.1/32"])
        app = build_app(proxy.chat, auth=auth)
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app),
            base_url=f"http://127.0.0.1:{DEFAULT_PORT}",
            headers={"X-Reviewer": "admin"} if auth is not None else {},  # a signed-in reader
        )
        return proxy, http

    async def reopen(self, *, rules: Rules | None) -> None:
        self.proxy, self.http = self._gateway(rules)  # the same SQLite file

    @staticmethod
    def _text(result: Any) -> Ran:
        texts = [getattr(block, "text", "") for block in result.content]
        return Ran(error=bool(result.is_error), text="\n".join(texts))

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        box: dict[str, Any] = {}
        done = anyio.Event()
        known = {r[0] for r in self.reviews}

        async def call() -> None:
            box["result"] = await self.client.call_tool(name, args)
            done.set()

        self.calls.start_soon(call)
        while True:
            if done.is_set():
                return self.record(self._text(box["result"]))
            listed = (await self.http.get("/hitl/reviews")).json()["reviews"]
            new = [r for r in listed if r["thread_id"] not in known]
            if new:
                [item] = new
                self.written.append(dumped(item))
                self.reviews.append((item["thread_id"], item["review_id"], (box, done)))
                return self.record(Paused(item["pending_review"]))
            await anyio.sleep(0.01)

    async def _post(
        self,
        http: Any,
        decisions: Any,
        thread_id: str,
        review_id: str,
        reviewer: str | None = None,
    ) -> Outcome:
        body = {"thread_id": thread_id, "review_id": review_id, "decisions": decisions}
        headers = {"X-Reviewer": reviewer} if reviewer is not None else {}
        response = await http.post("/hitl/review", json=body, headers=headers)
        self.written.append(response.text)
        if response.status_code != 200:
            detail = response.json().get("detail")
            text = detail if isinstance(detail, str) else json.dumps(detail)
            return Refused(
                f"HTTP {response.status_code}", re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)
            )
        return Ran(error=False, text="")

    async def _wait(self, call: Any) -> Outcome:
        box, done = call
        await done.wait()
        return self.record(self._text(box["result"]))

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        thread_id, review_id, call = self.reviews[-1]
        answer = await self._post(self.http, decisions, thread_id, review_id, reviewer)
        if isinstance(answer, Refused):
            return answer
        self.reviews.pop()
        box, done = call
        # The call's thread may wait again (an edit needing its own review, a quorum's
        # progress): a new review of the same thread is what the decision led to.
        while not done.is_set():
            listed = (await self.http.get("/hitl/reviews")).json()["reviews"]
            again = [
                r for r in listed if r["thread_id"] == thread_id and r["review_id"] != review_id
            ]
            if again:
                [item] = again
                self.written.append(dumped(item))
                self.reviews.append((item["thread_id"], item["review_id"], call))
                return self.record(Paused(item["pending_review"]))
            await anyio.sleep(0.01)
        return self.record(self._text(box["result"]))

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        thread_id, review_id, call = self.reviews.pop()
        second = self._gateway(None)[1]  # a second gateway over the same SQLite file
        answers: list[Outcome] = []

        async def one(http: Any) -> None:
            answers.append(await self._post(http, decisions, thread_id, review_id))

        async with anyio.create_task_group() as tasks:
            for http in (self.http, second):
                tasks.start_soon(one, http)
        result = await self._wait(call)
        return [result if isinstance(a, Ran) else a for a in answers]

    async def decide_foreign(self, decisions: Any) -> Outcome:
        thread_id, _, _ = self.reviews[-1]
        _, other_review, _ = self.reviews[-2]
        return await self._post(self.http, decisions, thread_id, other_review)

    async def snapshot(self) -> Any:
        states = []
        store = self.proxy.chat.store
        for thread_id in await store.thread_ids():
            state = await store.load(thread_id)
            assert state is not None
            states.append(state.model_dump(mode="json", exclude={"version"}))
        return states

    async def advance(self, seconds: float) -> None:
        _, _, call = self.reviews[-1]
        box, done = call
        await done.wait()  # the gateway answers the waiting call at its deadline
        self.record(self._text(box["result"]))

    async def texts(self) -> list[str]:
        texts = list(self.written)
        texts.append((await self.http.get("/hitl/audit")).text)
        texts.extend(dumped(payload) for _, payload in self.events)
        store = self.proxy.chat.store
        texts.extend(
            [(await self.http.get(f"/hitl/threads/{t}")).text for t in await store.thread_ids()]
        )
        return texts


ADAPTERS[MCPProxyPath.name] = MCPProxyPath


class MCPProxyHTTPPath(MCPProxyPath):
    """``toolguard mcp-proxy --listen``: the same gateway, its MCP served over streamable HTTP
    on 127.0.0.1 (the listen module's app, guards and token included) to a real MCP client."""

    name = "mcp_proxy_http"
    title = "MCP gateway over HTTP (`mcp-proxy --listen`)"

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from tests.helpers import free_port
        from toolguard._gateway.listen import Listen, serve_listening

        port = free_port()
        token = "conformance-token"  # noqa: S105 - a test value
        listen = Listen(f"http://127.0.0.1:{port}/mcp", "127.0.0.1", port, "/mcp", token)
        ready, stop, stopped = anyio.Event(), anyio.Event(), anyio.Event()

        async def serve() -> None:
            try:
                await serve_listening(
                    self.proxy.server(),
                    listen,
                    on_ready=ready.set,
                    max_body_bytes=1024 * 1024,
                    signals=False,
                    stop=stop,
                )
            finally:
                stopped.set()

        self.tasks.start_soon(serve)
        await ready.wait()
        headers = {"Authorization": f"Bearer {token}"}
        try:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(MCP_LIMIT)) as http,
                Client(streamable_http_client(listen.url, http_client=http), mode="legacy") as c,
            ):
                yield c
        finally:
            stop.set()  # the server ends its sessions and closes its sockets
            with anyio.CancelScope(shield=True):
                await stopped.wait()


ADAPTERS[MCPProxyHTTPPath.name] = MCPProxyHTTPPath


# ------------------------------------------------------------------ paths in modules of their own

# A path kept in a module of its own (``paths_<name>.py`` beside this one) adds its adapter
# to ADAPTERS when imported; all of them are imported here, in name order.
for _module in sorted(Path(__file__).parent.glob("paths_*.py")):
    importlib.import_module(f"{__package__}.{_module.stem}")
