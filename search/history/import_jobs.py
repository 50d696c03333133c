"""An import is one recorded job: it completes, or it is removed whole.

The job row is written before the first conversation and every thread the import writes points
at it, so an import that stops half-way (a refusal, an error, the server killed) leaves nothing
behind: a refusal or an error removes its threads at once, and a server stopped mid-import
removes them at its next start (sweep). The person is told on their next History page. One
import runs at a time in a process, and one per person anywhere: an import is mostly CPU, and
several at once would slow everyone's pages.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from search import images
from search.live.liveness import pid_alive
from search.models import RUNNER, Entry, ImportJob, Thread

log = logging.getLogger(__name__)
STALE_AFTER = timedelta(minutes=2)  # a job writes its heartbeat with every batch (seconds apart)
BUSY = "Another import is running on this server; try again when it has finished (nothing was imported)."
YOURS_BUSY = "An import of yours is still running; wait for it to finish (nothing was imported)."
GONE = "Your account was removed from this pplxweb while the file was imported; nothing was imported."
REMOVED = (
    "An import of yours was cut short when the server stopped, so everything it had written was "
    "removed again. Import the file again."
)
_one_at_a_time = threading.Lock()
SHARE = 0.35  # of the interpreter an import may hold while others' requests want it
SLICE = 0.01  # seconds of work between two pauses


class Pacer:
    """Keeps an import to about SHARE of the time: after every SLICE of work it sleeps. An
    import is pure Python work, and every request of this process waits for the same interpreter
    lock: without pauses three people's pages slowed 6x while one imported a large export."""

    def __init__(self) -> None:
        self.since = time.perf_counter()

    def tick(self) -> None:
        worked = time.perf_counter() - self.since
        if worked >= SLICE:
            time.sleep(worked * (1 - SHARE) / SHARE)
            self.since = time.perf_counter()


def begin(user) -> ImportJob | str:
    """The job for a new import by `user`, or a sentence saying why it cannot start now. The
    caller must end() it (and hold nothing else: the process's one slot is taken)."""
    if not _one_at_a_time.acquire(blocking=False):
        return BUSY
    try:
        with transaction.atomic():
            running = ImportJob.objects.select_for_update().filter(user=user, state=ImportJob.State.RUNNING)
            if any(not _dead(job, at_start=False) for job in running):
                _one_at_a_time.release()
                return YOURS_BUSY
            return ImportJob.objects.create(user=user, runner=RUNNER, heartbeat=timezone.now())
    except BaseException:
        _one_at_a_time.release()
        raise


def held(job: ImportJob) -> bool:
    """Inside a batch's transaction: lock the job's row, so that removing its person waits for
    the batch (and then removes what it wrote), or the batch finds the job gone (False)."""
    return (
        ImportJob.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True).first()
        is not None
    )


def beat(job: ImportJob, imported: int, skipped: int) -> None:
    ImportJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now(), imported=imported, skipped=skipped)


def end(job: ImportJob, imported: int = 0, skipped: int = 0, ok: bool = False) -> None:
    """Done (ok), or removed whole; the process's slot is free again either way."""
    try:
        if ok:
            ImportJob.objects.filter(pk=job.pk).update(
                state=ImportJob.State.DONE, heartbeat=timezone.now(), imported=imported, skipped=skipped
            )
        else:
            remove(job)
            ImportJob.objects.filter(pk=job.pk).delete()  # the person saw the refusal itself
    finally:
        _one_at_a_time.release()


def remove(job: ImportJob, sweep: bool = True) -> int:
    """Delete the threads (their entries, their images) an import wrote, and the entries it put
    back into conversations that were here. Returns how many threads. `sweep`: the image folders
    and files of what went are removed now (else the caller sweeps, after its transaction)."""
    removed = 0
    while ids := list(Thread.objects.filter(import_job=job).values_list("pk", flat=True)[:500]):
        Thread.objects.filter(pk__in=ids).delete()  # entries go with them
        removed += len(ids)
    Entry.objects.filter(import_job=job).delete()
    if sweep:
        sweep_files()
    return removed


def sweep_files() -> None:
    """The image folders and kept files of entries that are gone."""
    images.sweep()
    from search import attachments  # (it reads the models, as this module does)

    attachments.sweep()


def sweep(at_start: bool = False) -> int:
    """Remove whole the imports whose process is gone (at start: any earlier process of this
    machine); they stay listed as removed until their person has been told. Returns how many."""
    swept = 0
    for job in ImportJob.objects.filter(state=ImportJob.State.RUNNING):
        if _dead(job, at_start):
            threads = remove(job)
            ImportJob.objects.filter(pk=job.pk).update(state=ImportJob.State.REMOVED)
            log.warning("import %s cut short by a stop: its %d conversation(s) were removed", job.pk, threads)
            swept += 1
    return swept


def told(user) -> list[str]:
    """Sentences for the person about imports a stop removed (each said once)."""
    removed = ImportJob.objects.filter(user=user, state=ImportJob.State.REMOVED)
    if not removed.exists():  # the usual case: a read, no write
        return []
    removed.delete()
    return [REMOVED]


def _dead(job: ImportJob, at_start: bool) -> bool:
    host, _, pid = job.runner.rpartition(":")
    stale = job.heartbeat is None or timezone.now() - job.heartbeat > STALE_AFTER
    if job.runner == RUNNER:
        return False  # this process: its request is still running it
    if host == socket.gethostname() and pid.isdigit():
        return at_start or not pid_alive(int(pid)) or stale
    return stale
