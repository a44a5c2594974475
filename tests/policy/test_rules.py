"""Argument rules: parsing, matching, precedence, TOML (toolguard._policy.rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.adversarial import strategies as hs
from toolguard._policy.rules import (
    Rule,
    RuleDecision,
    Rules,
    RuleSyntaxError,
    denied_text,
    parse_rule,
)


def test_parse_a_bare_tool_glob() -> None:
    assert parse_rule("  search_*  ", "allow") == Rule(
        effect="allow", pattern="search_*", tool="search_*"
    )


def test_parse_argument_globs() -> None:
    assert parse_rule("send_email(to=\"*@example.com\", subject='Re: *')", "allow") == Rule(
        effect="allow",
        pattern="send_email(to=\"*@example.com\", subject='Re: *')",
        tool="send_email",
        args=(("to", "*@example.com"), ("subject", "Re: *")),
    )
    assert parse_rule("mail.*()", "ask").args == ()


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("", "An empty deny rule: write a tool name glob such as 'search_*'"),
        ("   ", "An empty deny rule: write a tool name glob such as 'search_*'"),
        ("x)", "The deny rule 'x)' has ')' without '('"),
        ('(to="a")', "The deny rule '(to=\"a\")' has no tool name glob before '('"),
        ('send(to="a"', "The deny rule 'send(to=\"a\"' must end with ')'"),
        (
            'send("a")',
            (
                "The deny rule 'send(\"a\")' cannot be read: arguments must be written"
                ' name="glob", separated by commas'
            ),
        ),
        (
            "send(to=1)",
            (
                "The deny rule 'send(to=1)' cannot be read: arguments must be written"
                ' name="glob", separated by commas'
            ),
        ),
        (
            "send(to=a)",
            (
                "The deny rule 'send(to=a)' cannot be read: arguments must be written"
                ' name="glob", separated by commas'
            ),
        ),
        (
            "send(**x)",
            (
                "The deny rule 'send(**x)' cannot be read: arguments must be written"
                ' name="glob", separated by commas'
            ),
        ),
        (
            'send(to="a", to="b")',
            "The deny rule 'send(to=\"a\", to=\"b\")' names the argument 'to' twice",
        ),
        ("x" * 5000, "A deny rule is 5000 characters long; the most is 4096"),
    ],
)
def test_unreadable_patterns_say_why(pattern: str, text: str) -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        parse_rule(pattern, "deny")
    assert str(caught.value) == text


def test_a_pattern_that_is_not_text_is_a_type_error() -> None:
    with pytest.raises(TypeError) as caught:
        Rules(deny=[42])  # type: ignore[list-item]
    assert str(caught.value) == (
        "A deny rule must be text like 'send_email(to=\"*@example.com\")', got int"
    )
    with pytest.raises(TypeError) as caught:
        Rules(allow="search_*")
    assert str(caught.value) == "allow= takes a list of patterns, got str"


RULES = Rules(
    allow=['send_email(to="*@example.com")', "search_*"],
    ask=["search_contacts"],
    deny=["delete_*", 'run_shell(command="rm *")'],
)


@pytest.mark.parametrize(
    ("name", "args", "effect", "pattern"),
    [
        ("send_email", {"to": "bob@example.com"}, "allow", 'send_email(to="*@example.com")'),
        ("send_email", {"to": "bob@evil.example"}, None, None),
        # anchored: the whole value must match
        ("send_email", {"to": "bob@example.com.evil.example"}, None, None),
        # case-sensitive
        ("send_email", {"to": "bob@EXAMPLE.com"}, None, None),
        ("Send_email", {"to": "bob@example.com"}, None, None),
        # a non-string value never matches a string pattern
        ("send_email", {"to": ["bob@example.com"]}, None, None),
        ("send_email", {"to": {"address": "bob@example.com"}}, None, None),
        ("send_email", {"to": None}, None, None),
        ("send_email", {}, None, None),
        # ask beats allow
        ("search_contacts", {}, "ask", "search_contacts"),
        ("search_mail", {}, "allow", "search_*"),
        # deny beats everything
        ("delete_file", {"path": "/srv/x"}, "deny", "delete_*"),
        ("run_shell", {"command": "rm -rf /"}, "deny", 'run_shell(command="rm *")'),
        ("run_shell", {"command": "ls"}, None, None),
    ],
)
def test_decide_by_precedence(
    name: str, args: dict[str, Any], effect: str | None, pattern: str | None
) -> None:
    decision = RULES.decide(name, args)
    assert decision.effect == effect
    assert (decision.rule.pattern if decision.rule else None) == pattern
    if pattern is None:
        assert decision == RuleDecision(effect=None, rule=None, reason="no rule matched")
    else:
        assert decision.reason == f"matched the {effect} rule {pattern!r}"


def test_deny_beats_ask_beats_allow_for_the_same_call() -> None:
    rules = Rules(allow=["x"], ask=["x"], deny=["x"])
    assert rules.decide("x", {}).effect == "deny"
    assert Rules(allow=["x"], ask=["x"]).decide("x", {}).effect == "ask"
    assert [r.effect for r in rules.rules] == ["deny", "ask", "allow"]


def test_explain_without_args_and_the_denied_text() -> None:
    decision = RULES.explain("delete_everything")
    assert decision.rule is not None
    assert denied_text("delete_everything", decision.rule) == (
        "The call to `delete_everything` is denied by the rule `deny delete_*`."
        " It was not executed."
    )


def test_repr_equality_and_truth() -> None:
    assert repr(Rules(ask=["a"], deny=["b"])) == "Rules(ask=['a'], deny=['b'])"
    assert Rules(ask=["a"]) == Rules(ask=[" a "])
    assert Rules(ask=["a"]) != Rules(allow=["a"])
    assert not Rules()
    assert Rules(deny=["x"])


def test_from_toml_text_and_file(tmp_path: Path) -> None:
    text = """
