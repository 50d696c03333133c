"""The library job's rows: who may start one, one at a time per person, the listing's bookkeeping,
claiming a job whose process died, and the daily automatic sync (all on the database thread)."""

from __future__ import annotations

import socket
from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import PerplexityAccount
from accounts.services.credentials import keep_rotated_cookies
from pplxweb.perplexity.library import Listed
from search.live.liveness import STALE_AFTER, pid_alive
from search.models import RUNNER, Entry, LibraryJob, LibrarySchedule, LibraryThread, Thread
from search.saving import clean

MAX_NOTES = 200  # threads named in a job's summary; the counts cover the rest
SEEN = "seen"  # what record_page says of a thread the job's listing already showed


class JobRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def own_account(user) -> PerplexityAccount | None:
    """The person's own linked session: the only one whose library they may import."""
    account = PerplexityAccount.objects.filter(user=user).first()
    return account if account is not None and account.linked else None


def current(user) -> LibraryJob | None:
    return LibraryJob.objects.filter(user=user).order_by("-started", "-pk").first()


def start(user, kind: str = LibraryJob.Kind.IMPORT, automatic: bool = False) -> LibraryJob:
    """A new job (the process's keeper starts it once woken: keeper.wake); JobRefused says why not."""
    if own_account(user) is None:
        raise JobRefused(
            "Link your own Perplexity account first: a library is imported only by the person it belongs to."
        )
    with transaction.atomic():
        # one at a time per person (SQLite: the write lock orders two clicks; PostgreSQL: the row lock)
        PerplexityAccount.objects.select_for_update().filter(user=user).first()
        if LibraryJob.objects.filter(user=user, state=LibraryJob.State.RUNNING).exists():
            raise JobRefused("An import of your library is already running; wait for it or cancel it.")
        if kind == LibraryJob.Kind.SYNC and not LibraryThread.objects.filter(user=user).exists():
            kind = LibraryJob.Kind.IMPORT  # nothing imported yet: a sync is the whole import
        # a keeper (keeper.py) claims it; a process without one runs it itself
        runner = "" if settings.LIBRARY_KEEPER else RUNNER
        return LibraryJob.objects.create(user=user, kind=kind, automatic=automatic, runner=runner)


def cancel(user) -> bool:
    return bool(
        LibraryJob.objects.filter(user=user, state=LibraryJob.State.RUNNING).update(cancel_requested=True)
    )


def cancelled(job_id: int) -> bool:
    return LibraryJob.objects.filter(pk=job_id, cancel_requested=True).exists()


GO, WAIT, CANCEL, UNLINKED = "go", "wait", "cancel", "unlinked"


def before_request(job_id: int, user_id: int, shared: bool) -> str:
    """Whether the job may send its next request now (one trip to the database per request):
    CANCEL when Cancel was pressed, UNLINKED once the account was unlinked, WAIT while a search
    runs that goes first (the person's own, or on a shared link anyone's), else GO, with the
    request counted."""
    if cancelled(job_id):
        return CANCEL
    if not PerplexityAccount.objects.filter(user=user_id, session__isnull=False).exclude(session="").exists():
        return UNLINKED  # Unlink erases the session at once: the job's copy goes unused from here
    running = Entry.objects.filter(status=Entry.Status.RUNNING)
    if (running if shared else running.filter(user=user_id)).exists():
        return WAIT
    count(job_id, requests=1)
    return GO


# --- the listing ----------------------------------------------------------------------------


UNSTORABLE = (
    "Perplexity listed it under an id or address with characters pplxweb cannot store (a NUL or a "
    "broken character), so it could not be fetched; it was left out."
)


def storable(items: list[Listed]) -> tuple[list[Listed], list[Listed]]:
    """(the listed threads cleaned as everything from upstream is, those whose key or slug
    cleaning would change: they could not be fetched or told apart, so they are left out)."""
    good, bad = [], []
    for item in items:
        if clean(item.key) != item.key or clean(item.slug) != item.slug:
            bad.append(item)
            continue
        good.append(
            replace(
                item,
                title=clean(item.title, 300),
                activity=clean(item.activity, 40),
                read_write_token=clean(item.read_write_token, 200),
            )
        )
    return good, bad


def record_page(job: LibraryJob, items: list[Listed]) -> dict[str, int]:
    """Note one listing page: new and changed threads become `pending`, renames are applied here,
    a thread this job already listed (a listing that repeats) is left alone; one that cannot be
    stored is left out with a note (the rest of the page is kept). Returns counts."""
    counts = {"new": 0, "changed": 0, "renamed": 0, "unchanged": 0, SEEN: 0}
    listed = len(items)
    items, unstorable = storable(items)
    for item in unstorable:
        add_note(job.pk, item.title or item.slug, UNSTORABLE)
    if unstorable:
        count(job.pk, skipped=len(unstorable))
    with transaction.atomic():
        known = {
            row.key: row
            for row in LibraryThread.objects.select_for_update().filter(
                user=job.user_id, key__in=[i.key for i in items]
            )
        }
        new: list[LibraryThread] = []
        seen: list[int] = []  # unchanged threads: only marked as listed, in one statement
        for item in items:
            row = known.get(item.key)
            if row is not None and row.seen_by == job.pk:
                counts[SEEN] += 1
                continue
            if row is None:
                row = LibraryThread(user_id=job.user_id, key=item.key, slug=item.slug, title=item.title)
                counts["new"] += 1
                new.append(row)
            else:
                verdict = _compare(row, item)
                counts[verdict] += 1
                if verdict == "unchanged" and row.slug == item.slug:
                    seen.append(row.pk)
                    row.seen_by = job.pk
                    continue
            if row.state == LibraryThread.State.PENDING:  # fetched next: what the listing says now
                row.activity, row.count, row.title = item.activity, item.count, item.title or row.title
            row.seen_by, row.slug = job.pk, item.slug
            if row.pk:
                row.save()
            known[item.key] = row
        LibraryThread.objects.bulk_create(new)
        LibraryThread.objects.filter(pk__in=seen).update(seen_by=job.pk)
        LibraryJob.objects.filter(pk=job.pk).update(
            offset=F("offset") + listed,
            listed=F("listed") + counts["new"] + counts["changed"] + counts["renamed"] + counts["unchanged"],
            unchanged=F("unchanged") + counts["unchanged"],
            heartbeat=timezone.now(),
        )
    return counts


