"""Attack class: a hostile HTTP client or web page sends bodies and headers built to break the API.

Bodies nested far deeper than any parser's stack, ``NaN``/``Infinity`` (which
Python's ``json`` reads but JSON does not have), numbers beyond a float or with
thousands of digits, duplicate keys (which parsers resolve differently), lone
surrogates, and huge inputs meant to be echoed back in error answers; Origin
headers crafted to look like the server's own. Every such request gets a
documented answer — 422 with a short echo, 403, never 400 or 500 — and
changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import (
    deep_json_text,
    deep_list,
    deep_object,
    hostile_json,
    surrogate_text,
)
from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard.http import MAX_BODY_DEPTH, create_app

MAIL = {"to": "alice@example.com", "body": "Hi"}
DOCUMENTED = {200, 400, 404, 409, 422}
HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_chat(sent: list[dict[str, Any]]) -> ReviewedChat:
    """A chat whose model mails Alice (guarded) on "mail", else answers "Hello!"."""

    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append({"to": to, "body": body})
        return f"sent to {to}"

    def react(messages: Any) -> ModelResponse:
        last = messages[-1]
        if last["role"] == "user" and "mail" in str(last["content"]):
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=MAIL)])
        return ModelResponse(text="Hello!")

    return ReviewedChat(ScriptedModel([react], repeat=True), [send_email])


Check = Callable[[httpx.AsyncClient, str, dict[str, Any]], Awaitable[None]]


def with_paused_thread(check: Check) -> None:
    """Run ``check(client, thread_id, snapshot)`` against a fresh app with a paused thread."""

    async def main() -> None:
        sent: list[dict[str, Any]] = []
        app = create_app(make_chat(sent))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            paused = (await client.post("/hitl/chat", json={"message": "mail alice"})).json()
            thread_id = paused["thread_id"]
            snapshot = (await client.get(f"/hitl/threads/{thread_id}")).json()
            await check(client, thread_id, snapshot)
            if (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot:
                assert sent == []

    anyio.run(main)


async def post(client: httpx.AsyncClient, path: str, raw: str | bytes) -> httpx.Response:
    """POST raw JSON text."""
    content = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    return await client.post(path, content=content, headers={"content-type": "application/json"})


def invalid(reason: str) -> dict[str, Any]:
    """The 422 for a body refused before it is parsed."""
    return {
        "detail": [
            {
                "type": "json_invalid",
                "loc": ["body"],
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": reason},
            }
        ]
    }


TOO_DEEP = invalid(f"the JSON is nested more than {MAX_BODY_DEPTH} levels deep")


def review(thread_id: str, decision_text: str) -> str:
    """A review body whose one decision is ``decision_text`` (raw JSON)."""
    return f'{{"thread_id": {json.dumps(thread_id)}, "decisions": [{decision_text}]}}'


def edit_with_args(thread_id: str, args_text: str) -> str:
    """A review body editing send_email with the raw JSON ``args_text`` as its args."""
    edit = f'{{"type": "edit", "edited_action": {{"name": "send_email", "args": {args_text}}}}}'
    return review(thread_id, edit)


# --- nesting ------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_BODY_DEPTH + 1, 200, 1_000, 20_000, 100_000])
@pytest.mark.parametrize("where", ["body", "message", "decisions", "args"])
def test_a_body_nested_deeper_than_the_limit_is_the_documented_422(depth: int, where: str) -> None:
    """[[[[...]]]] or {"k": [...]} of any depth, anywhere in a body: 422 json_invalid, no change."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        deep = deep_json_text(depth)
        raw = {
            "body": deep,
            "message": f'{{"message": {deep}}}',
            "decisions": f'{{"thread_id": {json.dumps(thread_id)}, "decisions": {deep}}}',
            "args": edit_with_args(thread_id, deep),
        }[where]
        path = "/hitl/chat" if where in ("body", "message") else "/hitl/review"
        response = await post(client, path, raw)
        assert (response.status_code, response.json()) == (422, TOO_DEEP)
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def test_a_body_exactly_at_the_depth_limit_is_read_and_validated() -> None:
    """64 levels are read: the message (a list 63 deep) fails validation with a short echo."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        value = deep_list(MAX_BODY_DEPTH - 1)
        response = await client.post("/hitl/chat", json={"message": value})
        deeper = await client.post("/hitl/chat", json={"message": [value]})
        assert response.status_code == 422
        assert response.json() == {
            "detail": [
                {
                    "type": "string_type",
                    "loc": ["body", "message"],
                    "msg": "Input should be a valid string",
                    "input": json.dumps(value)[:100] + "\u2026",
                }
            ]
        }
        assert (deeper.status_code, deeper.json()) == (422, TOO_DEEP)

    with_paused_thread(check)


@HOSTILE
@given(depth=st.integers(MAX_BODY_DEPTH + 1, 5_000), kind=st.sampled_from(["list", "object"]))
def test_any_deep_edit_is_refused_before_it_reaches_the_thread(depth: int, kind: str) -> None:
    """An edit whose args nest past the limit never reaches validate_decisions or a tool."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        value = deep_list(depth - 5) if kind == "list" else deep_object(depth - 5)
        args = '{"to": "a@example.com", "body": ' + _dumps_deep(value) + "}"
        response = await post(client, "/hitl/review", edit_with_args(thread_id, args))
        assert (response.status_code, response.json()) == (422, TOO_DEEP)
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def _dumps_deep(value: Any) -> str:
    """JSON text of a deep_list/deep_object value without recursion."""
    depth, inner = 0, value
    opening, closing = [], []
    while isinstance(inner, (list, dict)):
        if isinstance(inner, list):
            opening.append("[")
            closing.append("]")
            inner = inner[0]
        else:
            (key,) = inner
            opening.append(f"{{{json.dumps(key)}: ")
            closing.append("}")
            inner = inner[key]
        depth += 1
    return "".join(opening) + json.dumps(inner) + "".join(reversed(closing))


