"""``toolguard mcp-proxy`` in front of a real third-party server, driven by the clients people use.

The upstream is ``mcp-server-git`` (PyPI, run as ``python -m mcp_server_git
--repository REPO``) on a Git repository each test makes in its temporary
folder. It lists twelve tools, each with full annotations (``openWorldHint:
false`` on all):

=================  ============  ===========  ==========  ===========================
tool               readOnly      destructive  idempotent  through the gateway
=================  ============  ===========  ==========  ===========================
git_status         true          false        true        runs at once
git_diff_unstaged  true          false        true        runs at once
git_diff_staged    true          false        true        runs at once
git_diff           true          false        true        runs at once
git_log            true          false        true        runs at once
git_show           true          false        true        runs at once
git_branch         true          false        true        runs at once (lists branches)
git_commit         false         false        false       waits ('commit' verb)
git_add            false         false        true        waits ('add' verb)
git_reset          false         true         true        waits ('reset' verb)
git_create_branch  false         false        false       waits ('create' verb)
git_checkout       false         false        false       waits ('checkout' verb)
=================  ============  ===========  ==========  ===========================

Every write also lacks ``readOnlyHint: true``, so it would wait without its verb.

The clients, each the gateway's own MCP client over stdio (the client starts
``python -m toolguard mcp-proxy ... -- python -m mcp_server_git ...``): the MCP
SDK's ``Client`` (one proxy shared by its tests), fastmcp's ``Client`` with a
progress handler, the OpenAI Agents SDK's ``MCPServerStdio`` and Pydantic AI's
``MCPToolset`` in an ``Agent`` whose scripted model makes one call. None of them
can be asked (no elicitation), so a reviewer decides on the approval page's
API; each review names the server and the client (its ``clientInfo``: the MCP
SDK's default for ``mcp.Client`` and the Agents SDK, fastmcp's for fastmcp and
Pydantic AI). What ran is read from the repository itself (its branches and
commits).
Every wait is bounded and every process ends with its client.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("mcp_server_git")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from toolguard._gateway.relay import waiting_message  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30  # seconds: the bound of every wait
pytestmark = pytest.mark.asyncio(loop_scope="module")  # the shared proxy lives in this loop
MCP_DEFAULT_VERSION = "0.1.0"  # the clientInfo version of an mcp ClientSession given none

AT_ONCE = (
    "git_status",
    "git_diff_unstaged",
    "git_diff_staged",
    "git_diff",
    "git_log",
    "git_show",
    "git_branch",
)
APPROVALS: dict[str, dict[str, Any]] = {
    "git_status": {
        "needs_approval": False,
        "rule": "annotation",
        "reason": "the server marks it readOnlyHint: true and the word 'status' names"
        " information and the name holds no verb",
    },
    **{
        name: {
            "needs_approval": False,
            "rule": "annotation",
            "reason": "the server marks it readOnlyHint: true and the word 'diff' is a read verb",
        }
        for name in ("git_diff_unstaged", "git_diff_staged", "git_diff")
    },
    "git_commit": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'commit' is an approval verb (code and devops)",
    },
    "git_add": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'add' is an approval verb (data)",
    },
    "git_reset": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'reset' is an approval verb (data)",
    },
    "git_log": {
        "needs_approval": False,
        "rule": "annotation",
        "reason": "the server marks it readOnlyHint: true and the word 'log' names information"
        " and the name holds no verb",
    },
    "git_create_branch": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'create' is an approval verb (data)",
    },
    "git_checkout": {
        "needs_approval": True,
        "rule": "verb",
        "reason": "the word 'checkout' is an approval verb (code and devops)",
    },
    "git_show": {
        "needs_approval": False,
        "rule": "annotation",
        "reason": "the server marks it readOnlyHint: true and the word 'show' is a read verb",
    },
    "git_branch": {
        "needs_approval": False,
        "rule": "annotation",
        "reason": "the server marks it readOnlyHint: true and the name holds no known verb",
    },
}
"""What ``GET /hitl/tools`` says of each tool of mcp-server-git, in its listing order."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Repo:
    """A Git repository of the test: one commit, ``staged.txt`` staged, ``notes.txt`` untracked.

    Git runs with no global or system configuration, so the server's answers
    depend on this repository alone.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / "repo"
        self.path.mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(folder),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        self.git("init", "--quiet", "--initial-branch=main")
        self.git("config", "user.name", "Ada Tester")
        self.git("config", "user.email", "ada@example.com")
        self.git("config", "advice.statusHints", "false")
        (self.path / "README.md").write_text("toolguard test repository\n", encoding="utf-8")
        self.git("add", "README.md")
        self.git("commit", "--quiet", "-m", "First commit", when="2026-01-02T03:04:05+00:00")
        (self.path / "staged.txt").write_text("ready to commit\n", encoding="utf-8")
        self.git("add", "staged.txt")
        (self.path / "notes.txt").write_text("not tracked\n", encoding="utf-8")

    def git(self, *args: str, when: str | None = None) -> str:
        """Run git in the repository (a commit made ``when``, if given) and return its output."""
        dated = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if when else {}
        done = subprocess.run(
            ["git", *args],
            cwd=self.path,
            env={**self.env, **dated},
            capture_output=True,
            text=True,
            check=True,
            timeout=LIMIT,
        )
        return done.stdout

    def branches(self) -> list[str]:
        return self.git("branch", "--format=%(refname:short)").splitlines()

    def commits(self) -> list[str]:
        """``HASH SUBJECT`` of every commit of the current branch, newest first."""
        return self.git("log", "--format=%H %s").splitlines()

    def staged(self) -> list[str]:
        return self.git("diff", "--cached", "--name-only").splitlines()


class Gateway:
    """The command line of one proxy in front of mcp-server-git on ``repo``."""

    def __init__(self, folder: Path, repo: Repo, *options: str) -> None:
        self.repo = repo
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.page = f"{self.url}/"
        self.args = [
            "-m",
            "toolguard",
            "mcp-proxy",
            "--db",
            str(folder / "gateway.sqlite3"),
            "--port",
            str(self.port),
            "--no-auth",  # the tests' own HTTP clients decide on the page
            *options,
            "--",
            sys.executable,
            "-m",
            "mcp_server_git",
            "--repository",
            str(repo.path),
        ]
        self.env = {**repo.env, "PYTHONPATH": str(ROOT)}

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable, args=self.args, env=self.env, cwd=str(ROOT)
        )

    def call(self, client: str, version: str) -> dict[str, Any]:
        """What a pending review says of the server and of the client that sent the call."""
        return {
            "server": {
                "target": f"{sys.executable} -m mcp_server_git --repository {self.repo.path}",
                "name": "mcp-git",
                "version": metadata.version("mcp-server-git"),
                "title": None,
            },
            "client": {"name": client, "version": version, "title": None},
        }


def text(result: Any) -> list[str]:
    """The text blocks of an MCP ``CallToolResult`` (mcp's or fastmcp's)."""
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def dumped(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def direct_tools(tmp_path_factory: pytest.TempPathFactory) -> list[types.Tool]:
    """mcp-server-git's own listing, without the gateway."""
    repo = Repo(tmp_path_factory.mktemp("direct"))
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server_git", "--repository", str(repo.path)],
        env=repo.env,
    )
    with anyio.fail_after(LIMIT):
        async with Client(server) as client:
            return (await client.list_tools()).tools


