"""The conformance matrix: every guarantee, on every path into toolguard.

One test function per guarantee, parametrized over the adapters of
``paths.py``. A cell that a path genuinely cannot express is skipped as
"not applicable"; a cell that fails because of a product defect is a strict
xfail naming the defect. :data:`CELLS` is the matrix that docs/security.md
shows ("The conformance matrix"); ``test_the_documented_matrix_is_this_one``
keeps the two equal.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import secret_spellings
from toolguard import REDACTED, Rules

from .paths import (
    ADAPTERS,
    DENY,
    JUDGE_MODEL,
    SECRET,
    TTL,
    Adapter,
    Judging,
    Outcome,
    Paused,
    Ran,
    Refused,
)
from .paths_slack import ON_THE_PAGE as SLACK_ON_THE_PAGE
from .paths_slack import REPLY as SLACK_REPLY

GUARANTEES: dict[str, str] = {
    "a": "a guarded body never runs unapproved",
    "b": "a deny rule is absolute, at call time and at approval time",
    "c": "an edit is checked again (rules and schema)",
    "d": "a quorum needs two distinct named reviewers",
    "e": "no secret in any text",
    "f": "an approved call runs once",
    "g": "past its deadline a review runs nothing",
    "h": "a decision is bound to its thread and review",
    "i": "refused decisions change nothing",
    "j": (
        "a judge never rejects and fails closed: a verdict it cannot give runs nothing, a quorum"
        " tool or an ask-ruled call still waits for a person, a deny rule refuses before the judge"
        " is asked"
    ),
}

NUMBERS: dict[str, int] = {
    "a": 1,
    "b": 24,
    "c": 11,
    "d": 28,
    "e": 26,
    "f": 10,
    "g": 5,
    "h": 3,
    "i": 12,
    "j": 29,
}
"""Each guarantee's number in docs/security.md, the one numbering the docs use."""

NA: dict[tuple[str, str], str] = {}
"""(guarantee, path) -> why the path cannot express it ("not applicable: ...")."""

XFAIL: dict[tuple[str, str], str] = {}
"""(guarantee, path) -> the product defect that makes the cell fail, in one sentence."""

NA[("d", "decorator")] = (
    "not applicable: `allow_once` is one person's grant, so a quorum tool refuses it with"
    " QuorumReviewerError; votes need a Runner or ReviewedChat"
)
NA[("h", "decorator")] = (
    "not applicable: a direct call has no thread or review: `allow_once(exc.call)` covers"
    " exactly the call that raised, which guarantees 1 and 10 check"
)
NA[("h", "openai_agents")] = (
    "not applicable: decisions are applied to one RunState, which holds its own calls; a"
    " decision list carries no thread or review id that could name another run"
)
for _langchain in ["langchain_tools", "langchain_middleware", "langchain_hitl"]:
    NA[("h", _langchain)] = (
        "not applicable: a resume value carries no review id; LangGraph routes it to the"
        " interrupt pending in the thread its config names"
    )
NA[("j", "decorator")] = (
    "not applicable: a directly called function has no judge option; a judge belongs to a"
    " Runner or ReviewedChat, and `guard()` refuses either of them (or a Judge) with a TypeError"
)
for _framework in [
    "pydantic_ai",
    "openai_agents",
    "langchain_tools",
    "langchain_middleware",
    "pydantic_ai_mcp",
]:
    NA[("j", _framework)] = (
        "not applicable: the framework runs the turn and the integration takes tools, with no"
        " judge option; given a Runner, a ReviewedChat or a Judge it raises an"
        " UnsupportedPolicyError (a ToolguardError and a TypeError) naming the judge, so a judge is"
        " never silently dropped"
    )
NA[("j", "langchain_hitl")] = (
    "not applicable: LangChain runs the turn, so the drop-in HumanInTheLoopMiddleware has no"
    " judge; given judge= it raises an UnsupportedPolicyError (a ToolguardError and a"
    " TypeError) naming the judge, so a judge is never silently dropped"
)
NA[("d", "mcp_proxy")] = NA[("d", "mcp_proxy_http")] = NA[("d", "mcp_proxy_url")] = (
    "not applicable: the gateway has no option giving an upstream tool a quorum"
)


def cell(guarantee: str, path: str) -> str:
    """The documented state of one cell: ``holds``, ``n/a: ...`` or ``defect: ...``."""
    if (guarantee, path) in NA:
        return "n/a: " + NA[(guarantee, path)].removeprefix("not applicable: ")
    if (guarantee, path) in XFAIL:
        return "defect: " + XFAIL[(guarantee, path)]
    return "holds"


def params(guarantee: str) -> list[Any]:
    marks: dict[str, list[Any]] = {}
    for path in ADAPTERS:
        if (guarantee, path) in XFAIL:
            marks[path] = [pytest.mark.xfail(strict=True, reason=XFAIL[(guarantee, path)])]
    return [pytest.param(path, marks=marks.get(path, []), id=path) for path in ADAPTERS]


