"""The shared hostile-input strategies produce what their names promise."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial import strategies as hs


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, (list, dict)) and value:
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
        depth += 1
    return depth


def test_deep_builders_nest_exactly() -> None:
    assert hs.deep_list(3) == [[[1]]]
    assert hs.deep_object(2, leaf="x") == {"a": {"a": "x"}}
    assert hs.deep_json_text(4) == '{"k":[{"k":[0]}]}'
    assert _depth(json.loads(hs.deep_json_text(500))) == 500


@settings(max_examples=20, deadline=None)
@given(hs.deep_json)
def test_deep_json_is_deep(value: Any) -> None:
    assert 100 <= _depth(value) <= 1_000


@given(hs.non_finite)
def test_non_finite_is_not_finite(value: float) -> None:
    assert not math.isfinite(value)


@given(hs.surrogate_text)
def test_surrogate_text_cannot_be_utf8(text: str) -> None:
    assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


@given(hs.deceptive_text)
def test_deceptive_text_holds_an_invisible_or_foreign_letter(text: str) -> None:
    suspicious = set(hs.BIDI_CONTROLS + hs.ZERO_WIDTH) | set(hs.CONFUSABLES.values())
    assert any(ch in suspicious for ch in text)


@settings(max_examples=5, deadline=None)
@given(st.one_of(hs.wide_object, hs.huge_string))
def test_big_values_are_big(value: Any) -> None:
    assert len(value) >= 5_000
