"""The approval page of ``toolguard serve`` signed in with its one-time link, in headless Chromium:
without the link the page says how to get one; the link signs the browser in (the address keeps
no code) as the user running the server; a second browser cannot reuse it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytest.importorskip("axe_playwright_python", reason="the dev extra is not installed")

from tests.helpers import (  # noqa: E402
    ARTIFACTS,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    browser,
    command_env,
    free_port,
    send,
    serious_axe_violations,
    sign_in_link,
    wait_for_page,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name

REVIEWER = "maria"
LINK_TEXT = (
    "Open this server's sign-in link: the command that started it printed the link, and"
    " toolguard link prints a new one in a terminal on the same machine. Each link signs in"
    " one browser."
)
NO_SESSION = (
    "Sign-in required: open this server's sign-in link; toolguard link prints it in a terminal"
    " on this machine."
)
USED = (
    "Sign-in failed: this sign-in link was used already or is not this server's (a link signs in"
    " one browser); toolguard link prints a new one in a terminal on this machine. If you did not"
    " use it, someone else did: restart the server to sign every browser out."
)
LIVE = "Live: updates as reviews arrive."


@dataclass
class Served:
    url: str  # the page, without the final slash
    link: str  # the link printed at start
    runtime: Path  # the folder of the runtime files

    def current_link(self) -> str:
        """The link now in the server's runtime file (what toolguard link prints)."""
        [kept] = self.runtime.iterdir()
        link: str = json.loads(kept.read_text(encoding="utf-8"))["link"]
        return link


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``python -m toolguard serve`` as user maria, signing in with the link."""
    folder = tmp_path_factory.mktemp("served")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    runtime = folder / "runtime"
    env = {**command_env(), "TOOLGUARD_RUNTIME_DIR": str(runtime), "LOGNAME": REVIEWER}
    out, err = folder / "stdout.txt", folder / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolguard", "serve", "--port", str(port), "--db", ":memory:"],
            cwd=folder,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        assert wait_for_page(process, f"{url}/") is not None, err.read_text()
        link = sign_in_link(out.read_text().splitlines()[1], "serve", f"{url}/")
        yield Served(url, link, runtime)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def open_page(browser: Browser) -> Page:
    """A page in a new context (closed with the page's context by the caller)."""
    context = browser.new_context(viewport={"width": 900, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def visible_parts(page: Page) -> list[str]:
    """The test ids of the page's parts that are shown."""
    parts = ["sign-in", "proxy-needed", "link-needed", "app", "account", "sign-out"]
    return [part for part in parts if page.get_by_test_id(part).is_visible()]


def snap(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_without_the_link_the_page_says_how_to_get_one(browser: Browser, served: Served) -> None:
    """No form to type into, no list, no stream: how the person at the machine gets a link."""
    page = open_page(browser)
    asked: list[tuple[str, str]] = []
    page.on("request", lambda request: asked.append((request.method, request.url)))
    try:
        page.goto(served.url + "/")
        expect(page.get_by_role("heading", name="Sign in with the link")).to_be_visible()
        expect(page.get_by_test_id("link-text")).to_have_text(LINK_TEXT)
        expect(page.get_by_test_id("link-detail")).to_have_text("")  # a first visit: no error
        assert visible_parts(page) == ["link-needed"]
        assert [(m, u) for m, u in asked if "/hitl/" in u] == [
            ("GET", f"{served.url}/hitl/session")
        ]
        assert page.context.cookies() == []
        assert serious_axe_violations(page) == []
        snap(page, "sign-in-link-needed")
    finally:
        page.context.close()


def test_the_link_signs_one_browser_in_and_the_address_keeps_no_code(
    browser: Browser, served: Served
) -> None:
    page = open_page(browser)
    other = open_page(browser)
    try:
        page.goto(served.link)
        expect(page.get_by_test_id("signed-in")).to_have_text(f"Signed in as {REVIEWER}")
        expect(page.get_by_test_id("queue-live")).to_have_text(LIVE)
        assert page.url == served.url + "/"  # the code is not in the address bar
        assert visible_parts(page) == ["app", "account"]  # nothing to sign out of
        [cookie] = page.context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (
            "toolguard_session",
            True,
            "Strict",
            "/",
        )
        assert page.evaluate("document.cookie") == ""  # the page's script cannot read it
        snap(page, "sign-in-link-signed-in")
        # A second browser cannot reuse the link: the server says why, and nobody is in.
        answer = other.goto(served.link)
        assert answer is not None
        assert (answer.status, answer.json()) == (401, {"detail": USED})
        other.goto(served.url + "/")
        expect(other.get_by_test_id("link-needed")).to_be_visible()
        assert visible_parts(other) == ["link-needed"]
        # The link that replaced it (toolguard link prints it) signs the second browser in.
        fresh = served.current_link()
        assert fresh != served.link
        other.goto(fresh)
        expect(other.get_by_test_id("signed-in")).to_have_text(f"Signed in as {REVIEWER}")
        assert other.url == served.url + "/"
        # A session that ends while the page is in use: the page says why and closes.
        page.context.clear_cookies()
        send(page, "hello")
        expect(page.get_by_test_id("link-detail")).to_have_text(NO_SESSION)
        assert visible_parts(page) == ["link-needed"]
    finally:
        page.context.close()
        other.context.close()
