"""Shared fixtures: every test starts and ends with toolguard's global state reset."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

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


@pytest.fixture
def spans() -> Iterator[Any]:
    """A global tracer provider exporting to memory, for this test only (an
    ``InMemorySpanExporter`` of opentelemetry-sdk); the previous provider is put back."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )
    from opentelemetry.util._once import Once

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = (trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER)
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = Once(), None
    trace.set_tracer_provider(provider)
    _unbind_library_tracers()
    yield exporter
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = before
    _unbind_library_tracers()
    provider.shutdown()


def _unbind_library_tracers() -> None:
    """Make the MCP SDK's module-level tracer use the provider set now: OpenTelemetry's proxy
    tracer keeps the first provider it saw, which a previous test may have shut down."""
    import sys

    sdk = sys.modules.get("mcp.shared._otel")
    proxy = getattr(sdk, "_tracer", None)
    if proxy is not None and hasattr(proxy, "_real_tracer"):
        proxy._real_tracer = None