async def pending_review(url: str) -> dict[str, Any]:
    """The one review ``GET /hitl/reviews`` lists once it lists one (bounded)."""
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        for _ in range(LIMIT * 20):
            try:
                answer = await http.get("/hitl/reviews")
            except httpx.TransportError:  # the page is not listening yet
                await anyio.sleep(0.05)
                continue
            reviews: list[dict[str, Any]] = answer.json()["reviews"]
            if reviews:
                [review] = reviews
                return review
            await anyio.sleep(0.05)
    pytest.fail("no review appeared")


async def decide(url: str, review: dict[str, Any], decision: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=LIMIT) as http:
        return await http.post(
            "/hitl/review",
            json={
                "thread_id": review["thread_id"],
                "review_id": review["review_id"],
                "decisions": [decision],
            },
        )


async def audit_kinds(url: str, thread_id: str) -> list[str]:
    async with httpx.AsyncClient(base_url=url, timeout=LIMIT) as http:
        answer = await http.get(f"/hitl/threads/{thread_id}/audit")
    assert answer.status_code == 200, answer.text
    return [json.loads(line)["kind"] for line in answer.text.splitlines()]


async def gone(url: str) -> None:
    """Wait (bounded) until nothing answers at ``url``: the proxy process has ended."""
    with anyio.fail_after(LIMIT):
        async with httpx.AsyncClient(base_url=url, timeout=1) as http:
            while True:
                try:
                    await http.get("/hitl/reviews")
                except httpx.TransportError:
                    return
                await anyio.sleep(0.05)