def adapter(guarantee: str, path: str, tmp_path: Path, index: int = 0) -> Adapter:
    if (guarantee, path) in NA:
        pytest.skip(NA[(guarantee, path)])
    folder = tmp_path / f"{path}-{index}"
    folder.mkdir()
    return ADAPTERS[path](folder)


def review(
    name: str,
    args: dict[str, Any],
    *,
    quorum: dict[str, Any] | None = None,
    judge: str | None = None,
) -> Paused:
    """The ``pending_review`` of one call, as every path must show it (``judge``: its line)."""
    config: dict[str, Any] = {
        "action_name": name,
        "allowed_decisions": ["approve", "edit", "reject"],
    }
    if quorum is not None:
        config["approvals"] = quorum
    description = f"Tool `{name}` is awaiting approval"
    if judge is not None:
        description += f" | {judge}"
    return Paused(
        {
            "action_requests": [{"name": name, "args": args, "description": description}],
            "review_configs": [config],
        }
    )


def expect(table: dict[str, Any], path: str, actual: Any) -> None:
    """``actual`` equals the path's expected value in ``table``."""
    if path not in table:
        pytest.fail(f"no expected value for {path}: {actual!r}")
    assert actual == table[path]


def refusal(outcome: Outcome) -> str:
    """The text of a refusal (any path's error type), or a failure naming what came instead."""
    assert isinstance(outcome, Refused), outcome
    return outcome.text


APPROVE = {"type": "approve"}
A = {"path": "/srv/a"}
B = {"path": "/srv/b"}
MAIL = {"to": "bob@example.com", "body": "hi"}
EVIL = {"to": "eve@evil.example", "body": "hi"}
DENIED = (
    'The call to `send_email` is denied by the rule `deny send_email(to="*@evil.example")`.'
    " It was not executed."
)
INVALID_TO = "Invalid arguments for tool `send_email`: 'to': Input should be a valid string"
WRONG_COUNT = "Expected 1 decision (one per action), got 2"
WRONG_COUNTS: dict[str, str] = {}
"""A path's own text for a wrong number of decisions (default :data:`WRONG_COUNT`)."""


# ---------------------------------------------------------------------------- (a)


@pytest.mark.parametrize("path", params("a"))
async def test_a_guarded_body_never_runs_unapproved(path: str, tmp_path: Path) -> None:
    """Paused, after a refused decision list and after a reject: the body never ran."""
    async with adapter("a", path, tmp_path).session() as p:
        assert await p.propose("delete_file", A) == review("delete_file", A)
        assert p.effects == []
        assert refusal(await p.decide([APPROVE, APPROVE])) == WRONG_COUNTS.get(path, WRONG_COUNT)
        assert p.effects == []
        outcome = await p.decide([{"type": "reject", "message": "not this one"}])
        expect(REJECTED, path, outcome)
        assert p.effects == []


REJECTED: dict[str, Outcome] = {
    "decorator": Ran(error=True, text="not this one"),
    "runner": Ran(error=True, text="not this one"),
    "chat": Ran(error=True, text="Rejected by the reviewer, not executed: not this one"),
}


# ---------------------------------------------------------------------------- (b)


@pytest.mark.parametrize("path", params("b"))
async def test_b_a_deny_rule_is_absolute(path: str, tmp_path: Path) -> None:
    """Denied at call time (an error result, nobody asked) and when the approval arrives."""
    async with adapter("b", path, tmp_path).session(rules=DENY) as p:
        expect(DENIED_AT, path, await p.propose("send_email", EVIL))
        assert p.effects == []
    async with adapter("b", path, tmp_path, 1).session() as p:
        assert await p.propose("send_email", EVIL) == review("send_email", EVIL)
        await p.reopen(rules=DENY)  # a deny rule added while the review waited
        expect(DENIED_LATER, path, await p.decide([APPROVE]))
        assert p.effects == []


DENIED_AT: dict[str, Outcome] = {
    "decorator": Ran(error=True, text=DENIED),
    "runner": Ran(error=True, text=DENIED),
    "chat": Ran(error=True, text=f"Denied by a rule, not executed: {DENIED}"),
}
DENIED_LATER: dict[str, Outcome] = dict(DENIED_AT)


# ---------------------------------------------------------------------------- (c)


@pytest.mark.parametrize("path", params("c"))
async def test_c_an_edit_is_checked_again(path: str, tmp_path: Path) -> None:
    """An edit to denied arguments or to arguments that break the schema runs nothing."""
    async with adapter("c", path, tmp_path).session(rules=DENY) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        edit = {"type": "edit", "edited_action": {"name": "send_email", "args": EVIL}}
        expect(EDIT_DENIED, path, await p.decide([edit]))
        assert p.effects == []
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        bad = {"type": "edit", "edited_action": {"name": "send_email", "args": {**MAIL, "to": 7}}}
        expect(EDIT_INVALID, path, await p.decide([bad]))
        assert p.effects == []


