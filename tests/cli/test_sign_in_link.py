"""The sign-in link of ``toolguard serve`` and ``toolguard mcp-proxy``, and ``toolguard link``.

Without ``--tokens``, ``--auth-header`` or ``--no-auth`` a program on this machine that does not
hold the link's cookie is refused, by the chat's server and by the gateway's page, for reads and
decisions alike. Every server here is a real process on 127.0.0.1 and every client a real HTTP
(or MCP) client; each test keeps the runtime files in a folder of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from tests.helpers import (  # noqa: E402
    command_env,
    free_port,
    run_toolguard,
    sign_in_link,
    signed_in_client,
    wait_for_page,
)
from toolguard._cli.main import main  # noqa: E402
from toolguard._http.link import local_reviewer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ASK = "email alice that the meeting moved to 11"  # the demo model sends an email: a review
REVIEWER = "maria"  # the user name the servers run as (LOGNAME)
CHALLENGE = 'SignInLink realm="toolguard"'
NO_SESSION = {
    "detail": "Sign-in required: open this server's sign-in link; toolguard link prints it in a"
    " terminal on this machine."
}
ENDED = {
    "detail": "Sign-in required: the session has ended (expired, or the server restarted); open"
    " a new sign-in link: toolguard link prints it in a terminal on this machine."
}
USED = {
    "detail": "Sign-in failed: this sign-in link was used already or is not this server's (a"
    " link signs in one browser); toolguard link prints a new one in a terminal on this"
    " machine. If you did not use it, someone else did: restart the server to sign every"
    " browser out."
}
COOKIE = re.compile(
    rf"toolguard_session={REVIEWER}\.\d+\.[0-9a-f]{{64}}; Path=/; Max-Age=43200; HttpOnly;"
    r" SameSite=Strict"
)


def refused(answer: httpx.Response, body: dict[str, str] = NO_SESSION) -> bool:
    """Whether ``answer`` is the sign-in 401 with ``body`` and the link's challenge."""
    assert (answer.status_code, answer.json()) == (401, body), answer.text
    assert answer.headers["www-authenticate"] == CHALLENGE
    return True


def link_command(runtime: Path) -> tuple[int, str, str]:
    """``toolguard link`` of the user whose runtime files are in ``runtime``."""
    return run_toolguard("link", cwd=ROOT, env={"TOOLGUARD_RUNTIME_DIR": str(runtime)})


def decision(thread_id: str, review_id: str) -> dict[str, Any]:
    return {"thread_id": thread_id, "review_id": review_id, "decisions": [{"type": "approve"}]}


