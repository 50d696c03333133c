"""The live search socket: validate, start runs, relay their fragments, stop them.

Thin by design: authentication happens in connect() (before accept), every message is checked
with the same SearchForm as the HTTP path, and the run itself is a task that outlives the socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from datetime import timedelta

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.db.models import Q
from django.http import Http404, QueryDict
from django.template.loader import render_to_string
from django.utils import timezone

from pplxweb import build, sockets
from pplxweb.ids import parse as parse_id
from pplxweb.ids import parse_all as parse_ids
from pplxweb.perplexity.research import QUESTIONS_MAX
from pplxweb.signed_in import FollowsSignIn
from search.display import entry_html, mark, new_entry_fragment
from search.live import control, liveness, redo, runner, starts
from search.models import Entry, Thread, entry_for, thread_for
from search.saving import clean

log = logging.getLogger(__name__)
MAX_MESSAGE = 64 * 1024
MAX_LIVE = 1024 * 1024  # the largest update sent as it is; a larger one says to reload instead
MARK = re.compile(r"<!--pplxweb:seq (\d+) (\d+)(?: \w+)?-->")
TOO_LONG_TEXT = (
    "This answer is longer than a live update carries (1 MB); it is saved as it arrives: "
    "reload the page to read it."
)
JUST_ENDED = timedelta(seconds=30)
MAX_RECHECK = 50  # answers a reopened page may ask about at once


def _first_text(value) -> str:
    """The first non-blank text of a form value (a chosen option and a typed answer share a name)."""
    values = value if isinstance(value, list) else [value]
    return next((v.strip() for v in values if isinstance(v, str) and v.strip()), "")


def _as_querydict(data: dict) -> QueryDict:
    query = QueryDict(mutable=True)
    for key, value in data.items():
        if key == "HEADERS":
            continue
        values = value if isinstance(value, list) else [value]
        # JSON can carry NUL and lone surrogates, which no database stores: gone before the form
        texts = [v if isinstance(v, str) else json.dumps(v) for v in values if v is not None]
        query.setlist(key, [clean(text) for text in texts])
    return query


class SearchConsumer(FollowsSignIn, sockets.FollowsLayer, AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if build.stale(self.scope):  # a page of another build: it offers a reload
            await self.accept()
            await self.close(code=build.UPDATED)
            return
        self.watching: set[int] = set()
        liveness.sockets += 1
        liveness.keep_watch(runner.RUNS, runner.rejoin_lost)
        await self.follow_sign_in(user)
        await self.accept()
        query = QueryDict(self.scope.get("query_string", b"").decode())
        self.thread_id = None  # the conversation the page shows (an agent's answer there joins it)
        # a version the page shows in another's place (?version=)
        self.showing = parse_id(Entry, query.get("showing"))
        if query.get("thread"):  # an id out of range is not found, like any unknown one
            await self.watch_thread(query["thread"])

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "watching"):
            liveness.sockets -= 1
            groups = self.sign_in_groups() + [runner.group(entry_id) for entry_id in self.watching]
            await sockets.leave(self.channel_layer, groups, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if text_data is None or len(text_data) > MAX_MESSAGE:
            await self.error("That message is too large (at most 64 KB); nothing was started.")
            return
        try:
            data = json.loads(text_data)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            await self.error("pplxweb could not read that message; nothing was started.")
            return
        # the session is checked again for every message (a sign-out elsewhere may have missed us)
        if await self.signed_out_now():
            return
        action = data.get("action")
        if action == "stop":
            await self.stop(data.get("entry"))
        elif action == "watch":
            await self.watch_thread(data.get("thread"))
        elif action == "recheck":
            await self.recheck(data.get("entries"))
        elif action == "catch_up":
            await self.catch_up(data.get("entries"))
        elif action == "clarify":
            await self.clarify(data, bool(data.get("skip")))
        elif action == "redo":
            await self.redo(data)
        elif action == "show":
            await self.show_version(data)
        else:
            await self.search(data)

    # --- actions --------------------------------------------------------------------------------

    async def search(self, data: dict) -> None:
        # one answer at a time in a conversation, whichever page or socket asks (the page says so
        # before asking; this holds for a second tab or an old page too)
        prepare = database_sync_to_async(starts.prepare)
        prepared = await prepare(self.user, _as_querydict(data), exclusive=True)
        if isinstance(prepared, str):
            await self.error(prepared)
            return
        entry, request, preloaded = prepared
        await self.follow(entry.pk)
        runner.launch(entry, self.user, request, **preloaded)
        # Let the run send its upstream request, then render the new entry while that connects.
        # The run's updates reach this socket through the group, and a consumer handles one
        # message at a time, so the new entry still arrives before them. Rendering it needs no
        # database: a new entry has no related rows to read.
        await asyncio.sleep(0)
        await self.send(text_data=new_entry_fragment(entry))

    async def redo(self, data: dict) -> None:
        """Ask again, Retry, Edit question: the turn answered again in place (search/live/redo.py);
        the new version replaces the one the page shows and streams in."""
        shown = data.get("entry")
        try:
            entry, request, preloaded = await redo.start(self.user, shown, _as_querydict(data))
        except redo.NotStarted as exc:
            await self.send(text_data=redo.refusal(shown, exc.message, data.get("from") == "edit"))
            return
        await self.follow(entry.pk)
        runner.launch(entry, self.user, request, **preloaded)
        await asyncio.sleep(0)  # as for a new question: its request goes out first
        await self.send(
            text_data=await database_sync_to_async(redo.in_place)(entry, redo.id_of(shown), "full")
        )

    async def show_version(self, data: dict) -> None:
        """Another version of an answer, in the place of the one the page shows (`instead`)."""
        instead = data.get("instead")

        def shown() -> str:
            entry = redo.show(self.user, data.get("entry"), redo.id_of(instead))
            return redo.in_place(entry, redo.id_of(instead), "saved")

        try:
            await self.send(text_data=await database_sync_to_async(shown)())
        except redo.NotStarted as exc:
            await self.send(text_data=redo.refusal(instead, exc.message))

    async def stop(self, entry_id) -> None:
        entry = await self._own_entry(entry_id)
        if entry is None:
            await self.error("That answer was not found.")
            return
        if entry.running:
            await control.stop(entry.pk)

    async def clarify(self, data: dict, skip: bool) -> None:
        """A research run's clarifying questions answered (for question i, `answer-i`: the chosen
        option or the typed text) or skipped."""
        entry = await self._own_entry(data.get("entry"))
        if entry is None or not entry.running:
            await self.error("That answer is no longer waiting for a reply.")
            return
        answers = [_first_text(data.get(f"answer-{i}")) for i in range(QUESTIONS_MAX)]
        if not any(answers) and not skip:
            await self.error("Choose an option or type an answer (or skip the questions).")
            return
        await control.clarify(entry.pk, [] if skip else [clean(a, 2000) for a in answers])

    async def watch_thread(self, thread_id) -> None:
        entries = await database_sync_to_async(self._thread_entries)(thread_id)
        if entries is None:
            await self.error("That conversation was not found.")
            return
        self.thread_id = parse_id(Thread, thread_id)
        for entry in entries:
            if not entry.running:  # it ended between the page's render and this socket
                await self.send(text_data=await database_sync_to_async(_replace_entry)(entry))
                continue
            await self.follow(entry.pk)
            # what the database has now, then the run (wherever it is) sends its full state
            await self.send(text_data=await database_sync_to_async(_replace_entry)(entry))
            await control.sync(entry.pk, self.channel_name)

    async def recheck(self, entry_ids) -> None:
        """A reopened page names the answers it shows running: those that ended meanwhile, however
        long ago (Redis away for minutes, a long restart), are sent whole. The running ones are
        watched already."""
        if not isinstance(entry_ids, list):
            await self.error("pplxweb could not read that message; nothing was started.")
            return
        ids = set(parse_ids(Entry, entry_ids[:MAX_RECHECK]))
        for html in await database_sync_to_async(self._ended)(ids):
            await self.send(text_data=html)

    async def catch_up(self, entry_ids) -> None:
        """A page missed an update of these answers (a gap in their numbers, or one quiet for a
        while): the running ones send their whole state, the ended ones come whole from the
        database."""
        if not isinstance(entry_ids, list):
            await self.error("pplxweb could not read that message; nothing was started.")
            return
        ids = set(parse_ids(Entry, entry_ids[:MAX_RECHECK]))
        running = await database_sync_to_async(self._running)(ids)
        for entry_id in sorted(running):
            await self.follow(entry_id)
            await control.sync(entry_id, self.channel_name)
        await self.recheck(sorted(ids - running))

    def _running(self, ids: set[int]) -> set[int]:
        own = Entry.objects.filter(pk__in=ids, thread__user=self.user, status=Entry.Status.RUNNING)
        return set(own.values_list("pk", flat=True))

    def _ended(self, ids: set[int]) -> list[str]:
        if not ids:
            return []
        liveness.sweep_interrupted()
        ended = Entry.objects.filter(pk__in=ids, thread__user=self.user).exclude(status=Entry.Status.RUNNING)
        return [_replace_entry(entry) for entry in ended.order_by("pk")]

    def _thread_entries(self, thread_id) -> list[Entry] | None:
        try:
            thread = thread_for(self.user, parse_id(Thread, thread_id))
        except Http404:
            return None
        liveness.sweep_interrupted()
        # the running ones, and those that ended a moment ago: the page may show them running
        # (of a turn, the page shows one version: the shown one, or the one it names)
        just_ended = timezone.now() - JUST_ENDED
        recent = thread.entries.filter(Q(status=Entry.Status.RUNNING) | Q(heartbeat__gte=just_ended))
        showing = thread.entries.filter(pk=self.showing).exclude(turn=None).first() if self.showing else None
        if showing is None:
            return list(recent.filter(shown=True))
        return list(
            recent.filter(Q(shown=True) | Q(pk=showing.pk)).exclude(Q(turn=showing.turn) & ~Q(pk=showing.pk))
        )

    async def _own_entry(self, entry_id) -> Entry | None:
        def get():
            try:
                return entry_for(self.user, parse_id(Entry, entry_id))
            except Http404:
                return None

        return await database_sync_to_async(get)()

    async def follow(self, entry_id: int) -> None:
        if entry_id not in self.watching:
            self.watching.add(entry_id)
            await self.channel_layer.group_add(runner.group(entry_id), self.channel_name)

    async def send(self, text_data=None, bytes_data=None, close=False) -> None:
        # The browser may close the socket while a fragment is on its way (a tab closed mid-answer):
        # once its closing handshake has begun, a send may raise (ASGI: an OSError). There is
        # nobody left to tell; the run goes on (it belongs to the server) and saves as usual.
        if text_data is not None and len(text_data) > MAX_LIVE:
            text_data = _too_long(text_data)
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except OSError:  # what ASGI servers raise for a socket that is closing or closed
            log.debug("socket %s closing; a fragment was not delivered", self.channel_name)

    async def error(self, message: str) -> None:
        await self.send(text_data=render_to_string("search/error_fragment.html", {"message": message}))

    # --- group messages -------------------------------------------------------------------------

    async def dispatch(self, message: dict) -> None:
        # Channels closes stale database connections before every handler: a hop to the one
        # database thread, where it queues behind other people's starts (at 50 searches at once
        # that hop was most of an update's wait). Every database call here goes through
        # database_sync_to_async, which closes them itself on that thread, so no hop.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            await super().dispatch(message)  # it raises the "no handler" error
        else:
            await handler(message)

    async def entry_fragment(self, event: dict) -> None:
        await self.send(text_data=event["html"])

    async def person_asked(self, event: dict) -> None:
        """One of the person's agents asked in the conversation this page shows (search/api): the
        answer joins the page and streams in like one asked here."""
        entry_id = parse_id(Entry, event.get("entry"))
        if entry_id is None or entry_id in self.watching or event.get("thread") != self.thread_id:
            return
        entry = await self._own_entry(entry_id)
        if entry is None:
            return
        await self.follow(entry.pk)
        await self.send(text_data=await database_sync_to_async(_appended_entry)(entry))
        await control.sync(entry.pk, self.channel_name)

    def closed_html(self, message: str, url_name: str, link: str) -> str:
        """Why the socket closed, beside the search box (pplxweb.signed_in)."""
        context = {"message": message, "url_name": url_name, "link": link}
        return render_to_string("search/closed_fragment.html", context)


def _too_long(html: str) -> str:
    """An update too large for a page to take live (a hostile or huge answer): its entry's
    answer says to reload instead, numbered as the update was (the next ones apply to it)."""
    found = MARK.match(html)
    if found is None:
        return render_to_string("search/error_fragment.html", {"message": TOO_LONG_TEXT})
    entry_id, seq = int(found[1]), int(found[2])
    context = {"entry_id": entry_id, "message": TOO_LONG_TEXT}
    return mark(entry_id, seq, "full") + render_to_string("search/too_long_fragment.html", context)


def _appended_entry(entry: Entry) -> str:
    """A turn the page did not ask (an agent's), appended as the database has it."""
    return mark(entry.pk, 0, "saved") + render_to_string(
        "search/appended_entry_fragment.html", {"entry_html": entry_html(entry)}
    )


def _replace_entry(entry: Entry) -> str:
    """The entry as the database has it, replacing the page's (which then waits for a whole
    state before it takes the run's updates)."""
    html = entry_html(entry)
    return mark(entry.pk, 0, "saved") + html.replace(
        f'<article class="entry" id="entry-{entry.pk}"',
        f'<article class="entry" id="entry-{entry.pk}" hx-swap-oob="true"',
        1,
    )
