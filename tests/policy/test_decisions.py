"""Tests for validate_decisions: the checks, their order and the exact error texts."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard import (
    ALLOWED_DECISIONS,
    ApproveDecision,
    EditDecision,
    EditedAction,
    InvalidReviewDecisionError,
    NoPendingReviewError,
    PendingReview,
    PendingTurn,
    RejectDecision,
    ToolCall,
    ToolguardError,
    validate_decisions,
)
from toolguard._core.records import Action
from toolguard.text import set_language


def review(count: int) -> PendingReview:
    """A payload with ``count`` actions (send_email, then delete_event, alternating)."""
    names = ["send_email", "delete_event"]
    return PendingReview.for_actions([(names[i % 2], {"n": i}, None) for i in range(count)])


EDIT = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}}

# --------------------------------------------------------------------------- exact texts

Case = tuple[str, int, Any, str, str]

CASES: list[Case] = [
    (
        "empty",
        1,
        [],
        "Expected 1 decision (one per action), got 0",
        "Butuh 1 keputusan (satu per aksi), diterima 0",
    ),
    (
        "too few",
        2,
        [{"type": "approve"}],
        "Expected 2 decisions (one per action), got 1",
        "Butuh 2 keputusan (satu per aksi), diterima 1",
    ),
    (
        "too many",
        1,
        [{"type": "approve"}, {"type": "approve"}, {"type": "reject"}],
        "Expected 1 decision (one per action), got 3",
        "Butuh 1 keputusan (satu per aksi), diterima 3",
    ),
    (
        "unknown type",
        1,
        [{"type": "postpone"}],
        "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan 'postpone' tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "type in capitals",
        1,
        [{"type": "APPROVE"}],
        "Unknown decision type 'APPROVE'. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan 'APPROVE' tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "type is a number",
        1,
        [{"type": 5}],
        "Unknown decision type 5. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan 5 tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "type missing",
        1,
        [{"message": "hi"}],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "type null",
        1,
        [{"type": None}],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "decision is None",
        1,
        [None],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "decision is a string",
        1,
        ["approve"],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "decision is a number",
        1,
        [5],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "decision is a list",
        1,
        [[{"type": "approve"}]],
        "Unknown decision type None. Choices: ['approve', 'edit', 'reject']",
        "Jenis keputusan None tidak dikenal. Pilihan: ['approve', 'edit', 'reject']",
    ),
    (
        "edit without edited_action",
        1,
        [{"type": "edit"}],
        "An 'edit' decision must include 'edited_action'",
        "Keputusan 'edit' wajib menyertakan 'edited_action'",
    ),
    (
        "edit with edited_action None",
        1,
        [{"type": "edit", "edited_action": None}],
        "An 'edit' decision must include 'edited_action'",
        "Keputusan 'edit' wajib menyertakan 'edited_action'",
    ),
    (
        "edited_action not an object",
        1,
        [{"type": "edit", "edited_action": "send_email"}],
        "'edited_action' must contain 'name' (text) and 'args' (object)",
        "'edited_action' harus berisi 'name' (teks) dan 'args' (objek)",
    ),
    (
        "reject message not text",
        1,
        [{"type": "reject", "message": 5}],
        "The 'message' of a 'reject' decision must be text, got int",
        "'message' pada keputusan 'reject' harus berupa teks, diterima int",
    ),
    (
        "decisions not a list",
        1,
        {"type": "approve"},
        "'decisions' must be a list of decision objects, got dict",
        "'decisions' harus berupa daftar objek keputusan, diterima dict",
    ),
]


@pytest.mark.parametrize(
    ("count", "decisions", "english"),
    [pytest.param(c, d, en, id=name) for name, c, d, en, _ in CASES],
)
def test_error_text_in_english(count: int, decisions: Any, english: str) -> None:
    """Each refused shape raises InvalidReviewDecisionError with the exact English text."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(count), decisions)
    assert str(info.value) == english


@pytest.mark.parametrize(
    ("count", "decisions", "indonesian"),
    [pytest.param(c, d, idn, id=name) for name, c, d, _, idn in CASES],
)
def test_error_text_in_indonesian(count: int, decisions: Any, indonesian: str) -> None:
    """After set_language("id") each refused shape gives the seed's Indonesian text."""
    set_language("id")
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(count), decisions)
    assert str(info.value) == indonesian


