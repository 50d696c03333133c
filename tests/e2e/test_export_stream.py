"""The history zip through daphne: sent while it is written, and a download cut short harms nothing."""

from __future__ import annotations

import asyncio
import io
import json
import random
import zipfile

import httpx
import pytest
from asgiref.sync import sync_to_async

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def someone_with_a_long_history(count: int = 300) -> str:
    """Their session cookie; `count` conversations of ~8 KB answers (a zip of several parts)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from search.models import Entry, Thread

    rng = random.Random(5)
    words = [
        f"{rng.choice('bcdfgklmnprstvz')}{rng.choice('aeiou')}{rng.randrange(10**6)}" for _ in range(5000)
    ]
    user = get_user_model().objects.create_user(username="exporter", password="x" * 12)
    threads = Thread.objects.bulk_create(Thread(user=user, title=f"t{i}") for i in range(count))
    Entry.objects.bulk_create(
        Entry(
            thread=t,
            user=user,
            question=f"q{i}?",
            status="completed",
            answer=" ".join(rng.choices(words, k=900)),
        )
        for i, t in enumerate(threads)
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return f"pplxweb_sessionid={client.cookies['pplxweb_sessionid'].value}"


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_a_history_download_cut_short_leaves_the_server_well(pplxweb_server, server_log):
    headers = {"Cookie": await someone_with_a_long_history()}
    url = f"{pplxweb_server}/history/export.zip"
    async with httpx.AsyncClient(timeout=60) as client:
        async with client.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
            assert "content-length" not in response.headers  # sent while it is written
            first = await anext(response.aiter_raw())
        assert first.startswith(b"PK")  # and the connection is closed here, mid-download
        await asyncio.sleep(0.5)
        whole = await client.get(url, headers=headers)
    archive = zipfile.ZipFile(io.BytesIO(whole.content))
    assert archive.testzip() is None and len(whole.content) > 4 * len(first)
    assert len(json.loads(archive.read("history.json"))["threads"]) == 300
    assert "Traceback" not in server_log.read_text()
