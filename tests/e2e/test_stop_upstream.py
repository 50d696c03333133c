"""Through the real server and the fake: Stop ends the read, then tells Perplexity to stop too;
the fake records the terminate call and its body."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control, seen
from tests.e2e.test_search_journey import linked_owner
from tests.e2e.test_two_processes import receive_until, session_cookie
from tests.fake_perplexity.app import TOKEN

pytestmark = pytest.mark.django_db(transaction=True)


async def test_stop_terminates_the_run_on_perplexity(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    cookie = await session_cookie(owner)
    control(fake_perplexity, ask={"answer": [f"part{i} " for i in range(200)], "pace": 0.03}, requests=[])
    url = pplxweb_server.replace("http://", "ws://") + "/ws/search/"
    before = int(time.time() * 1000)
    async with connect(url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps({"q": "stop on both sides"}))
        await receive_until(ws, "part3")
        entry = await Entry.objects.aget()
        await ws.send(json.dumps({"action": "stop", "entry": str(entry.pk)}))
        await receive_until(ws, "status-stopped")
    async with asyncio.timeout(10):
        while not (
            calls := [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_terminate"]
        ):
            await asyncio.sleep(0.05)
    assert len(calls) == 1
    body = json.loads(calls[0]["body"])
    assert body.pop("terminate_requested_at_ms") >= before
    entry = await Entry.objects.aget()
    assert body == {
        "entry_uuid": entry.backend_uuid,
        "context_uuid": entry.context_uuid,
        "model_preference": "pplx_pro",
    }
    assert entry.backend_uuid and entry.context_uuid and entry.status == "stopped"
    assert calls[0]["headers"]["x-perplexity-request-reason"] == "thread-floating-footer"
    assert TOKEN in calls[0]["headers"]["cookie"]
