"""The conformance matrix's third axis: every kind of decision, on every path.

Each kind of decision a person (or a judge) can make passes the same gate: an
approve runs the reviewed call once; an edit is a new proposal by its editor
(decided afresh: a rename into an ask-ruled tool, a tool other people decide,
a quorum tool or a denied call never runs on the editor's word); a reject runs
nothing; a standing grant is kept where a conversation keeps it and refused
loudly elsewhere; a judge's auto-approval runs one call once and never the
same call twice. :data:`DECISION_CELLS` is the table docs/security.md shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolguard import Rules
from toolguard.http import Reviewers

from .paths import ADAPTERS, JUDGE_MODEL, Adapter, Judging, Outcome, Paused, Ran, Refused
from .paths_slack import ON_THE_PAGE as SLACK_ON_THE_PAGE
from .shadow_case import NA as SHADOW_NA
from .shadow_case import SHADOW_KIND, shadow_case
from .test_matrix import ALLOW, ALLOW_WHY, APPROVE, MAIL, REJECTED, review

KINDS: dict[str, str] = {
    "approve": "approve",
    "edit": "edit that keeps the tool",
    "edit-ask": "edit that renames it into an ask-ruled tool",
    "edit-others": "edit that renames it into a tool of other reviewers",
    "edit-quorum": "edit that renames it into a quorum tool",
    "edit-denied": "edit that renames it into a denied call",
    "reject": "reject",
    "grant": "approve with a standing grant",
    "judge": "a judge's auto-approval",
    "shadow": SHADOW_KIND,
}

FRAMEWORKS = ["pydantic_ai", "openai_agents", "langchain_tools", "langchain_middleware"]
FRAMEWORKS_MCP = [*FRAMEWORKS, "pydantic_ai_mcp"]
GATEWAY = ["mcp_proxy", "mcp_proxy_http", "mcp_proxy_url"]
WITH_REVIEWERS = ["chat", "http", *GATEWAY, "langchain_hitl"]

NA: dict[tuple[str, str], str] = {}
for _path in ADAPTERS:
    if _path not in WITH_REVIEWERS:
        NA[("edit-others", _path)] = (
            "not applicable: the path takes no reviewer list; who decides is whoever holds the"
            " paused state, and the edit's new call is decided afresh as in the other cells"
        )
for _path in FRAMEWORKS_MCP:
    NA[("judge", _path)] = (
        "not applicable: the framework runs the turn and the integration takes no judge (it"
        " refuses a Judge, Runner or ReviewedChat with UnsupportedPolicyError)"
    )
NA[("judge", "langchain_hitl")] = (
    "not applicable: LangChain runs the turn, so the drop-in middleware has no judge (given"
    " judge= it raises UnsupportedPolicyError)"
)
NA[("judge", "decorator")] = (
    "not applicable: a directly called function has no judge option (guard() refuses one)"
)
NA[("judge", "mcp_toolset")] = NA[("judge", "decorator")].replace(
    "a directly called function has", "the MCP toolset's tools, run by a Runner, are given"
)
NA[("grant", "decorator")] = (
    "not applicable: a direct call's approval is `allow_once(call)`, which takes no decision;"
    " grants belong to ReviewedChat"
)
NA[("edit-quorum", "decorator")] = (
    "not applicable: `allow_once` is one person's grant, so a quorum tool refuses it (guarantee 28)"
)
for _path in GATEWAY:
    NA[("edit-quorum", _path)] = (
        "not applicable: the gateway has no option giving an upstream tool a quorum"
        " (guarantee 28); a rename into another reviewer's tool is the edit-others cell"
    )


def cell(kind: str, path: str) -> str:
    if (kind, path) in NA:
        if NA[(kind, path)].startswith("refused loudly: "):  # run: the case checks the refusal
            return "refused: " + NA[(kind, path)].removeprefix("refused loudly: ")
        return "n/a: " + NA[(kind, path)].removeprefix("not applicable: ")
    return "holds"


def adapter(kind: str, path: str, tmp_path: Path, index: int = 0) -> Adapter:
    if (kind, path) in NA:
        pytest.skip(NA[(kind, path)])
    folder = tmp_path / f"{path}-{kind}-{index}"
    folder.mkdir()
    return ADAPTERS[path](folder)


def params() -> list[Any]:
    return [pytest.param(kind, path, id=f"{kind}-{path}") for kind in KINDS for path in ADAPTERS]


def expect(table: dict[str, Any], path: str, actual: Any) -> None:
    if path not in table:
        pytest.fail(f"no expected value for {path}: {actual!r}")
    assert actual == table[path]


def edit(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


RULES = Rules(deny=['send_email(to="*@evil.example")'], ask=["search_contacts"])
"""A deny rule on mail to evil.example and an ask rule on a tool with no policy of its own."""

REVIEWERS = Reviewers(
    {
        "send_email": ["eve"],
        "search_contacts": ["alice"],
        "wire_transfer": ["alice", "bob"],
        "*": ["admin"],
    }
)
"""eve decides mail only; alice decides the contacts; a transfer is alice's and bob's."""

STAR = {"query": "*"}
PAY = {"amount": 9999, "to": "eve-acct"}
EVIL = {"to": "x@evil.example", "body": "hi"}
CAROL = {"to": "carol@example.com", "body": "hi"}
DENIED = (
    'The call to `send_email` is denied by the rule `deny send_email(to="*@evil.example")`.'
    " It was not executed."
)


def renamed(name: str, other: str, framework: str) -> Refused:
    """A framework's refusal of an edit that switches tools."""
    return Refused(
        "InvalidReviewDecisionError",
        f"An edit cannot switch `{name}` to another tool (`{other}`) in {framework}. Edit the"
        f" arguments of `{name}`, or reject the call.",
    )


