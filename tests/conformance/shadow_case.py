"""The decision axis's ``shadow`` cell: shadow mode on every path, or its loud refusal.

In shadow mode a call that would wait for a person runs at once and is recorded (a
``shadow`` audit event where the path keeps an audit trail; ``Step.shadowed`` on a
Runner); a deny rule still refuses unless ``shadow="all"``, which runs that call too. A
framework integration runs the turn itself and keeps no audit trail: ``shadow=True`` on
its factory raises ``UnsupportedPolicyError``, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolguard import UnsupportedPolicyError

from .paths import Adapter, Ran
from .test_matrix import DENIED_AT, EVIL

SHADOW_KIND = "shadow mode: what would ask runs at once, recorded; a deny rule still refuses"

NOT_RECORDED = (
    " cannot run in shadow mode: the framework runs the turn and toolguard keeps no audit trail"
    " there, so what would have been asked could not be recorded. Run the tools with"
    " toolguard.ReviewedChat(shadow=True), `toolguard serve --shadow` or"
    " `toolguard mcp-proxy --shadow`."
)


def _pydantic_ai() -> Any:
    from toolguard.integrations import pydantic_ai

    return pydantic_ai.toolset([], shadow=True)


def _openai_agents() -> Any:
    from toolguard.integrations import openai_agents

    return openai_agents.function_tools([], shadow=True)


def _langchain_tools() -> Any:
    from toolguard.integrations import langchain

    return langchain.tools([], shadow=True)


def _langchain_middleware() -> Any:
    from toolguard.integrations import langchain

    return langchain.middleware([], shadow=True)


def _langchain_hitl() -> Any:
    from toolguard.integrations.langchain_hitl import HumanInTheLoopMiddleware

    return HumanInTheLoopMiddleware({}, shadow=True)


REFUSED: dict[str, tuple[Callable[[], Any], str]] = {
    "pydantic_ai": (_pydantic_ai, "toolguard.integrations.pydantic_ai.toolset()"),
    "pydantic_ai_mcp": (_pydantic_ai, "toolguard.integrations.pydantic_ai.toolset()"),
    "openai_agents": (_openai_agents, "function_tools()"),
    "langchain_tools": (_langchain_tools, "toolguard.integrations.langchain.tools()"),
    "langchain_middleware": (
        _langchain_middleware,
        "toolguard.integrations.langchain.middleware()",
    ),
    "langchain_hitl": (_langchain_hitl, "HumanInTheLoopMiddleware"),
}
"""The paths whose factory refuses ``shadow=True``: how to call it, and the name its text gives."""

AUDITED = {"chat", "http", "ai_sdk", "mcp_proxy", "mcp_proxy_http", "mcp_proxy_url"}
"""The paths that keep an audit trail (it is among their ``texts()``)."""

NA = {
    "decorator": (
        "not applicable: a directly called function has no shadow option (`allow_once` is"
        " the approval of one call)"
    ),
}
for _path in REFUSED:
    NA[_path] = (
        "refused loudly: the framework runs the turn and keeps no audit trail, so shadow=True"
        " on the integration's factory raises UnsupportedPolicyError (the case checks its text)"
    )


def watch(p: Adapter, shadow: bool | str) -> None:
    """Put the path's component in shadow mode (as ``shadow=`` or ``--shadow`` does)."""
    if hasattr(p, "proxy"):
        from toolguard._gateway.run import watch as watch_gateway

        watch_gateway(p.proxy, shadow, None)  # toolguard mcp-proxy --shadow / --shadow-all
    elif hasattr(p, "chat"):
        p.chat.runner.shadow = shadow  # ReviewedChat(shadow=...), toolguard serve --shadow
    else:
        p.runner.shadow = shadow  # type: ignore[attr-defined]  # Runner(shadow=...)


async def shadow_case(path: str, tmp_path: Path, adapter: Callable[..., Adapter]) -> None:
    """Shadow mode runs a guarded call at once and records it, a deny rule still refuses;
    ``shadow="all"`` runs the denied call too. A framework refuses shadow mode loudly."""
    from .test_decisions import RULES

    if path in REFUSED:
        make, where = REFUSED[path]
        with pytest.raises(UnsupportedPolicyError, match=r"shadow mode") as info:
            make()
        assert str(info.value) == where + NOT_RECORDED
        return
    args = {"path": "/srv/a"}
    async with adapter("shadow", path, tmp_path).session(rules=RULES) as p:
        watch(p, True)
        assert await p.propose("delete_file", args) == Ran(False, "deleted /srv/a")
        assert await p.propose("send_email", EVIL) == DENIED_AT[path]
        assert p.effects == [("delete_file", args)]
        if path in AUDITED:
            audit = "\n".join(await p.texts())
            assert '"kind": "shadow"' in audit
            assert '"would": "ask"' in audit
            assert '"would": "deny"' not in audit  # the denied call was not shadowed
    async with adapter("shadow", path, tmp_path, 1).session(rules=RULES) as p:
        watch(p, "all")
        assert await p.propose("send_email", EVIL) == Ran(False, "sent to eve@evil.example")
        assert p.effects == [("send_email", EVIL)]