async def reviewed(
    gateway: Gateway,
    call: Callable[[], Awaitable[Any]],
    decision: dict[str, Any],
    *,
    before: Callable[[], Awaitable[None]] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Run ``call`` while a reviewer answers ``decision`` to the review it waits for.

    Before deciding, the repository is checked unchanged and ``before`` (if
    given) is awaited. Returns the call's answer and the review.
    """
    branches, commits, staged = (
        gateway.repo.branches(),
        gateway.repo.commits(),
        gateway.repo.staged(),
    )
    answers: list[Any] = []

    async def run() -> None:
        answers.append(await call())

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run)
            review = await pending_review(gateway.url)
            if before is not None:
                await before()
            repo = gateway.repo
            assert (repo.branches(), repo.commits(), repo.staged()) == (branches, commits, staged)
            answer = await decide(gateway.url, review, decision)
            assert answer.status_code == 200, answer.text
    return answers[0], review


def request(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``action_requests`` of the review of a call of ``name`` with ``args``."""
    return [{"name": name, "args": args, "description": f"Tool `{name}` is awaiting approval"}]


# ---------------------------------------------------------------------------- mcp.Client


class SharedProxy:
    """One proxy and its ``mcp.Client`` (no elicitation), kept open for the module's tests.

    pytest-asyncio sets a fixture up and tears it down in two different tasks,
    while an MCP client must be closed by the task that opened it: a task of
    its own (:meth:`hold`) keeps the client open until :attr:`stop` is set.
    """

    def __init__(self, folder: Path) -> None:
        self.gateway = Gateway(folder, Repo(folder))
        self.client: Client | None = None
        self.ready = anyio.Event()
        self.stop = anyio.Event()

    async def hold(self) -> None:
        try:
            async with Client(self.gateway.params()) as client:
                self.client = client
                self.ready.set()
                await self.stop.wait()
        finally:
            self.ready.set()  # a proxy that failed to start does not keep the fixture waiting


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedProxy]:
    proxy = SharedProxy(tmp_path_factory.mktemp("mcp-client"))
    holder = asyncio.get_running_loop().create_task(proxy.hold())
    try:
        with anyio.fail_after(LIMIT):
            await proxy.ready.wait()
        assert proxy.client is not None, "the proxy in front of mcp-server-git did not start"
        yield proxy
    finally:
        proxy.stop.set()
        with anyio.fail_after(LIMIT):
            await holder
        await gone(proxy.gateway.url)


async def test_the_gateway_lists_mcp_server_gits_tools_unchanged_and_guards_its_writes(
    shared: SharedProxy, direct_tools: list[types.Tool]
) -> None:
    assert shared.client is not None
    with anyio.fail_after(LIMIT):
        listed = (await shared.client.list_tools()).tools
        async with httpx.AsyncClient(base_url=shared.gateway.url, timeout=LIMIT) as http:
            tools = (await http.get("/hitl/tools")).json()["tools"]
    assert dumped(listed) == dumped(direct_tools)
    assert [t.name for t in listed] == list(APPROVALS)
    assert {tool["name"]: tool["approval"] for tool in tools} == APPROVALS
    assert [name for name, a in APPROVALS.items() if not a["needs_approval"]] == list(AT_ONCE)


