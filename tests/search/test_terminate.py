"""Stop stops Perplexity too: after the read is cancelled, the terminate call (docs/protocol.md §9.2)
goes out with the run's ids; bounded at 5 s, a failure only logged, never a failed stop."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from search.live import terminate
from search.models import Entry
from tests.search.conftest import TOKEN, Paced, answer_stream, serve, words
from tests.search.test_consumer import connect, receive_until

pytestmark = pytest.mark.django_db(transaction=True)


async def stop_a_run(owner) -> Entry:
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "stop me"}))
    await receive_until(comm, "word3")
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": str(entry.pk)}))
    await receive_until(comm, "status-stopped")
    await comm.disconnect()
    return await Entry.objects.aget()


async def settled() -> None:
    async with asyncio.timeout(10):
        while terminate._sending:
            await asyncio.sleep(0.02)


async def test_stop_sends_terminate_with_the_runs_ids(owner, alinked, upstream):
    serve(upstream, Paced(answer_stream(words(200)), pause=0.02))
    route = upstream.post("/rest/sse/perplexity_terminate").respond(
        json={"status": "completed", "_response_type": "COMPLETED_RESPONSE", "thread_url_slug": "slug-1"}
    )
    before = int(time.time() * 1000)
    entry = await stop_a_run(owner)
    await settled()
    assert route.call_count == 1
    request = route.calls[0].request
    body = json.loads(request.content)
    assert body.pop("terminate_requested_at_ms") in range(before, int(time.time() * 1000) + 1)
    assert body == {"entry_uuid": "b-1", "context_uuid": "c-1", "model_preference": "pplx_pro"}
    assert request.headers["x-perplexity-request-reason"] == "thread-floating-footer"
    assert TOKEN in request.headers["cookie"]
    assert (entry.status, entry.backend_uuid, entry.context_uuid) == ("stopped", "b-1", "c-1")


@pytest.mark.parametrize("how", ["hang", "500", "network"])
async def test_a_terminate_that_fails_or_hangs_is_logged_and_the_stop_stands(
    owner, alinked, upstream, monkeypatch, caplog, how
):
    monkeypatch.setattr(terminate, "TIMEOUT", 0.3)
    serve(upstream, Paced(answer_stream(words(200)), pause=0.02))

    async def hang(request):
        await asyncio.sleep(30)

    route = upstream.post("/rest/sse/perplexity_terminate")
    if how == "hang":
        route.mock(side_effect=hang)
    elif how == "500":
        route.respond(500, json={"error": "boom"})
    else:
        route.mock(side_effect=httpx.ConnectError("refused"))
    async with asyncio.timeout(15):  # not the 30 s Perplexity would take to answer the stop
        entry = await stop_a_run(owner)
        await settled()
    assert (entry.status, entry.error) == ("stopped", "Stopped. What had arrived is kept.")
    warning = {
        "hang": "Perplexity did not answer the stop within 0 s",
        "500": "stopping the run on Perplexity failed: Perplexity had a server error (500)",
        "network": "stopping the run on Perplexity failed",
    }[how]
    assert warning in caplog.text
    assert TOKEN not in caplog.text


async def test_a_stop_before_perplexity_named_the_run_sends_nothing(owner, alinked, upstream):
    serve(upstream, Paced([], pause=0.01, stall=30, end=False))
    route = upstream.post("/rest/sse/perplexity_terminate").respond(json={})
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "stop at once"}))
    await comm.receive_from(timeout=5)
    entry = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": str(entry.pk)}))
    await receive_until(comm, "status-stopped")
    await comm.disconnect()
    await settled()
    assert route.call_count == 0
