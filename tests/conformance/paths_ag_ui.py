"""The AG-UI path: ``POST /hitl/ag-ui`` (a ReviewedChat as an AG-UI agent).

The chat of :class:`~tests.conformance.paths.ChatPath` behind the router of
:func:`toolguard.integrations.ag_ui.create_router`, spoken to as an AG-UI client does: a
run with the user's message, then a run whose ``resume`` answers the interrupts the paused
run ended with. What the stream shows is read back into the interface's terms: the
interrupts as the ``pending_review`` payload (the tool's name from the interrupt's metadata,
its streamed arguments, the interrupt's ``message``, its allowed decisions and quorum), the
reply as the text the model wrote, a ``RUN_ERROR`` as its code and its text.

Decisions map to resume entries: ``approve`` is ``{approved: true}`` (with its ``grant``,
which the route refuses), ``edit`` is ``{approved: true, editedArgs}`` (an edit keeps the
tool: a rename has no resume entry and the adapter refuses to express it), ``reject`` is
``{approved: false, reason}``. For refused runs a decision may also carry ``interrupt_id``
(``<review>`` in it stands for the review's id),
``status`` or ``payload`` to send instead of the real ones; a list of more decisions than
interrupts answers them in turn, so the same interrupt twice.
"""

from __future__ import annotations

import json
from typing import Any

from toolguard import ReviewedChat, Rules

from .paths import (
    ADAPTERS,
    ChatPath,
    DecidedOverHTTP,
    Outcome,
    Paused,
    Ran,
    Refused,
    _who,
    hide_ids,
    router_client,
)


class AGUIPath(DecidedOverHTTP, ChatPath):
    """``POST /hitl/ag-ui`` in process (httpx's ASGI transport), SQLite behind it."""

    name = "ag_ui"
    title = "AG-UI agent (`POST /hitl/ag-ui`)"

    def _client(self, chat: ReviewedChat) -> Any:
        from toolguard.integrations.ag_ui import create_router

        return router_client(create_router(chat, reviewer=_who))

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        await super().open(rules=rules, ttl=ttl)
        self.client = self._client(self.chat)
        self.inputs: dict[str, Any] = {}  # tool call id -> its streamed arguments
        self.interrupts: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.text = ""  # the user's message of the next run
        self._thread = ""  # the thread the next answer is about

    async def reopen(self, *, rules: Rules | None) -> None:
        await super().reopen(rules=rules)
        self.client = self._client(self.chat)

    async def _answer(self, response: Any) -> Outcome:
        """The outcome a stream shows (its text kept as written by toolguard)."""
        self.written.append(response.text)
        assert response.status_code == 200, response.text
        events = [
            json.loads(chunk.removeprefix("data: "))
            for chunk in response.text.split("\n\n")
            if chunk.startswith("data: ")
        ]
        last = events[-1]
        if last["type"] == "RUN_ERROR":
            return Refused(last["code"], hide_ids(last["message"]))
        for event in events:
            if event["type"] == "TOOL_CALL_ARGS":
                self.inputs[event["toolCallId"]] = json.loads(event["delta"])
        outcome = last.get("outcome")
        if outcome is not None and outcome["type"] == "interrupt":
            return self._paused(outcome["interrupts"])
        texts = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        thread_id = self._thread
        await self._error_of(self.chat, thread_id)
        self.reviews = [r for r in self.reviews if r[0] != thread_id]
        return Ran(error=self._last_error.get(thread_id, False), text=texts[-1])

    def _paused(self, interrupts: list[dict[str, Any]]) -> Paused:
        about = interrupts[0]["metadata"]["toolguard"]
        key = (about["threadId"], about["reviewId"])
        if not self.reviews or self.reviews[-1] != key:
            self.reviews.append(key)
        self.interrupts[key] = interrupts
        action_requests, configs = [], []
        for interrupt in interrupts:
            ours = interrupt["metadata"]["toolguard"]
            action_requests.append(
                {
                    "name": ours["toolName"],
                    "args": self.inputs[interrupt["toolCallId"]],
                    "description": interrupt["message"],
                }
            )
            config = {
                "action_name": ours["toolName"],
                "allowed_decisions": ours["allowedDecisions"],
            }
            if "approvals" in ours:
                config["approvals"] = ours["approvals"]
            configs.append(config)
        return Paused({"action_requests": action_requests, "review_configs": configs})

    async def _run(self, client: Any, state: dict[str, Any], resume: Any, **params: str) -> Any:
        body: dict[str, Any] = {
            "threadId": "ag-ui-thread",
            "runId": "run",
            "state": state,
            "messages": [],
        }
        if resume is None:
            body["messages"] = [{"id": "u", "role": "user", "content": self.text}]
        else:
            body["resume"] = resume
        return await client.post("/hitl/ag-ui", json=body, params=params)

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.model.queue.append((name, args))
        self.text = f"please {name}"
        response = await self._run(self.client, {}, None)
        snapshot = [e for e in response.text.split("\n\n") if '"STATE_SNAPSHOT"' in e]
        if snapshot:
            state = json.loads(snapshot[0].removeprefix("data: "))["snapshot"]
            self._thread = state["toolguard"]["threadId"]
        return await self._answer(response)

    def _resume(self, interrupts: list[dict[str, Any]], decisions: Any) -> list[dict[str, Any]]:
        """The resume entries of ``decisions``, one per decision, answering the interrupts."""
        entries = []
        for index, decision in enumerate(decisions):
            interrupt = interrupts[index % len(interrupts)]
            kind = decision.get("type")
            payload: dict[str, Any]
            if kind == "approve":
                payload = {"approved": True}
                if "grant" in decision:
                    payload["grant"] = decision["grant"]
            elif kind == "reject":
                payload = {"approved": False}
                if decision.get("message") is not None:
                    payload["reason"] = decision["message"]
            elif (
                kind == "edit"
                and decision["edited_action"]["name"]
                == interrupt["metadata"]["toolguard"]["toolName"]
            ):
                payload = {"approved": True, "editedArgs": decision["edited_action"]["args"]}
            else:
                msg = f"a resume entry cannot carry {decision!r} (an edit keeps the tool)"
                raise TypeError(msg)
            entries.append(
                {
                    "interruptId": decision.get("interrupt_id", interrupt["id"]).replace(
                        "<review>", interrupt["id"].partition(".")[0]
                    ),
                    "status": decision.get("status", "resolved"),
                    "payload": decision.get("payload", payload),
                }
            )
        return entries

    async def _send(
        self, client: Any, decisions: Any, reviewer: str | None, thread_id: str, review_id: str
    ) -> Outcome:
        resume = self._resume(self.interrupts[(thread_id, review_id)], decisions)
        params = {"who": reviewer} if reviewer is not None else {}
        self._thread = thread_id
        response = await self._run(client, {"toolguard": {"threadId": thread_id}}, resume, **params)
        return await self._answer(response)

    async def decide_foreign(self, decisions: Any) -> Outcome:
        """This thread's state, answering the interrupts of the review opened before."""
        thread_id, _ = self.reviews[-1]
        other = self.interrupts[self.reviews[-2]]
        resume = self._resume(other, decisions)
        self._thread = thread_id
        response = await self._run(self.client, {"toolguard": {"threadId": thread_id}}, resume)
        return await self._answer(response)


ADAPTERS[AGUIPath.name] = AGUIPath
