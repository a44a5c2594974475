"""Guard LangChain / LangGraph agents with toolguard: one line each.

::

    from langchain.agents import create_agent
    from toolguard.integrations import langchain as tg

    tools = toolguard.guard([search_mail, send_email])
    agent = create_agent(model, tools=tg.tools(tools), middleware=[tg.middleware(tools)],
                         checkpointer=InMemorySaver())

:func:`tools` gives LangChain ``BaseTool`` objects with the same names,
descriptions and argument schemas (parameter descriptions kept). They never
run a guarded body unapproved, even without the middleware: inside a LangGraph
graph a call that needs approval pauses with LangGraph's ``interrupt()``,
whose value is toolguard's ``pending_review`` payload for that one call; resume
with ``Command(resume={"decisions": [...]})`` (approve runs the body once, edit
runs the edited arguments and says so in the tool message, reject gives the
model the reason as an error tool message). Outside a graph such a call raises
:class:`~toolguard.ApprovalRequiredError` (fail closed). Arguments that break
the schema give an error tool message without asking anyone.

:func:`middleware` gives a :class:`ToolguardMiddleware` (a LangChain
``HumanInTheLoopMiddleware``) for ``create_agent``: after each model turn it
asks toolguard which calls need approval (classifier, ``@requires_approval``,
``when=`` on the actual arguments), pauses once for all of them with SPEC's
payload, validates the decisions with :func:`~toolguard.validate_decisions`,
replaces an edited call in the model's message (so the history shows what
ran), answers rejected calls with the reason, and runs approved calls exactly
once.

Needs ``pip install "toolguard-hitl[langchain]"``; tested with langchain 1.5,
langchain-core 1.8 and langgraph 1.2.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, cast

try:
    from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
    from langchain.agents.middleware.types import AgentState, PrivateStateAttr, ToolCallRequest
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.messages import ToolCall as LCToolCall
    from langchain_core.tools import BaseTool, ToolException
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.types import Command, interrupt
    from pydantic import AfterValidator, PrivateAttr
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = (
        "toolguard.integrations.langchain needs LangChain and LangGraph:"
        ' pip install "toolguard-hitl[langchain]"'
    )
    raise ImportError(msg) from exc

import anyio

from toolguard._errors import ApprovalRequiredError, ToolguardError
from toolguard._json import to_json_data
from toolguard._messages import message
from toolguard._models import (
    ALLOWED_DECISIONS,
    REJECTED_BY_USER_MESSAGE,
    ActionRequest,
    PendingReview,
    ReviewConfig,
    ToolCall,
    new_id,
)
from toolguard._tool import Tool, ToolArgumentsError
from toolguard._toolset import Tools, Toolset
from toolguard._validate import validate_decisions

__all__ = ["APPROVED_KEY", "GuardedTool", "ToolguardMiddleware", "middleware", "tools"]

APPROVED_KEY = "toolguard_approved_calls"
"""Agent-state key (private, checkpointed) holding the calls a reviewer approved, by call id."""

_SCRATCHPAD = "__pregel_scratchpad"  # what LangGraph's interrupt() needs in the run's config


def _toolset(tools: Tools) -> Toolset:
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def _review(items: Sequence[tuple[Tool[Any, Any], str, dict[str, Any]]]) -> PendingReview:
    """SPEC's payload for ``(tool, name, json_args)`` items, keeping the tool's own settings."""
    return PendingReview(
        action_requests=[
            ActionRequest(
                name=name,
                args=args,
                description=tool.review_description() or message("action_description", name=name),
            )
            for tool, name, args in items
        ],
        review_configs=[
            ReviewConfig(
                action_name=name,
                allowed_decisions=list(
                    getattr(tool.approval, "allowed_decisions", ALLOWED_DECISIONS)
                ),
            )
            for tool, name, _ in items
        ],
    )


def _decision_list(answer: Any) -> Any:
    """The decisions in a resume value: ``{"decisions": [...]}`` (LangChain's) or a bare list."""
    if isinstance(answer, Mapping) and "decisions" in answer:
        return answer["decisions"]
    return answer


class _Refused(Exception):  # noqa: N818 - not a ValueError, so pydantic lets it through
    """Carries a refused resume value's error out of LangGraph's validation, unchanged."""

    def __init__(self, error: ToolguardError) -> None:
        super().__init__(str(error))
        self.error = error


def _ask(pending: PendingReview) -> list[Any]:
    """Pause with ``pending`` and return the reviewer's validated decisions.

    The decisions are checked while LangGraph validates the resume value, before
    it saves it: refused decisions raise the toolguard error (e.g.
    :class:`~toolguard.InvalidReviewDecisionError`) and are NOT recorded, so the
    same pause can be answered again with correct decisions.
    """
    decided: list[Any] = []

    def check(value: Any) -> Any:
        try:
            decided[:] = validate_decisions(pending, _decision_list(value))
        except ToolguardError as exc:
            raise _Refused(exc) from None
        return value

    schema: Any = Annotated[Any, AfterValidator(check)]
    try:
        interrupt(pending.model_dump(mode="json"), response_schema=schema)
    except _Refused as refused:
        raise refused.error from None
    return decided


def _in_graph() -> bool:
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return False
    return _SCRATCHPAD in configurable


def _content(value: Any) -> str:
    data = to_json_data(value)
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)


