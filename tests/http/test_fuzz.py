"""Fuzzing the HTTP API: any body to POST /hitl/review or /hitl/chat gets a documented answer.

Every answer has a documented status (200, 400, 404, 409, 422; never 500)
and errors have the body ``{"detail": ...}``. An independent model of the
specification (``expected_answer``) predicts the status and, for 400/404,
the exact text. A refused request leaves the paused thread exactly as it
was (``GET /hitl/threads/{id}`` answers the same JSON) and runs no tool; an
accepted review runs exactly the approved and correctly edited calls.

The app is built once per test and driven in process through
``httpx.ASGITransport``; one paused thread is reused by every example (a
refusal must not change it) and replaced only after a review is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolguard import Message, ModelResponse, ReviewedChat, ToolCall
from toolguard.http import create_app

DOCUMENTED = (200, 400, 404, 409, 422)
ASK = "Mail Alice and Bob that the meeting moved."
REPLY = "Both emails are handled."
ALICE = "alice@example.com"
BOB = "bob@example.com"
SUBJECT = "Meeting"
DESCRIPTION = "Tool `send_email` is awaiting approval"
CONFIG = {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject"]}
HEX_ID = re.compile(r"[0-9a-f]{32}")
EMAIL_KEYS = {"to", "subject", "body"}
FUZZ = settings(
    max_examples=150,
    deadline=None,
    # One world (app + paused thread) per test is the point: examples must not change it.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def email(to: str, message: str) -> dict[str, str]:
    """The arguments the model proposes for one recipient."""
    return {"to": to, "subject": SUBJECT, "body": message}


class TwoMailModel:
    """A user message -> two guarded send_email calls (Alice, Bob); tool results -> REPLY."""

    def __init__(self) -> None:
        self.turns = 0

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Propose the two emails after a user message; answer after the tool results."""
        last = messages[-1]
        if last["role"] != "user":
            return ModelResponse(text=REPLY)
        self.turns += 1
        return ModelResponse(
            tool_calls=[
                ToolCall(id=f"call_{self.turns}_a", name="send_email", args=email(ALICE, ASK)),
                ToolCall(
                    id=f"call_{self.turns}_b",
                    name="send_email",
                    args=email(BOB, last["content"]),
                ),
            ]
        )


