"""``toolguard review``: a reviewer in a real terminal (tmux) against real servers.

One ``toolguard serve`` process (tokens for alice, the terminal, and bob, the API; a tool module
that logs each run; the scripted OpenAI-compatible server as its model) and one ``toolguard
review`` in a tmux pane serve the module's terminal tests; each starts from the waiting screen
and ends there. One test runs the reviewer against ``toolguard mcp-proxy`` (its sign-in link,
found in the runtime files) and stops the proxy under it. The argument errors run in-process.
Every wait is bounded and polls; everything listens on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from tests import openai_server  # noqa: E402
from tests.helpers import command_env, free_port, wait_for_page  # noqa: E402
from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls  # noqa: E402
from toolguard._cli.main import main  # noqa: E402
from toolguard._http.auth import new_token  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 15.0  # seconds: the bound of every wait
NO_TMUX = "tmux is not installed (scripts/test installs Debian's tmux when run as root)"
TOOLS_MODULE = '''
import json
import os

from toolguard import requires_approval


def send_email(to: str, subject: str) -> str:
    """Send an email.

    Args:
        to: the address.
        subject: the subject line.
    """
    with open(os.environ["REVIEW_TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"to": to, "subject": subject}) + "\\n")
    return f"sent to {to}: {subject}"


@requires_approval(approvals=2)
def wire_money(amount: int, to: str) -> str:
    """Wire money.

    Args:
        amount: how much.
        to: the account.
    """
    with open(os.environ["REVIEW_TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"amount": amount, "to": to}) + "\\n")
    return f"wired {amount} to {to}"


TOOLS = [send_email, wire_money]
'''
WHY = "Why it asks: the word 'send' is an approval verb (messaging and publishing)"
WAITING = "No review waits now. Waiting for reviews... (Ctrl-C to leave)"


def tmux_binary() -> str:
    """The tmux program; skips the test without one, and fails it in CI, which runs them."""
    found = shutil.which("tmux")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI runs the terminal tests: {NO_TMUX}")
    pytest.skip(NO_TMUX)


class Pane:
    """A command in a tmux pane of 120 x 40 on a tmux server of its own; read as lines.

    The command's end is written as ``[exit CODE]`` and the pane stays open.
    """

    def __init__(
        self, tmp: Path, command: list[str], env: dict[str, str], *, name: str = "tmux"
    ) -> None:
        self.tmux = tmux_binary()
        self.socket = str(tmp / f"{name}.sock")
        shell = f'{shlex.join(command)}; echo "[exit $?]"; sleep 600'
        self._tmux("new-session", "-d", "-s", "review", "-x", "120", "-y", "40", shell, env=env)

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [self.tmux, "-S", self.socket, "-f", "/dev/null", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=LIMIT,
            check=True,
        )
        return done.stdout

    def type(self, text: str) -> None:
        """Type ``text`` (literally) and Enter."""
        if text:
            self._tmux("send-keys", "-t", "review", "-l", text)
        self._tmux("send-keys", "-t", "review", "Enter")

    def interrupt(self) -> None:
        """Press Ctrl-C."""
        self._tmux("send-keys", "-t", "review", "C-c")

    def answer(self, prompt: str, text: str) -> None:
        """Type ``text`` once ``prompt`` is the last line (typed earlier, the terminal would echo
        it before the prompt is drawn)."""
        deadline = time.monotonic() + LIMIT
        while (self.lines() or [""])[-1] != prompt:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"no prompt {prompt!r}; the terminal shows:\n" + "\n".join(self.lines())
                )
            time.sleep(0.02)
        self.type(text)

    def lines(self) -> list[str]:
        """Every line written so far (wrapped lines joined), without trailing blank ones."""
        text = self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "review")
        lines = [line.rstrip() for line in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def wait_for(self, line: str, *, after: int = 0) -> list[str]:
        """The lines after the first ``after`` once ``line`` is among them (at most LIMIT s)."""
        deadline = time.monotonic() + LIMIT
        while True:
            lines = self.lines()[after:]
            if line in lines:
                return lines
            if time.monotonic() > deadline:
                pytest.fail(f"{line!r} did not appear; the terminal shows:\n" + "\n".join(lines))
            time.sleep(0.05)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._tmux("kill-server")


def review_command(url: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "toolguard", "review", "--url", url, *options]


# ---------------------------------------------------------------------------- toolguard serve


class Served:
    """``toolguard serve`` with tokens, its model, its tool log, and bob's API client."""

    def __init__(self, tmp: Path, model: ScriptedOpenAIServer) -> None:
        self.tmp = tmp
        self.log = tmp / "tools.jsonl"
        self.model = model
        self.alice, alice_line = new_token("alice")
        self.bob, bob_line = new_token("bob")
        (tmp / "tokens.txt").write_text(f"{alice_line}\n{bob_line}\n", encoding="utf-8")
        (tmp / "reviewtools.py").write_text(TOOLS_MODULE, encoding="utf-8")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {**command_env(), "REVIEW_TOOL_LOG": str(self.log)}
        with (tmp / "serve.err").open("w") as stderr:
            self.process = self._start(env, stderr)
        self.api = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.bob}"}, timeout=LIMIT
        )

    def _start(self, env: dict[str, str], stderr: Any) -> subprocess.Popen[bytes]:
        tmp, model = self.tmp, self.model
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolguard",
                "serve",
                "--port",
                str(self.port),
                "--db",
                str(tmp / "chat.sqlite3"),
                "--tools",
                "reviewtools:TOOLS",
                "--model",
                "scripted-model",
                "--base-url",
                model.base_url,
                "--tokens",
                str(tmp / "tokens.txt"),
            ],
            cwd=tmp,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )

    def runs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def ask(self, to: str, message: str = "mail") -> dict[str, Any]:
        """A user message whose reply is a send_email to ``to`` (or what ``message`` asks): its
        pending review's item of ``GET /hitl/reviews`` (with ``requested_at``)."""
        paused = self.api.post("/hitl/chat", json={"message": f"{message} {to}"}).json()
        assert paused["pending_review"] is not None, paused
        [item] = [
            r
            for r in self.api.get("/hitl/reviews").json()["reviews"]
            if r["thread_id"] == paused["thread_id"]
        ]
        actions = self.api.get(f"/hitl/threads/{paused['thread_id']}").json()["actions"]
        return {**item, "requested_at": actions[0]["requested_at"]}

    def stop(self) -> None:
        self.api.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def react(body: dict[str, Any]) -> openai_server.Reply:
    """The model: ``mail X`` asks to send_email X, ``wire N to X`` to wire_money; a tool's result
    is answered as text."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return reply_text(f"The tool said: {last['content']}")
    words = last["content"].split()
    if words[0] == "wire":
        args: dict[str, Any] = {"amount": int(words[1]), "to": words[-1]}
        return reply_tool_calls([("call_1", "wire_money", args)])
    return reply_tool_calls([("call_1", "send_email", {"to": words[-1], "subject": "Hello"})])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with ScriptedOpenAIServer([react] * 40) as model:
        running = Served(tmp_path_factory.mktemp("serve"), model)
        try:
            answer = wait_for_page(running.process, running.url)
            assert answer is not None, (running.tmp / "serve.err").read_text()
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="module")
def pane(served: Served) -> Iterator[Pane]:
    env = {**command_env(), "TG_ALICE_TOKEN": served.alice}
    running = Pane(served.tmp, review_command(served.url, "--token-env", "TG_ALICE_TOKEN"), env)
    try:
        assert running.wait_for(WAITING) == [
            f"toolguard review: {served.url} | a chat | signed in as alice",
            "",
            WAITING,
        ]
        yield running
    finally:
        running.stop()


def card(item: dict[str, Any], to: str) -> list[str]:
    """The lines from the listing to the decision prompt of a send_email to ``to``."""
    thread = item["thread_id"]
    return [
        "",
        "1 review waiting:",
        f"  1. send_email (thread {thread})",
        "",
        f"Review in thread {thread}, asked {item['requested_at']}",
        "== Approval 1/1: send_email ==",
        "Tool `send_email` is awaiting approval",
        WHY,
        "Arguments:",
        "{",
        f'  "to": "{to}",',
        '  "subject": "Hello"',
        "}",
    ]


def test_approve_runs_the_tool_once_as_alice(served: Served, pane: Pane) -> None:
    start = len(pane.lines())
    item = served.ask("ann@example.com")
    prompt = "[a]pprove / [e]dit / [r]eject >"
    assert pane.wait_for(prompt, after=start) == [*card(item, "ann@example.com"), prompt]
    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
    pane.type("a")
    assert pane.wait_for(WAITING, after=before) == [
        "[a]pprove / [e]dit / [r]eject > a",
        "Sending...",
        "[executed] send_email: sent to ann@example.com: Hello (by alice)",
        "assistant: The tool said: sent to ann@example.com: Hello",
        "",
        WAITING,
    ]
    assert served.runs() == [{"to": "ann@example.com", "subject": "Hello"}]
    thread = served.api.get(f"/hitl/threads/{item['thread_id']}").json()
    assert [(a["status"], a["reviewer"]) for a in thread["actions"]] == [("executed", "alice")]


def test_edit_runs_the_edited_arguments(served: Served, pane: Pane) -> None:
    start = len(pane.lines())
    runs = len(served.runs())
    item = served.ask("eve@example.com")
    pane.wait_for("[a]pprove / [e]dit / [r]eject >", after=start)
    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
    pane.type("e")
    pane.answer("to >", "")  # keeps the address
    pane.answer("subject >", "Moved to 11")
    pane.wait_for("[s]end / [b]ack >", after=before)
    pane.type("s")
    assert pane.wait_for(WAITING, after=before) == [
        "[a]pprove / [e]dit / [r]eject > e",
        (
            "Edit the arguments field by field. Enter keeps the value shown; text is taken as typed"
            ' (or as a "JSON string"), other values as JSON (3, true, null, ["a"]).'
        ),
        'to: "eve@example.com"',
        "to >",
        'subject: "Hello"',
        "subject > Moved to 11",
        'Edited arguments: {"to": "eve@example.com", "subject": "Moved to 11"}',
        "[s]end / [b]ack > s",
        "Sending...",
        "[executed] send_email: sent to eve@example.com: Moved to 11 (by alice)",
        "assistant: The tool said: sent to eve@example.com: Moved to 11",
        "",
        WAITING,
    ]
    assert served.runs()[runs:] == [{"to": "eve@example.com", "subject": "Moved to 11"}]
    [action] = served.api.get(f"/hitl/threads/{item['thread_id']}").json()["actions"]
    assert action["decision"] == {
        "type": "edit",
        "edited_action": {
            "name": "send_email",
            "args": {"to": "eve@example.com", "subject": "Moved to 11"},
        },
    }


def test_reject_with_a_reason_reaches_the_model(served: Served, pane: Pane) -> None:
    start = len(pane.lines())
    runs = len(served.runs())
    item = served.ask("mallory@example.com")
    pane.wait_for("[a]pprove / [e]dit / [r]eject >", after=start)
    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
    pane.type("r")
    pane.wait_for("Why are you rejecting this tool? >", after=before)
    pane.type("Not to Mallory.")
    assert pane.wait_for(WAITING, after=before) == [
        "[a]pprove / [e]dit / [r]eject > r",
        "Why are you rejecting this tool? > Not to Mallory.",
        "Sending...",
        "[rejected] send_email: Not to Mallory. (by alice)",
        "assistant: The tool said: Rejected by the reviewer, not executed: Not to Mallory.",
        "",
        WAITING,
    ]
    assert served.runs()[runs:] == []
    tool_message = served.model.requests[-1]["messages"][-1]
    assert tool_message == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Rejected by the reviewer, not executed: Not to Mallory.",
    }
    [action] = served.api.get(f"/hitl/threads/{item['thread_id']}").json()["actions"]
    assert (action["status"], action["decision"], action["reviewer"]) == (
        "rejected",
        {"type": "reject", "message": "Not to Mallory."},
        "alice",
    )


def test_a_review_decided_on_the_api_meanwhile_ends_the_card(served: Served, pane: Pane) -> None:
    """bob rejects through the API while alice's card is shown: the card ends at once, and
    what alice types afterwards decides nothing (nothing runs, nothing is decided twice)."""
    start = len(pane.lines())
    runs = len(served.runs())
    item = served.ask("zed@example.com")
    pane.wait_for("[a]pprove / [e]dit / [r]eject >", after=start)
    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
    decided = served.api.post(
        "/hitl/review",
        json={
            "thread_id": item["thread_id"],
            "review_id": item["review_id"],
            "decisions": [{"type": "reject", "message": "Bob says no."}],
        },
    )
    assert decided.status_code == 200, decided.text
    assert pane.wait_for(WAITING, after=before) == [
        "[a]pprove / [e]dit / [r]eject >",
        "This review was decided elsewhere meanwhile: your decision was not sent.",
        "[rejected] send_email: Bob says no. (by bob)",
        "",
        WAITING,
    ]
    pane.type("a")  # typed at no prompt: read by nobody, and dropped before the next card
    time.sleep(0.3)
    assert served.runs()[runs:] == []
    audit = served.api.get(f"/hitl/threads/{item['thread_id']}/audit").text.splitlines()
    kinds = [(e["kind"], e["actor"]) for e in map(json.loads, audit)]
    assert kinds == [("requested", None), ("decided", "bob"), ("rejected", "bob")]
    # The next card waits for an answer of its own: the "a" typed before it was dropped.
    start = len(pane.lines())
    served.ask("kim@example.com")
    prompt = "[a]pprove / [e]dit / [r]eject >"
    pane.wait_for(prompt, after=start)
    time.sleep(0.3)
    assert pane.lines()[-1] == prompt
    before = len(pane.lines()) - 1
    pane.type("r")
    pane.answer("Why are you rejecting this tool? >", "")
    assert pane.wait_for(WAITING, after=before)[:4] == [
        "[a]pprove / [e]dit / [r]eject > r",
        "Why are you rejecting this tool? >",
        "Sending...",
        "[rejected] send_email: User rejected this action. It was not executed. (by alice)",
    ]
    assert served.runs()[runs:] == []


def test_ctrl_c_at_a_card_sends_nothing(served: Served, pane: Pane) -> None:
    """A second terminal is interrupted at the card: it sends nothing and the review waits; then
    the review is cancelled through the API, and the first terminal says so."""
    env = {**command_env(), "TG_ALICE_TOKEN": served.alice}
    command = review_command(served.url, "--token-env", "TG_ALICE_TOKEN")
    second = Pane(served.tmp, command, env, name="second")
    try:
        second.wait_for(WAITING)
        start = len(pane.lines())
        item = served.ask("quinn@example.com")
        prompt = "[a]pprove / [e]dit / [r]eject >"
        second.wait_for(prompt)
        before = len(second.lines()) - 1
        second.interrupt()
        assert second.wait_for("[exit 130]", after=before) == [
            f"{prompt} ^C",
            "Interrupted: nothing was sent for the review shown; it stays pending.",
            "[exit 130]",
        ]
    finally:
        second.stop()
    [waiting] = [
        r
        for r in served.api.get("/hitl/reviews").json()["reviews"]
        if r["thread_id"] == item["thread_id"]
    ]
    pane.wait_for(prompt, after=start)
    before = len(pane.lines()) - 1
    cancel = {"thread_id": item["thread_id"], "review_id": waiting["review_id"], "reason": "Later"}
    assert served.api.post("/hitl/cancel", json=cancel).status_code == 200
    assert pane.wait_for(WAITING, after=before) == [
        prompt,
        "This review was cancelled meanwhile: your decision was not sent.",
        (
            "[cancelled] send_email: The review of this action was cancelled: Later. It was not"
            " executed. (by bob)"
        ),
        "",
        WAITING,
    ]


def test_a_quorum_counts_the_terminal_once(served: Served, pane: Pane) -> None:
    """alice's approval is one of two: the terminal says the review waits for another reviewer
    and does not ask her again; bob's approval through the API runs the tool once."""
    start = len(pane.lines())
    runs = len(served.runs())
    item = served.ask("ACME", "wire 900 to")
    thread = item["thread_id"]
    prompt = "[a]pprove / [e]dit / [r]eject >"
    assert pane.wait_for(prompt, after=start) == [
        "",
        "1 review waiting:",
        f"  1. wire_money (thread {thread})",
        "",
        f"Review in thread {thread}, asked {item['requested_at']}",
        "wire_money: 0 of 2 approvals",
        "== Approval 1/1: wire_money ==",
        "Tool `wire_money` is awaiting approval",
        "Why it asks: guarded with @requires_approval",
        "Arguments:",
        "{",
        '  "amount": 900,',
        '  "to": "ACME"',
        "}",
        prompt,
    ]
    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
    pane.type("a")
    assert pane.wait_for(WAITING, after=before) == [
        "[a]pprove / [e]dit / [r]eject > a",
        "Sending...",
        "Your decision is counted; the review waits for another reviewer.",
        "",
        WAITING,
    ]
    assert served.runs()[runs:] == []
    [waiting] = [
        r for r in served.api.get("/hitl/reviews").json()["reviews"] if r["thread_id"] == thread
    ]
    assert waiting["pending_review"]["review_configs"][0]["approvals"] == {
        "required": 2,
        "given": 1,
        "by": ["alice"],
    }
    decided = served.api.post(
        "/hitl/review",
        json={
            "thread_id": thread,
            "review_id": waiting["review_id"],
            "decisions": [{"type": "approve"}],
        },
    )
    assert decided.json()["reply"] == "The tool said: wired 900 to ACME"
    assert served.runs()[runs:] == [{"amount": 900, "to": "ACME"}]


