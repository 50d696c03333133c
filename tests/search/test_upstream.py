"""Conversations outlive Perplexity's threads (search/live/upstream.py, search/live/carry.py): a
follow-up whose thread is gone there, in each form docs/protocol.md §12.4 holds possible, is asked
in a new thread carrying the earlier turns, in the same conversation, with one quiet line; later
follow-ups go on from the new thread; an expired incognito thread is not asked at all."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import PerplexityAccount
from search.forms import MAX_QUESTION
from search.live import carry
from search.models import Entry, Thread
from tests.search.conftest import Paced, answer_stream, serve
from tests.search.test_consumer import connect, receive_until
from tests.search.test_versions import body, params, stream

pytestmark = pytest.mark.django_db(transaction=True)
SESSION = {"user": {"id": "u", "email": "me@example.com"}, "expires": "2027-01-01T00:00:00Z"}
QUIET = "asked in a new one with the earlier questions."


async def first_turn(owner, route_streams, upstream, **extra):
    """A conversation's first answer (b-1 in thread c-1), then the socket for its follow-up."""
    route = serve(upstream, *route_streams)
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "What is sourdough?"}))
    await receive_until(comm, "status-completed")
    first = await Entry.objects.aget()
    if extra:
        await Entry.objects.filter(pk=first.pk).aupdate(**extra)
    return comm, route, first


async def follow_up(
    comm, first, question: str = "And what about rye?", until: str = "completed"
) -> list[str]:
    await comm.send_to(text_data=json.dumps({"q": question, "thread": str(first.thread_id)}))
    await receive_until(comm, question)
    return await receive_until(comm, f"status-{until}")


def gone(status: int, payload) -> httpx.Response:
    return httpx.Response(status, json=payload)


@pytest.mark.parametrize(
    ("refusal", "code"),
    [
        (gone(400, {"error": "ENTRY_EXPIRED", "message": "This entry has expired"}), "ENTRY_EXPIRED"),
        (gone(400, {"error": "ENTRY_DELETED", "message": "This entry has been deleted"}), "ENTRY_DELETED"),
        (gone(403, {"detail": {"error_code": "VIEW_THREAD_NOT_ALLOWED"}}), "VIEW_THREAD_NOT_ALLOWED"),
        (gone(404, {"error": "THREAD_NOT_FOUND"}), "THREAD_NOT_FOUND"),
        (
            Paced([{"status": "FAILED", "error_code": "ENTRY_EXPIRED", "error_message": "gone"}]),
            "ENTRY_EXPIRED",
        ),
    ],
    ids=["expired", "deleted", "not_viewable", "not_found", "failed_frame"],
)
async def test_a_follow_up_refused_as_gone_is_asked_in_a_new_thread_with_its_context(
    owner, alinked, upstream, refusal, code
):
    comm, route, first = await first_turn(
        owner,
        [
            stream(["Sourdough is bread from a starter [1]."], "b-1"),
            refusal,
            stream(["Rye sourdough is denser."], "b-7", context="c-7", token="rw-7"),
            stream(["Spelt too."], "b-8", context="c-7", token="rw-7"),
        ],
        upstream,
    )
    messages = await follow_up(comm, first)
    assert route.call_count == 3
    assert params(route, 1)["last_backend_uuid"] == "b-1"  # asked in its thread first
    carried = body(route, 2)
    assert carried["params"]["query_source"] == "home" and "last_backend_uuid" not in carried["params"]
    question = carried["query_str"]
    assert question.startswith(
        "Earlier in this conversation:\n\nQ: What is sourdough?\nA: Sourdough is bread"
    )
    assert question.endswith("Now, going on from that: And what about rye?") and "[1]" not in question
    entry = await Entry.objects.aget(backend_uuid="b-7")
    assert entry.thread_id == first.thread_id and entry.status == "completed" and entry.carried == code
    assert entry.question == "And what about rye?" and entry.read_write_token == "rw-7"
    assert await Thread.objects.acount() == 1
    assert QUIET in "".join(messages) and "no longer has" not in "".join(messages)
    # the next follow-up goes on from the new thread
    await follow_up(comm, first, "And spelt?")
    sent = params(route)
    assert (sent["last_backend_uuid"], sent["read_write_token"]) == ("b-7", "rw-7") and route.call_count == 4
    await comm.disconnect()
    link = await PerplexityAccount.objects.aget()
    assert link.status == "ok"  # never taken for a session problem


