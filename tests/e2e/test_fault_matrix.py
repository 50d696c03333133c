"""Every upstream fault of the fake Perplexity, pushed through the real server (daphne, curl
transport): the right saved status, the right sentence on the socket, and the next search works.

Connection resets come from the relay in front of the fake (an ASGI app cannot drop a socket),
asked for by the fake's plan or by a marker in the question."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control
from tests.e2e.test_search_journey import linked_owner
from tests.e2e.test_two_processes import receive_until, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

FAULTS = [
    ("reset_before_status", "failed", "pplxweb could not reach Perplexity."),
    ("reset_mid_stream", "completed", ""),  # rejoined (docs/protocol.md §9.1): the run went on upstream
    (
        "reset_mid_stream+gone",
        "truncated",
        "The connection to Perplexity dropped mid-answer. Rejoining it failed",
    ),
    ("[reset-before]", "failed", "pplxweb could not reach Perplexity."),
    ("[reset-mid]", "completed", ""),
    ("401", "failed", "Perplexity did not accept the linked session. Re-link in Settings."),
    ("403", "failed", "Perplexity's Cloudflare check blocked this server."),
    ("429", "failed", "Perplexity's rate limit: try again in 7 s."),
    ("400", "failed", "Perplexity rejected the request format; pplxweb may need an update."),
    ("500", "failed", "Perplexity had a server error (500)."),
    ("malformed", "completed", ""),
    ("stall", "failed", "Perplexity sent nothing for 2 s; what arrived is kept."),
    ("endless", "failed", "Perplexity took too long to finish this answer; what arrived is kept."),
    ("no_completed", "truncated", "The answer stopped before Perplexity finished it."),
    # not faults of the connection: what a 200 can carry instead of an answer (docs/protocol.md §5.4)
    (
        "stream:error_frame",
        "failed",
        "Perplexity could not process this question (it said: Error in processing query)",
    ),
    ("stream:empty", "failed", "Perplexity sent nothing for this question (asked twice)."),
]


def plan_for(fault: str) -> dict:
    if fault.startswith("stream:"):
        return {"stream": fault.removeprefix("stream:"), "pace": 0.01}
    if fault.endswith("+gone"):  # and Perplexity no longer has the run when pplxweb rejoins it
        return {"fault": fault.removesuffix("+gone"), "rejoin": "gone", "pace": 0.01}
    return {"fault": "" if fault.startswith("[") else fault, "pace": 0.01}


def page_text(url: str, cookie: str) -> str:
    request = urllib.request.Request(url, headers={"Cookie": cookie, "Host": "localhost"})  # noqa: S310
    return urllib.request.urlopen(request, timeout=10).read().decode()  # noqa: S310 - loopback test server


async def test_every_fault_ends_in_its_status_and_sentence_and_the_next_search_works(
    pplxweb_server, fake_perplexity, server_log
):
    owner = await linked_owner()
    cookie = await session_cookie(owner)
    url = pplxweb_server.replace("http://", "ws://") + "/ws/search/"
    async with connect(url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as ws:
        for fault, status, sentence in FAULTS:
            control(fake_perplexity, ask=plan_for(fault))
            await ws.send(json.dumps({"q": f"fault {fault}"}))
            seen = await receive_until(ws, f"status-{status}", timeout=20)
            entry = await Entry.objects.filter(question=f"fault {fault}").aget()
            assert entry.status == status, (fault, entry.status, entry.error)
            assert sentence in entry.error, (fault, entry.error)
            assert sentence.replace("'", "&#x27;") in seen, fault
            if fault in ("reset_mid_stream", "[reset-mid]"):  # rejoined: the whole answer
                assert entry.answer.endswith("It lies on the Seine."), (fault, entry.answer)
            if fault in ("stall", "no_completed", "reset_mid_stream+gone"):
                assert entry.answer.startswith("Paris is the"), fault  # the partial answer is kept
            # and the saved page says the same after a reload
            saved = await asyncio.to_thread(page_text, f"{pplxweb_server}/thread/{entry.thread_id}/", cookie)
            assert sentence.replace("'", "&#x27;") in saved and f"status-{status}" in saved, fault
            await asyncio.sleep(0.2)
        # a socket dropped before any status is retried once, silently
        control(fake_perplexity, ask={"pace": 0.01})
        await ws.send(json.dumps({"q": "dropped once [reset-before-once]"}))
        await receive_until(ws, "status-completed", timeout=20)
        assert (await Entry.objects.filter(question__startswith="dropped once").aget()).answer.startswith(
            "Paris is the"
        )
        await ws.send(json.dumps({"q": "after all that"}))
        await receive_until(ws, "status-completed", timeout=20)
    # the link's status follows the faults that concern it; the server logged no traceback
    log = server_log.read_text()
    assert "Traceback" not in log, log[-3000:]
