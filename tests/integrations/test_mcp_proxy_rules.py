"""The MCP gateway with argument rules (``toolguard mcp-proxy --rules FILE``), in one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402

from toolguard import MemoryStore, Rules  # noqa: E402
from toolguard._cli import main as cli_main  # noqa: E402
from toolguard._mcp_proxy import MCPProxy  # noqa: E402

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