async def test_an_empty_403_is_a_gone_thread_only_when_the_session_is_fine(owner, alinked, upstream):
    session = upstream.get("/api/auth/session").respond(json=SESSION)
    comm, route, first = await first_turn(
        owner, [stream(["one"], "b-1"), gone(403, {}), stream(["two"], "b-2", context="c-2")], upstream
    )
    messages = await follow_up(comm, first)
    assert session.call_count == 1 and route.call_count == 3
    assert (await Entry.objects.aget(backend_uuid="b-2")).carried == "REFUSED" and QUIET in "".join(messages)
    assert (await PerplexityAccount.objects.aget()).status == "ok"
    await comm.disconnect()


async def test_an_empty_403_with_the_session_signed_out_is_the_session_problem(owner, alinked, upstream):
    upstream.get("/api/auth/session").respond(json={})
    comm, route, first = await first_turn(owner, [stream(["one"], "b-1"), gone(403, {})], upstream)
    await follow_up(comm, first, until="failed")
    refused = await Entry.objects.exclude(pk=first.pk).aget()
    assert refused.status == "failed" and "Re-link in Settings" in refused.error and not refused.carried
    assert route.call_count == 2 and (await PerplexityAccount.objects.aget()).status == "needs_attention"
    await comm.disconnect()


async def test_a_session_check_that_fails_is_said_and_the_link_is_left_alone(owner, alinked, upstream):
    upstream.get("/api/auth/session").respond(502, text="bad gateway")
    comm, _route, first = await first_turn(owner, [stream(["one"], "b-1"), gone(403, {})], upstream)
    await follow_up(comm, first, until="failed")
    refused = await Entry.objects.exclude(pk=first.pk).aget()
    assert refused.status == "failed" and "could not check the linked session" in refused.error
    assert (await PerplexityAccount.objects.aget()).status == "ok"
    await comm.disconnect()


async def test_an_answer_in_another_thread_is_stopped_and_asked_again_with_the_context(
    owner, alinked, upstream
):
    stopped = upstream.post("/rest/sse/perplexity_terminate").respond(json={"status": "completed"})
    elsewhere = Paced(answer_stream(["Out of context. "] * 20), pause=0.01)
    elsewhere.chunks[0] = elsewhere.chunks[0].replace(b'"c-1"', b'"c-new"').replace(b'"b-1"', b'"b-lost"')
    comm, route, first = await first_turn(
        owner, [stream(["one"], "b-1"), elsewhere, stream(["In context."], "b-3", context="c-3")], upstream
    )
    messages = "".join(await follow_up(comm, first))
    entry = await Entry.objects.aget(backend_uuid="b-3")
    assert (
        entry.carried == "NEW_THREAD" and entry.answer == "In context." and "Out of context" not in messages
    )
    assert route.call_count == 3
    for _ in range(100):  # in the background
        if stopped.call_count:
            break
        await __import__("asyncio").sleep(0.02)
    assert json.loads(stopped.calls.last.request.content)["entry_uuid"] == "b-lost"
    await comm.disconnect()


