"""A library import survives its server's crash: the next server process resumes it where it
stopped, and nothing is imported twice."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import urllib.request

import pytest
from asgiref.sync import sync_to_async

from search.models import Entry, LibraryJob
from tests.e2e.conftest import server_env, start_pplxweb, stop, worker_pid
from tests.e2e.test_library_journey import library, linked

pytestmark = pytest.mark.django_db(transaction=True)


async def wait_for(check, timeout: float = 60) -> None:
    async with asyncio.timeout(timeout):
        while not await sync_to_async(check)():
            await asyncio.sleep(0.1)


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_an_import_resumes_after_the_server_dies(fake_perplexity, tmp_path):

    person = await linked("restarter")
    library(fake_perplexity, generate={"threads": 15, "turns": 2}, faults={})
    env = server_env(fake_perplexity, PPLXWEB_IMPERSONATE="off", PPLXWEB_LIBRARY_PACE="0.3")
    first, port = start_pplxweb(env, tmp_path / "first.log")
    try:
        # the job is this server's (its keeper takes it; any other server sees a live runner)
        worker = worker_pid(first)
        job = await LibraryJob.objects.acreate(user=person, runner=f"{socket.gethostname()}:{worker}")
        urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).read()
        await wait_for(lambda: LibraryJob.objects.get(pk=job.pk).fetched >= 4)
        for pid in (worker, first.pid):  # a crash: no chance to save anything more
            os.kill(pid, signal.SIGKILL)
        first.wait(10)
    finally:
        stop(first)
    stopped_at = await LibraryJob.objects.aget(pk=job.pk)
    assert stopped_at.state == "running" and stopped_at.fetched < 15
    second, port = start_pplxweb(env, tmp_path / "second.log")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).read()
        await wait_for(lambda: LibraryJob.objects.get(pk=job.pk).state != "running")
    finally:
        stop(second)
    done = await LibraryJob.objects.aget(pk=job.pk)
    assert done.state == "done", done.error
    assert done.runner != stopped_at.runner and done.listed == 15
    entries = await sync_to_async(
        lambda: list(Entry.objects.filter(user=person).values_list("backend_uuid", flat=True))
    )()
    assert len(entries) == 30 and len(set(entries)) == 30  # every turn once
    assert "Traceback" not in (tmp_path / "second.log").read_text()