@contextlib.contextmanager
def serving(tmp_path: Path, *options: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``python -m toolguard serve`` on a free port, as user maria; stopped with SIGTERM."""
    port = free_port()
    env = {**command_env(), "TOOLGUARD_RUNTIME_DIR": str(tmp_path / "runtime"), "LOGNAME": REVIEWER}
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--port", str(port), *options],
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_page(process, f"{base}/") is not None, err.read_text()
        yield process, base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


# --- toolguard serve ----------------------------------------------------------------------------


def test_serve_answers_only_the_browser_that_opened_its_link(tmp_path: Path) -> None:
    """A local program without the cookie reads nothing and decides nothing; the link works once,
    signs in the user who runs the server, and toolguard link prints the next one."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o755)  # too open: the server makes it 0700
    runtime.chmod(0o755)
    db = tmp_path / "chat.sqlite3"
    with serving(tmp_path, "--db", str(db)) as (process, base):
        lines = (tmp_path / "stdout.txt").read_text().splitlines()
        assert lines[0] == (
            f"toolguard serve: {base}/ | model: built-in scripted demo model (offline)"
            f" | db: {db} | sign-in: link"
        )
        link = sign_in_link(lines[1], "serve", f"{base}/")
        code = link.rpartition("code=")[2]
        # The runtime file: this user's only, holding the current link.
        [kept] = runtime.iterdir()
        assert kept.name == f"serve-{process.pid}.json"
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert json.loads(kept.read_text(encoding="utf-8")) == {
            "command": "serve",
            "pid": process.pid,
            "url": f"{base}/",
            "about": f"db: {db}",
            "link": link,
        }
        assert link_command(runtime) == (
            0,
            f"toolguard serve (pid {process.pid}, db: {db}): {link}\n",
            "",
        )
        with httpx.Client(base_url=base, timeout=10) as program, httpx.Client(timeout=10) as person:
            # Nobody signed in yet: every route refuses, the page itself loads.
            assert program.get("/").status_code == 200
            for path in ("/hitl/reviews", "/hitl/session", "/hitl/events", "/hitl/tools"):
                assert refused(program.get(path))
            assert refused(program.post("/hitl/chat", json={"message": ASK}))
            # Wrong, empty, repeated and huge codes sign nobody in, and spend nothing.
            for query in ("code=" + "A" * 43, "code=", f"code={code}&code={code}", "x=1"):
                assert refused(program.get(f"/hitl/sign-in?{query}"), USED)
            assert refused(program.get("/hitl/sign-in", params={"code": "é" * 1100}), USED)
            # The person opens the link: the cookie, and the page without the code.
            opened = person.get(link)
            assert (opened.status_code, opened.headers["location"]) == (303, "/")
            assert COOKIE.fullmatch(opened.headers["set-cookie"]) is not None
            assert opened.content == b""
            person.base_url = httpx.URL(base)
            assert person.get("/hitl/session").json() == {"reviewer": REVIEWER}
            turn = person.post("/hitl/chat", json={"message": ASK}).json()
            thread_id, review_id = turn["thread_id"], turn["review_id"]
            assert turn["pending_review"] is not None
            # A local program cannot read the review or approve it; nothing changes.
            assert refused(program.get("/hitl/reviews"))
            assert refused(program.get(f"/hitl/threads/{thread_id}"))
            assert refused(program.get(f"/hitl/threads/{thread_id}/audit"))
            assert refused(program.post("/hitl/review", json=decision(thread_id, review_id)))
            forged = {"Cookie": f"toolguard_session={REVIEWER}.9999999999.{'0' * 64}"}
            assert refused(program.get("/hitl/reviews", headers=forged), ENDED)
            assert person.get(f"/hitl/threads/{thread_id}").json()["status"] == "awaiting_review"
            # The link worked once: a second browser is refused, the first is just let in.
            assert refused(program.get(link), USED)
            again = person.get(link)
            assert (again.status_code, again.headers["location"]) == (303, "/")
            assert "set-cookie" not in again.headers
            # The person decides; the audit names the user who runs the server.
            approved = person.post("/hitl/review", json=decision(thread_id, review_id))
            assert approved.status_code == 200
            audit = [
                json.loads(line)
                for line in person.get(f"/hitl/threads/{thread_id}/audit").text.splitlines()
            ]
            decided = [event for event in audit if event["kind"] == "decided"]
            assert [(e["actor"], e["decision"]) for e in decided] == [(REVIEWER, "approve")]
        # The used link was replaced: toolguard link prints the new one, which works once.
        code_, listed, err = link_command(runtime)
        fresh = listed.rpartition(": ")[2].rstrip("\n")
        assert (code_, listed, err) == (
            0,
            f"toolguard serve (pid {process.pid}, db: {db}): {fresh}\n",
            "",
        )
        assert fresh != link
        assert sign_in_link(
            f"toolguard serve: sign in on the approval page with this link (it works once;"
            f" toolguard link prints a new one): {fresh}",
            "serve",
            f"{base}/",
        )
        with signed_in_client(fresh) as other:
            assert other.get(f"{base}/hitl/session").json() == {"reviewer": REVIEWER}
        current = link_command(runtime)[1].rpartition("code=")[2].rstrip("\n")
        assert current not in listed
        # The server's own output never shows a code that still works (uvicorn's access log
        # shows a link after it was spent).
        logs = (tmp_path / "stdout.txt").read_text() + (tmp_path / "stderr.txt").read_text()
        assert current not in logs
    # Stopped (SIGTERM): the runtime file is gone, and toolguard link says so.
    assert process.returncode == -signal.SIGTERM
    assert list(runtime.iterdir()) == []
    assert link_command(runtime) == (
        1,
        "",
        (
            "no toolguard serve or mcp-proxy of this user signs in with a link now (runtime"
            f" files in {runtime})\n"
        ),
    )


def test_no_auth_keeps_the_page_open_on_loopback_with_its_warning(tmp_path: Path) -> None:
    with serving(tmp_path, "--db", ":memory:", "--no-auth") as (_process, base):
        reviews = httpx.get(f"{base}/hitl/reviews", timeout=10)
        session = httpx.get(f"{base}/hitl/session", timeout=10)
        first = (tmp_path / "stdout.txt").read_text().splitlines()[0]  # uvicorn's log follows
    assert (reviews.status_code, reviews.json()) == (200, {"reviews": []})
    assert (session.status_code, session.json()) == (200, {"reviewer": None})  # nobody signs in
    assert first == (
        f"toolguard serve: {base}/ | model: built-in scripted demo model (offline) | db: :memory:"
    )
    assert (tmp_path / "stderr.txt").read_text().splitlines()[0] == (
        f"warning: --no-auth: nobody signs in; anyone who can reach {base}/ can approve every"
        " tool call and read every conversation"
    )
    assert not (tmp_path / "runtime").exists()  # nothing for toolguard link


def test_workers_need_named_reviewers_or_no_auth(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--workers N has no shared code to spend: it needs named reviewers, or --no-auth."""
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--workers", "2", "--db", "x.sqlite3"]) == 2
    assert capsys.readouterr() == (
        "",
        (
            "error: --workers 2 needs --tokens FILE or --auth-header NAME (or --no-auth): the"
            " sign-in link works with one server process\n"
        ),
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("logname", "reviewer"),
    [("maria", "maria"), ("ana.lee@example.org", "ana.lee@example.org"), ("bad name!", "local")],
)
def test_the_reviewer_of_the_link_is_the_user_running_the_server(
    logname: str, reviewer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's name when it is a reviewer name, else 'local'."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOGNAME", logname)
    assert local_reviewer() == reviewer


def test_toolguard_link_skips_servers_that_are_gone(tmp_path: Path) -> None:
    """A runtime file left by a killed server is removed; an unreadable one is skipped."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    script = "import os; print(os.getpid())"
    finished = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    )
    gone = int(finished.stdout)
    left = runtime / f"serve-{gone}.json"
    entry = {"command": "serve", "pid": gone, "url": "u", "about": "a", "link": "l"}
    left.write_text(json.dumps(entry), encoding="utf-8")
    broken = runtime / "mcp-proxy-1.json"
    broken.write_text("{not json", encoding="utf-8")
    mine = runtime / f"serve-{os.getpid()}.json"  # a live process: listed
    mine.write_text(json.dumps({**entry, "pid": os.getpid()}), encoding="utf-8")
    assert link_command(runtime) == (0, f"toolguard serve (pid {os.getpid()}, a): l\n", "")
    assert sorted(path.name for path in runtime.iterdir()) == sorted([broken.name, mine.name])


# --- toolguard mcp-proxy ------------------------------------------------------------------------

mcp = pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters, types  # noqa: E402

UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
LIMIT = 60  # seconds: the bound of the gateway test


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def test_the_gateway_page_answers_only_the_link_and_the_model_never_reads_the_code(
    tmp_path: Path,
) -> None:
    """mcp-proxy in front of a real upstream, with an MCP client over stdio: a local program
    without the link's cookie cannot list or decide the waiting call; the person with the link
    can; no progress text, question or result the client gets carries the code."""
    port = free_port()
    page = f"http://127.0.0.1:{port}/"
    runtime = tmp_path / "runtime"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "TOOLGUARD_MCP_LOG": str(tmp_path / "executions.jsonl"),
        "TOOLGUARD_RUNTIME_DIR": str(runtime),
        "LOGNAME": REVIEWER,
    }
    args = ["-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "m.sqlite3")]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--port", str(port), "--progress-interval", "0.2", "--", *UPSTREAM],
        env=env,
        cwd=str(ROOT),
    )  # fmt: skip
    progress: list[str | None] = []
    questions: list[str] = []
    page_decided = anyio.Event()

    async def progressed(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def ask(ctx: Any, request: Any) -> types.ElicitResult:
        """The client's user: waits for the page on the first call, declines the second."""
        questions.append(request.message)
        if len(questions) == 1:
            await page_decided.wait()
        return types.ElicitResult(action="decline")

    results: list[types.CallToolResult] = []
    with anyio.fail_after(LIMIT):
        async with Client(params, mode="legacy", elicitation_callback=ask) as client:

            async def call() -> None:
                results.append(
                    await client.call_tool(
                        "delete_file", {"path": "a"}, progress_callback=progressed
                    )
                )

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                while not progress:  # noqa: ASYNC110 - the client has no event for it
                    await anyio.sleep(0.02)
                status, listed, err = await anyio.to_thread.run_sync(link_command, runtime)
                assert (status, err) == (0, "")
                [line] = listed.splitlines()
                assert re.fullmatch(
                    rf"toolguard mcp-proxy \(pid \d+, upstream:"
                    rf" {re.escape(shlex.join(UPSTREAM))}\):"
                    rf" {re.escape(page)}hitl/sign-in\?code=[A-Za-z0-9_-]{{43}}",
                    line,
                ), line
                link = line.rpartition(": ")[2]
                code = link.rpartition("code=")[2]
                async with (
                    httpx.AsyncClient(base_url=page, timeout=10) as program,
                    httpx.AsyncClient(base_url=page, timeout=10) as person,
                ):
                    for path in ("/hitl/reviews", "/hitl/audit", "/hitl/grants", "/hitl/events"):
                        assert refused(await program.get(path))
                    opened = await person.get(link)
                    assert (opened.status_code, opened.headers["location"]) == (303, "/")
                    [review] = (await person.get("/hitl/reviews")).json()["reviews"]
                    ids = (review["thread_id"], review["review_id"])
                    assert refused(await program.post("/hitl/review", json=decision(*ids)))
                    assert len((await person.get("/hitl/reviews")).json()["reviews"]) == 1
                    assert refused(await program.get(link), USED)
                    approved = await person.post("/hitl/review", json=decision(*ids))
                    assert approved.status_code == 200
                page_decided.set()
            declined = await client.call_tool("delete_file", {"path": "b"})
    assert texts(results[0])[0] == "delete_file done"
    # The model reads the plain address of the page, never the code.
    assert progress[0] == (
        f"Waiting for a person to approve `delete_file` (review {ids[1]}) on {page}"
    )
    shown = [
        *(text or "" for text in progress),
        *questions,
        *texts(results[0]),
        *texts(declined),
        json.dumps(results[0].model_dump(mode="json")),
        json.dumps(declined.model_dump(mode="json")),
    ]
    assert [text for text in shown if code in text] == []
    assert len(questions) == 2
    assert texts(declined) == [
        (
            "The review of this action was cancelled: The user declined to approve the call to"
            " `delete_file`. It was not executed."
        )
    ]