async def test_git_status_runs_at_once_and_answers_the_repositorys_state(
    shared: SharedProxy,
) -> None:
    assert shared.client is not None
    repo = shared.gateway.repo
    with anyio.fail_after(LIMIT):
        result = await shared.client.call_tool("git_status", {"repo_path": str(repo.path)})
        log = await shared.client.call_tool("git_log", {"repo_path": str(repo.path)})
        async with httpx.AsyncClient(base_url=shared.gateway.url, timeout=LIMIT) as http:
            reviews = (await http.get("/hitl/reviews")).json()
    status = (
        "Repository status:\n"
        "On branch main\n"
        "Changes to be committed:\n"
        "\tnew file:   staged.txt\n"
        "\n"
        "Untracked files:\n"
        "\tnotes.txt\n"
    )
    assert (text(result), result.is_error) == ([status], False)
    assert status == "Repository status:\n" + repo.git("status").removesuffix("\n")
    [first] = repo.commits()
    history = (
        f"Commit history:\nCommit: {first.split()[0]}\nAuthor: Ada Tester\n"
        "Date: 2026-01-02 03:04:05+00:00\nMessage: First commit\n\n"
    )
    assert (text(log), log.is_error) == ([history], False)
    assert reviews == {"reviews": []}


async def test_git_create_branch_waits_for_the_page_and_runs_once(shared: SharedProxy) -> None:
    client = shared.client
    assert client is not None
    gateway = shared.gateway
    args = {"repo_path": str(gateway.repo.path), "branch_name": "feature/mcp-client"}
    before = gateway.repo.branches()

    result, review = await reviewed(
        gateway, lambda: client.call_tool("git_create_branch", args), {"type": "approve"}
    )

    assert review["pending_review"]["action_requests"] == request("git_create_branch", args)
    assert review["call"] == gateway.call("mcp", MCP_DEFAULT_VERSION)
    assert (text(result), result.is_error) == (
        ["Created branch 'feature/mcp-client' from 'main'"],
        False,
    )
    assert gateway.repo.branches() == sorted([*before, "feature/mcp-client"])
    assert await audit_kinds(gateway.url, review["thread_id"]) == [
        "requested",
        "decided",
        "executed",
    ]


async def test_a_rejected_git_commit_records_nothing(shared: SharedProxy) -> None:
    client = shared.client
    assert client is not None
    repo = shared.gateway.repo
    commits, staged = repo.commits(), repo.staged()
    args = {"repo_path": str(repo.path), "message": "Sneak a commit in"}

    result, review = await reviewed(
        shared.gateway,
        lambda: client.call_tool("git_commit", args),
        {"type": "reject", "message": "Not on main, please open a pull request."},
    )

    assert review["pending_review"]["action_requests"] == request("git_commit", args)
    assert review["call"] == shared.gateway.call("mcp", MCP_DEFAULT_VERSION)
    assert (text(result), result.is_error) == (["Not on main, please open a pull request."], True)
    assert (repo.commits(), repo.staged()) == (commits, staged)
    assert staged == ["staged.txt"]
    assert await audit_kinds(shared.gateway.url, review["thread_id"]) == [
        "requested",
        "decided",
        "rejected",
    ]


# ---------------------------------------------------------------------------- fastmcp.Client


async def test_fastmcp_client_gets_progress_naming_the_review_and_the_approved_result(
    tmp_path: Path,
) -> None:
    fastmcp = pytest.importorskip("fastmcp")
    from fastmcp.client.transports import StdioTransport

    gateway = Gateway(tmp_path, Repo(tmp_path), "--progress-interval", "0.2")
    progress: list[tuple[float, float | None, str | None]] = []
    first = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))
        first.set()

    transport = StdioTransport(
        command=sys.executable, args=gateway.args, env=gateway.env, cwd=str(ROOT), keep_alive=False
    )
    args = {"repo_path": str(gateway.repo.path), "branch_name": "feature/fastmcp"}
    with anyio.fail_after(LIMIT):
        async with fastmcp.Client(transport, progress_handler=on_progress) as client:

            async def progress_arrived() -> None:
                await first.wait()  # the call waits and says so before anyone decides

            result, review = await reviewed(
                gateway,
                lambda: client.call_tool("git_create_branch", args),
                {"type": "approve"},
                before=progress_arrived,
            )
            after_result = len(progress)
            kinds = await audit_kinds(gateway.url, review["thread_id"])
        assert len(progress) == after_result  # nothing followed the result
    await gone(gateway.url)

    message = waiting_message("git_create_branch", review["review_id"], gateway.page)
    assert message == (
        f"Waiting for a person to approve `git_create_branch` (review {review['review_id']})"
        f" on http://127.0.0.1:{gateway.port}/"
    )
    assert review["call"] == gateway.call("fastmcp", fastmcp.__version__)
    assert progress
    assert progress == [(float(n), None, message) for n in range(1, len(progress) + 1)]
    assert (text(result), result.is_error) == (
        ["Created branch 'feature/fastmcp' from 'main'"],
        False,
    )
    assert gateway.repo.branches() == ["feature/fastmcp", "main"]
    assert kinds == ["requested", "decided", "executed"]