def ran(path: str, text: str, edited: tuple[str, dict[str, Any]] | None = None) -> Ran:
    """What the model reads from a call that ran; the reviewer's edit of it on LangChain's
    drop-in puts LangChain's edit notice first (the model's own call stays in the history)."""
    if path != "langchain_hitl" or edited is None:
        return Ran(False, text)
    from toolguard.integrations.langchain import EDIT_NOTICE

    name, args = edited
    return Ran(
        False,
        f"{EDIT_NOTICE} Executed instead: {name} with arguments {json.dumps(args)}.\n\n"
        f"Tool response:\n{text}",
    )


def by_framework(other: str, name: str = "send_email") -> dict[str, Outcome]:
    """How the frameworks answer a rename: refused, or (LangChain's tools) an error result;
    LangChain's middleware runs the new call through its own tool, which asks again."""
    names = {
        "pydantic_ai": "Pydantic AI",
        "pydantic_ai_mcp": "Pydantic AI",
        "openai_agents": "the OpenAI Agents SDK",
    }
    answers: dict[str, Outcome] = {
        path: renamed(name, other, framework) for path, framework in names.items()
    }
    answers["langchain_tools"] = Ran(
        True,
        f"The reviewer's edit names the tool `{other}`, but only `{name}` can run here: edit"
        " the arguments, not the tool. It was not executed.",
    )
    return answers


# ---------------------------------------------------------------------------- the cells


@pytest.mark.parametrize(("kind", "path"), params())
async def test_every_decision_passes_the_same_gate(kind: str, path: str, tmp_path: Path) -> None:
    await CASES[kind](path, tmp_path)


async def approve_case(path: str, tmp_path: Path) -> None:
    async with adapter("approve", path, tmp_path).session(rules=RULES) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        assert await p.decide([APPROVE], reviewer="eve") == Ran(False, "sent to bob@example.com")
        assert p.effects == [("send_email", MAIL)]


async def edit_case(path: str, tmp_path: Path) -> None:
    async with adapter("edit", path, tmp_path).session(rules=RULES) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([edit("send_email", CAROL)], reviewer="eve")
        expect(EDIT_RAN, path, outcome)
        assert p.effects == ([] if isinstance(outcome, Paused) else [("send_email", CAROL)])


EDIT_RAN: dict[str, Outcome] = {
    **{path: Ran(False, "sent to carol@example.com") for path in ADAPTERS},
    # a direct call's edit is another call, which allow_once of the first does not cover
    "decorator": review("send_email", CAROL),
    "langchain_hitl": ran("langchain_hitl", "sent to carol@example.com", ("send_email", CAROL)),
    # LangChain's tool tells the model what ran instead (the model's call stays in the history)
    "langchain_tools": Ran(
        False,
        'A reviewer edited this call; it ran with the arguments {"body": "hi", "to":'
        ' "carol@example.com"}.\n\nsent to carol@example.com',
    ),
}