class Ref:
    """A placeholder in a generated body for the current paused thread's id or review id."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<current {self.name}>"


THREAD = Ref("thread_id")
REVIEW = Ref("review_id")


# --- the world: one app, one paused thread --------------------------------------------------------


class World:
    """The app under test, its tool-run log and the paused thread every example starts from."""

    def __init__(self, portal: BlockingPortal) -> None:
        self.portal = portal
        self.runs: list[dict[str, str]] = []
        runs = self.runs

        async def send_email(to: str, subject: str, body: str) -> str:
            """Send an email.

            Args:
                to: the recipient's address.
                subject: the subject line.
                body: the text.
            """
            runs.append({"to": to, "subject": subject, "body": body})
            return f"sent to {to}"

        self.app: FastAPI = create_app(ReviewedChat(TwoMailModel(), [send_email]), page=False)
        self.thread_id = ""
        self.review_id = ""
        self.snapshot: dict[str, Any] = {}
        portal.call(self.pause)

    def client(self) -> httpx.AsyncClient:
        """An in-process client; a 500 comes back as a response, not as an exception."""
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        return httpx.AsyncClient(transport=transport, base_url="http://toolguard.test")

    async def pause(self) -> None:
        """Start a new thread that waits for a review of two actions; remember its state."""
        async with self.client() as client:
            answer = (await client.post("/hitl/chat", json={"message": ASK})).json()
            self.thread_id, self.review_id = answer["thread_id"], answer["review_id"]
            assert answer == {
                "thread_id": self.thread_id,
                "reply": None,
                "pending_review": pending_review(ASK),
                "review_id": self.review_id,
            }
            self.snapshot = await self.thread(client)
        assert self.snapshot["status"] == "awaiting_review"

    async def thread(self, client: httpx.AsyncClient) -> dict[str, Any]:
        """The paused thread as GET /hitl/threads/{id} answers it."""
        response = await client.get(f"/hitl/threads/{self.thread_id}")
        assert response.status_code == 200
        data: dict[str, Any] = response.json()
        return data

    def resolve(self, value: Any) -> Any:
        """``value`` with the placeholders replaced by the current ids."""
        if value is THREAD:
            return self.thread_id
        if value is REVIEW:
            return self.review_id
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value

    def post_json(self, path: str, template: Any) -> None:
        """POST ``template`` (placeholders resolved) as JSON and check the whole outcome."""
        body = self.resolve(template)
        self.portal.call(self._post_and_check, path, json.dumps(body).encode(), body)

    def post_raw(self, path: str, raw: bytes) -> None:
        """POST ``raw`` bytes labelled as JSON and check that they are refused with a 422."""
        self.portal.call(self._post_and_check, path, raw, _NOT_JSON)

    async def _post_and_check(self, path: str, raw: bytes, body: Any) -> None:
        ran_before = len(self.runs)
        headers = {"content-type": "application/json"}
        async with self.client() as client:
            response = await client.post(path, content=raw, headers=headers)
            status, detail = expected_answer(path, body, self)
            assert response.status_code in DOCUMENTED, response.text
            answer = response.json()
            assert (response.status_code, shape(answer, status)) == (status, detail)
            if status == 200 and path == "/hitl/review":
                await self._check_applied(client, body["decisions"], answer, ran_before)
                await self.pause()
                return
            if status == 200:
                _check_new_thread(answer, body["message"], self.thread_id)
            assert (await self.thread(client), self.runs[ran_before:]) == (self.snapshot, [])

    async def _check_applied(
        self,
        client: httpx.AsyncClient,
        decisions: list[dict[str, Any]],
        answer: dict[str, Any],
        ran_before: int,
    ) -> None:
        """An accepted review ran exactly the approved and correctly edited calls, then replied."""
        assert answer == {
            "thread_id": self.thread_id,
            "reply": REPLY,
            "pending_review": None,
            "review_id": None,
        }
        thread = await self.thread(client)
        proposed = [email(ALICE, ASK), email(BOB, ASK)]
        statuses, executed = [], []
        for decision, args in zip(decisions, proposed, strict=True):
            if decision["type"] == "approve":
                statuses.append("executed")
                executed.append(args)
            elif decision["type"] == "reject":
                statuses.append("rejected")
            elif runs_as_email(decision["edited_action"]):
                statuses.append("executed")
                executed.append(decision["edited_action"]["args"])
            else:
                statuses.append("failed")
        actions = thread["actions"]
        assert (
            thread["status"],
            thread["pending_review"],
            thread["review_id"],
            thread["messages"][-1],
            [a["status"] for a in actions],
        ) == ("idle", None, None, {"role": "assistant", "content": REPLY}, statuses)
        assert sorted(self.runs[ran_before:], key=_key) == sorted(executed, key=_key)


_NOT_JSON = object()


def _key(args: dict[str, Any]) -> str:
    return json.dumps(args, sort_keys=True)


def pending_review(message: str) -> dict[str, Any]:
    """The pending review the model's two calls produce for a user message."""
    return {
        "action_requests": [
            {"name": "send_email", "args": email(ALICE, ASK), "description": DESCRIPTION},
            {"name": "send_email", "args": email(BOB, message), "description": DESCRIPTION},
        ],
        "review_configs": [CONFIG, CONFIG],
    }


def _check_new_thread(answer: dict[str, Any], message: str, paused_id: str) -> None:
    """A chat without thread_id started a new thread that waits for its own review."""
    thread_id, review_id = answer["thread_id"], answer["review_id"]
    assert HEX_ID.fullmatch(thread_id)
    assert HEX_ID.fullmatch(review_id)
    assert thread_id != paused_id
    assert answer == {
        "thread_id": thread_id,
        "reply": None,
        "pending_review": pending_review(message),
        "review_id": review_id,
    }


def shape(answer: Any, status: int) -> Any:
    """What is compared with ``expected_answer``'s second item.

    A 200 answers the full ChatResponse (checked separately), a 422 FastAPI's
    list of validation errors, the other errors ``{"detail": text}``.
    """
    if status == 200:
        assert sorted(answer) == ["pending_review", "reply", "review_id", "thread_id"]
        return None
    assert sorted(answer) == ["detail"]
    if status == 422:
        errors = answer["detail"]
        assert isinstance(errors, list)
        assert errors
        assert all({"type", "loc", "msg"} <= set(error) for error in errors)
        return None
    return answer["detail"]