[rules]
allow = ['send_email(to="*@example.com")']
ask = ["search_contacts"]
deny = ["delete_*"]
"""
    expected = Rules(
        allow=['send_email(to="*@example.com")'], ask=["search_contacts"], deny=["delete_*"]
    )
    assert Rules.from_toml(text) == expected
    path = tmp_path / "rules.toml"
    path.write_text(text, encoding="utf-8")
    assert Rules.from_toml(path) == expected
    assert Rules.from_toml('deny = ["x"]') == Rules(deny=["x"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[rules]\nallow = 'x'", "'allow' in the rules TOML must be a list of strings"),
        ("[rules]\nask = [1]", "'ask' in the rules TOML must be a list of strings"),
        (
            "[rules]\npermit = ['x']",
            "Unknown keys in the rules TOML: ['permit']. Use allow, ask and deny.",
        ),
        (
            "rules = 3",
            "The [rules] entry of the TOML must be a table with allow, ask and deny lists",
        ),
        ("[rules]\ndeny = ['x(']", "The deny rule 'x(' must end with ')'"),
    ],
)
def test_bad_toml_says_why(text: str, message: str) -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        Rules.from_toml(text)
    assert str(caught.value) == message


def test_invalid_toml_is_a_rule_syntax_error() -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        Rules.from_toml("[rules\n")
    assert str(caught.value).startswith("The rules TOML cannot be read: ")


@given(name=hs.odd_names, value=st.one_of(hs.hostile_json, hs.deceptive_text, hs.surrogate_text))
def test_hostile_names_and_values_never_break_matching(name: str, value: Any) -> None:
    decision = RULES.decide(name, {"to": value, "command": value, "path": value})
    assert decision.effect in (None, "allow", "ask", "deny")
    if not isinstance(value, str):
        # Only the tool-name-only rules can match a call whose arguments are not text.
        assert decision.rule is None or decision.rule.args == ()


def test_confusable_domain_does_not_match_the_allow_rule() -> None:
    # "example.com" with a Cyrillic small ie (U+0435) for the first e: not our domain.
    assert RULES.decide("send_email", {"to": "bob@\u0435xample.com"}).effect is None


# ----------------------------------------------------------------------------- through the runner


def _registry(ran: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    import toolguard

    def send_email(to: str, body: str = "") -> str:
        """Send an email."""
        ran.append(("send_email", {"to": to}))
        return f"sent to {to}"

    def search_contacts(query: str) -> list[str]:
        """Find contacts."""
        ran.append(("search_contacts", {"query": query}))
        return ["alice@example.com"]

    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(("delete_file", {"path": path}))
        return "deleted"

    @toolguard.requires_approval(when=lambda args: args["amount"] > 1000)
    def transfer(amount: int, to: str) -> str:
        """Move money."""
        ran.append(("transfer", {"amount": amount}))
        return "paid"

    return [send_email, search_contacts, delete_file, transfer]


async def test_the_runner_applies_rules_before_each_tools_policy() -> None:
    import toolguard
    from toolguard.text import ResultTemplates

    ran: list[tuple[str, dict[str, Any]]] = []
    rules = Rules(
        allow=['send_email(to="*@example.com")'],
        ask=["search_contacts", 'transfer(to="acme")'],
        deny=["delete_*"],
    )
    runner = toolguard.Runner(toolguard.guard(_registry(ran), rules=rules))
    step = await runner.run(
        [
            {"id": "c1", "name": "send_email", "args": {"to": "bob@example.com"}},  # allow
            {"id": "c2", "name": "send_email", "args": {"to": "eve@evil.example"}},  # classifier
            {"id": "c3", "name": "search_contacts", "args": {"query": "a"}},  # ask
            {"id": "c4", "name": "delete_file", "args": {"path": "/srv/x"}},  # deny
            {"id": "c5", "name": "transfer", "args": {"amount": 5, "to": "acme"}},  # ask > when=
        ]
    )
    assert step.pending is not None
    assert [a.call_id for a in step.pending.actions] == ["c2", "c3", "c5"]
    assert ran == [("send_email", {"to": "bob@example.com"})]
    denied = next(r for r in step.results if r.call_id == "c4")
    assert (denied.status, denied.outcome, denied.content) == (
        "error",
        "denied",
        "The call to `delete_file` is denied by the rule `deny delete_*`. It was not executed.",
    )
    assert ResultTemplates().render(denied) == (
        "Denied by a rule, not executed: The call to `delete_file` is denied by the rule"
        " `deny delete_*`. It was not executed."
    )


async def test_an_edit_cannot_route_around_a_deny_rule() -> None:
    import toolguard

    ran: list[tuple[str, dict[str, Any]]] = []
    rules = Rules(deny=['send_email(to="*@evil.example")'])
    runner = toolguard.Runner(toolguard.guard(_registry(ran), rules=rules))
    step = await runner.run([{"id": "c1", "name": "send_email", "args": {"to": "a@b.example"}}])
    assert step.pending is not None
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "eve@evil.example"}},
    }
    done = await runner.resume(step.pending, [edit])
    assert ran == []
    assert [(a.status, a.result.outcome if a.result else None) for a in done.actions] == [
        ("failed", "denied")
    ]


def test_guard_checks_rules_and_a_toolset_keeps_them() -> None:
    import toolguard

    rules = Rules(deny=["x"])
    tools = toolguard.guard([], rules=rules)
    assert tools.rules is rules
    assert toolguard.Runner(tools).toolset.rules is rules
    assert toolguard.Toolset(tools).rules is rules
    with pytest.raises(TypeError) as caught:
        toolguard.guard([], rules={"deny": ["x"]})  # type: ignore[arg-type]
    assert str(caught.value) == "rules must be a toolguard.Rules or None, got dict {'deny': ['x']}"


async def test_a_denied_call_is_audited_once_in_the_chat() -> None:
    """The denied call has no approval request, so its own audit event says what was refused."""
    import toolguard

    ran: list[tuple[str, dict[str, Any]]] = []
    rules = Rules(deny=["delete_*"])
    model = toolguard.ScriptedModel(
        [
            toolguard.ModelResponse(
                tool_calls=[
                    toolguard.ToolCall(id="c1", name="delete_file", args={"path": "/srv/x"}),
                    toolguard.ToolCall(id="c2", name="send_email", args={"to": "a@b.example"}),
                ]
            ),
            "done",
        ]
    )
    chat = toolguard.ReviewedChat(model, toolguard.guard(_registry(ran), rules=rules))
    turn = await chat.send_message("go")
    assert turn.pending_review is not None
    await chat.submit_review([{"type": "approve"}], turn.thread_id, review_id=turn.review_id)
    trail = await chat.audit_trail(turn.thread_id)
    assert [(e.kind, e.tool) for e in trail] == [
        ("denied", "delete_file"),
        ("requested", "send_email"),
        ("decided", "send_email"),
        ("executed", "send_email"),
    ]
    denied = trail[0]
    assert (denied.args, denied.review_id, denied.detail) == (
        {"path": "/srv/x"},
        None,
        "The call to `delete_file` is denied by the rule `deny delete_*`. It was not executed.",
    )
    assert ran == [("send_email", {"to": "a@b.example"})]


async def test_a_deny_rule_refuses_before_the_arguments_are_checked() -> None:
    """A call matching a deny rule is denied (and so audited as denied) even with bad arguments."""
    import toolguard

    ran: list[tuple[str, dict[str, Any]]] = []
    runner = toolguard.Runner(
        toolguard.guard(_registry(ran), rules=Rules(deny=['delete_file(path="/etc/*")']))
    )
    step = await runner.run(
        [
            {"id": "c1", "name": "delete_file", "args": {"path": "/etc/x", "force": True}},
            {"id": "c2", "name": "delete_file", "args": {"path": "/srv/x", "force": True}},
        ]
    )
    assert [(r.call_id, r.outcome, r.content) for r in step.results] == [
        (
            "c1",
            "denied",
            (
                'The call to `delete_file` is denied by the rule `deny delete_file(path="/etc/*")`.'
                " It was not executed."
            ),
        ),
        (
            "c2",
            "invalid_arguments",
            "Invalid arguments for tool `delete_file`: 'force': Extra inputs are not permitted",
        ),
    ]
    assert (step.pending, ran) == (None, [])
