"""Benchmark: importing a Perplexity library from the fake, then syncing it, in a scratch SQLite.

    .venv/bin/python -m tests.benchmarks.library [THREADS] [TURNS] [CHANGED]

The fake Perplexity runs under granian on a loopback port (tests/fake_perplexity/, its library
generated: THREADS threads of TURNS turns, default 1,000 x 5) and pplxweb's library job imports
it over HTTP with pacing off (PPLXWEB_LIBRARY_PACE=0), as the server runs it. Printed: the
import's time, requests and the process's peak memory (max RSS, Django and all), the database's
size after it; then CHANGED threads (default 10) get a new turn upstream and a sync runs:
its requests (by kind: listing pages, thread pages) and time. Not a test: it only prints figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("PPLXWEB_DATA_DIR", tempfile.mkdtemp(prefix="pplxweb-bench-"))
os.environ.pop("DATABASE_URL", None)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"


def post(base: str, path: str, data: dict) -> dict:
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(data).encode(), method="POST")  # noqa: S310
    return json.loads(urllib.request.urlopen(request, timeout=60).read())  # noqa: S310 - loopback fake


def calls(base: str) -> dict:
    return json.loads(urllib.request.urlopen(f"{base}/_library", timeout=10).read())["calls"]  # noqa: S310


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    import django

    django.setup()
    from asgiref.sync import sync_to_async
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from accounts.models import PerplexityAccount
    from search.library import jobs, runner
    from search.models import Entry, LibraryJob
    from tests.e2e.conftest import start, stop
    from tests.fake_perplexity.app import TOKEN

    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    changed = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    call_command("migrate", verbosity=0)
    log = Path(settings.DATA_DIR) / "fake.log"
    proc, port = start("tests.fake_perplexity.app:application", {**os.environ}, log)
    base = f"http://127.0.0.1:{port}"
    settings.PERPLEXITY_URL = base
    settings.LIBRARY_PACE = 0.0
    try:
        post(base, "/_library", {"generate": {"threads": threads, "turns": turns}, "faults": {}})
        user = get_user_model().objects.create_user(username="bench", password="x" * 12)
        PerplexityAccount.objects.create(
            user=user,
            email="fake@example.com",
            session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
        )

        async def job(kind: str) -> tuple[LibraryJob, float]:
            made = await sync_to_async(jobs.start)(user, kind)
            started = time.perf_counter()
            await runner.launch(made.pk)
            return await sync_to_async(LibraryJob.objects.get)(pk=made.pk), time.perf_counter() - started

        rss_before = max_rss_mb()
        imported, import_seconds = asyncio.run(job("import"))
        rss_after = max_rss_mb()
        import_calls = calls(base)
        database = Path(settings.DATABASES["default"]["NAME"])
        size = sum(p.stat().st_size for p in database.parent.glob(database.name + "*"))
        entries = Entry.objects.filter(user=user).count()
        post(base, "/_library", {"change": {"touch": list(range(0, changed * 3, 3))}})
        synced, sync_seconds = asyncio.run(job("sync"))
        sync_calls = {k: v - import_calls.get(k, 0) for k, v in calls(base).items()}
    finally:
        stop(proc)
    assert imported.state == "done" and synced.state == "done", (imported.error, synced.error)
    rows = [
        ("library", f"{threads:,} threads of {turns} turns (fake over loopback HTTP, pacing off)"),
        ("import: time", f"{import_seconds:.1f} s ({import_seconds / threads * 1000:.1f} ms per thread)"),
        ("import: requests", f"{imported.requests:,} ({import_calls})"),
        ("import: stored", f"{imported.fetched:,} threads, {entries:,} entries ({imported.skipped} skipped, {imported.failed} failed)"),
        ("import: peak memory (max RSS)", f"{rss_after:.0f} MB (before the import {rss_before:.0f} MB)"),
        ("database after import (SQLite + WAL)", f"{size / 2**20:.1f} MB"),
        (f"sync with {changed} changed threads: requests", f"{synced.requests} ({sync_calls})"),
        ("sync: time", f"{sync_seconds:.2f} s; {synced.fetched} fetched, {synced.new_entries} new entries, {synced.unchanged} unchanged"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def long_thread() -> None:
    """`long [PAGES] [KB]`: one thread of PAGES (default 25) pages of 100 turns whose answers are
    KB (default 20) KB each (each page holds every answer three times: ~6 MB of JSON), imported
    in this process; its resident memory is sampled every 5 ms (the floor: before the job)."""
    import threading

    import django

    django.setup()
    from asgiref.sync import sync_to_async
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from accounts.models import PerplexityAccount
    from search.library import jobs, runner
    from search.models import Entry, LibraryJob
    from tests.benchmarks.memory import rss_mb
    from tests.e2e.conftest import start, stop
    from tests.fake_perplexity.app import TOKEN

    pages = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    size = int(sys.argv[3]) * 1024 if len(sys.argv) > 3 else 20 * 1024
    call_command("migrate", verbosity=0)
    proc, port = start(
        "tests.fake_perplexity.app:application", {**os.environ}, Path(settings.DATA_DIR) / "fake.log"
    )
    base = f"http://127.0.0.1:{port}"
    settings.PERPLEXITY_URL = base
    settings.LIBRARY_PACE = 0.0
    peak = [0.0]
    running = [True]

    def sample() -> None:
        while running[0]:
            peak[0] = max(peak[0], rss_mb(os.getpid()))
            time.sleep(0.005)

    try:
        post(base, "/_library", {"threads": [{"title": "long", "turns": [{"size": size}] * (pages * 100)}]})
        user = get_user_model().objects.create_user(username="bench", password="x" * 12)
        PerplexityAccount.objects.create(
            user=user, email="fake@example.com",
            session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
        )  # fmt: skip

        async def job() -> LibraryJob:
            made = await sync_to_async(jobs.start)(user, "import")
            await runner.launch(made.pk)
            return await sync_to_async(LibraryJob.objects.get)(pk=made.pk)

        floor = rss_mb(os.getpid())
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        done = asyncio.run(job())
        running[0] = False
        sampler.join()
    finally:
        stop(proc)
    print(f"one thread of {pages} pages x 100 turns of {size // 1024} KB answers: {done.state}, "
          f"{Entry.objects.filter(user=user).count():,} entries, {done.requests} requests, "
          f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    print(
        f"  resident memory: {floor:.0f} MB before, peak {peak[0]:.0f} MB ({peak[0] - floor:+.0f} MB over it)"
    )


if __name__ == "__main__":
    long_thread() if sys.argv[1:2] == ["long"] else main()