@pytest.mark.parametrize(
    ("count", "decisions", "indonesian"),
    [pytest.param(c, d, idn, id=name) for name, c, d, _, idn in CASES],
)
def test_error_text_in_indonesian_from_environment(
    monkeypatch: pytest.MonkeyPatch, count: int, decisions: Any, indonesian: str
) -> None:
    """With TOOLGUARD_LANG=id each refused shape gives the Indonesian text."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(count), decisions)
    assert str(info.value) == indonesian


EDITED_ACTION_SHAPES: list[Any] = [
    {},
    {"name": "send_email"},
    {"args": {"to": "b@x"}},
    {"name": 5, "args": {}},
    {"name": None, "args": {}},
    {"name": ["send_email"], "args": {}},
    {"name": "send_email", "args": None},
    {"name": "send_email", "args": []},
    {"name": "send_email", "args": [["to", "b@x"]]},
    {"name": "send_email", "args": "to=b@x"},
    {"name": "send_email", "args": 5},
    {"name": "send_email", "args": {1: "b@x"}},
    "send_email",
    ["send_email", {}],
    5,
    True,
]


@pytest.mark.parametrize("edited", EDITED_ACTION_SHAPES)
def test_edited_action_shape_is_refused(edited: Any) -> None:
    """edited_action without a text name and an object args is refused with the exact text."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), [{"type": "edit", "edited_action": edited}])
    assert str(info.value) == "'edited_action' must contain 'name' (text) and 'args' (object)"


@pytest.mark.parametrize("edited", EDITED_ACTION_SHAPES)
def test_edited_action_shape_is_refused_in_indonesian(edited: Any) -> None:
    """The same shapes give the Indonesian text after set_language("id")."""
    set_language("id")
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), [{"type": "edit", "edited_action": edited}])
    assert str(info.value) == "'edited_action' harus berisi 'name' (teks) dan 'args' (objek)"


NOT_LISTS: list[tuple[Any, str]] = [
    (None, "None"),
    ("abc", "str"),
    ("", "str"),
    (b"[]", "bytes"),
    (bytearray(b"ab"), "bytearray"),
    ({"type": "approve"}, "dict"),
    ({}, "dict"),
    (5, "int"),
    (1.5, "float"),
    (True, "bool"),
    ({"approve"}, "set"),
    (frozenset(), "frozenset"),
    (ApproveDecision(), "ApproveDecision"),
    (iter([{"type": "approve"}]), "list_iterator"),
]


@pytest.mark.parametrize(("decisions", "kind"), NOT_LISTS)
def test_decisions_that_are_not_a_list(decisions: Any, kind: str) -> None:
    """A non-list ``decisions`` value is refused with the documented text naming its type."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), decisions)
    assert str(info.value) == f"'decisions' must be a list of decision objects, got {kind}"


@pytest.mark.parametrize(("decisions", "kind"), NOT_LISTS)
def test_decisions_that_are_not_a_list_in_indonesian(decisions: Any, kind: str) -> None:
    """The non-list text in Indonesian."""
    set_language("id")
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), decisions)
    assert str(info.value) == f"'decisions' harus berupa daftar objek keputusan, diterima {kind}"


# --------------------------------------------------------------------------- no pending action

NOTHING_PENDING: list[Any] = [
    None,
    {"action_requests": []},
    {"action_requests": [], "review_configs": []},
    {},
    {"action_requests": "abc"},
    {"action_requests": None},
    PendingReview(action_requests=[], review_configs=[]),
    PendingTurn(calls=[ToolCall(id="c1", name="send_email")], actions=[]),
    5,
    "pending",
]


@pytest.mark.parametrize("pending", NOTHING_PENDING)
@pytest.mark.parametrize("decisions", [[], [{"type": "approve"}], None, "abc", [{"type": "x"}]])
def test_no_pending_action_beats_everything(pending: Any, decisions: Any) -> None:
    """With nothing pending, NoPendingReviewError is raised whatever the decisions are."""
    with pytest.raises(NoPendingReviewError) as info:
        validate_decisions(pending, decisions)
    assert str(info.value) == "There is no action awaiting approval in this conversation"


def test_no_pending_action_in_indonesian() -> None:
    """NoPendingReviewError has the seed's Indonesian text after set_language("id")."""
    set_language("id")
    with pytest.raises(NoPendingReviewError) as info:
        validate_decisions(None, [{"type": "approve"}])
    assert str(info.value) == "Tidak ada aksi yang menunggu persetujuan di percakapan ini"


def test_no_pending_action_in_indonesian_from_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NoPendingReviewError has the Indonesian text with TOOLGUARD_LANG=id."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    with pytest.raises(NoPendingReviewError) as info:
        validate_decisions({"action_requests": []}, [])
    assert str(info.value) == "Tidak ada aksi yang menunggu persetujuan di percakapan ini"


