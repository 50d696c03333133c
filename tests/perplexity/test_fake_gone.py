"""The fake answers a follow-up into a thread that is gone (docs/protocol.md §12.4) in each form
the plan asks for, read over HTTP as pplxweb reads it; new threads and other threads' follow-ups
are answered as usual."""

from __future__ import annotations

import json

import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import ThreadGone
from pplxweb.perplexity.extract import extract
from pplxweb.perplexity.request import AskRequest, FollowUp, ask_body
from pplxweb.perplexity.sse import parse_all
from tests.fake_perplexity import app as fake
from tests.fake_perplexity import gone
from tests.fake_perplexity import library as fake_library

BASE = "https://fake.perplexity.test"
COOKIES = {jar.SESSION_COOKIE: fake.TOKEN}
FOLLOW_UP = FollowUp("fake-run-1", "fake-rw")


@pytest.fixture(autouse=True)
def fresh_fake():
    fake.state.update(fake.fresh_state())
    yield
    fake.state.update(fake.fresh_state())


def http() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=fake.application), base_url=BASE)


async def post_ask(plan: dict, follow_up: FollowUp | None = FOLLOW_UP) -> httpx.Response:
    """The ask as pplxweb's request module builds it, answered by the fake under `plan`."""
    fake.state["ask"] = {"pace": 0, **plan}
    body = ask_body(AskRequest("And then?", follow_up=follow_up))
    async with http() as client:
        return await client.post(
            "/rest/sse/perplexity_ask", json=body, headers={"Cookie": jar.header(COOKIES)}
        )


async def ask(plan: dict, follow_up: FollowUp | None = FOLLOW_UP):
    """The same ask through pplxweb's client: the result, or the error it raises."""
    fake.state["ask"] = {"pace": 0, **plan}
    transport = httpx.ASGITransport(app=fake.application)
    async with PerplexityClient(BASE, BASE, transport=transport, cookies=COOKIES) as client:
        stream = client.ask(AskRequest("And then?", follow_up=follow_up))
        async with stream:
            async for _ in stream:
                pass
        return extract(stream.snapshot, ended=stream.ended)


@pytest.mark.parametrize(
    ("kind", "status", "body"),
    [
        ("deleted", 400, {"error": "ENTRY_DELETED", "message": "This entry has been deleted"}),
        ("expired", 400, {"error": "ENTRY_EXPIRED", "message": "This entry has expired"}),
        ("not_viewable", 403, {"detail": {"error_code": "VIEW_THREAD_NOT_ALLOWED"}}),
        ("not_found", 404, {"error": "THREAD_NOT_FOUND"}),
    ],
)
async def test_a_follow_up_into_a_gone_thread_is_refused_as_its_detail_is(kind, status, body):
    response = await post_ask({"thread_gone": kind})
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json() == body
    with pytest.raises(ThreadGone) as raised:  # pplxweb's client reads the code
        await ask({"thread_gone": kind})
    assert raised.value.code == gone.KINDS[kind]


async def test_the_empty_403_form_is_the_reconnect_endpoints_answer():
    response = await post_ask({"thread_gone": "expired", "gone_as": "empty_403"})
    assert (response.status_code, response.content) == (403, b"{}")
    assert response.headers["content-type"] == "application/json"


async def test_the_frame_form_is_a_failed_frame_in_a_200_stream():
    response = await post_ask({"thread_gone": "deleted", "gone_as": "frame"})
    assert response.status_code == 200
    events, parser = parse_all(response.content)
    assert parser.ended and [e.data for e in events] == [
        {"status": "FAILED", "error_code": "ENTRY_DELETED", "error_message": "This entry has been deleted"}
    ]
    result = await ask({"thread_gone": "deleted", "gone_as": "frame"})
    assert result.status == "failed" and result.error_code == "ENTRY_DELETED"


async def test_the_new_thread_form_answers_in_another_thread():
    result = await ask({"thread_gone": "expired", "gone_as": "new_thread"})
    assert result.status == "completed" and result.answer.endswith("It lies on the Seine.")
    assert (result.context_uuid, result.read_write_token, result.thread_url_slug) == (
        "fake-c-new",
        "fake-rw-new",
        "fake-slug-new",
    )
    plain = await ask({}, follow_up=FOLLOW_UP)  # the same follow-up, thread alive: its own ids
    assert (plain.context_uuid, plain.read_write_token) == ("fake-c", "fake-rw")


async def test_new_threads_and_other_threads_follow_ups_are_answered():
    new = await ask({"thread_gone": "deleted"}, follow_up=None)
    assert new.status == "completed"
    other = await ask({"thread_gone": "deleted", "gone": ["fake-run-9"]})
    assert other.status == "completed"
    with pytest.raises(ThreadGone):
        await ask({"thread_gone": "deleted", "gone": ["fake-run-1"]})
    sent = [json.loads(r["body"])["params"] for r in fake.state["requests"]]
    assert [p.get("last_backend_uuid") for p in sent] == [None, "fake-run-1", "fake-run-1"]


async def test_a_library_thread_deleted_since_refuses_its_follow_up_as_its_detail():
    fake_library.lib["threads"] = [
        fake_library._thread({"gone": "VIEW_THREAD_NOT_ALLOWED"}, 0, fake_library.BASE_TIME)
    ]
    thread = fake_library.lib["threads"][0]
    try:
        response = await post_ask({}, follow_up=FollowUp(thread["turns"][0]["uuid"], thread["token"]))
    finally:
        fake_library.lib["threads"] = []
    assert response.status_code == 403
    assert response.json() == {"detail": {"error_code": "VIEW_THREAD_NOT_ALLOWED"}}
