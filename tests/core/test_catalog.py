"""Tests for the message catalogs: language selection and the default error texts."""

from __future__ import annotations

import re

import pytest

import toolguard
from toolguard import NoPendingReviewError, ReviewPendingError
from toolguard.text import get_language, set_language

NO_PENDING_EN = "There is no action awaiting approval in this conversation"
NO_PENDING_ID = "Tidak ada aksi yang menunggu persetujuan di percakapan ini"
REVIEW_PENDING_EN = "Some actions are still awaiting approval. Send their decisions first."
REVIEW_PENDING_ID = "Masih ada aksi yang menunggu persetujuan. Kirim keputusannya dulu."


def test_default_language_is_english() -> None:
    """Without a choice in code or in the environment the language is English."""
    assert get_language() == "en"


@pytest.mark.parametrize("language", ["id", "en"])
def test_set_language_selects_the_catalog(language: str) -> None:
    """set_language("id") and set_language("en") are reported by get_language."""
    set_language(language)
    assert get_language() == language


def test_set_language_none_forgets_the_choice() -> None:
    """set_language(None) after "id" goes back to the default English."""
    set_language("id")
    set_language(None)
    assert get_language() == "en"


def test_set_language_none_lets_the_environment_apply_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After set_language(None) the TOOLGUARD_LANG variable decides again."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    set_language("en")
    assert get_language() == "en"
    set_language(None)
    assert get_language() == "id"


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("fr", "Unknown language 'fr'. Available: ['en', 'id']"),
        ("", "Unknown language ''. Available: ['en', 'id']"),
        ("ID", "Unknown language 'ID'. Available: ['en', 'id']"),
        ("indonesian", "Unknown language 'indonesian'. Available: ['en', 'id']"),
    ],
)
def test_unknown_language_is_refused(language: str, text: str) -> None:
    """An unknown language raises ValueError with the exact text and keeps the old choice."""
    set_language("id")
    with pytest.raises(ValueError, match=re.escape(text)) as info:
        set_language(language)
    assert str(info.value) == text
    assert get_language() == "id"


@pytest.mark.parametrize("value", ["id", "ID", " id ", "Id\n"])
def test_environment_variable_selects_indonesian(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """TOOLGUARD_LANG=id (any case, surrounding blanks ignored) selects Indonesian."""
    monkeypatch.setenv("TOOLGUARD_LANG", value)
    assert get_language() == "id"


@pytest.mark.parametrize("value", ["fr", "", "english", "id-ID", "xx"])
def test_unknown_environment_value_falls_back_to_english(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """An unknown TOOLGUARD_LANG value gives English instead of an error."""
    monkeypatch.setenv("TOOLGUARD_LANG", value)
    assert get_language() == "en"


def test_language_set_in_code_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """set_language("en") wins over TOOLGUARD_LANG=id."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    set_language("en")
    assert get_language() == "en"


def test_environment_is_read_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing TOOLGUARD_LANG later changes the language without a restart."""
    assert get_language() == "en"
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    assert get_language() == "id"


def test_default_texts_in_english() -> None:
    """NoPendingReviewError and ReviewPendingError carry the English catalog texts."""
    assert str(NoPendingReviewError()) == NO_PENDING_EN
    assert str(ReviewPendingError()) == REVIEW_PENDING_EN


def test_default_texts_in_indonesian() -> None:
    """With set_language("id") both errors carry the seed's Indonesian texts."""
    set_language("id")
    assert str(NoPendingReviewError()) == NO_PENDING_ID
    assert str(ReviewPendingError()) == REVIEW_PENDING_ID


def test_default_texts_in_indonesian_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With TOOLGUARD_LANG=id both errors carry the Indonesian texts."""
    monkeypatch.setenv("TOOLGUARD_LANG", "id")
    assert str(NoPendingReviewError()) == NO_PENDING_ID
    assert str(ReviewPendingError()) == REVIEW_PENDING_ID


def test_text_is_fixed_when_the_error_is_created() -> None:
    """An error keeps the language in force when it was raised, even if it changes later."""
    error = NoPendingReviewError()
    set_language("id")
    assert str(error) == NO_PENDING_EN
    assert str(NoPendingReviewError()) == NO_PENDING_ID


def test_explicit_text_overrides_the_catalog() -> None:
    """A text given to the constructor replaces the catalog text."""
    set_language("id")
    assert str(NoPendingReviewError("custom")) == "custom"
    assert str(ReviewPendingError("other")) == "other"


def test_error_bases() -> None:
    """NoPendingReviewError is a LookupError and ReviewPendingError a RuntimeError."""
    assert issubclass(NoPendingReviewError, LookupError)
    assert issubclass(NoPendingReviewError, toolguard.ToolguardError)
    assert issubclass(ReviewPendingError, RuntimeError)
    assert issubclass(ReviewPendingError, toolguard.ToolguardError)


def test_model_constants_do_not_change_with_the_language() -> None:
    """REJECTED_BY_USER_MESSAGE and NO_DECISION are wire constants, the same in every language."""
    set_language("id")
    assert toolguard.REJECTED_BY_USER_MESSAGE == "User rejected this action. It was not executed."
    assert toolguard.NO_DECISION == "No decision was given for this action. It was not executed."


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("en", "Tool `send_email` is awaiting approval"),
        ("id", "Tool `send_email` menunggu persetujuan"),
    ],
)
def test_action_description_in_both_languages(language: str, text: str) -> None:
    """The payload description is the catalog text of the language in force."""
    set_language(language)
    payload = toolguard.PendingReview.for_actions([("send_email", {}, None)])
    assert payload.action_requests[0].description == text