def test_paused_turn_whose_actions_are_all_decided_has_nothing_pending() -> None:
    """A PendingTurn whose only action is already executed counts as nothing pending."""
    done = Action(
        id="a1", call_id="c1", name="send_email", args={}, description="d", status="executed"
    )
    turn = PendingTurn(calls=[ToolCall(id="c1", name="send_email")], actions=[done])
    with pytest.raises(NoPendingReviewError):
        validate_decisions(turn, [{"type": "approve"}])


# --------------------------------------------------------------------------- checking order


def test_list_check_comes_before_the_count() -> None:
    """A string of the right length is still refused as not a list, not by its count."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(2), "ab")
    assert str(info.value) == "'decisions' must be a list of decision objects, got str"


def test_count_beats_malformed_decisions() -> None:
    """A wrong count is reported even when every decision is also malformed."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(2), [{"type": "postpone"}])
    assert str(info.value) == "Expected 2 decisions (one per action), got 1"


def test_first_decision_problem_is_reported_before_the_second() -> None:
    """Decision 1's problem is reported, not decision 2's."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(2), [{"type": "edit"}, {"type": "postpone"}])
    assert str(info.value) == "An 'edit' decision must include 'edited_action'"
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(2), [{"type": "postpone"}, {"type": "edit"}])
    assert (
        str(info.value)
        == "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']"
    )


def test_valid_first_decision_then_problem_in_the_second() -> None:
    """A valid decision 1 does not hide decision 2's problem."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(2), [{"type": "approve"}, {"type": "edit", "edited_action": 1}])
    assert str(info.value) == "'edited_action' must contain 'name' (text) and 'args' (object)"


