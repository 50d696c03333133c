"""Every upstream fault of the fake Perplexity, pushed through the real server (daphne, curl
transport): the right saved status, the right sentence on the socket, and the next search works.

Connection resets (before the status, mid-stream) cannot be produced by an ASGI app under daphne
(it answers 500 or keeps the socket open); they are covered at the HTTP edge with respx
(tests/perplexity/test_client.py, tests/search/test_consumer.py)."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control
from tests.e2e.test_search_journey import linked_owner
from tests.e2e.test_two_processes import receive_until, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

FAULTS = [
    ("401", "failed", "Perplexity did not accept the linked session. Re-link in Settings."),
    ("403", "failed", "Perplexity's Cloudflare check blocked this server."),
    ("429", "failed", "Perplexity's rate limit: try again in 7 s."),
    ("400", "failed", "Perplexity rejected the request format; pplxweb may need an update."),
    ("500", "failed", "Perplexity had a server error (500)."),
    ("malformed", "completed", ""),
    ("stall", "failed", "Perplexity sent nothing for 2 s; what arrived is kept."),
    ("endless", "failed", "Perplexity took too long to finish this answer; what arrived is kept."),
    ("no_completed", "truncated", "The answer stopped before Perplexity finished it."),
]


async def test_every_fault_ends_in_its_status_and_sentence_and_the_next_search_works(
    pplxweb_server, fake_perplexity, server_log
):
    owner = await linked_owner()
    cookie = await session_cookie(owner)
    url = pplxweb_server.replace("http://", "ws://") + "/ws/search/"
    async with connect(url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as ws:
        for fault, status, sentence in FAULTS:
            control(fake_perplexity, ask={"fault": fault, "pace": 0.01})
            await ws.send(json.dumps({"q": f"fault {fault}"}))
            seen = await receive_until(ws, f"status-{status}", timeout=20)
            entry = await Entry.objects.filter(question=f"fault {fault}").aget()
            assert entry.status == status, (fault, entry.status, entry.error)
            assert sentence in entry.error, (fault, entry.error)
            assert sentence.replace("'", "&#x27;") in seen, fault
            if fault in ("stall", "no_completed"):
                assert entry.answer.startswith("Paris is the"), fault  # the partial answer is kept
            await asyncio.sleep(0.2)
        control(fake_perplexity, ask={})
        await ws.send(json.dumps({"q": "after all that"}))
        await receive_until(ws, "status-completed", timeout=20)
    # the link's status follows the faults that concern it; the server logged no traceback
    log = server_log.read_text()
    assert "Traceback" not in log, log[-3000:]
