"""Removing a household member (accounts.services.people manages people; their answers are this
app's): their history kept (their conversations move to the owner, marked "from NAME") or deleted
with them; either way nothing they had going is left half-written.

- Answers still arriving are marked stopped (what arrived is kept, or deleted with the rest) and
  their runs are told to stop once the removal is committed, wherever they run.
- A history file import of theirs that is running is removed whole, as a cut-short import is;
  its next batch finds its job gone and writes nothing (search.history.imports).
- Their Perplexity library import stops: its job and bookkeeping go with them, a page of a thread
  it was saving is saved whole before the removal or not at all (store.save_page is one
  transaction), and its next request finds the link gone.
- Their files go with the last row naming them, at once (files are shared by content:
  search.attachments.disk), their images with their entries.

Rows are locked in the order the writers take them (library rows, import jobs, then the person),
so on PostgreSQL a writer either finishes first and its rows are handled here, or waits and then
finds the person gone; on SQLite one transaction writes at a time anyway.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.services import member_of
from pplxweb import sockets
from search.attachments import disk
from search.history import import_jobs
from search.live import control
from search.models import Attachment, Entry, ImportJob, LibraryJob, LibraryThread, Thread

log = logging.getLogger(__name__)

STOPPED = "Stopped when {name} was removed from this pplxweb; what had arrived is kept."
BATCH = 500  # conversations deleted per statement (each statement's cascade is read into memory)


@dataclass(frozen=True)
class Removed:
    name: str
    conversations: int  # moved to the owner (kept) or deleted
    kept: bool
    running: list[int]  # their answers that were still arriving, now stopped


@dataclass(frozen=True)
class Holdings:
    """What a member has here, for the confirmation page."""

    conversations: int
    answers: int
    running: int  # answers still arriving
    library_import: bool  # their Perplexity library import is running
    file_import: bool  # an import of a history file is running


def holdings(person) -> Holdings:
    return Holdings(
        conversations=Thread.objects.filter(user=person).count(),
        answers=Entry.objects.filter(user=person).count(),
        running=Entry.objects.filter(user=person, status=Entry.Status.RUNNING).count(),
        library_import=LibraryJob.objects.filter(user=person, state=LibraryJob.State.RUNNING).exists(),
        file_import=ImportJob.objects.filter(user=person, state=ImportJob.State.RUNNING).exists(),
    )


def remove_member(owner, member_id: int, keep_history: bool) -> Removed | None:
    """Remove a household member of `owner` (never the owner), keeping their history for the
    owner or deleting it; None if there is no such member."""
    with transaction.atomic():
        member = member_of(owner, member_id)
        if member is None:
            return None
        name = member.get_username()
        conversations = holdings(member).conversations
        files = disk.stored_of_person(member.pk)  # read before their rows go or move
        running = let_go(member, owner if keep_history else None)
        member.delete()
    log.info("%s removed from the household (history %s)", name, "kept" if keep_history else "deleted")
    sockets.tell(member_id)  # their open pages' sockets close
    for entry_id in running:  # wherever it runs; Perplexity is told to stop too
        async_to_sync(control.stop)(entry_id)
    import_jobs.sweep_files()  # the images and files of what went with them
    disk.remove_stored(files)  # at once, those no row names now (the sweep leaves young files)
    return Removed(name, conversations, keep_history, running)


def let_go(person, keeper=None) -> list[int]:
    """Inside the transaction that deletes `person`: their history moves to `keeper` (each
    conversation marked with their name), or, without a keeper, is deleted. Returns the ids of
    their answers that were still arriving, whose runs are stopped once committed."""
    list(LibraryThread.objects.select_for_update().filter(user=person).values_list("pk"))
    imports = list(ImportJob.objects.select_for_update().filter(user=person, state=ImportJob.State.RUNNING))
    list(get_user_model().objects.select_for_update().filter(pk=person.pk).values_list("pk"))
    for job in imports:  # a file import cut short leaves nothing
        import_jobs.remove(job, sweep=False)
    arriving = Entry.objects.filter(user=person, status=Entry.Status.RUNNING)
    running = list(arriving.values_list("pk", flat=True))
    if keeper is None:
        while ids := list(Thread.objects.filter(user=person).values_list("pk", flat=True)[:BATCH]):
            Thread.objects.filter(pk__in=ids).delete()  # their entries and attached files' rows too
        return running
    name = person.get_username()
    Entry.objects.filter(pk__in=running).update(status=Entry.Status.STOPPED, error=STOPPED.format(name=name))
    Thread.objects.filter(user=person).update(user=keeper, kept_from=name)
    Entry.objects.filter(user=person).update(user=keeper)
    Attachment.objects.filter(user=person, entry__isnull=False).update(user=keeper)
    return running