EDIT_DENIED: dict[str, Outcome] = {
    "decorator": Ran(error=True, text=DENIED),
    "runner": Ran(error=True, text=DENIED),
    "chat": Ran(error=True, text=f"Denied by a rule, not executed: {DENIED}"),
}
EDIT_INVALID: dict[str, Outcome] = {
    "decorator": review("send_email", {**MAIL, "to": 7}),  # not the approved call: asked again
    "runner": Ran(error=True, text=INVALID_TO),
    "chat": Ran(error=True, text=f"Error, not executed: {INVALID_TO}"),
}


# ---------------------------------------------------------------------------- (d)


@pytest.mark.parametrize("path", params("d"))
async def test_d_a_quorum_needs_two_distinct_named_reviewers(path: str, tmp_path: Path) -> None:
    """Anonymous, repeated and invisibly different ids are refused; two people run it once."""
    args = {"amount": 900, "to": "ACME"}
    quorum = {"required": 2, "given": 0, "by": []}
    async with adapter("d", path, tmp_path).session() as p:
        assert await p.propose("wire_transfer", args) == review(
            "wire_transfer", args, quorum=quorum
        )
        assert refusal(await p.decide([APPROVE])) == (
            "Action 'wire_transfer' needs approvals from 2 distinct, named reviewers: an anonymous"
            " reviewer cannot approve or edit it. Nothing was changed."
        )
        quorum = {"required": 2, "given": 1, "by": ["alice"]}
        assert await p.decide([APPROVE], reviewer="alice") == review(
            "wire_transfer", args, quorum=quorum
        )
        # the same person: repeated, case-folded, fullwidth, or with a character drawn as nothing
        for same in [
            "alice",
            "ALICE\u200b",
            "alice\ufe0f",
            "alice\u034f",
            "alice\u3164",
            "alice\u2800",
            "\uff41\uff4c\uff49\uff43\uff45",
        ]:
            assert refusal(await p.decide([APPROVE], reviewer=same)) == (
                f"Reviewer {same!r} already approved action 'wire_transfer' (1 of 2 approvals);"
                " another reviewer must approve it. Nothing was changed."
            )
        assert p.effects == []
        expect(QUORUM_RAN, path, await p.decide([APPROVE], reviewer="bob"))
        assert p.effects == [("wire_transfer", args)]


QUORUM_RAN: dict[str, Outcome] = {
    path: Ran(error=False, text="sent 900 to ACME") for path in ADAPTERS
}


# ---------------------------------------------------------------------------- (e)


@pytest.mark.parametrize("path", params("e"))
async def test_e_no_secret_in_any_text(path: str, tmp_path: Path) -> None:
    """Payloads, results, validation errors and the audit never carry the secret, in any form."""
    args = {"user": "ann", "password": SECRET, "port": 993}
    async with adapter("e", path, tmp_path).session() as p:
        shown = {**args, "password": REDACTED}
        assert await p.propose("login", args) == review("login", shown)
        expect(SECRET_RAN, path, await p.decide([APPROVE]))
        assert p.effects == [("login", args)]  # the tool got the real value
        invalid = await p.propose("login", {**args, "port": "x"})
        missing = await p.propose("login", {"user": "ann", "password": SECRET})
        expect(SECRET_INVALID, path, (invalid, missing))
        texts = await p.texts()
    leaks = sorted({form for form in secret_spellings(SECRET) for text in texts if form in text})
    assert leaks == []
    assert p.effects == [("login", args)]


PORT_INVALID = (
    "Invalid arguments for tool `login`: 'port': Input should be a valid integer,"
    " unable to parse string as an integer"
)
PORT_MISSING = "Invalid arguments for tool `login`: 'port': Field required"
SECRET_RAN: dict[str, Outcome] = {
    path: Ran(error=False, text=f"logged in as ann with {REDACTED} on 993") for path in ADAPTERS
}
# a direct call returns the tool's own value to its caller; toolguard writes nothing there
SECRET_RAN["decorator"] = Ran(error=False, text=f"logged in as ann with {SECRET} on 993")
SECRET_INVALID: dict[str, tuple[Outcome, Outcome]] = {
    "decorator": (
        review("login", {"user": "ann", "password": REDACTED, "port": "x"}),
        Ran(
            error=True,
            text="python_tools.<locals>.login() missing 1 required positional argument: 'port'",
        ),
    ),
    "runner": (Ran(error=True, text=PORT_INVALID), Ran(error=True, text=PORT_MISSING)),
    "chat": (
        Ran(error=True, text=f"Error, not executed: {PORT_INVALID}"),
        Ran(error=True, text=f"Error, not executed: {PORT_MISSING}"),
    ),
}


