"""The process's keeper of library jobs: a task that starts new jobs (a view only writes the row),
resumes those whose process stopped (a restart), and starts the daily automatic syncs.

It starts with the server (pplxweb/asgi.py: the lifespan's startup, else the first request or
socket the process serves). Several processes share the work: a job is claimed with one
conditional UPDATE, so only one runs it. A view that writes a job wakes its own process's keeper
(`wake`), so the job starts at once; what nobody announced (a stopped process's job) is found at
the next look, every POLL seconds. An idle server does not ask its database every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
import weakref

from channels.db import database_sync_to_async as db
from django.conf import settings

from search.library import jobs, runner

log = logging.getLogger(__name__)
POLL = 30.0  # seconds between looks for jobs nobody announced here
SCHEDULE_EVERY = 60.0  # seconds between looks at the automatic syncs
_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[asyncio.Task, asyncio.Event]] = (
    weakref.WeakKeyDictionary()
)


async def keep(woken: asyncio.Event) -> None:
    scheduled = 0.0
    while True:
        woken.clear()
        try:
            for job_id in await db(jobs.orphans)(set(runner.JOBS)):
                runner.launch(job_id)
            if time.monotonic() - scheduled >= SCHEDULE_EVERY:
                scheduled = time.monotonic()
                if await db(jobs.due_syncs)():
                    woken.set()  # start them now
        except Exception:  # the database away for a moment: look again later
            log.warning("library keeper: could not look for jobs", exc_info=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), POLL)


def ensure_started() -> None:
    if not settings.LIBRARY_KEEPER:
        return
    loop = asyncio.get_running_loop()
    task, _ = _keepers.get(loop, (None, None))
    if task is None or task.done():
        woken = asyncio.Event()
        task = loop.create_task(keep(woken), name="library-keeper", context=contextvars.Context())
        _keepers[loop] = (task, woken)


def wake() -> None:
    """A job was written here: this process's keeper looks now, not at its next POLL (any thread;
    call it once the row is committed)."""
    try:
        keepers = list(_keepers.items())
    except RuntimeError:  # a keeper is being added this instant: it looks at once anyway
        return
    for loop, (task, woken) in keepers:
        if not task.done():
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(woken.set)
