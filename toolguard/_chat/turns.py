"""The turn loop of a ReviewedChat: model → tool calls → run or pause → … → a reply.

:class:`TurnLoop` asks the model, lets the runner decide and run its calls
(spending standing grants in one compare-and-set save first, see
:class:`GrantSpender`), and saves the thread after every step: a pause
stores the pending review and returns it, a reply ends the turn.
"""

from __future__ import annotations

import hmac
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from toolguard._chat.history import (
    assistant_message,
    merge_actions,
    rewrite_last_assistant,
    step_events,
    tool_message,
)
from toolguard._chat.threads import Save, Threads, ThreadSettings, retry_on_conflict
from toolguard._core import checks as check
from toolguard._core.audit import AuditEvent
from toolguard._core.errors import ConcurrentUpdateError, ModelError, StepLimitError
from toolguard._core.jsonable import clean_text
from toolguard._core.llm import ChatModel, Message, ModelResponse
from toolguard._core.records import Action, PendingReview, ToolCall
from toolguard._core.results import ResultTemplates
from toolguard._enforce import grant_use
from toolguard._enforce.judge import call_key
from toolguard._enforce.runner import Runner
from toolguard._enforce.step import Step
from toolguard._policy.redact import SecretVault
from toolguard._stores.protocol import Store, ThreadState, give_key
from toolguard._tools.toolset import Toolset

_log = logging.getLogger("toolguard")

_ATTEMPTS: Final = 100  # compare-and-set attempts of a shared count before a person decides


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatTurn:
    """What one ``send_message`` or ``submit_review`` produced.

    Attributes:
        thread_id: the conversation's id (new when ``send_message`` started one).
        reply: the model's final text, or ``None`` while a review is pending.
        pending_review: the review payload to show a person, or ``None``.
        review_id: the id of that review; pass it back to bind decisions to it.
        actions: the approval requests this call created or finished, with
            their statuses.
    """

    thread_id: str
    reply: str | None = None
    pending_review: PendingReview | None = None
    review_id: str | None = None
    actions: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON data: ``{thread_id, reply, pending_review, review_id}``."""
        return {
            "thread_id": self.thread_id,
            "reply": self.reply,
            "pending_review": (
                self.pending_review.model_dump() if self.pending_review is not None else None
            ),
            "review_id": self.review_id,
        }


def check_model(model: object) -> None:
    """Refuse a ``model`` that is not a :class:`~toolguard.ChatModel`."""
    if not callable(getattr(model, "complete", None)):
        msg = (
            "model must be a ChatModel: an object with an async complete(messages, tools)"
            f" method, such as toolguard.openai.OpenAIChatModel; got {check.kind(model)}"
        )
        raise TypeError(msg)


def checked_response(model: object, answer: object) -> ModelResponse:
    """The model's answer, or ModelError (the thread unchanged) when it is not a ModelResponse."""
    problem = None
    if not isinstance(answer, ModelResponse):
        problem = f"returned {check.kind(answer)} instead of a toolguard.ModelResponse"
    elif (text := getattr(answer, "text", None)) is not None and not isinstance(text, str):
        problem = f"returned a ModelResponse whose text is {check.kind(text)}, not a str"
    elif not isinstance(calls := getattr(answer, "tool_calls", None), list | tuple):
        problem = f"returned a ModelResponse whose tool_calls is {check.kind(calls)}, not a list"
    if problem is None:
        return answer  # type: ignore[return-value]  # checked just above
    msg = (
        f"{type(model).__name__}.complete {problem}: it must return"
        " ModelResponse(text=..., tool_calls=[...]). The thread is unchanged."
    )
    raise ModelError(msg)


class TurnSettings(ThreadSettings, Protocol):
    """What the turn loop and the review steps read from their chat, at each use."""

    @property
    def model(self) -> ChatModel: ...

    @property
    def runner(self) -> Runner: ...

    @property
    def toolset(self) -> Toolset: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def result_templates(self) -> ResultTemplates | None: ...

    @property
    def judge_reads_messages(self) -> bool:
        """Whether the thread's messages are the person's own (the gateway's are not)."""
        ...

    @property
    def shared_grants(self) -> grant_use.SharedGrants | None:
        """Grants held beyond one thread (the MCP gateway's), or ``None``."""
        ...


def auto_approved(audit: Sequence[AuditEvent]) -> list[str]:
    """The calls a judge approved on its own in a thread (digests), from its audit trail."""
    return [
        event.digest or ""
        for event in audit
        if event.kind == "judged" and event.judgement is not None and event.judgement.auto_approved
    ]


