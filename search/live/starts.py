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
import logging
import weakref
from collections.abc import Callable

from channels.db import database_sync_to_async
from django.db import IntegrityError
from django.http import Http404, QueryDict

from accounts.fields import UNREADABLE, DecryptionError
from accounts.services import NoCredential, catalogue
from search.attachments import Refused
from search.attachments import views as attachment_views
from search.display import catalogue_models
from search.forms import SearchForm
from search.live import asking
from search.models import Entry

log = logging.getLogger(__name__)
NOT_STARTED = "pplxweb could not start this search (an error on the server, logged); nothing was started."


def prepare_many(asks: list[tuple[object, QueryDict]]) -> list:
    """For each (user, the socket's message): a sentence saying why nothing was started, or
    (entry, upstream request, what launch() needs preloaded)."""
    # the catalogue is read once, for the forms' model choices and the runs' model names
    current = catalogue()
    outcomes: list = [None] * len(asks)
    valid = _valid_forms(asks, current, outcomes)
    # the credentials first: someone whose stored sign-in does not open starts nothing (no row)
    preloaded = _preloads({asks[i][0].pk: asks[i][0] for i, _ in valid}, catalogue_models(current))
    for i, _ in valid:
        if asks[i][0].pk not in preloaded:
            outcomes[i] = f"{UNREADABLE} Nothing was started."
    valid = [(i, form) for i, form in valid if asks[i][0].pk in preloaded]
    people = {asks[i][0].pk: asks[i][0] for i, _ in valid}
    try:
        valid, started = _start(asks, valid, people, outcomes, preloaded)
    except IntegrityError:
        # Someone was removed, or a thread deleted, between the checks and the commit: the
        # transaction rolled back whole (no row, no token), and this time the checks see it.
        valid, started = _start(asks, valid, people, outcomes, preloaded)
    for (i, form), entry in zip(valid, started, strict=True):
        if isinstance(entry, asking.SearchRefused):
            outcomes[i] = entry.message
        elif isinstance(entry, Http404):
            outcomes[i] = "That conversation was not found."
        else:
            outcomes[i] = _launchable(entry, form, preloaded[entry.user_id])
    return outcomes


def prepare_judged_alone(asks: list[tuple[object, QueryDict]]) -> list:
    """prepare_many, where an exception for one ask refuses that ask with a sentence and the
    others start: the trip failed inside its transaction (nothing of it was written), so each
    ask is tried again on its own."""
    try:
        return prepare_many(asks)
    except Exception:
        log.exception("a gathered start of %d asks failed; trying each alone", len(asks))
    if len(asks) == 1:
        return [NOT_STARTED]
    return [_alone(ask) for ask in asks]


def _alone(ask: tuple[object, QueryDict]):
    try:
        return prepare_many([ask])[0]
    except Exception:
        log.exception("search by user %s not started", getattr(ask[0], "pk", None))
        return NOT_STARTED


def _launchable(entry, form: SearchForm, preloaded: dict):
    """(entry, upstream request, preloaded); if the request cannot be built, the entry (already
    committed) is saved failed with a sentence, never left running without a run."""
    try:
        request = asking.build_request(entry, new_thread=not form.cleaned_data.get("thread"))
    except Exception:
        log.exception("entry %s: the upstream request could not be built", entry.pk)
        Entry.objects.filter(pk=entry.pk).update(status=Entry.Status.FAILED, error=NOT_STARTED)
        return NOT_STARTED
    return (entry, request, preloaded)


def _preloads(people: dict, models: dict) -> dict:
    """asking.preloads for these people (by pk), leaving out whoever's credential row no key
    opens; the others start as usual."""
    try:
        return asking.preloads(list(people.values()), models)
    except DecryptionError:
        pass
    readable = {}
    for pk, user in people.items():
        try:
            readable.update(asking.preloads([user], models))
        except DecryptionError as exc:
            log.error("search by user %s not started: %s", pk, exc)
    return readable


def _start(asks: list, valid: list, people: dict, outcomes: list, preloaded: dict) -> tuple[list, list]:
    """start_searches for the valid asks of people still here who have a credential: (those
    asks, their outcomes)."""
    defaults = asking.defaults_for_many(list(people.values()))
    # someone removed from the household keeps their open socket: their rows must not be written
    # (and one such row would fail everyone's shared transaction)
    for i, _ in valid:
        if asks[i][0].pk not in defaults:
            outcomes[i] = "Your pplxweb account was removed, so nothing was started."
        elif not preloaded[asks[i][0].pk]:  # no credential at all: say so, write no entry
            outcomes[i] = NoCredential.message
    valid = [(i, form) for i, form in valid if asks[i][0].pk in defaults and preloaded[asks[i][0].pk]]
    files = _files(asks, valid, outcomes)
    valid = [(i, form) for i, form in valid if i in files]
    started = asking.start_searches(
        [
            asking.Ask(
                asks[i][0],
                form.cleaned_data["q"],
                form.options(defaults[asks[i][0].pk]),
                form.cleaned_data.get("thread"),
                tuple(files[i]),
            )
            for i, form in valid
        ]
    )
    return valid, started


def _files(asks: list, valid: list, outcomes: list) -> dict[int, list]:
    """Each valid ask's files (by its place); one whose files are not ready gets the sentence."""
    files = {}
    for i, _ in valid:
        try:
            files[i] = attachment_views.ready(asks[i][0], asks[i][1])
        except Refused as exc:
            outcomes[i] = f"{exc.message} Nothing was asked."
    return files


def _valid_forms(asks: list, current: dict, outcomes: list) -> list[tuple[int, SearchForm]]:
    """The asks' valid forms (with their places); an invalid one's errors go in its place."""
    valid = []
    for i, (_, data) in enumerate(asks):
        form = SearchForm(data, catalogue=current)
        if form.is_valid():
            valid.append((i, form))
        else:
            outcomes[i] = " ".join(str(e) for errors in form.errors.values() for e in errors)
    return valid


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


prepare = Gathered(prepare_judged_alone)