# ---------------------------------------------------------------------------- (f)


@pytest.mark.parametrize("path", params("f"))
async def test_f_an_approved_call_runs_once(path: str, tmp_path: Path) -> None:
    """The same approval applied twice (two components sharing the store) runs the body once."""
    async with adapter("f", path, tmp_path).session() as p:
        assert await p.propose("delete_file", A) == review("delete_file", A)
        outcomes = sorted(await p.decide_twice([APPROVE]), key=repr)
        assert p.effects == [("delete_file", A)]
        if path in DURING and outcomes == DURING[path]:
            return  # the second request came while the first was being applied: busy, not stale
        expect(TWICE, path, outcomes)


STALE = (
    "The review <id> is no longer current in this conversation. Load the thread and decide on"
    " its current review."
)
ALREADY = "The paused turn <id> was already resumed or closed; its tools are not run again."
TWICE: dict[str, list[Outcome]] = {
    "decorator": [
        Ran(error=False, text="deleted /srv/a"),
        Refused("ApprovalRequiredError", "Tool `delete_file` is awaiting approval"),
    ],
    "runner": [Ran(error=False, text="deleted /srv/a"), Refused("AlreadyResumedError", ALREADY)],
    "chat": [Ran(error=False, text="deleted /srv/a"), Refused("StaleReviewError", STALE)],
}


# ---------------------------------------------------------------------------- (g)


@pytest.mark.parametrize("path", params("g"))
async def test_g_past_its_deadline_a_review_runs_nothing(path: str, tmp_path: Path) -> None:
    """An approval that arrives at the deadline is refused (or ends expired): nothing runs."""
    async with adapter("g", path, tmp_path).session(ttl=TTL) as p:
        assert await p.propose("delete_file", A) == review("delete_file", A)
        await p.advance(TTL)
        outcome = await p.decide([APPROVE])
        assert p.effects == []
        expect(EXPIRED, path, outcome)


EXPIRED_TEXT = (
    "The review <id> expired before a decision arrived. Its actions were not executed;"
    " send a new message to continue."
)
EXPIRED: dict[str, Outcome] = {
    "decorator": Refused(
        "ReviewExpiredError",
        "The approval of `delete_file` came after its deadline (0.2 s after the call asked"
        " for it): it was not executed. Call the tool again to ask for a new approval.",
    ),
    "runner": Ran(
        error=True,
        text=(
            "The review of this action expired before the approved call could start."
            " It was not executed."
        ),
    ),
    "chat": Refused("ReviewExpiredError", EXPIRED_TEXT),
}


# ---------------------------------------------------------------------------- (h)


@pytest.mark.parametrize("path", params("h"))
async def test_h_a_decision_is_bound_to_its_thread_and_review(path: str, tmp_path: Path) -> None:
    """Decisions sent bound to another open review run nothing; that review stays answerable."""
    async with adapter("h", path, tmp_path).session() as p:
        assert await p.propose("delete_file", A) == review("delete_file", A)
        assert await p.propose("delete_file", B) == review("delete_file", B)
        before = await p.snapshot()
        outcome = await p.decide_foreign([APPROVE])
        assert p.effects == []
        expect(FOREIGN, path, outcome)
        if isinstance(outcome, Refused):
            assert await p.snapshot() == before
        after = await p.decide([APPROVE])
        expect(FOREIGN_AFTER, path, (after, p.effects))


TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
UNKNOWN_REVIEW = (
    "The review <id> is unknown in this conversation: it was never one of its reviews."
    " Load the thread and decide on its current review."
)
FOREIGN: dict[str, Outcome] = {
    "runner": Ran(error=True, text=TAMPERED),
    "chat": Refused("UnknownReviewError", UNKNOWN_REVIEW),
}
FOREIGN_AFTER: dict[str, tuple[Outcome, Any]] = {
    # the runner's turn B is spent (resumed under the wrong thread): turn A is next
    "runner": (Ran(error=False, text="deleted /srv/a"), [("delete_file", A)]),
    "chat": (Ran(error=False, text="deleted /srv/b"), [("delete_file", B)]),
}


# ---------------------------------------------------------------------------- (i)

INVALID: list[tuple[Any, str]] = [
    ([APPROVE, APPROVE], WRONG_COUNT),
    (
        [{"type": "postpone"}],
        "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
    ),
    ([{"type": "edit"}], "An 'edit' decision must include 'edited_action'"),
]


@pytest.mark.parametrize("path", params("i"))
async def test_i_refused_decisions_change_nothing(path: str, tmp_path: Path) -> None:
    """Each invalid list is refused with its text; state and audit stay; a valid one then runs."""
    async with adapter("i", path, tmp_path).session() as p:
        assert await p.propose("delete_file", A) == review("delete_file", A)
        before = await p.snapshot()
        texts_before = await p.texts()
        for decisions, text in [*INVALID_BY_PATH.get(path, INVALID), *OTHER_TOOL.get(path, [])]:
            assert refusal(await p.decide(decisions)) == text
            assert await p.snapshot() == before
        assert p.effects == []
        assert [t for t in await p.texts() if t not in p.written] == [
            t for t in texts_before if t not in p.written
        ]
        assert await p.decide([APPROVE]) == Ran(error=False, text="deleted /srv/a")
        assert p.effects == [("delete_file", A)]