def test_type_is_checked_before_edited_action() -> None:
    """An unknown type with a broken edited_action reports the type."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), [{"type": "postpone", "edited_action": "broken"}])
    assert (
        str(info.value)
        == "Unknown decision type 'postpone'. Choices: ['approve', 'edit', 'reject']"
    )


def test_missing_edited_action_is_reported_before_shape() -> None:
    """edited_action null is 'must include', not the shape message."""
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(review(1), [{"type": "edit", "edited_action": None, "name": 5}])
    assert str(info.value) == "An 'edit' decision must include 'edited_action'"


# --------------------------------------------------------------------------- accepted shapes


def test_accepts_dicts_and_models() -> None:
    """Dicts in the wire format and decision models become the same models, in order."""
    decisions = [
        ApproveDecision(),
        {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}},
        {"type": "reject", "message": "wrong day"},
        {"type": "reject"},
        RejectDecision(message="no"),
        EditDecision(edited_action=EditedAction(name="delete_event", args={"id": 1})),
        {"type": "approve"},
    ]
    assert validate_decisions(review(7), decisions) == [
        ApproveDecision(),
        EditDecision(edited_action=EditedAction(name="send_email", args={"to": "b@x"})),
        RejectDecision(message="wrong day"),
        RejectDecision(message=None),
        RejectDecision(message="no"),
        EditDecision(edited_action=EditedAction(name="delete_event", args={"id": 1})),
        ApproveDecision(),
    ]


def test_fields_that_do_not_belong_to_the_type_are_ignored() -> None:
    """A message on approve, an edited_action on reject and a message on edit are ignored."""
    decisions = [
        {"type": "approve", "message": "fine", "edited_action": "garbage"},
        {"type": "reject", "message": "no", "edited_action": 5},
        {
            "type": "edit",
            "message": "changed",
            "edited_action": {"name": "send_email", "args": {}, "extra": 1},
        },
        {"type": "approve", "message": 5},
    ]
    assert validate_decisions(review(4), decisions) == [
        ApproveDecision(),
        RejectDecision(message="no"),
        EditDecision(edited_action=EditedAction(name="send_email", args={})),
        ApproveDecision(),
    ]


def test_edited_action_model_inside_a_dict() -> None:
    """An EditedAction model as edited_action of a dict decision is accepted."""
    edited = EditedAction(name="send_email", args={"to": "b@x"})
    assert validate_decisions(review(1), [{"type": "edit", "edited_action": edited}]) == [
        EditDecision(edited_action=edited)
    ]


def test_reject_with_empty_message_is_kept_empty() -> None:
    """An empty reject message is valid; the runner turns it into REJECTED_BY_USER_MESSAGE later."""
    assert validate_decisions(review(1), [{"type": "reject", "message": ""}]) == [
        RejectDecision(message="")
    ]


def test_tuple_of_decisions_is_accepted() -> None:
    """A tuple is a sequence of decisions like a list."""
    assert validate_decisions(review(2), ({"type": "approve"}, {"type": "reject"})) == [
        ApproveDecision(),
        RejectDecision(),
    ]


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p,
        lambda p: p.model_dump(),
        lambda p: p.model_dump(mode="json"),
    ],
    ids=["model", "dict", "json-dict"],
)
def test_payload_as_model_or_dict(make: Callable[[PendingReview], Any]) -> None:
    """The payload may be given as a PendingReview model or as its dict."""
    pending = make(review(2))
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(pending, [{"type": "approve"}])
    assert str(info.value) == "Expected 2 decisions (one per action), got 1"
    assert validate_decisions(pending, [{"type": "approve"}, {"type": "reject"}]) == [
        ApproveDecision(),
        RejectDecision(),
    ]


def test_payload_as_paused_turn_counts_waiting_actions_only() -> None:
    """For a PendingTurn only the actions still requested count."""
    waiting = Action(id="a2", call_id="c2", name="delete_event", args={}, description="d")
    done = waiting.model_copy(update={"id": "a1", "call_id": "c1", "status": "edited"})
    turn = PendingTurn(
        calls=[ToolCall(id="c1", name="send_email"), ToolCall(id="c2", name="delete_event")],
        actions=[done, waiting],
    )
    with pytest.raises(InvalidReviewDecisionError) as info:
        validate_decisions(turn, [{"type": "approve"}, {"type": "approve"}])
    assert str(info.value) == "Expected 1 decision (one per action), got 2"
    assert validate_decisions(turn, [{"type": "approve"}]) == [ApproveDecision()]


def test_error_classes() -> None:
    """InvalidReviewDecisionError is a ValueError and NoPendingReviewError a LookupError."""
    assert issubclass(InvalidReviewDecisionError, ValueError)
    assert issubclass(InvalidReviewDecisionError, ToolguardError)
    assert issubclass(NoPendingReviewError, LookupError)
    assert issubclass(NoPendingReviewError, ToolguardError)
    with pytest.raises(ValueError, match=re.escape("Expected 1 decision (one per action), got 0")):
        validate_decisions(review(1), [])
    with pytest.raises(LookupError, match="no action awaiting approval"):
        validate_decisions(None, [])


def test_refused_call_changes_nothing() -> None:
    """A refused call leaves payload and decisions unchanged; correct decisions work afterwards."""
    pending = review(2).model_dump()
    before = copy.deepcopy(pending)
    decisions: list[Any] = [{"type": "approve"}, {"type": "edit", "edited_action": {"name": 1}}]
    decisions_before = copy.deepcopy(decisions)
    with pytest.raises(InvalidReviewDecisionError):
        validate_decisions(pending, decisions)
    assert pending == before
    assert decisions == decisions_before
    assert validate_decisions(pending, [{"type": "approve"}, EDIT]) == [
        ApproveDecision(),
        EditDecision(edited_action=EditedAction(name="send_email", args={"to": "b@x"})),
    ]


# --------------------------------------------------------------------------- fuzzing

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

NEAR_DECISION = st.fixed_dictionaries(
    {"type": st.sampled_from([*ALLOWED_DECISIONS, "postpone", ""]) | JSON},
    optional={
        "edited_action": JSON
        | st.fixed_dictionaries({}, optional={"name": st.text(max_size=5) | JSON, "args": JSON}),
        "message": JSON,
    },
)

DECISION = JSON | NEAR_DECISION
DECISIONS = JSON | st.lists(DECISION, max_size=4)
MODELS = (ApproveDecision, EditDecision, RejectDecision)


@settings(max_examples=150, deadline=None)
@given(count=st.integers(min_value=0, max_value=3), decisions=DECISIONS)
def test_fuzz_returns_models_or_raises_invalid_decision(count: int, decisions: Any) -> None:
    """Any JSON value as decisions gives models or exactly InvalidReviewDecisionError."""
    pending = review(count).model_dump()
    before = copy.deepcopy(pending)
    try:
        result = validate_decisions(pending, decisions)
    except NoPendingReviewError:
        assert count == 0
    except InvalidReviewDecisionError:
        pass  # the documented refusal; any other exception fails the test
    else:
        assert isinstance(decisions, list)
        assert len(result) == count
        assert all(isinstance(d, MODELS) for d in result)
        assert [d.type for d in result] == [d["type"] for d in decisions]
    assert pending == before


@settings(max_examples=150, deadline=None)
@given(decision=DECISION)
def test_fuzz_single_decision(decision: Any) -> None:
    """Any JSON value as the one decision gives a model of its type or the documented refusal."""
    pending = review(1)
    before = pending.model_dump()
    snapshot = copy.deepcopy(decision)
    try:
        result = validate_decisions(pending, [decision])
    except InvalidReviewDecisionError:
        pass  # the documented refusal; any other exception fails the test
    else:
        assert isinstance(decision, dict)
        assert len(result) == 1
        assert result[0].type == decision["type"]
    assert pending.model_dump() == before
    assert repr(decision) == repr(snapshot)  # repr, since NaN never equals itself