def _failed(tool: Tool[Any, Any], exc: Exception) -> ToolException:
    return ToolException(f"Tool `{tool.name}` failed: {type(exc).__name__}: {exc}")


def _run_sync(tool: Tool[Any, Any], validated: dict[str, Any]) -> Any:
    """Run the body from synchronous code (LangChain's ``invoke``)."""
    if tool.is_async:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(functools.partial(tool.execute, validated))
        msg = f"The tool `{tool.name}` is async: call it with ainvoke inside an event loop"
        raise RuntimeError(msg)
    coroutine = tool.execute(validated, in_thread=False)
    try:
        coroutine.send(None)  # a sync body runs to the end on the first step
    except StopIteration as done:
        return done.value
    coroutine.close()  # pragma: no cover - execute() of a sync tool never suspends
    msg = f"The tool `{tool.name}` suspended while running synchronously"  # pragma: no cover
    raise RuntimeError(msg)  # pragma: no cover


class GuardedTool(BaseTool):
    """A toolguard :class:`~toolguard.Tool` as a LangChain tool that cannot skip review.

    Build them with :func:`tools`. The argument schema is the toolguard
    tool's JSON schema, unchanged.
    """

    handle_tool_error: Any = True
    _tg_tool: Tool[Any, Any] = PrivateAttr()
    _tg_approved: bool = PrivateAttr(default=False)

    def __init__(self, tool: Tool[Any, Any], *, approved: bool = False) -> None:
        super().__init__(
            name=tool.name,
            description=tool.description or tool.name,
            args_schema=tool.parameters,
        )
        self._tg_tool = tool
        self._tg_approved = approved

    @property
    def toolguard_tool(self) -> Tool[Any, Any]:
        """The toolguard tool this LangChain tool runs."""
        return self._tg_tool

    def _decide(self, args: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
        """``(validated args, note, answer)``: what to run, or the answer to give instead.

        Raises ToolException for bad arguments, a rejection or a refused edit;
        ApprovalRequiredError outside a graph; LangGraph's interrupt inside one.
        """
        tool = self._tg_tool
        try:
            validated = tool.validate_args(args)
        except ToolArgumentsError as exc:
            raise ToolException(str(exc)) from None
        if self._tg_approved or not tool.needs_approval(validated):
            return validated, None, None
        json_args = to_json_data(args)
        pending = _review([(tool, tool.name, json_args)])
        if not _in_graph():
            call = ToolCall(id=new_id(), name=tool.name, args=json_args)
            raise ApprovalRequiredError(pending_review=pending, call=call)
        decision = _ask(pending)[0]
        kind = getattr(decision, "type", None)
        if kind == "approve":
            return validated, None, None
        if kind == "edit":
            edited = decision.edited_action
            if edited.name != tool.name:
                msg = (
                    f"The reviewer's edit names the tool `{edited.name}`, but only `{tool.name}`"
                    " can run here: edit the arguments, not the tool. It was not executed."
                )
                raise ToolException(msg)
            try:
                validated = tool.validate_args(edited.args)
            except ToolArgumentsError as exc:
                raise ToolException(str(exc)) from None
            shown = json.dumps(edited.args, ensure_ascii=False, sort_keys=True)
            note = f"A reviewer edited this call; it ran with the arguments {shown}."
            return validated, note, None
        if kind == "respond":  # LangChain's: the reviewer answers instead of the tool
            return validated, None, str(getattr(decision, "message", "") or "")
        reason = getattr(decision, "message", None) or REJECTED_BY_USER_MESSAGE
        raise ToolException(reason)

    @staticmethod
    def _with_note(content: str, note: str | None) -> str:
        return content if note is None else f"{note}\n\n{content}"

    def _run(self, /, **kwargs: Any) -> str:
        validated, note, answer = self._decide(kwargs)
        if answer is not None:
            return answer
        try:
            value = _run_sync(self._tg_tool, validated)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise _failed(self._tg_tool, exc) from exc
        return self._with_note(_content(value), note)

    async def _arun(self, /, **kwargs: Any) -> str:
        validated, note, answer = self._decide(kwargs)
        if answer is not None:
            return answer
        try:
            value = await self._tg_tool.execute(validated)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            raise _failed(self._tg_tool, exc) from exc
        return self._with_note(_content(value), note)


def tools(tools: Tools) -> list[BaseTool]:
    """toolguard tools as LangChain tools that never run a guarded body unapproved.

    Args:
        tools: a :class:`~toolguard.Toolset`, or a list of functions and
            :class:`~toolguard.Tool` objects (classified with
            :func:`~toolguard.guard`).

    Returns:
        One ``BaseTool`` per tool, in order, for ``create_agent(tools=...)``,
        a ``ToolNode`` or ``model.bind_tools``.
    """
    return [GuardedTool(tool) for tool in _toolset(tools).values()]


class _ToolguardState(AgentState[Any]):
    """Agent state with the reviewer's approvals (private: checkpointed, not in the schema)."""

    toolguard_approved_calls: NotRequired[Annotated[dict[str, Any], PrivateStateAttr]]


class ToolguardMiddleware(HumanInTheLoopMiddleware[Any, Any, Any]):
    """LangChain's human-in-the-loop middleware, deciding with toolguard.

    Build it with :func:`middleware`. Only the calls toolguard says need
    approval (with their actual arguments) pause the agent; the pause's value
    is toolguard's ``pending_review`` payload for all of them, and the resume
    value is ``{"decisions": [...]}`` (or the bare list), checked with
    :func:`~toolguard.validate_decisions` (an invalid answer raises
    :class:`~toolguard.InvalidReviewDecisionError` and runs nothing).
    """

    state_schema = _ToolguardState  # type: ignore[assignment]

    def __init__(self, tools: Tools) -> None:
        toolset = _toolset(tools)
        interrupt_on: dict[str, bool | InterruptOnConfig] = {}
        for name, tool in toolset.items():
            if tool.guarded:
                allowed = getattr(tool.approval, "allowed_decisions", ALLOWED_DECISIONS)
                config = {"allowed_decisions": list(allowed)}
                interrupt_on[name] = cast("InterruptOnConfig", config)
        super().__init__(interrupt_on, edit_notice=None)
        self.toolset = toolset
        self._guarded = {name: GuardedTool(tool) for name, tool in toolset.items()}
        self._approved = {name: GuardedTool(tool, approved=True) for name, tool in toolset.items()}

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Pause for the calls of the last model turn that need approval; apply the decisions."""
        messages = state["messages"]
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None or not last.tool_calls:
            return None
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        waiting: list[tuple[int, dict[str, Any], Tool[Any, Any]]] = []
        for index, call in enumerate(last.tool_calls):
            tool = self.toolset.get(call["name"])
            if tool is None or not tool.guarded or call.get("id") in answered:
                continue
            try:
                validated = tool.validate_args(call["args"])
            except ToolArgumentsError:
                continue  # the tool answers with the schema error, without asking anyone
            if tool.needs_approval(validated):
                waiting.append((index, dict(call), tool))
        if not waiting:
            return {APPROVED_KEY: {}} if state.get(APPROVED_KEY) else None
        pending = _review(
            [(tool, call["name"], to_json_data(call["args"])) for _, call, tool in waiting]
        )
        decisions = _ask(pending)
        revised = list(last.tool_calls)
        replies: list[ToolMessage] = []
        approved: dict[str, Any] = {}
        for (index, proposed, _), decision in zip(waiting, decisions, strict=True):
            kind = getattr(decision, "type", None)
            call_id = str(proposed.get("id") or "")
            if kind == "approve":
                approved[call_id] = {"name": proposed["name"], "args": proposed["args"]}
            elif kind == "edit":
                edited = decision.edited_action
                replaced = {**revised[index], "name": edited.name, "args": edited.args}
                revised[index] = cast("LCToolCall", replaced)
                if edited.name == proposed["name"]:
                    approved[call_id] = {"name": edited.name, "args": edited.args}
                # An edit to another tool is not an approval of it: its own guard decides.
            else:
                respond = kind == "respond"
                text = getattr(decision, "message", None)
                replies.append(
                    ToolMessage(
                        content=str(text or "") if respond else text or REJECTED_BY_USER_MESSAGE,
                        name=proposed["name"],
                        tool_call_id=call_id,
                        status="success" if respond else "error",
                    )
                )
        reviewed = last.model_copy(update={"tool_calls": revised})
        return {"messages": [reviewed, *replies], APPROVED_KEY: approved}

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async variant of :meth:`after_model`."""
        return self.after_model(state, runtime)

    def _route(self, request: ToolCallRequest) -> ToolCallRequest:
        """Run our tools through toolguard: approved calls without asking again, others guarded."""
        call = request.tool_call
        name = call["name"]
        if name not in self._guarded:
            return request
        state = request.state if isinstance(request.state, Mapping) else {}
        record = (state.get(APPROVED_KEY) or {}).get(call.get("id") or "")
        if record == {"name": name, "args": call["args"]}:
            return request.override(tool=self._approved[name])
        return request.override(tool=self._guarded[name])

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the call through its toolguard tool (see :meth:`after_model`)."""
        return handler(self._route(request))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async variant of :meth:`wrap_tool_call`."""
        return await handler(self._route(request))


def middleware(tools: Tools) -> ToolguardMiddleware:
    """A ``HumanInTheLoopMiddleware`` for ``create_agent`` that decides with toolguard.

    Args:
        tools: the same tools given to the agent: a
            :class:`~toolguard.Toolset`, or a list of functions and
            :class:`~toolguard.Tool` objects (classified with
            :func:`~toolguard.guard`).

    Returns:
        The middleware; the agent needs a checkpointer to pause and resume.
    """
    return ToolguardMiddleware(tools)
