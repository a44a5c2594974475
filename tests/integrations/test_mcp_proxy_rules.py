"""The MCP gateway with argument rules (``toolguard mcp-proxy --rules FILE``), in one process."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402

from tests.helpers import WEBHOOK_SECRET  # noqa: E402
from toolguard import MemoryStore, Rules, Webhook  # noqa: E402
from toolguard._cli.main import main as cli_main  # noqa: E402
from toolguard._core.audit import to_jsonl  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._policy.rules import RuleDecision  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20
RULES = Rules(
    deny=['read_file(path="/etc/*")'],
    ask=['read_file(path="*secret*")'],
    allow=['archive_file(path="/srv/archive/*")'],
)


def executions(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def test_deny_ask_and_allow_rules_in_front_of_the_annotations(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    asked: list[str] = []

    async def ask(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60, rules=RULES)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode="legacy", elicitation_callback=ask
                ) as client:
                    denied = await client.call_tool("read_file", {"path": "/etc/passwd"})
                    secret = await client.call_tool("read_file", {"path": "/srv/secret.txt"})
                    plain = await client.call_tool("read_file", {"path": "/srv/notes.txt"})
                    archived = await client.call_tool("archive_file", {"path": "/srv/archive/x"})
                tasks.cancel_scope.cancel()
    assert (denied.is_error, text(denied)) == (
        True,
        [
            (
                "The call to `read_file` is denied by the rule"
                ' `deny read_file(path="/etc/*")`. It was not executed.'
            )
        ],
    )
    # ask: a read-only tool needs the reviewer (who declined); nothing ran
    assert secret.is_error is True
    assert len(asked) == 1
    assert "/srv/secret.txt" in asked[0]
    # no rule: readOnlyHint lets it run; allow: runs although archive_file has no hints
    assert (plain.is_error, archived.is_error) == (False, False)
    assert executions(log) == [
        {"tool": "read_file", "args": {"path": "/srv/notes.txt"}},
        {"tool": "archive_file", "args": {"path": "/srv/archive/x"}},
    ]


def test_the_cli_refuses_a_bad_rules_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text("[rules]\nallow = 3\n", encoding="utf-8")
    code = cli_main(["mcp-proxy", "--rules", str(bad), "--", "true"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: --rules {bad}: 'allow' in the rules TOML must be a list of strings\n"
    )


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--notify-url", "http://127.0.0.1:9/hook"],
            "error: --notify-url and --notify-secret go together: give both\n",
        ),
        (
            ["--notify-url", "ftp://x", "--notify-secret", "s"],
            (
                "error: --notify-url/--notify-secret: url must be an http:// or https:// URL,"
                " got 'ftp://x'\n"
            ),
        ),
    ],
)
def test_the_cli_checks_the_webhook_options(
    options: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["mcp-proxy", *options, "--", "true"]) == 2
    assert capsys.readouterr().err == error


DENIED = (
    'The call to `read_file` is denied by the rule `deny read_file(path="/etc/*")`.'
    " It was not executed."
)


async def serve(
    proxy: MCPProxy, calls: list[tuple[str, dict[str, Any]]]
) -> list[types.CallToolResult]:
    """Call the proxy through an in-memory MCP client (no elicitation), in order."""
    results = []
    async with anyio.create_task_group() as tasks:
        proxy._tasks = tasks
        async with Client(proxy.server(), mode="legacy") as client:
            for name, args in calls:
                results.append(await client.call_tool(name, args))
        tasks.cancel_scope.cancel()
    return results


async def test_a_denied_call_is_audited_with_its_rule_and_notifies_no_one(tmp_path: Path) -> None:
    """One thread per denied call: a ``denied`` event, no action, no hook event, no webhook."""
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    store = MemoryStore()
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(
                upstream,
                TOOLS,
                store=store,
                ttl=60,
                rules=RULES,
                on_event=lambda event, payload: events.append((event, payload)),
            )
            proxy.chat.notify = Webhook("http://127.0.0.1:9/hook", secret=WEBHOOK_SECRET)
            [denied] = await serve(proxy, [("read_file", {"path": "/etc/passwd"})])
            [thread_id] = await store.thread_ids()
            state = await proxy.chat.get_thread(thread_id)
            exported = await proxy.chat.export_audit()
    assert (denied.is_error, text(denied)) == (True, [DENIED])
    [event] = state.audit
    assert event.model_dump(exclude={"id", "at"}) == {
        "kind": "denied",
        "thread_id": thread_id,
        "review_id": None,
        "action_id": None,
        "tool": "read_file",
        "args": {"path": "/etc/passwd"},
        "actor": None,
        "decision": None,
        "detail": DENIED,
        "digest": None,
    }
    assert exported == to_jsonl([event])
    assert (state.status, state.actions, state.outbox) == ("idle", [], [])
    assert events == []
    assert executions(log) == []


async def test_a_deny_rule_holds_before_the_schema_is_checked(tmp_path: Path) -> None:
    """Arguments that break the schema but match a deny rule: denied (and audited), as before."""
    log = tmp_path / "log.jsonl"
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            strict = {**TOOLS[0]["inputSchema"], "additionalProperties": False}
            listed = [{**TOOLS[0], "inputSchema": strict}, *TOOLS[1:]]
            proxy = MCPProxy(upstream, listed, store=MemoryStore(), ttl=60, rules=RULES)
            [denied] = await serve(proxy, [("read_file", {"path": "/etc/x", "mode": 1})])
            [thread_id] = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            audit = await proxy.chat.audit_trail(thread_id)
    assert (denied.is_error, text(denied)) == (True, [DENIED])
    assert [(e.kind, e.tool, e.args, e.detail) for e in audit] == [
        ("denied", "read_file", {"path": "/etc/x", "mode": 1}, DENIED)
    ]
    assert executions(log) == []


class _DenyOnce(Rules):
    """Denies the first call it is asked about, then has no opinion: a guard that changes."""

    __slots__ = ("asked",)

    def __init__(self) -> None:
        super().__init__(deny=["delete_*"])
        self.asked = 0

    def decide(self, name: str, args: Mapping[str, Any]) -> RuleDecision:
        self.asked += 1
        if self.asked == 1:
            return super().decide(name, args)
        return RuleDecision(effect=None, rule=None, reason="no rule matched")


async def test_a_call_judged_denied_never_waits_for_a_review(tmp_path: Path) -> None:
    """Should the chat's runner put a call the proxy denied up for review, it is cancelled."""
    log = tmp_path / "log.jsonl"
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60, rules=_DenyOnce())
            [result] = await serve(proxy, [("delete_file", {"path": "d"})])
            [thread_id] = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            state = await proxy.chat.get_thread(thread_id)
    assert (result.is_error, text(result)) == (
        True,
        ["The call to `delete_file` is denied by the rule `deny delete_*`. It was not executed."],
    )
    assert [(e.kind, e.detail) for e in state.audit][1:] == [
        (
            "cancelled",
            (
                "The review of this action was cancelled: The call to `delete_file` is denied by"
                " the rule `deny delete_*`. It was not executed."
            ),
        )
    ]
    assert (state.status, [a.status for a in state.actions]) == ("idle", ["cancelled"])
    assert executions(log) == []
