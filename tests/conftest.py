"""Shared fixtures: every test starts and ends with toolguard's global state reset."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from toolguard._policy import stand_in as _override
from toolguard.text import set_language


@pytest.fixture(autouse=True)
def _reset_toolguard_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Reset the message language, TOOLGUARD_LANG and the stand-in reviewer around each test."""
    monkeypatch.delenv("TOOLGUARD_LANG", raising=False)
    set_language(None)
    _override.set_stand_in(None)
    yield
    set_language(None)
    _override.set_stand_in(None)


@pytest.fixture(autouse=True, scope="module")
def _collect_garbage_per_module() -> Iterator[None]:
    """Collect garbage after each module, so an unclosed socket or file is reported by the
    module that leaked it (filterwarnings = error), not by whichever later test the
    garbage collector happens to run in."""
    yield
    gc.collect()