# ---------------------------------------------------------------------------- argument errors


def run_review(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["review", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (
            "ftp://127.0.0.1:8000/",
            (
                "error: --url expects the server's address, e.g. http://127.0.0.1:8000/ (toolguard"
                " serve) or http://127.0.0.1:8765/ (toolguard mcp-proxy), got 'ftp://127.0.0.1:8000/'"
            ),
        ),
        (
            "127.0.0.1:8000",
            (
                "error: --url expects the server's address, e.g. http://127.0.0.1:8000/ (toolguard"
                " serve) or http://127.0.0.1:8765/ (toolguard mcp-proxy), got '127.0.0.1:8000'"
            ),
        ),
        (
            "http://alice:secret@127.0.0.1:8000/",
            "error: --url must hold no user name or password: give a token with --token-env NAME",
        ),
        (
            "http://127.0.0.1:99999/",
            "error: --url http://127.0.0.1:99999/: Port out of range 0-65535",
        ),
    ],
    ids=["scheme", "no-scheme", "credentials", "port"],
)
def test_a_url_that_cannot_be_used(
    url: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_review(["--url", url], capsys) == (2, "", error + "\n")


def test_no_url(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["review"])
    assert (exited.value.code, capsys.readouterr().err) == (
        2,
        "toolguard review: error: the following arguments are required: --url\n",
    )


def test_a_token_variable_that_is_not_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TG_NO_SUCH_TOKEN", raising=False)
    monkeypatch.setenv("TG_SPACED_TOKEN", "two words")
    url = "http://127.0.0.1:8000/"
    assert run_review(["--url", url, "--token-env", "TG_NO_SUCH_TOKEN"], capsys) == (
        2,
        "",
        (
            "error: --token-env TG_NO_SUCH_TOKEN: the environment variable TG_NO_SUCH_TOKEN is not"
            " set or empty\n"
        ),
    )
    assert run_review(["--url", url, "--token-env", "TG_SPACED_TOKEN"], capsys) == (
        2,
        "",
        (
            "error: --token-env TG_SPACED_TOKEN: the token holds spaces or characters a header"
            " cannot carry; check the value (toolguard token prints one)\n"
        ),
    )


def test_nothing_listens_at_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/"
    assert run_review(["--url", url], capsys) == (
        1,
        "",
        (
            f"error: cannot reach {url}: connection refused; is toolguard serve or toolguard"
            " mcp-proxy running there?\n"
        ),
    )


def test_a_refused_or_missing_token(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TG_WRONG_TOKEN", "not-a-token-of-this-server")
    assert run_review(["--url", served.url, "--token-env", "TG_WRONG_TOKEN"], capsys) == (
        1,
        "",
        (
            "error: the server refused the token of --token-env: Sign-in failed: the bearer token"
            " is not valid; send Authorization: Bearer TOKEN with a reviewer's token.\n"
        ),
    )
    assert run_review(["--url", served.url], capsys) == (
        1,
        "",
        (
            f"error: {served.url} signs reviewers in with tokens: give --token-env NAME, NAME being"
            " the environment variable that holds yours\n"
        ),
    )


@contextlib.contextmanager
def answering(status: int, body: bytes, headers: dict[str, str]) -> Iterator[str]:
    """A server on 127.0.0.1 answering every GET with ``status``, ``headers`` and ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=LIMIT)


def test_a_server_that_is_not_toolguard(capsys: pytest.CaptureFixture[str]) -> None:
    with answering(404, b"<h1>Not Found</h1>", {"Content-Type": "text/html"}) as url:
        assert run_review(["--url", url], capsys) == (
            1,
            "",
            (
                f"error: {url} does not answer like toolguard serve or toolguard mcp-proxy"
                " (GET /hitl/session: HTTP 404); check --url\n"
            ),
        )


def test_a_link_server_of_another_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that wants its sign-in link, and no runtime file of this user names it."""
    monkeypatch.setenv("TOOLGUARD_RUNTIME_DIR", str(tmp_path))
    body = json.dumps({"detail": "Sign-in required"}).encode()
    challenge = {"WWW-Authenticate": 'SignInLink realm="toolguard"'}
    with answering(401, body, {"Content-Type": "application/json", **challenge}) as url:
        assert run_review(["--url", url], capsys) == (
            1,
            "",
            (
                f"error: {url} signs reviewers in with its sign-in link: run toolguard review on"
                " its machine as the user who started it, or give the link as --url (toolguard"
                " link prints it)\n"
            ),
        )


def test_a_server_text_cannot_act_on_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """An escape sequence in a server's error text is shown escaped."""
    body = json.dumps({"detail": "no \u001b[2Jentry"}).encode()
    with answering(401, body, {"Content-Type": "application/json"}) as url:
        assert run_review(["--url", url], capsys) == (
            1,
            "",
            "error: the server refused the sign-in: no \\u001b[2Jentry\n",
        )


# ---------------------------------------------------------------------------- toolguard mcp-proxy


async def test_against_mcp_proxy_with_its_sign_in_link(tmp_path: Path) -> None:
    """The gateway signs in with its link, found in the runtime files: the terminal approves a
    call an MCP client waits on (it runs once), and says so when the gateway stops."""
    mcp = pytest.importorskip("mcp")
    tmux_binary()
    log = tmp_path / "executions.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    runtime = tmp_path / "runtime"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "TOOLGUARD_MCP_LOG": str(log),
        "TOOLGUARD_RUNTIME_DIR": str(runtime),
        "LOGNAME": "maria",
    }
    upstream = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "toolguard",
            "mcp-proxy",
            "--db",
            str(tmp_path / "proxy.sqlite3"),
            "--port",
            str(port),
            "--",
            *upstream,
        ],
        env=env,
        cwd=str(ROOT),
    )
    pane: Pane | None = None
    try:
        with anyio.fail_after(LIMIT * 2):
            async with mcp.Client(params, mode="legacy") as client:
                result: list[Any] = []

                async def call() -> None:
                    result.append(await client.call_tool("delete_file", {"path": "old.txt"}))

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call)
                    pane = Pane(tmp_path, review_command(url), {**command_env(), **env})
                    prompt = "[a]pprove / [e]dit / [r]eject >"
                    lines = await anyio.to_thread.run_sync(pane.wait_for, prompt)
                    [runtime_file] = runtime.glob("mcp-proxy-*.json")
                    pid = runtime_file.stem.removeprefix("mcp-proxy-")
                    assert lines[:3] == [
                        (
                            "Signed in with the sign-in link of toolguard mcp-proxy"
                            f" (pid {pid}); the link shown before is now used: toolguard link"
                            " prints a new one for a browser."
                        ),
                        f"toolguard review: {url} | toolguard mcp-proxy | signed in as maria",
                        "",
                    ]
                    heading = lines[-9]
                    assert heading.startswith("Review in thread ")
                    assert heading.endswith("; from mcp to toolguard-proxy-upstream")
                    assert lines[-8:] == [
                        "== Approval 1/1: delete_file ==",
                        "Tool `delete_file` is awaiting approval",
                        (
                            "Why it asks: the word 'delete' is an approval verb (data); the"
                            " server's readOnlyHint: true cannot exempt it"
                        ),
                        "Arguments:",
                        "{",
                        '  "path": "old.txt"',
                        "}",
                        prompt,
                    ]
                    before = len(pane.lines()) - 1  # the prompt's line, where the answer is typed
                    pane.type("a")
                    done = await anyio.to_thread.run_sync(
                        lambda: pane.wait_for(WAITING, after=before) if pane else []
                    )
                assert [block.text for block in result[0].content] == [
                    "delete_file done",
                    '{"path": "old.txt"}',
                ]
                # The line shows what the MCP client got: the result as JSON.
                outcome = (
                    done[2].removeprefix("[executed] delete_file: ").removesuffix(" (by maria)")
                )
                assert done == [
                    "[a]pprove / [e]dit / [r]eject > a",
                    "Sending...",
                    f"[executed] delete_file: {outcome} (by maria)",
                    "",
                    WAITING,
                ]
                shown = json.loads(outcome)
                assert (shown["content"], shown["isError"]) == (
                    [
                        {"type": "text", "text": "delete_file done"},
                        {"type": "text", "text": '{"path": "old.txt"}'},
                    ],
                    False,
                )
            assert [json.loads(line) for line in log.read_text().splitlines()] == [
                {"tool": "delete_file", "args": {"path": "old.txt"}}
            ]
            after = len(pane.lines())
            lines = await anyio.to_thread.run_sync(
                lambda: pane.wait_for("[exit 1]", after=after) if pane else []
            )
            assert lines == [
                f"error: lost the server at {url}: connection refused; is it still running?",
                "[exit 1]",
            ]
    finally:
        if pane is not None:
            pane.stop()
