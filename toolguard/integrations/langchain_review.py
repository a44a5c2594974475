"""The bookkeeping of toolguard's ``HumanInTheLoopMiddleware`` for LangChain (not an API).

Import the middleware from :mod:`toolguard.integrations.langchain`. Here: the
``interrupt_on`` entries as policies (:func:`policy_of`), a call under review
(:class:`Entry`), the answers' checks, LangChain's texts and shapes, and the
store's part (:class:`Journal`: once-only claims, the digest key, the audit trail).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal, TypeVar, Union, cast

try:
    from langchain.agents.middleware.human_in_the_loop import (
        ApproveDecision,
        HITLResponse,
        RejectDecision,
        RespondDecision,
    )
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.messages import ToolMessage, add_notification_metadata
    from langgraph.config import get_config
    from langgraph.prebuilt.tool_node import ToolRuntime
    from langgraph.types import Command
    from pydantic import (
        BaseModel,
        Discriminator,
        TypeAdapter,
        WithJsonSchema,
        WrapValidator,
        create_model,
    )
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = (
        "toolguard.integrations.langchain needs LangChain and LangGraph:"
        ' pip install "toolguard-hitl[langchain]"'
    )
    raise ImportError(msg) from exc

import anyio

from toolguard import (
    ApprovalPolicy,
    ConcurrentUpdateError,
    InvalidReviewDecisionError,
    ReviewerNotAllowedError,
    ThreadState,
    ToolguardError,
    validate_decisions,
)
from toolguard._enforce.pipeline import (
    AnyDecision,
    Claims,
    Reviewers,
    Tool,
    add_vote,
    call_digest,
    claim_once,
    edited_args,
    refuse_grants,
    review_item,
    review_payload,
    reviewed,
    reviewer_text,
    shown_result,
    trace_ended,
    vote_count,
)
from toolguard.records import AuditEvent, DecisionType

__all__: list[str] = []

T = TypeVar("T")

ALL_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject", "respond")
CONFIG_KEYS = frozenset(
    {"allowed_decisions", "description", "args_schema", "when", "approvals", "redact", "ttl"}
)
"""The keys of an ``interrupt_on`` entry: LangChain's four and toolguard's three."""

_SCRATCHPAD = "__pregel_scratchpad"  # what LangGraph's interrupt() needs in the run's config
_TASK_ID = "__pregel_task_id"  # the paused task's id: the same in every process resuming it
_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 (UUID time) to 1970-01-01
_SAVE_TRIES = 8


# --------------------------------------------------------------------------- the entries


def policy_of(name: str, config: object) -> ApprovalPolicy | None:
    """The toolguard policy of one ``interrupt_on`` entry (``None``: ``False``, never asks).

    Raises:
        ValueError: LangChain's text for an entry without ``allowed_decisions``;
            an unknown key, or a setting toolguard refuses, naming the tool.
    """
    if isinstance(config, bool):
        return ApprovalPolicy(allowed_decisions=ALL_DECISIONS) if config else None
    where = f"Invalid `interrupt_on` config for tool '{name}'"
    if not isinstance(config, Mapping):
        msg = (
            f"{where}: expected True, False or a dict with allowed_decisions,"
            f" got {type(config).__name__}."
        )
        raise ValueError(msg)
    if not config.get("allowed_decisions"):
        msg = (
            f"{where}: `allowed_decisions` must be a non-empty list of decision types "
            "(e.g. ['approve', 'reject']). Got config with keys "
            f"{sorted(map(str, config.keys()))} and "
            f"allowed_decisions={config.get('allowed_decisions')!r}."
        )
        raise ValueError(msg)
    unknown = sorted(str(key) for key in config if key not in CONFIG_KEYS)
    if unknown:
        msg = f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(CONFIG_KEYS))})."
        raise ValueError(msg)
    description = config.get("description")
    if description is not None and not isinstance(description, str) and not callable(description):
        msg = f"{where}: description must be text or a function, got {type(description).__name__}."
        raise ValueError(msg)
    when = config.get("when")
    if when is not None and not callable(when):
        msg = (
            f"{where}: when must be a function of the tool call request, got {type(when).__name__}."
        )
        raise ValueError(msg)
    redact = config.get("redact", ())
    try:
        if isinstance(redact, str):
            msg = f"redact must be a list of argument names, got the text {redact!r}"
            raise TypeError(msg)
        return ApprovalPolicy(
            allowed_decisions=tuple(config["allowed_decisions"]),
            approvals=config.get("approvals", 1),
            redact=tuple(redact),
            ttl=config.get("ttl"),
        )
    except (TypeError, ValueError) as exc:
        msg = f"{where}: {exc}."
        raise ValueError(msg) from None


@dataclass(slots=True)
class Entry:
    """One call under review: what it would run with, its quorum's votes, and how it settled."""

    call: dict[str, Any]
    """The model's call (LangChain's ``ToolCall``), unchanged."""
    allowed: list[str]
    """The decisions allowed, as configured (LangChain's order)."""
    tool: Tool[Any, Any]
    name: str
    """The tool under review (an edit may switch tools: then it is the new one)."""
    args: dict[str, Any]
    """The real arguments under review (an edit in a quorum's rounds changes them)."""
    required: int
    description: str
    by: list[str] = field(default_factory=list)
    edited: bool = False
    kind: str = ""
    """How it settled: ``approve``, ``edit``, ``reject``, ``respond`` or ``deny`` (``""``: open)."""
    decision: dict[str, Any] | None = None
    """The raw decision that settled it (LangChain's dict)."""
    run: dict[str, Any] | None = None
    """``{"name", "args"}`` to run (approve and edit)."""
    text: str = ""
    """What the model reads instead of a result (reject, respond, deny)."""
    reviewer: str | None = None
    votes: list[tuple[str | None, str, str]] = field(default_factory=list)
    """Each vote on a quorum call: who, the decision, ``k of N approvals``."""

    def request(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The action request and review config a reviewer sees (LangChain's shapes)."""
        shown = self.tool.shown_args(self.args)
        config: dict[str, Any] = {"action_name": self.name, "allowed_decisions": self.allowed}
        if self.required > 1:
            config["approvals"] = {"required": self.required, "given": len(self.by), "by": self.by}
        return {"name": self.name, "args": shown, "description": self.description}, config

    def copy(self) -> Entry:
        return replace(self, by=list(self.by), votes=list(self.votes))

    def take(self, other: Entry) -> None:
        """Become ``other`` (an edit that switched tools is a new review of the same call)."""
        for item in fields(self):
            setattr(self, item.name, getattr(other, item.name))

    def vote(self, raw: dict[str, Any], parsed: AnyDecision, who: str | None) -> None:
        """Apply one checked decision (a quorum's vote counts; an edit starts a new count).

        Raises:
            QuorumReviewerError: an anonymous or repeated reviewer approves or
                edits a quorum call (nothing changed on the caller's copy).
        """
        kind = parsed.type
        if kind == "edit":
            target = parsed.edited_action.name  # type: ignore[union-attr]
            given = dict(parsed.edited_action.args)  # type: ignore[union-attr]
            args = edited_args(self.tool, given, self.args) if target == self.name else given
            if target == self.name and self.required > 1:
                self.by = add_vote(self.name, self.required, [], who)
                self.args, self.edited = args, True
                self.votes.append((who, kind, f"1 of {self.required} approvals"))
                return
            self._settle("edit", raw, who, run={"name": target, "args": args})
            return
        if kind == "approve":
            if self.required > 1:
                self.by = add_vote(self.name, self.required, self.by, who)
                given_votes = vote_count(self.by)
                self.votes.append((who, kind, f"{given_votes} of {self.required} approvals"))
                if given_votes < self.required:
                    return
            kind = "edit" if self.edited else "approve"
            self._settle(kind, raw, who, run={"name": self.name, "args": self.args})
            return
        self._settle(kind, raw, who, text=self.answer_text(raw))

    def _settle(
        self,
        kind: str,
        raw: dict[str, Any],
        who: str | None,
        *,
        run: dict[str, Any] | None = None,
        text: str = "",
    ) -> None:
        self.kind, self.decision, self.reviewer, self.run, self.text = kind, raw, who, run, text

    def answer_text(self, decision: Mapping[str, Any]) -> str:
        """LangChain's text for a reject or respond decision (a secret it quotes scrubbed)."""
        name = self.call["name"]
        if decision["type"] == "respond":
            text = str(decision["message"])
        elif reason := decision.get("message"):
            text = f"User rejected the tool call for `{name}` with reason: {reason}"
        else:
            text = (
                f"User rejected the tool call for `{name}` with id "
                f"{self.call['id']}. The tool was not executed. Do not retry this tool "
                "call unless the user explicitly requests it."
            )
        return str(shown_result(self.tool, text, self.args, self.call["args"]))


class Refused(Exception):  # noqa: N818 - not a ValueError, so pydantic lets it through
    """Carries a refused answer's error out of LangGraph's validation, unchanged."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def named(answer: Any) -> Any:
    """The reviewer a per-call answer names (``"reviewer"``), if any."""
    return answer.get("reviewer") if isinstance(answer, Mapping) else None


def check_answer(
    open_: list[Entry], answer: Any, thread: str, reviewers: Reviewers | None, *, dry_run: bool
) -> None:
    """Check one answer (a decision per open call, in order) and count its votes.

    Raises:
        InvalidReviewDecisionError: LangChain's texts for a wrong count or a decision
            type the tool does not allow; toolguard's for the rest (a malformed
            decision, a grant, a quorum's repeated or anonymous reviewer).
        ReviewerNotAllowedError: ``reviewers`` does not list the reviewer for a tool.
    """
    decisions = answer.get("decisions") if isinstance(answer, Mapping) else answer
    if not isinstance(decisions, list):
        msg = (
            'Answer with {"decisions": [...]}: one decision per call under review, in order;'
            f" got {type(answer).__name__}"
        )
        raise InvalidReviewDecisionError(msg)
    if len(decisions) != len(open_):
        msg = (
            f"Number of human decisions ({len(decisions)}) does not match "
            f"number of hanging tool calls ({len(open_)})."
        )
        raise InvalidReviewDecisionError(msg)
    for entry, decision in zip(open_, decisions, strict=True):
        kind = decision.get("type") if isinstance(decision, Mapping) else None
        if kind not in entry.allowed:
            msg = (
                f"Unexpected human decision: {_short(decision)}. Decision type"
                f" '{_short(kind)}' is not allowed for tool '{entry.name}'. Expected one of"
                f" {entry.allowed} based on the tool's configuration."
            )
            # A secret the reviewer quotes is not repeated in the error.
            raise InvalidReviewDecisionError(str(shown_result(entry.tool, msg, entry.args)))
    review = review_payload(
        [review_item(e.tool, e.name, e.args, required=e.required, by=e.by) for e in open_]
    )
    parsed = validate_decisions(review, decisions)
    refuse_grants([e.name for e in open_], parsed, "LangChain's middleware")
    try:
        who = reviewer_text(answer.get("reviewer") if isinstance(answer, Mapping) else None)
    except TypeError as exc:
        raise InvalidReviewDecisionError(str(exc)) from None
    for entry, decision, model in zip(open_, decisions, parsed, strict=True):
        if reviewers is not None and not reviewers.allows(who, entry.name):
            raise ReviewerNotAllowedError(who, thread)
        (entry.copy() if dry_run else entry).vote(dict(decision), model, who)


def _short(decision: object) -> str:
    """A decision (or its type) as LangChain's error text shows it, cut to 300 characters."""
    text = str(decision)
    return text if len(text) <= 300 else f"{text[:300]}..."


def answer_check(
    open_: list[Entry], thread: str, reviewers: Reviewers | None, *, single: bool
) -> Callable[..., Any]:
    """The validator of one pause's answer: LangChain's shapes, then toolguard's checks."""
    waiting = list(open_)

    def check(answer: Any, handler: Callable[[Any], Any]) -> Any:
        if single:
            handler(answer)  # the per-call decision schema (a ValidationError stays one)
        as_round = {"decisions": [answer], "reviewer": named(answer)} if single else answer
        try:
            check_answer(waiting, as_round, thread, reviewers, dry_run=True)
        except (ToolguardError, ValueError) as error:
            raise Refused(error) from None
        return answer

    return check


def answer_message(call: Mapping[str, Any], kind: str, text: str) -> ToolMessage:
    """LangChain's message in place of the tool's result (a reject or respond decision)."""
    mark: Any = add_notification_metadata  # typed for human messages; it copies any message
    message = ToolMessage(
        content=text,
        name=call["name"],
        tool_call_id=call["id"],
        status="success" if kind == "respond" else "error",
    )
    return cast(
        "ToolMessage", mark(message, source="hitl_interrupt_decision", data={"decision": kind})
    )


def error_message(call: Mapping[str, Any], text: str) -> ToolMessage:
    """An error tool message toolguard gives instead of running the call."""
    return ToolMessage(content=text, name=call["name"], tool_call_id=call["id"], status="error")


# --------------------------------------------------------------------------- results


def notice_of(edit_notice: str, executed: Mapping[str, Any], *, has_content: bool) -> str:
    """LangChain's edit notice, stating the call that ran (its secrets redacted)."""
    notice = (
        f"{edit_notice} Executed instead: {executed['name']} with arguments "
        f"{json.dumps(executed['args'], default=str)}."
    )
    return f"{notice}\n\nTool response:" if has_content else notice


def prepend_notice(message: ToolMessage, notice: str | None, executed: Mapping[str, Any]) -> Any:
    """``message`` with the edit notice first (once), in the shape of its content."""
    if not notice:
        return message
    text = notice_of(notice, executed, has_content=bool(message.content))
    content: str | list[str | dict[Any, Any]]
    if isinstance(message.content, str):
        if text in message.content:
            return message
        separator = "\n" if message.content else ""
        content = f"{text}{separator}{message.content}"
    else:
        if any(text in str(block) for block in message.content):
            return message
        block: str | dict[Any, Any] = (
            text
            if message.content and all(isinstance(b, str) for b in message.content)
            else {"type": "text", "text": text}
        )
        content = [block, *message.content]
    return message.model_copy(update={"content": content})


def scrubbed(message: ToolMessage, tool: Tool[Any, Any] | None, *argsets: Any) -> ToolMessage:
    """``message`` with every secret argument it echoes replaced (text content)."""
    if tool is None or not tool.redacted or not isinstance(message.content, str):
        return message
    clean = shown_result(tool, message.content, *argsets)
    if clean == message.content:
        return message
    return message.model_copy(update={"content": str(clean)})


def each_message(result: Any, call_id: str, change: Any) -> Any:
    """``result`` (a ``ToolMessage`` or a ``Command``) with ``change`` applied to the call's
    own tool message."""
    if isinstance(result, ToolMessage):
        return change(result)
    if not isinstance(result, Command) or not isinstance(result.update, dict):
        return result
    messages = result.update.get("messages")
    if not isinstance(messages, list):
        return result
    changed = [
        change(m) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
        for m in messages
    ]
    return replace(result, update={**result.update, "messages": changed})


def result_text(result: Any, call_id: str) -> tuple[str, bool]:
    """The text of the call's tool message in ``result``, and whether it is an error."""
    found: list[tuple[str, bool]] = []

    def keep(message: ToolMessage) -> ToolMessage:
        content = message.content
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        found.append((text, message.status == "error"))
        return message

    each_message(result, call_id, keep)
    return found[0] if found else ("", False)


# --------------------------------------------------------------------------- per-call answers


def _edit_args(tool: Any) -> object:
    """What an edit's ``args`` must look like: the tool's Pydantic schema, if it has one."""
    schema = tool.tool_call_schema if tool is not None else None
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        shown = schema if isinstance(schema, dict) else {"type": "object"}
        return Annotated[dict[str, Any], WithJsonSchema(shown)]
    return schema


def decision_schema(allowed: Sequence[str], name: str, tool: Any, check: Any) -> Any:
    """LangChain's per-call ``response_schema`` (the tool's decisions; an edit names this
    tool with its argument schema), followed by toolguard's ``check`` of the answer as sent."""
    by_type: dict[str, object] = {
        "approve": ApproveDecision,
        "reject": RejectDecision,
        "respond": RespondDecision,
    }
    if "edit" in allowed:
        edited_action = create_model(
            "EditedAction",
            name=(cast("Any", Literal[name]), ...),
            args=(cast("Any", _edit_args(tool)), ...),
        )
        by_type["edit"] = create_model(
            "EditDecision",
            type=(cast("Any", Literal["edit"]), ...),
            edited_action=(edited_action, ...),
        )
    members = tuple(by_type[d] for d in dict.fromkeys(allowed))
    union: Any = members[0]
    if len(members) > 1:
        union = Annotated[Union[members], Discriminator("type")]  # noqa: UP007 - a runtime tuple
    return Annotated[union, WrapValidator(check)]


def _inlined(schema: Any, defs: Mapping[str, Any]) -> Any:
    """``schema`` with every ``$ref`` to ``defs`` replaced by the definition (no cycles)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inlined(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inlined(item, defs) for item in schema]
    return schema


_RESPONSE = TypeAdapter(HITLResponse).json_schema()
HITL_RESPONSE_SCHEMA: dict[str, Any] = _inlined(_RESPONSE, _RESPONSE.get("$defs", {}))
"""The JSON schema shown with a batched pause: LangChain's ``HITLResponse``."""


# --------------------------------------------------------------------------- LangGraph


def blocking(func: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``func(*args)`` from a synchronous hook (its own event loop, in a thread if needed)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(func, *args)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a sync hook called inside a running loop
        return pool.submit(anyio.run, func, *args).result()


def turn_request(call: Any, state: Any, runtime: Any) -> ToolCallRequest:
    """LangChain's request for ``when`` in a batched turn: no tool, a new ``ToolRuntime``."""
    try:
        runnable_config: Any = get_config()
    except RuntimeError:
        runnable_config = {}
    tool_runtime = ToolRuntime(
        state=state,
        context=runtime.context,
        config=runnable_config,
        stream_writer=runtime.stream_writer,
        tool_call_id=call["id"],
        store=runtime.store,
        execution_info=runtime.execution_info,
        server_info=runtime.server_info,
    )
    return ToolCallRequest(tool_call=call, tool=None, state=state, runtime=tool_runtime)


def _configurable() -> Mapping[str, Any]:
    try:
        configurable: Any = get_config().get("configurable") or {}
    except RuntimeError:
        return {}
    return configurable if isinstance(configurable, Mapping) else {}


def task_id() -> str:
    """The running LangGraph task's id (the same in every process resuming the same pause)."""
    return str(_configurable().get(_TASK_ID) or "")


def thread_of() -> str:
    """The LangGraph thread id of the run (``""`` outside a graph)."""
    return str(_configurable().get("thread_id") or "")


def asked_at() -> float | None:
    """When the running task's calls asked for review (epoch seconds), or ``None``.

    A paused task belongs to the checkpoint its step started from, which
    every process resuming it runs from; LangGraph names checkpoints with
    time-ordered UUIDs (version 6), made when the step before ended.
    """
    configurable = _configurable()
    namespace = str(configurable.get("checkpoint_ns") or "")
    parent = namespace.rpartition("|")[0]  # the graph running this task (a subgraph's too)
    checkpoints = configurable.get("checkpoint_map")
    checkpoint_id = checkpoints.get(parent) if isinstance(checkpoints, Mapping) else None
    try:
        stamp = uuid.UUID(str(checkpoint_id))
    except ValueError:
        return None
    if stamp.version != 6:  # only version 6 carries the time in this order
        return None
    ticks = (stamp.time_low << 28) | (stamp.time_mid << 12) | (stamp.time_hi_version & 0x0FFF)
    return (ticks - _UUID_EPOCH) / 1e7


def moment(seconds: float | None) -> datetime:
    """``seconds`` since the epoch as a UTC time (now when unknown or unreadable)."""
    try:
        return datetime.fromtimestamp(float(seconds), timezone.utc)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(timezone.utc)


def in_graph() -> bool:
    """Whether a LangGraph task is running (``interrupt()`` can pause it)."""
    return _SCRATCHPAD in _configurable()


# --------------------------------------------------------------------------- the store


@dataclass(slots=True)
class Pause:
    """One run of a hook: its thread, task, when its calls asked, the digest key, the events."""

    thread: str
    task: str
    asked: float | None
    key: bytes | None
    book: list[AuditEvent] = field(default_factory=list)

    @classmethod
    def here(cls, key: bytes | None) -> Pause:
        """The pause of the running LangGraph task."""
        return cls(thread_of(), task_id(), asked_at(), key)

    def review(self, call: Mapping[str, Any]) -> str:
        """The review id of a call asked in this task: the same in every resume of the pause."""
        return f"{self.task}:{call.get('id') or ''}"


class Journal:
    """What the middleware keeps in a toolguard store: claims, the digest key, the audit trail.

    Without a store (and without ``signing_key``) it keeps nothing and keys nothing.
    """

    def __init__(self, store: object, signing_key: object) -> None:
        if store is not None and not (
            callable(getattr(store, "claim", None)) and callable(getattr(store, "digest_key", None))
        ):
            msg = (
                "store must be a toolguard store with claim() and digest_key() (MemoryStore,"
                f" SQLiteStore, PostgresStore), got {type(store).__name__}"
            )
            raise TypeError(msg)
        if signing_key is not None and not isinstance(signing_key, bytes | bytearray):
            msg = (
                "signing_key must be bytes (a secret such as os.urandom(32)) or None,"
                f" got {type(signing_key).__name__}"
            )
            raise TypeError(msg)
        if signing_key is not None and not signing_key:
            msg = "signing_key must not be empty: use a secret such as os.urandom(32), or None"
            raise ValueError(msg)
        self.store: Any = store
        self._key: bytes | None = bytes(signing_key) if signing_key is not None else None

    @property
    def keyed(self) -> bool:
        """Whether decisions are bound by a keyed digest (a store or a ``signing_key``)."""
        return self.store is not None or self._key is not None

    @property
    def known_key(self) -> bytes | None:
        """The digest key when it is known already (no I/O)."""
        return self._key

    async def key(self) -> bytes | None:
        """The digest key: ``signing_key``, else the store's own secret (``None``: neither)."""
        if self._key is None and self.store is not None:
            key = await self.store.digest_key()
            if not isinstance(key, bytes) or len(key) < 16:
                msg = "the store's digest_key() must give at least 16 bytes"
                raise TypeError(msg)
            self._key = key
        return self._key

    async def claim(self, review: str) -> None:
        """Claim an approved call's review before it runs (nothing without a store).

        Raises:
            AlreadyResumedError: it was claimed before (it ran, or runs, elsewhere).
        """
        await claim_once(cast("Claims | None", self.store), review)

    def note(self, pause: Pause, event_id: str, kind: str, **fields_: Any) -> None:
        """Keep one audit event of ``pause`` to write (its id makes writing it twice a no-op)."""
        if self.store is None:
            return
        data = {"review_id": None, "action_id": None, **fields_}
        at = data.pop("at", None)
        pause.book.append(
            AuditEvent.model_validate(
                {
                    "id": event_id,
                    "at": at or datetime.now(timezone.utc),
                    "kind": kind,
                    "thread_id": f"langgraph:{pause.thread}",
                    **data,
                }
            )
        )

    def requested(self, pause: Pause, entry: Entry) -> None:
        """The ``requested`` event of a call that asks (its shown arguments, keyed digest)."""
        review = pause.review(entry.call)
        key = pause.key
        self.note(
            pause,
            f"{review}:requested",
            "requested",
            review_id=review,
            action_id=str(entry.call.get("id") or ""),
            tool=entry.name,
            args=entry.tool.shown_args(entry.args),
            detail=ttl_end(entry.tool, pause.asked),
            digest=digest_of(key, entry.name, entry.args, pause.thread, review) if key else None,
            at=moment(pause.asked),
        )

    def votes(self, pause: Pause, entry: Entry) -> None:
        """The ``vote`` events of a quorum call, each written once (the first time it counts)."""
        review = pause.review(entry.call)
        call_id = str(entry.call.get("id") or "")
        for number, (who, kind, progress) in enumerate(entry.votes):
            self.note(
                pause, f"{review}:vote:{entry.name}:{number}", "vote", review_id=review,
                action_id=call_id, tool=entry.name, actor=who, decision=kind, detail=progress,
            )  # fmt: skip

    def settled(self, pause: Pause, entry: Entry, at: float) -> None:
        """The ``decided`` event of a settled call, and its end if it runs nothing."""
        review, key = pause.review(entry.call), pause.key
        call_id = str(entry.call.get("id") or "")
        common = {"review_id": review, "action_id": call_id, "at": moment(at)}
        run = entry.run
        digest = None
        if key is not None and run is not None:
            digest = digest_of(key, run["name"], run["args"], pause.thread, review)
        self.note(
            pause,
            f"{review}:decided",
            "decided",
            tool=run["name"] if run is not None else entry.name,
            args=entry.tool.shown_args(run["args"]) if run is not None else None,
            actor=entry.reviewer,
            decision=str((entry.decision or {}).get("type") or entry.kind),
            detail=entry.text or None,
            digest=digest,
            **common,
        )
        if run is None:
            final = ENDS[entry.kind]
            self.note(
                pause, f"{review}:{final}", final, tool=entry.name, detail=entry.text, **common
            )

    def record(self, pause: Pause, entry: Entry, at: float) -> dict[str, Any]:
        """How ``entry`` settled, as the state keeps it (and its audit events and span)."""
        self.settled(pause, entry, at)
        review, key = pause.review(entry.call), pause.key
        record: dict[str, Any] = {
            "call": digest_of(key, entry.call["name"], entry.call["args"]),
            "kind": entry.kind,
            "review": review,
            "tool": entry.name,
            "asked_at": pause.asked,
            "by": entry.reviewer,
            "at": at,
        }
        run = entry.run
        if run is not None:
            record["run"] = run
            seal = seal_of(record)
            record["digest"] = digest_of(key, run["name"], run["args"], pause.thread, seal)
            return record
        record["text"] = entry.text
        kind = entry.kind
        decided = reviewed(review, pause.asked, decision=kind, by=entry.reviewer, decided_at=at)
        trace_ended(str(entry.call.get("id") or ""), entry.name, ENDS[kind], decided)
        return record

    async def flush(self, book: list[AuditEvent]) -> None:
        """Append the events of ``book`` to their threads' audit trails (each event once)."""
        by_thread: dict[str, list[AuditEvent]] = {}
        for event in book:
            by_thread.setdefault(event.thread_id, []).append(event)
        for thread, fresh in by_thread.items():
            await self._append(thread, fresh)

    async def _append(self, thread: str, fresh: list[AuditEvent]) -> None:
        for _ in range(_SAVE_TRIES):
            state = await self.store.load(thread)
            expected = state.version if state is not None else None
            state = state if state is not None else ThreadState(thread_id=thread)
            known = {event.id for event in state.audit}
            new = [event for event in fresh if event.id not in known]
            if not new:
                return
            changed = state.model_copy(update={"audit": [*state.audit, *new]})
            try:
                await self.store.save(changed, expected_version=expected)
            except ConcurrentUpdateError:
                continue
            return
        msg = f"The audit trail of {thread!r} could not be saved: it kept changing"
        raise ConcurrentUpdateError(msg)


ENDS = {"reject": "rejected", "respond": "responded", "deny": "denied"}
"""The audit event (and span outcome) that ends a call settled without running."""


def seal_of(record: Mapping[str, Any]) -> str:
    """What a decided call's digest binds besides the call that runs: its review, how it was
    decided, the tool whose deadline applies and when it asked."""
    parts = [record.get(key) for key in ("review", "kind", "tool", "asked_at")]
    return json.dumps(parts, default=repr)


def digest_of(key: bytes | None, name: str, args: Any, thread: str = "", review: str = "") -> str:
    """The digest binding a call to its thread and review (keyed when there is a key)."""
    return call_digest(name, args, key, thread_id=thread, review_id=review)


def ttl_end(tool: Tool[Any, Any], asked: float | None) -> str | None:
    """The ``requested`` event's detail: when the review's deadline passes."""
    ttl = tool.approval.ttl if tool.approval is not None else None
    if ttl is None or asked is None:
        return None
    return f"expires at {(moment(asked) + timedelta(seconds=ttl)).isoformat()}"