class StoredApprovals:
    """A judge's auto-approvals counted in one thread of a store, across every other thread.

    The MCP gateway's: each of its calls is a thread of its own, so the
    judge's limits count here instead, for the whole gateway. Each
    auto-approval is a ``judged`` audit event of the thread ``thread_id``
    (``actor`` ``"judge"``, ``decision`` ``approve``, the tool, and as
    ``digest`` the call's :func:`~toolguard._enforce.judge.call_key`, keyed:
    never its arguments), appended with a compare-and-set save of that
    thread, so two racing calls never both take the last slot, across
    processes too, and the count survives a restart. A store that fails, or
    always conflicts, takes no slot: a person decides.

    Args:
        store: the store (the gateway's).
        thread_id: the thread that holds the count.
        clock: the time source, read at each use.
    """

    def __init__(self, store: Store, thread_id: str, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.thread_id = thread_id
        self.clock = clock

    async def take(
        self, name: str, validated: Mapping[str, Any], *, key: bytes | None, limit: int
    ) -> bool:
        """See :meth:`~toolguard._enforce.judge.AutoApprovals.take`."""
        digest = call_key(name, validated, self.thread_id, key)
        try:
            for _ in range(_ATTEMPTS):
                taken = await self._attempt(name, digest, limit)
                if taken is not None:
                    return taken
        except Exception as exc:  # fail closed: a person decides
            _log.warning("toolguard: the judge's shared count cannot be read or saved: %s", exc)
        return False

    async def _attempt(self, name: str, digest: str, limit: int) -> bool | None:
        """One compare-and-set try: whether the slot was taken; ``None``: a conflict, again."""
        now = self.clock()
        state = await self.store.load(self.thread_id)
        expected = state.version if state is not None else None
        if state is None:
            state = ThreadState(thread_id=self.thread_id, created_at=now, updated_at=now)
        taken = [e.digest or "" for e in state.audit if e.kind == "judged"]
        if len(taken) >= limit or any(hmac.compare_digest(d, digest) for d in taken):
            return False
        event = AuditEvent(
            at=now,
            kind="judged",
            thread_id=self.thread_id,
            tool=name,
            actor="judge",
            decision="approve",
            detail=f"auto-approval {len(taken) + 1} of {limit} through the gateway",
            digest=digest,
        )
        update = {"audit": [*state.audit, event]}
        try:
            await self.store.save(state.model_copy(update=update), expected_version=expected)
        except ConcurrentUpdateError:
            return None  # another call got in between: look again
        return True


class GrantSpender:
    """Spends standing grants on a turn's calls, in one compare-and-set save, before they run.

    The runner awaits :meth:`spend` before it runs anything. The uses and the
    ``granted`` events are saved at ``expected``; when the thread changed
    meanwhile only in its grants or audit trail (a revocation, a refusal),
    the spending is worked out again on the fresh state, so a use is never
    spent twice and a revoked grant is never used. Any other change raises
    ``ConcurrentUpdateError`` and nothing of the turn runs.
    """

    def __init__(
        self,
        settings: TurnSettings,
        threads: Threads,
        state: ThreadState,
        expected: int | None,
    ) -> None:
        self.settings = settings
        self.threads = threads
        self.state = state
        self.expected = expected

    async def spend(self, calls: list[ToolCall]) -> set[str]:
        """Spend grant uses on ``calls``; returns the ids of the calls they cover."""
        settings = self.settings

        async def attempt(_: None) -> Save[set[str]]:
            state = self.state
            grants, events, covered = grant_use.spend(
                state.thread_id,
                state.grants,
                calls,
                settings.toolset,
                settings.clock(),
                key=settings.runner.signing_key,
            )

            async def save() -> set[str]:
                if events:
                    saved = await self.threads.write(
                        state, self.expected, {"grants": grants, "audit": [*state.audit, *events]}
                    )
                    self.state, self.expected = saved, saved.version
                return covered

            return save

        async def again(_: None, conflict: ConcurrentUpdateError) -> None:
            fresh = await self.threads.reread(self.state)
            if (
                self.expected is None
                or fresh is None
                or not grant_use.only_grants_changed(self.state, fresh)
            ):
                raise conflict
            self.state, self.expected = fresh, fresh.version

        return await retry_on_conflict(attempt, None, again)


class SharedGrantSpender(GrantSpender):
    """Spends grants held beyond the thread (:class:`~toolguard._enforce.grant_use.SharedGrants`).

    They spend their uses with their own compare-and-set saves; the
    ``granted`` events then go into this thread in one save, before the calls
    run (a conflict there raises ``ConcurrentUpdateError``: nothing runs).
    """

    async def spend(self, calls: list[ToolCall]) -> set[str]:
        """Spend shared grant uses on ``calls``; returns the ids of the calls they cover."""
        shared = self.settings.shared_grants
        if shared is None:
            return set()
        state = self.state
        now = self.settings.clock()
        covered, events = await shared.spend(state.thread_id, calls, self.settings.toolset, now)
        if events:
            saved = await self.threads.write(
                state, self.expected, {"audit": [*state.audit, *events]}
            )
            self.state, self.expected = saved, saved.version
        return covered


class TurnLoop:
    """Runs a thread's turn until the model answers with text or a call waits for review."""

    def __init__(self, settings: TurnSettings, threads: Threads, vault: SecretVault | None) -> None:
        self.settings = settings
        self.threads = threads
        self.vault = vault
        self.tool_schemas = settings.toolset.openai_tools()

    def kept(self, calls: list[ToolCall]) -> list[ToolCall]:
        """The calls as the history stores them (secrets replaced with ``store_secrets=False``)."""
        return calls if self.vault is None else self.vault.shown_calls(calls)

    async def complete(self, messages: list[Message]) -> ModelResponse:
        """The model's checked answer to ``messages``."""
        model = self.settings.model
        answer: Any = model.complete(messages, self.tool_schemas)
        if inspect.isawaitable(answer):
            answer = await answer
        return checked_response(model, answer)

    async def run(
        self,
        state: ThreadState,
        expected: int | None,
        messages: list[Message],
        step: Step | None = None,
    ) -> ChatTurn:
        """Go on from ``state`` (saved at ``expected``) with ``messages``.

        ``step``: a resumed turn's step (its decided calls ran), recorded
        before the model is asked again.
        """
        settings, save = self.settings, self.threads.save
        # Without signing_key the chat keys its digests with its store's secret (first use).
        await give_key(settings.runner, settings.store)
        touched: list[Action] = []
        model_calls = 0
        while True:
            if step is None:
                if model_calls >= settings.max_steps:
                    msg = (
                        f"The model called tools for {settings.max_steps} steps without answering;"
                        " the thread is saved and can go on with a new message."
                    )
                    raise StepLimitError(msg)
                response = await self.complete(messages)
                model_calls += 1
                if not response.tool_calls:
                    reply: str = clean_text(response.text or "")
                    messages.append({"role": "assistant", "content": reply})
                    state = await save(
                        state,
                        expected,
                        messages=messages,
                        status="idle",
                        pending=None,
                        decisions=None,
                    )
                    return ChatTurn(thread_id=state.thread_id, reply=reply, actions=touched)
                spender = (
                    GrantSpender(settings, self.threads, state, expected) if state.grants else None
                )
                if spender is None and settings.shared_grants is not None:
                    spender = SharedGrantSpender(settings, self.threads, state, expected)
                step = await settings.runner.run(
                    response.tool_calls,
                    thread_id=state.thread_id,
                    grants=spender.spend if spender is not None else None,
                    conversation=messages if settings.judge_reads_messages else (),
                    auto_approved=auto_approved(state.audit),
                )
                if spender is not None:
                    state, expected = spender.state, spender.expected
                messages.append(assistant_message(clean_text(response.text), self.kept(step.calls)))
                review_id = step.pending.review_id if step.pending else None
                fresh = True
            else:
                # Resumed: the paused turn's assistant message now records the calls as
                # they stand, edits included, so the history shows what really ran. Without
                # edits they are the calls it was written with at the pause.
                if step.replaced_calls:
                    messages = rewrite_last_assistant(messages, self.kept(step.calls))
                review_id = state.pending.review_id if state.pending else None
                fresh = False
            touched = merge_actions(touched, step.actions)
            # A fresh step's actions are new: the runner just gave them their ids.
            actions = (
                [*state.actions, *step.actions]
                if fresh
                else merge_actions(state.actions, step.actions)
            )
            now = settings.clock()
            toolset = settings.runner.toolset
            key = settings.runner.signing_key
            events = step_events(
                state.thread_id, review_id, step, toolset, now, fresh=fresh, key=key
            )
            audit = [*state.audit, *events]
            if step.pending is not None:
                state = await save(
                    state,
                    expected,
                    messages=messages,
                    status="awaiting_review",
                    pending=step.pending if self.vault is None else self.vault.stash(step.pending),
                    decisions=None,
                    actions=actions,
                    audit=audit,
                )
                return ChatTurn(
                    thread_id=state.thread_id,
                    pending_review=step.pending.pending_review,
                    review_id=step.pending.review_id,
                    actions=touched,
                )
            messages.extend(tool_message(r, settings.result_templates) for r in step.results)
            state = await save(
                state,
                expected,
                messages=messages,
                status="idle",
                pending=None,
                decisions=None,
                actions=actions,
                audit=audit,
            )
            expected = state.version
            messages = list(messages)  # the saved state keeps its own list (compared on retries)
            step = None
