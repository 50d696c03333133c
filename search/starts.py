"""Search starts from the sockets, gathered: everyone who asks while a start is on the database
thread is started together in the next trip.

Each start costs about ten statements, and the sockets' database work runs on one thread, so 50
people asking at the same moment used to wait for 50 starts in a row (the last one about half a
second). Together, a burst costs about as many statements as one start, plus a little per person.
The outcome is the same as one start after another in the order they arrived.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.http import Http404, QueryDict

from accounts.services import catalogue
from search import services
from search.display import catalogue_models
from search.forms import SearchForm


def prepare_many(asks: list[tuple[object, QueryDict]]) -> list:
    """For each (user, the socket's message): a sentence saying why nothing was started, or
    (entry, upstream request, what launch() needs preloaded)."""
    # the catalogue is read once, for the forms' model choices and the runs' model names
    current = catalogue()
    outcomes: list = [None] * len(asks)
    valid: list[tuple[int, SearchForm]] = []
    # someone removed from the household keeps their open socket: their rows must not be written
    # (and one such row would fail everyone's shared transaction)
    present = set(
        get_user_model()
        .objects.filter(pk__in={user.pk for user, _ in asks}, is_active=True)
        .values_list("pk", flat=True)
    )
    for i, (user, data) in enumerate(asks):
        if user.pk not in present:
            outcomes[i] = "Your pplxweb account was removed, so nothing was started."
            continue
        form = SearchForm(data, catalogue=current)
        if form.is_valid():
            valid.append((i, form))
        else:
            outcomes[i] = " ".join(str(e) for errors in form.errors.values() for e in errors)
    users = list({asks[i][0].pk: asks[i][0] for i, _ in valid}.values())
    defaults = services.defaults_for_many(users)
    started = services.start_searches(
        [
            services.Ask(
                asks[i][0],
                form.cleaned_data["q"],
                form.options(defaults[asks[i][0].pk]),
                form.cleaned_data.get("thread"),
            )
            for i, form in valid
        ]
    )
    launched = {entry.user_id for entry in started if not isinstance(entry, Exception)}
    preloaded = services.preloads([u for u in users if u.pk in launched], catalogue_models(current))
    for (i, form), entry in zip(valid, started, strict=True):
        if isinstance(entry, services.SearchRefused):
            outcomes[i] = entry.message
        elif isinstance(entry, Http404):
            outcomes[i] = "That conversation was not found."
        else:
            request = services.build_request(entry, new_thread=not form.cleaned_data.get("thread"))
            outcomes[i] = (entry, request, preloaded[entry.user_id])
    return outcomes


class Gathered:
    """`await gathered(item)` runs `work([item, ...])` on the database thread with whatever else
    was asked while the previous call ran, and returns this item's result. One call at a time
    per event loop; an exception in `work` is raised to everyone in that call."""

    def __init__(self, work: Callable[[list], list]) -> None:
        self.work = database_sync_to_async(work)
        self.waiting: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> [(item, future)]
        self.serving: set[asyncio.Task] = set()

    async def __call__(self, item):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        waiting = self.waiting.get(loop)
        if waiting is None:
            waiting = self.waiting[loop] = []
            # a context of its own: the socket that came first may close before the others are served
            task = loop.create_task(self._serve(loop, waiting), context=contextvars.Context())
            self.serving.add(task)
            task.add_done_callback(self.serving.discard)
        waiting.append((item, future))
        return await future

    async def _serve(self, loop, waiting: list) -> None:
        batch: list = []
        try:
            while waiting:
                batch = waiting[:]
                waiting.clear()
                try:
                    results = await self.work([item for item, _ in batch])
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for (_, future), result in zip(batch, results, strict=True):
                        if not future.done():
                            future.set_result(result)
        finally:
            del self.waiting[loop]
            for _, future in batch + waiting:  # cancelled (the loop is closing): nobody waits forever
                if not future.done():
                    future.cancel()


prepare = Gathered(prepare_many)