async def edit_ask_case(path: str, tmp_path: Path) -> None:
    """A rename into a tool an ask rule guards is a new review, never a run on the edit."""
    async with adapter("edit-ask", path, tmp_path).session(rules=RULES) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([edit("search_contacts", STAR)], reviewer="eve")
        assert p.effects == []
        expect(EDIT_ASK, path, outcome)
        if isinstance(outcome, Paused):  # the new review: a person approves, it runs once
            expected = ran(path, "contacts for *", ("search_contacts", STAR))
            assert await p.decide([APPROVE], reviewer="admin") == expected
            assert p.effects == [("search_contacts", STAR)]


EDIT_ASK: dict[str, Outcome] = {
    **{path: review("search_contacts", STAR) for path in ADAPTERS},
    **by_framework("search_contacts"),  # LangChain's middleware: the new call asks again
}


async def edit_others_case(path: str, tmp_path: Path) -> None:
    """eve may decide mail only: her rename into alice's tool waits for alice."""
    session = adapter("edit-others", path, tmp_path).session(rules=RULES, reviewers=REVIEWERS)
    async with session as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([edit("search_contacts", STAR)], reviewer="eve")
        assert outcome == review("search_contacts", STAR)
        assert p.effects == []
        expect(NOT_EVES, path, await p.decide([APPROVE], reviewer="eve"))
        assert p.effects == []
        expected = ran(path, "contacts for *", ("search_contacts", STAR))
        assert await p.decide([APPROVE], reviewer="alice") == expected
        assert p.effects == [("search_contacts", STAR)]


NOT_EVES: dict[str, Outcome] = {
    "chat": Refused(
        "ReviewerNotAllowedError",
        "Reviewer 'eve' may not review conversation '<id>'",
    ),
    "http": Refused("HTTP 403", "Reviewer 'eve' may not review conversation '<id>'"),
    "mcp_proxy": Refused("HTTP 403", "Reviewer 'eve' may not review conversation '<id>'"),
    "langchain_hitl": Refused(  # the LangGraph thread the resume names
        "ReviewerNotAllowedError", "Reviewer 'eve' may not review conversation 't1'"
    ),
}


async def edit_quorum_case(path: str, tmp_path: Path) -> None:
    """A rename into a quorum tool: the editor's vote counts only if the editor may decide it."""
    reviewers = REVIEWERS if path in WITH_REVIEWERS else None
    session = adapter("edit-quorum", path, tmp_path).session(rules=RULES, reviewers=reviewers)
    async with session as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([edit("wire_transfer", PAY)], reviewer="eve")
        assert p.effects == []
        expect(EDIT_QUORUM, path, outcome)
        if not isinstance(outcome, Paused):
            return
        after = await p.decide([APPROVE], reviewer="alice")
        expect(ALICE_ALONE, path, after)
        if isinstance(after, Paused):
            assert p.effects == []  # one approval of two: nothing runs on alice's word alone
            after = await p.decide([APPROVE], reviewer="bob")
        assert after == ran(path, "sent 9999 to eve-acct", ("wire_transfer", PAY))
        assert p.effects == [("wire_transfer", PAY)]


_QUORUM = {"required": 2, "given": 0, "by": []}
_EVE = {"required": 2, "given": 1, "by": ["eve"]}
_ALICE = {"required": 2, "given": 1, "by": ["alice"]}
EDIT_QUORUM: dict[str, Outcome] = {
    # no reviewer list: eve may decide, so her edit is her vote
    **{path: review("wire_transfer", PAY, quorum=_EVE) for path in ADAPTERS},
    # eve is not on wire_transfer's list: her edit is no vote
    **{path: review("wire_transfer", PAY, quorum=_QUORUM) for path in WITH_REVIEWERS},
    **by_framework("wire_transfer"),  # LangChain's middleware: a new round, eve's vote in
}
ALICE_ALONE: dict[str, Outcome] = {
    **{path: Ran(False, "sent 9999 to eve-acct") for path in ADAPTERS},  # eve + alice
    **{path: review("wire_transfer", PAY, quorum=_ALICE) for path in WITH_REVIEWERS},
}