# --- the specification, written out independently ----------------------------------------------


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _optional_text(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is None or _is_text(body[key])


def decision_has_valid_shape(item: Any) -> bool:
    """ReviewDecision (pydantic): the type, an edit's edited_action shape, a reject's message."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if not _is_text(kind) or kind not in ("approve", "edit", "reject"):
        return False
    edited = item.get("edited_action")
    if kind == "edit" and edited is not None:
        return (
            isinstance(edited, dict)
            and _is_text(edited.get("name"))
            and isinstance(edited.get("args"), dict)
        )
    return kind != "reject" or _optional_text(item, "message")


def runs_as_email(edited: dict[str, Any]) -> bool:
    """Whether an edit runs send_email: the right name and exactly its three text arguments."""
    args = edited["args"]
    return (
        edited["name"] == "send_email"
        and set(args) == EMAIL_KEYS
        and all(_is_text(value) for value in args.values())
    )


def expected_answer(path: str, body: Any, world: World) -> tuple[int, str | None]:
    """The status and, for 400/404, the exact ``detail`` the specification asks for."""
    if path == "/hitl/chat":
        return _expected_chat(body, world)
    return _expected_review(body, world)


def _unknown(thread_id: str) -> tuple[int, str]:
    return 404, f"Unknown thread_id {thread_id!r}: start a conversation with POST /hitl/chat"


def _expected_chat(body: Any, world: World) -> tuple[int, str | None]:
    if not (
        isinstance(body, dict)
        and _is_text(body.get("message"))
        and len(body["message"]) >= 1
        and _optional_text(body, "thread_id")
    ):
        return 422, None
    thread_id = body.get("thread_id")
    if thread_id is None:
        return 200, None
    if thread_id != world.thread_id:
        return _unknown(thread_id)
    return 400, "Some actions are still awaiting approval. Send their decisions first."


def _expected_review(body: Any, world: World) -> tuple[int, str | None]:
    if not (
        isinstance(body, dict)
        and _is_text(body.get("thread_id"))
        and isinstance(body.get("decisions"), list)
        and len(body["decisions"]) >= 1
        and all(decision_has_valid_shape(d) for d in body["decisions"])
        and _optional_text(body, "review_id")
    ):
        return 422, None
    if body["thread_id"] != world.thread_id:
        return _unknown(body["thread_id"])
    review_id = body.get("review_id")
    if review_id is not None and review_id != world.review_id:
        return 400, (
            f"The review {review_id} is unknown in this conversation: it was never one of its"
            " reviews. Load the thread and decide on its current review."
        )
    decisions = body["decisions"]
    if len(decisions) != 2:
        return 400, f"Expected 2 decisions (one per action), got {len(decisions)}"
    if any(d["type"] == "edit" and d.get("edited_action") is None for d in decisions):
        return 400, "An 'edit' decision must include 'edited_action'"
    return 200, None


# --- strategies ---------------------------------------------------------------------------------

KEYS = st.sampled_from(
    ["thread_id", "decisions", "review_id", "message", "type", "edited_action", "name", "args"]
)
TEXT = st.text(max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(KEYS | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
NOT_TEXT = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(SCALARS, max_size=3)
    | st.dictionaries(st.text(max_size=5), SCALARS, max_size=3)
)
EMAIL_ARGS = st.fixed_dictionaries(
    {"to": st.just(ALICE) | TEXT, "subject": st.just(SUBJECT) | TEXT, "body": TEXT}
)
EDIT_ARGS = EMAIL_ARGS | st.dictionaries(
    st.sampled_from(["to", "subject", "body", "cc"]) | st.text(max_size=5), JSON_VALUES, max_size=4
)
VALID_EDITED = st.fixed_dictionaries(
    {"name": st.just("send_email") | TEXT, "args": EDIT_ARGS},
    optional={"extra": JSON_VALUES},
)
VALID_DECISION = st.one_of(
    st.fixed_dictionaries({"type": st.just("approve")}, optional={"message": JSON_VALUES}),
    st.fixed_dictionaries({"type": st.just("reject")}, optional={"message": TEXT | st.none()}),
    st.fixed_dictionaries({"type": st.just("edit"), "edited_action": VALID_EDITED}),
)
ANY_DECISION = st.one_of(
    VALID_DECISION,
    st.fixed_dictionaries(
        {"type": st.just("approve")},
        optional={"message": JSON_VALUES, "edited_action": JSON_VALUES},
    ),
    st.fixed_dictionaries(
        {"type": st.just("reject")}, optional={"message": JSON_VALUES, "edited_action": JSON_VALUES}
    ),
    st.fixed_dictionaries(
        {"type": st.just("edit")},
        optional={
            "edited_action": st.none()
            | VALID_EDITED
            | st.fixed_dictionaries({}, optional={"name": JSON_VALUES, "args": JSON_VALUES})
            | JSON_VALUES,
            "message": JSON_VALUES,
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["postpone", "Approve", "approve ", ""]) | NOT_TEXT}
    ),
    JSON_VALUES,
)
THREAD_IDS = st.just(THREAD) | TEXT
REVIEW_IDS = st.just(REVIEW) | st.none() | TEXT

MUTATIONS = (
    "none",  # a valid body: the review is applied
    "unknown thread",
    "thread of another type",
    "no thread",
    "stale review id",
    "review id of another type",
    "no review id",
    "wrong count",
    "one random decision",
    "edit without edited_action",
    "decisions of another type",
    "no decisions",
    "extra key",
)


@st.composite
def near_valid_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A valid review body for the current thread with at most one thing wrong with it."""
    decisions: list[Any] = draw(st.lists(VALID_DECISION, min_size=2, max_size=2))
    body: dict[str, Any] = {"thread_id": THREAD, "decisions": decisions, "review_id": REVIEW}
    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "unknown thread":
        body["thread_id"] = draw(TEXT)
    elif mutation == "thread of another type":
        body["thread_id"] = draw(NOT_TEXT)
    elif mutation == "no thread":
        del body["thread_id"]
    elif mutation == "stale review id":
        body["review_id"] = draw(TEXT)
    elif mutation == "review id of another type":
        body["review_id"] = draw(NOT_TEXT.filter(lambda v: v is not None))
    elif mutation == "no review id":
        body["review_id"] = draw(st.sampled_from([None, "absent"]))
        if body["review_id"] == "absent":
            del body["review_id"]
    elif mutation == "wrong count":
        count = draw(st.sampled_from([1, 3, 4]))
        body["decisions"] = draw(st.lists(VALID_DECISION, min_size=count, max_size=count))
    elif mutation == "one random decision":
        decisions[draw(st.integers(0, 1))] = draw(ANY_DECISION)
    elif mutation == "edit without edited_action":
        decisions[draw(st.integers(0, 1))] = draw(
            st.fixed_dictionaries({"type": st.just("edit")}, optional={"edited_action": st.none()})
        )
    elif mutation == "decisions of another type":
        body["decisions"] = draw(st.just([]) | TEXT | NOT_TEXT.filter(lambda v: v != []))
    elif mutation == "no decisions":
        del body["decisions"]
    elif mutation == "extra key":
        body[draw(st.text(max_size=6).filter(lambda k: k not in body))] = draw(JSON_VALUES)
    return body


STRUCTURED_REVIEWS = st.fixed_dictionaries(
    {},
    optional={
        "thread_id": THREAD_IDS | NOT_TEXT,
        "decisions": st.lists(ANY_DECISION, max_size=4) | NOT_TEXT | TEXT,
        "review_id": REVIEW_IDS | NOT_TEXT,
        "extra": JSON_VALUES,
    },
)
CHAT_BODIES = st.one_of(
    st.fixed_dictionaries({"message": TEXT}, optional={"thread_id": st.none() | THREAD_IDS}),
    st.fixed_dictionaries(
        {},
        optional={
            "message": TEXT | NOT_TEXT,
            "thread_id": THREAD_IDS | NOT_TEXT,
            "extra": JSON_VALUES,
        },
    ),
)


def _fails_to_parse_as_json(raw: bytes) -> bool:
    """Whether ``json.loads`` (what Starlette's ``request.json()`` runs) refuses ``raw``.

    Bytes that are not text at all (a ``UnicodeDecodeError``) are left out:
    see ``test_a_body_that_is_not_utf8_is_a_422``.
    """
    try:
        json.loads(raw)
    except json.JSONDecodeError:
        return True
    except ValueError:
        return False
    return False


def _truncated(body: Any, cut: int) -> bytes:
    raw = json.dumps(body, default=repr).encode()
    return raw[: cut % len(raw)]


NOT_JSON_BYTES = st.one_of(
    TEXT.map(str.encode),
    st.builds(_truncated, near_valid_reviews(), st.integers()),
    st.builds(_truncated, CHAT_BODIES, st.integers()),
    st.sampled_from([b"", b"{", b"[", b"{'message': 'hi'}", b"NaN", b'{"message": "hi",}']),
).filter(_fails_to_parse_as_json)


# --- the tests ----------------------------------------------------------------------------------


@pytest.fixture
def world() -> Iterator[World]:
    """The app and its paused thread, shared by all examples of one test."""
    with start_blocking_portal() as portal:
        yield World(portal)


@FUZZ
@given(body=st.one_of(JSON_VALUES, STRUCTURED_REVIEWS))
def test_review_with_any_json_body_gets_a_documented_answer(world: World, body: Any) -> None:
    """Any JSON value, or the review's keys with random values, is refused as predicted."""
    world.post_json("/hitl/review", body)


@FUZZ
@given(body=near_valid_reviews())
def test_review_with_near_valid_bodies_is_refused_or_applied_as_specified(
    world: World, body: Any
) -> None:
    """Near-valid review bodies get the predicted status and text; only accepted ones run tools.

    Right keys with wrong value types, decisions lists with random items,
    valid decisions in the wrong number, unknown thread and review ids.
    """
    world.post_json("/hitl/review", body)


@FUZZ
@given(body=st.one_of(JSON_VALUES, CHAT_BODIES))
def test_chat_with_any_body_gets_a_documented_answer(world: World, body: Any) -> None:
    """POST /hitl/chat: 422 wrong shape, 404 unknown thread, 400 paused thread, 200 new thread."""
    world.post_json("/hitl/chat", body)


@FUZZ
@given(path=st.sampled_from(["/hitl/review", "/hitl/chat"]), raw=NOT_JSON_BYTES)
def test_a_body_that_is_not_json_is_a_422(world: World, path: str, raw: bytes) -> None:
    """Text that is not JSON (garbage, truncated bodies, empty) is a 422; nothing changes."""
    world.post_raw(path, raw)


# --- bodies FastAPI alone would answer wrongly ---------------------------------------------------


@pytest.mark.parametrize("path", ["/hitl/review", "/hitl/chat"])
def test_a_body_that_is_not_utf8_is_a_422(world: World, path: str) -> None:
    """Bytes that are not UTF-8 are a body of the wrong shape: 422, nothing changes."""
    world.post_raw(path, b'{"message": "\x80"}')


@pytest.mark.parametrize(
    ("path", "template", "expected"),
    [
        ("/hitl/chat", {"message": "\ud800"}, (200, 422)),
        ("/hitl/chat", {"thread_id": "\ud800"}, (422,)),
        ("/hitl/review", {"thread_id": THREAD, "decisions": "\ud800"}, (422,)),
        (
            "/hitl/review",
            {"thread_id": THREAD, "decisions": [{"type": "approve"}] * 2, "review_id": "\ud800"},
            (400,),
        ),
    ],
    ids=["chat-message", "chat-missing-message", "review-decisions-text", "review-stale-id"],
)
def test_a_lone_surrogate_gets_a_documented_answer_not_a_500(
    world: World, path: str, template: dict[str, Any], expected: tuple[int, ...]
) -> None:
    """JSON text may escape a lone surrogate; the answer is still documented and nothing changes."""
    raw = json.dumps(world.resolve(template)).encode()  # ASCII: "\\ud800" stays an escape
    ran_before = len(world.runs)
    status = world.portal.call(world_post, world, path, raw)
    assert status in expected
    assert (world.portal.call(world_thread, world), world.runs[ran_before:]) == (
        world.snapshot,
        [],
    )


async def world_post(world: World, path: str, raw: bytes) -> int:
    """POST ``raw`` as JSON; the status."""
    async with world.client() as client:
        response = await client.post(
            path, content=raw, headers={"content-type": "application/json"}
        )
        return response.status_code


async def world_thread(world: World) -> dict[str, Any]:
    """The paused thread as GET answers it."""
    async with world.client() as client:
        return await world.thread(client)