OTHER_TOOL: dict[str, list[tuple[Any, str]]] = {}
INVALID_BY_PATH: dict[str, list[tuple[Any, str]]] = {
    # the HTTP body model refuses an unknown type before the chat is asked (a 422)
    "http": [
        INVALID[0],
        (
            INVALID[1][0],
            json.dumps(
                [
                    {
                        "type": "literal_error",
                        "loc": ["body", "decisions", 0, "type"],
                        "msg": "Input should be 'approve', 'edit', 'reject' or 'respond'",
                        "input": "postpone",
                        "ctx": {"expected": "'approve', 'edit', 'reject' or 'respond'"},
                    }
                ]
            ),
        ),
        INVALID[2],
    ],
}


def _like_chat(*tables: dict[str, Any]) -> None:
    """The HTTP API answers as the chat it serves; its refusals are HTTP 400s."""

    def http(value: Any) -> Any:
        if isinstance(value, Refused):
            return Refused("HTTP 400", value.text)
        if isinstance(value, list | tuple):
            return type(value)(http(item) for item in value)
        return value

    for table in tables:
        if "chat" in table:
            table.setdefault("http", http(table["chat"]))


def _like_runner(path: str, *tables: dict[str, Any]) -> None:
    """A framework's model reads toolguard's own texts, as the runner's results carry them."""
    for table in tables:
        if "runner" in table:
            table.setdefault(path, table["runner"])


_like_chat(
    REJECTED,
    DENIED_AT,
    DENIED_LATER,
    EDIT_DENIED,
    EDIT_INVALID,
    SECRET_INVALID,
    TWICE,
    EXPIRED,
    FOREIGN,
    FOREIGN_AFTER,
)

for _framework in [
    "pydantic_ai",
    "openai_agents",
    "langchain_tools",
    "langchain_middleware",
    "mcp_toolset",
]:
    _like_runner(
        _framework, REJECTED, DENIED_AT, DENIED_LATER, EDIT_DENIED, EDIT_INVALID, SECRET_INVALID
    )
    TWICE[_framework] = TWICE["runner"]

_tables: list[dict[str, Any]] = [EXPIRED, FOREIGN, FOREIGN_AFTER]
for _table in _tables:
    _table["mcp_toolset"] = _table["runner"]
# A framework's approved call past its deadline, and a Pydantic AI approval resumed with another
# run, give the model the runner's own texts.
_like_runner("pydantic_ai", EXPIRED, FOREIGN)
for _framework in ["openai_agents", "langchain_tools", "langchain_middleware"]:
    _like_runner(_framework, EXPIRED)
# Pydantic AI keeps each paused run in its own stored history: run B is still answerable.
FOREIGN_AFTER["pydantic_ai"] = (Ran(error=False, text="deleted /srv/b"), [("delete_file", B)])
# A Pydantic AI MCPToolset: the Pydantic AI path's answers, its arguments checked by the MCP schema.
for _table in [REJECTED, DENIED_AT, DENIED_LATER, EDIT_DENIED, TWICE, EXPIRED, FOREIGN]:
    _table["pydantic_ai_mcp"] = _table["pydantic_ai"]
FOREIGN_AFTER["pydantic_ai_mcp"] = FOREIGN_AFTER["pydantic_ai"]
EDIT_INVALID["mcp_toolset"] = Ran(
    error=True, text="Invalid arguments for tool `send_email`: 'to': 7 is not of type 'string'"
)
SCHEMA_PORT_INVALID = "Invalid arguments for tool `login`: 'port': 'x' is not of type 'integer'"
SECRET_INVALID["mcp_toolset"] = (
    Ran(error=True, text=SCHEMA_PORT_INVALID),
    Ran(error=True, text="Invalid arguments for tool `login`: 'port': Field required"),
)
EDIT_INVALID["pydantic_ai_mcp"] = EDIT_INVALID["mcp_toolset"]
# LangChain's drop-in: LangChain's texts for what LangChain decides (a wrong count, an unknown
# type, a reject), toolguard's for what toolguard adds (rules, quorum, deadlines, once only);
# arguments are the tool's to check when it runs, as with LangChain's own class.
LANGCHAIN_COUNT = "Number of human decisions (2) does not match number of hanging tool calls (1)."
WRONG_COUNTS["langchain_hitl"] = LANGCHAIN_COUNT
REJECTED["langchain_hitl"] = Ran(
    error=True, text="User rejected the tool call for `delete_file` with reason: not this one"
)
for _table in [DENIED_AT, DENIED_LATER, EDIT_DENIED, EXPIRED]:
    _table["langchain_hitl"] = _table["runner"]
