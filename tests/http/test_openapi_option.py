"""``toolguard serve`` and ``toolguard mcp-proxy`` serve no API docs by default: ``--openapi``
serves the OpenAPI document as JSON (under the page's strict policy); the ``/docs`` and
``/redoc`` pages, whose Swagger UI and ReDoc load scripts from a CDN, are never served.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx", reason="the http extra is not installed")
pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")

from tests.helpers import (  # noqa: E402
    ROOT,
    client_for,
    command_env,
    free_port,
    make_mail_chat,
    security_headers,
    security_headers_once,
    wait_for_page,
)
from toolguard._gateway.routes import build_app  # noqa: E402

NOT_FOUND = {"detail": "Not Found"}


@pytest.mark.parametrize("openapi", [False, True], ids=["default", "--openapi"])
def test_serve_serves_the_openapi_document_only_when_asked(tmp_path: Path, openapi: bool) -> None:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "toolguard", "serve", "--port", str(port), "--no-auth"]
    command += ["--db", str(tmp_path / "serve.sqlite3"), *(["--openapi"] if openapi else [])]
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=command_env(), stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        page = wait_for_page(process, f"{base_url}/")
        assert page is not None, f"the server did not answer; stderr:\n{err.read_text()}"
        answers = {
            path: httpx.get(f"{base_url}{path}", timeout=10)
            for path in ("/openapi.json", "/docs", "/redoc")
        }
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    for answer in answers.values():
        assert security_headers(answer) == security_headers_once()
    assert [(answers[p].status_code, answers[p].json()) for p in ("/docs", "/redoc")] == [
        (404, NOT_FOUND)
    ] * 2
    document = answers["/openapi.json"]
    if openapi:
        assert document.status_code == 200
        assert document.json()["info"]["title"] == "toolguard"
        assert "/hitl/review" in document.json()["paths"]
    else:
        assert (document.status_code, document.json()) == (404, NOT_FOUND)


@pytest.mark.parametrize("openapi", [False, True], ids=["default", "openapi"])
async def test_the_gateway_app_serves_the_openapi_document_only_when_asked(openapi: bool) -> None:
    """mcp-proxy's app (``--openapi``): the same as serve's, never a docs page."""
    app = build_app(make_mail_chat([], []), openapi=openapi)
    async with client_for(app) as client:
        answers = {
            path: await client.get(path, headers={"Host": "127.0.0.1:8765"})
            for path in ("/openapi.json", "/docs", "/redoc")
        }
    assert {path: answer.status_code for path, answer in answers.items()} == {
        "/openapi.json": 200 if openapi else 404,
        "/docs": 404,
        "/redoc": 404,
    }
    if openapi:
        assert answers["/openapi.json"].json()["info"]["title"] == "toolguard mcp-proxy"
        assert "/hitl/audit" in answers["/openapi.json"].json()["paths"]
    for answer in answers.values():
        assert security_headers(answer) == security_headers_once()


@pytest.mark.parametrize("openapi", [False, True], ids=["default", "--openapi"])
def test_mcp_proxy_serves_the_openapi_document_only_when_asked(
    tmp_path: Path, openapi: bool
) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "toolguard", "mcp-proxy", "--port", str(port), "--no-auth"]
    command += ["--db", str(tmp_path / "proxy.sqlite3"), *(["--openapi"] if openapi else [])]
    command += ["--", sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        process = subprocess.Popen(  # stdin stays open: the gateway serves until it closes
            command,
            cwd=ROOT,
            env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "ran.jsonl")},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        page = wait_for_page(process, f"{base_url}/")
        assert page is not None, f"the gateway did not answer; stderr:\n{err.read_text()}"
        answers = {
            path: httpx.get(f"{base_url}{path}", timeout=10)
            for path in ("/openapi.json", "/docs", "/redoc")
        }
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    assert {path: answer.status_code for path, answer in answers.items()} == {
        "/openapi.json": 200 if openapi else 404,
        "/docs": 404,
        "/redoc": 404,
    }
    if openapi:
        assert "/hitl/audit" in answers["/openapi.json"].json()["paths"]
    for answer in answers.values():
        assert security_headers(answer) == security_headers_once()
