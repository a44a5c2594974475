"""Metrics of the scripted day (tests/cli/day.py): in an OpenTelemetry InMemoryMetricReader, at
``GET /metrics`` (``--metrics``, behind sign-in) and on a loopback port (``--metrics-port``)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.cli.day import record_day
from tests.helpers import command_env, free_port, serve_in_thread, wait_for_page
from toolguard import MemoryStore, ReviewedChat, ScriptedModel
from toolguard._cli.main import main
from toolguard._gateway.routes import build_app as gateway_app
from toolguard._http.metrics import PrometheusMetrics
from toolguard.http import HeaderAuth, create_app

CALLS = {
    ("send_email", "executed", "person"): 5,
    ("delete_file", "rejected", "person"): 5,
    ("transfer", "executed", "person"): 2,
    ("transfer", "expired", "none"): 1,
    ("transfer", "cancelled", "person"): 1,
    ("send_sms", "executed", "person"): 1,
    ("send_sms", "executed", "grant"): 2,
    ("pay_invoice", "executed", "judge"): 2,
    ("wipe_disk", "denied", "rule"): 1,
    ("delete_file", "executed", "shadow"): 2,
    ("wipe_disk", "executed", "shadow"): 1,
}
"""The day's calls by tool, outcome and who decided."""
WAITS = {
    ("send_email", "approve"): (5, 400.0),
    ("delete_file", "reject"): (5, 125.0),
    ("transfer", "approve"): (1, 12.0),
    ("transfer", "edit"): (1, 8.0),
    ("send_sms", "approve"): (1, 5.0),
}
"""How many decisions and how many seconds in all, by tool and decision."""


@pytest.fixture
def reader() -> Iterator[Any]:
    """A global meter provider reading into memory, for this test only."""
    from opentelemetry.metrics import _internal as otel_metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.util._once import Once

    memory = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[memory])
    before = (otel_metrics._METER_PROVIDER_SET_ONCE, otel_metrics._METER_PROVIDER)
    otel_metrics._METER_PROVIDER_SET_ONCE, otel_metrics._METER_PROVIDER = Once(), None
    otel_metrics.set_meter_provider(provider)
    yield memory
    otel_metrics._METER_PROVIDER_SET_ONCE, otel_metrics._METER_PROVIDER = before
    provider.shutdown()


def test_an_in_memory_reader_counts_every_call_once(reader: Any) -> None:
    anyio.run(record_day, MemoryStore())
    [resource] = reader.get_metrics_data().resource_metrics
    [scope] = resource.scope_metrics
    assert scope.scope.name == "toolguard"
    found = {metric.name: metric for metric in scope.metrics}
    assert sorted(found) == ["toolguard.review.duration", "toolguard.tool.calls"]
    calls, waits = found["toolguard.tool.calls"], found["toolguard.review.duration"]
    assert (calls.unit, waits.unit) == ("{call}", "s")
    assert {
        (
            p.attributes["gen_ai.tool.name"],
            p.attributes["toolguard.outcome"],
            p.attributes["toolguard.decided_by"],
        ): p.value
        for p in calls.data.data_points
    } == CALLS
    assert {
        (p.attributes["gen_ai.tool.name"], p.attributes["toolguard.review.decision"]): (
            p.count,
            p.sum,
        )
        for p in waits.data.data_points
    } == WAITS


def _lines(text: str) -> set[str]:
    """The samples of toolguard's metrics (not the ``_created`` times, which vary)."""
    return {
        line
        for line in text.splitlines()
        if line.startswith("toolguard_") and "_created" not in line
    }


def labels(tool: str, decision: str) -> str:
    """The histogram's labels, as Prometheus writes them (sorted)."""
    return f'decision="{decision}",tool="{tool}"'


EXPECTED = {
    f'toolguard_tool_calls_total{{decided_by="{by}",outcome="{outcome}",tool="{tool}"}} {n}.0'
    for (tool, outcome, by), n in CALLS.items()
} | {
    line
    for (tool, decision), (count, total) in WAITS.items()
    for line in (
        f"toolguard_review_duration_seconds_count{{{labels(tool, decision)}}} {count}.0",
        f"toolguard_review_duration_seconds_sum{{{labels(tool, decision)}}} {total}",
    )
}


