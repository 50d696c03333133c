"""A running answer: upstream stream -> throttled fragments to the entry's group -> database.

The run belongs to the server, not to a socket: it is an asyncio task in the process that
started it, and every browser watching the entry (any tab, any process with Redis) gets its
fragments through the channel group `entry-<id>`, each update numbered (a page that misses one
asks for the whole state). The run listens on a control group `run-<id>` for "stop", "clarify"
and "sync" (a newcomer, or a page that missed an update, asks for the whole current state).
A channel layer that fails (Redis away) never stops a run: it goes on and saves its answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from accounts.services import Credential, make_client, refresh_catalogue
from accounts.services.link import mark_auth_problem
from pplxweb import collector, sockets
from pplxweb.perplexity.errors import AuthError, ChallengeError
from pplxweb.perplexity.extract import ANONYMOUS_MODEL, extract, has_answer, text_complete
from pplxweb.perplexity.request import AskRequest
from search import images, rendered
from search.display import mark
from search.live import asking, liveness, outcome, parts, questions, terminate, upstream
from search.live.checks import FORMAT_CHANGED, failure, format_changed, note_drift, signed_out
from search.live.fragments import AnswerStream
from search.live.outcome import RunState
from search.models import Entry

log = logging.getLogger(__name__)
UPDATE_EVERY = 0.08  # seconds between answer updates
QUIET = 0.025  # a pause this long in the stream sends what is waiting (see Run._flush_now)
SAVE_EVERY = 2.0  # seconds between progress saves
CANCEL_AGAIN = 0.1  # seconds before a stop or shutdown asks a run again (see Run.cancel)
DOWNGRADED = (
    "Perplexity answered with its anonymous model (turbo), not the one asked for, and says the "
    "linked session is signed out. Re-link in Settings."
)
RUNS: dict[int, Run] = {}  # this process's runs, by entry id


def group(entry_id: int) -> str:
    return f"entry-{entry_id}"


def control_group(entry_id: int) -> str:
    return f"run-{entry_id}"


def fragment(html: str) -> dict:
    return {"type": "entry.fragment", "html": html}


@dataclass
class Run(RunState):
    """A run as it streams (what is saved of it: outcome.RunState)."""

    answer: AnswerStream = field(init=False)
    stop_requested: bool = False
    finishing: bool = False
    sent: dict[str, Any] = field(init=False)  # what each fragment last showed
    stats: dict[str, int] = field(default_factory=lambda: {"updates": 0, "bytes": 0})
    seq: int = 0  # the number of the last update sent to the group (0: the new entry)
    models: dict = field(default_factory=dict)  # the catalogue, for model names
    _extracted: Any = None
    _shown: Any = None  # the snapshot the last update showed (a progress save also extracts)
    _flush: asyncio.TimerHandle | None = None
    _last_update: float = 0.0
    _last_event: float = 0.0
    _trailing: asyncio.Future | None = None
    _saving: asyncio.Future | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _syncs: list[str] = field(default_factory=list)
    _searched: tuple[Credential, dict] | None = None  # recorded at the end (outcome.finish_run)
    _catalogue_due: bool = False
    client: Any = None  # the upstream client while the answer streams (to answer a question)
    rejoin: str = ""  # the backend_uuid of a run lost by a restart, rejoined rather than asked
    clarified: set[str] = field(default_factory=set)  # clarifying questions answered or skipped
    clarifying: asyncio.Future | None = None  # answers on their way to Perplexity (questions.py)
    report_rendered_at: float = 0.0  # when the growing report was last sent (parts.py)
    _updated: asyncio.Event | None = None  # set by the next update (updated())

    @property
    def asked(self) -> str:
        """The model asked for, as the downgrade check compares it: quick mode is answered by
        `turbo` whatever the model preference says."""
        options = self.request.options
        return ANONYMOUS_MODEL if options.mode == "auto" else options.model

    def __post_init__(self) -> None:
        self.answer = AnswerStream(self.entry_id)
        self.downloads = images.Downloads(self.entry_id, on_saved=self._image_saved, user_id=self.user.pk)
        self.sent = parts.part_keys(self)  # the new entry, as the page already shows it
        self.layer = get_channel_layer()

    async def send(self, html: str) -> None:
        """The next numbered update to every page watching the entry."""
        if html:
            self.seq += 1
            html = mark(self.entry_id, self.seq) + html
            self.stats["updates"] += 1
            self.stats["bytes"] += len(html.encode())
            await sockets.publish(self.layer.group_send, group(self.entry_id), fragment(html))

    def _flush_due(self) -> float:
        return max(self._last_update + UPDATE_EVERY, self._last_event + QUIET)

    def _flush_now(self) -> None:
        """The trailing update: it waits for a quiet moment, so it does not go out just before
        the next event (which would then wait a whole interval) while the stream is flowing."""
        due = self._flush_due()
        loop = asyncio.get_running_loop()
        if loop.time() < due:
            self._flush = loop.call_at(due, self._flush_now)
            return
        self._flush = None
        self._trailing = asyncio.ensure_future(self.update())

    def _cancel_flush(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None

    def _refresh_result(self) -> None:
        """Extract the result from the latest snapshot (at most once per snapshot)."""
        if self.snapshot is not None and self.snapshot is not self._extracted:
            self._extracted = self.snapshot
            self.result = extract(self.snapshot, asked=self.asked)
            questions.noticed(self)  # what it asks is kept with the entry
            if self.first_text_ms is None and self.result.answer:
                self.first_text_ms = int((time.monotonic() - self.started) * 1000)
            self.downloads.start(self.result.images)  # generated images: their links expire

    def _image_saved(self) -> None:
        if not self.finishing:  # show it now (the final update will anyway)
            self.update_soon()

    def update_soon(self) -> None:
        self._trailing = asyncio.ensure_future(self.update())

    async def update(self, final: bool = False) -> None:
        async with self._lock:
            self._last_update = time.monotonic()
            if not final:
                self._refresh_result()
                self._shown = self.snapshot
            if self._syncs:  # newcomers get the whole state first, then the updates everyone gets
                state = mark(self.entry_id, self.seq, "full") + parts.full_state(self)
                syncs, self._syncs = self._syncs, []
                for channel in syncs:
                    await sockets.publish(self.layer.send, channel, fragment(state))
            await self.send("".join(parts.changed_parts(self, final=final)))
        if self._updated is not None:  # in-process followers (updated())
            self._updated, event = None, self._updated
            event.set()

    async def updated(self) -> None:
        """Wait for the next update, or the end: for search/api, which follows answers in-process."""
        if not (self.ended or self.main.done()):
            self._updated = self._updated or asyncio.Event()
            waiter = asyncio.ensure_future(self._updated.wait())
            await asyncio.wait([waiter, self.main], return_when="FIRST_COMPLETED")

    def cancel(self, stop: bool) -> None:
        """End the run and keep what arrived: as stopped (stop) or as interrupted (the server is
        stopping). The task is asked again until it is saving, since a library can swallow a
        cancellation (asyncio.wait_for does in Python 3.11 when its call ends at that moment;
        seen with the Redis layer)."""
        self.stop_requested = self.stop_requested or stop
        if self.finishing or self.main.done():
            return
        self.main.cancel()
        asyncio.get_running_loop().call_later(CANCEL_AGAIN, self.cancel, stop)

    # --- the run -------------------------------------------------------------------------------

    async def listen(self, channel: str) -> None:
        while True:
            message = await self.layer.receive(channel)
            if message.get("type") == "run.stop":
                self.cancel(stop=True)
            elif message.get("type") == "run.clarify":
                questions.answer(self, [str(a) for a in message.get("answers") or []])
            elif message.get("type") == "run.sync" and message.get("reply_to"):
                self.sync(message["reply_to"])

    def sync(self, reply_to: str) -> None:
        """Send the whole current state to the channel `reply_to`, at once (with an update)."""
        self._syncs.append(reply_to)
        self.update_soon()

    async def execute(self) -> None:
        channel = listener = None
        try:
            channel = await self.layer.new_channel()
            await self.layer.group_add(control_group(self.entry_id), channel)
            listener = asyncio.create_task(self.listen(channel))
        except sockets.LAYER_FAULTS as error:  # Redis away: the run goes on, stopped here only
            log.warning("entry %s runs without its control channel (%s)", self.entry_id, error)
        try:
            await self.stream()
            try:
                await self.refresh_catalogue()
            except Exception:  # the answer is saved; a catalogue refresh never undoes that
                log.exception("model catalogue refresh after entry %s failed", self.entry_id)
        finally:
            RUNS.pop(self.entry_id, None)
            if not RUNS:  # the last answer ended: collect garbage while nothing arrives
                collector.when_idle(lambda: bool(RUNS))
            if listener is not None:
                await self._stop_listening(channel, listener)

    async def _stop_listening(self, channel: str, listener: asyncio.Task) -> None:
        """Leave the control group; the listener ends (cancelled: the pub/sub layer then drops
        its channel)."""
        with contextlib.suppress(*sockets.LAYER_FAULTS):
            await self.layer.group_discard(control_group(self.entry_id), channel)
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, *sockets.LAYER_FAULTS):
            await listener

    async def stream(self) -> None:
        last_save = self.started  # the entry was written as running a moment ago
        ids_saved = False
        stream = None
        try:
            if self.credential is None or not self.models:
                self.models, self.credential = await database_sync_to_async(asking.run_needs)(self.user)
            credential = self.credential
            async with make_client(
                cookies=credential.cookies,
                user_agent=credential.user_agent,
                account_id=credential.account.account_id,
            ) as client:
                self.client = client
                stream = upstream.open_stream(self, client, credential)  # a follow-up outlives its thread
                async with stream:
                    async for snapshot in stream:
                        # per event only this; extraction and rendering wait for the next update
                        self.snapshot = snapshot
                        if not ids_saved and snapshot.top.get("backend_uuid"):
                            # its ids, saved at once (or after the save in flight): a restart rejoins the run
                            ids_saved = self.save_progress()
                            last_save = time.monotonic()
                        if self.first_byte_ms is None and stream.first_byte is not None:
                            self.first_byte_ms = int((stream.first_byte - self.started) * 1000)
                        now = self._last_event = time.monotonic()
                        due = now - self._last_update >= UPDATE_EVERY  # fresh text goes out at once
                        if not due and self.first_text_ms is None:  # and so do the first words
                            due = has_answer(snapshot)
                        if not due:  # and the last ones, as soon as Perplexity says they are
                            due = text_complete(snapshot)
                        if due:
                            self._cancel_flush()
                            await self.update()
                        elif self._flush is None:  # a trailing update, in case the stream pauses here
                            loop = asyncio.get_running_loop()
                            self._flush = loop.call_at(self._flush_due(), self._flush_now)
                        if now - last_save >= SAVE_EVERY:
                            last_save = now
                            self.save_progress()
                self._cancel_flush()
                ended = extract(stream.snapshot, ended=stream.ended, asked=self.asked)
                # Words not shown yet go out now, not after the end's database work (which can
                # queue behind others'). The rest of the end (related questions, the outcome)
                # goes out with the final update.
                if self.snapshot is not self._shown and not self.answer.shows(ended.answer):
                    await self.update()
                self.drift = note_drift(self.entry_id, stream.snapshot)
                if ended.downgraded:  # a suspicion only: the session itself says (docs/protocol.md §6.7)
                    ended = replace(ended, downgraded=await signed_out(client, credential))
                    if ended.downgraded:
                        await database_sync_to_async(mark_auth_problem)(
                            credential.account, AuthError(DOWNGRADED)
                        )
                self.result = ended
                self.status, self.error = self.result.status, self.result.error or ""
                if self.result.status == "truncated" and stream.cut:
                    retry = "" if stream.capped else " What arrived is kept; retry to get the rest."
                    self.error = f"{stream.cut}{retry}"
                if format_changed(ended, stream.snapshot):
                    self.status, self.error = Entry.Status.FAILED, FORMAT_CHANGED
                if self.result.downgraded:
                    self.error = DOWNGRADED
                self._searched = (credential, dict(client.cookies))
        except asyncio.CancelledError:
            self._partial(stream)
            if not self.stop_requested:  # the server is shutting down
                self.status = Entry.Status.INTERRUPTED
                self.error = "The server stopped while this answer was arriving; what had arrived is kept."
                await self.finish()
                raise
            self.status, self.error = Entry.Status.STOPPED, "Stopped. What had arrived is kept."
            terminate.after_stop(self)  # and Perplexity stops too (in the background, bounded)
        except Exception as exc:
            self._partial(stream)
            self.status, self.error = failure(exc, self.entry_id)
            session = self.credential and self.credential.kind != "api_key"
            if isinstance(exc, AuthError | ChallengeError) and session:  # an API key is not the link
                await database_sync_to_async(mark_auth_problem)(self.credential.account, exc)
        await self.finish()

    async def refresh_catalogue(self) -> None:
        """The model catalogue is refreshed daily, after a search that used a session (the end's
        trip to the database said whether it is due)."""
        credential = self.credential
        if not self._catalogue_due or credential is None:
            return
        async with make_client(cookies=credential.cookies, user_agent=credential.user_agent) as client:
            await refresh_catalogue(client)

    def _partial(self, stream) -> None:
        if stream is not None and stream.snapshot.events:  # else what was saved stays
            self.result = extract(stream.snapshot, asked=self.asked)

    async def finish(self) -> None:
        self.finishing = True  # from here on the run is saving: never cancel it again
        self._cancel_flush()
        self.downloads.start(self.result.images if self.result else [])  # with the last events
        await self.downloads.finish()
        if self._saving is not None:  # the final save goes after it (a failure was logged)
            await asyncio.wait([self._saving])
        self._catalogue_due = await database_sync_to_async(outcome.finish_run)(self, self._searched)
        await self.update(final=True)
        await rendered.keep(self.entry_id)  # its page loads read the HTML from here on

    def save_progress(self) -> bool:
        """Save what arrived so far, beside the stream: the stream never waits for the database
        (at 50 starts at once its one thread has a queue, and a stream waiting in it stalls).
        At most one progress save is in flight (False: one was); the final save waits for it."""
        if self._saving is not None and not self._saving.done():
            return False
        self._refresh_result()
        self._saving = asyncio.ensure_future(database_sync_to_async(outcome.save_run)(self, False))
        self._saving.add_done_callback(self._saved)
        return True

    def _saved(self, task: asyncio.Future) -> None:
        if not task.cancelled() and task.exception() is not None:  # the final save writes it all
            log.error("progress save for entry %s failed", self.entry_id, exc_info=task.exception())


def launch(
    entry: Entry,
    user,
    request: AskRequest,
    models: dict | None = None,
    credential: Credential | None = None,
    rejoin: bool = False,
) -> Run:
    """Start the run for a saved entry as a task of this process's event loop; `rejoin`: the
    entry's run was lost (a restart) and goes on from Perplexity's side (docs/protocol.md §9.1)."""
    run = Run(
        entry.pk,
        user,
        request,
        thread_id=entry.thread_id,
        credential=credential,
        models=models or {},
        files=tuple(getattr(entry, "attachment_list", None) or ()),  # asking.build_request read them
        place=getattr(entry, "place", None),  # among its turn's versions (search/versions.py)
    )
    if rejoin:
        run.rejoin = entry.backend_uuid
        run.result = outcome.saved_result(entry)  # kept if Perplexity no longer has the run
        run.clarifications = {r["key"]: r for r in entry.clarifications if r.get("key")}
        run.answer.resync = True  # the page shows the saved part: the first update sends it all
    RUNS[entry.pk] = run
    liveness.keep_watch(RUNS, rejoin_lost)  # its row is swept if the run dies without saving its end
    # A fresh context: the request or socket that started the run may end first, and with it
    # the executor asgiref would otherwise use for this task's database calls.
    run.main = asyncio.get_running_loop().create_task(
        run.execute(), name=f"search-{entry.pk}", context=contextvars.Context()
    )
    run.main.add_done_callback(_ended)
    return run


def rejoin_lost(entry: Entry, request: AskRequest) -> Run:
    """Go on with an answer whose run was lost (a restart, a killed process): Perplexity keeps
    working on it, and rejoining gets what it has and the rest (search.live.liveness claims it)."""
    return launch(entry, entry.user, request, rejoin=True)


def _ended(task: asyncio.Task) -> None:
    """A run whose end itself failed (its row is swept by search.live.liveness): said in the log."""
    if not task.cancelled() and task.exception() is not None:
        log.error("search run %s ended with an error", task.get_name(), exc_info=task.exception())


async def shutdown() -> None:
    """Server stopping: cancel every run; each saves what arrived as interrupted."""
    runs = list(RUNS.values())
    if runs:
        log.info("server stopping: saving %d running answer(s) as interrupted", len(runs))
    for run in runs:
        run.cancel(stop=False)
    await asyncio.gather(*(run.main for run in runs), return_exceptions=True)