# --- numbers and keys JSON does not have ----------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "reason"),
    [
        ("NaN", "NaN is not a JSON number"),
        ("Infinity", "Infinity is not a JSON number"),
        ("-Infinity", "-Infinity is not a JSON number"),
        ("1e999", "a number is too large for a float"),
        ("-1E400", "a number is too large for a float"),
        ("1" * 4301, "an integer has more than 4300 digits"),
        ("-" + "9" * 5000, "an integer has more than 4300 digits"),
    ],
    ids=["nan", "inf", "-inf", "1e999", "-1e400", "4301-digits", "-5000-digits"],
)
@pytest.mark.parametrize("where", ["message", "decision", "args"])
def test_numbers_json_does_not_have_are_422(literal: str, reason: str, where: str) -> None:
    """NaN/Infinity, floats beyond a double and giant integers anywhere: 422 naming the problem."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        raw = {
            "message": f'{{"message": {literal}}}',
            "decision": review(thread_id, f'{{"type": "reject", "message": {literal}}}'),
            "args": edit_with_args(thread_id, f'{{"to": "a@example.com", "body": {literal}}}'),
        }[where]
        path = "/hitl/chat" if where == "message" else "/hitl/review"
        response = await post(client, path, raw)
        assert (response.status_code, response.json()) == (422, invalid(reason))
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def test_an_integer_with_4300_digits_is_read_and_echoed_short() -> None:
    """Up to 4300 digits an integer is JSON; as a message it is a 422 echoing 100 digits."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        digits = "7" * 4300
        response = await post(client, "/hitl/chat", f'{{"message": {digits}}}')
        assert response.json() == {
            "detail": [
                {
                    "type": "string_type",
                    "loc": ["body", "message"],
                    "msg": "Input should be a valid string",
                    "input": "7" * 100 + "\u2026",
                }
            ]
        }

    with_paused_thread(check)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ('{"message": "hi", "message": "mail alice"}', "message"),
        ('{"message": "hi", "\\u006dessage": "mail alice"}', "message"),
        ('{"message": "hi", "thread_id": null, "thread_id": "x"}', "thread_id"),
    ],
    ids=["plain", "escaped-spelling", "thread-id"],
)
def test_duplicate_keys_are_422_whichever_copy_a_parser_would_keep(raw: str, key: str) -> None:
    """A key given twice (also spelled with an escape) is ambiguous: 422, nothing runs."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        response = await post(client, "/hitl/chat", raw)
        assert (response.status_code, response.json()) == (
            422,
            invalid(f"duplicate key {key!r} in an object"),
        )

    with_paused_thread(check)


def test_a_lone_surrogate_in_an_edited_argument_name_is_cleaned_not_a_500() -> None:
    """{"\\ud800": ...} as an edited argument's name reaches the tool as U+FFFD, not a crash."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        args = '{"to": "a@example.com", "body": "Hi", "\\ud800x": 1}'
        response = await post(client, "/hitl/review", edit_with_args(thread_id, args))
        thread = (await client.get(f"/hitl/threads/{thread_id}")).json()
        assert response.status_code == 200
        edited = thread["actions"][0]["decision"]["edited_action"]
        assert edited == {
            "name": "send_email",
            "args": {"to": "a@example.com", "body": "Hi", "\ufffdx": 1},
        }

    with_paused_thread(check)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ('{"to": NaN, "body": "Hi"}', "NaN is not a JSON number"),
        (
            '{"to": "a@example.com", "body": "Hi", "to": "b@example.com"}',
            "duplicate key 'to' in an object",
        ),
    ],
    ids=["nan", "duplicate"],
)
def test_a_byte_order_mark_does_not_smuggle_a_body_past_the_checks(args: str, reason: str) -> None:
    """FastAPI reads a body that starts with a UTF-8 BOM; the checks read the same text."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        raw = b"\xef\xbb\xbf" + edit_with_args(thread_id, args).encode()
        response = await post(client, "/hitl/review", raw)
        assert (response.status_code, response.json()) == (422, invalid(reason))
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def test_duplicate_keys_inside_edited_args_are_422() -> None:
    """Two "to" keys in an edit: the reviewer's page and the tool could disagree; refused."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        args = '{"to": "alice@example.com", "body": "Hi", "to": "mallory@evil.example"}'
        response = await post(client, "/hitl/review", edit_with_args(thread_id, args))
        assert (response.status_code, response.json()) == (
            422,
            invalid("duplicate key 'to' in an object"),
        )
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


