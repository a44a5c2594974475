"""What a save writes: ``changes_of`` finds changed items by identity, in short and long lists."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard import ThreadState
from toolguard._chat.threads import TAIL, changes_of, first_changed, mark_stored
from toolguard._core.records import Action
from toolguard._stores.protocol import Changes


def reference_first(old: list[Any], new: list[Any], stored: int) -> int:
    """The rule, written plainly: the first difference in the last TAIL shared items; all of
    them differing (a list rebuilt whole) means the first difference anywhere."""
    shared = min(stored, len(old), len(new))
    start = max(0, shared - TAIL)
    first = next((i for i in range(start, shared) if old[i] is not new[i]), shared)
    if first == start and start > 0:
        first = next((i for i in range(shared) if old[i] is not new[i]), shared)
    return first


EDITS = st.tuples(
    st.integers(min_value=0, max_value=90),  # length of the old list
    st.sets(st.integers(min_value=0, max_value=89), max_size=6),  # positions replaced
    st.integers(min_value=0, max_value=4),  # items appended
    st.integers(min_value=0, max_value=3),  # items dropped from the end
    st.booleans(),  # rebuilt whole (no item shared)
)


def edited(spec: tuple[int, set[int], int, int, bool]) -> tuple[list[object], list[object]]:
    length, replaced, appended, dropped, rebuilt = spec
    old = [object() for _ in range(length)]
    new = [object() if rebuilt or i in replaced else item for i, item in enumerate(old)]
    new = new[: max(0, len(new) - dropped)] + [object() for _ in range(appended)]
    return old, new


@settings(max_examples=500, deadline=None)
@given(spec=EDITS, stored_offset=st.integers(min_value=-3, max_value=3))
def test_first_changed_follows_the_rule(
    spec: tuple[int, set[int], int, int, bool], stored_offset: int
) -> None:
    old, new = edited(spec)
    stored = max(0, len(old) + stored_offset)
    assert first_changed(old, new, stored) == reference_first(old, new, stored)


def action(index: int) -> Action:
    return Action(
        id=f"a{index}", call_id=f"c{index}", name="t", args={}, description="d", digest="x"
    )


@settings(max_examples=300, deadline=None)
@given(spec=EDITS)
def test_changed_and_new_actions_are_written_by_position(
    spec: tuple[int, set[int], int, int, bool],
) -> None:
    length, replaced, appended, _, rebuilt = spec
    old = [action(i) for i in range(length)]
    new = [action(i) if rebuilt or i in replaced else item for i, item in enumerate(old)] + [
        action(length + i) for i in range(appended)
    ]
    base = ThreadState(thread_id="t", actions=old)
    mark_stored(base)
    found = changes_of(base, {"actions": new})
    first = reference_first(old, new, len(old))
    expected = [(i, new[i]) for i in range(first, len(old)) if new[i] is not old[i]]
    expected += [(i, new[i]) for i in range(len(old), len(new))]
    assert found == Changes(0, (), expected, (), 0)


def test_a_shorter_action_list_or_the_same_list_cannot_be_expressed() -> None:
    base = ThreadState(thread_id="t", actions=[action(0), action(1)])
    assert changes_of(base, {"actions": base.actions[:1]}) is None
    assert changes_of(base, {"actions": base.actions}) is None  # changed in place: unknown what
    assert changes_of(base, {"audit": base.audit}) is None
