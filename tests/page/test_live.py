"""The approval page's live list of pending reviews, in a real headless Chromium: reviews
started by another client appear without a reload, a review approved elsewhere updates the
open page, every thread's review is listed, and polling takes over without EventSource.
Screenshots are saved to ``test-artifacts/live-*.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

import httpx  # noqa: E402

from tests.helpers import (  # noqa: E402
    ARTIFACTS,
    BOB_MAIL,
    NEEDS_CHROMIUM,
    TIMEOUT_MS,
    Outbox,
    Server,
    browser,
    make_page_chat,
    serve_in_thread,
)
from toolguard.http import create_app  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

expect = sync_api.expect
pytestmark = NEEDS_CHROMIUM
__all__ = ["browser"]  # a fixture, used by name
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture
def server() -> Iterator[Server]:
    """A fresh app (empty store) per test, so each test sees only its own reviews."""
    outbox = Outbox()
    with serve_in_thread(create_app(make_page_chat(outbox))) as url:
        yield Server(url, outbox)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A new tab (closed after the test, so no stream outlives its server)."""
    context = browser.new_context(viewport={"width": 900, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        context.close()


def outside(server: Server) -> httpx.Client:
    """Another client of the same server: a second reviewer, a script, another process."""
    return httpx.Client(base_url=server.url, timeout=10.0)


def start(client: httpx.Client, text: str) -> dict[str, Any]:
    """Send ``text`` in a new thread; the answer (with the pending review)."""
    answer: dict[str, Any] = client.post("/hitl/chat", json={"message": text}).json()
    return answer


def shown_queue(page: Page) -> list[list[str]]:
    """Each listed review as [tools, thread] texts."""
    items = page.get_by_test_id("queue-item")
    return [
        [
            items.nth(i).get_by_test_id("queue-tools").inner_text(),
            items.nth(i).get_by_test_id("queue-thread").inner_text(),
        ]
        for i in range(items.count())
    ]


def short(thread_id: str) -> str:
    """How the list shows a thread id."""
    return f"thread {thread_id[:8]}…"


def snap(page: Page, name: str) -> None:
    """Save the whole page to ``test-artifacts/NAME.png``."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_review_started_elsewhere_appears_without_a_reload(page: Page, server: Server) -> None:
    """The list starts empty; another client's review shows up live, with its tool and age."""
    page.goto(server.url + "/")
    expect(page.get_by_test_id("queue-empty")).to_have_text("No review is waiting.")
    expect(page.get_by_test_id("queue-live")).to_have_text("Live: updates as reviews arrive.")
    with outside(server) as client:
        turn = start(client, "please mail bob")
    expect(page.get_by_test_id("queue-item")).to_have_count(1)
    assert shown_queue(page) == [["send_email", short(turn["thread_id"])]]
    expect(page.get_by_test_id("queue-count")).to_have_text("(1)")
    expect(page.get_by_test_id("queue-age")).to_have_text("waiting less than a minute")
    expect(page.get_by_test_id("queue-empty")).to_be_hidden()
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    snap(page, "live-new-review")


def test_a_review_approved_elsewhere_updates_the_open_page(page: Page, server: Server) -> None:
    """Opening a listed review shows its card; approving it through the API from outside
    removes it from the list and shows the outcome in the open thread, without a reload."""
    with outside(server) as client:
        turn = start(client, "mail bob")
        page.goto(server.url + "/")
        page.get_by_test_id("queue-item").click()
        expect(page.get_by_test_id("review")).to_be_visible()
        expect(page.get_by_test_id("queue-item")).to_have_attribute("aria-current", "true")
        assert page.url == f"{server.url}/?thread={turn['thread_id']}"
        snap(page, "live-open-review")
        approved = client.post(
            "/hitl/review",
            json={
                "thread_id": turn["thread_id"],
                "review_id": turn["review_id"],
                "decisions": [{"type": "approve"}],
            },
        )
    assert approved.status_code == 200
    expect(page.get_by_test_id("review")).to_be_hidden()
    expect(page.get_by_test_id("queue-item")).to_have_count(0)
    expect(page.get_by_test_id("queue-empty")).to_be_visible()
    expect(page.get_by_test_id("status")).to_have_text(
        "This review was decided elsewhere; the conversation shows the outcome."
    )
    expect(page.get_by_test_id("messages")).to_contain_text("executed")
    expect(page.get_by_test_id("messages")).to_contain_text("Sent to bob@example.com: Lunch")
    expect(page.get_by_test_id("chat-input")).to_be_enabled()
    assert server.outbox.done == [("send_email", BOB_MAIL)]
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
    snap(page, "live-decided-elsewhere")


def test_the_list_shows_the_reviews_of_several_threads(page: Page, server: Server) -> None:
    """Three threads wait: all three are listed, oldest first; one decided in the page itself
    leaves the list and the others stay."""
    with outside(server) as client:
        turns = [start(client, text) for text in ("mail bob", "book lunch", "mail and book")]
    page.goto(server.url + "/")
    expect(page.get_by_test_id("queue-item")).to_have_count(3)
    assert shown_queue(page) == [
        ["send_email", short(turns[0]["thread_id"])],
        ["create_event", short(turns[1]["thread_id"])],
        ["send_email, create_event", short(turns[2]["thread_id"])],
    ]
    snap(page, "live-several-threads")
    page.get_by_test_id("queue-item").nth(1).click()
    expect(page.get_by_test_id("review")).to_be_visible()
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("review")).to_be_hidden()
    expect(page.get_by_test_id("queue-item")).to_have_count(2)
    assert [row[1] for row in shown_queue(page)] == [
        short(turns[0]["thread_id"]),
        short(turns[2]["thread_id"]),
    ]
    assert server.outbox.done == [("create_event", {"title": "Team lunch", "day": "Friday"})]


def test_without_event_source_the_page_polls(page: Page, server: Server) -> None:
    """Without EventSource (missing, or failed for good), polling keeps the list current."""
    page.add_init_script("delete window.EventSource;")
    page.goto(server.url + "/")
    expect(page.get_by_test_id("queue-live")).to_have_text("Updated every few seconds.")
    with outside(server) as client:
        turn = start(client, "mail bob")
    expect(page.get_by_test_id("queue-item")).to_have_count(1)
    assert shown_queue(page) == [["send_email", short(turn["thread_id"])]]
