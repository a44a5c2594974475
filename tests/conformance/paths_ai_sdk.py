"""The Vercel AI SDK path: ``POST /hitl/ai-sdk/chat`` (``useChat``'s UI message stream).

The chat of :class:`~tests.conformance.paths.ChatPath` behind the router of
:func:`toolguard.integrations.ai_sdk.create_router`, spoken to as ``useChat`` does: a user
message, then the assistant message whose tool parts carry the approval responses
(``approval: {id, approved, reason}``). What the stream shows is read back into the
interface's terms: the approval requests as the ``pending_review`` payload (the tool's name,
its streamed input, the request's ``reason`` and ``approvalDescriptor``), the reply as the
text the model wrote, a refusal as the ``error`` part's text.

Decisions map to approval responses: ``approve`` is ``approved: true``, ``reject`` is
``approved: false`` with its message as the reason, ``approve`` with a ``grant`` sends that
grant in the approval (which the route refuses). Edits have no approval response: the
adapter refuses to express them. For refused requests, a decision may also carry
``approval_id``, ``tool_call_id`` or ``approved`` to send instead of the real ones; a list of
more decisions than calls answers the calls in turn, so the same approval twice.
"""

from __future__ import annotations

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

ERROR_PART = "error part"
"""The :class:`Refused` kind of a request answered with one ``error`` part."""


class AISDKPath(DecidedOverHTTP, ChatPath):
    """``POST /hitl/ai-sdk/chat`` in process (httpx's ASGI transport), SQLite behind it."""

    name = "ai_sdk"
    title = "Vercel AI SDK `useChat` (`POST /hitl/ai-sdk/chat`)"

    def _client(self, chat: ReviewedChat) -> Any:
        from toolguard.integrations.ai_sdk import create_router

        return router_client(create_router(chat, reviewer=_who))

    async def open(self, *, rules: Rules | None, ttl: float | None) -> None:
        await super().open(rules=rules, ttl=ttl)
        self.client = self._client(self.chat)
        self.inputs: dict[str, Any] = {}  # tool call id -> its streamed input
        self.approvals: dict[tuple[str, str], list[tuple[str, str]]] = {}

    async def reopen(self, *, rules: Rules | None) -> None:
        await super().reopen(rules=rules)
        self.client = self._client(self.chat)

    def _answer(self, response: Any) -> Outcome:
        """The outcome a stream shows (and its text kept as written by toolguard)."""
        import json

        self.written.append(response.text)
        assert response.status_code == 200, response.text
        parts = [
            json.loads(event.removeprefix("data: "))
            for event in response.text.split("\n\n")
            if event.startswith("data: ") and event != "data: [DONE]"
        ]
        if parts and parts[0]["type"] == "error":
            return Refused(ERROR_PART, hide_ids(parts[0]["errorText"]))
        for part in parts:
            if part["type"] == "tool-input-available":
                self.inputs[part["toolCallId"]] = part["input"]
        requests = [p for p in parts if p["type"] == "tool-approval-request"]
        if requests:
            return self._paused(requests)
        outputs = [p for p in parts if p["type"].startswith("tool-output-")]
        texts = [p["delta"] for p in parts if p["type"] == "text-delta"]
        error = bool(outputs) and outputs[-1]["type"] != "tool-output-available"
        return Ran(error=error, text=texts[-1])

    def _paused(self, requests: list[dict[str, Any]]) -> Paused:
        descriptor = requests[0]["approvalDescriptor"]
        key = (descriptor["threadId"], descriptor["reviewId"])
        if not self.reviews or self.reviews[-1] != key:
            self.reviews.append(key)
        self.approvals[key] = [(r["approvalId"], r["toolCallId"]) for r in requests]
        action_requests, configs = [], []
        for request in requests:
            about = request["approvalDescriptor"]
            action_requests.append(
                {
                    "name": about["toolName"],
                    "args": self.inputs[request["toolCallId"]],
                    "description": request["reason"],
                }
            )
            config = {
                "action_name": about["toolName"],
                "allowed_decisions": about["allowedDecisions"],
            }
            if "approvals" in about:
                config["approvals"] = about["approvals"]
            configs.append(config)
        return Paused({"action_requests": action_requests, "review_configs": configs})

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        self.model.queue.append((name, args))
        message = {"role": "user", "parts": [{"type": "text", "text": f"please {name}"}]}
        response = await self.client.post("/hitl/ai-sdk/chat", json={"messages": [message]})
        return self._answer(response)

    def _message(
        self, thread_id: str, approvals: list[tuple[str, str]], decisions: Any
    ) -> dict[str, Any]:
        """The assistant message after ``addToolApprovalResponse`` for each decision."""
        parts = []
        for index, decision in enumerate(decisions):
            approval_id, call_id = approvals[index % len(approvals)]
            if decision["type"] not in ("approve", "reject"):
                msg = f"an approval response cannot carry a {decision['type']!r} decision"
                raise TypeError(msg)
            answer: dict[str, Any] = {
                "id": decision.get("approval_id", approval_id),
                "approved": decision.get("approved", decision["type"] == "approve"),
            }
            if decision.get("message") is not None:
                answer["reason"] = decision["message"]
            if "grant" in decision:
                answer["grant"] = decision["grant"]
            parts.append(
                {
                    "type": "dynamic-tool",
                    "toolCallId": decision.get("tool_call_id", call_id),
                    "state": "approval-responded",
                    "input": {},
                    "approval": answer,
                }
            )
        metadata = {"toolguard": {"threadId": thread_id}}
        return {"role": "assistant", "parts": parts, "metadata": metadata}

    async def _send(
        self,
        client: Any,
        decisions: Any,
        reviewer: str | None,
        thread_id: str,
        review_id: str,
    ) -> Outcome:
        message = self._message(thread_id, self.approvals[(thread_id, review_id)], decisions)
        params = {"who": reviewer} if reviewer is not None else {}
        response = await client.post(
            "/hitl/ai-sdk/chat", json={"messages": [message]}, params=params
        )
        outcome = self._answer(response)
        if isinstance(outcome, Ran):
            self.reviews = [r for r in self.reviews if r[0] != thread_id]
        return outcome

    async def decide_foreign(self, decisions: Any) -> Outcome:
        """This thread's message, answering the approvals of the review opened before."""
        thread_id, _ = self.reviews[-1]
        other = self.approvals[self.reviews[-2]]
        message = self._message(thread_id, other, decisions)
        response = await self.client.post("/hitl/ai-sdk/chat", json={"messages": [message]})
        return self._answer(response)


ADAPTERS[AISDKPath.name] = AISDKPath
