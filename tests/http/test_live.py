"""``GET /hitl/reviews`` (every pending review, oldest thread first, filtered by the access hook)
and ``GET /hitl/events`` (server-sent events that follow the store), over real HTTP where the
stream matters: a uvicorn server on 127.0.0.1 in a thread, read with httpx (bounded).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Annotated, Any

import pytest

pytest.importorskip("fastapi", reason="the http extra (fastapi) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the http extra (uvicorn) is not installed")

import anyio  # noqa: E402
import httpx  # noqa: E402
from fastapi import Header  # noqa: E402

from tests.helpers import Outbox, make_page_tools, react, serve_in_thread  # noqa: E402
from toolguard import MemoryStore, ReviewedChat, ScriptedModel, ThreadState  # noqa: E402
from toolguard._gateway.routes import build_app  # noqa: E402
from toolguard._http import live  # noqa: E402
from toolguard.http import CONTENT_SECURITY_POLICY, create_app, pending_reviews  # noqa: E402

LIMIT = httpx.Timeout(10.0)


def make_chat(**options: Any) -> ReviewedChat:
    """The page tests' chat: "mail" asks for send_email, "book" for create_event."""
    return ReviewedChat(ScriptedModel([react], repeat=True), make_page_tools(Outbox()), **options)


def client_for(app: Any) -> httpx.AsyncClient:
    """An httpx client that talks HTTP to ``app`` in this event loop."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t.test")


def listed(thread: dict[str, Any]) -> dict[str, Any]:
    """The item of ``GET /hitl/reviews`` for a thread as ``GET /hitl/threads/{id}`` shows it
    (its tools need no quorum and no ask rule covers them: an approve may grant for each)."""
    return {
        "thread_id": thread["thread_id"],
        "review_id": thread["review_id"],
        "pending_review": thread["pending_review"],
        "grantable": [True] * len(thread["pending_review"]["action_requests"]),
    }


async def test_reviews_lists_every_pending_review_oldest_thread_first() -> None:
    """Three threads wait, one does not: exactly the three, in the order they were started."""
    chat = make_chat()
    async with client_for(create_app(chat)) as client:
        empty = (await client.get("/hitl/reviews")).json()
        ids = [
            (await client.post("/hitl/chat", json={"message": text})).json()["thread_id"]
            for text in ("mail bob", "hello", "book lunch", "mail and book")
        ]
        threads = [(await client.get(f"/hitl/threads/{i}")).json() for i in ids]
        answer = await client.get("/hitl/reviews")
    assert empty == {"reviews": []}
    assert answer.status_code == 200
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert answer.json() == {
        "reviews": [listed(threads[0]), listed(threads[2]), listed(threads[3])]
    }
    names = [
        [r["name"] for r in item["pending_review"]["action_requests"]]
        for item in answer.json()["reviews"]
    ]
    assert names == [["send_email"], ["create_event"], ["send_email", "create_event"]]


async def test_a_decided_review_leaves_the_list() -> None:
    """After an approval the thread is no longer listed; the other one still is."""
    chat = make_chat()
    async with client_for(create_app(chat)) as client:
        first = (await client.post("/hitl/chat", json={"message": "mail bob"})).json()
        second = (await client.post("/hitl/chat", json={"message": "book it"})).json()
        await client.post(
            "/hitl/review",
            json={
                "thread_id": first["thread_id"],
                "review_id": first["review_id"],
                "decisions": [{"type": "approve"}],
            },
        )
        after = (await client.get("/hitl/reviews")).json()
        kept = (await client.get(f"/hitl/threads/{second['thread_id']}")).json()
    assert after == {"reviews": [listed(kept)]}


async def test_the_access_hook_leaves_out_threads_the_caller_may_not_read() -> None:
    """Only threads the hook lets the reviewer read (operation "read"); the refusals are not
    audited (a listing is not an attempt to read a given thread)."""
    asked: list[tuple[str | None, str]] = []
    owners: dict[str, str] = {}

    def access(actor: str | None, state: ThreadState, operation: str) -> bool:
        asked.append((actor, operation))
        return operation != "read" or owners.get(state.thread_id) in (None, actor)

    def reviewer(x_reviewer: Annotated[str | None, Header()] = None) -> str | None:
        return x_reviewer

    chat = make_chat(access=access)
    async with client_for(create_app(chat, reviewer=reviewer)) as client:
        mine = (await client.post("/hitl/chat", json={"message": "mail"})).json()
        theirs = (await client.post("/hitl/chat", json={"message": "book"})).json()
        owners[mine["thread_id"]] = "maria"
        owners[theirs["thread_id"]] = "omar"
        asked.clear()
        maria = (await client.get("/hitl/reviews", headers={"X-Reviewer": "maria"})).json()
        nobody = (await client.get("/hitl/reviews")).json()
        state = await chat.store.load(theirs["thread_id"])
    assert [r["thread_id"] for r in maria["reviews"]] == [mine["thread_id"]]
    assert nobody == {"reviews": []}
    assert asked == [("maria", "read"), ("maria", "read"), (None, "read"), (None, "read")]
    assert state is not None
    assert [e.kind for e in state.audit] == ["requested"]


async def test_a_non_boolean_access_verdict_leaves_the_thread_out() -> None:
    """A hook that answers neither True nor False cannot judge: the thread is not listed."""
    chat = make_chat(access=lambda actor, state, operation: operation != "read" or "yes")
    async with client_for(create_app(chat)) as client:
        await client.post("/hitl/chat", json={"message": "mail"})
        answer = await client.get("/hitl/reviews")
    assert answer.json() == {"reviews": []}


async def test_a_damaged_thread_is_skipped() -> None:
    """One thread whose stored JSON is broken does not hide the others."""
    store = MemoryStore()
    chat = make_chat(store=store)
    async with client_for(create_app(chat)) as client:
        good = (await client.post("/hitl/chat", json={"message": "mail"})).json()
        store._threads["broken"] = (1, '{"thread_id": "broken", "status": ')
        answer = await client.get("/hitl/reviews")
        thread = (await client.get(f"/hitl/threads/{good['thread_id']}")).json()
    assert answer.json() == {"reviews": [listed(thread)]}


async def test_the_mcp_proxy_routes_answer_the_same() -> None:
    """The proxy's app lists exactly what create_router lists, adding each call's server and
    client (unknown here: no proxy opened these threads)."""
    chat = make_chat()
    async with client_for(create_app(chat)) as client:
        await client.post("/hitl/chat", json={"message": "mail"})
        await client.post("/hitl/chat", json={"message": "book"})
        ours = (await client.get("/hitl/reviews")).json()
    gateway = build_app(chat, allow_hosts=["t.test"])
    async with client_for(gateway) as proxy:
        unknown = {
            "server": {"target": None, "name": None, "version": None, "title": None},
            "client": None,
        }
        assert (await proxy.get("/hitl/reviews")).json() == {
            "reviews": [{**item, "call": unknown} for item in ours["reviews"]]
        }
    plain = [{k: v for k, v in item.items() if k != "grantable"} for item in ours["reviews"]]
    assert plain == await pending_reviews(chat)
    assert len(ours["reviews"]) == 2


async def test_a_store_that_cannot_list_threads_lists_nothing() -> None:
    """A custom store without thread_ids(): an empty list, not an error."""

    class NoListing:
        def __init__(self) -> None:
            self.inner = MemoryStore()

        async def load(self, thread_id: str) -> ThreadState | None:
            return await self.inner.load(thread_id)

        async def save(self, state: ThreadState, *, expected_version: int | None) -> ThreadState:
            return await self.inner.save(state, expected_version=expected_version)

    chat = make_chat(store=NoListing())
    async with client_for(create_app(chat)) as client:
        sent = await client.post("/hitl/chat", json={"message": "mail"})
        answer = await client.get("/hitl/reviews")
    assert sent.json()["pending_review"] is not None
    assert answer.json() == {"reviews": []}


async def test_pending_reviews_refuses_wrong_arguments() -> None:
    """The Python function names the argument that is wrong."""
    with pytest.raises(TypeError) as not_chat:
        await pending_reviews(MemoryStore())  # type: ignore[arg-type]
    with pytest.raises(TypeError) as not_actor:
        await pending_reviews(make_chat(), actor=True)  # type: ignore[arg-type]
    assert str(not_chat.value) == "chat must be a toolguard.ReviewedChat, got MemoryStore"
    assert str(not_actor.value) == "actor must be text, an int, a UUID or None, got bool"


# --- the event stream, over real HTTP --------------------------------------------------------


def read_events(lines: Iterator[str], count: int) -> list[tuple[str, Any]]:
    """The next ``count`` events (``retry`` and comments are skipped), as (event, data)."""
    events: list[tuple[str, Any]] = []
    name = "message"
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
            name = "message"
            if len(events) == count:
                return events
    pytest.fail(f"the stream ended after {events!r}")


@pytest.fixture(scope="module")
def live_chat() -> ReviewedChat:
    """The chat of the served app."""
    return make_chat()


@pytest.fixture(scope="module")
def base(live_chat: ReviewedChat) -> Iterator[str]:
    """The app under uvicorn on 127.0.0.1."""
    with serve_in_thread(create_app(live_chat)) as url:
        yield url


def test_events_stream_the_list_and_follow_changes_made_by_another_client(
    base: str, live_chat: ReviewedChat
) -> None:
    """The first event is the current list; a review started and then approved by another
    client shows as a thread event (status and version) and a new list each time."""
    with (
        httpx.Client(base_url=base, timeout=LIMIT) as client,
        httpx.Client(base_url=base, timeout=LIMIT) as other,
        client.stream("GET", "/hitl/events") as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert stream.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert stream.headers["cache-control"] == "no-store"
        lines = stream.iter_lines()
        assert next(lines) == "retry: 1000"
        first = read_events(lines, 1)
        turn = other.post("/hitl/chat", json={"message": "mail bob"}).json()
        thread = other.get(f"/hitl/threads/{turn['thread_id']}").json()
        created = read_events(lines, 2)
        other.post(
            "/hitl/review",
            json={
                "thread_id": turn["thread_id"],
                "review_id": turn["review_id"],
                "decisions": [{"type": "approve"}],
            },
        )
        decided = read_events(lines, 2)
        if decided[0] == ("thread", {**decided[0][1], "status": "running"}):
            # the store was read while the approved tool ran: the idle state follows
            decided = [decided[1], *read_events(lines, 1)]
        done = other.get(f"/hitl/threads/{turn['thread_id']}").json()
    done_version = anyio.run(live_chat.get_thread, turn["thread_id"]).version
    assert first == [("reviews", {"reviews": []})]
    requested_at = thread["actions"][0]["requested_at"]
    item = {**listed(thread), "requested_at": requested_at, "expires_at": None}
    assert created == [
        ("thread", {"thread_id": turn["thread_id"], "status": "awaiting_review", "version": 1}),
        ("reviews", {"reviews": [item]}),
    ]
    assert done["status"] == "idle"
    assert sorted(decided, key=lambda event: event[0]) == [
        ("reviews", {"reviews": []}),
        ("thread", {"thread_id": turn["thread_id"], "status": "idle", "version": done_version}),
    ]


def test_streams_over_the_limit_get_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stream reads the store every second: past the limit, a clear 503 (the page then
    polls GET /hitl/reviews)."""
    monkeypatch.setattr(live, "_EVENTS_MAX_STREAMS", 1)
    with (
        serve_in_thread(create_app(make_chat())) as url,
        httpx.Client(base_url=url, timeout=LIMIT) as client,
        client.stream("GET", "/hitl/events") as first,
    ):
        lines = first.iter_lines()  # kept: a dropped iterator would close the connection
        assert read_events(lines, 1) == [("reviews", {"reviews": []})]
        second = httpx.get(url + "/hitl/events", timeout=LIMIT)
        listing = httpx.get(url + "/hitl/reviews", timeout=LIMIT)
    assert second.status_code == 503
    assert second.json() == {
        "detail": "Too many live streams are open (1): close other pages, or poll"
        " GET /hitl/reviews instead."
    }
    assert second.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert listing.json() == {"reviews": []}


def test_a_stream_ends_when_the_server_shuts_down() -> None:
    """An open page never keeps the server from stopping: the stream ends, the server exits."""
    config = uvicorn.Config(
        create_app(make_chat()), log_level="warning", lifespan="off", ws="none", http="h11"
    )
    server = uvicorn.Server(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    runner = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    runner.start()
    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.05)
        assert server.started
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=LIMIT) as client,
            client.stream("GET", "/hitl/events") as stream,
        ):
            lines = stream.iter_lines()
            assert read_events(lines, 1) == [("reviews", {"reviews": []})]
            server.should_exit = True
            rest = list(lines)  # ends: the server closed the stream (or the read timed out)
        runner.join(timeout=10)
        assert not runner.is_alive()
        assert all(not line.startswith("data: ") for line in rest)
    finally:
        server.should_exit = True
        runner.join(timeout=10)
        sock.close()