def _compare(row: LibraryThread, item: Listed) -> str:
    """How a known thread changed; a rename is applied to its conversation here at once."""
    retry = row.state in (LibraryThread.State.PENDING, LibraryThread.State.FAILED) or row.deleted
    if retry or item.activity != row.activity or (item.count is not None and item.count != row.count):
        row.state, row.deleted = LibraryThread.State.PENDING, False
        return "changed"
    title = item.title
    if title and title != row.title:
        row.title = title
        if row.thread_id:
            Thread.objects.filter(pk=row.thread_id).update(title=title)
        return "renamed"
    return "unchanged"


def listing_done(job: LibraryJob, walked: bool, note: str = "") -> None:
    LibraryJob.objects.filter(pk=job.pk).update(phase="fetching", walked=walked)
    if note:
        add_note(job.pk, "The listing", note)


def next_pending(user_id: int) -> LibraryThread | None:
    return (
        LibraryThread.objects.filter(user=user_id, state=LibraryThread.State.PENDING).order_by("pk").first()
    )


def missing(job: LibraryJob) -> list[LibraryThread]:
    """Threads imported before that a complete listing no longer shows: deleted upstream?"""
    return list(
        LibraryThread.objects.filter(user=job.user_id, state=LibraryThread.State.DONE, deleted=False).exclude(
            seen_by=job.pk
        )
    )


def add_note(job_id: int, title: str, reason: str) -> None:
    job = LibraryJob.objects.get(pk=job_id)
    if len(job.notes) < MAX_NOTES:
        job.notes = [*job.notes, {"title": clean(title, 300), "reason": clean(reason, 300)}]
        job.save(update_fields=["notes"])


def count(job_id: int, **increments: int) -> None:
    LibraryJob.objects.filter(pk=job_id).update(
        heartbeat=timezone.now(), **{name: F(name) + n for name, n in increments.items()}
    )


def finish(job_id: int, state: str, error: str = "") -> None:
    LibraryJob.objects.filter(pk=job_id, state=LibraryJob.State.RUNNING).update(
        state=state, error=error[:2000], finished=timezone.now(), heartbeat=timezone.now()
    )


def reload(job_id: int) -> LibraryJob:
    return LibraryJob.objects.select_related("user").get(pk=job_id)


# --- claiming and scheduling (the keeper) ----------------------------------------------------


def orphans(running_here: set[int]) -> list[int]:
    """Running jobs no live process runs: new ones, and those whose process stopped (a restart)."""
    host = socket.gethostname()
    found = []
    for job in LibraryJob.objects.filter(state=LibraryJob.State.RUNNING).only("pk", "runner", "heartbeat"):
        if job.pk in running_here:
            continue
        runner_host, _, pid = job.runner.rpartition(":")
        if not job.runner or job.runner == RUNNER:
            gone = True
        elif runner_host == host and pid.isdigit():
            gone = not pid_alive(int(pid))
        else:
            gone = job.heartbeat is None or timezone.now() - job.heartbeat > STALE_AFTER
        if gone:
            found.append((job.pk, job.runner))
    return [pk for pk, runner in found if claim(pk, runner)]


def claim(job_id: int, runner: str) -> bool:
    return bool(
        LibraryJob.objects.filter(pk=job_id, runner=runner, state=LibraryJob.State.RUNNING).update(
            runner=RUNNER, heartbeat=timezone.now()
        )
    )


def due_syncs() -> int:
    """Start today's automatic syncs whose time has come; returns how many started."""
    now = timezone.localtime()
    started = 0
    for schedule in LibrarySchedule.objects.filter(enabled=True, at__lte=now.time()).exclude(
        last_run=now.date()
    ):
        LibrarySchedule.objects.filter(pk=schedule.pk).update(last_run=now.date())
        if not LibraryThread.objects.filter(user=schedule.user_id).exists():
            continue  # nothing imported yet: the first import is the person's choice
        try:
            start(schedule.user, LibraryJob.Kind.SYNC, automatic=True)
            started += 1
        except (JobRefused, IntegrityError):
            continue
    return started


def recently_heard(job: LibraryJob) -> bool:
    return job.heartbeat is not None and timezone.now() - job.heartbeat < timedelta(seconds=30)


def keep_cookies(account: PerplexityAccount, before: dict, after: dict) -> None:
    """The session's cookies as Perplexity left them, unless the account was unlinked meanwhile."""
    if PerplexityAccount.objects.filter(pk=account.pk, session__isnull=False).exclude(session="").exists():
        keep_rotated_cookies(account, before, after)