TWICE["langchain_hitl"] = TWICE["runner"]
EDIT_INVALID["langchain_hitl"] = Ran(  # the edit is checked by LangChain's tool, as it runs
    error=True,
    text=(
        "Note: a human reviewer replaced this tool call before it ran. The call recorded in your"
        " message is the one you produced, not the one that executed. This was intentional and"
        " authorized. Do not re-issue your original call. Executed instead: send_email with"
        ' arguments {"to": 7, "body": "hi"}.\n\nTool response:\nError invoking tool'
        " 'send_email' with kwargs {'to': 7, 'body': 'hi'} with error:\n to: Input should be a"
        " valid string\n Please fix the error and try again."
    ),
)
SECRET_INVALID["langchain_hitl"] = (
    review("login", {"user": "ann", "password": REDACTED, "port": "x"}),
    review("login", {"user": "ann", "password": REDACTED}),
)
INVALID_BY_PATH["langchain_hitl"] = [
    (INVALID[0][0], LANGCHAIN_COUNT),
    (
        INVALID[1][0],
        (
            "Unexpected human decision: {'type': 'postpone'}. Decision type 'postpone' is not"
            " allowed for tool 'delete_file'. Expected one of ['approve', 'edit', 'reject']"
            " based on the tool's configuration."
        ),
    ),
    INVALID[2],
]
SECRET_INVALID["pydantic_ai_mcp"] = SECRET_INVALID["mcp_toolset"]

REJECTED["mcp_proxy"] = REJECTED["runner"]
DENIED_AT["mcp_proxy"] = DENIED_LATER["mcp_proxy"] = DENIED_AT["runner"]
SECRET_INVALID["mcp_proxy"] = (
    Ran(error=True, text=f"Error, not executed: {SCHEMA_PORT_INVALID}"),
    Ran(
        error=True,
        text="Error, not executed: Invalid arguments for tool `login`: 'port': Field required",
    ),
)
TWICE["mcp_proxy"] = TWICE["http"]
DURING: dict[str, list[Outcome]] = {
    path: [
        TWICE["http"][0],
        Refused(
            "HTTP 409",
            "Decisions are being applied in conversation '<id>'. Try again shortly; if this goes"
            " on, the server's operator must recover this thread.",
        ),
    ]
    for path in ["http", "mcp_proxy", "mcp_proxy_http", "mcp_proxy_url"]
}
"""Over HTTP, a request racing another may also be refused as busy (409) rather than stale."""
EXPIRED["mcp_proxy"] = Refused("HTTP 400", STALE)  # the call was answered "expired" at the deadline
FOREIGN["mcp_proxy"] = FOREIGN["http"]
FOREIGN_AFTER["mcp_proxy"] = FOREIGN_AFTER["http"]
INVALID_BY_PATH["mcp_proxy"] = INVALID_BY_PATH["http"]
EDIT_DENIED["mcp_proxy"] = Ran(error=True, text=DENIED)
EDIT_INVALID["mcp_proxy"] = Ran(
    error=True, text="Invalid arguments for tool `send_email`: 'to': 7 is not of type 'string'"
)
# The gateway answers alike whichever transport its client speaks (stdio or --listen's HTTP).
_gateway_tables: list[dict[str, Any]] = [
    REJECTED, DENIED_AT, DENIED_LATER, EDIT_DENIED, EDIT_INVALID, SECRET_INVALID, SECRET_RAN,
    TWICE, EXPIRED, FOREIGN, FOREIGN_AFTER, INVALID_BY_PATH, QUORUM_RAN,
]  # fmt: skip
for _by_path in _gateway_tables:
    if "mcp_proxy" in _by_path:
        _by_path["mcp_proxy_http"] = _by_path["mcp_proxy_url"] = _by_path["mcp_proxy"]


# The Vercel AI SDK path (useChat's UI message stream): the chat's answers, its refusals as an
# `error` part with the chat's own text; approval responses carry approve and deny only.
def _as_error_part(value: Any) -> Any:
    if isinstance(value, Refused):
        return Refused("error part", value.text)
    if isinstance(value, list | tuple):
        return type(value)(_as_error_part(item) for item in value)
    return value


for _by_path in [
    REJECTED, DENIED_AT, DENIED_LATER, SECRET_INVALID, TWICE, EXPIRED, FOREIGN, FOREIGN_AFTER,
]:  # fmt: skip
    _by_path["ai_sdk"] = _as_error_part(_by_path["chat"])
