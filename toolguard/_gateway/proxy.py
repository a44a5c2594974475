"""``toolguard mcp-proxy``: an MCP approval gateway in front of any MCP server.

The proxy starts the upstream MCP server (a command, over stdio, with the
proxy's environment without its own secrets), lists its tools and serves them again, unchanged,
on its own stdin/stdout. A call to a tool that needs no approval (see
:meth:`toolguard.Classifier.explain` with MCP annotations) is forwarded at
once and its ``CallToolResult`` comes back as the upstream sent it. A call
that needs approval becomes a pending review of a :class:`~toolguard.ReviewedChat`
kept in a SQLite store — one thread per call, whose tiny internal model
proposes exactly that call — so binding (the approval covers that tool name
and those exact arguments only, once), deadlines, the audit trail,
compare-and-set claims and crash recovery are the chat's. Then:

- a client that declared the elicitation capability is asked, in form mode
  (a server-initiated ``elicitation/create`` before protocol 2026-07-28; an
  ``input_required`` result answered by retrying the call from 2026-07-28 on,
  whose ``requestState`` is only an opaque, single-use key of a record kept
  by the proxy);
- whatever the client can do, a reviewer may decide on the approval page /
  HTTP API served on ``127.0.0.1:--port`` (``GET /hitl/reviews`` lists the
  pending ones, ``POST /hitl/review`` decides);
- after ``--ttl`` seconds without a decision the review expires and the call
  answers ``isError`` saying so; nothing ran;
- a client that gives up on the call first (``notifications/cancelled``, its
  own request timeout, a closed connection) gets the review cancelled at
  once: a later approval is refused and nothing runs; one that gives up while
  the approved call runs gets it cancelled on the upstream server
  (:mod:`toolguard._gateway.handoff`: a decision runs the call in its client's
  request, and the reviewer's request answers as soon as it started).

The page and the API are built by the same factory as ``toolguard serve``'s
app (:func:`~toolguard._gateway.routes.build_app`): foreign ``Host`` headers get a 421, cross-site
writes a 403, large bodies a 413, every answer the security headers.

With ``--rules``, a call a ``deny`` rule matches asks nobody and runs
nothing, but gets its own thread too, whose audit trail holds a ``denied``
event (tool, arguments, the rule, time); ``GET /hitl/audit`` exports every
call's trail. The upstream's resources and prompts, when it has any, are
forwarded as they are (they read; no review).

At start-up every review a previous proxy process left open on the same
store is cancelled (and a thread left applying decisions is recovered
without running anything again): a call whose proxy died never runs later.
Run one proxy per SQLite file; several share a PostgreSQL store, each closing
only the reviews of processes that are gone (see :mod:`toolguard._gateway.shared`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import json
import secrets
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel
import anyio.to_thread

from toolguard._chat.turns import StoredApprovals
from toolguard._core import telemetry
from toolguard._core.errors import ToolguardError
from toolguard._core.llm import Message, ModelResponse
from toolguard._core.records import Action, ToolCall
from toolguard._enforce.judge import Judge
from toolguard._gateway.asking import ask_form, ask_to_open, asks_by_url
from toolguard._gateway.calls_info import CallsInfo
from toolguard._gateway.grants import GatewayGrants
from toolguard._gateway.handoff import ABANDONED, WaitingChat, abandon
from toolguard._gateway.passing import unstamped
from toolguard._gateway.question import APPROVAL_SCHEMA, approval_message
from toolguard._gateway.relay import (
    DEFAULT_PROGRESS_INTERVAL,
    Relay,
    report_waiting,
    schema_tools,
)
from toolguard._gateway.spans import counted_once
from toolguard._gateway.upstream import read_only_handlers, wire
from toolguard._policy.redact import check_redact
from toolguard._policy.rules import Rule, Rules, denied_text, rule_for
from toolguard._stores.protocol import Store, ThreadState
from toolguard._tools.classify import Classifier
from toolguard._tools.toolset import Toolset
from toolguard._version import __version__

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = [
    "ABANDONED",
    "APPROVAL_KEY",
    "BAD_STATE",
    "CANCELLED_BY_CLIENT",
    "CLIENT_REVIEWER",
    "DECLINED",
    "DEFAULT_TTL",
    "JUDGE_THREAD",
    "NOT_A_CHAT",
    "RESTARTED",
    "CallModel",
    "EventHook",
    "MCPProxy",
]

JUDGE_THREAD: Final = "toolguard-mcp-proxy-judge"
"""The thread of the gateway's store that counts a judge's auto-approvals (``judged`` events)."""
DEFAULT_TTL: Final = 300.0
"""Seconds a call waits for a decision when no ``--ttl`` is given."""
APPROVAL_KEY: Final = "toolguard_approval"
"""The key of the elicitation in an ``input_required`` result (2026-07-28)."""
CLIENT_REVIEWER: Final = "mcp-client"
"""The reviewer recorded in the audit trail for a decision made through elicitation."""
_MESSAGE_PREFIX: Final = "toolguard mcp-proxy call "
_POLL_SECONDS: Final = 0.05
_INPUT_REQUIRED_VERSION: Final = "2026-07-28"
NOT_A_CHAT: Final = (
    "This thread holds one MCP tool call waiting for approval; it takes no messages."
)
DECLINED: Final = "The user declined to approve the call to `{name}`. It was not executed."
CANCELLED_BY_CLIENT: Final = (
    "The user cancelled the approval of the call to `{name}`. It was not executed."
)
RESTARTED: Final = "the toolguard mcp-proxy that held this call stopped before a decision arrived"
BAD_STATE: Final = (
    "This approval answer does not match a question the proxy asked for this exact call"
    " (unknown, already used, or for another tool or other arguments). Nothing was executed;"
    " call the tool again."
)

# The upstream's answers to the calls that ran while the current task opened their thread
# (a call a judge let run without a review): the proxy returns them as they came.
_RAN: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("_RAN", default=None)

EventHook = Callable[[str, dict[str, Any]], Awaitable[None] | None]
"""Called as ``hook(event, payload)`` on ``review.requested``, ``review.decided`` and
``review.expired``; the payload holds ``thread_id``, ``review_id``, ``tool``, ``args``
and, once decided, ``status`` (the action's final status: ``cancelled`` for a call the
client declined or gave up on)."""


def _canonical(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, ensure_ascii=True, allow_nan=True)


# ---------------------------------------------------------------------------- the internal model


class CallModel:
    """Proposes exactly the MCP call its thread was opened for, then says it is done.

    The user message of each thread is ``_MESSAGE_PREFIX + call_id``; the
    call itself lives only here (never in anything a client sends back) and
    is proposed once: a second message naming the same call proposes nothing.
    """

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        # A new call's id; several processes on one store name theirs in it (see shared.py).
        self.new_id: Callable[[], str] = lambda: f"mcp-{secrets.token_hex(12)}"

    def open(self, name: str, args: dict[str, Any]) -> str:
        call_id = self.new_id()
        self.calls[call_id] = (name, args)
        return call_id

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        last = messages[-1] if messages else {}
        if last.get("role") != "user":
            return ModelResponse(text="done")
        content = last.get("content")
        if isinstance(content, str) and content.startswith(_MESSAGE_PREFIX):
            call = self.calls.pop(content[len(_MESSAGE_PREFIX) :], None)
            if call is not None:
                call_id = content[len(_MESSAGE_PREFIX) :]
                return ModelResponse(tool_calls=[ToolCall(id=call_id, name=call[0], args=call[1])])
        return ModelResponse(text=NOT_A_CHAT)


@dataclasses.dataclass(frozen=True)
class _Asked:
    """A question asked through ``input_required``: what it is bound to (kept by the proxy)."""

    thread_id: str
    review_id: str
    call_id: str
    name: str
    args: str  # canonical JSON


# ---------------------------------------------------------------------------- the proxy


class MCPProxy:
    """The gateway's logic, independent of transports (see the module docstring).

    Args:
        upstream: a connected ``mcp.Client`` (or anything with an async
            ``call_tool(name, arguments)`` answering a ``CallToolResult``).
        listed: the upstream's tools in wire format (``tools/list`` items).
        store: where the reviews live (a :class:`~toolguard.SQLiteStore`).
        ttl: seconds a call waits for a decision (> 0).
        classifier: the rules; ``Classifier()`` by default. MCP annotations
            apply on top.
        on_event: an :data:`EventHook`, for notifications.
        rules: argument rules applied before the annotations.
        redact: secret arguments by tool name, e.g. ``{"login": ["password"]}``:
            the approval question, the page, the review list and the audit
            trail show ``REDACTED`` instead of their values; the upstream
            server gets the real values.
        judge: a :class:`~toolguard.Judge`: a model's second opinion on the
            calls that need approval (with ``scope="all"``, on every call,
            each then in its own thread). A gateway has no person's messages:
            the judge reads only the call. Its verdict joins the review; with
            ``auto_approve=True`` a call it lets run is forwarded without a
            review and answers as the upstream did. Its limits count for the
            whole gateway, in ``store`` (the thread :data:`JUDGE_THREAD`): it
            never auto-approves the same call (tool and validated arguments)
            twice, nor more than ``max_auto_approvals`` calls, also across
            restarts.
        ask_by_url: prefer URL elicitation (see :mod:`toolguard._gateway.asking`).

    Raises:
        ValueError: ``ttl`` is not positive; ``redact`` names a tool the
            upstream does not list or an argument its schema does not have.
    """

    def __init__(
        self,
        upstream: Any,
        listed: Sequence[Mapping[str, Any]],
        *,
        store: Store,
        ttl: float = DEFAULT_TTL,
        classifier: Classifier | None = None,
        on_event: EventHook | None = None,
        rules: Rules | None = None,
        redact: Mapping[str, Iterable[str]] | None = None,
        judge: Judge | None = None,
        ask_by_url: bool = False,
    ) -> None:
        if not ttl > 0:
            msg = f"ttl must be a positive number of seconds, got {ttl!r}"
            raise ValueError(msg)
        self.upstream = upstream
        self.listed = [dict(item) for item in listed]
        self.ttl = ttl
        self.on_event = on_event
        self.model = CallModel()
        secret = {tool: check_redact(names) for tool, names in (redact or {}).items()}
        unknown = sorted(set(secret) - {item.get("name") for item in self.listed})
        if unknown:
            msg = f"redact names the tool {unknown[0]!r}, which the upstream server does not list"
            raise ValueError(msg)
        tools, self.unguardable = schema_tools(self.listed, self._forwarder, secret)
        self.classifier, self.redact = classifier, secret  # for a new listing (relay)
        self.toolset = Toolset(tools, classifier=classifier, rules=rules)
        if judge is not None:
            # Every call is its own thread: the judge's limits count across the gateway, in
            # its store (the clock is the chat's, read at each use).
            judge = judge.counted_in(
                StoredApprovals(store, JUDGE_THREAD, lambda: self.chat.clock())  # noqa: PLW0108
            )
        self.chat = WaitingChat(self.model, self.toolset, store=store, review_ttl=ttl, judge=judge)
        # The threads' user messages are the proxy's own, not a person's words.
        self.chat.judge_reads_messages = False
        # Approves grant scope "server": later calls through the gateway (see grants.py);
        # their clock is the chat's, read at each use.
        self.chat.shared_grants = GatewayGrants(store, lambda: self.chat.clock())  # noqa: PLW0108
        self.judges_every_call = judge is not None and judge.scope == "all"
        self._asked: dict[str, _Asked] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self.calls = CallsInfo(upstream)  # the server and each call's client, for the page
        self.relay: Relay | None = None  # set by Relay.attach
        self.progress_interval = DEFAULT_PROGRESS_INTERVAL
        self.page_url: str | None = None  # named in the progress notifications
        self.ask_by_url = ask_by_url

    # ------------------------------------------------------------------ helpers

    def _forwarder(self, name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        """The function the guarded tool ``name`` runs: the call on the current upstream."""

        async def forward(**args: Any) -> dict[str, Any]:
            answer = await self.upstream.call_tool(name, args)
            ran = _RAN.get()
            if ran is not None:
                ran.append(answer)
            return unstamped(wire(answer))  # the upstream connection's envelope is its own

        forward.__name__ = forward.__qualname__ = name
        telemetry.mark_type(forward, telemetry.EXTENSION)  # the upstream server runs it
        return forward

    async def _forward_at_once(self, name: str, args: dict[str, Any], *, by_rule: bool) -> Any:
        """Forward a call that needs no review; its ``execute_tool`` span when tracing.

        The span has no ``gen_ai.tool.call.id``: an MCP call has no id of its own.
        """
        otel = telemetry.tracer()
        if otel is None:
            return await self.upstream.call_tool(name, args)
        decided = telemetry.Decided(by=telemetry.BY_RULE) if by_rule else None
        with telemetry.running(otel, "", name, decided, tool=self.toolset.get(name)) as span:
            answer = await self.upstream.call_tool(name, args)
            telemetry.finish(span, "executed")  # the upstream answered, as a reviewed call's span
        return answer

    def at_once(self, name: str, args: dict[str, Any]) -> tuple[Rule | None, bool]:
        """The rule deciding a call (``rule_for``), and whether the call runs without a review.

        The one answer both the gateway's ``tools/call`` and its stdio fast lane
        follow: an ``allow`` rule runs it, ``ask`` and ``deny`` never do, with no
        rule the tool's policy decides (an unknown tool waits: it is refused).
        """
        rule = rule_for(self.toolset.rules, name, args)
        if rule is not None:
            return rule, rule.effect == "allow"
        return None, not self.needs_approval(name)

    def needs_approval(self, name: str) -> bool:
        """Whether a call to ``name`` waits for a human (unknown or unguardable tools: yes)."""
        tool = self.toolset.get(name)
        return tool is None or tool.approval is not None

    async def _emit(self, event: str, payload: dict[str, Any]) -> None:
        if self.on_event is None:
            return
        try:
            result = self.on_event(event, payload)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # a broken hook must not change the outcome
            sys.stderr.write(f"toolguard mcp-proxy: the event hook failed on {event}: {exc}\n")

    @staticmethod
    def _error(text: str) -> Any:
        from mcp import types  # noqa: PLC0415

        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    # ------------------------------------------------------------------ start-up

    async def close_stale(self) -> list[str]:
        """Close every review a previous process left open; return the thread ids touched.

        Threads ``awaiting_review`` are cancelled (nothing runs), threads left
        ``running`` are recovered (an approved call with no result ends
        ``failed``, never run again). Both are audited.
        """
        lister = getattr(self.chat.store, "thread_ids", None)
        if lister is None:
            return []
        closed: list[str] = []
        for thread_id in await lister():
            state = await self.chat.store.load(thread_id)
            if state is None:
                continue
            if await self.chat.held_elsewhere(state):
                continue  # another live gateway process on this store waits for it
            with contextlib.suppress(ToolguardError):
                if state.status == "awaiting_review":
                    await self.chat.cancel_review(thread_id, reviewer=None, reason=RESTARTED)
                    closed.append(thread_id)
                elif state.status == "running" and await self.chat.recover(thread_id):
                    closed.append(thread_id)
        return closed

    # ------------------------------------------------------------------ tools/list and tools/call

    def list_result(self, ctx: Any = None) -> Any:
        """The ``tools/list`` answer: the upstream's tools, unchanged (as the connection to the
        upstream of the client of ``ctx`` lists them: see :mod:`~toolguard._gateway.relay`)."""
        from mcp import types  # noqa: PLC0415

        listed = self.relay.listed_for(ctx) if self.relay is not None else self.listed
        return types.ListToolsResult.model_validate({"tools": listed})

    async def call(self, ctx: Any, params: Any) -> Any:
        """Answer one ``tools/call`` (the low-level server's handler)."""
        name: str = params.name
        args: dict[str, Any] = dict(params.arguments or {})
        if name in self.unguardable:
            return self._error(
                f"toolguard cannot guard the tool `{name}`: {self.unguardable[name]}."
                " It was not executed."
            )
        if self.toolset.get(name) is None:
            return self._error(f"Unknown tool `{name}`: the upstream MCP server did not list it.")
        rule, runs_at_once = self.at_once(name, args)
        if rule is not None and rule.effect == "deny" and self.chat.runner.shadow != "all":
            return await self._deny(name, args, rule)
        effect = rule.effect if rule is not None else None
        if runs_at_once and not self.judges_every_call:
            return await self._forward_at_once(name, args, by_rule=effect == "allow")
        session = ctx.session
        capabilities = getattr(session, "client_capabilities", None)
        elicitation = getattr(capabilities, "elicitation", None)
        can_elicit = elicitation is not None and (
            elicitation.form is not None or elicitation.url is None
        )
        version = str(getattr(ctx, "protocol_version", "") or "")
        modern = version >= _INPUT_REQUIRED_VERSION
        if modern and getattr(params, "request_state", None) is not None:
            return await self._retried(params, name, args)
        try:
            # a worker thread: for large arguments this takes a while, the loop keeps serving
            question = await anyio.to_thread.run_sync(
                approval_message, name, self._shown(name, args), self._description(name)
            )
        except ValueError:
            can_elicit = False  # cannot be shown faithfully: only the page may decide
            question = ""
        by_url = not modern and asks_by_url(self, capabilities, form_fits=bool(question))
        opened = await self._open(name, args)
        if not isinstance(opened, tuple):
            return opened  # ran without a review (a judge let it), or refused
        thread_id, review_id, call_id, pending_review = opened
        self.calls.opened(thread_id, ctx)
        # From here on, a client that gives up on the call (notifications/cancelled, its
        # own timeout, a closed connection: the MCP server cancels this handler) gets
        # the review cancelled, so that nobody can approve a call whose caller is gone.
        try:
            await self._emit(
                "review.requested",
                {
                    "thread_id": thread_id,
                    "review_id": review_id,
                    "tool": name,
                    "args": self._shown(name, args),  # secrets redacted, as the reviewer sees them
                    "pending_review": pending_review,
                },
            )
            await anyio.lowlevel.checkpoint_if_cancelled()  # gave up while it was being opened
            if can_elicit and modern:
                return self._ask_later(thread_id, review_id, call_id, name, args, question)
            # Held here: a decision runs the call in this request (see handoff.py).
            async with self.chat.holding(thread_id, ctx), anyio.create_task_group() as asking:
                if by_url:  # to open the review on the page (see asking.py)
                    asking.start_soon(ask_to_open, self, ctx, name, thread_id, review_id)
                elif can_elicit:
                    asking.start_soon(ask_form, self, ctx, name, question, thread_id, review_id)
                wait = (ctx, self.chat, thread_id, name, self.progress_interval, self.page_url)
                stream = self.relay.passing.progress_of(ctx) if self.relay is not None else None
                asking.start_soon(report_waiting, *wait, stream)  # progress while a person decides
                result = await self._outcome(thread_id, review_id, call_id, name, args)
                asking.cancel_scope.cancel()  # decided elsewhere (the page) or expired
            return result
        except BaseException:
            await abandon(self, thread_id, review_id, name, args)
            raise

    async def _deny(self, name: str, args: dict[str, Any], rule: Rule) -> Any:
        """Refuse a call a deny rule matches, recorded in the audit trail; nobody is asked.

        The call gets its own thread, like a reviewed one: the chat's runner
        applies the same rules, refuses it without running or asking anything
        and audits it as ``denied`` (tool, arguments, the rule's text, time).
        Should the runner put it up for review instead, the review is
        cancelled at once: a call the proxy judged denied never waits or runs.
        """
        call_id = self.model.open(name, args)
        turn = await self.chat.send_message(f"{_MESSAGE_PREFIX}{call_id}")
        text = denied_text(name, rule)
        if turn.pending_review is not None and turn.review_id is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(ToolguardError):
                await self.chat.cancel_review(
                    turn.thread_id, review_id=turn.review_id, reason=text.split(". It was")[0]
                )
            return self._error(text)
        state = await self.chat.get_thread(turn.thread_id)
        if any(event.kind == "denied" for event in state.audit):
            return self._error(text)  # as the rule says it (the history's text is templated)
        # refused before the rules were asked (arguments that break the schema): say why
        return self._error(_tool_text(state, call_id) or text)

    async def _open(
        self, name: str, args: dict[str, Any]
    ) -> tuple[str, str, str, dict[str, Any]] | Any:
        """A new thread whose review holds exactly this call, or the call's final answer.

        Returns the thread id, the review id, the call id and the ``pending_review``
        payload; or, for a call that needed no review after all (a judge let it
        run), the upstream's ``CallToolResult``; or the error of a refused one.
        Shielded from cancellation: a client giving up meanwhile finds the
        review saved and known to the caller, which then cancels it (never an open
        review nobody waits for).
        """
        call_id = self.model.open(name, args)
        ran: list[Any] = []
        token = _RAN.set(ran)
        try:
            with anyio.CancelScope(shield=True):
                turn = await self.chat.send_message(f"{_MESSAGE_PREFIX}{call_id}")
        finally:
            _RAN.reset(token)
        if turn.pending_review is None or turn.review_id is None:
            if ran:
                return ran[-1]
            state = await self.chat.get_thread(turn.thread_id)
            return self._error(_tool_text(state, call_id) or f"The call to `{name}` was refused.")
        pending = turn.pending_review.model_dump(mode="json")
        return turn.thread_id, turn.review_id, call_id, pending

    async def _decide(self, thread_id: str, review_id: str, name: str, answer: Any) -> None:
        """Apply an elicitation answer to the review (a reviewer on the page may have won)."""
        action = getattr(answer, "action", None)
        content = getattr(answer, "content", None) or {}
        # Shielded: once a decision is being applied, the call finishes even if the
        # client gives up meanwhile (the thread never stays half-applied).
        with anyio.CancelScope(shield=True), contextlib.suppress(ToolguardError):
            if action == "accept" and content.get("decision") == "approve":
                await self.chat.submit_review(
                    [{"type": "approve"}], thread_id, review_id=review_id, reviewer=CLIENT_REVIEWER
                )
            elif action == "accept" and content.get("decision") == "reject":
                reason = content.get("message")
                decision: dict[str, Any] = {"type": "reject"}
                if isinstance(reason, str) and reason.strip():
                    decision["message"] = reason.strip()
                await self.chat.submit_review(
                    [decision], thread_id, review_id=review_id, reviewer=CLIENT_REVIEWER
                )
            else:
                text = DECLINED if action == "decline" else CANCELLED_BY_CLIENT
                await self.chat.cancel_review(
                    thread_id,
                    review_id=review_id,
                    reviewer=CLIENT_REVIEWER,
                    reason=text.format(name=name).split(". It was")[0],
                )

    def _shown(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """A call's arguments as the reviewer may see them (secrets replaced)."""
        tool = self.toolset.get(name)
        return tool.shown_args(args) if tool is not None else args

    def _description(self, name: str) -> str:
        tool = self.toolset.get(name)
        return str(getattr(tool, "description", "") or "")

    def _ask_later(  # noqa: PLR0917 - one record of the question
        self,
        thread_id: str,
        review_id: str,
        call_id: str,
        name: str,
        args: dict[str, Any],
        question: str,
    ) -> Any:
        """The ``input_required`` answer (2026-07-28): the client asks and retries the call."""
        from mcp import types  # noqa: PLC0415

        token = secrets.token_urlsafe(24)
        self._asked[token] = _Asked(thread_id, review_id, call_id, name, _canonical(args))
        if self._tasks is not None:
            self._tasks.start_soon(self._expire_later, thread_id, review_id, call_id, name, args)
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=question,
                requested_schema=APPROVAL_SCHEMA,
            )
        )
        return types.InputRequiredResult(
            input_requests={APPROVAL_KEY: request}, request_state=token
        )

    async def _retried(self, params: Any, name: str, args: dict[str, Any]) -> Any:
        """A retried call carrying the answer: valid once, for the same tool and arguments."""
        from mcp import types  # noqa: PLC0415

        token = params.request_state
        asked = self._asked.get(token)
        if asked is None:
            return self._error(BAD_STATE)
        if asked.name != name or asked.args != _canonical(args):
            return self._error(BAD_STATE)
        del self._asked[token]
        answer: Any = None
        responses = params.input_responses or {}
        raw = responses.get(APPROVAL_KEY)
        if raw is not None:
            with contextlib.suppress(ValueError):
                answer = types.ElicitResult.model_validate(wire(raw))
        await self._decide(asked.thread_id, asked.review_id, name, answer)
        return await self._outcome(asked.thread_id, asked.review_id, asked.call_id, name, args)

    async def _expire_later(
        self, thread_id: str, review_id: str, call_id: str, name: str, args: dict[str, Any]
    ) -> None:
        """Close an ``input_required`` review the client never answered, at its deadline."""
        with contextlib.suppress(ToolguardError):
            state = await self.chat.get_thread(thread_id)
            deadline = state.pending.expires_at if state.pending is not None else None
            if deadline is not None:
                await anyio.sleep(max(0.0, (deadline - self.chat.clock()).total_seconds()))
            state = await self.chat.get_thread(thread_id)
            if state.status == "awaiting_review":  # nobody answered: expire it (and tell)
                await self._outcome(thread_id, review_id, call_id, name, args)
        for token, asked in list(self._asked.items()):
            if asked.thread_id == thread_id:
                self._asked.pop(token, None)

    async def _outcome(
        self, thread_id: str, review_id: str, call_id: str, name: str, args: dict[str, Any]
    ) -> Any:
        """Wait until the review is decided (or expires) and the call finished; its result."""
        from mcp import types  # noqa: PLC0415

        while True:
            state = await self.chat.get_thread(thread_id)
            if state.status == "awaiting_review":
                # (after an edit with edit_policy="recheck" this is a new review: still ours)
                if await self.chat.expire_overdue(thread_id):
                    continue
                if await self.chat.take_handed_over(state):
                    continue  # decided on another gateway process's page: it runs here
            elif state.status == "idle":
                break
            await anyio.sleep(_POLL_SECONDS)
        action = _last_action(state, call_id)
        payload: dict[str, Any] = {
            "thread_id": thread_id,
            "review_id": review_id,
            "tool": name,
            "args": self._shown(name, args),  # secrets redacted, as the reviewer sees them
            "status": action.status if action is not None else "failed",
        }
        await self._emit(
            "review.expired"
            if action is not None and action.status == "expired"
            else "review.decided",
            payload,
        )
        if action is not None and action.status == "executed" and action.result is not None:
            value = action.result.value
            if isinstance(value, Mapping):
                return types.CallToolResult.model_validate(value)
        if action is not None and action.result is not None:
            return self._error(action.result.content)
        return self._error(_tool_text(state, call_id) or f"The call to `{name}` did not run.")

    # ------------------------------------------------------------------ serving

    def server(self) -> Server[Any]:
        """The low-level MCP server re-exposing the upstream's tools."""
        from mcp import types  # noqa: PLC0415
        from mcp.server import Server  # noqa: PLC0415

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            if self.relay is not None:  # a client's own upstream connection lists its tools
                await self.relay.ready_for(ctx)
            result: types.ListToolsResult = self.list_result(ctx)
            return result

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
            return await self.call(ctx, params)

        server: Server[Any] = Server(
            "toolguard-mcp-proxy",
            version=__version__,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            **read_only_handlers(self.upstream),
        )
        counted_once(server)  # toolguard's execute_tool span is the call's, not the SDK's
        return server if self.relay is None else self.relay.serve(server)


def _last_action(state: ThreadState, call_id: str) -> Action | None:
    found = [a for a in state.actions if a.call_id == call_id]
    return found[-1] if found else None


def _tool_text(state: ThreadState, call_id: str) -> str | None:
    for message in reversed(state.messages):
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            content = message.get("content")
            return content if isinstance(content, str) else None
    return None
