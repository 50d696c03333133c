"""A server killed mid-answer (SIGKILL: nothing saved at the end) and started again: the new
process rejoins the run Perplexity kept working on (docs/protocol.md §9.1) and the answer ends
completed and whole."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import urllib.request

import pytest
from websockets.asyncio.client import connect

from search.models import Entry
from tests.e2e.conftest import control, server_env, start_pplxweb, stop, worker_pid
from tests.e2e.test_search_journey import linked_owner
from tests.e2e.test_two_processes import receive_until, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)
PARTS = [f"Part {i} of the answer. " for i in range(60)]


def env_of(fake: str) -> dict:
    return server_env(fake, PPLXWEB_PERPLEXITY_ANSWER_TIMEOUT="8")


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_a_server_killed_mid_answer_rejoins_the_run_after_a_restart(
    pplxweb_server, fake_perplexity, tmp_path
):
    owner = await linked_owner()
    cookie = await session_cookie(owner)
    first, port = start_pplxweb(env_of(fake_perplexity), tmp_path / "first.log")
    control(fake_perplexity, ask={"answer": PARTS, "pace": 0.05})  # 3 s of answer
    try:
        base = f"http://127.0.0.1:{port}"
        async with connect(
            base.replace("http", "ws") + "/ws/search/", origin=base, additional_headers={"Cookie": cookie}
        ) as ws:
            await ws.send(json.dumps({"q": "killed mid-answer"}))
            await receive_until(ws, "Part 8 of", timeout=10)
            # no shutdown, no final save; granian's main process first, which would otherwise
            # start a new worker in place of the killed one (that one then shuts down cleanly)
            worker = worker_pid(first)
            for pid in (first.pid, worker):
                os.kill(pid, signal.SIGKILL)
            first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    entry = await Entry.objects.aget(question="killed mid-answer")
    assert entry.status == "running" and entry.backend_uuid.startswith("fake-run-")
    second, port = start_pplxweb(env_of(fake_perplexity), tmp_path / "second.log")
    try:
        await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10).read()
        )
        async with asyncio.timeout(60):  # a bound for a busy machine, not a figure
            while (entry := await Entry.objects.aget(pk=entry.pk)).status == "running":
                await asyncio.sleep(0.2)
    finally:
        stop(second)
        control(fake_perplexity, ask={})
    logs = "".join(
        f"--- {n}.log\n" + (tmp_path / f"{n}.log").read_text()[-3000:] for n in ("first", "second")
    )
    assert entry.status == "completed", (entry.error, logs)
    assert entry.answer == "".join(PARTS).strip() or entry.answer == "".join(PARTS)
    log = (tmp_path / "second.log").read_text()
    assert "Traceback" not in log, log[-3000:]