DURING["ai_sdk"] = [TWICE["ai_sdk"][0], Refused("error part", DURING["http"][1].text)]
NA[("c", "ai_sdk")] = (
    "not applicable: an approval response carries approved and a reason only, so an edit is"
    " made on the approval page each approval request links (`reviewUrl`: the HTTP API's"
    " cell); an approval that carries an edit is refused with an error part"
)
_TWICE_ANSWERED = "The approval '<id>.<id>' is answered twice. Nothing was changed."
WRONG_COUNTS["ai_sdk"] = _TWICE_ANSWERED
INVALID_BY_PATH["ai_sdk"] = [
    ([APPROVE, APPROVE], _TWICE_ANSWERED),
    (
        [{"type": "approve", "approval_id": "f" * 32}],
        (
            "The approval '<id>' is not a call awaiting review in this conversation. Nothing was"
            " changed."
        ),
    ),
    (
        [{"type": "approve", "approved": "yes"}],
        (
            "The approval response of the tool call 'c1' is malformed: it needs approval.id"
            " (text) and approval.approved (true or false), and approval.reason must be text if"
            " given."
        ),
    ),
    (
        [{"type": "approve", "tool_call_id": "c9"}],
        "The approval '<id>.<id>' belongs to another tool call than 'c9'. Nothing was changed.",
    ),
]


# The AG-UI path (a run's resume): the chat's answers, and its refusals as a RUN_ERROR whose code
# is the error's class name; a resume entry carries approve, edit (of the same tool) and reject.
for _by_path in [
    REJECTED, DENIED_AT, DENIED_LATER, EDIT_DENIED, EDIT_INVALID, SECRET_INVALID, TWICE, EXPIRED,
    FOREIGN, FOREIGN_AFTER,
]:  # fmt: skip
    _by_path["ag_ui"] = _by_path["chat"]
DURING["ag_ui"] = [TWICE["ag_ui"][0], Refused("ThreadBusyError", DURING["http"][1].text)]
_AG_UI_TWICE = "The interrupt '<id>.<id>' is answered twice. Nothing was changed."
WRONG_COUNTS["ag_ui"] = _AG_UI_TWICE
INVALID_BY_PATH["ag_ui"] = [
    ([APPROVE, APPROVE], _AG_UI_TWICE),
    (
        [{"type": "approve", "interrupt_id": "<review>.f"}],
        "The interrupt '<id>.f' is not awaiting an answer in this run. Nothing was changed.",
    ),
    (
        [{"type": "approve", "payload": {"approved": "yes"}}],
        (
            "The answer to the interrupt '<id>.<id>' is malformed: a resolved interrupt's payload"
            " is {approved: true or false, editedArgs?: object, reason?: text}, and editedArgs"
            " goes with approved: true. Nothing was changed."
        ),
    ),
    (
        [{"type": "approve", "status": "resolved", "payload": {"approved": True, "votes": 2}}],
        (
            "The answer to the interrupt '<id>.<id>' carries 'votes': a resume carries approved,"
            " editedArgs and reason only; standing grants are made on the approval page. Nothing"
            " was changed."
        ),
    ),
]


# The Slack path (a review's Approve / Reject buttons): the chat's answers, its refusals the
# reply Slack shows only to the person who clicked, with the chat's own text; a button approves
# or rejects a whole review, so the adapter itself refuses what no button sends.
def _as_slack_reply(value: Any) -> Any:
    if isinstance(value, Refused):
        return Refused(SLACK_REPLY, value.text)
    if isinstance(value, list | tuple):
        return type(value)(_as_slack_reply(item) for item in value)
    return value


for _by_path in [
    REJECTED, DENIED_AT, DENIED_LATER, SECRET_INVALID, TWICE, EXPIRED, FOREIGN, FOREIGN_AFTER,
]:  # fmt: skip
    _by_path["slack"] = _as_slack_reply(_by_path["chat"])
WRONG_COUNTS["slack"] = SLACK_ON_THE_PAGE
INVALID_BY_PATH["slack"] = [(decisions, SLACK_ON_THE_PAGE) for decisions, _ in INVALID]
NA[("c", "slack")] = (
    "not applicable: Slack's buttons approve or reject a whole review; an edit is made on the"
    " page the message links (the HTTP API's cell), and the adapter sends none"
)
NA[("d", "slack")] = (
    "not applicable: every Slack click comes from a person the [slack] table names, so an"
    " anonymous approval cannot be sent; two Slack users' approvals of a quorum tool count once"
    " each and run it once, through the same quorum as the HTTP API's cell"
)

# ---------------------------------------------------------------------------- (j)

C = {"path": "/srv/c"}
ASK_MAIL = Rules(deny=['send_email(to="*@evil.example")'], ask=['send_email(to="bob@*")'])
"""The deny rule of (b) and an ask rule on the mail to Bob."""


def verdict(risk: str, authorized: bool, outcome: str, rationale: str) -> str:
    """A judge model's reply text: one JSON object."""
    reply = {"risk": risk, "user_authorized": authorized, "outcome": outcome}
    return json.dumps({**reply, "rationale": rationale})


