"""The MCP gateway's URL-mode elicitation: its client is asked to open the review on the page.

The gateway of :class:`~tests.conformance.paths.MCPProxyPath` with ``--ask-by-url`` and its
approval page's address, whose MCP client (the MCP Python SDK's ``Client``, in memory) has an
elicitation callback and so declares form and URL elicitation: each call that needs a person
is answered with an ``elicitation/create`` in URL mode, which the client's user accepts (they
will open the page). A decision is made by opening the URL the client was given, which must be
the call's review on the page (``PAGE/?thread=THREAD_ID``, the thread id as the
``elicitationId``, the message naming the tool and the review first opened for the call), and
deciding there through the page's HTTP API as a signed-in reviewer (``X-Reviewer``: the
decision's reviewer, ``admin`` without one). Once a decision ends the call, the client has been
sent ``notifications/elicitation/complete`` for it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio

from toolguard import Rules
from toolguard._gateway.routes import DEFAULT_PORT

from .paths import ADAPTERS, MCP_LIMIT, MCPProxyPath, Outcome, Ran

PAGE = f"http://127.0.0.1:{DEFAULT_PORT}"
"""The approval page's address the gateway names (its app is served in process)."""


class MCPProxyURLPath(MCPProxyPath):
    """``toolguard mcp-proxy --ask-by-url``: reviews opened by the URL the client is sent."""

    name = "mcp_proxy_url"
    title = "MCP gateway, review by URL (`mcp-proxy --ask-by-url`)"

    def _gateway(self, rules: Rules | None) -> tuple[Any, Any]:
        import httpx

        from toolguard._gateway.routes import build_app
        from toolguard.http import HeaderAuth

        proxy, http = super()._gateway(rules)
        proxy.ask_by_url = True  # --ask-by-url
        proxy.page_url = f"{PAGE}/"  # as the command names its page
        if self.reviewers is None:  # reviewers always sign in on this path
            auth = HeaderAuth("X-Reviewer", trusted_proxies=["127.0.0.1/32"])
            http = httpx.AsyncClient(
                transport=httpx.ASGITransport(build_app(proxy.chat, auth=auth)),
                base_url=PAGE,
                headers={"X-Reviewer": "admin"},
            )
        return proxy, http

    def _connect(self) -> AbstractAsyncContextManager[Any]:
        from mcp import Client

        self.questions: dict[str, Any] = {}  # elicitationId -> the URL question
        # thread id -> its call's tool and the review the call first opened
        self.first_review: dict[str, tuple[str, str]] = {}
        self.completed: list[str] = []
        return Client(
            self.proxy.server(),
            mode="legacy",
            elicitation_callback=self._asked,
            message_handler=self._message,
        )

    async def _asked(self, ctx: Any, params: Any) -> Any:
        """The client's user: will open the page (accept), and keeps the question."""
        from mcp import types

        assert isinstance(params, types.ElicitRequestURLParams), params  # never the form
        assert params.elicitation_id not in self.questions  # one question per call
        self.questions[params.elicitation_id] = params
        self.written.extend([params.message, params.url])
        return types.ElicitResult(action="accept")

    async def _message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    async def propose(self, name: str, args: dict[str, Any]) -> Outcome:
        outcome = await super().propose(name, args)
        for thread_id, review_id, _ in self.reviews:
            self.first_review.setdefault(thread_id, (name, review_id))
        return outcome

    async def _open_review(self, http: Any, thread_id: str) -> None:
        """Open the URL the client was given for ``thread_id``'s call: it is that review."""
        from toolguard._gateway.asking import URL_QUESTION

        with anyio.fail_after(MCP_LIMIT):
            while thread_id not in self.questions:  # noqa: ASYNC110 - filled by the callback
                await anyio.sleep(0.005)
        question = self.questions[thread_id]
        name, review_id = self.first_review[thread_id]
        message = URL_QUESTION.format(name=name, review_id=review_id)
        assert (question.message, question.url) == (message, f"{PAGE}/?thread={thread_id}")
        opened = await http.get(question.url.removeprefix(PAGE))
        assert (opened.status_code, opened.headers["content-type"]) == (
            200,
            "text/html; charset=utf-8",
        )

    async def _post(
        self,
        http: Any,
        decisions: Any,
        thread_id: str,
        review_id: str,
        reviewer: str | None = None,
    ) -> Outcome:
        await self._open_review(http, thread_id)
        return await super()._post(http, decisions, thread_id, review_id, reviewer)

    async def decide(self, decisions: Any, *, reviewer: str | None = None) -> Outcome:
        thread_id, _, call = self.reviews[-1]
        outcome = await super().decide(decisions, reviewer=reviewer)
        if call[1].is_set():  # the call answered: its question was closed first
            assert self.completed.count(thread_id) == 1, (thread_id, self.completed)
        return outcome

    async def decide_twice(self, decisions: Any) -> list[Outcome]:
        thread_id = self.reviews[-1][0]
        outcomes = await super().decide_twice(decisions)
        if any(isinstance(outcome, Ran) for outcome in outcomes):
            assert self.completed.count(thread_id) == 1, (thread_id, self.completed)
        return outcomes

    async def advance(self, seconds: float) -> None:
        thread_id = self.reviews[-1][0]
        await super().advance(seconds)  # the call answered at its deadline
        assert self.completed.count(thread_id) == 1, (thread_id, self.completed)


ADAPTERS[MCPProxyURLPath.name] = MCPProxyURLPath
