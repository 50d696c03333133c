"""The public API path (Perplexity's Agent API) through the real server: a person with only an
API key searches; the fake records a bearer and no session cookie; its faults end in their status
and sentence."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from accounts.models import PerplexityAccount
from search.models import Entry
from tests.e2e.conftest import control, seen
from tests.e2e.test_fault_matrix import FAULTS as WEB_FAULTS
from tests.e2e.test_two_processes import receive_until, session_cookie
from tests.fake_perplexity.app import API_KEY

pytestmark = pytest.mark.django_db(transaction=True)

# the web path's outcomes hold on the API path too (its own 401 is checked below)
FAULTS = [f for f in WEB_FAULTS if f[0] in ("429", "500", "stall", "no_completed")] + [
    # the API has no rejoin (docs/protocol.md §9.1 is the web app's): a dropped answer stays cut short
    ("reset_mid_stream", "truncated", "The connection to Perplexity dropped mid-answer."),
]


@sync_to_async
def api_key_owner(key: str):
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_superuser(username="keyholder", password="x" * 16)
    PerplexityAccount.objects.create(user=owner, api_key=key)
    return owner


async def test_a_search_with_an_api_key_and_its_faults(pplxweb_server, fake_perplexity, server_log):
    owner = await api_key_owner(API_KEY)
    cookie = await session_cookie(owner)
    url = pplxweb_server.replace("http://", "ws://") + "/ws/search/"
    control(fake_perplexity, ask={"pace": 0.01}, requests=[])
    async with connect(url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps({"q": "capital of France by API"}))
        page = await receive_until(ws, "status-completed", timeout=20)
        assert "It lies on the Seine." in page and "Paris - Wikipedia" in page
        entry = await Entry.objects.filter(question="capital of France by API").aget()
        assert entry.status == "completed" and entry.credential == "api_key"
        asks = [r for r in seen(fake_perplexity) if r["path"] == "/v1/agent"]
        assert len(asks) == 1
        assert asks[0]["headers"]["authorization"] == f"Bearer {API_KEY}"
        assert "cookie" not in asks[0]["headers"]
        assert json.loads(asks[0]["body"])["tool_choice"] == "required"  # the Agent API, search forced
        for fault, status, sentence in FAULTS:
            control(fake_perplexity, ask={"fault": fault, "pace": 0.01})
            await ws.send(json.dumps({"q": f"api fault {fault}"}))
            page = await receive_until(ws, f"status-{status}", timeout=20)
            entry = await Entry.objects.filter(question=f"api fault {fault}").aget()
            assert (entry.status, entry.error[: len(sentence)]) == (status, sentence), fault
            assert sentence.replace("'", "&#x27;") in page, fault
            if status == "truncated" or fault == "stall":
                assert entry.answer.startswith("Paris is the"), fault  # what arrived is kept
            await asyncio.sleep(0.2)
        # a key Perplexity refuses says so, and does not mark a Perplexity link as broken
        await PerplexityAccount.objects.filter(user=owner).aupdate(api_key="pplx-revoked")
        control(fake_perplexity, ask={"pace": 0.01})
        await ws.send(json.dumps({"q": "with a revoked key"}))
        page = await receive_until(ws, "status-failed", timeout=20)
        assert "Perplexity did not accept the API key. Check it in Settings." in page
        account = await PerplexityAccount.objects.aget(user=owner)
        assert account.status != PerplexityAccount.Status.NEEDS_ATTENTION
    assert "Traceback" not in server_log.read_text()