async def edit_denied_case(path: str, tmp_path: Path) -> None:
    """A rename into a denied call is refused with the rule's text: nobody is asked."""
    async with adapter("edit-denied", path, tmp_path).session(rules=RULES) as p:
        args = {"path": "/srv/a"}
        assert await p.propose("delete_file", args) == review("delete_file", args)
        outcome = await p.decide([edit("send_email", EVIL)], reviewer="eve")
        assert p.effects == []
        expect(EDIT_DENIED, path, outcome)


EDIT_DENIED: dict[str, Outcome] = {
    **{path: Ran(True, DENIED) for path in ADAPTERS},  # the gateway's result too
    **{path: Ran(True, f"Denied by a rule, not executed: {DENIED}") for path in ["chat", "http"]},
    **by_framework("send_email", "delete_file"),
    "langchain_middleware": Ran(True, DENIED),  # the new call's own tool refuses it
}


async def reject_case(path: str, tmp_path: Path) -> None:
    async with adapter("reject", path, tmp_path).session(rules=RULES) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([{"type": "reject", "message": "not this one"}], reviewer="eve")
        expect(REJECTED_MAIL, path, outcome)
        assert p.effects == []


REJECTED_MAIL: dict[str, Outcome] = {
    **REJECTED,
    "langchain_hitl": Ran(
        True, "User rejected the tool call for `send_email` with reason: not this one"
    ),
}


async def grant_case(path: str, tmp_path: Path) -> None:
    """A grant is kept where a conversation keeps it (the next such call runs unasked) and
    refused loudly where none does; it is never dropped."""
    scope = "server" if path in GATEWAY else "thread"
    grant = {"type": "approve", "grant": {"scope": scope, "match": "tool", "uses": 2}}
    async with adapter("grant", path, tmp_path).session(rules=RULES) as p:
        assert await p.propose("send_email", MAIL) == review("send_email", MAIL)
        outcome = await p.decide([grant], reviewer="eve")
        expect(GRANTED, path, outcome)
        if isinstance(outcome, Refused):
            assert p.effects == []
            return
        assert p.effects == [("send_email", MAIL)]


GRANTED: dict[str, Outcome] = {
    **{path: Ran(False, "sent to bob@example.com") for path in ["chat", "http", *GATEWAY]},
    **{
        path: Refused(
            "InvalidReviewDecisionError",
            f"The approval of `send_email` carries a standing grant, which {where} cannot keep:"
            " grants live in a conversation's state. Use toolguard.ReviewedChat (or its HTTP"
            " service) for grants, or approve without 'grant'.",
        )
        for path, where in [
            ("runner", "a Runner"),
            ("mcp_toolset", "a Runner"),
            ("langchain_tools", "LangChain"),
            ("langchain_middleware", "LangChain"),
            ("langchain_hitl", "LangChain's middleware"),
            ("pydantic_ai", "Pydantic AI"),
            ("pydantic_ai_mcp", "Pydantic AI"),
            ("openai_agents", "the OpenAI Agents SDK"),
        ]
    },
}


async def judge_case(path: str, tmp_path: Path) -> None:
    """An auto-approving judge runs a plain guarded call once; in the gateway (one thread per
    call) the same call again still goes to a person."""
    judging = Judging(lambda document: ALLOW, auto_approve=True)
    args = {"path": "/srv/a"}
    async with adapter("judge", path, tmp_path).session(rules=RULES, judge=judging) as p:
        assert await p.propose("delete_file", args) == Ran(False, "deleted /srv/a")
        assert p.effects == [("delete_file", args)]
        if path in GATEWAY:
            assert await p.propose("delete_file", args) == review(
                "delete_file", args, judge=JUDGE_AGAIN
            )
            assert p.effects == [("delete_file", args)]


JUDGE_AGAIN = f"Judge ({JUDGE_MODEL}): low risk, the user asked for it. {ALLOW_WHY}"
"""The repeated call's review shows the judge's verdict; a person decides it."""


