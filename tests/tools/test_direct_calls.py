"""A tool called directly honours every policy it can, and refuses loudly those it cannot.

Rules of the toolset a tool is taken from hold for direct calls (deny raises,
ask asks, allow runs); ``allow_once`` cannot make a quorum (one person's grant)
and cannot outlive the tool's review deadline.
"""

from __future__ import annotations

import pickle
import time

import anyio
import pytest

import toolguard
from toolguard import (
    ApprovalRequiredError,
    CallDeniedError,
    QuorumReviewerError,
    ReviewExpiredError,
    Rules,
    allow_once,
    guard,
    requires_approval,
)

SENT: list[str] = []
DENIED = (
    'The call to `send_email` is denied by the rule `deny send_email(to="*@evil.example")`.'
    " It was not executed."
)


@requires_approval
def send_email(to: str, body: str = "hi") -> str:
    """Send an email."""
    SENT.append(to)
    return f"sent to {to}"


def lookup(city: str) -> str:
    """Look a city up."""
    SENT.append(city)
    return city


async def send_async(to: str) -> str:
    """Send an email, asynchronously."""
    SENT.append(to)
    return f"sent to {to}"


@requires_approval(ttl=0.05)
def delete_file(path: str) -> str:
    """Delete a file; a review of it stays open 50 ms."""
    SENT.append(path)
    return "deleted"


RULES = Rules(
    deny=['send_email(to="*@evil.example")', 'send_async(to="*@evil.example")'],
    ask=['lookup(city="Atlantis")'],
    allow=['send_email(to="*@example.com")'],
)


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()


def test_a_deny_rule_refuses_a_direct_call_and_nothing_runs() -> None:
    tools = guard([send_email, lookup], rules=RULES)
    with pytest.raises(CallDeniedError) as info:
        tools["send_email"]("eve@evil.example")
    assert str(info.value) == DENIED
    assert (info.value.tool_name, info.value.rule) == (
        "send_email",
        'deny send_email(to="*@evil.example")',
    )
    assert isinstance(info.value, PermissionError)
    assert isinstance(info.value, toolguard.ToolguardError)
    # A grant cannot open a denied call either.
    with allow_once("send_email", {"to": "eve@evil.example"}), pytest.raises(CallDeniedError):
        tools["send_email"]("eve@evil.example")
    assert SENT == []
    copy = pickle.loads(pickle.dumps(info.value))  # noqa: S301 - our own bytes
    assert (str(copy), copy.tool_name, copy.rule) == (DENIED, "send_email", info.value.rule)


def test_a_deny_rule_refuses_an_async_direct_call() -> None:
    tools = guard([send_async], rules=RULES)
    with pytest.raises(CallDeniedError) as info:
        anyio.run(lambda: tools["send_async"]("eve@evil.example"))
    assert str(info.value) == DENIED.replace("send_email", "send_async")
    assert SENT == []


def test_an_ask_rule_guards_an_unguarded_tool_and_allow_once_runs_it() -> None:
    tools = guard([lookup], toolguard.Classifier(never=["lookup"]), rules=RULES)
    assert tools["lookup"]("Paris") == "Paris"
    with pytest.raises(ApprovalRequiredError) as info:
        tools["lookup"]("Atlantis")
    assert SENT == ["Paris"]
    assert info.value.pending_review.action_requests[0].args == {"city": "Atlantis"}
    with allow_once(info.value.call):
        assert tools["lookup"]("Atlantis") == "Atlantis"
    assert SENT == ["Paris", "Atlantis"]


def test_an_allow_rule_runs_a_guarded_call_at_once() -> None:
    tools = guard([send_email], rules=RULES)
    assert tools["send_email"]("bob@example.com") == "sent to bob@example.com"
    with pytest.raises(ApprovalRequiredError):
        tools["send_email"]("bob@other.example")
    assert SENT == ["bob@example.com"]


def test_the_function_itself_and_a_toolset_without_rules_are_unchanged() -> None:
    with pytest.raises(ApprovalRequiredError):
        send_email("eve@evil.example")  # the decorated function knows no toolset's rules
    with pytest.raises(ApprovalRequiredError):
        guard([send_email])["send_email"]("eve@evil.example")
    ruled = guard([send_email], rules=RULES)
    assert guard(ruled)["send_email"]._rules is RULES  # a toolset of a toolset keeps them
    assert guard(ruled, rules=Rules())["send_email"]._rules == Rules()
    assert SENT == []


def test_allow_once_cannot_make_a_quorum() -> None:
    @requires_approval(approvals=2)
    def wire(amount: int) -> str:
        SENT.append(str(amount))
        return "wired"

    with pytest.raises(ApprovalRequiredError) as info:
        wire(900)
    expected = (
        "Action 'wire' needs approvals from 2 distinct, named reviewers: an anonymous"
        " reviewer cannot approve or edit it. Nothing was changed."
    )
    with pytest.raises(QuorumReviewerError) as refused:
        allow_once(info.value.call)
    assert str(refused.value) == expected
    # A grant by name, which does not know the tool, is refused when it is used.
    with allow_once("wire", {"amount": 900}), pytest.raises(QuorumReviewerError) as used:
        wire(900)
    assert str(used.value) == expected
    assert SENT == []


def test_allow_once_after_the_deadline_is_refused_and_nothing_runs() -> None:
    with pytest.raises(ApprovalRequiredError) as info:
        delete_file("/srv/a")
    time.sleep(0.1)
    with pytest.raises(ReviewExpiredError) as expired:
        allow_once(info.value.call)
    text = (
        "The approval of `delete_file` came after its deadline (0.05 s after the call asked"
        " for it): it was not executed. Call the tool again to ask for a new approval."
    )
    assert str(expired.value) == text
    assert expired.value.review_id == info.value.call.id
    copy = pickle.loads(pickle.dumps(expired.value))  # noqa: S301 - our own bytes
    assert (str(copy), copy.review_id) == (text, info.value.call.id)
    assert SENT == []


def test_a_grant_used_after_the_deadline_is_refused() -> None:
    with pytest.raises(ApprovalRequiredError) as info:
        delete_file("/srv/a")
    grant = allow_once(info.value.call)  # in time
    time.sleep(0.1)
    with grant, pytest.raises(ReviewExpiredError):
        delete_file("/srv/a")  # too late to start
    assert SENT == []
    with pytest.raises(ApprovalRequiredError) as again:
        delete_file("/srv/a")
    with allow_once(again.value.call):
        assert delete_file("/srv/a") == "deleted"  # a new approval in time runs it
    assert SENT == ["/srv/a"]
