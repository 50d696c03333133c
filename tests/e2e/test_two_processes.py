"""With REDIS_URL and two server processes, a browser on the other process follows the run."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control, server_env, start_pplxweb, stop
from tests.e2e.test_search_journey import linked_owner

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL"), reason="needs REDIS_URL: the in-memory layer is one process's"
    ),
]


@sync_to_async
def session_cookie(user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"pplxweb_sessionid={client.cookies['pplxweb_sessionid'].value}"


async def receive_until(ws, needle: str, timeout: float = 15) -> str:
    seen = ""
    async with asyncio.timeout(timeout):
        while needle not in seen:
            seen += await ws.recv()
    return seen


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_a_second_process_follows_a_run_of_the_first(pplxweb_server, fake_perplexity, tmp_path):

    owner = await linked_owner()
    cookie = await session_cookie(owner)
    control(fake_perplexity, ask={"answer": [f"part{i} " for i in range(60)], "pace": 0.03})
    env = server_env(fake_perplexity, PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT="60")
    second, port = start_pplxweb(env, tmp_path / "second.log")
    try:
        first_url = pplxweb_server.replace("http://", "ws://") + "/ws/search/"
        async with connect(first_url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as first:
            await first.send(json.dumps({"q": "two processes"}))
            await receive_until(first, "part3")
            entry = await Entry.objects.aget()
            other = f"http://127.0.0.1:{port}"
            async with connect(
                f"ws://127.0.0.1:{port}/ws/search/?thread={entry.thread_id}",
                origin=other,
                additional_headers={"Cookie": cookie},
            ) as watcher:
                followed = await receive_until(watcher, "status-completed")
        assert "part59" in followed
        assert (await Entry.objects.aget()).status == "completed"
    finally:
        stop(second)
    assert "Traceback" not in (tmp_path / "second.log").read_text()