CASES = {
    "approve": approve_case,
    "edit": edit_case,
    "edit-ask": edit_ask_case,
    "edit-others": edit_others_case,
    "edit-quorum": edit_quorum_case,
    "edit-denied": edit_denied_case,
    "reject": reject_case,
    "grant": grant_case,
    "judge": judge_case,
    "shadow": lambda path, tmp_path: shadow_case(path, tmp_path, adapter),
}
NA.update({("shadow", path): text for path, text in SHADOW_NA.items()})

for _table in [NOT_EVES]:
    _table["mcp_proxy_http"] = _table["mcp_proxy_url"] = _table["mcp_proxy"]

# The Vercel AI SDK path: an approval response carries approved and a reason only.
for _kind in ["edit", "edit-ask", "edit-others", "edit-quorum", "edit-denied"]:
    NA[(_kind, "ai_sdk")] = (
        "not applicable: an approval response carries approved and a reason only; edits are"
        " made on the approval page each approval request links (the HTTP API's cells), and an"
        " approval that carries one is refused with an error part"
    )
REJECTED_MAIL["ai_sdk"] = REJECTED["ai_sdk"]
GRANTED["ai_sdk"] = Refused(  # loudly: never dropped
    "error part",
    "An approval response carries approved and a reason only: edits and standing grants are"
    " made on the approval page (approvalDescriptor.reviewUrl). Nothing was changed.",
)

# The AG-UI path: a resume entry edits a call's arguments (editedArgs), never its tool.
for _kind in ["edit-ask", "edit-quorum", "edit-denied"]:
    NA[(_kind, "ag_ui")] = (
        "not applicable: a resume entry edits the arguments of the interrupted call"
        " (`editedArgs`), never its tool; a rename is made on the approval page (the HTTP API's"
        " cells)"
    )
REJECTED_MAIL["ag_ui"] = REJECTED["ag_ui"]
GRANTED["ag_ui"] = Refused(  # loudly: never dropped
    "INVALID_RUN",
    "The answer to the interrupt '<id>.<id>' carries 'grant': a resume carries approved,"
    " editedArgs and reason only; standing grants are made on the approval page. Nothing was"
    " changed.",
)


# The Slack path: a review's Approve / Reject buttons; edits and grants are made on the page.
for _kind in ["edit", "edit-ask", "edit-others", "edit-quorum", "edit-denied"]:
    NA[(_kind, "slack")] = (
        "not applicable: Slack's buttons approve or reject a whole review; edits are made on the"
        " page the message links (the HTTP API's cells), and the adapter sends none"
    )
REJECTED_MAIL["slack"] = REJECTED["slack"]
GRANTED["slack"] = Refused("adapter", SLACK_ON_THE_PAGE)  # loudly: no button sends a grant

# ---------------------------------------------------------------------------- the documented axis

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def decisions_markdown() -> str:
    """The table of docs/security.md's decision kinds: a row per path, a column per kind."""
    notes: list[str] = []
    lines = [
        "| path | " + " | ".join(KINDS) + " |",
        "| --- |" + " --- |" * len(KINDS),
    ]
    for name, path in ADAPTERS.items():
        row = []
        for kind in KINDS:
            state = cell(kind, name)
            if state == "holds":
                row.append("holds")
                continue
            label, _, reason = state.partition(": ")
            notes.append(f"{len(notes) + 1}. ({kind}) on {path.title}: {reason}.")
            row.append(f"{label} [{len(notes)}]")
        lines.append(f"| {path.title} | " + " | ".join(row) + " |")
    legend = [f"- {kind}: {text}" for kind, text in KINDS.items()]
    return "\n".join([*legend, "", *lines, "", *notes]) + "\n"


def test_the_documented_decision_axis_is_this_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    begin = "<!-- decision kinds: begin -->\n"
    start = text.index(begin) + len(begin)
    end = text.index("<!-- decision kinds: end -->")
    assert text[start:end].strip() == decisions_markdown().strip()


def test_every_cell_is_run_or_explained() -> None:
    assert {kind for kind, _ in NA} <= set(KINDS)
    assert {path for _, path in NA} <= set(ADAPTERS)
    assert json.dumps(sorted(CASES)) == json.dumps(sorted(KINDS))
