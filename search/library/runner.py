"""A library job running: the listing paged to its end, then each listed thread read and saved a
page at a time (a thread of any length is never held whole), then (after a complete listing)
threads no longer listed checked for deletion.

The job belongs to the server: a task of the process the keeper started it in (keeper.py). Its
progress is in its row as it goes, so a restart resumes it where it stopped: the listing from its
offset, the fetching with the threads still `pending`. It paces itself (settings.LIBRARY_PACE
between two requests), waits for searches, backs off on 429, and stops with a sentence on a
refused session or a Cloudflare check, keeping what it has. One thread never ends the job.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async as db
from channels.layers import get_channel_layer
from django.conf import settings

from accounts.services import make_client
from accounts.services.link import mark_auth_problem
from pplxweb import sockets
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import (
    AuthError,
    ChallengeError,
    NetworkError,
    PerplexityError,
    ProtocolError,
    RateLimited,
    ThreadGone,
    Timeout,
    UpstreamError,
)
from pplxweb.perplexity.library import (
    LIST_LIMIT,
    PAGE_LIMIT,
    SMALLER_PAGES,
    TooLarge,
    Turn,
    fetch_report,
    fresh_asset_url,
    library_account,
    list_threads,
    parse_listed,
    parse_turn,
    report_url_allowed,
    thread_page,
)
from search import images, storage
from search.library import display, jobs, store
from search.models import LibraryJob, LibraryThread

log = logging.getLogger(__name__)
MAX_LISTED = 50_000  # threads; a listing that goes on past this is cut with a sentence
MAX_TURNS = 10_000  # turns read of one thread; the rest is left out with a sentence
MAX_PAGES = 2 * MAX_TURNS // 10  # pages of one thread (fewer turns a page when pages are large)
BACKOFF = (30, 60, 120, 240, 300)  # seconds after a 429 without Retry-After
RATE_LIMITS = 6  # 429s in a row before the job stops
RETRIES = 3  # for a server error or a dropped connection
EMPTY_TRIES, EMPTY_WAIT = 3, 1.5  # an empty first listing page is asked for again before it is believed
PROGRESS_EVERY = 1.0  # seconds between progress updates to the page (a render costs ~10-40 ms)
KEPT = "What was imported so far is kept; start again to go on."


def group(user_id: int) -> str:
    return f"library-{user_id}"


class Stop(Exception):
    """The job stops here with this sentence (state `stopped`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Cancelled(Exception):
    pass


ClientFactory = Callable[..., PerplexityClient]


class JobRun:
    def __init__(self, job: LibraryJob, client_factory: ClientFactory | None = None) -> None:
        self.job = job
        self.user = job.user
        self.pace = settings.LIBRARY_PACE
        self.client_factory = client_factory or make_client
        self.client: PerplexityClient | None = None
        self.last_request = 0.0
        self.last_progress = 0.0
        self.written = 0  # turns of the thread being read that were saved so far
        self.layer = get_channel_layer()

    # --- the job ---------------------------------------------------------------------------------

    async def run(self) -> None:
        account = await db(jobs.own_account)(self.user)
        state, error = LibraryJob.State.DONE, ""
        try:
            if account is None:
                raise Stop("This account is no longer linked to Perplexity, so the import stopped.")
            data = account.session_data()
            cookies = dict(data.get("cookies") or {})
            self.shared = account.shared
            async with self.client_factory(cookies=cookies, user_agent=data.get("user_agent", "")) as client:
                self.client = client
                try:
                    await self.work()
                finally:
                    await db(jobs.keep_cookies)(account, cookies, dict(client.cookies))
        except Cancelled:
            state, error = LibraryJob.State.CANCELLED, f"Cancelled. {KEPT}"
        except Stop as exc:
            state, error = LibraryJob.State.STOPPED, exc.message
        except (AuthError, ChallengeError) as exc:
            await db(mark_auth_problem)(account, exc)
            state, error = LibraryJob.State.STOPPED, f"{exc.message} {KEPT}"
        except PerplexityError as exc:
            state, error = LibraryJob.State.STOPPED, f"{exc.message} {KEPT}"
        except asyncio.CancelledError:  # the server is stopping: the next start resumes the job
            raise
        except (LibraryJob.DoesNotExist, LibraryThread.DoesNotExist):  # the person was removed,
            return  # and their job and its rows with them (search.members)
        except Exception:
            log.exception("library job %s failed", self.job.pk)
            state, error = LibraryJob.State.STOPPED, f"pplxweb hit an error it did not expect. {KEPT}"
        await db(jobs.finish)(self.job.pk, state, error)
        await self.progress(force=True)

    async def work(self) -> None:
        await self.request(library_account)
        job = await db(jobs.reload)(self.job.pk)
        if job.phase == "listing":
            await self.listing(job)
        while row := await db(jobs.next_pending)(self.user.pk):
            await self.fetch(row)
            await self.progress()
        job = await db(jobs.reload)(self.job.pk)
        if job.walked:
            for row in await db(jobs.missing)(job):
                await self.confirm_gone(row)

    # --- upstream, paced ------------------------------------------------------------------------

    async def request(self, call: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """One upstream call: after the pace, never beside a search, retried on 429 and 5xx."""
        limited = failures = 0
        while True:
            await self.wait(self.last_request + self.pace - time.monotonic())
            verdict = await db(jobs.before_request)(self.job.pk, self.user.pk, self.shared)
            if verdict == jobs.CANCEL:
                raise Cancelled
            if verdict == jobs.UNLINKED:
                raise Stop(f"The Perplexity account was unlinked, so the import stopped. {KEPT}")
            if verdict == jobs.WAIT:  # searches first
                await self.wait(1.0)
                continue
            self.last_request = time.monotonic()
            try:
                return await call(self.client, *args)
            except RateLimited as exc:
                limited += 1
                if limited >= RATE_LIMITS:
                    raise Stop(f"Perplexity kept answering 'too many requests'. {KEPT}") from None
                await self.wait(exc.retry_after or BACKOFF[min(limited, len(BACKOFF)) - 1])
            except (UpstreamError, NetworkError, Timeout):
                failures += 1
                if failures >= RETRIES:
                    raise
                await self.wait(2.0**failures)

    async def wait(self, seconds: float) -> None:
        """Sleep, a second at a time, saying the job is alive and heeding a Cancel."""
        if seconds <= 0:
            return
        deadline = time.monotonic() + seconds
        while True:
            if await db(jobs.cancelled)(self.job.pk):
                raise Cancelled
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 1.0))
            await db(jobs.count)(self.job.pk)

    # --- the listing ----------------------------------------------------------------------------

    async def listing(self, job: LibraryJob) -> None:
        offset, empty = job.offset, 0
        while True:
            if offset >= MAX_LISTED:
                note = (
                    f"The listing did not end after {MAX_LISTED:,} threads; pplxweb stopped reading it there."
                )
                await db(jobs.listing_done)(job, False, note)
                return
            page = await self.request(list_threads, offset)
            if offset == 0 and not page:
                empty += 1
                if empty < EMPTY_TRIES:  # a session still settling upstream answers [] at first
                    await self.wait(EMPTY_WAIT)
                    continue
                await self.empty_listing(job)
                return
            items = [item for item in map(parse_listed, page) if item is not None]
            counts = await db(jobs.record_page)(job, items)
            if items and counts[jobs.SEEN] == len(items):
                note = f"Perplexity's listing repeated itself after {offset:,} threads; pplxweb stopped."
                await db(jobs.listing_done)(job, False, note)
                return
            offset += len(page)
            await self.progress()
            if len(page) < LIST_LIMIT:
                await db(jobs.listing_done)(job, True)
                return

    async def empty_listing(self, job: LibraryJob) -> None:
        """An empty first page after the session was checked: an empty library, unless threads
        were imported before (then it is Perplexity's `200 []` of a half-valid session)."""
        known = await db(LibraryThread.objects.filter(user=self.user).count)()
        if known:
            raise Stop(
                f"Perplexity listed no threads, although {known:,} were imported before; nothing was "
                "changed. Its session may be only half valid: re-link in Settings and sync again."
            )
        note = (
            f"Perplexity listed no threads for this account ({EMPTY_TRIES} times, with the session "
            "confirmed). If your library there is not empty, re-link in Settings and import again."
        )
        await db(jobs.listing_done)(job, True, note)

    # --- one thread -----------------------------------------------------------------------------

    async def fetch(self, row: LibraryThread) -> None:
        title = row.title or row.slug
        try:
            already, note = await self.pages(row)
            done = await db(store.finish)(row.pk, already, note)
        except ThreadGone as exc:  # one imported before stays, marked deleted on Perplexity
            state = LibraryThread.State.DONE if row.thread_id else LibraryThread.State.SKIPPED
            await db(store.mark)(row.pk, state, exc.message, deleted=bool(row.thread_id))
            await db(jobs.count)(self.job.pk, skipped=1, deleted=int(bool(row.thread_id)))
            await db(jobs.add_note)(self.job.pk, title, exc.message)
            return
        except (AuthError, ChallengeError, Stop, Cancelled, LibraryThread.DoesNotExist):
            raise
        except PerplexityError as exc:
            await self.failed(row, title, exc.message)
            return
        except Exception:
            log.exception("library job %s: thread %s failed", self.job.pk, row.pk)
            await self.failed(row, title, "pplxweb hit an error reading it (the server log says more).")
            return
        if done.thread_id is None:
            await db(jobs.count)(self.job.pk, skipped=1)
            await db(jobs.add_note)(self.job.pk, title, done.reason)
            return
        await db(jobs.count)(self.job.pk, fetched=1)
        if note:
            await db(jobs.add_note)(self.job.pk, title, note)

    async def failed(self, row: LibraryThread, title: str, reason: str) -> None:
        """The thread stops here; what of it was saved stays, and the next sync reads it again
        (the turns already here are not written twice)."""
        if self.written:
            reason = f"{reason} {self.written:,} of its turns were imported; the next sync tries the rest."
        await db(store.mark)(row.pk, LibraryThread.State.FAILED, reason)
        await db(jobs.count)(self.job.pk, failed=1)
        await db(jobs.add_note)(self.job.pk, title, reason)

    async def pages(self, row: LibraryThread) -> tuple[int, str]:
        """Read the thread page after page by cursor, each saved (and its images kept) before the
        next is asked for, so one page at a time is held: (turns here before, a note when it was
        not read to its end). A cursor that does not move is an error, not a loop."""
        cursor, seen, limit = "", set(), PAGE_LIMIT
        already = read = self.written = 0
        for _ in range(MAX_PAGES):
            try:
                page = await self.request(thread_page, row.slug, cursor, limit)
            except TooLarge:
                smaller = [size for size in SMALLER_PAGES if size < limit]
                if not smaller:
                    raise
                limit = smaller[0]
                continue
            turns = [parse_turn(entry) for entry in page.entries]
            more, cursor = page.has_next, page.next_cursor
            del page  # the page's JSON goes before the next is read
            await db(self.room)()
            saved = await db(store.save_page)(row.pk, turns, await self.reports(turns))
            already, read = already + saved.already, read + len(turns)
            self.written += len(saved.new)
            await db(jobs.count)(self.job.pk, new_entries=len(saved.new))
            await self.keep_images(saved.new)
            del turns, saved
            if not more:
                return already, ""
            if not cursor or cursor in seen:
                raise ProtocolError("Perplexity's pages of this thread did not move on; it was left out.")
            if read >= MAX_TURNS:
                break
            seen.add(cursor)
        return already, f"It is longer than {MAX_TURNS:,} turns; only its first {read:,} were imported."

    def room(self) -> None:
        """Stop when the person's storage quota is full (their imports count towards it)."""
        now = storage.usage(self.user.pk)
        if now.total >= now.quota:
            raise Stop(f"{storage.full_sentence('Importing more', now)} The import stopped. {KEPT}")

    async def keep_images(self, written: list[tuple[int, Turn]]) -> None:
        for entry_id, turn in written:
            if turn.images:
                records = [
                    await images.keep(entry_id, n, i, self.user.pk)
                    for n, i in enumerate(turn.images[: images.MAX_PER_ENTRY])
                ]
                await db(store.save_images)(entry_id, records)

    async def reports(self, turns: list[Turn]) -> dict[str, str]:
        """Research reports kept as files: their Markdown, with a fresh link if the stored one expired."""
        found: dict[str, str] = {}
        for turn in turns:
            if turn.report or turn.report_asset is None:
                continue
            uuid, url = turn.report_asset
            text = await self.report_at(url)
            if text is None and uuid:
                text = await self.report_at(await self.request(fresh_asset_url, uuid))
            if text:
                found[turn.backend_uuid] = text
        return found

    async def report_at(self, url: str) -> str | None:
        if not url or not report_url_allowed(url, settings.PERPLEXITY_URL):
            return None
        return await self.request(fetch_report, url)

    async def confirm_gone(self, row: LibraryThread) -> None:
        """A thread a complete listing no longer shows is marked deleted only if Perplexity says so."""
        try:
            await self.request(thread_page, row.slug)
        except ThreadGone as exc:
            await db(store.mark)(row.pk, LibraryThread.State.DONE, exc.message, deleted=True)
            await db(jobs.count)(self.job.pk, deleted=1)
        except (AuthError, ChallengeError, Stop, Cancelled):
            raise
        except PerplexityError:
            return  # not known to be gone: it stays as it is

    # --- the page -------------------------------------------------------------------------------

    async def progress(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_progress < PROGRESS_EVERY:
            return
        self.last_progress = now
        html = await db(display.fragment)(self.user)
        message = {"type": "library.fragment", "html": html}
        await sockets.publish(self.layer.group_send, group(self.user.pk), message)


JOBS: dict[int, asyncio.Task] = {}


def launch(job_id: int, client_factory: ClientFactory | None = None) -> asyncio.Task:
    """Run a claimed job as a task of this process's event loop (a fresh context: the request
    that led to it may end first, and with it the executor its database calls would use)."""

    async def go() -> None:
        try:
            job = await db(jobs.reload)(job_id)
            await JobRun(job, client_factory).run()
        except LibraryJob.DoesNotExist:  # removed with its person before it began
            return
        finally:
            JOBS.pop(job_id, None)

    task = asyncio.get_running_loop().create_task(
        go(), name=f"library-{job_id}", context=contextvars.Context()
    )
    JOBS[job_id] = task
    return task