# --- echoes -------------------------------------------------------------------------------------


def test_error_answers_echo_only_a_short_prefix_of_huge_inputs() -> None:
    """A 900 kB value in the wrong place is echoed as 100 characters and an ellipsis."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        huge = "A" * 900_000
        as_list = await client.post("/hitl/chat", json={"message": [huge]})
        long_id = await client.post("/hitl/chat", json={"message": "hi", "thread_id": huge})
        long_review = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [{"type": "approve"}], "review_id": huge},
        )
        assert as_list.json()["detail"][0]["input"] == '["' + "A" * 98 + "\u2026"
        too_long = {
            "type": "string_too_long",
            "msg": "String should have at most 128 characters",
            "input": "A" * 100 + "\u2026",
            "ctx": {"max_length": 128},
        }
        assert long_id.json() == {"detail": [{**too_long, "loc": ["body", "thread_id"]}]}
        assert long_review.json() == {"detail": [{**too_long, "loc": ["body", "review_id"]}]}
        for response in (as_list, long_id, long_review):
            assert (response.status_code, len(response.content) < 1_000) == (422, True)
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def test_a_422_lists_at_most_twenty_errors() -> None:
    """50,000 bad decisions are not echoed one by one: 20 errors and how many more there were."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        response = await client.post(
            "/hitl/review", json={"thread_id": thread_id, "decisions": ["x"] * 50_000}
        )
        errors = response.json()["detail"]
        assert response.status_code == 422
        assert len(errors) == 21
        assert errors[0] == {
            "type": "model_attributes_type",
            "loc": ["body", "decisions", 0],
            "msg": "Input should be a valid dictionary or object to extract fields from",
            "input": "x",
        }
        assert errors[20] == {
            "type": "too_many_errors",
            "loc": ["body"],
            "msg": "49980 more errors not shown",
        }
        assert len(response.content) < 4_000

    with_paused_thread(check)