# ---------------------------------------------------------------------------- OpenAI Agents SDK


async def test_agents_sdk_server_lists_unchanged_and_waits_for_the_page(
    tmp_path: Path, direct_tools: list[types.Tool]
) -> None:
    agents_mcp = pytest.importorskip("agents.mcp")
    gateway = Gateway(tmp_path, Repo(tmp_path))
    params = {"command": sys.executable, "args": gateway.args, "env": gateway.env, "cwd": str(ROOT)}
    args = {"repo_path": str(gateway.repo.path), "branch_name": "feature/agents"}
    with anyio.fail_after(LIMIT):
        async with agents_mcp.MCPServerStdio(
            params, name="git", client_session_timeout_seconds=LIMIT
        ) as server:
            listed = await server.list_tools()
            result, review = await reviewed(
                gateway,
                lambda: server.call_tool("git_create_branch", args),
                {"type": "approve"},
            )
            kinds = await audit_kinds(gateway.url, review["thread_id"])
    await gone(gateway.url)
    assert dumped(listed) == dumped(direct_tools)
    assert review["pending_review"]["action_requests"] == request("git_create_branch", args)
    assert review["call"] == gateway.call("mcp", MCP_DEFAULT_VERSION)  # the SDK's ClientSession
    assert (text(result), result.is_error) == (
        ["Created branch 'feature/agents' from 'main'"],
        False,
    )
    assert gateway.repo.branches() == ["feature/agents", "main"]
    assert kinds == ["requested", "decided", "executed"]


# ---------------------------------------------------------------------------- Pydantic AI


async def test_pydantic_ai_mcp_toolset_commits_once_approved(
    tmp_path: Path, direct_tools: list[types.Tool]
) -> None:
    pytest.importorskip("pydantic_ai")
    fastmcp = pytest.importorskip("fastmcp")
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    gateway = Gateway(tmp_path, Repo(tmp_path))
    repo = gateway.repo
    args = {"repo_path": str(repo.path), "message": "Add staged.txt"}
    offered: list[dict[str, Any]] = []
    returned: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if returns:
            returned.extend(returns)
            return ModelResponse(parts=[TextPart("Committed.")])
        offered.extend(
            {"name": t.name, "inputSchema": t.parameters_json_schema} for t in info.function_tools
        )
        return ModelResponse(parts=[ToolCallPart("git_commit", args, tool_call_id="c1")])

    transport = StdioTransport(
        command=sys.executable, args=gateway.args, env=gateway.env, cwd=str(ROOT), keep_alive=False
    )
    toolset = MCPToolset(transport, init_timeout=LIMIT, read_timeout=LIMIT)
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    before = repo.commits()

    with anyio.fail_after(LIMIT):
        async with toolset:  # the proxy runs until the audit is read
            run, review = await reviewed(
                gateway, lambda: agent.run("Commit the staged file"), {"type": "approve"}
            )
            kinds = await audit_kinds(gateway.url, review["thread_id"])
    await gone(gateway.url)

    assert review["pending_review"]["action_requests"] == request("git_commit", args)
    assert review["call"] == gateway.call("fastmcp", fastmcp.__version__)  # its fastmcp Client
    assert offered == [{"name": t.name, "inputSchema": t.input_schema} for t in direct_tools]
    commits = repo.commits()
    assert commits[1:] == before
    head, subject = commits[0].split(" ", 1)
    assert subject == "Add staged.txt"
    assert [(r.tool_name, r.content) for r in returned] == [
        ("git_commit", f"Changes committed successfully with hash {head}")
    ]
    assert run.output == "Committed."
    assert repo.staged() == []
    assert kinds == ["requested", "decided", "executed"]