async def test_an_expired_incognito_thread_is_not_asked_at_all(owner, alinked, upstream):
    events = answer_stream(["one"])
    events[0]["expiry_time"] = (timezone.now() + timedelta(hours=24)).replace(tzinfo=None).isoformat()
    comm, route, first = await first_turn(
        owner, [Paced(events), stream(["two"], "b-2", context="c-2")], upstream
    )
    first = await Entry.objects.aget(pk=first.pk)
    assert abs(first.upstream_expires - timezone.now() - timedelta(hours=24)) < timedelta(minutes=1)
    await Entry.objects.filter(pk=first.pk).aupdate(upstream_expires=timezone.now() - timedelta(minutes=5))
    messages = "".join(await follow_up(comm, first))
    assert route.call_count == 2 and params(route)["query_source"] == "home"  # no refused round trip
    assert (await Entry.objects.aget(backend_uuid="b-2")).carried == "EXPIRED"
    assert "had expired (incognito threads last a day)" in messages
    await comm.disconnect()


async def test_a_redo_of_a_turn_whose_thread_is_gone_is_carried_too(owner, alinked, upstream):
    comm, route, first = await first_turn(
        owner,
        [
            stream(["one"], "b-1"),
            stream(["two"], "b-2"),
            gone(400, {"error": "ENTRY_DELETED"}),
            stream(["two, again"], "b-3", context="c-3"),
        ],
        upstream,
    )
    await follow_up(comm, first)
    second = await Entry.objects.aget(backend_uuid="b-2")
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    messages = "".join(await receive_until(comm, "status-completed"))
    again = await Entry.objects.aget(backend_uuid="b-3")
    assert again.turn == second.pk and again.carried == "ENTRY_DELETED" and "was deleted" in messages
    assert body(route)["query_str"].endswith("Now, going on from that: And what about rye?")
    await comm.disconnect()


def test_the_carried_question_holds_the_last_turns_within_the_limit(owner):
    thread = Thread.objects.create(user=owner, title="t")
    for n in range(6):
        Entry.objects.create(
            thread=thread,
            question=f"Question {n}?",
            answer=f"Answer {n} [2]. " + "word " * 400,
            status="completed",
        )
    last = Entry.objects.create(thread=thread, question="Now what?")
    text = carry.question_for(last.pk, last.question)
    assert "Question 1?" not in text and all(f"Question {n}?" in text for n in (2, 3, 4, 5))
    assert text.endswith("Now, going on from that: Now what?") and "[2]" not in text and "…" in text
    assert len(text) <= MAX_QUESTION
    long = "Why " * 1625  # 6,500 characters: room for one turn, not two
    text = carry.question_for(last.pk, long)
    assert len(text) <= MAX_QUESTION and "Question 5?" in text and "Question 4?" not in text
    assert carry.question_for(last.pk, "x" * MAX_QUESTION) == "x" * MAX_QUESTION  # no room: alone


def test_deleting_on_perplexity_deletes_each_thread_the_conversation_used(
    owner_client, owner, linked, upstream
):
    thread = Thread.objects.create(user=owner, title="t", read_write_token="rw-old")
    kinds = {"status": "completed", "credential": "session"}
    Entry.objects.create(thread=thread, question="q1", backend_uuid="b1", context_uuid="c-old", **kinds)
    Entry.objects.create(thread=thread, question="q2", backend_uuid="b2", context_uuid="c-old", **kinds)
    Entry.objects.create(
        thread=thread, question="q3", backend_uuid="b3", context_uuid="c-new", read_write_token="rw-new",
        carried="ENTRY_EXPIRED", **kinds,
    )  # fmt: skip
    route = upstream.delete("/rest/thread/delete_thread_by_entry_uuid").respond(json={"status": "success"})
    chosen = list(Entry.objects.values_list("pk", flat=True))
    owner_client.post(reverse("search:delete"), {"entry": chosen, "confirm": "1", "upstream": "1"})
    sent = sorted((json.loads(call.request.content) for call in route.calls), key=str)
    assert sent == [
        {"entry_uuid": "b1", "read_write_token": "rw-old"},  # the conversation's first thread
        {"entry_uuid": "b3", "read_write_token": "rw-new"},  # and the one it went on in
    ]