@pytest.fixture
def prometheus() -> Iterator[PrometheusMetrics]:
    """``--metrics`` in this process, stopped afterwards."""
    sink = PrometheusMetrics()
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()


@pytest.mark.parametrize("gateway", [False, True])
def test_metrics_at_slash_metrics_behind_sign_in_and_on_a_loopback_port(
    prometheus: PrometheusMetrics, *, gateway: bool
) -> None:
    anyio.run(record_day, MemoryStore())
    chat = ReviewedChat(ScriptedModel([]), [])
    auth = HeaderAuth("X-Forwarded-User")
    app = (
        gateway_app(chat, auth=auth, allow_hosts=["*"]) if gateway else create_app(chat, auth=auth)
    )
    with serve_in_thread(app) as url:
        assert httpx.get(f"{url}/metrics", timeout=5).status_code == 401
        answer = httpx.get(f"{url}/metrics", headers={"X-Forwarded-User": "ops"}, timeout=5)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        samples = _lines(answer.text)
    assert {s for s in samples if "_bucket" not in s} == EXPECTED
    thirty = (
        'toolguard_review_duration_seconds_bucket{decision="approve",le="30.0",tool="send_email"}'
    )
    assert f"{thirty} 3.0" in samples  # 10, 20 and 30 seconds
    port = prometheus.serve_on(0)
    loopback = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert loopback.status_code == 200
    assert _lines(loopback.text) == samples


def test_no_metrics_route_without_the_option() -> None:
    app = create_app(ReviewedChat(ScriptedModel([]), []))
    with serve_in_thread(app) as url:
        assert httpx.get(f"{url}/metrics", timeout=5).status_code == 404


def test_option_mistakes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--metrics", "--workers", "2"]) == 2
    assert capsys.readouterr().err == (
        "error: --metrics counts the calls of one process; it cannot be used with --workers 2"
        " (run one process, or give the application an OpenTelemetry meter provider)\n"
    )
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["mcp-proxy", "--metrics-port", str(port), "--", "true"]) == 2
    assert capsys.readouterr().err == (
        f"error: --metrics-port {port}: cannot listen on 127.0.0.1:{port}: Address already in"
        " use; choose another --metrics-port\n"
    )


def test_toolguard_serve_metrics(tmp_path: Path) -> None:
    """`toolguard serve --metrics --metrics-port`: an approved call and a read are counted, at
    /metrics on the server (no sign-in here: --no-auth) and on the loopback port."""
    port, metrics_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "toolguard", "serve", "--no-auth", "--port", str(port)]
    command += ["--db", "demo.sqlite3", "--metrics", "--metrics-port", str(metrics_port)]
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=command_env(), stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        assert wait_for_page(process, f"{base}/") is not None, err.read_text()
        with httpx.Client(base_url=base, timeout=10) as client:
            ask = "email alice that the meeting moved to 11"
            turn = client.post("/hitl/chat", json={"message": ask}).json()
            decided = client.post(
                "/hitl/review",
                json={
                    "thread_id": turn["thread_id"],
                    "review_id": turn["review_id"],
                    "decisions": [{"type": "approve"}],
                },
            )
            assert decided.status_code == 200
            client.post("/hitl/chat", json={"message": "what is on my calendar?"})
            served = _lines(client.get("/metrics").text)
        on_port = _lines(httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    calls = {line for line in served if line.startswith("toolguard_tool_calls_total")}
    assert calls == {
        'toolguard_tool_calls_total{decided_by="person",outcome="executed",tool="send_email"} 1.0',
        'toolguard_tool_calls_total{decided_by="none",outcome="executed",tool="list_events"} 1.0',
    }
    assert on_port == served
    assert f"toolguard: metrics at http://127.0.0.1:{metrics_port}/metrics (no sign-in)" in (
        err.read_text()
    )