ALLOW_WHY = "The person asked for exactly this."
ASK_WHY = "Nobody asked to delete this."
ALLOW = verdict("low", True, "allow", ALLOW_WHY)
ASK = verdict("high", False, "ask", ASK_WHY)


def judge_answer(document: dict[str, Any]) -> str:
    """The judge model of (j): cannot decide on /srv/a, asks on /srv/c, allows all else."""
    arguments = document["proposed_call"]["arguments"]
    if arguments == A:
        return "Looks fine to me, go ahead."  # not JSON: the judge could not decide
    return ASK if arguments == C else ALLOW


@pytest.mark.parametrize("path", params("j"))
async def test_j_a_judge_never_rejects_and_fails_closed(path: str, tmp_path: Path) -> None:
    """An auto-approving judge: a deny rule refuses unasked; a reply that is not JSON and an
    'ask' each leave the call to a person (who alone decides it); its 'allow' runs neither a
    quorum tool nor an ask-ruled call, but does run a plain guarded call."""
    judging = Judging(judge_answer, auto_approve=True)
    gateway = path in ("mcp_proxy", "mcp_proxy_http", "mcp_proxy_url")
    name = JUDGE_MODEL if gateway else "ScriptedModel"
    allowed = f"Judge ({name}): low risk, the user asked for it. {ALLOW_WHY}"
    async with adapter("j", path, tmp_path).session(rules=ASK_MAIL, judge=judging) as p:
        expect(DENIED_AT, path, await p.propose("send_email", EVIL))
        assert p.judge_calls() == 0  # refused before any judge was asked

        cannot = f"Judge ({name}) could not decide: its reply was not one JSON object"
        assert await p.propose("delete_file", A) == review("delete_file", A, judge=cannot)
        assert p.effects == []
        assert await p.decide([APPROVE]) == Ran(error=False, text="deleted /srv/a")

        asks = f"Judge ({name}): high risk, the user did not ask for it. {ASK_WHY}"
        assert await p.propose("delete_file", C) == review("delete_file", C, judge=asks)
        expect(REJECTED, path, await p.decide([{"type": "reject", "message": "not this one"}]))

        if not gateway:  # the gateway gives no upstream tool a quorum: see (d)
            transfer = {"amount": 900, "to": "ACME"}
            quorum = {"required": 2, "given": 0, "by": []}
            assert await p.propose("wire_transfer", transfer) == review(
                "wire_transfer", transfer, quorum=quorum, judge=allowed
            )
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL, judge=allowed)
        assert p.effects == [("delete_file", A)]

        assert await p.propose("delete_file", B) == Ran(error=False, text="deleted /srv/b")
        assert p.effects == [("delete_file", A), ("delete_file", B)]
        assert p.judge_calls() == (4 if gateway else 5)  # one verdict per call


# ---------------------------------------------------------------------------- the documented matrix

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def matrix_markdown() -> str:
    """The table of docs/security.md's "The conformance matrix", rendered from :data:`NA` and
    :data:`XFAIL`: one row per path, one column per guarantee, numbered notes below."""
    notes: list[str] = []
    columns = sorted(GUARANTEES, key=NUMBERS.__getitem__)
    header = "| path | " + " | ".join(str(NUMBERS[g]) for g in columns) + " |"
    lines = [header, "| --- |" + " --- |" * len(columns)]
    for name, path in ADAPTERS.items():
        row = []
        for guarantee in columns:
            state = cell(guarantee, name)
            if state == "holds":
                row.append("holds")
                continue
            kind, _, reason = state.partition(": ")
            notes.append(
                f"{len(notes) + 1}. Guarantee {NUMBERS[guarantee]} on {path.title}: {reason}."
            )
            row.append(f"{kind} [{len(notes)}]")
        lines.append(f"| {path.title} | " + " | ".join(row) + " |")
    legend = [f"- {NUMBERS[g]}: {GUARANTEES[g]}" for g in columns]
    return "\n".join([*legend, "", *lines, "", *notes]) + "\n"


def test_each_guarantee_has_its_number_on_the_security_page() -> None:
    """The matrix names the guarantees by their numbers on docs/security.md, the only ones."""
    headings = re.findall(r"^### (\d+)\. (.+)$", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    numbered = {int(number) for number, _ in headings}
    assert sorted(NUMBERS.values()) == sorted(set(NUMBERS.values()))
    assert set(NUMBERS.values()) <= numbered
    assert set(NUMBERS) == set(GUARANTEES)


def test_the_documented_matrix_is_this_one() -> None:
    """docs/security.md shows exactly the matrix these tests run (cells, n/a and defects)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- conformance matrix: begin -->\n") + len(
        "<!-- conformance matrix: begin -->\n"
    )
    end = text.index("<!-- conformance matrix: end -->")
    assert text[start:end].strip() == matrix_markdown().strip()