def test_a_path_id_longer_than_any_thread_id_is_422_not_echoed() -> None:
    """GET /hitl/threads/<10,000 characters> answers a short 422, not a 404 echoing the id."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        for path in ("/hitl/threads/" + "z" * 10_000, "/hitl/threads/" + "z" * 10_000 + "/audit"):
            response = await client.get(path)
            assert response.status_code == 422
            assert response.json()["detail"][0]["input"] == "z" * 100 + "\u2026"

    with_paused_thread(check)


@settings(max_examples=25, deadline=None)
@given(thread_id=surrogate_text)
def test_lone_surrogates_in_ids_keep_their_documented_answer(thread_id: str) -> None:
    """A lone surrogate in thread_id is an unknown thread (404, escaped text), not a 422 or 500."""

    async def check(client: httpx.AsyncClient, paused: str, snapshot: dict[str, Any]) -> None:
        raw = json.dumps({"message": "hi", "thread_id": thread_id})  # ASCII escapes
        response = await post(client, "/hitl/chat", raw)
        assert (response.status_code, response.json()) == (  # repr() escapes the surrogate
            404,
            {
                "detail": (
                    f"Unknown thread_id {thread_id!r}: start a conversation with POST /hitl/chat"
                )
            },
        )

    with_paused_thread(check)


# --- anything at all ----------------------------------------------------------------------------

PLACES = st.sampled_from(["body", "message", "thread_id", "decisions", "decision", "args"])


def _place(where: str, value: Any, thread_id: str) -> Any:
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": value}}
    return {
        "body": value,
        "message": {"message": value},
        "thread_id": {"message": "hi", "thread_id": value},
        "decisions": {"thread_id": thread_id, "decisions": value},
        "decision": {"thread_id": thread_id, "decisions": [value]},
        "args": {"thread_id": thread_id, "decisions": [edit]},
    }[where]


@HOSTILE
@given(value=hostile_json, where=PLACES)
def test_any_hostile_json_anywhere_gets_a_documented_short_answer(value: Any, where: str) -> None:
    """Deep, NaN, surrogate, deceptive JSON in any field: a documented status, never 400/500,
    an answer of bounded size, and a refused request leaves the thread as it was."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        body = _place(where, value, thread_id)
        raw = _dumps_any(body)
        path = "/hitl/chat" if where in ("body", "message", "thread_id") else "/hitl/review"
        response = await post(client, path, raw)
        assert response.status_code in DOCUMENTED, response.text[:300]
        assert len(response.content) < 8_000
        if "NaN" in raw or "Infinity" in raw:
            assert response.status_code == 422
        if response.status_code != 200:
            assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)


def _dumps_any(value: Any) -> str:
    """JSON text (NaN and Infinity as Python writes them); deep values without recursion."""
    try:
        return json.dumps(value)
    except RecursionError:
        pytest.skip("too deep for json.dumps")  # not reached: hostile_json is at most 1,000 deep


# --- Origin headers made to look like the server's own -------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://testserver@evil.example",
        "http://evil.example#@testserver",
        "http://evil.example/?@testserver",
        "http://testserver.evil.example",
        "http://evil.example\\@testserver",
        "http://testserver:80@evil.example",
        "http://testserver\x00",
        "http://testserver:0",
        "http://testserver:99999",
        "http://[::1]",
        "file://",
        "",
    ],
)
def test_origins_dressed_as_the_server_are_cross_site(origin: str) -> None:
    """Userinfo, fragments, look-alike hosts, bad ports, empty: the POST is refused with 403."""

    async def check(client: httpx.AsyncClient, thread_id: str, snapshot: dict[str, Any]) -> None:
        response = await client.post(
            "/hitl/review",
            json={"thread_id": thread_id, "decisions": [{"type": "approve"}]},
            headers={"Origin": origin},
        )
        assert response.status_code == 403
        assert (await client.get(f"/hitl/threads/{thread_id}")).json() == snapshot

    with_paused_thread(check)
