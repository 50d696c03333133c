"""The process's keeper of library jobs: a task that starts new jobs (a view only writes the row),
resumes those whose process stopped (a restart), and starts the daily automatic syncs.

It starts with the first request or socket the process serves (`starting` wraps the ASGI app),
and at once under `manage.py serve`. Several processes share the work: a job is claimed with one
conditional UPDATE, so only one runs it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref

from channels.db import database_sync_to_async as db
from django.conf import settings

from search.library import jobs, runner

log = logging.getLogger(__name__)
POLL = 1.0  # seconds between looks for jobs to start
SCHEDULE_EVERY = 60.0  # seconds between looks at the automatic syncs
_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = weakref.WeakKeyDictionary()


async def keep() -> None:
    scheduled = 0.0
    while True:
        try:
            for job_id in await db(jobs.orphans)(set(runner.JOBS)):
                runner.launch(job_id)
            if time.monotonic() - scheduled >= SCHEDULE_EVERY:
                scheduled = time.monotonic()
                await db(jobs.due_syncs)()
        except Exception:  # the database away for a moment: look again later
            log.warning("library keeper: could not look for jobs", exc_info=True)
        await asyncio.sleep(POLL)


def ensure_started() -> None:
    if not settings.LIBRARY_KEEPER:
        return
    loop = asyncio.get_running_loop()
    task = _keepers.get(loop)
    if task is None or task.done():
        _keepers[loop] = loop.create_task(keep(), name="library-keeper", context=contextvars.Context())


def starting(app):
    """The ASGI app, starting the keeper on the first connection the process serves."""

    async def wrapped(scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            ensure_started()
        return await app(scope, receive, send)

    return wrapped
